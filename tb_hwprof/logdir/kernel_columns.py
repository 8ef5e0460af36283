"""Only some columns of a run's kernels file, for readers that need few of its ~50 (compare).

A kernels file (format 2, tables.write_columnar_gz) is {"columns", "units", "rows", then "data",
"delta", "dictionary" (objects of one member per column), "constant", "sparse"}.  Compare reads
~16 of its ~50 columns; parsing all of a 1M-launch file (~140 MB of JSON) was half the time of
`tb-hwprof compare`.  The members of the others are stepped over by their brackets (a numeric
array ends at its first "]"; an array with strings is matched by _TEXT_ARRAY), and only the wanted
ones are parsed.  Anything unlike that layout is parsed whole.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import orjson
import pandas as pd

from ..core.errors import InputError
from ..core.model import KERNEL_COLUMNS
from . import columns, metadata, tables
from .reader import asset_dir
from .run_checks import REEXPORT

_TEXT_ARRAY = re.compile(rb'\[(?:[^\]"]+|"[^"\\]*(?:\\.[^"\\]*)*")*\]', re.S)


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


def _members(raw: bytes, pos: int, wanted: set, dictionary: bool):
    """({key: parsed value} of the wanted members of the object at raw[pos] ("{"), index after it)."""
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
            if key in wanted:
                found[key] = {"values": orjson.loads(raw[values:codes - len(b',"codes":')]),
                              "codes": orjson.loads(raw[codes:end])}
            pos = _expect(raw, end, b"}")
        else:
            end = _array_end(raw, _expect(raw, pos, b"[") - 1)
            if key in wanted:
                found[key] = orjson.loads(raw[pos:end])
            pos = end
        if raw.startswith(b",", pos):
            pos += 1
    return found, _expect(raw, pos, b"}")


def read_selected_columns(raw: bytes, wanted: set) -> dict:
    """The columnar document of a kernels file holding only the `wanted` columns' values (the
    others' names stay in "columns"); the whole document where its layout is not the writer's."""
    try:
        start = raw.index(b',"data":')
        doc = orjson.loads(raw[:start] + b"}")
        pos = start + len(b',"data":')
        doc["data"], pos = _members(raw, pos, wanted, False)
        doc["delta"], pos = _members(raw, _expect(raw, pos, b',"delta":'), wanted, False)
        doc["dictionary"], pos = _members(raw, _expect(raw, pos, b',"dictionary":'), wanted, True)
        pos = _expect(raw, pos, b',"constant":')
        doc.update(orjson.loads(b'{"constant":' + raw[pos:]))
        return doc
    except (ValueError, TypeError, KeyError):  # orjson.JSONDecodeError is a ValueError
        return orjson.loads(raw)


def read_kernel_columns(run_dir: Path, manifest: dict, wanted: set) -> pd.DataFrame:
    """The run's kernels table with only the `wanted` columns, decoded from the columnar file
    (docs/FORMAT.md) straight into a frame: a 1M-launch table has ~50 more columns, and filling in
    the absent ones (read_kernels' normalised table) costs a copy of 8 MB each.  Text columns may
    hold None where the table has nulls (compare takes any non-str as missing); a wanted column the
    table lacks (written before it existed) is empty text or NaN."""
    path = asset_dir(run_dir) / metadata.KERNELS
    try:
        doc = read_selected_columns(tables.read_gz_bytes(path, metadata.declared_size(manifest, metadata.KERNELS)), wanted)
        present = [c for c in doc["columns"] if c in wanted]
        data = {c: columns.decode_column(doc, c, tables.SPEC_DTYPES[KERNEL_COLUMNS[c][1]] if c in KERNEL_COLUMNS else None)
                for c in present}
        rows = int(doc["rows"])
    except metadata.DAMAGED_FILE_ERRORS as e:
        raise InputError(path, f"unreadable kernels table ({e})", REEXPORT) from None
    for column in wanted - set(present):  # a table written before the column existed
        text = KERNEL_COLUMNS.get(column, ("", "float"))[1] == "str"
        data[column] = np.full(rows, "" if text else np.nan, dtype=object if text else np.float64)
    # Series of dtype object: pandas would otherwise infer (and convert to) its string dtype.
    return pd.DataFrame({c: pd.Series(v, dtype=object if np.asarray(v).dtype == object else None, copy=False)
                         for c, v in data.items()}, copy=False)
