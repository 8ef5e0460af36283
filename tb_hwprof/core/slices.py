"""Slices on lanes, as the Timeline draws them: each slice's nesting depth in its track, and the
decimation of many slices to a budget (per lane, depth and time bin the longest, with how many it
stands for).  Pure array algorithms: the writer uses them for the index's overview
(logdir/trace.py), the Timeline's windows for the slices a request shows (analysis/trace_views.py).
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np
import pandas as pd


def nesting_depths(start: np.ndarray, end: np.ndarray, track: np.ndarray) -> np.ndarray:
    """Nesting depth of each slice in its track (slices sorted by start, longer first on ties, so a
    slice's depth is how many earlier slices of its track have not ended by its start)."""
    depth = np.zeros(start.size, dtype=np.int16)
    for t in pd.unique(track).tolist():
        idx = np.flatnonzero(track == t)
        ends = end[idx]
        ends.sort(kind="stable")  # in place; timsort: a track's ends come nearly sorted (event order)
        for lo in range(0, idx.size, DEPTH_PASS):  # the queries a pass at a time: small temporaries
            part = idx[lo:lo + DEPTH_PASS]
            ended = np.searchsorted(ends, start[part], side="right")
            depth[part] = np.clip(np.arange(lo, lo + part.size) - ended, 0, np.iinfo(np.int16).max)
    return depth


DEPTH_PASS = 1 << 18


def decimate(start: np.ndarray, end: np.ndarray, track: np.ndarray, depth: np.ndarray, weight: np.ndarray,
             idx: Optional[np.ndarray], wstart: int, wend: int, max_events: int):
    """(rows kept, slices each stands for) of rows `idx` (None: every row): per (lane, depth, time
    bin) the longest slice, its weight the sum of its bin's (weight None: each slice stands for
    one).  Bins per row: the budget shared by the rows that have slices here, so the result fits
    max_events.  Also the export's overview (logdir/trace.py), over 2M+ slices: temporaries are made
    in place and freed as soon as used."""
    take = (lambda a: a) if idx is None else (lambda a: a[idx])
    row_count, row_of = _dense_ids(_lanes(take(track), take(depth)))
    bins = max(1, max_events // max(1, row_count))
    n_keys = row_count * bins
    key = _bin_keys(take(start), row_of, bins, wstart, max(1, wend - wstart), n_keys)
    del row_of
    picked, counts = _longest_per_key(key, take(start), take(end), None if weight is None else take(weight), n_keys)
    del key
    if idx is not None:
        picked = idx[picked]
    if picked.size > max_events:  # more rows than budget: the longest slices win
        keep = np.argsort(-(end[picked] - start[picked]), kind="stable")[:max_events]
        picked, counts = picked[keep], counts[keep]
    resort = np.lexsort((-(end[picked]), start[picked]))
    return picked[resort], counts[resort]


def _lanes(track: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """track x 64 + depth (capped at 63) per slice: the rows the Timeline draws."""
    small = track.size == 0 or int(track.max()) < (1 << 24)
    lanes = track.astype(np.int32 if small else np.int64)
    lanes *= 64
    lanes += np.minimum(depth, 63).astype(lanes.dtype)
    return lanes


def _bin_keys(start: np.ndarray, row_of: np.ndarray, bins: int, wstart: int, width: int, n_keys: int) -> np.ndarray:
    """Per slice: its lane's rank x bins + the time bin its start falls in, PASS_ROWS at a time (the
    int64 arithmetic's temporaries stay small; the keys int32 where they fit)."""
    key = np.empty(start.size, dtype=np.int32 if n_keys < (1 << 31) else np.int64)
    for part in _passes(start.size):
        k = np.maximum(start[part], wstart).astype(np.int64)
        k -= wstart
        k *= bins
        k //= width
        np.clip(k, 0, bins - 1, out=k)
        k += row_of[part].astype(np.int64) * bins
        key[part] = k
    return key


def _longest_per_key(key: np.ndarray, start: np.ndarray, end: np.ndarray, weight: Optional[np.ndarray],
                     n_keys: int):
    """(row of the longest slice, sum of the weights: None counts each row once) per key present,
    keys ascending; the first row of equally long ones.  Keys are dense (lanes x bins): per-key
    maxima and sums in arrays indexed by key, no sort of the rows; the rows' temporaries are made
    PASS_ROWS at a time (a 2M-slice overview would otherwise hold several 16 MB copies at once)."""
    longest = np.full(n_keys, np.iinfo(np.int64).min, dtype=np.int64)
    for part in _passes(key.size):
        np.maximum.at(longest, key[part], end[part] - start[part])
    first = np.full(n_keys, -1, dtype=np.int64)
    for part in reversed(_passes(key.size)):  # later passes first: an earlier holder overwrites a later
        holders = np.flatnonzero(end[part] - start[part] == longest[key[part]])[::-1] + part.start
        first[key[holders]] = holders  # within a pass, the last write per key is its first holder
    if weight is None:
        sums = np.bincount(key, minlength=n_keys)
    elif weight.dtype.kind in "iub":
        sums = np.zeros(n_keys, dtype=np.int64)
        np.add.at(sums, key, weight)
    else:
        sums = np.bincount(key, weights=weight, minlength=n_keys)
    present = np.flatnonzero(first >= 0)
    return first[present], sums[present].astype(np.int64) if weight is None else sums[present]


PASS_ROWS = 1 << 18


def _passes(n: int) -> List[slice]:
    return [slice(lo, min(lo + PASS_ROWS, n)) for lo in range(0, n, PASS_ROWS)]


def _dense_ids(values: np.ndarray):
    """(how many distinct, each value's rank among the distinct ones) of non-negative integers:
    by counting where the values are small (lane ids), else by sorting."""
    top = int(values.max()) if values.size else 0
    if values.size and values.min() >= 0 and top < (1 << 22):
        present = np.bincount(values, minlength=top + 1) > 0
        rank = (np.cumsum(present) - 1).astype(np.int32)
        return int(present.sum()), rank[values]
    distinct, inverse = np.unique(values, return_inverse=True)
    return distinct.size, inverse.astype(np.int64)
