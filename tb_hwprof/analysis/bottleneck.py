"""Bottleneck label per kernel, following Nsight Compute's speed-of-light rule.

Thresholds are Nsight Compute's (SpeedOfLight rule): a unit at >= 80% of peak is
high throughput; both < 60% is latency-bound (small-grid when there is less than
one wave per SM); otherwise a gap of >= 10 points names the busier side;
otherwise balanced.  Ties at high throughput go to compute, as Nsight Compute does.

The sentences (bound_reason, occupancy_note) are phrased for the capture (`Capture`): a grid of
less than one wave is "grid-limited" (no register or shared-memory change raises its occupancy);
a launch without % of peak names what its tool lacks and which tool measures it.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

HIGH = 80.0
LOW = 60.0
GAP = 10.0
GOOD_OCCUPANCY = 50.0
LABELS = ("compute", "memory", "latency", "small-grid", "balanced", "unknown")
MEMORY_LEVELS = (("DRAM", "dram_throughput_pct"), ("L2", "l2_throughput_pct"), ("L1", "l1_throughput_pct"))
# Achieved occupancy within this share of the grid's cap is "what the launch allows" (the last
# waves of a one-wave grid drain alone, so even a perfect launch ends a little below its cap).
AT_CAP = 0.9


@dataclasses.dataclass(frozen=True)
class Capture:
    """What the sentences need to know about the capture the kernels come from."""

    tool: str = ""  # provenance.tool, lower case: "ncu", "nsys", "rocprofv3", "rocprof-compute", ...
    gpu_api: str = ""  # "CUDA", "HIP" or "" (analysis/context.py gpu_api)
    trace: bool = False  # a tracer's capture (a timeline): launches have timestamps, no counters

    @property
    def occupancy_gpu_wide(self) -> bool:
        """AMD's achieved occupancy averages every CU's wave slots (rocprof-compute's "Wavefront
        Occupancy"); Nsight Compute's averages only the SMs that ran (pct_of_peak_sustained_active)."""
        return self.gpu_api == "HIP"


NCU = Capture(tool="ncu", gpu_api="CUDA")  # the wording when no capture is given (Nsight Compute's terms)


def capture_of(profile) -> Capture:
    from .context import gpu_api
    tool = (profile.provenance.tool or "").lower()
    return Capture(tool=tool, gpu_api=gpu_api(profile, tool), trace=profile.timeline is not None)


TOOL_NAMES = {"nsys": "Nsight Systems", "ncu": "Nsight Compute"}  # provenance.tool -> what users call it


def not_measured(capture: Capture, missing: str) -> str:
    """The reason of a launch without % of peak: what its tool lacks and which tool measures it."""
    if capture.tool == "ncu":
        return f"unknown: the report lacks {missing} (collect the SpeedOfLight section)"
    if capture.tool in ("rocprof-compute", "omniperf"):
        return (f"unknown: the workload lacks {missing} (rocprof-compute derives % of peak from its counters and each "
                "dispatch's start and end: re-run `rocprof-compute profile` where either is missing)")
    tool = TOOL_NAMES.get(capture.tool, capture.tool or "this tool")
    what = (f"not measured (trace): {tool} records when each kernel ran, not how busy the GPU's units were"
            if capture.trace else f"not measured: {tool}'s counters here give no % of peak")
    if capture.gpu_api == "HIP":
        return (f"{what}; profile the kernel with rocprof-compute on an Instinct GPU "
                "(`rocprof-compute profile -n <name> -k <kernel> -- <app>`)")
    return f"{what}; profile the kernel with Nsight Compute (`ncu --set full -k <kernel> <app>`)"


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


def grid_limited(row) -> bool:
    """Fewer waves than the GPU holds at once: the grid, not registers or shared memory, caps occupancy."""
    waves = row["waves_per_sm"]
    return not math.isnan(waves) and waves < 1


def grid_note(row, capture: Capture) -> str:
    """Why a grid of less than one wave caps occupancy, with its figures."""
    waves, achieved, blocks = row["waves_per_sm"], row["achieved_occupancy_pct"], row["grid_size"]
    lever = "a larger grid or more work per launch"
    if not capture.occupancy_gpu_wide:  # the figure covers busy SMs only: the grid leaves slots empty
        return (f"grid-limited: {_count(blocks, 'block', 'makes', 'make')} {waves:.2f} waves per SM, fewer than the "
                "SMs hold at once: part of the GPU sits unused however busy the SMs that ran are; more blocks (a "
                "larger grid, or smaller blocks) or more work per launch, not fewer registers, raises its use")
    cap = 100 * waves
    note = (f"grid-limited: {_count(blocks, 'work-group', 'fills', 'fill')} {cap:.0f}% of the GPU's wave slots "
            f"({waves:.2f} waves per CU), so occupancy cannot exceed {cap:.0f}% whatever the registers")
    if math.isnan(achieved):
        return f"{note}; {lever} raises that cap"
    if achieved >= AT_CAP * cap:
        return f"{note}; achieved {_pct(achieved)} is what the launch allows: {lever}, not fewer registers, raises it"
    return f"{note}; achieved {_pct(achieved)} is below that cap; {lever} raises the cap"


def _count(n: float, noun: str, verb_one: str, verb_many: str) -> str:
    """'1 block makes', '64 blocks make'."""
    return f"{n:.0f} {noun} {verb_one}" if n == 1 else f"{n:.0f} {noun}s {verb_many}"


# Theoretical occupancy at (or within rounding of) the device's warp slots: no block limit lowers it.
FULL_OCCUPANCY = 99.95


def occupancy_figures(achieved: float, theoretical: float) -> str:
    """'occupancy 79% achieved of 100% theoretical', saying which figure the capture lacks."""
    if math.isnan(achieved) and math.isnan(theoretical):
        return ""
    if math.isnan(achieved):
        return f"occupancy {_pct(theoretical)} theoretical, achieved not measured"
    if math.isnan(theoretical):
        return f"occupancy {_pct(achieved)} achieved, theoretical not reported"
    return f"occupancy {_pct(achieved)} achieved of {_pct(theoretical)} theoretical"


def limit_phrase(theoretical: float, limiter: str) -> str:
    """What caps theoretical occupancy; at 100% nothing does (Nsight Compute's Occupancy rule:
    'not impacted by any block limit'), whichever limits tie at the device's maximum."""
    if not math.isnan(theoretical) and theoretical >= FULL_OCCUPANCY:
        reach = f" ({limiter} allow every warp slot)" if limiter else ""
        return f"theoretical occupancy not limited by any block limit{reach}"
    return f"theoretical limit set by {limiter}" if limiter else ""


def occupancy_note(row, label: str, capture: Capture = NCU) -> str:
    achieved, theoretical = row["achieved_occupancy_pct"], row["theoretical_occupancy_pct"]
    limiter = row["occupancy_limiter"]
    if math.isnan(achieved) and math.isnan(theoretical) and not grid_limited(row):
        return ""
    parts = [part for part in (occupancy_figures(achieved, theoretical), limit_phrase(theoretical, limiter)) if part]
    low = not math.isnan(achieved) and achieved < GOOD_OCCUPANCY
    if grid_limited(row):
        parts.append(grid_note(row, capture))
    elif label in ("memory", "compute") and low:
        parts.append(f"the kernel is already {label}-bound, so raising occupancy is not the lever")
    elif label == "latency" and low:
        parts.append("low occupancy leaves too few warps to hide latency: raising it is a lever")
    return "; ".join(parts)


def occupancy_clause(row, capture: Capture) -> str:
    """'; occupancy 48% ...' for a reason sentence ('' without an achieved occupancy)."""
    occ, waves = row["achieved_occupancy_pct"], row["waves_per_sm"]
    if math.isnan(occ):
        return ""
    if grid_limited(row) and capture.occupancy_gpu_wide:
        return f"; occupancy {_pct(occ)} is grid-limited (at most {100 * waves:.0f}%)"
    if grid_limited(row):  # Nsight Compute's figure is that of the busy SMs: the grid is the limit
        return f"; occupancy {_pct(occ)} on the SMs that ran, the grid making {waves:.2f} waves per SM"
    return f"; occupancy {_pct(occ)} {'may limit it' if occ < GOOD_OCCUPANCY else 'is not the limiter'}"


def bound_reason(row, label: str, level: str, capture: Capture = NCU) -> str:
    sm, mem, waves = row["sm_throughput_pct"], row["memory_throughput_pct"], row["waves_per_sm"]
    occ_part = occupancy_clause(row, capture)
    if label == "unknown":
        missing = [n for n, v in (("SM throughput", sm), ("memory throughput", mem)) if math.isnan(v)]
        return not_measured(capture, " and ".join(missing))
    if label == "memory":
        where = f" ({level})" if level else ""
        return f"memory-bound{where}: memory {_pct(mem)} of peak vs SM {_pct(sm)}{occ_part}"
    if label == "compute":
        return f"compute-bound: SM {_pct(sm)} of peak vs memory {_pct(mem)}{occ_part}"
    if label == "small-grid":
        unit = "CU" if capture.occupancy_gpu_wide else "SM"
        return (f"small grid: {waves:.2f} waves per {unit} cannot fill the GPU; "
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


def classify_profile(profile) -> pd.DataFrame:
    """classify_kernels on the profile's kernels, the sentences phrased for its capture; a
    latency-bound launch's reason names its top warp stall where the report measured stalls."""
    kernels = classify_kernels(profile.kernels, capture_of(profile))
    name_top_stalls(kernels, profile.raw_metrics)
    return kernels


def name_top_stalls(kernels: pd.DataFrame, raw_metrics) -> None:
    """Append Nsight Compute's largest warp stall reason (WarpStateStats, cycles per issued
    instruction) to the reason of each latency-bound launch: what the warps wait on is what
    explains the latency.  Only where raw metrics come one per launch (Nsight Compute reports)."""
    from .ncu_sections import top_stall_clause
    if kernels.empty or len(raw_metrics) != len(kernels):
        return
    latency = np.flatnonzero(kernels["bound"].to_numpy(dtype=object) == "latency")
    if not latency.size:
        return
    reasons = kernels["bound_reason"].to_numpy(dtype=object).copy()
    for i in latency:
        reasons[i] = f"{reasons[i]}{top_stall_clause(raw_metrics[i] or {})}"
    kernels["bound_reason"] = pd.Series(reasons, index=kernels.index, dtype=object)


# The columns bound_reason, busiest_memory_level and occupancy_note read of a launch (row["..."]: a
# column added to them and not here fails loudly).  Only these become row dicts: all 54 cost 3x.
ROW_FIELDS = ("sm_throughput_pct", "memory_throughput_pct", "achieved_occupancy_pct", "theoretical_occupancy_pct",
              "occupancy_limiter", "waves_per_sm", "grid_size", "busiest_memory_unit",
              *(column for _, column in MEMORY_LEVELS))


def classify_kernels(kernels: pd.DataFrame, capture: Capture = NCU) -> pd.DataFrame:
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
                                          "waves_per_sm": math.nan, "achieved_occupancy_pct": math.nan}, "unknown", "",
                                         capture)
    known = np.flatnonzero(~unknown)
    fields = [c for c in ROW_FIELDS if c in kernels.columns]
    for i, row in zip(known, kernels.iloc[known][fields].to_dict("records")):
        levels[i] = busiest_memory_level(row) if labels[i] == "memory" else ""
        reasons[i] = bound_reason(row, labels[i], levels[i], capture)
    has_occupancy = np.flatnonzero((kernels["achieved_occupancy_pct"].notna()
                                    | kernels["theoretical_occupancy_pct"].notna()
                                    | (kernels["waves_per_sm"] < 1)).to_numpy())
    for i, row in zip(has_occupancy, kernels.iloc[has_occupancy][fields].to_dict("records")):
        notes[i] = occupancy_note(row, labels[i], capture)
    kernels["bound"], kernels["bound_level"] = labels, levels
    kernels["bound_reason"], kernels["occupancy_note"] = reasons, notes
    return kernels
