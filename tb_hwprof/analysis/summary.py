"""Headline figures of a profile: what the Scalars tab plots across runs."""
from __future__ import annotations

import math
from typing import Dict

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


def headline_scalars(kernels: pd.DataFrame) -> Dict[str, float]:
    """Scalar name -> value; figures the report cannot support are left out, not zeroed."""
    out: Dict[str, float] = {"kernel_launches": float(len(kernels))}
    durations = kernels["duration_ns"].dropna()
    if len(durations):
        out["total_kernel_time_ms"] = float(durations.sum()) / 1e6
    for column, name in WEIGHTED.items():
        value = time_weighted_mean(kernels, column)
        if not math.isnan(value):
            out[name] = value
    if len(durations):
        by_bound = kernels.groupby("bound")["duration_ns"].sum()
        for label in LABELS:
            if label in by_bound.index:
                out[f"bound_time_ms/{label}"] = float(by_bound[label]) / 1e6
    return out
