"""Numpy helpers over id and value columns, shared by the readers and the analyses (no file
format, no analysis): distinct values, codes by hashing, nsys-style grouped statistics, and the
join of GPU operations to the API calls that launched them."""
from __future__ import annotations

from typing import Iterable, Optional, Tuple

import numpy as np
import pandas as pd

def distinct(values) -> np.ndarray:
    """Sorted distinct values.  (np.unique without return_inverse takes numpy 2.x's hash path, which is
    pathological on sorted id columns: 0.6 s for 1M correlation ids; pandas' hash table: 0.04 s.)"""
    return np.sort(pd.unique(np.asarray(values).ravel()))

def codes(values) -> Tuple[np.ndarray, np.ndarray]:
    """(sorted distinct values, each value's index into them), by hashing."""
    inverse, uniques = pd.factorize(np.asarray(values).ravel(), sort=True)
    return np.asarray(uniques), inverse.astype(np.int64)

def grouped_stats(keys, values, extra=None) -> pd.DataFrame:
    """Per key: n, total, mean, lo, hi, med (mean of the middle one or two), stddev (sample; 0 for one
    value), as nsys stats computes them, from numpy arrays (one sort, no Python loop per row);
    `extra` (an array) adds its minimum per key as column "extra"."""
    keys, values = _i64(keys), _i64(values)
    if keys.size == 0:
        cols = ["key", "n", "total", "mean", "lo", "hi", "med", "stddev"] + (["extra"] if extra is not None else [])
        return pd.DataFrame({c: np.zeros(0, np.float64 if c in ("mean", "med", "stddev") else np.int64) for c in cols})
    k, v = _sorted_by_key_then_value(keys, values)
    starts = np.flatnonzero(np.concatenate([[True], k[1:] != k[:-1]]))
    n = np.diff(np.append(starts, k.size))
    total = np.add.reduceat(v, starts)
    mean = total / n
    med = (v[starts + (n - 1) // 2] + v[starts + n // 2]) / 2.0
    dev = v - np.repeat(mean, n)
    ss = np.add.reduceat(dev * dev, starts)
    out = pd.DataFrame({"key": k[starts], "n": n, "total": total, "mean": mean, "lo": v[starts],
                        "hi": v[starts + n - 1], "med": med,
                        "stddev": np.where(n > 1, np.sqrt(ss / np.maximum(n - 1, 1)), 0.0)})
    if extra is not None:
        out["extra"] = pd.Series(_i64(extra)).groupby(keys, sort=True).min().to_numpy()  # same key order
    return out

def _sorted_by_key_then_value(keys: np.ndarray, values: np.ndarray):
    """(keys, values) sorted by key then value.  Group codes and values share one int64 and a
    single sort does it (~3x a lexsort's speed) when the values are non-negative and fit beside
    the codes; a lexsort otherwise."""
    if values.min() >= 0:
        codes, uniques = pd.factorize(keys, sort=True)
        shift = 63 - max(int(len(uniques)).bit_length(), 1)
        if int(values.max()) < (1 << shift):
            both = np.sort((codes.astype(np.int64) << shift) | values)
            return np.asarray(uniques)[both >> shift], both & ((1 << shift) - 1)
    order = np.lexsort((values, keys))
    return keys[order], values[order]

def _i64(values) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)

def launching_call(call_key, op_key) -> np.ndarray:
    """Per GPU operation: the row of the API call with the same key (process + correlation id),
    -1 where there is none or the key is negative (no correlation id).  A hash join, no sort;
    when the operations are few (copies, sets) only the calls holding their keys are indexed.
    Were a key ever repeated among the calls, the first call would win.  Calls already in key
    order (as exports write them: correlation ids rise) are searched instead, 5x faster."""
    call_key, op_key = _i64(call_key), _i64(op_key)
    if op_key.size * 4 < call_key.size:
        rows = np.flatnonzero(pd.Series(call_key).isin(op_key[op_key >= 0]).to_numpy())
    else:
        rows = np.flatnonzero(call_key >= 0)
    keys = call_key[rows]
    if keys.size and (keys.size < 2 or (keys[1:] > keys[:-1]).all()):  # strictly rising: sorted, unique
        where = np.minimum(np.searchsorted(keys, op_key), keys.size - 1)
        return np.where((keys[where] == op_key) & (op_key >= 0), rows[where], -1)
    if keys.size == 0:  # no call holds any of these keys (nothing to index into below)
        return np.full(op_key.size, -1, np.int64)
    rows = rows[~pd.Series(keys).duplicated().to_numpy()]
    where = pd.Index(call_key[rows]).get_indexer(op_key)
    return np.where((where >= 0) & (op_key >= 0), rows[np.maximum(where, 0)], -1)


def first_rows(row_codes: np.ndarray, n_codes: int) -> np.ndarray:
    """Per code 0..n_codes-1: the first row holding it (the last write per code is its first row).
    Negative codes (missing values, as pd.factorize marks them) are no code's rows."""
    first = np.empty(n_codes, dtype=np.int64)
    if row_codes.size and row_codes.min() < 0:
        rows = np.flatnonzero(row_codes >= 0)
        first[row_codes[rows[::-1]]] = rows[::-1]
        return first
    first[row_codes[::-1]] = np.arange(row_codes.size - 1, -1, -1)
    return first


# Rows hashed at a time by factorize_ints: pandas sizes a factorize's hash table by its rows (~34 MB
# per million), where a launch table's id and text columns hold a few hundred distinct values.
HASH_ROWS = 1 << 17
FEW_DISTINCT = 1 << 16  # beyond this many distinct values, one pandas factorize of the whole column


def factorize_ints(values: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """pd.factorize of an integer column (int64 codes in order of first sight, the distinct values),
    HASH_ROWS rows at a time against the distinct values found so far: a hash table the size of the
    distinct values, not of the rows.  A column with more than FEW_DISTINCT distinct values is
    factorised whole."""
    values = np.asarray(values)
    if values.size <= HASH_ROWS:
        codes, uniques = pd.factorize(values)
        return codes.astype(np.int64, copy=False), np.asarray(uniques)
    codes = np.empty(values.size, dtype=np.int64)
    seen = pd.Index(values[:0])
    for lo in range(0, values.size, HASH_ROWS):
        part = values[lo:lo + HASH_ROWS]
        new = pd.unique(part)  # in order of first sight within the part
        if len(seen):
            new = new[seen.get_indexer(new) < 0]
        if len(new):
            seen = seen.append(pd.Index(new))
            if len(seen) > FEW_DISTINCT:
                whole, uniques = pd.factorize(values)
                return whole.astype(np.int64, copy=False), np.asarray(uniques)
        codes[lo:lo + HASH_ROWS] = seen.get_indexer(part)
    return codes, seen.to_numpy()


def object_codes(values) -> np.ndarray:
    """A code per value of an object array, equal values sharing one (missing values -1): rows are
    grouped by the object they hold first (an object array is an array of pointers, and readers share
    one str object per distinct name: ~5 ms per million rows, where hashing long kernel names costs
    ~45 ms), then the distinct objects by value (different objects may hold equal text)."""
    return object_factorize(values)[0]


def object_pointers(values) -> Optional[np.ndarray]:
    """The object pointers of an object array as integers (a view of a contiguous one: the objects are
    not touched), or None where numpy will not expose them (then callers hash the values)."""
    try:
        return np.frombuffer(np.ascontiguousarray(values, dtype=object), dtype=np.intp)
    except (TypeError, ValueError, BufferError):
        return None


def object_factorize(values) -> Tuple[np.ndarray, np.ndarray]:
    """(int64 code per row, distinct values in order of first appearance; missing values: code -1) of
    an object array, by object_codes' pointer trick (no hashing of a million long names), the first
    rows found by first_sight_rows, and no copy of codes that are final already (one object per text)."""
    values = np.ascontiguousarray(values, dtype=object)
    pointers = object_pointers(values)
    if pointers is None:  # numpy would not expose them: hash the values
        codes = pd.factorize(values)[0].astype(np.int64)
        return codes, values[first_sight_rows(codes, int(codes.max()) + 1 if codes.size else 0)]
    by_object, objects = factorize_ints(pointers)
    texts = values[first_sight_rows(by_object, len(objects))]
    text_of_object, distinct = pd.factorize(texts)
    if (text_of_object == np.arange(texts.size)).all():  # one object per text: the codes are final
        return by_object, texts
    # Objects holding equal texts (or missing values) share a code; the distinct values are the first
    # object seen of each text.
    codes = text_of_object.astype(np.int64)[by_object]
    return codes, texts[first_sight_rows(text_of_object, len(distinct))]


def first_sight_rows(codes: np.ndarray, n_codes: int, block: int = 1 << 16) -> np.ndarray:
    """first_rows of codes numbered in order of first sight (as pd.factorize numbers them; negative
    codes are no code's): where the running maximum first reaches each code.  Scanned block by block,
    stopping once every code has been seen (a trace shows its names early: a few blocks of a
    million rows, where first_rows writes every row)."""
    first = np.empty(n_codes, dtype=np.int64)
    seen = 0  # codes 0..seen-1 found
    for at in range(0, codes.size, block):
        if seen >= n_codes:
            break
        running = np.maximum.accumulate(codes[at:at + block])
        top = int(running[-1])
        if top >= seen:
            first[seen:top + 1] = at + np.searchsorted(running, np.arange(seen, top + 1))
            seen = top + 1
    return first


def text_mask(values, predicate) -> np.ndarray:
    """predicate(text) per row, asked once per distinct text (a million operator names are a few
    hundred distinct ones; pandas' .str methods work row by row).  Missing values (not str): False.
    The rows coded by object_factorize (one hash pass of the str objects they share), the answers
    gathered back: ~8 ms per million rows."""
    codes, distinct = object_factorize(values)
    answers = np.fromiter((isinstance(t, str) and bool(predicate(t)) for t in distinct), dtype=bool,
                          count=len(distinct))
    return np.append(answers, False)[codes]  # code -1 (a missing value): the appended False


def group_codes(columns: Iterable[np.ndarray]):
    """(code per row, first row of each code) of the distinct combinations of equal-length columns,
    codes numbered in order of first sight.  One hash pass per column (floats hashed by their bits,
    text by the str objects rows share: columnar.object_codes), the columns' codes combined by
    combined_codes: O(n), ~10 ms a column per million launches.  The columns may come from a
    generator: each is coded and let go before the next is made (a million-row column is 8 MB)."""
    return combined_codes(_value_codes(column) for column in columns)


def combined_codes(code_columns: Iterable[np.ndarray]):
    """(code per row, first row of each code) of the distinct combinations of equal-length columns of
    codes 0..k-1, in order of first sight: the codes combined by arithmetic into one integer key
    (renumbered first only where the product would overflow), hashed once."""
    codes = None
    span = 1  # codes < span
    for one in code_columns:
        if codes is None:
            codes = np.zeros(len(one), dtype=np.int64)
        k = int(one.max()) + 1 if one.size else 1
        if k <= 1:
            continue
        if span > (1 << 62) // k:  # the product would overflow: renumber what we have first
            codes = factorize_ints(codes)[0]
            span = int(codes.max()) + 1
        codes *= k
        codes += one
        span *= k
    codes, distinct = factorize_ints(codes)
    return codes, first_sight_rows(codes, len(distinct))


def _value_codes(column) -> np.ndarray:
    """A code 0..k-1 per row, equal values (NaN equal to NaN) sharing one."""
    column = np.asarray(column)
    if column.dtype == object:
        codes = object_codes(column).astype(np.int64, copy=False)  # a fresh array
        codes += 1  # missing values (-1) are a value of their own: 0
        return codes
    if column.dtype.kind == "f":
        small = _small_whole_codes(column)
        if small is not None:
            return small
        canonical = column.astype(np.float64) + 0.0  # a copy; -0.0 becomes 0.0
        canonical[np.isnan(canonical)] = np.nan  # one NaN bit pattern
        column = canonical.view(np.int64)
    return factorize_ints(column)[0]


def _small_whole_codes(column: np.ndarray) -> Optional[np.ndarray]:
    """Codes of a float column of whole numbers within 2**20 of one another (block sizes, registers,
    grids, devices) by subtraction, no hashing: value - min + 1, NaN 0.  None for other columns."""
    missing = np.isnan(column)
    if missing.all():
        return np.zeros(len(column), dtype=np.int64)
    low, high = np.nanmin(column), np.nanmax(column)
    if not high - low < (1 << 20):
        return None
    shifted = np.where(missing, low - 1, column) - (low - 1)
    codes = shifted.astype(np.int64)
    if not (codes == shifted).all():  # a fraction somewhere
        return None
    return codes


def start_then_longest(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The order of np.lexsort((-end, start)) (by start, equal starts longest first, then as given):
    one stable sort by start (a tracer's slices come nearly in start order: ~10 ms for 1.4M PyTorch
    operators, where lexsort takes ~0.1 s), then only the runs of equal starts sorted by end too."""
    order = np.argsort(start, kind="stable")
    ordered = start[order]
    tied = np.flatnonzero(ordered[1:] == ordered[:-1])
    if tied.size:
        in_run = np.zeros(order.size, dtype=bool)
        in_run[tied] = in_run[tied + 1] = True
        at = np.flatnonzero(in_run)  # the runs, in start order: re-sorted among themselves they stay put
        rows = order[at]
        order[at] = rows[np.lexsort((-end[rows], start[rows]))]
    return order
