"""Everything derived from a profile, in one pass over the analysis' steps.

`analyse(profile)` computes everything derived from a profile, in the order of STEPS: the kernels
table's bound labels and roofline columns (in place: they are columns of that table), each
device's roofs and ridge points, the summary tables the analysis makes, the headline scalars and
the advice.  A step is `run(profile, analysis)` and sees the Analysis built so far, so advice,
which comes last, sees every table.  Adding an analysis is one line in STEPS.  The export (app/export.py)
reads, windows, runs this and writes; this module writes nothing.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Optional, Tuple

import numpy as np
import pandas as pd

from .advice import advise
from .bottleneck import classify_profile
from .compare import COMPARE_TABLE, compare_table
from ..core.columnar import object_pointers
from ..core.findings import Analysis
from .gpu_trace import TABLES as GPU_TRACE_TABLES, gpu_trace_tables, label_phases
from .occupancy import theoretical_occupancy
from .plan import PLAN_TABLE, plan
from .join import OP_COUNTERS_TABLE, operator_counters
from .roofline import apply_roofline, device_roofs, ridge_points
from .summary import headline_scalars
from .topdown import label_topdown_tables
from .torch_memory import TABLES as TORCH_MEMORY_TABLES, memory_tables
from .torch_modules import TABLES as TORCH_MODULE_TABLES, torch_modules
from .torch_tables import TABLES as TORCH_TABLES, torch_tables


# ------------------------------------------------------------------ the kernels table's labels
# What the classifier and the roofline read.  When none of it has a value (a tracer's launches),
# every launch of a device gets the same result: computed on one launch per device, then copied.
COUNTER_INPUTS = ("sm_throughput_pct", "memory_throughput_pct", "achieved_occupancy_pct", "theoretical_occupancy_pct",
                  "flops", "flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor", "flop_per_s",
                  "ai_dram", "ai_l2", "ai_l1", "dram_bytes", "l2_bytes", "l1_bytes")
OUTPUTS = ("ai_dram", "ai_l2", "ai_l1", "peak_flop_per_s", "roofline_precision", "attainable_flop_per_s",
           "roofline_efficiency_pct", "binding_roof", "bound", "bound_level", "bound_reason", "occupancy_note")


def label_kernels(profile):
    """Fill the bound label, reason, occupancy note and roofline columns of the profile's kernels
    table in place; returns the profile."""
    from ..core.model import normalise_kernels

    if len(profile.kernels) and not any(_has_values(profile.kernels[c]) for c in COUNTER_INPUTS):
        _label_once_per_device(profile)
    else:
        apply_roofline(profile)
        classify_profile(profile)
    # The reader normalised its table, though some set columns after that: every dtype is checked
    # again (text columns written since then show pandas' str dtype, not object).
    profile.kernels = normalise_kernels(profile.kernels, copy=False, scan_text=False)
    return profile


def _has_values(column) -> bool:
    from ..core.model import ALL_NAN_DTYPE, is_all_nan_column
    if column.dtype == ALL_NAN_DTYPE:
        return not is_all_nan_column(column)
    return bool(column.notna().any())


def _label_once_per_device(profile) -> None:
    """The full analysis on the first launch of each device, copied to that device's launches
    (all-missing float results stay sparse: no memory per launch)."""
    from ..core.model import all_nan_column
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
    classify_profile(one)
    copied: Dict[tuple, np.ndarray] = {}  # labels of equal values per device share one array
    for col in OUTPUTS:
        values = one.kernels[col].to_numpy()
        if values.dtype.kind == "f" and np.isnan(values).all():
            kernels[col] = all_nan_column(len(kernels))
        elif values.dtype == object:  # kept object: pandas 3 would infer (and later undo) its str dtype
            if _holds_only(kernels[col], values):
                continue  # already that one value on every launch (the reader's empty text): no copy
            per_launch = copied.setdefault(tuple(values), values[which])
            kernels[col] = pd.Series(per_launch, index=kernels.index, dtype=object, copy=False)
        else:
            kernels[col] = values[which]


def _holds_only(column: pd.Series, values: np.ndarray) -> bool:
    """Whether an object column holds one and the same object on every row, equal to every one of
    `values` (an array of pointers compared, not a million texts)."""
    if column.dtype != object or len(column) == 0 or any(v != values[0] for v in values):
        return False
    pointers = object_pointers(column.to_numpy())
    return pointers is not None and bool((pointers == pointers[0]).all()) and column.iloc[0] == values[0]


def label_tables(profile):
    """The profile's tables with their own derived columns, in place (what the steps below fill
    in them too): the kernels' labels, the CPU hotspots' top-down labels, a trace's GPU time
    projected onto its NVTX ranges.  Returns the profile (tb_hwprof.read gives it so)."""
    label_kernels(profile)
    label_topdown_tables(profile.summaries)
    label_phases(profile)
    return profile


# ------------------------------------------------------------------ the steps, in order
def kernel_labels(profile, analysis: Analysis) -> None:
    label_kernels(profile)


def device_roofline(profile, analysis: Analysis) -> None:
    """Each device's roofs, ridge points and how many launches the Roofline view can place on it
    (the plugin offers the view by that count: a run can have roofs and nothing to draw)."""
    points = roofline_point_counts(profile)
    analysis.roofline = {d.id: {"roofs": device_roofs(d), "ridge_points": ridge_points(device_roofs(d)),
                                "points": points.get(float(d.id), 0) if d.id is not None else 0}
                         for d in profile.devices}


def roofline_point_counts(profile) -> dict:
    """{device id (float): launches with FLOP/s, an intensity and no error} as groups.roofline_points
    selects them; launches of no known device count for the first device, as the roofline places them."""
    from .groups import AI_COLUMNS
    from .roofline import ABOVE_ROOFS
    kernels = profile.kernels
    if kernels.empty or "flop_per_s" not in kernels:
        return {}
    # Only launches with FLOP/s are looked at further: a trace's million launches have none, and
    # testing every intensity and roof label of them cost ~0.2 s of each 1M-kernel export.
    rows = np.flatnonzero(kernels["flop_per_s"].notna().to_numpy())
    if rows.size == 0:
        return {}
    kernels = kernels.iloc[rows]
    placed = kernels[list(AI_COLUMNS)].notna().any(axis=1).to_numpy() \
        & (kernels["binding_roof"].to_numpy(dtype=object) != ABOVE_ROOFS)
    known = [float(d.id) for d in profile.devices if d.id is not None]
    devices = kernels["device"].to_numpy(dtype=float)
    devices = np.where(np.isin(devices, known), devices, known[0] if known else np.nan)
    counts = pd.Series(devices[placed]).value_counts()
    return {float(k): int(v) for k, v in counts.items()}


def topdown_labels(profile, analysis: Analysis) -> None:
    """CPU hotspot tables (VTune): the Intel TMA label of each row, in place (columns of that table)."""
    label_topdown_tables(profile.summaries)


def compare_kernels(profile, analysis: Analysis) -> None:
    """The kernels grouped per instantiation as compare pairs them (analysis/compare.py), so comparing
    a written run reads this table, not its launches.  None for a run without kernels."""
    if len(profile.kernels):
        analysis.summaries[COMPARE_TABLE] = compare_table(profile.kernels)


def headline_figures(profile, analysis: Analysis) -> None:
    analysis.scalars = headline_scalars(profile.kernels, analysis.tables(profile))


def findings(profile, analysis: Analysis) -> None:
    analysis.findings = advise(profile, analysis.tables(profile))


@dataclasses.dataclass(frozen=True)
class Step:
    run: Callable[..., None]  # run(profile, analysis): fills its part of the analysis
    makes: Tuple[str, ...] = ()  # names of the summary tables it adds to analysis.summaries
    kernels_final: bool = False  # the kernels table is final once this step has run (no later step changes it)


STEPS = (
    # The timeline's tables need nothing else, and run first: beside the start of the timeline files'
    # writing (a sort), not its middle (gathered columns, depths, overview), whose temporaries and
    # theirs added up to the export's peak at 1M kernels.
    Step(gpu_trace_tables, makes=GPU_TRACE_TABLES),
    Step(kernel_labels),
    # After the labels (a trace's launches stay labelled once per device), before the table is final.
    Step(theoretical_occupancy, kernels_final=True),
    Step(device_roofline),
    Step(topdown_labels),
    # Summary-table steps go here, before the figures and the advice that read the tables.
    Step(torch_tables, makes=TORCH_TABLES),
    Step(torch_modules, makes=TORCH_MODULE_TABLES),  # with_modules / with_stack traces: module tree, Python stacks
    Step(memory_tables, makes=TORCH_MEMORY_TABLES),  # profile_memory=True traces (issue 33)
    Step(operator_counters, makes=(OP_COUNTERS_TABLE,)),  # joined traces (analysis/join.py)
    Step(compare_kernels, makes=(COMPARE_TABLE,)),
    Step(headline_figures),
    Step(findings),
    Step(plan, makes=(PLAN_TABLE,)),  # reads the tables above (op shapes, idle attribution, steps) and the advice
)
# Summary tables the analysis makes: a written run's tables of these names are its Analysis'
# (load_analysis), the others the reader's (load_run's Profile.summaries).
ANALYSIS_SUMMARIES = tuple(name for step in STEPS for name in step.makes)


def analyse(profile, kernels_final: Optional[Callable[[object], None]] = None) -> Analysis:
    """Everything derived from `profile` (its kernels table's labels filled in place).
    kernels_final(profile): called as soon as the kernels table is final (the export starts writing
    it then, while the other steps run)."""
    analysis = Analysis()
    for step in STEPS:
        step.run(profile, analysis)
        if step.kernels_final and kernels_final is not None:
            kernels_final(profile)
    return analysis
