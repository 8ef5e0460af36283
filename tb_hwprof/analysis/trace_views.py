"""What the plugin's Overview, Phases and Timeline views show of a trace (no file format here).

- overview(): headline figures, GPU busy/idle per device, utilisation over time, the longest idle
  gaps and the advice, from a run's summary tables;
- phases_table() / compare_phases(): NVTX ranges per name, and matched between two runs;
- TimelineIndex: the trace's slices as sorted columns, cut to a time window and decimated to a
  budget of events (per lane and time bin the longest slice stays, with the count it stands for).
"""
from __future__ import annotations

import collections
import math
import threading
from typing import Dict, List, Optional

import numpy as np
import pandas as pd

DEFAULT_MAX_EVENTS = 5000
MAX_EVENTS = 200_000  # the most one /timeline response may hold
ACTIVITY_FIELDS = ("device", "span_ns", "busy_ns", "idle_ns", "busy_pct", "active_busy_pct", "kernel_ns",
                   "memcpy_ns", "memset_ns", "memcpy_share_pct", "first_op_ns", "last_op_ns")
PHASE_FIELDS = ("name", "domain", "style", "instances", "total_ns", "avg_ns", "med_ns", "min_ns", "max_ns",
                "kernels", "gpu_time_ns", "gpu_span_ns")


def _plain(value):
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


def records(frame: Optional[pd.DataFrame], fields=None) -> List[dict]:
    if frame is None or frame.empty:
        return []
    cols = [c for c in (fields or frame.columns) if c in frame.columns]
    return [{c: _plain(v) for c, v in zip(cols, row)} for row in frame[cols].itertuples(index=False, name=None)]


def columnar(frame: Optional[pd.DataFrame], fields=None) -> Dict[str, list]:
    if frame is None:
        return {}
    cols = [c for c in (fields or frame.columns) if c in frame.columns]
    return {c: [_plain(v) for v in frame[c].tolist()] for c in cols}


def overview(summaries: Dict[str, pd.DataFrame], headline: dict, advice: list, notes: list,
             timeline: Optional[dict], device_names: Dict[int, str]) -> dict:
    """The Overview document (docs/http_api.md /overview) of one run."""
    activity = summaries.get("gpu_activity")
    devices = records(activity, ACTIVITY_FIELDS)
    for d in devices:
        d["name"] = device_names.get(d["device"], "")
    return {"headline": {k: _plain(v) for k, v in (headline or {}).items()}, "devices": devices,
            "utilisation": columnar(summaries.get("gpu_utilisation"), ("device", "bin_start_ns", "bin_end_ns",
                                                                        "busy_pct")),
            "idle_gaps": records(summaries.get("gpu_idle_gaps")),
            "idle_attribution": records(summaries.get("gpu_idle_attribution")),
            "advice": advice or [], "notes": notes or [], "timeline": timeline,
            "has_trace": activity is not None and not activity.empty}


def phase_source(summaries: Dict[str, pd.DataFrame]) -> Optional[str]:
    """nvtx_phases (SQLite exports, with the GPU projection) or nvtx_sum (`nsys stats` CSV)."""
    for name in ("nvtx_phases", "nvtx_sum"):
        if name in summaries and not summaries[name].empty:
            return name
    return None


def phases_table(frame: pd.DataFrame) -> pd.DataFrame:
    """NVTX ranges with the Phases view's columns (GPU columns absent in `nsys stats` output)."""
    return frame[[c for c in PHASE_FIELDS if c in frame.columns]]


def _by_name(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows summed per range name (one name may appear per domain and style)."""
    cols = [c for c in ("instances", "total_ns", "gpu_time_ns", "kernels") if c in frame.columns]
    return frame.groupby(frame["name"].astype(str), sort=False)[cols].sum(min_count=1)


def _ratio(a, b):
    a, b = _plain(a), _plain(b)
    return a / b if a is not None and b not in (None, 0) else None


def compare_phases(base: pd.DataFrame, run: pd.DataFrame) -> dict:
    """NVTX ranges matched by name: CPU wall time and projected GPU time of each run, speedups."""
    b, r = _by_name(base), _by_name(run)
    matched = []
    for name in [n for n in b.index if n in r.index]:
        row = {"name": name}
        for side, frame in (("base", b), ("run", r)):
            for col, out in (("instances", "instances"), ("total_ns", "ns"), ("gpu_time_ns", "gpu_ns")):
                row[f"{side}_{out}"] = _plain(frame.at[name, col]) if col in frame.columns else None
        row["speedup"] = _ratio(row["base_ns"], row["run_ns"])
        row["gpu_speedup"] = _ratio(row["base_gpu_ns"], row["run_gpu_ns"])
        matched.append(row)
    matched.sort(key=lambda m: -max(m["base_ns"] or 0, m["run_ns"] or 0))
    only = lambda f, other: [{"name": n, "total_ns": _plain(f.at[n, "total_ns"])} for n in f.index if n not in other.index]
    return {"matched": matched, "only_in_base": only(b, r), "only_in_run": only(r, b)}


class TimelineIndex:
    """One run's trace slices for the Timeline view: a window cut from them and decimated to a budget
    of events (per lane, depth and time bin the longest slice, with how many slices it stands for).

    Built from a whole index (logdir.trace.read_index: v1 / v2, depths computed here), or from a
    v3 index read by ranges (logdir.trace.RangedIndex): then a window reads only the chunks its
    time range overlaps (kept, up to CACHED_ROWS), and the whole capture comes from the overview
    the export decimated."""

    CACHED_ROWS = 2_000_000  # chunk rows kept between windows (~50 MB)

    def __init__(self, index: Optional[dict] = None, ranged=None):
        self.ranged = ranged
        meta = ranged.meta if ranged is not None else index["meta"]
        self.names: List[str] = meta["names"]
        self.categories: List[str] = meta["categories"]
        self.tracks: List[dict] = meta["tracks"]
        if ranged is None:
            from ..logdir.trace import nesting_depths
            self.all = {c: index[c] for c in ("start", "end", "track", "name", "cat")}
            # The tracer's correlation id joining an API call to the GPU work it launched (-1: none);
            # None for an index written before flows were kept.
            self.all["flow"] = index.get("flow")
            self.all["depth"] = nesting_depths(index["start"], index["end"], index["track"])
            self.all["merged"] = np.ones(index["start"].size, dtype=np.int64)
            start, end = index["start"], index["end"]
            self.longest = int((end - start).max()) if start.size else 0
            self._capture = [int(start.min()), int(end.max())] if start.size else [0, 0]
        else:
            first, chunk_start, chunk_end = ranged.chunks
            self._capture = [int(chunk_start.min()), int(chunk_end.max())] if first.size else [0, 0]
            self._chunks: "collections.OrderedDict[int, dict]" = collections.OrderedDict()
            self._lock = threading.Lock()
            self.overview_events = int(meta.get("overview_events", 0))

    def capture(self):
        return list(self._capture)

    def window(self, start: Optional[int], end: Optional[int], max_events: int) -> dict:
        lo, hi = self.capture()
        start = lo if start is None else int(start)
        end = hi if end is None else max(int(end), start + 1)
        part = self._slices(start, end, max_events)
        idx = np.flatnonzero((part["end"] >= start) & (part["start"] <= end))
        total = int(part["merged"][idx].sum())
        merged = part["merged"][idx]
        if idx.size > max_events:
            idx, merged = decimate(part["start"], part["end"], part["track"], part["depth"], part["merged"], idx,
                                   start, end, max_events)
        used = np.sort(pd.unique(part["name"][idx]))
        remap = np.searchsorted(used, part["name"][idx])
        return {"start_ns": start, "end_ns": end, "capture_ns": [lo, hi], "in_window": total,
                "returned": int(idx.size), "decimated": bool(idx.size < total),
                "lanes": [{"id": i, **t} for i, t in enumerate(self.tracks)], "categories": self.categories,
                "names": [self.names[i] for i in used.tolist()],
                "events": {"start_ns": part["start"][idx].tolist(), "end_ns": part["end"][idx].tolist(),
                           "lane": part["track"][idx].tolist(), "name": remap.tolist(),
                           "cat": part["cat"][idx].tolist(), "depth": part["depth"][idx].tolist(),
                           "merged": merged.tolist(), "flow": _flows(part["flow"], idx, merged)}}

    def _slices(self, start: int, end: int, max_events: int) -> dict:
        """Columns holding every slice overlapping start..end (and others), each with its "merged"
        weight: the whole index's rows near the window, or the v3 chunks it overlaps, or (the whole
        capture at a budget the export's overview was made for) that overview."""
        if self.ranged is None:
            s = self.all
            first = np.searchsorted(s["start"], start - self.longest, side="left")  # nothing longer starts earlier
            last = np.searchsorted(s["start"], end, side="right")
            return {c: (None if v is None else v[first:last]) for c, v in s.items()}
        lo, hi = self._capture
        overview = self.ranged.overview
        # Only a decimated overview stands in for the columns: a run with every slice in it still
        # reads (and checks) its columns, as from an older index.
        if start <= lo and end >= hi and max_events <= self.overview_events and \
                overview["start"].size < self.ranged.events:
            return overview
        return self._chunk_rows(start, end)

    def _chunk_rows(self, start: int, end: int) -> dict:
        """The rows of the chunks overlapping start..end, read by runs of adjacent chunks not kept yet."""
        first, chunk_start, chunk_end = self.ranged.chunks
        wanted = np.flatnonzero((chunk_start <= end) & (chunk_end >= start)).tolist()
        with self._lock:
            missing = [c for c in wanted if c not in self._chunks]
            for run in _runs(missing):
                last_row = int(first[run[-1] + 1]) if run[-1] + 1 < first.size else self.ranged.events
                rows = self.ranged.rows(int(first[run[0]]), last_row)
                for c in run:
                    a = int(first[c]) - int(first[run[0]])
                    b = (int(first[c + 1]) if c + 1 < first.size else self.ranged.events) - int(first[run[0]])
                    self._chunks[c] = {k: v[a:b] for k, v in rows.items()}
            parts = [self._chunks[c] for c in wanted]
            for c in wanted:
                self._chunks.move_to_end(c)
            while len(self._chunks) > max(len(wanted), 1) and \
                    sum(p["start"].size for p in self._chunks.values()) > self.CACHED_ROWS:
                self._chunks.popitem(last=False)
        out = {k: np.concatenate([p[k] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
               for k in ("start", "end", "track", "name", "cat", "flow", "depth")}
        out["merged"] = np.ones(out["start"].size, dtype=np.int64)
        return out


def _runs(chunks: List[int]) -> List[List[int]]:
    """Sorted chunk numbers grouped into runs of adjacent ones (one range read each)."""
    runs: List[List[int]] = []
    for c in chunks:
        if runs and runs[-1][-1] + 1 == c:
            runs[-1].append(c)
        else:
            runs.append([c])
    return runs


def _flows(flow: Optional[np.ndarray], idx: np.ndarray, merged: np.ndarray) -> list:
    """Each returned slice's flow id, -1 where it has none or stands for several (merged)."""
    if flow is None:
        return [-1] * int(idx.size)
    return np.where(merged > 1, -1, flow[idx]).tolist()


def decimate(start: np.ndarray, end: np.ndarray, track: np.ndarray, depth: np.ndarray, weight: np.ndarray,
             idx: Optional[np.ndarray], wstart: int, wend: int, max_events: int):
    """(rows kept, slices each stands for) of rows `idx` (None: every row): per (lane, depth, time
    bin) the longest slice, its weight the sum of its bin's (weight None: each slice stands for
    one).  Bins per row: the budget shared by the rows that have slices here, so the result fits
    max_events.  Also the export's overview (logdir.trace), over 2M+ slices: temporaries are made
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
