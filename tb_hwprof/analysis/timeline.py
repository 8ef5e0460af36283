"""GPU time over a capture: busy islands, idle gaps, utilisation per time bin, what overlapped the gaps.

Interval arithmetic on numpy arrays of int64 nanoseconds (no file format, no Python loop per
interval): a capture of 1,000,000 kernels is a few sorts and cumulative sums.
"""
from __future__ import annotations

import re
from typing import Optional, Tuple

import numpy as np
import pandas as pd

from ..core.errors import HwprofError
from ..core.model import TIMELINE_CATEGORIES, Window
from ..core.columnar import _i64
from .summary import merge

Intervals = Tuple[np.ndarray, np.ndarray]  # (starts, ends), int64 ns

# CUDA and HIP calls that block the calling thread until the GPU (or a stream) drains: explicit
# synchronisation, and the copies without "Async", which the APIs' sync rules make wait for the
# copy (memsets are asynchronous to the host, so they are left out).  Names without the runtime's
# _vNNNN tag; cuda* runtime, cu* driver and hip* forms.
SYNC_API = re.compile(r"^(?:cu(?:da)?|hip)(?:DeviceSynchronize|StreamSynchronize|EventSynchronize|CtxSynchronize|"
                      r"Memcpy(?!\w*Async)\w*)$")
# NVTX ranges that mark input loading (PyTorch's DataLoader iterator, typical user annotations).
DATA_LOADING_NVTX = re.compile(r"data.?load|load.?data|data.?fetch|fetch.?data|__next__|next_data|collate|"
                               r"prefetch|input.?pipeline|read.?batch|batch.?load", re.I)
# OS runtime calls that read files or sockets (the data a loader waits for).
OS_READS = re.compile(r"^(?:read|pread|pread64|readv|preadv|preadv2|fread|fread_unlocked|recv|recvfrom|recvmsg)$")

# Bins of the utilisation-over-time table: enough for a sparkline a page wide, few enough to
# store per device in every run.
UTILISATION_BINS = 200
# Idle gaps listed per device with what the CPU was doing then (the longest ones).
TOP_GAPS = 20


def idle_gaps(islands: Intervals, span: Tuple[int, int]) -> Intervals:
    """Stretches of `span` that no island covers: before the first, between, and after the last."""
    s, e = islands
    lo, hi = int(span[0]), int(span[1])
    inside = (e > lo) & (s < hi)
    if not inside.all():
        s, e = s[inside], e[inside]
    # Written into place (a million islands: each copy is 8 MB).
    gap_s = np.empty(s.size + 1, dtype=np.int64)
    gap_s[0] = lo
    np.clip(e, lo, hi, out=gap_s[1:])
    gap_e = np.empty(s.size + 1, dtype=np.int64)
    np.clip(s, lo, hi, out=gap_e[:-1])
    gap_e[-1] = hi
    keep = gap_e > gap_s
    if keep[1:-1].all():  # islands are apart: only the gaps before the first and after the last may be empty
        first, stop = (0 if keep[0] else 1), (keep.size if keep[-1] else keep.size - 1)
        return gap_s[first:stop], gap_e[first:stop]
    return gap_s[keep], gap_e[keep]


def overlap_ns(a: Intervals, b: Intervals) -> int:
    """Length of union(a) ∩ union(b): the busy time of the larger union within each island of the
    smaller one, from its prefix sums (no sort of both sets together: at 1M intervals ~0.07 s)."""
    big, small = merge(*a), merge(*b)
    if big[0].size < small[0].size:
        big, small = small, big
    if small[0].size == 0:
        return 0
    return int((busy_before(big, small[1]) - busy_before(big, small[0])).sum())


def clip(intervals: Intervals, span: Tuple[int, int]) -> Intervals:
    s, e = np.clip(_i64(intervals[0]), span[0], span[1]), np.clip(_i64(intervals[1]), span[0], span[1])
    keep = e > s
    return s[keep], e[keep]


def starts_inside(points, intervals: Intervals) -> np.ndarray:
    """Per point: does it fall within [start, end] of any of the intervals."""
    s, e = merge(*intervals)
    points = _i64(points)
    if s.size == 0:
        return np.zeros(points.size, dtype=bool)
    i = np.searchsorted(s, points, side="right") - 1  # the last island starting at or before the point
    ok = i >= 0
    return ok & (points <= e[np.where(ok, i, 0)])


def busy_before(islands: Intervals, t: np.ndarray) -> np.ndarray:
    """Busy time from the first island up to each instant t (islands sorted and disjoint)."""
    s, e = islands
    t = _i64(t)
    if s.size == 0:
        return np.zeros(t.size, dtype=np.int64)
    done = np.concatenate([[0], np.cumsum(e - s)])  # busy time of the first k islands
    k = np.searchsorted(s, t, side="right")  # islands starting at or before t
    partial = np.where(k > 0, np.minimum(t, e[np.maximum(k - 1, 0)]) - s[np.maximum(k - 1, 0)], 0)
    return done[np.maximum(k - 1, 0)] * (k > 0) + np.clip(partial, 0, None)


def utilisation(islands: Intervals, span: Tuple[int, int], bins: int = UTILISATION_BINS) -> pd.DataFrame:
    """busy_pct per equal time bin of `span` (bin_start_ns, bin_end_ns, busy_ns, busy_pct)."""
    lo, hi = int(span[0]), int(span[1])
    n = max(1, min(bins, hi - lo))
    edges = lo + (np.arange(n + 1, dtype=np.float64) * (hi - lo) / n).astype(np.int64)
    edges[-1] = hi
    busy = np.diff(busy_before(islands, edges))
    width = np.diff(edges)
    return pd.DataFrame({"bin_start_ns": edges[:-1], "bin_end_ns": edges[1:], "busy_ns": busy,
                         "busy_pct": np.where(width > 0, 100.0 * busy / np.maximum(width, 1), np.nan)})


def longest(gaps: Intervals, top: int = TOP_GAPS) -> Intervals:
    """The `top` longest gaps, longest first (earlier first on ties).  Only the gaps at least as long
    as the top-th are sorted (a 1M-kernel capture has ~1M gaps)."""
    s, e = gaps
    duration = e - s
    if duration.size > top:
        kth = np.partition(duration, duration.size - top)[duration.size - top]
        keep = np.flatnonzero(duration >= kth)
        s, e, duration = s[keep], e[keep], duration[keep]
    order = np.lexsort((s, -duration))[:top]
    return s[order], e[order]


def best_overlap(gaps: Intervals, starts, ends) -> Tuple[np.ndarray, np.ndarray]:
    """Per gap: index of the interval covering most of it (shortest on ties: the innermost of nested
    ranges) and that overlap in ns; -1 / 0 where nothing overlaps.  Loops over the (few) gaps only."""
    starts, ends = _i64(starts), _i64(ends)
    best = np.full(gaps[0].size, -1, dtype=np.int64)
    amount = np.zeros(gaps[0].size, dtype=np.int64)
    in_order = starts.size < 2 or bool((starts[1:] >= starts[:-1]).all())  # a thread's calls: no sort, no copy
    order = None if in_order else np.argsort(starts, kind="stable")
    sorted_s = starts if in_order else starts[order]
    for g, (gs, ge) in enumerate(zip(gaps[0].tolist(), gaps[1].tolist())):
        before = np.searchsorted(sorted_s, ge, side="left")  # started before the gap ends
        if in_order:
            cand = np.flatnonzero(ends[:before] > gs)
        else:
            cand = order[:before]
            cand = cand[ends[cand] > gs]
        if cand.size == 0:
            continue
        ov = np.minimum(ends[cand], ge) - np.maximum(starts[cand], gs)
        pick = np.lexsort((ends[cand] - starts[cand], -ov))[0]
        best[g], amount[g] = cand[pick], ov[pick]
    return best, amount


def project_ranges(range_start, range_end, range_thread, call_start, call_thread, op_start, op_end):
    """Per range: (operations, summed op time, op span) of the GPU operations whose launching call
    started inside the range on the range's thread (start <= call < end: nsys' nvtx_gpu_proj rule).
    The span runs from the first operation's start to the last one's end (0 without operations).

    Calls sorted by (thread, start); each range is a searchsorted slice of its thread's calls, its
    sums come from a cumulative sum and its span from reduceat over slices ordered by their start."""
    range_start, range_end, range_thread = _i64(range_start), _i64(range_end), _i64(range_thread)
    call_start, call_thread = _i64(call_start), _i64(call_thread)
    op_start, op_end = _i64(op_start), _i64(op_end)
    # Tracers write a thread's calls in time order: then no sort and no gathered copies.
    order = None if _sorted_by(call_thread, call_start) else np.lexsort((call_start, call_thread))
    thread, start = (call_thread, call_start) if order is None else (call_thread[order], call_start[order])
    first, last = _gathered_with_pad(op_start, order), _gathered_with_pad(op_end, order)
    del order
    n = thread.size
    lo = np.zeros(range_start.size, np.int64)
    hi = np.zeros(range_start.size, np.int64)
    for t in np.unique(range_thread).tolist():  # per thread: one searchsorted over its calls
        a, b = np.searchsorted(thread, t, "left"), np.searchsorted(thread, t, "right")
        mine = range_thread == t
        lo[mine] = a + np.searchsorted(start[a:b], range_start[mine], "left")
        hi[mine] = a + np.searchsorted(start[a:b], range_end[mine], "left")
    hi = np.maximum(hi, lo)
    busy = np.empty(n + 1, np.int64)  # busy[i]: summed time of the first i operations
    busy[0] = 0
    np.subtract(last[:n], first[:n], out=busy[1:])
    np.cumsum(busy[1:], out=busy[1:])
    count, gpu = hi - lo, busy[hi] - busy[lo]
    span = np.zeros(range_start.size, np.int64)
    some = np.flatnonzero(count > 0)
    if some.size:
        some = some[np.argsort(lo[some], kind="stable")]  # slices by start: reduceat's gaps stay O(n)
        bounds = np.empty(2 * some.size, np.int64)
        bounds[0::2], bounds[1::2] = lo[some], hi[some]
        span[some] = np.maximum.reduceat(last, bounds)[0::2] - np.minimum.reduceat(first, bounds)[0::2]
    return count, gpu, span


def _sorted_by(major: np.ndarray, minor: np.ndarray) -> bool:
    """Whether rows are in (major, minor) order (what np.lexsort((minor, major)) would give)."""
    if major.size < 2:
        return True
    if (major[1:] < major[:-1]).any():
        return False
    return bool(((major[1:] > major[:-1]) | (minor[1:] >= minor[:-1])).all())


def _gathered_with_pad(values: np.ndarray, order: Optional[np.ndarray]) -> np.ndarray:
    """values[order] (order None: values as they are) plus one 0 past the end (a reduceat bound may
    equal their length), in one array."""
    out = np.empty(values.size + 1 if order is None else order.size + 1, np.int64)
    if order is None:
        out[:-1] = values
    else:
        np.take(values, order, out=out[:-1])
    out[-1] = 0
    return out


def gap_share(idle: int, part: int) -> Optional[float]:
    return 100.0 * part / idle if idle > 0 else None


# ---------------------------------------------------------------- export windows

def parse_time_range(text: str):
    """'START:END' in ns (either side may be empty: open) -> (start, end)."""
    parts = str(text).split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        lo = int(parts[0]) if parts[0].strip() else None
        hi = int(parts[1]) if parts[1].strip() else None
    except ValueError:
        raise HwprofError(f"bad --time-range {text!r}: use START:END in ns, e.g. 2000000000:3000000000") from None
    if lo is not None and hi is not None and hi < lo:
        raise HwprofError(f"bad --time-range {text!r}: END is before START")
    return lo, hi


def time_window(timeline, lo, hi):
    """The Window of --time-range (open sides extend to the capture's first / last slice)."""
    s = timeline.slices
    first = int(s["start"].min()) if s["start"].size else 0
    last = int(s["end"].max()) if s["end"].size else 0
    start, end = first if lo is None else int(lo), last if hi is None else int(hi)
    return Window(start, end, f"--time-range {'' if lo is None else lo}:{'' if hi is None else hi}")


def nvtx_window(timeline, name: str, every: bool = False):
    """The Window of the first NVTX range named `name` (every=True: from the first one's start to
    the last one's end).  HwprofError naming some of the ranges when there is none of that name."""
    s = timeline.slices
    is_nvtx = s["cat"] == TIMELINE_CATEGORIES.index("nvtx")
    ids = [i for i, n in enumerate(timeline.names) if n == name]
    hit = is_nvtx & np.isin(s["name"], ids)
    if not hit.any():
        ids, counts = np.unique(s["name"][is_nvtx], return_counts=True)
        present = [timeline.names[i] for i in ids[np.lexsort((ids, -counts))].tolist()]  # most frequent first
        shown = ", ".join(repr(p[:60]) for p in present[:8]) or "none"
        raise HwprofError(f"no NVTX range named {name!r} in this capture (ranges: {shown}"
                          f"{', ...' if len(present) > 8 else ''})")
    starts, ends = s["start"][hit], s["end"][hit]
    if every:
        return Window(int(starts.min()), int(ends.max()), f"--nvtx-range {name} (all {int(hit.sum())})")
    first = int(np.argmin(starts))
    return Window(int(starts[first]), int(ends[first]), f"--nvtx-range {name} (first of {int(hit.sum())})")
