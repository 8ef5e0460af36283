"""Bottleneck label per kernel, following Nsight Compute's speed-of-light rule.

Thresholds are Nsight Compute's (SpeedOfLight rule): a unit at >= 80% of peak is
high throughput; both < 60% is latency-bound (small-grid when there is less than
one wave per SM); otherwise a gap of >= 10 points names the busier side;
otherwise balanced.  Ties at high throughput go to compute, as Nsight Compute does.
"""
from __future__ import annotations

import math

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


def classify_row(row):
    label = bound_label(row["sm_throughput_pct"], row["memory_throughput_pct"], row["waves_per_sm"])
    level = busiest_memory_level(row) if label == "memory" else ""
    return label, level, bound_reason(row, label, level), occupancy_note(row, label)


def classify_kernels(kernels: pd.DataFrame) -> pd.DataFrame:
    """Fill bound, bound_level, bound_reason and occupancy_note in place."""
    if kernels.empty:
        return kernels
    results = [classify_row(row) for row in kernels.to_dict("records")]
    for i, col in enumerate(("bound", "bound_level", "bound_reason", "occupancy_note")):
        kernels[col] = [r[i] for r in results]
    return kernels
