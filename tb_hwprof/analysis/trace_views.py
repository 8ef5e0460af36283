"""What the plugin's Overview, Phases and Timeline views show of a trace (no file format here).

- overview(): headline figures, GPU busy/idle per device, utilisation over time, the longest idle
  gaps and the advice, from a run's summary tables;
- phases_table() / compare_phases(): NVTX ranges per name, and matched between two runs;
- TimelineIndex: the trace's slices as sorted columns, cut to a time window and decimated to a
  budget of events (per lane and time bin the longest slice stays, with the count it stands for).
"""
from __future__ import annotations

import collections
import threading
from typing import Dict, List, Optional

import numpy as np
import pandas as pd

from ..core.plain import columns, plain, records
from ..core.slices import decimate, nesting_depths

DEFAULT_MAX_EVENTS = 5000
MAX_EVENTS = 200_000  # the most one /timeline response may hold
ACTIVITY_FIELDS = ("device", "span_ns", "busy_ns", "idle_ns", "busy_pct", "active_busy_pct", "kernel_ns",
                   "memcpy_ns", "memset_ns", "memcpy_share_pct", "first_op_ns", "last_op_ns")
PHASE_FIELDS = ("name", "domain", "style", "instances", "total_ns", "avg_ns", "med_ns", "min_ns", "max_ns",
                "kernels", "gpu_time_ns", "gpu_span_ns")


def overview(summaries: Dict[str, pd.DataFrame], headline: dict, advice: list, notes: list,
             timeline: Optional[dict], device_names: Dict[int, str]) -> dict:
    """The Overview document (docs/http_api.md /overview) of one run."""
    activity = summaries.get("gpu_activity")
    devices = records(activity, ACTIVITY_FIELDS)
    for d in devices:
        d["name"] = device_names.get(d["device"], "")
    return {"headline": {k: plain(v) for k, v in (headline or {}).items()}, "devices": devices,
            "utilisation": columns(summaries.get("gpu_utilisation"), ("device", "bin_start_ns", "bin_end_ns",
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
    a, b = plain(a), plain(b)
    return a / b if a is not None and b not in (None, 0) else None


def compare_phases(base: pd.DataFrame, run: pd.DataFrame) -> dict:
    """NVTX ranges matched by name: CPU wall time and projected GPU time of each run, speedups."""
    b, r = _by_name(base), _by_name(run)
    matched = []
    for name in [n for n in b.index if n in r.index]:
        row = {"name": name}
        for side, frame in (("base", b), ("run", r)):
            for col, out in (("instances", "instances"), ("total_ns", "ns"), ("gpu_time_ns", "gpu_ns")):
                row[f"{side}_{out}"] = plain(frame.at[name, col]) if col in frame.columns else None
        row["speedup"] = _ratio(row["base_ns"], row["run_ns"])
        row["gpu_speedup"] = _ratio(row["base_gpu_ns"], row["run_gpu_ns"])
        matched.append(row)
    matched.sort(key=lambda m: -max(m["base_ns"] or 0, m["run_ns"] or 0))
    only = lambda f, other: [{"name": n, "total_ns": plain(f.at[n, "total_ns"])} for n in f.index if n not in other.index]
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
