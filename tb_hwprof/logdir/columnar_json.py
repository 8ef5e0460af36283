"""A kernels file's columnar JSON (format 2, docs/FORMAT.md) read member by member, its numbers
straight into numpy arrays.

A kernels file is {"columns", "units", "rows", then "data", "delta", "dictionary" (objects of one
member per column), "constant", "sparse"}.  Parsed whole, a 1M-launch trace's ~60 MB of numbers
(timestamps' steps, durations, dictionary codes) became ~20 lists of a million Python numbers,
then arrays: ~0.8 s and a few hundred MB while the plugin first opened the run.  Here each
member's array is stepped over by its brackets (a numeric array ends at its first "]"; one with
strings is matched by _TEXT_ARRAY); a numeric array is parsed by numpy when it is plainly JSON
numbers and nulls, by orjson otherwise (whose error then names the damage).  A document unlike
the writer's layout is parsed whole by orjson.
"""
from __future__ import annotations

import re
from typing import Collection, Optional

import numpy as np
import orjson

from ..core.model import KERNEL_COLUMNS

_TEXT_ARRAY = re.compile(rb'\[(?:[^\]"]+|"[^"\\]*(?:\\.[^"\\]*)*")*\]', re.S)
# The kernels table's numeric columns: their "data" is read into arrays.
NUMERIC_KERNEL_COLUMNS = frozenset(c for c, spec in KERNEL_COLUMNS.items() if spec[1] in ("int", "float"))
_NUMBER_BYTES = b"0123456789,-+.eE"
# A "." JSON puts only between digits: next to any of these it is not a JSON number.
_LOOSE_POINTS = (b",.", b"-.", b".,", b".e", b".E", b"+.")


class _Every:
    """Every member's name (the steps of "delta" are all numbers)."""

    def __contains__(self, key) -> bool:
        return True


_EVERY = _Every()


def _array_end(raw: bytes, start: int) -> int:
    """The index after the JSON array of scalars starting at raw[start] ("[")."""
    end = raw.find(b"]", start)
    if end < 0:
        raise ValueError("unterminated array")
    if raw.find(b'"', start, end) < 0:  # numbers and nulls only: its first "]" closes it
        return end + 1
    match = _TEXT_ARRAY.match(raw, start)
    if match is None:
        raise ValueError("not an array of scalars")
    return match.end()


def _expect(raw: bytes, pos: int, text: bytes) -> int:
    if not raw.startswith(text, pos):
        raise ValueError(f"expected {text!r} at {pos}")
    return pos + len(text)


def _leading_zero(text: bytes) -> bool:
    """Whether a number in `text` (numbers and commas) starts with 0 and another digit; one pass
    of numpy over the bytes (a substring search per digit took ~0.1 s per million numbers)."""
    if text[:1] == b"0" and text[1:2].isdigit():
        return True
    a = np.frombuffer(text, dtype=np.uint8)
    if a.size < 3:
        return False
    after = a[2:]
    return bool(((a[1:-1] == ord("0")) & ((a[:-2] == ord(",")) | (a[:-2] == ord("-")))
                 & (after >= ord("0")) & (after <= ord("9"))).any())


def number_array(body: bytes) -> Optional[np.ndarray]:
    """The values of a JSON array of numbers (`body`: what is between its brackets) as int64, or as
    float64 where one has a fraction or an exponent or is null (NaN); None where the body is not
    plainly that (the caller parses it as JSON, which says what is wrong)."""
    if not body:
        return np.zeros(0, dtype=np.int64)
    bare = body.replace(b"null", b"") if b"n" in body else body
    if bare.translate(None, _NUMBER_BYTES) or b"+" in bare and bare.count(b"+") != bare.count(b"e+") + bare.count(b"E+"):
        return None
    if bare.endswith(b"-") or b"-," in bare or b"--" in bare:
        return None  # a sign alone, which numpy reads as 0
    if _leading_zero(bare):
        return None  # 007: not JSON (an exponent's 1e-05 is, and is left to orjson too)
    integers = bare is body and not any(c in body for c in (b".", b"e", b"E"))
    if not integers and (bare.startswith(b".") or bare.endswith(b".") or any(p in bare for p in _LOOSE_POINTS)):
        return None
    try:
        values = np.fromstring(body if integers else body.replace(b"null", b"nan"),
                               dtype=np.int64 if integers else np.float64, sep=",")
    except ValueError:  # an empty field, a sign alone, ...
        return None
    if values.size != body.count(b",") + 1:
        return None
    if integers and values.size and (values.max() == np.iinfo(np.int64).max or values.min() == np.iinfo(np.int64).min):
        return None  # saturated (past 64 bits), or at the edge: orjson tells
    return values


def _numbers(raw: bytes, start: int, end: int):
    """The array raw[start:end] ("[...]"): a numpy array where number_array reads it, else a list."""
    values = number_array(raw[start + 1:end - 1])
    return values if values is not None else orjson.loads(raw[start:end])


def _members(raw: bytes, pos: int, wanted: Optional[Collection[str]], dictionary: bool,
             numeric: Collection[str] = ()):
    """({key: value} of the wanted members (None: all) of the object at raw[pos] ("{"), index after
    it).  Dictionary codes, and the arrays of the members in `numeric`, come as numpy arrays."""
    pos = _expect(raw, pos, b"{")
    found = {}
    while raw.startswith(b'"', pos):
        colon = raw.index(b'":', pos + 1)
        key = orjson.loads(raw[pos:colon + 1])
        pos = colon + 2
        if dictionary:  # {"values":[strings],"codes":[numbers]}
            values = _expect(raw, pos, b'{"values":')
            codes = _expect(raw, _array_end(raw, values), b',"codes":')
            end = _array_end(raw, codes)
            if wanted is None or key in wanted:
                found[key] = {"values": orjson.loads(raw[values:codes - len(b',"codes":')]),
                              "codes": _numbers(raw, codes, end)}
            pos = _expect(raw, end, b"}")
        else:
            end = _array_end(raw, _expect(raw, pos, b"[") - 1)
            if wanted is None or key in wanted:
                found[key] = _numbers(raw, pos, end) if key in numeric else orjson.loads(raw[pos:end])
            pos = end
        if raw.startswith(b",", pos):
            pos += 1
    return found, _expect(raw, pos, b"}")


def read_columns(raw: bytes, wanted: Optional[Collection[str]] = None, numeric: Collection[str] = ()) -> dict:
    """The columnar document of a kernels file with only the `wanted` columns' values (None: all;
    the others' names stay in "columns"): steps, dictionary codes and the "data" of the `numeric`
    columns as numpy arrays.  The whole document, parsed by orjson, where its layout is not the
    writer's."""
    try:
        start = raw.index(b',"data":')
        doc = orjson.loads(raw[:start] + b"}")
        pos = start + len(b',"data":')
        doc["data"], pos = _members(raw, pos, wanted, False, numeric)
        doc["delta"], pos = _members(raw, _expect(raw, pos, b',"delta":'), wanted, False, _EVERY)
        doc["dictionary"], pos = _members(raw, _expect(raw, pos, b',"dictionary":'), wanted, True)
        pos = _expect(raw, pos, b',"constant":')
        doc.update(orjson.loads(b'{"constant":' + raw[pos:]))
        return doc
    except (ValueError, TypeError, KeyError):  # orjson.JSONDecodeError is a ValueError
        return orjson.loads(raw)


def read_kernels_doc(raw: bytes) -> dict:
    """A whole kernels file's document (read_columns), for the checks and the table."""
    return read_columns(raw, None, NUMERIC_KERNEL_COLUMNS)
