"""Headline figures of a profile: what the Scalars tab plots across runs."""
from __future__ import annotations

import math
from typing import Dict, Optional, Tuple

import numpy as np
import pandas as pd

from .bottleneck import LABELS

WEIGHTED = {
    "sm_throughput_pct": "sm_throughput_pct_time_weighted",
    "memory_throughput_pct": "memory_throughput_pct_time_weighted",
    "achieved_occupancy_pct": "achieved_occupancy_pct_time_weighted",
}


def time_weighted_mean(kernels: pd.DataFrame, column: str) -> float:
    """Mean of `column` weighted by duration, over launches that have both."""
    both = kernels[["duration_ns", column]].dropna()
    total = both["duration_ns"].sum()
    return float((both[column] * both["duration_ns"]).sum() / total) if total > 0 else math.nan


def merge(starts, ends) -> Tuple[np.ndarray, np.ndarray]:
    """The union of [start, end) intervals as sorted disjoint islands (touching ones merged),
    vectorised: a sort (skipped when the starts are in order, as a trace's kernels are) and a
    running max, no Python loop."""
    starts, ends = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    if starts.size == 0:
        return starts, ends
    if _already_islands(starts, ends):  # idle gaps, islands merged before: nothing to do, nothing copied
        return starts, ends
    if starts.size > 1 and not (starts[1:] >= starts[:-1]).all():
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    new = np.empty(starts.size, dtype=bool)
    new[0] = True
    new[1:] = starts[1:] > reach[:-1]  # an island starts where an interval begins after all before it ended
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, starts.size - 1)
    return starts[first], reach[last]


def _already_islands(starts: np.ndarray, ends: np.ndarray) -> bool:
    """Whether merge() would return the intervals as they are: each starts after the one before it
    ended (not touching) and the ends rise, so the running max of the ends is the ends."""
    return starts.size < 2 or bool((starts[1:] > ends[:-1]).all() and (ends[1:] >= ends[:-1]).all())


def interval_union_ns(starts, ends) -> int:
    """Length of the union of [start, end) intervals."""
    s, e = merge(starts, ends)
    return int(np.clip(e - s, 0, None).sum())


def masked_union_ns(starts: np.ndarray, ends: np.ndarray, mask: np.ndarray) -> int:
    """interval_union_ns of the intervals `mask` selects, their starts in order, without copying them
    out: a running max of the selected ends (the others count as ending at -inf), islands starting
    where a selected interval begins after all selected before it ended (a million launches: one
    8 MB array where the copies and islands took ~55 MB)."""
    if starts.size > 1 and not (starts[1:] >= starts[:-1]).all():
        return interval_union_ns(starts[mask], ends[mask])
    if not mask.any():
        return 0
    reach = np.where(mask, ends, np.iinfo(np.int64).min).astype(np.int64, copy=False)
    np.maximum.accumulate(reach, out=reach)
    new = mask.copy()
    new[1:] &= starts[1:] > reach[:-1]
    first = np.flatnonzero(new)
    del new
    # Island j runs from its first start to the reach just before island j + 1 begins (rows between
    # islands are unselected and leave the reach as it was), the last one to the final reach.
    lengths = reach[first[1:] - 1] - starts[first[:-1]]
    last = int(reach[-1]) - int(starts[first[-1]])
    return int(np.clip(lengths, 0, None).sum()) + max(last, 0)


ACTIVITY_KINDS = ("kernel", "memcpy", "memset")
GPU_ACTIVITY_COLUMNS = ["device", "span_start_ns", "span_end_ns", "span_ns", "busy_ns", "idle_ns", "busy_pct",
                        "kernel_ns", "memcpy_ns", "memset_ns", "memcpy_share_pct",
                        "first_op_ns", "last_op_ns", "active_busy_pct"]



def gpu_activity(device: np.ndarray, kind_code: np.ndarray, kinds, starts: np.ndarray, ends: np.ndarray,
                 span: Tuple[int, int], islands: Optional[Dict[int, Tuple[np.ndarray, np.ndarray]]] = None
                 ) -> pd.DataFrame:
    """Per device: busy time (union of kernel, memcpy and memset intervals) over the capture `span`.

    Interval i runs from starts[i] to ends[i] (int64 ns) on device[i]; its kind (one of
    ACTIVITY_KINDS) is kinds[kind_code[i]]: arrays, no table of a million rows.  islands: each
    device's merge() of its intervals when the caller has them already."""
    rows = []
    span_start, span_end = int(span[0]), int(span[1])
    span_ns = max(span_end - span_start, 0)
    code_of = {name: i for i, name in enumerate(kinds)}
    for dev in np.sort(pd.unique(device)):
        on = device == dev
        s, e, k = (starts, ends, kind_code) if on.all() else (starts[on], ends[on], kind_code[on])  # one GPU: no copies
        own_islands = islands[int(dev)] if islands is not None else merge(s, e)
        busy = int(np.clip(own_islands[1] - own_islands[0], 0, None).sum())
        first, last = int(s.min()), int(e.max())
        row = {"device": int(dev), "span_start_ns": span_start, "span_end_ns": span_end, "span_ns": span_ns,
               "busy_ns": busy, "idle_ns": max(span_ns - busy, 0),
               "busy_pct": 100.0 * busy / span_ns if span_ns else math.nan,
               "first_op_ns": first, "last_op_ns": last,
               "active_busy_pct": 100.0 * busy / (last - first) if last > first else math.nan}
        for name in ACTIVITY_KINDS:
            own = k == code_of.get(name, len(kinds))  # len(kinds): no interval of that kind
            n = int(own.sum())
            # One kind only (a kernel trace): its union is the busy time, merged once already.
            row[f"{name}_ns"] = busy if n == own.size else masked_union_ns(s, e, own) if n else 0
        row["memcpy_share_pct"] = 100.0 * row["memcpy_ns"] / busy if busy else math.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=GPU_ACTIVITY_COLUMNS)


def activity_scalars(activity: pd.DataFrame) -> Dict[str, float]:
    """GPU busy %, idle time and memcpy share over all devices (sums of per-device times)."""
    out: Dict[str, float] = {}
    span, busy = float(activity["span_ns"].sum()), float(activity["busy_ns"].sum())
    if span > 0:
        out["gpu_busy_pct"] = 100.0 * busy / span
        out["gpu_idle_ms"] = (span - busy) / 1e6
    if busy > 0:
        out["memcpy_share_of_busy_pct"] = 100.0 * float(activity["memcpy_ns"].sum()) / busy
    return out


def headline_scalars(kernels: pd.DataFrame, summaries: Optional[Dict[str, pd.DataFrame]] = None) -> Dict[str, float]:
    """Scalar name -> value; figures the report cannot support are left out, not zeroed."""
    out: Dict[str, float] = {"kernel_launches": float(len(kernels))}
    activity = (summaries or {}).get("gpu_activity")
    if activity is not None and len(activity):
        out.update(activity_scalars(activity))
    durations = kernels["duration_ns"].dropna()
    if len(durations):
        out["total_kernel_time_ms"] = float(durations.sum()) / 1e6
    for column, name in WEIGHTED.items():
        value = time_weighted_mean(kernels, column)
        if not math.isnan(value):
            out[name] = value
    if len(durations):
        by_bound = time_per_value(kernels["bound"], kernels["duration_ns"])
        for label in LABELS:
            if label in by_bound:
                out[f"bound_time_ms/{label}"] = by_bound[label] / 1e6
    return out


def time_per_value(labels: pd.Series, durations: pd.Series) -> Dict[str, float]:
    """Summed duration (missing ones as 0) per distinct label, missing labels left out: groupby().sum()
    by the str objects the rows share (columnar.object_codes) and one bincount, not by hashing a
    million strings (~0.45 s per million launches)."""
    from ..core.columnar import object_factorize
    codes, distinct = object_factorize(labels.to_numpy(dtype=object))
    timed = durations.to_numpy(dtype=float, na_value=np.nan)
    labelled = codes >= 0
    sums = np.bincount(codes[labelled], weights=np.where(np.isnan(timed), 0.0, timed)[labelled],
                       minlength=len(distinct))
    return {label: float(total) for label, total in zip(distinct.tolist(), sums.tolist())}
