"""Bottleneck label per kernel, following Nsight Compute's speed-of-light rule.

Thresholds are Nsight Compute's (SpeedOfLight rule): a unit at >= 80% of peak is
high throughput; both < 60% is latency-bound (small-grid when there is less than
one wave per SM); otherwise a gap of >= 10 points names the busier side;
otherwise balanced.  Ties at high throughput go to compute, as Nsight Compute does.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

HIGH = 80.0
LOW = 60.0
GAP = 10.0
GOOD_OCCUPANCY = 50.0
LABELS = ("compute", "memory", "latency", "small-grid", "balanced", "unknown")
MEMORY_LEVELS = (("DRAM", "dram_throughput_pct"), ("L2", "l2_throughput_pct"), ("L1", "l1_throughput_pct"))


def _pct(v: float) -> str:
    return f"{v:.0f}%" if not math.isnan(v) else "n/a"


def busiest_memory_level(row) -> str:
    """The tool's own breakdown where it gave one, else the busiest of DRAM / L2 / L1 throughput."""
    if row.get("busiest_memory_unit"):
        return row["busiest_memory_unit"]
    levels = [(row[col], name) for name, col in MEMORY_LEVELS if not math.isnan(row[col])]
    return max(levels)[1] if levels else ""


def bound_label(sm: float, mem: float, waves: float) -> str:
    if math.isnan(sm) or math.isnan(mem):
        return "unknown"
    if sm >= HIGH or mem >= HIGH:
        return "compute" if sm >= mem else "memory"
    if sm < LOW and mem < LOW:
        return "small-grid" if not math.isnan(waves) and waves < 1 else "latency"
    if sm - mem >= GAP:
        return "compute"
    if mem - sm >= GAP:
        return "memory"
    return "balanced"


def occupancy_note(row, label: str) -> str:
    achieved, theoretical = row["achieved_occupancy_pct"], row["theoretical_occupancy_pct"]
    limiter = row["occupancy_limiter"]
    if math.isnan(achieved) and math.isnan(theoretical):
        return ""
    parts = [f"occupancy {_pct(achieved)} achieved of {_pct(theoretical)} theoretical"]
    if limiter:
        parts.append(f"theoretical limit set by {limiter}")
    low = not math.isnan(achieved) and achieved < GOOD_OCCUPANCY
    if label in ("memory", "compute") and low:
        parts.append(f"the kernel is already {label}-bound, so raising occupancy is not the lever")
    elif label == "latency" and low:
        parts.append("low occupancy leaves too few warps to hide latency: raising it is a lever")
    return "; ".join(parts)


def bound_reason(row, label: str, level: str) -> str:
    sm, mem, waves = row["sm_throughput_pct"], row["memory_throughput_pct"], row["waves_per_sm"]
    occ = row["achieved_occupancy_pct"]
    occ_part = ""
    if not math.isnan(occ):
        limiting = occ < GOOD_OCCUPANCY
        occ_part = f"; occupancy {_pct(occ)} {'may limit it' if limiting else 'is not the limiter'}"
    if label == "unknown":
        missing = [n for n, v in (("SM throughput", sm), ("memory throughput", mem)) if math.isnan(v)]
        return f"unknown: the report lacks {' and '.join(missing)} (collect the SpeedOfLight section)"
    if label == "memory":
        where = f" ({level})" if level else ""
        return f"memory-bound{where}: memory {_pct(mem)} of peak vs SM {_pct(sm)}{occ_part}"
    if label == "compute":
        return f"compute-bound: SM {_pct(sm)} of peak vs memory {_pct(mem)}{occ_part}"
    if label == "small-grid":
        return (f"small grid: {waves:.2f} waves per SM cannot fill the GPU; "
                f"SM {_pct(sm)} and memory {_pct(mem)} both below {LOW:.0f}%")
    if label == "latency":
        return (f"latency-bound: SM {_pct(sm)} and memory {_pct(mem)} both below {LOW:.0f}% of peak"
                f"{occ_part}")
    return f"balanced: SM {_pct(sm)} and memory {_pct(mem)} within {GAP:.0f} points{occ_part}"


def bound_labels(kernels: pd.DataFrame) -> np.ndarray:
    """`bound_label` over a whole table at once (same rule, same order of tests)."""
    sm, mem, waves = (kernels[c].to_numpy(dtype=float) for c in ("sm_throughput_pct", "memory_throughput_pct",
                                                                   "waves_per_sm"))
    with np.errstate(invalid="ignore"):
        unknown = np.isnan(sm) | np.isnan(mem)
        high = (sm >= HIGH) | (mem >= HIGH)
        low = (sm < LOW) & (mem < LOW)
        conditions = [unknown, high & (sm >= mem), high, low & (waves < 1), low, sm - mem >= GAP, mem - sm >= GAP]
    choices = ["unknown", "compute", "memory", "small-grid", "latency", "compute", "memory"]
    return np.select(conditions, choices, default="balanced").astype(object)


def classify_kernels(kernels: pd.DataFrame) -> pd.DataFrame:
    """Fill bound, bound_level, bound_reason and occupancy_note in place.

    Labels are vectorised; the sentences are formatted only for rows that have numbers to
    quote, so a million-kernel trace without counters costs one constant string."""
    if kernels.empty:
        return kernels
    labels = bound_labels(kernels)
    levels = np.full(len(kernels), "", dtype=object)
    reasons = np.empty(len(kernels), dtype=object)
    notes = np.full(len(kernels), "", dtype=object)
    unknown = labels == "unknown"
    sm_missing = kernels["sm_throughput_pct"].isna().to_numpy()
    mem_missing = kernels["memory_throughput_pct"].isna().to_numpy()
    for sm_gone, mem_gone in ((True, True), (True, False), (False, True)):
        rows = unknown & (sm_missing == sm_gone) & (mem_missing == mem_gone)
        if rows.any():
            reasons[rows] = bound_reason({"sm_throughput_pct": math.nan if sm_gone else 0.0,
                                          "memory_throughput_pct": math.nan if mem_gone else 0.0,
                                          "waves_per_sm": math.nan, "achieved_occupancy_pct": math.nan}, "unknown", "")
    known = np.flatnonzero(~unknown)
    for i, row in zip(known, kernels.iloc[known].to_dict("records")):
        levels[i] = busiest_memory_level(row) if labels[i] == "memory" else ""
        reasons[i] = bound_reason(row, labels[i], levels[i])
    has_occupancy = np.flatnonzero((kernels["achieved_occupancy_pct"].notna()
                                    | kernels["theoretical_occupancy_pct"].notna()).to_numpy())
    for i, row in zip(has_occupancy, kernels.iloc[has_occupancy].to_dict("records")):
        notes[i] = occupancy_note(row, labels[i])
    kernels["bound"], kernels["bound_level"] = labels, levels
    kernels["bound_reason"], kernels["occupancy_note"] = reasons, notes
    return kernels
