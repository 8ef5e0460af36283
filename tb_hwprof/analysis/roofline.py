"""Hierarchical roofline: intensity per memory level, ridge points, attainable FLOP/s.

Roofs are the device's peaks (the tool's measured ones where the report has them).
A kernel is placed against the compute roof of the precision that did most of its
FLOPs; the binding roof is the lowest of the compute roof and each memory roof at
the kernel's intensity for that level.
"""
from __future__ import annotations

import math
from typing import Dict, Optional

PRECISIONS = ("fp64", "fp32", "fp16", "tensor")
LEVELS = ("dram", "l2", "l1")


def _nan(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def device_roofs(device) -> Dict[str, float]:
    return {k: p.value for k, p in (device.peaks if device else {}).items()}


def ridge_points(roofs: Dict[str, float]) -> Dict[str, Dict[str, float]]:
    """FLOP/byte where each memory roof meets each compute roof."""
    out = {}
    for p in PRECISIONS:
        compute = roofs.get(f"flop_per_s_{p}")
        if not compute:
            continue
        out[p] = {lvl: compute / roofs[f"bytes_per_s_{lvl}"] for lvl in LEVELS if roofs.get(f"bytes_per_s_{lvl}")}
    return out


def dominant_precision(row) -> Optional[str]:
    flops = {p: row[f"flops_{p}"] for p in PRECISIONS if not _nan(row[f"flops_{p}"])}
    if not flops or max(flops.values()) <= 0:
        return None
    return max(flops, key=flops.get)


def place_kernel(row, roofs: Dict[str, float]) -> dict:
    # Readers may give the tool's own intensity (rate over rate); else FLOPs over bytes.
    out = {f"ai_{lvl}": row.get(f"ai_{lvl}", math.nan) for lvl in LEVELS}
    flops = row["flops"]
    for lvl in LEVELS:
        nbytes = row[f"{lvl}_bytes"]
        if _nan(out[f"ai_{lvl}"]) and not _nan(flops) and not _nan(nbytes) and nbytes > 0:
            out[f"ai_{lvl}"] = flops / nbytes
    precision = dominant_precision(row)
    peak = roofs.get(f"flop_per_s_{precision}") if precision else None
    out.update(peak_flop_per_s=peak or math.nan, roofline_precision=precision or "",
               attainable_flop_per_s=math.nan, roofline_efficiency_pct=math.nan, binding_roof="")
    if not peak:
        return out
    candidates = {"compute": peak}
    for lvl in LEVELS:
        bw = roofs.get(f"bytes_per_s_{lvl}")
        if bw and not _nan(out[f"ai_{lvl}"]):
            candidates[lvl] = out[f"ai_{lvl}"] * bw
    if len(candidates) == 1:
        return out  # no memory roof applies: a compute roof alone says nothing about the bound
    binding = min(candidates, key=candidates.get)
    attainable = candidates[binding]
    out.update(attainable_flop_per_s=attainable, binding_roof=binding)
    if not _nan(row["flop_per_s"]) and attainable > 0:
        out["roofline_efficiency_pct"] = 100.0 * row["flop_per_s"] / attainable
    return out


def apply_roofline(profile) -> None:
    kernels = profile.kernels
    if kernels.empty:
        return
    placed = []
    for row in kernels.to_dict("records"):
        device = profile.device(None if _nan(row["device"]) else int(row["device"]))
        placed.append(place_kernel(row, device_roofs(device)))
    for col in placed[0]:
        kernels[col] = [p[col] for p in placed]
