"""How each column of the kernels file is written (format 2, docs/FORMAT.md), and read back.

A column whose values are all equal is written once ("constant"), a string or fractional float
column with few distinct values as its distinct values plus one small integer per row
("dictionary"), a column of whole numbers that grow by small steps (launch ids, timestamps,
correlation ids) as those steps ("delta"), any other column value by value ("data").  A 1M-launch
trace has ~35 counter columns that are all null (tracers read no counters), name columns
repeating a few dozen strings and 13-digit timestamps: value by value they were most of the file
and of the time spent writing it (gzip of 13-digit numbers: ~0.13 s per million).
"""
from __future__ import annotations

from typing import Any, List, NamedTuple, Optional, Tuple

import numpy as np
import pandas as pd

from ..core.columnar import factorize_ints, object_factorize, object_pointers

CONSTANT, DICTIONARY, DELTA, DATA = "constant", "dictionary", "delta", "data"
# A string column becomes a dictionary when it has at most rows * this many distinct values (each
# value repeats twice on average); below that the codes save little over the strings themselves.
DICTIONARY_MAX_DISTINCT_SHARE = 0.5
PREFIX = 4096  # rows compared first: a column that is not constant almost always differs early
# A float column with fractions is tried as a dictionary when its first PREFIX rows hold at most
# this share of distinct values.
FEW_FLOATS_HEAD_SHARE = 1 / 8
# A whole-number column becomes steps when they are at least this many characters per row shorter
# than the values (estimated on SAMPLE evenly spaced rows).
DELTA_MIN_SAVING = 2
SAMPLE = 4096
# Only columns with |values| below this: every value and step is then exact in a JavaScript double.
DELTA_MAX_ABS = 2 ** 52


class Column(NamedTuple):
    """One encoded column: kind CONSTANT (payload: the JSON value), DICTIONARY (payload: (distinct
    strings or floats, codes array)), DELTA (payload: int array of steps, the first row's value
    first) or DATA (payload: numpy array of the values)."""

    kind: str
    payload: Any


def json_scalar(value: Any) -> Any:
    """A cell as JSON holds it: NaN / inf -> None, numpy scalars -> Python."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    return value


def encode_column(series: pd.Series, whole_floats: bool = False) -> Column:
    """How one column is written.  A sparse column is densified only when it is not all its fill
    value, so a table of sparse all-NaN counters never holds two dense columns at once.
    whole_floats: a float column whose values are all whole numbers is written as integers
    (2792694214, not 2792694214.0: shorter, and encoded ~5x faster), or as steps; its reader
    restores float64."""
    rows = len(series)
    if isinstance(series.dtype, pd.SparseDtype) and rows >= 2 and series.sparse.npoints == 0:
        return Column(CONSTANT, json_scalar(series.dtype.fill_value))
    values = series.to_numpy()
    if values.dtype.kind in "biuf":
        return _numeric(values, whole_floats)
    if values.dtype == object and rows >= 2:
        return _strings(values) or Column(DATA, values)
    return Column(DATA, values)


def _numeric(values: np.ndarray, whole_floats: bool) -> Column:
    if len(values) >= 2 and _all_equal(values):
        return Column(CONSTANT, json_scalar(values[0]))
    whole = values if values.dtype.kind in "iu" else None
    if whole_floats and values.dtype.kind == "f":
        whole = _whole_numbers(values)
    if whole is None:
        return (_few_floats(values) if values.dtype.kind == "f" else None) or Column(DATA, values)
    steps = _steps(whole)
    return Column(DATA, whole) if steps is None else Column(DELTA, steps)


def _few_floats(values: np.ndarray) -> Optional[Column]:
    """DICTIONARY of a float column with few distinct values (an occupancy % or waves per SM: one
    per launch configuration), else None: a million floats as text cost orjson ~50 ms, their codes
    ~5 ms.  In a long column the first PREFIX rows decide whether to look at all: a column of
    measured figures is nearly all distinct there."""
    if len(values) < 2:
        return None
    if len(values) > PREFIX and len(np.unique(_bits(values[:PREFIX]))) > PREFIX * FEW_FLOATS_HEAD_SHARE:
        return None
    # By bit pattern (NaN groups with NaN, -0.0 stays apart), a hash table the size of the distinct
    # values rather than of the rows (columnar.factorize_ints).
    codes, distinct = factorize_ints(_bits(values))
    if len(distinct) > len(values) * DICTIONARY_MAX_DISTINCT_SHARE:
        return None
    floats = [json_scalar(v) for v in np.asarray(distinct).view(values.dtype)]
    return Column(DICTIONARY, (floats, codes.astype(np.min_scalar_type(len(distinct) - 1))))


def _bits(values: np.ndarray) -> np.ndarray:
    """Floats as their bit patterns: NaN equals NaN, and -0.0 stays apart from 0.0."""
    return values.view(f"u{values.itemsize}") if values.dtype.kind == "f" else values


def _all_equal(values: np.ndarray) -> bool:
    if values.dtype == object:  # one str object shared by every row (labels): compared as pointers, ~10x faster
        pointers = object_pointers(values)
        if pointers is not None and bool((pointers == pointers[0]).all()):
            return True
    bits = _bits(values)
    return bool((bits[:PREFIX] == bits[0]).all()) and bool((bits == bits[0]).all())


def _whole_numbers(values: np.ndarray) -> Optional[np.ndarray]:
    """The values as int64 when every one converts back to the same float (no NaN, inf, -0.0,
    fraction or overflow), else None."""
    for part in (values[:PREFIX], values):
        with np.errstate(invalid="ignore"):
            ints = part.astype(np.int64)
        if not np.array_equal(_bits(ints.astype(values.dtype)), _bits(part)):
            return None
    return ints


def _steps(ints: np.ndarray) -> Optional[np.ndarray]:
    """Row-to-row differences of a whole-number column (the first value first), in the smallest int
    dtype that holds them, when they are shorter to write than the values; else None."""
    if len(ints) < 2 or max(-int(ints.min()), int(ints.max())) >= DELTA_MAX_ABS:
        return None
    ints = ints.astype(np.int64, copy=False)
    at = np.unique(np.linspace(1, len(ints) - 1, SAMPLE).astype(np.intp))  # sampled rows (and the row before)
    if _characters(ints[at] - ints[at - 1]) > _characters(ints[at]) - DELTA_MIN_SAVING:
        return None
    steps = np.diff(ints, prepend=0)
    return steps.astype(np.result_type(np.min_scalar_type(steps.min()), np.min_scalar_type(steps.max())))


def _characters(ints: np.ndarray) -> float:
    """Mean characters of the numbers written in decimal (digits and sign)."""
    return float(np.mean(np.floor(np.log10(np.maximum(np.abs(ints), 1))) + 1 + (ints < 0)))


def _strings(values: np.ndarray) -> Optional[Column]:
    """CONSTANT or DICTIONARY for an object column holding only str, when it pays; else None."""
    found = _string_codes(values)
    if found is None:
        return None
    codes, distinct = found
    if len(distinct) == 1:
        return Column(CONSTANT, distinct[0])
    if len(distinct) <= len(values) * DICTIONARY_MAX_DISTINCT_SHARE:
        return Column(DICTIONARY, (distinct, codes.astype(np.min_scalar_type(len(distinct) - 1))))
    return None


def _string_codes(values: np.ndarray) -> Optional[Tuple[np.ndarray, List[str]]]:
    """(codes, distinct strings in order of first appearance) of an object array of str (None when
    it holds anything else): columnar.object_factorize, which groups rows by the object they hold
    before their text (readers share one str object per distinct name)."""
    if isinstance(values[0], str) and _all_equal(values):  # a few ms: str == str compares lengths first
        return np.zeros(len(values), np.intp), [values[0]]
    codes, distinct = object_factorize(values)
    if codes.size and codes.min() < 0 or not all(isinstance(v, str) for v in distinct.tolist()):
        return None  # a missing value (code -1) or one that is not text
    return codes, distinct.tolist()


# -- reading -------------------------------------------------------------------------------------
def decode_column(doc: dict, column: str, dtype=None):
    """One column of a columnar document, whichever way it was written (format 1 files hold "data"
    only).  With dtype: a numpy array of it (null -> NaN for floats); without: a list, as format 1
    readers got it.  A damaged entry raises KeyError, ValueError, TypeError or IndexError."""
    rows = doc["rows"]
    if sum(column in doc.get(kind, {}) for kind in (DATA, CONSTANT, DICTIONARY, DELTA)) != 1:
        raise ValueError(f"column {column!r} is not in exactly one of data, delta, dictionary, constant")
    if column in doc["data"]:
        values = doc["data"][column]
        if len(values) != rows:
            raise ValueError(f"column {column!r} does not hold {rows} values")
        return as_list(values) if dtype is None else as_dtype(values, dtype)
    if column in doc.get(CONSTANT, {}):
        value = doc[CONSTANT][column]
        if dtype is None:
            return [value] * rows
        if np.dtype(dtype) == object:
            return constant_objects(value, rows)
        return np.full(rows, np.nan if value is None and np.dtype(dtype).kind == "f" else value, dtype=dtype)
    if column in doc.get(DELTA, {}):
        steps = as_dtype(doc[DELTA][column], np.int64)
        if steps.shape != (rows,):
            raise ValueError(f"column {column!r} does not hold {rows} steps")
        values = np.cumsum(steps)
        return values.tolist() if dtype is None else values.astype(dtype, copy=False)
    strings, codes = _dictionary(doc[DICTIONARY][column], rows)
    picked = strings[codes]
    return picked.tolist() if dtype is None else picked.astype(dtype, copy=False)


def as_list(values) -> list:
    """values (a list, or an array columnar_json read) as the JSON list: null where NaN."""
    if not isinstance(values, np.ndarray):
        return values
    out = values.tolist()
    if values.dtype.kind == "f":
        for i in np.flatnonzero(np.isnan(values)).tolist():
            out[i] = None
    return out


def as_dtype(values, dtype) -> np.ndarray:
    """values (a list, or an array columnar_json read) as a numpy array of `dtype`.  A null in an
    array read as float64 refuses an integer dtype, as it does in a list (TypeError): a cast
    would turn it into a number."""
    if isinstance(values, np.ndarray) and values.dtype.kind == "f" and np.dtype(dtype).kind in "iu":
        if np.isnan(values).any():
            raise TypeError("a null where the column holds integers")
        return values.astype(dtype)
    if isinstance(values, np.ndarray) and np.dtype(dtype) == object:
        return np.asarray(values.tolist(), dtype=object)  # Python numbers, as a list would give
    return np.asarray(values, dtype=dtype)


def constant_objects(value: Any, rows: int) -> np.ndarray:
    """`rows` references to the one `value`.  (np.full converts a str through a fixed-width unicode
    array and makes a new str per row: a 1M-launch trace's constant bound_reason then took ~150 MB
    and 0.2 s to read back, where the writer's table shared one object.)"""
    out = np.empty(rows, dtype=object)
    out.fill(value)
    return out


def _dictionary(entry: dict, rows: int) -> Tuple[np.ndarray, np.ndarray]:
    """(strings as an object array, codes as intp) of a dictionary entry, codes checked in range."""
    strings = np.empty(len(entry["values"]), dtype=object)
    strings[:] = entry["values"]
    codes = np.asarray(entry["codes"])  # (a cast to intp would read 0.5 as 0)
    if codes.size and codes.dtype.kind != "i":
        raise TypeError("dictionary codes that are not integers")
    codes = codes.astype(np.intp, copy=False)
    if codes.shape != (rows,):
        raise ValueError(f"{codes.size} dictionary codes for {rows} rows")
    if rows and (codes.min() < 0 or codes.max() >= len(strings)):
        raise IndexError(f"dictionary codes outside 0..{len(strings) - 1}")
    return strings, codes


def data_only(doc: dict) -> dict:
    """The document with every column value by value, as format 1 held it (for tools and tests
    that edit a table's cells)."""
    rest = {k: v for k, v in doc.items() if k not in (CONSTANT, DICTIONARY, DELTA)}
    return {**rest, "data": {c: decode_column(doc, c) for c in doc["columns"]}}
