"""Hierarchical roofline: intensity per memory level, ridge points, attainable FLOP/s.

Roofs are the device's peaks (the tool's measured ones where the report has them).
A kernel is placed against the compute roof of the precision that did most of its
FLOPs (tensor-core work against its source precision's roof, flop_per_s_tensor_bf16 ...,
where the tool counts it per precision); the binding roof is the lowest of the compute
roof and each memory roof at the kernel's intensity for that level.  A kernel whose
achieved FLOP/s lies above the device's highest compute roof is an error in the data
(binding_roof ABOVE_ROOFS): it is not placed.
"""
from __future__ import annotations

from typing import Dict

import numpy as np
import pandas as pd

PRECISIONS = ("fp64", "fp32", "fp16", "tensor")
LEVELS = ("dram", "l2", "l1")
FLOP_ROOF = "flop_per_s_"
ABOVE_ROOFS = "above every roof"  # binding_roof of a kernel faster than the device's highest roof
# Rounding headroom before a point counts as above the highest roof (the roofs and the rates come
# from the same report, at slightly different clocks per launch).
ABOVE_ROOFS_TOLERANCE = 1.05


def compute_precisions(roofs: Dict[str, float]):
    """The precisions the roofs have a compute roof for (fp32, tensor_bf16, ...)."""
    return [key[len(FLOP_ROOF):] for key in roofs if key.startswith(FLOP_ROOF)]


def device_roofs(device) -> Dict[str, float]:
    return {k: p.value for k, p in (device.peaks if device else {}).items()}


def ridge_points(roofs: Dict[str, float]) -> Dict[str, Dict[str, float]]:
    """FLOP/byte where each memory roof meets each compute roof."""
    out = {}
    for p in compute_precisions(roofs):
        compute = roofs.get(f"flop_per_s_{p}")
        if not compute:
            continue
        out[p] = {lvl: compute / roofs[f"bytes_per_s_{lvl}"] for lvl in LEVELS if roofs.get(f"bytes_per_s_{lvl}")}
    return out


def intensities(kernels: pd.DataFrame) -> Dict[str, np.ndarray]:
    """FLOP/byte per level: the reader's own (tool-computed) value, else FLOPs over bytes."""
    flops = kernels["flops"].to_numpy(dtype=float)
    out = {}
    for lvl in LEVELS:
        given = kernels[f"ai_{lvl}"].to_numpy(dtype=float) if f"ai_{lvl}" in kernels else np.full(len(kernels), np.nan)
        nbytes = kernels[f"{lvl}_bytes"].to_numpy(dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            derived = np.where(nbytes > 0, flops / nbytes, np.nan)
        out[lvl] = np.where(np.isnan(given), derived, given)
    return out


def dominant_precisions(kernels: pd.DataFrame) -> np.ndarray:
    """The precision that did most FLOPs per kernel; "" when none did any."""
    table = np.column_stack([kernels[f"flops_{p}"].to_numpy(dtype=float) for p in PRECISIONS])
    filled = np.where(np.isnan(table), -np.inf, table)
    best = filled.argmax(axis=1)
    some = filled.max(axis=1) > 0
    precision = np.where(some, np.array(PRECISIONS, dtype=object)[best], "").astype(object)
    if "tensor_precision" in kernels:  # tensor-core work against its source precision's roof
        source = kernels["tensor_precision"].fillna("").astype(str).to_numpy(dtype=object)
        per_source = (precision == "tensor") & (source != "")
        precision[per_source] = "tensor_" + source[per_source]
    return precision


def place_kernels(kernels: pd.DataFrame, device_of_row: np.ndarray, roofs_by_device: Dict[float, Dict[str, float]]):
    """Roofline columns for every kernel, vectorised over the table."""
    n = len(kernels)
    ai = intensities(kernels)
    precision = dominant_precisions(kernels)
    peak = np.full(n, np.nan)
    bandwidth = {lvl: np.full(n, np.nan) for lvl in LEVELS}
    highest = np.full(n, np.nan)
    for device, roofs in roofs_by_device.items():
        rows = device_of_row == device
        for p in compute_precisions(roofs):
            if roofs.get(f"flop_per_s_{p}"):
                peak[rows & (precision == p)] = roofs[f"flop_per_s_{p}"]
                highest[rows] = np.fmax(highest[rows], roofs[f"flop_per_s_{p}"])
        for lvl in LEVELS:
            if roofs.get(f"bytes_per_s_{lvl}"):
                bandwidth[lvl][rows] = roofs[f"bytes_per_s_{lvl}"]
    # Candidate ceilings: compute roof and each memory roof at the kernel's intensity.
    names = np.array(["compute", *LEVELS], dtype=object)
    ceilings = np.column_stack([peak] + [ai[lvl] * bandwidth[lvl] for lvl in LEVELS])
    with np.errstate(invalid="ignore"):
        has_memory_roof = ~np.isnan(ceilings[:, 1:]).all(axis=1)
        placeable = ~np.isnan(peak) & has_memory_roof  # a compute roof alone says nothing of the bound
        filled = np.where(np.isnan(ceilings), np.inf, ceilings)
        binding = filled.argmin(axis=1)
        attainable = np.where(placeable, filled.min(axis=1), np.nan)
        achieved = kernels["flop_per_s"].to_numpy(dtype=float)
        above = achieved > highest * ABOVE_ROOFS_TOLERANCE
        attainable = np.where(above, np.nan, attainable)
        efficiency = np.where(attainable > 0, 100.0 * achieved / attainable, np.nan)
    binding_roof = np.where(placeable, names[binding], "").astype(object)
    binding_roof[above] = ABOVE_ROOFS
    return {
        **{f"ai_{lvl}": ai[lvl] for lvl in LEVELS},
        "peak_flop_per_s": peak,
        "roofline_precision": precision,
        "attainable_flop_per_s": attainable,
        "roofline_efficiency_pct": efficiency,
        "binding_roof": binding_roof,
    }


def apply_roofline(profile) -> None:
    kernels = profile.kernels
    if kernels.empty:
        return
    devices = kernels["device"].to_numpy(dtype=float)
    known = [float(d.id) for d in profile.devices]
    # Launches without a device id (or an unknown one) use the profile's first device.
    fallback = known[0] if known else np.nan
    device_of_row = np.where(np.isin(devices, known), devices, fallback)
    roofs = {float(d.id): device_roofs(d) for d in profile.devices}
    for col, values in place_kernels(kernels, device_of_row, roofs).items():
        kernels[col] = values
