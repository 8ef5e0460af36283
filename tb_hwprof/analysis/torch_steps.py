"""PyTorch step time breakdown and GPU summary, as torch-tb-profiler 0.4.3 computes its Overview.

Input: a `TorchTrace` (tb_hwprof/core/model.py, `profile.torch`), every time int64 ns.  The rules are
torch-tb-profiler's (site-packages/torch_tb_profiler/profiler/), reproduced without its objects:

- steps (event_parser.StepParser): each ProfilerStep#N range, extended to the GPU work it launched:
  a runtime call lying wholly inside a host step launches that step's kernels / copies / sets
  (matched by correlation id); the step then runs from max(its host start, the previous step's end)
  to max(its host end, its last device end).  The first step also starts no earlier than the end
  of device work launched outside every step that ended before the first step's device work.  The
  trailing steps that launched nothing are dropped, and so is the last launching one when it
  launched under 80% of the one before it (the profiler may have missed its kernels).
  Without any ProfilerStep#N the whole CPU span is one step (numbered -1 here; '0' there).
- categories (overall_parser.OverallParser): each instant of a step goes to the first of kernel,
  memcpy, memset, communication, runtime, dataloader, cpu_exec that covers it, else to other.
  Communication: ops named in NCCL_OPS / GLOO_OPS and the kernels sharing their External id.
  DataLoader: 'enumerate(DataLoader)#...__next__' and 'enumerate(DataPipe)#...' ops.
- GPU metrics (gpu_metrics_parser.GPUMetricsParser), over first step start .. last step end:
  utilisation = union of a device's kernels / span; est. SM efficiency = time integral of
  min(sum of concurrent kernels' blocks per SM, 1) / span; est. achieved occupancy = kernels'
  occupancy weighted by their time inside the span.

Where we part from tb-profiler 0.4.3 (it was written for 2021 traces; its 2021 samples give the
same numbers either way since they hold none of these categories):
- it maps only the category 'Runtime'/'runtime', so current traces' 'cuda_runtime' /
  'cuda_driver' calls are dropped there: no Runtime time and no step extended to its GPU work.
  Here every row of `runtime` counts (the reader gives cuda_runtime, cuda_driver and Runtime).
- it drops every 'user_annotation' range but ProfilerStep#N and nccl / gloo ones (trace.py
  create_trace_event) although StepParser counts them as DataLoader / CPU Exec; here they are
  operators like any other (also in the whole-trace span of a trace without ProfilerStep#N).
- 'gpu_user_annotation' ProfilerStep#N ranges (GPU-side copies of the steps) become steps
  there, doubling them; here steps are the reader's `steps` (host ranges).
- a comm op without External id would make every kernel without one a communication kernel
  there; here External id -1 matches nothing.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

from ..core import columnar
from .summary import merge

# Priority order of torch-tb-profiler's ProfileRole (event_parser.py), "other" last.
CATEGORIES = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec")
BREAKDOWN_COLUMNS = ["step"] + [f"{c}_ns" for c in CATEGORIES] + ["other_ns", "total_ns"]

# torch_tb_profiler/profiler/trace.py NcclOpNameSet / GlooOpNameSet (exact op names).
NCCL_OPS = frozenset({"nccl:broadcast", "nccl:reduce", "nccl:all_reduce", "nccl:all_gather", "nccl:reduce_scatter"})
GLOO_OPS = frozenset({"gloo:broadcast", "gloo:reduce", "gloo:all_reduce", "gloo:all_gather", "gloo:reduce_scatter"})

# torch_tb_profiler/profiler/tensor_core.py TC_Allowlist (after NVIDIA PyProf's prof/tc.py): a
# kernel uses Tensor Cores when its name contains any of these.
TENSOR_CORE_PATTERNS = ("h884", "s884", "h1688", "s1688", "hmma", "i8816", "16816",
                        "dgrad_1x1_stride_2x2", "first_layer_wgrad_kernel", "conv1x1",
                        "conv2d_c1_k1", "direct_group", "xmma_implicit_gemm",
                        "xmma_sparse_conv", "xmma_warp_specialized_implicit_gemm",
                        "xmma_gemm", "xmma_sparse_gemm", "c1688")
# Collective kernels of NCCL and AMD's RCCL (ncclKernel_..., ncclDevKernel_..., rcclGenericKernel...).
COMMUNICATION_KERNEL_PREFIXES = ("nccl", "rccl")

# tb-profiler's tail rule: a last launching step with under this share of the launches of the step
# before it is taken as cut short by the end of the capture, and dropped.
TAIL_STEP_SHARE = 0.8

Intervals = Tuple[np.ndarray, np.ndarray]


# ---------------------------------------------------------------- steps
def step_spans(torch_trace) -> pd.DataFrame:
    """The steps tb-profiler's Overview reports: step, start_ns, end_ns (extended to their device
    work), launches (kernels / copies / sets whose launching call lies inside the host step)."""
    steps = torch_trace.steps
    if len(steps):
        number = steps["step"].to_numpy(np.int64)
        start, end = steps["start_ns"].to_numpy(np.int64), steps["end_ns"].to_numpy(np.int64)
    else:
        number, start, end = _whole_cpu_span(torch_trace.ops)
    if number.size == 0:
        return pd.DataFrame({"step": number, "start_ns": start, "end_ns": end, "launches": number})
    launched_in = _launch_step_of_device_rows(start, end, torch_trace.runtime, torch_trace.gpu)
    launches = np.bincount(launched_in[launched_in >= 0], minlength=number.size)
    if launches.sum() > 0:  # tb-profiler's is_use_gpu
        start, end = _extend_to_device_work(start, end, launched_in, torch_trace.gpu)
        keep = _steps_kept(launches)
        number, start, end, launches = number[:keep], start[:keep], end[:keep], launches[:keep]
    return pd.DataFrame({"step": number, "start_ns": start, "end_ns": end, "launches": launches})


def _whole_cpu_span(ops: pd.DataFrame):
    """StepParser's single step of a trace without ProfilerStep#N: first op start to last op end."""
    if ops.empty:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    return (np.array([-1], np.int64), np.array([ops["start_ns"].min()], np.int64),
            np.array([ops["end_ns"].max()], np.int64))


def _launch_step_of_device_rows(start: np.ndarray, end: np.ndarray, runtime: pd.DataFrame,
                                gpu: pd.DataFrame) -> np.ndarray:
    """Per gpu row: the host step its launching call lies wholly inside, else -1.

    tb-profiler walks calls (by start) and steps together: a call is weighed against the first step
    not ended by the call's start (the first with end > call start, i.e. on the running max of
    ends) and belongs to it only when it starts at or after the step's start and ends by its end."""
    call = gpu["runtime"].to_numpy(np.int64)
    step = np.full(call.size, -1, np.int64)
    launched = call >= 0
    if len(runtime) == 0 or not launched.any():
        return step
    # Only the calls that launched device work are looked up (a third of a trace's calls).
    rt_start = runtime["start_ns"].to_numpy(np.int64)[call[launched]]
    rt_end = runtime["end_ns"].to_numpy(np.int64)[call[launched]]
    candidate = np.searchsorted(np.maximum.accumulate(end), rt_start, side="right")
    valid = candidate < start.size
    at = np.minimum(candidate, start.size - 1)
    inside = valid & (rt_start >= start[at]) & (rt_end <= end[at])
    step[launched] = np.where(inside, at, -1)
    return step


def _extend_to_device_work(start: np.ndarray, end: np.ndarray, launched_in: np.ndarray,
                           gpu: pd.DataFrame) -> Tuple[np.ndarray, np.ndarray]:
    """StepParser._update_steps_duration: steps end at their last device end, start at the
    previous step's end; the first step after untracked device work that ended before its own."""
    dev_start, dev_end = gpu["start_ns"].to_numpy(np.int64), gpu["end_ns"].to_numpy(np.int64)
    n = start.size
    matched = launched_in >= 0
    first_dev = np.full(n, np.iinfo(np.int64).max)
    last_dev = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(first_dev, launched_in[matched], dev_start[matched])
    np.maximum.at(last_dev, launched_in[matched], dev_end[matched])
    has_device = np.zeros(n, bool)
    has_device[launched_in[matched]] = True

    previous_end = int(start[0])
    if has_device[0]:
        before = ~matched & (dev_end < first_dev[0])
        if before.any():
            previous_end = max(previous_end, int(dev_end[before].max()))
    new_start, new_end = start.copy(), end.copy()
    for i in range(n):  # steps are few; each depends on the one before
        s = max(previous_end, int(start[i]))
        e = max(int(end[i]), int(last_dev[i])) if has_device[i] else int(end[i])
        e = max(e, s)  # tb-profiler clamps an 'abnormal' end to the start
        new_start[i], new_end[i] = s, e
        previous_end = e
    return new_start, new_end


def _steps_kept(launches: np.ndarray) -> int:
    """How many leading steps tb-profiler keeps (it drops tail steps it thinks were cut short)."""
    if launches.size <= 1:
        return launches.size
    last = int(np.flatnonzero(launches > 0)[-1])
    if last > 0 and launches[last - 1] * TAIL_STEP_SHARE > launches[last]:
        return last
    return last + 1


# ---------------------------------------------------------------- categories
def category_intervals(torch_trace, names: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> Dict[str, Intervals]:
    """Each category's time as merged [start, end) islands (ns), before priorities apply.
    names: (code per op, distinct names) of ops["name"] (torch_ops.op_names), where the caller has it."""
    ops, runtime, gpu = torch_trace.ops, torch_trace.runtime, torch_trace.gpu
    is_dataloader, is_comm_op = names_where(ops["name"], is_dataloader_op, is_collective_op, factorized=names)
    comm_ext = ops["ext"].to_numpy(np.int64)[is_comm_op]
    kind = gpu_kinds(gpu)
    is_comm_kernel = kind["kernel"] & _is_in(gpu["ext"].to_numpy(np.int64), comm_ext[comm_ext >= 0])

    def rows(frame, mask=None):
        start, end = frame["start_ns"].to_numpy(np.int64), frame["end_ns"].to_numpy(np.int64)
        return (start, end) if mask is None else (start[mask], end[mask])

    comm_ops, comm_kernels = rows(ops, is_comm_op), rows(gpu, is_comm_kernel)
    parts = {
        "kernel": rows(gpu, kind["kernel"] & ~is_comm_kernel),
        "memcpy": rows(gpu, kind["memcpy"]),
        "memset": rows(gpu, kind["memset"]),
        "communication": tuple(np.concatenate([a, b]) for a, b in zip(comm_ops, comm_kernels)),
        "runtime": rows(runtime),
        "dataloader": rows(ops, is_dataloader),
        "cpu_exec": rows(ops, ~(is_dataloader | is_comm_op)),
    }
    return {name: merge(*parts[name]) for name in CATEGORIES}


def gpu_kinds(gpu: pd.DataFrame) -> Dict[str, np.ndarray]:
    """Per kind (kernel, memcpy, memset): which gpu rows are of it; the column's texts compared once
    per distinct text, not per row."""
    codes, distinct = columnar.object_factorize(gpu["kind"].to_numpy(object))
    return {kind: codes == _code_of(distinct, kind) for kind in ("kernel", "memcpy", "memset")}


def _code_of(distinct: np.ndarray, value: str) -> int:
    """value's index among distinct, -2 (no row's code) when absent."""
    hits = np.flatnonzero(distinct == value) if distinct.size else []
    return int(hits[0]) if len(hits) else -2


def _is_in(values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """np.isin(values, wanted), by a hash table (np.isin sorts both: ~30 ms for 350k rows)."""
    if wanted.size == 0:
        return np.zeros(values.size, bool)
    return pd.Series(values).isin(wanted).to_numpy()


def is_collective_op(name: str) -> bool:
    return name in NCCL_OPS or name in GLOO_OPS


def is_dataloader_op(name: str) -> bool:
    """StepParser's DataLoader ranges: a DataLoader iterator's __next__, or any DataPipe range."""
    return ((name.startswith("enumerate(DataLoader)#") and name.endswith(".__next__"))
            or name.startswith("enumerate(DataPipe)#"))


def names_where(names, *predicates, factorized: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> List[np.ndarray]:
    """Per predicate, predicate(name) per row (names: a Series or an object array), evaluated once
    per distinct name (a trace repeats a few thousand names over millions of rows).  factorized:
    (code per row, distinct names) of these names (columnar.object_factorize), where the caller has it."""
    if len(names) == 0:
        return [np.zeros(0, bool) for _ in predicates]
    values = names.to_numpy(object) if isinstance(names, pd.Series) else names
    codes, uniques = columnar.object_factorize(values) if factorized is None else factorized
    distinct = [str(name) for name in uniques]
    return [np.fromiter(map(predicate, distinct), bool, len(distinct))[codes] for predicate in predicates]


def step_time_breakdown(torch_trace, spans: Optional[pd.DataFrame] = None,
                        names: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> pd.DataFrame:
    """One row per step (BREAKDOWN_COLUMNS, int64 ns): each instant of the step in the first
    category covering it, the rest in other_ns; the categories and other_ns sum to total_ns.

    A category's share of a step is |union of it and the categories before it| minus |union of the
    categories before it|, both within the step: one merge per category and two lookups per step
    (steps are few), no sort of every boundary.  spans: step_spans(torch_trace), names: the op
    names' codes (torch_ops.op_names), where the caller has them."""
    spans = step_spans(torch_trace) if spans is None else spans
    start, end = spans["start_ns"].to_numpy(np.int64), spans["end_ns"].to_numpy(np.int64)
    islands = category_intervals(torch_trace, names)
    out = {"step": spans["step"].to_numpy(np.int64)}
    union: Intervals = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    covered_before = np.zeros(start.size, np.int64)
    for name in CATEGORIES:
        if islands[name][0].size:  # (an empty category leaves the union as it is)
            union = merge(np.concatenate([union[0], islands[name][0]]), np.concatenate([union[1], islands[name][1]]))
        covered = _measure_within(union, start, end)
        out[f"{name}_ns"] = covered - covered_before
        covered_before = covered
    out["total_ns"] = end - start
    out["other_ns"] = out["total_ns"] - covered_before
    return pd.DataFrame(out, columns=BREAKDOWN_COLUMNS).astype(np.int64)


def _measure_within(islands: Intervals, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per window [start, end): the length of the sorted disjoint islands inside it."""
    s, e = islands
    if s.size == 0:
        return np.zeros(start.size, np.int64)
    running = np.concatenate([[0], np.cumsum(e - s)])  # length of the first k islands

    def covered_until(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(s, t, side="right")  # islands starting at or before t
        partial = np.where(k > 0, np.minimum(e[np.maximum(k - 1, 0)], t) - s[np.maximum(k - 1, 0)], 0)
        return running[np.maximum(k - 1, 0)] * (k > 0) + np.maximum(partial, 0)

    return covered_until(end) - covered_until(start)


# ---------------------------------------------------------------- GPU summary
def gpu_summary(torch_trace, spans: Optional[pd.DataFrame] = None) -> dict:
    """tb-profiler's GPU summary over the steps (first start .. last end), per device of a kernel:
    gpu_utilization and est_sm_efficiency (fractions), est_achieved_occupancy_pct (percent; None
    when no kernel carries it, as is est_sm_efficiency without blocks per SM), kernel_ns (all its
    kernels, in steps or not), tensor_core_kernel_share and communication_kernel_share of that.
    spans: step_spans(torch_trace), where the caller has it."""
    spans = step_spans(torch_trace) if spans is None else spans
    if spans.empty:
        return {"span_start_ns": None, "span_end_ns": None, "devices": {}}
    span = (int(spans["start_ns"].iloc[0]), int(spans["end_ns"].iloc[-1]))
    gpu = torch_trace.gpu
    device = gpu["device"].to_numpy(np.int64)
    kernel = gpu_kinds(gpu)["kernel"] & (device >= 0)
    # Only the columns read, gathered per device (not a copy of every column of the kernels' rows).
    columns = {c: gpu[c].to_numpy(dtype) for c, dtype in
               (("start_ns", np.int64), ("end_ns", np.int64), ("name", object), ("blocks_per_sm", np.float64),
                ("est_occupancy_pct", np.float64))}
    devices = {}
    for on in columnar.distinct(device[kernel]).tolist():  # in device order
        rows = kernel & (device == on)
        devices[int(on)] = _device_summary({c: values[rows] for c, values in columns.items()}, span)
    return {"span_start_ns": span[0], "span_end_ns": span[1], "devices": devices}


def _device_summary(kernels: Dict[str, np.ndarray], span: Tuple[int, int]) -> dict:
    """gpu_summary's figures of one device's kernels (columns start_ns, end_ns, name, blocks_per_sm,
    est_occupancy_pct)."""
    start, end = kernels["start_ns"], kernels["end_ns"]
    span_ns = span[1] - span[0]
    s, e = merge(start, end)
    busy = np.clip(np.minimum(e, span[1]) - np.maximum(s, span[0]), 0, None).sum()
    duration = (end - start).astype(np.float64)
    kernel_ns = duration.sum()
    tensor_core, collective = names_where(kernels["name"], uses_tensor_cores, is_collective_kernel)
    return {
        "gpu_utilization": float(busy / span_ns) if span_ns > 0 else None,
        "est_sm_efficiency": _sm_efficiency(start, end, kernels["blocks_per_sm"], span),
        "est_achieved_occupancy_pct": _occupancy(start, end, kernels["est_occupancy_pct"], span),
        "kernel_ns": int(kernel_ns),
        "tensor_core_kernel_share": float(duration[tensor_core].sum() / kernel_ns) if kernel_ns > 0 else 0.0,
        "communication_kernel_share": float(duration[collective].sum() / kernel_ns) if kernel_ns > 0 else 0.0,
    }


def uses_tensor_cores(kernel_name: str) -> bool:
    return any(pattern in kernel_name for pattern in TENSOR_CORE_PATTERNS)


def is_collective_kernel(kernel_name: str) -> bool:
    return kernel_name.lower().startswith(COMMUNICATION_KERNEL_PREFIXES)


def _sm_efficiency(start, end, blocks_per_sm, span) -> Optional[float]:
    """The time integral over the span of min(sum of the running kernels' blocks per SM, 1),
    divided by the span (gpu_metrics_parser.calculate_approximated_sm_efficiency; kernels without
    a positive value take no part)."""
    use = blocks_per_sm > 0  # NaN compares False
    if not use.any():
        return None
    times = np.concatenate([start[use], end[use]])
    delta = np.concatenate([blocks_per_sm[use], -blocks_per_sm[use]])
    order = np.argsort(times, kind="stable")
    times, level = times[order], np.cumsum(delta[order])
    seg_start = np.maximum(times[:-1], span[0])
    seg_end = np.minimum(times[1:], span[1])
    width = np.clip(seg_end - seg_start, 0, None)
    value = np.where(level[:-1] > 0, np.minimum(level[:-1], 1.0), 0.0)
    if not ((width > 0) & (value > 0)).any():
        return None
    return float((value * width).sum() / (span[1] - span[0]))


def _occupancy(start, end, occupancy_pct, span) -> Optional[float]:
    """Occupancy weighted by each kernel's time inside the span (calculate_occupancy)."""
    use = occupancy_pct >= 0  # NaN compares False
    width = np.clip(np.minimum(end, span[1]) - np.maximum(start, span[0]), 0, None)[use]
    if width.sum() <= 0:
        return None
    return float((occupancy_pct[use] * width).sum() / width.sum())
