"""Analyses over the model only: they know no file format.

`analyse(profile)` fills the bound label, reason, occupancy note and roofline
columns of a profile's kernels table in place and returns the profile.
"""
import dataclasses

import numpy as np
import pandas as pd

from .bottleneck import classify_kernels
from .roofline import apply_roofline

# What the classifier and the roofline read.  When none of it has a value (a tracer's launches),
# every launch of a device gets the same result: computed on one launch per device, then copied.
COUNTER_INPUTS = ("sm_throughput_pct", "memory_throughput_pct", "achieved_occupancy_pct", "theoretical_occupancy_pct",
                  "flops", "flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor", "flop_per_s",
                  "ai_dram", "ai_l2", "ai_l1", "dram_bytes", "l2_bytes", "l1_bytes")
OUTPUTS = ("ai_dram", "ai_l2", "ai_l1", "peak_flop_per_s", "roofline_precision", "attainable_flop_per_s",
           "roofline_efficiency_pct", "binding_roof", "bound", "bound_level", "bound_reason", "occupancy_note")


def analyse(profile):
    from ..model import normalise_kernels

    if len(profile.kernels) and not any(_has_values(profile.kernels[c]) for c in COUNTER_INPUTS):
        _analyse_once_per_device(profile)
    else:
        apply_roofline(profile)
        classify_kernels(profile.kernels)
    # The reader normalised its table, though some set columns after that: every dtype is checked
    # again (text columns written since then show pandas' str dtype, not object).
    profile.kernels = normalise_kernels(profile.kernels, copy=False, scan_text=False)
    return profile


def _has_values(column) -> bool:
    from ..model import ALL_NAN_DTYPE
    if column.dtype == ALL_NAN_DTYPE:
        return column.array.sp_values.size > 0
    return bool(column.notna().any())


def _analyse_once_per_device(profile) -> None:
    """The full analysis on the first launch of each device, copied to that device's launches
    (all-missing float results stay sparse: no memory per launch)."""
    from ..model import all_nan_column
    kernels = profile.kernels
    which, devices = pd.factorize(kernels["device"].to_numpy(dtype=float), use_na_sentinel=False)
    first = np.zeros(len(devices), dtype=np.int64)
    first[which[::-1]] = np.arange(len(which))[::-1]  # the last write per device is its first launch
    sample = kernels.iloc[first].copy()
    for col in sample.columns:
        if hasattr(sample[col], "sparse"):
            sample[col] = sample[col].astype("float64")
    one = dataclasses.replace(profile, kernels=sample)
    apply_roofline(one)
    classify_kernels(one.kernels)
    for col in OUTPUTS:
        values = one.kernels[col].to_numpy()
        if values.dtype.kind == "f" and np.isnan(values).all():
            kernels[col] = all_nan_column(len(kernels))
        elif values.dtype == object:  # kept object: pandas 3 would infer (and later undo) its str dtype
            kernels[col] = pd.Series(values[which], index=kernels.index, dtype=object, copy=False)
        else:
            kernels[col] = values[which]


__all__ = ["analyse", "classify_kernels", "apply_roofline"]
