"""One vocabulary for "bound", whichever method gave the label (issue 32 item 1).

Two methods answer "what limits this work?" and may disagree, so every label travels with its
method and the rule behind it:

- counters: Nsight Compute's speed-of-light rule over the SM and memory throughput (% of peak) a
  launch reached (analysis/bottleneck.py): compute, memory, latency, small-grid, balanced, unknown.
- roofline: the side of the ridge point the arithmetic intensity falls on, i.e. which roof binds at
  the point's FLOP/byte (analysis/roofline.py for kernels, analysis/torch_shapes.py for operator
  shapes): compute or memory.

The counters measure how busy each unit was; the roofline counts only FLOPs per byte.  They differ
on real kernels (a float-to-bf16 copy keeps the SMs busier than memory on conversions that are no
FLOPs, yet sits far left of the ridge), so where both exist and name opposite sides, one note says
so with both figures: the user learns which to trust for what, instead of two chips that contradict.
"""
from __future__ import annotations

import math
from typing import Optional

from .roofline import ABOVE_ROOFS, LEVELS

COUNTERS = "counters"
ROOFLINE = "roofline"
RULES = {
    COUNTERS: ("Nsight Compute's speed-of-light rule on SM and memory throughput (% of peak): a unit at 80% or more "
               "names the bound; both below 60% is latency (small grid under one wave); otherwise the busier side "
               "by 10 points or more; otherwise balanced"),
    ROOFLINE: ("the roof that binds at the arithmetic intensity (FLOP/byte): left of the ridge point a memory roof "
               "(memory), right of it the compute roof (compute)"),
}
LEVEL_NAMES = {"dram": "DRAM", "l2": "L2", "l1": "L1"}
SIDES = ("compute", "memory")


def roofline_side(binding_roof) -> str:
    """'memory' where a memory roof binds, 'compute' where the compute roof does, '' unplaced."""
    roof = binding_roof if isinstance(binding_roof, str) else ""
    if roof in LEVELS:
        return "memory"
    return "compute" if roof == "compute" else ""


def _finite(value) -> Optional[float]:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def rate_text(flop_per_s: float) -> str:
    """'95.1 GFLOP/s', '66.9 TFLOP/s'."""
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M")):
        if abs(flop_per_s) >= factor:
            return f"{flop_per_s / factor:.3g} {prefix}FLOP/s"
    return f"{flop_per_s:.3g} FLOP/s"


def kernel_roofline_reason(row) -> str:
    """Why the roofline puts a launch on its side, from its own columns: the binding roof, the
    intensity at that level and the ridge point (peak over that level's bandwidth, recovered as
    intensity x peak / attainable since the memory roof's ceiling is intensity x bandwidth)."""
    roof = row.get("binding_roof") or ""
    peak, attainable = _finite(row.get("peak_flop_per_s")), _finite(row.get("attainable_flop_per_s"))
    if roof == ABOVE_ROOFS:
        return "not placed: its FLOP/s lies above every roof of the device (an error in the data)"
    if roof == "compute" and peak:
        return f"the compute roof binds: right of every memory ridge point, attainable {rate_text(peak)}"
    ai = _finite(row.get(f"ai_{roof}")) if roof in LEVELS else None
    if ai is None or not peak or not attainable:
        return ""
    ridge = ai * peak / attainable
    return (f"the {LEVEL_NAMES[roof]} roof binds: {ai:.3g} FLOP/byte of {LEVEL_NAMES[roof]} traffic is left of its "
            f"ridge point at {ridge:.3g} FLOP/byte (attainable {rate_text(attainable)} of the {rate_text(peak)} peak)")


def disagreement(counter_label: str, counter_reason: str, roofline_label: str, roofline_reason: str) -> str:
    """The one sentence shown where the two methods name opposite sides ('' where they agree, where
    either has no compute/memory answer: latency, balanced or unknown counters are no contradiction
    of a roofline side, they say the units were not saturated)."""
    if counter_label not in SIDES or roofline_label not in SIDES or counter_label == roofline_label:
        return ""
    why = ("the SMs were busier than memory on instructions that are not FLOPs (conversions, address arithmetic, "
           "data movement), which the roofline does not count" if counter_label == "compute" else
           "memory was busier than the FLOPs per byte predict: traffic at a level the roofline has no roof or "
           "intensity for (L1/shared memory, bank conflicts), or work the FLOP count misses")
    counters = counter_reason or counter_label
    roofline = roofline_reason or roofline_label
    return (f"The methods disagree. Counters: {counters}. Roofline: {roofline_label}, {roofline}. Likely {why}. "
            "The counters say what limited this work; the roofline how far it is from the attainable FLOP/s.")


def kernel_bound(row) -> dict:
    """Both methods' answers for one launch (a row of the kernels table, as a dict), for the drawer
    and the roofline's points: {counters: {label, reason, rule}, roofline: {...}, note}."""
    counter_label = row.get("bound") or "unknown"
    counter_reason = row.get("bound_reason") or ""
    side = roofline_side(row.get("binding_roof"))
    reason = kernel_roofline_reason(row)
    return {COUNTERS: {"label": counter_label, "reason": counter_reason, "rule": RULES[COUNTERS]},
            ROOFLINE: {"label": side, "reason": reason, "rule": RULES[ROOFLINE]},
            "note": disagreement(counter_label, counter_reason, side, reason)}


def dominant_share(bound_mix: str) -> str:
    """The first label of a bound mix ('compute 70%, memory 30%' -> 'compute'): the mix is written
    largest share first (analysis/join.py bound_mix)."""
    first = (bound_mix or "").split(",")[0].strip()
    return first.rsplit(" ", 1)[0] if first.endswith("%") else ""


def operator_note(roofline_label: str, roofline_reason: str, bound_mix: str) -> str:
    """An operator's shape-model roofline side against the counter labels of its counted kernels."""
    counters = dominant_share(bound_mix)
    return disagreement(counters, f"{bound_mix} of its counted kernels' time", roofline_label or "", roofline_reason or "")
