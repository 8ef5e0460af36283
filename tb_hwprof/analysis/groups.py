"""Views over a kernels table: launches grouped by kernel, time per bound label, roofline points.

Vectorised throughout: a table may hold 100,000 launches with as many distinct names, so no
Python loop runs per group.  Missing values stay missing (None), never 0.
"""
from __future__ import annotations

import math
from typing import List, Optional

import pandas as pd

from ..core.plain import records

TOP_LAUNCHES = 20
TOP_FIELDS = ("launch_id", "name", "duration_ns", "pct_time", "bound", "bound_level",
              "bound_reason", "occupancy_note")
POINT_FIELDS = ("launch_id", "name", "device", "ai_dram", "ai_l2", "ai_l1", "flop_per_s",
                "duration_ns", "bound", "bound_reason", "roofline_precision", "binding_roof", "peak_flop_per_s",
                "attainable_flop_per_s")
AI_COLUMNS = ("ai_dram", "ai_l2", "ai_l1")


def _none(value) -> Optional[float]:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def total_time(kernels: pd.DataFrame) -> Optional[float]:
    return _none(kernels["duration_ns"].sum(min_count=1))


def bound_labels(kernels: pd.DataFrame) -> pd.Series:
    """The bound column with empty labels shown as 'unknown'."""
    return kernels["bound"].replace("", "unknown").fillna("unknown")


def dominant_label(keys: pd.Series, labels: pd.Series, durations: pd.Series) -> pd.Series:
    """Per key, the label covering most time; launch count breaks ties and decides when untimed."""
    frame = pd.DataFrame({"key": keys.values, "label": labels.values,
                          "time": durations.fillna(0).values, "n": 1})
    per = frame.groupby(["key", "label"], sort=False, as_index=False)[["time", "n"]].sum()
    per = per.sort_values(["time", "n", "label"], ascending=[False, False, True], kind="stable")
    return per.drop_duplicates("key").set_index("key")["label"]


def kernel_groups(kernels: pd.DataFrame) -> List[dict]:
    """Launches grouped by `name`, biggest total time first (untimed groups last)."""
    if kernels.empty:
        return []
    g = kernels.groupby("name", sort=False)["duration_ns"]
    out = pd.DataFrame({
        "demangled_name": kernels.groupby("name", sort=False)["demangled_name"].first(),
        "calls": g.size(), "total_ns": g.sum(min_count=1), "mean_ns": g.mean(),
        "min_ns": g.min(), "max_ns": g.max(),
    })
    total = total_time(kernels)
    out["pct_time"] = 100.0 * out["total_ns"] / total if total else math.nan
    out["bound"] = dominant_label(kernels["name"], bound_labels(kernels), kernels["duration_ns"])
    out = out.rename_axis("name").reset_index()
    out = out.sort_values("total_ns", ascending=False, na_position="last", kind="stable")
    cols = ["name", "demangled_name", "calls", "total_ns", "mean_ns", "min_ns", "max_ns", "pct_time", "bound"]
    return records(out[cols])


def bottleneck_summary(kernels: pd.DataFrame, top: int = TOP_LAUNCHES) -> dict:
    """Kernel time per bound label, and the `top` longest launches with their reasons."""
    total = total_time(kernels)
    labels = bound_labels(kernels)
    by = pd.DataFrame({"bound": labels, "time_ns": kernels["duration_ns"], "launches": 1})
    by = by.groupby("bound", sort=False).agg(time_ns=("time_ns", lambda s: s.sum(min_count=1)),
                                             launches=("launches", "sum")).reset_index()
    by["pct_time"] = 100.0 * by["time_ns"] / total if total else math.nan
    by = by.sort_values(["time_ns", "launches"], ascending=False, na_position="last", kind="stable")
    longest = kernels.dropna(subset=["duration_ns"]).nlargest(top, "duration_ns", keep="first")
    longest = longest.assign(pct_time=100.0 * longest["duration_ns"] / total if total else math.nan,
                             bound=bound_labels(longest))
    return {"total_ns": total,
            "by_bound": records(by[["bound", "time_ns", "pct_time", "launches"]]),
            "top": records(longest[list(TOP_FIELDS)]),
            "top_kernels": top_kernels(kernels, total, top)}


TOP_KERNEL_FIELDS = ("name", "launches", "total_ns", "pct_time", "mean_ns", "max_ns", "longest_launch_id",
                     "bound", "bound_level", "bound_reason", "occupancy_note")


def top_kernels(kernels: pd.DataFrame, total: Optional[float], top: int = TOP_LAUNCHES) -> List[dict]:
    """The `top` kernels by total time, one row per name (20 launches of one kernel are one row):
    launch count, time, the dominant bound label, and the reason and occupancy note of its longest
    launch (the one the row opens)."""
    timed = kernels.dropna(subset=["duration_ns"])
    if timed.empty:
        return []
    g = timed.groupby("name", sort=False)["duration_ns"]
    out = pd.DataFrame({"launches": g.size(), "total_ns": g.sum(), "mean_ns": g.mean(), "max_ns": g.max()})
    out["pct_time"] = 100.0 * out["total_ns"] / total if total else math.nan
    out["bound"] = dominant_label(timed["name"], bound_labels(timed), timed["duration_ns"])
    longest = timed.loc[timed.groupby("name", sort=False)["duration_ns"].idxmax()].set_index("name")
    out["longest_launch_id"] = longest["launch_id"]
    for field in ("bound_level", "bound_reason", "occupancy_note"):
        out[field] = longest[field]
    out = out.rename_axis("name").reset_index()
    out = out.sort_values(["total_ns", "name"], ascending=[False, True], kind="stable").head(top)
    return records(out[list(TOP_KERNEL_FIELDS)])


def roofline_points(kernels: pd.DataFrame, above_roofs: bool = False) -> List[dict]:
    """Launches that can be placed on a roofline: FLOP/s and at least one intensity, below the
    device's highest roof (above_roofs=True: those above it instead, an error in the data)."""
    from .roofline import ABOVE_ROOFS
    has_ai = kernels[list(AI_COLUMNS)].notna().any(axis=1)
    above = kernels["binding_roof"].to_numpy(dtype=object) == ABOVE_ROOFS
    placed = kernels[kernels["flop_per_s"].notna() & has_ai & (above if above_roofs else ~above)]
    from .bound_terms import kernel_bound
    points = records(placed[[c for c in POINT_FIELDS if c in placed.columns]])
    for p in points:  # the device id is a float column (NaN when unknown); JSON wants an int
        p["device"] = None if p["device"] is None else int(p["device"])
        judged = kernel_bound(p)  # both methods' labels, and the note where they disagree
        p["roofline_bound"], p["roofline_reason"] = judged["roofline"]["label"], judged["roofline"]["reason"]
        p["bound_note"] = judged["note"]
    return points
