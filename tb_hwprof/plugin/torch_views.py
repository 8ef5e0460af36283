"""The JSON documents of the PyTorch views (docs/http_api.md: /operators, /steps, the op points of
/roofline), built from a run's summary tables op_gpu_time, op_shapes and step_time_breakdown and its
kernels table (whose `op` column names each kernel's launching operator).

op_shapes and step_time_breakdown are optional: runs exported before they existed still get an
Operators view (without FLOPs), and no Steps view.
"""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

import pandas as pd

from ..analysis.bound_terms import operator_note
from ..core.plain import columns, records

from .store import HttpError, RunEntry

OP_TABLE = "op_gpu_time"
SHAPES_TABLE = "op_shapes"
COUNTERS_TABLE = "op_counters"  # joined runs (analysis/join.py): counters per operator
STEPS_TABLE = "step_time_breakdown"

# The shape columns sent per op (those the table has; older exports may lack some).
SHAPE_FIELDS = ("input_dims", "input_types", "concrete_inputs", "category", "calls", "gpu_ns",
                "flops_per_call", "bytes_per_call", "flop_per_s", "bytes_per_s", "intensity",
                "peak_flop_per_s", "peak_bytes_per_s", "peak_source", "roof", "bound", "bound_reason")
# A roofline point per shape: where it sits, how big and which colour.
OP_POINT_FIELDS = ("op", "input_dims", "input_types", "category", "calls", "gpu_ns", "flop_per_s",
                   "bytes_per_s", "intensity", "peak_flop_per_s", "peak_bytes_per_s", "peak_source", "roof",
                   "bound", "bound_reason")


def _table(entry: RunEntry, name: str) -> Optional[pd.DataFrame]:
    return entry.summary(name) if name in entry.summary_names() else None


def _present(frame: pd.DataFrame, fields) -> List[str]:
    return [f for f in fields if f in frame.columns]


# -- /operators ---------------------------------------------------------------------------------
def operators(entry: RunEntry) -> dict:
    """/operators: one row per operator (op_gpu_time, with FLOPs and bound from op_shapes where the
    run has it), each op's shapes, and its kernels grouped by name."""
    ops = _table(entry, OP_TABLE)
    if ops is None:
        raise HttpError(404, f"run {entry.run!r} has no operator table (export a PyTorch profiler trace: "
                             f"torch.profiler's export_chrome_trace / tensorboard_trace_handler output)")
    shapes = _table(entry, SHAPES_TABLE)
    rows = ops.copy()
    total = float(rows["direct_gpu_ns"].sum())
    rows["pct_gpu"] = 100.0 * rows["direct_gpu_ns"] / total if total > 0 else math.nan
    if shapes is not None and len(shapes):
        rows = rows.merge(op_figures(shapes), on="op", how="left")
    counters = _table(entry, COUNTERS_TABLE)
    if counters is not None and len(counters):
        rows = rows.merge(counters, on="op", how="left")
    if "bound" in rows.columns and "bound_mix" in rows.columns:  # both methods: say where they disagree
        rows["bound_note"] = [operator_note(*(v if isinstance(v, str) else "" for v in values)) for values in
                              zip(rows["bound"], rows["bound_reason"], rows["bound_mix"])]
    rows = rows.sort_values(["direct_gpu_ns", "subtree_gpu_ns", "cpu_total_ns"], ascending=False, kind="stable")
    return {"run": entry.run, "has_shapes": shapes is not None, "has_counters": counters is not None,
            "total_gpu_ns": total, "ops": records(rows), "shapes": shapes_by_op(shapes),
            "kernels": kernels_by_op(entry.kernels())}


def op_figures(shapes: pd.DataFrame) -> pd.DataFrame:
    """Per op from its shapes: FLOPs and bytes over all calls, FLOP/s and byte/s over the GPU time of
    the shapes that have them, and the category and bound of its longest-running shape."""
    calls = shapes["calls"].astype(float)
    time = shapes["gpu_ns"].astype(float)
    per = pd.DataFrame({"op": shapes["op"], "flops": shapes["flops_per_call"] * calls,
                        "bytes": shapes["bytes_per_call"] * calls})
    # Only time spent in shapes with a FLOP (byte) count divides that count.
    per["flops_time"] = time.where(per["flops"].notna())
    per["bytes_time"] = time.where(per["bytes"].notna())
    agg = per.groupby("op", sort=False).sum(min_count=1)
    agg["flop_per_s"] = agg["flops"] / agg["flops_time"] * 1e9
    agg["bytes_per_s"] = agg["bytes"] / agg["bytes_time"] * 1e9
    agg["intensity"] = agg["flops"] / agg["bytes"]
    agg = agg.drop(columns=["flops_time", "bytes_time"])
    longest = shapes.assign(_t=time).sort_values("_t", ascending=False, kind="stable")
    agg["category"] = longest.drop_duplicates("op").set_index("op")["category"]
    labelled = longest[longest["bound"].fillna("") != ""].drop_duplicates("op").set_index("op")
    agg["bound"] = labelled["bound"]
    # The reason's figures are that shape's, not the op's totals: say so.
    agg["bound_reason"] = "longest-running shape " + labelled["input_dims"].astype(str) + ": " + labelled["bound_reason"].astype(str)
    return agg.replace([math.inf, -math.inf], math.nan).reset_index()


def shapes_by_op(shapes: Optional[pd.DataFrame]) -> dict:
    """{op: [shape rows, longest GPU time first]}; {} without the table."""
    if shapes is None or shapes.empty:
        return {}
    ordered = shapes.sort_values("gpu_ns", ascending=False, kind="stable")
    fields = _present(ordered, SHAPE_FIELDS)
    return {op: records(group[fields]) for op, group in ordered.groupby("op", sort=False)}


# Joined runs: per kernel name, the launches with counters and their time-weighted counters.
KERNEL_COUNTERS = ("achieved_occupancy_pct", "sm_throughput_pct", "memory_throughput_pct", "l1_hit_rate_pct",
                   "l2_hit_rate_pct")
COUNTER_LAUNCH = "counter_launch_id"


def kernels_by_op(kernels: pd.DataFrame) -> dict:
    """{op: [{name, demangled_name, count, total_ns, mean_ns, min_ns, max_ns, longest_launch}]}: each
    op's kernels grouped by name, most time first; longest_launch opens the kernel drawer.  A joined
    run adds counted (launches with counters), counted_launch (the longest of them: its drawer has
    the report's sections) and the time-weighted KERNEL_COUNTERS."""
    if kernels.empty or "op" not in kernels.columns:
        return {}
    joined = COUNTER_LAUNCH in kernels.columns and bool((kernels[COUNTER_LAUNCH] >= 0).any())
    frame = kernels[["op", "name", "demangled_name", "duration_ns", "launch_id"]].copy()
    frame["op"] = frame["op"].fillna("")
    keys = ["op", "name"]
    g = frame.groupby(keys, sort=False)["duration_ns"]
    out = pd.DataFrame({"demangled_name": frame.groupby(keys, sort=False)["demangled_name"].first(),
                        "count": g.size(), "total_ns": g.sum(min_count=1), "mean_ns": g.mean(),
                        "min_ns": g.min(), "max_ns": g.max()})
    longest = frame.sort_values("duration_ns", ascending=False, kind="stable").drop_duplicates(keys)
    out["longest_launch"] = longest.set_index(keys)["launch_id"].astype("int64")
    fields = ["name", "demangled_name", "count", "total_ns", "mean_ns", "min_ns", "max_ns", "longest_launch"]
    if joined:
        out = out.join(kernel_counters(kernels, frame, keys))
        fields += ["counted", "counted_launch", *KERNEL_COUNTERS]
    out = out.reset_index().sort_values(["op", "total_ns"], ascending=[True, False], kind="stable")
    return {op: records(group[fields]) for op, group in out.groupby("op", sort=False)}


def kernel_counters(kernels: pd.DataFrame, frame: pd.DataFrame, keys) -> pd.DataFrame:
    """Per (op, name): launches with counters, the longest of them, and each counter's mean weighted
    by the launches' time in the trace (NaN where none has it)."""
    has = kernels[COUNTER_LAUNCH].to_numpy() >= 0
    counted = frame[has].copy()
    weight = counted["duration_ns"].astype(float)
    for column in KERNEL_COUNTERS:
        values = kernels.loc[has, column].astype(float)
        counted[column + "_w"] = (values * weight).where(values.notna())
        counted[column + "_t"] = weight.where(values.notna())
    g = counted.groupby(keys, sort=False)
    out = pd.DataFrame({"counted": g.size()})
    for column in KERNEL_COUNTERS:
        total = g[column + "_t"].sum(min_count=1)
        out[column] = g[column + "_w"].sum(min_count=1) / total.where(total > 0)
    longest = counted.sort_values("duration_ns", ascending=False, kind="stable").drop_duplicates(keys)
    out["counted_launch"] = longest.set_index(keys)["launch_id"].astype("int64")
    return out


# -- /steps -------------------------------------------------------------------------------------
def steps(entry: RunEntry) -> dict:
    """/steps: time per category per ProfilerStep (torch-tb-profiler's step time breakdown) and the
    average step."""
    table = _table(entry, STEPS_TABLE)
    if table is None:
        raise HttpError(404, f"run {entry.run!r} has no step time breakdown (export a PyTorch profiler trace "
                             f"of a loop that calls prof.step(): ProfilerStep#N ranges)")
    categories = [c for c in table.columns if c.endswith("_ns") and c != "total_ns"]
    average = {c: float(table[c].mean()) if len(table) else None for c in categories + ["total_ns"]}
    return {"run": entry.run, "categories": [c[:-len("_ns")] for c in categories],
            "steps": records(table[["step"] + categories + ["total_ns"]]), "average": average}


# -- /roofline: op points -----------------------------------------------------------------------
def op_points(entry: RunEntry, highest_roof: Optional[float] = None) -> Tuple[List[dict], List[dict]]:
    """(one point per op shape with a positive intensity and FLOP/s (log axes), the shapes among
    those above `highest_roof` FLOP/s, which are left out of the first: an error in the data)."""
    shapes = _table(entry, SHAPES_TABLE)
    if shapes is None or shapes.empty:
        return [], []
    placed = shapes[(shapes["intensity"] > 0) & (shapes["flop_per_s"] > 0)]
    from ..analysis.roofline import ABOVE_ROOFS_TOLERANCE
    above = placed["flop_per_s"] > highest_roof * ABOVE_ROOFS_TOLERANCE if highest_roof else placed["flop_per_s"] < 0
    fields = _present(placed, OP_POINT_FIELDS)
    return records(placed[~above][fields]), records(placed[above][fields])


def op_shape_count(entry: RunEntry) -> Optional[int]:
    shapes = _table(entry, SHAPES_TABLE)
    return None if shapes is None else len(shapes)


# -- /memory (issue 33) -------------------------------------------------------------------------
MEMORY_EVENTS_SENT = 50_000  # allocation rows sent (the earliest): the table filters them in the browser


def memory(entry: RunEntry) -> dict:
    """/memory: per device the allocated / reserved curve (decimated, exact peaks kept) and the peak,
    the per-operator table (torch-tb-profiler's memory statistics) and the allocation events."""
    by_op = _table(entry, "memory_by_op")
    if by_op is None:
        raise HttpError(404, f"run {entry.run!r} has no memory events (profile with "
                             f"torch.profiler.profile(profile_memory=True) and export that trace)")
    peaks = _table(entry, "memory_peak")
    curve = _table(entry, "memory_curve")
    events = _table(entry, "memory_events")
    curves = {} if curve is None else {str(device): columns(rows, ("ts_ns", "allocated_bytes", "reserved_bytes"))
                                       for device, rows in curve.groupby("device", sort=True)}
    starts = [float(t) for t in (None if curve is None else curve["ts_ns"].min(),
                                 None if events is None else events.loc[events["alloc_ns"] >= 0, "alloc_ns"].min())
              if t is not None and not pd.isna(t)]
    sent = events.head(MEMORY_EVENTS_SENT) if events is not None else None
    return {"run": entry.run, "first_ns": min(starts) if starts else None, "peaks": records(peaks),
            "curves": curves, "by_op": records(by_op.sort_values(["device", "self_increase_bytes"],
                                                                   ascending=[True, False], kind="stable")),
            "events": columns(sent), "events_total": _allocations(peaks, events)}


def _allocations(peaks: Optional[pd.DataFrame], events: Optional[pd.DataFrame]) -> int:
    """Every allocation of the trace (memory_peak counts them; memory_events keeps the earliest)."""
    stored = 0 if events is None else len(events)
    counted = int(peaks["allocations"].sum()) if peaks is not None and "allocations" in peaks.columns else 0
    return max(stored, counted)


# -- /modules and /stacks (issue 33: the nn.Module tree, the Python stacks) ----------------------
def modules(entry: RunEntry) -> dict:
    """/modules: the module tree per ProfilerStep#N (analysis/torch_modules.py module_tree; step -1:
    outside every step) and, per module path, the operators that ran directly inside it."""
    tree = _table(entry, "module_tree")
    if tree is None:
        raise HttpError(404, f"run {entry.run!r} has no module tree (profile with "
                             f"torch.profiler.profile(with_modules=True) or with_stack=True and export that trace)")
    ops = _table(entry, "module_ops")
    steps = sorted(int(s) for s in tree["step"].unique())
    return {"run": entry.run, "steps": steps, "rows": records(tree), "ops": records(ops)}


def stacks(entry: RunEntry) -> dict:
    """/stacks: the Python frames merged by call path (python_stacks) for the flame graph, and per
    path its operators and GPU activities (python_stack_ops), columnar."""
    frames = _table(entry, "python_stacks")
    if frames is None:
        raise HttpError(404, f"run {entry.run!r} has no Python stacks (profile with "
                             f"torch.profiler.profile(with_stack=True) and export that trace)")
    roots = frames["parent_id"] < 0
    return {"run": entry.run, "frames": columns(frames), "ops": columns(_table(entry, "python_stack_ops")),
            "totals": {"cpu_ns": float(frames.loc[roots, "cpu_total_ns"].sum()),
                       "gpu_ns": float(frames.loc[roots, "gpu_ns"].sum())}}


def with_module_paths(entry: RunEntry, doc: dict) -> dict:
    """The /operators document with, per operator, the module paths it ran in ("/A/B/\\n/A/C/"):
    the Operators view's filter matches them, so a module's path as the filter keeps its operators
    (those of its submodules too)."""
    ops = _table(entry, "module_ops")
    if ops is not None and "pass" in ops.columns:
        ops = ops[ops["pass"] != "backward"]  # where it ran, not the modules whose backward it served
    if ops is None or not len(ops):
        return doc
    paths = ops.groupby("op", sort=False)["path"].agg(lambda p: "\n".join(f"{x}/" for x in p))
    for row in doc.get("ops", []):
        row["modules"] = paths.get(row.get("op"), "")
    return doc
