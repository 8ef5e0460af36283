"""What the plugin's Overview, Phases and Timeline views show of a trace (no file format here).

- overview(): headline figures, GPU busy/idle per device, utilisation over time, the longest idle
  gaps and the advice, from a run's summary tables;
- phases_table() / compare_phases(): NVTX ranges per name, and matched between two runs;
- TimelineIndex: the trace's slices as sorted columns, cut to a time window and decimated to a
  budget of events (per lane and time bin the longest slice stays, with the count it stands for).
"""
from __future__ import annotations

import math
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
    """Sorted slices of one run's trace (start, end, track, name, cat) plus per-slice nesting depth."""

    def __init__(self, index: dict):
        self.start, self.end = index["start"], index["end"]
        self.track, self.name, self.cat = index["track"], index["name"], index["cat"]
        # The tracer's correlation id joining an API call to the GPU work it launched (-1: none);
        # None for an index written before flows were kept, or read without them.
        self.flow = index.get("flow")
        meta = index["meta"]
        self.names: List[str] = meta["names"]
        self.categories: List[str] = meta["categories"]
        self.tracks: List[dict] = meta["tracks"]
        self.depth = self._depths()
        self.longest = int((self.end - self.start).max()) if self.start.size else 0

    def _depths(self) -> np.ndarray:
        """Nesting depth of each slice in its track (slices are sorted by start, longer first on ties,
        so a slice's depth is how many earlier slices of its track have not ended by its start)."""
        depth = np.zeros(self.start.size, dtype=np.int16)
        for t in pd.unique(self.track).tolist():
            idx = np.flatnonzero(self.track == t)
            ends = np.sort(self.end[idx])
            ended = np.searchsorted(ends, self.start[idx], side="right")
            depth[idx] = np.clip(np.arange(idx.size) - ended, 0, None)
        return depth

    def capture(self):
        return [int(self.start.min()), int(self.end.max())] if self.start.size else [0, 0]

    def window(self, start: Optional[int], end: Optional[int], max_events: int) -> dict:
        lo, hi = self.capture()
        start = lo if start is None else int(start)
        end = hi if end is None else max(int(end), start + 1)
        first = np.searchsorted(self.start, start - self.longest, side="left")  # nothing longer starts earlier
        last = np.searchsorted(self.start, end, side="right")
        idx = np.arange(first, last)
        idx = idx[self.end[idx] >= start]
        total = int(idx.size)
        merged = np.ones(idx.size, dtype=np.int64)
        if idx.size > max_events:
            idx, merged = self._decimate(idx, start, end, max_events)
        used = np.sort(pd.unique(self.name[idx]))
        remap = np.searchsorted(used, self.name[idx])
        return {"start_ns": start, "end_ns": end, "capture_ns": [lo, hi], "in_window": total,
                "returned": int(idx.size), "decimated": bool(idx.size < total),
                "lanes": [{"id": i, **t} for i, t in enumerate(self.tracks)], "categories": self.categories,
                "names": [self.names[i] for i in used.tolist()],
                "events": {"start_ns": self.start[idx].tolist(), "end_ns": self.end[idx].tolist(),
                           "lane": self.track[idx].tolist(), "name": remap.tolist(), "cat": self.cat[idx].tolist(),
                           "depth": self.depth[idx].tolist(), "merged": merged.tolist(),
                           "flow": self._flows(idx, merged)}}

    def _flows(self, idx: np.ndarray, merged: np.ndarray) -> list:
        """Each returned slice's flow id, -1 where it has none or stands for several (merged)."""
        if self.flow is None:
            return [-1] * int(idx.size)
        return np.where(merged > 1, -1, self.flow[idx]).tolist()

    def _decimate(self, idx: np.ndarray, start: int, end: int, max_events: int):
        """Per (lane, depth, time bin) the longest slice, and how many slices its bin held.  Bins per
        row: the budget shared by the rows that have slices here, so the result fits max_events."""
        rows = self.track[idx].astype(np.int64) * 64 + np.minimum(self.depth[idx], 63)
        row_ids, row_of = np.unique(rows, return_inverse=True)
        bins = max(1, max_events // max(1, row_ids.size))
        width = max(1, end - start)
        b = np.clip((np.maximum(self.start[idx], start) - start) * bins // width, 0, bins - 1)
        key = row_of.astype(np.int64) * bins + b
        order = np.lexsort((-(self.end[idx] - self.start[idx]), key))
        keys, first, counts = np.unique(key[order], return_index=True, return_counts=True)
        picked, counts = idx[order[first]], counts
        if picked.size > max_events:  # more rows than budget: the longest slices win
            keep = np.argsort(-(self.end[picked] - self.start[picked]), kind="stable")[:max_events]
            picked, counts = picked[keep], counts[keep]
        resort = np.lexsort((-(self.end[picked]), self.start[picked]))
        return picked[resort], counts[resort]
