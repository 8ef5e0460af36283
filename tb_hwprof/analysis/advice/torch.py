"""Advice for PyTorch profiler (Kineto) traces, from their operator level (Profile.torch,
model.TorchTrace: ops -> runtime calls -> GPU work, every time in ns on the trace's clock).

Every rule weighs its time against the profiled steps (the ProfilerStep#N ranges; without any,
the capture span from the first to the last recorded event) and fires only above a named share:
  torch.dataloader_bound  the training thread waits in `enumerate(DataLoader)...__next__`
  torch.host_sync         the host blocks on the GPU inside the step (.item(), synchronize, pageable copies)
  torch.launch_bound      tiny kernels, launch calls as long as the GPU work, and an idle GPU
  torch.fp32_gemm         FP32 matrix multiplies / convolutions on a GPU with tensor (matrix) cores
  torch.pageable_copies   host <-> device copies from / to pageable memory
The memory rules read the Memory view's tables (analysis/torch_memory.py, profile_memory=True):
  torch.memory_capacity   a device's reserved peak near its capacity (deviceProperties' totalGlobalMem)
  torch.memory_fragmentation  at the allocated peak the allocator holds far more than the tensors use
  torch.allocator_churn   many short-lived allocations of one size per step
"""
from __future__ import annotations

import dataclasses
import json
import re
from typing import Dict, List, Optional, Set, Tuple

import numpy as np
import pandas as pd

from ...core.columnar import text_mask
from ..context import CaptureContext
from ...core.findings import Finding, by_severity, finding, time_text
from ..summary import interval_union_ns, merge
from ..timeline import SYNC_API, overlap_ns
from ..torch_memory import SHORT_LIVED_NS
from .gpu_timeline import LAUNCH_API

# DataLoader: a tenth of the step spent waiting for the next batch is time a worker pool or a
# prefetch would hand back; from 30% the GPU starves for most of the step.
DATALOADER_SHARE_PCT, DATALOADER_HIGH_PCT = 10.0, 30.0
# Host syncs: the training thread blocked on the GPU for a tenth of the step cannot queue work
# ahead in that time (the GPU runs dry behind it); from 30% it sets the step's pace.
HOST_SYNC_SHARE_PCT, HOST_SYNC_HIGH_PCT = 10.0, 30.0
# Launch-bound: a launch costs ~3-5 us of host time, so kernels under ~10 us (median) cannot hide
# it; the GPU waits on the launch rate when the launch calls add up to half its busy time or more
# while it idles for 30% of the step.
TINY_KERNEL_NS = 10_000
LAUNCH_TO_BUSY_PCT = 50.0
LAUNCH_IDLE_PCT, LAUNCH_IDLE_HIGH_PCT = 30.0, 60.0
# Fewer kernels per step than this leave too little launch overhead to win back with graphs.
MIN_KERNELS_PER_STEP = 50
# FP32 GEMMs / convolutions: from a fifth of kernel time, tensor cores (several times the FP32
# rate) change the step time visibly; from half they are the first lever.
FP32_GEMM_SHARE_PCT, FP32_GEMM_HIGH_PCT = 20.0, 50.0
# Pageable copies: below 1% of GPU busy time (and of step time on the host) pinning cannot win 1%
# back; from 10% it is a first lever (as gpu.pageable_copies).
PAGEABLE_SHARE_PCT, PAGEABLE_HIGH_PCT = 1.0, 10.0
TOP = 3  # callers / ops named in the text
# Memory capacity: from 90% of the device's memory reserved (torch-tb-profiler's own limit, there on
# the allocated peak) the next larger batch or activation runs out of memory; from 97% it is one step away.
MEMORY_CAPACITY_PCT, MEMORY_CAPACITY_HIGH_PCT = 90.0, 97.0
# Fragmentation: at the allocated peak, a quarter of the reserved memory held by no tensor, and at
# least 1 GiB of it (smaller gaps cost little), is what expandable segments give back.
FRAGMENTATION_GAP_PCT, FRAGMENTATION_MIN_BYTES = 25.0, 1 << 30
# Churn: an allocation freed within 1 ms (torch_memory.SHORT_LIVED_NS) lives inside a few operators;
# 200 of one size per step on a device is a temporary made and dropped in a loop, each a host-side
# allocator call.
CHURN_PER_STEP = 200
CHURN_LIFETIME_NS = SHORT_LIVED_NS

DATALOADER_PREFIX = "enumerate(DataLoader)"
SINGLE_PROCESS_ITER = "_SingleProcessDataLoaderIter"
# .item() / bool(tensor) / print(tensor) on a GPU tensor: a device-to-host copy and a sync.
ITEM_OPS = ("aten::item", "aten::_local_scalar_dense")
# Matrix multiplies and convolutions, forward and backward, as ATen names them.
GEMM_OPS = re.compile(r"^aten::(?:mm|addmm|bmm|baddbmm|addbmm|matmul|linear|conv[123]d|convolution|_convolution|"
                      r"cudnn_convolution\w*|miopen_convolution\w*|convolution_backward\w*|"
                      r"_convolution_double_backward)$")
# Kernel names that show tensor (matrix) cores at work: cuBLAS / cuDNN / CUTLASS tile names (h884,
# s1688, 16816 ...; torch-tb-profiler's list after NVIDIA PyProf), reduced precisions and TF32,
# WMMA / HMMA / tensorop, Hopper+ cuBLAS (nvjet) and AMD MFMA kernels.
TENSOR_CORE_KERNEL = re.compile(r"h884|s884|h1688|s1688|hmma|i8816|16816|c1688|tf32|bf16|f16|fp16|half|wmma|"
                                r"tensorop|xmma|nvjet|mfma|sm90_|sm100_", re.I)
# ... except cuBLAS's xmma / sm80+ GEMMs on FP32 inputs and outputs without TF32
# (sm80_xmma_gemm_f32f32_f32f32_f32_...): FP32 units.
FP32_ONLY_GEMM_KERNEL = re.compile(r"f32f32_f32f32_f32")
# AMD parts with matrix cores (CDNA: MI100 gfx908, MI200 gfx90a, MI300 gfx94x, MI350 gfx95x).
AMD_MATRIX_CORES = re.compile(r"\bMI(?:1\d\d|2\d\d|3\d\d)|gfx9(?:08|0a|4\d|5\d)", re.I)


# ---------------------------------------------------------------- what the rules weigh against
@dataclasses.dataclass
class Steps:
    """The time the rules weigh against: the profiled steps (merged), or the capture span."""

    intervals: Tuple[np.ndarray, np.ndarray]
    count: int  # ProfilerStep#N ranges; 0 when weighed against the capture span
    threads: Set[Tuple[int, int]]  # (pid, tid) of the steps: the training loop's thread(s)

    @property
    def total_ns(self) -> int:
        return int((self.intervals[1] - self.intervals[0]).sum())

    @property
    def label(self) -> str:
        return f"{self.count} profiled step{'s' if self.count != 1 else ''}" if self.count else "the capture span"

    @property
    def whole(self) -> str:
        """What a share is of, in a title: "the step time" or "the capture span"."""
        return "the step time" if self.count else "the capture span"

    def per_step(self, ns: float) -> str:
        return f", {ns / self.count / 1e6:.3g} ms per step" if self.count else ""


def steps_of(torch) -> Optional[Steps]:
    steps = torch.steps
    if len(steps):
        intervals = merge(steps["start_ns"].to_numpy(), steps["end_ns"].to_numpy())
        return Steps(intervals, len(steps), set(zip(steps["pid"].tolist(), steps["tid"].tolist())))
    starts = [t["start_ns"].to_numpy() for t in (torch.ops, torch.runtime, torch.gpu) if len(t)]
    ends = [t["end_ns"].to_numpy() for t in (torch.ops, torch.runtime, torch.gpu) if len(t)]
    if not starts:
        return None
    span = (np.array([min(int(s.min()) for s in starts)]), np.array([max(int(e.max()) for e in ends)]))
    return Steps(span, 0, set()) if span[1][0] > span[0][0] else None


def _intervals(rows: pd.DataFrame) -> Tuple[np.ndarray, np.ndarray]:
    return rows["start_ns"].to_numpy(np.int64), rows["end_ns"].to_numpy(np.int64)


def _inside(rows: pd.DataFrame, steps: Steps) -> np.ndarray:
    """Per row: does it start inside the steps."""
    return _starts_inside(rows["start_ns"].to_numpy(np.int64), steps)


def _starts_inside(start: np.ndarray, steps: Steps) -> np.ndarray:
    """Per start: does it fall inside the steps."""
    s, e = steps.intervals
    i = np.searchsorted(s, start, side="right") - 1
    return (i >= 0) & (start < e[np.maximum(i, 0)])


def _rows_passing(values: np.ndarray, rows: np.ndarray, test) -> np.ndarray:
    """The rows whose value passes test (rows: indices into values)."""
    return rows[text_mask(values[rows], test)] if rows.size else rows


def _of_kind(gpu: pd.DataFrame, kind: str) -> np.ndarray:
    """Per GPU row: is it a `kind` (kernel, memcpy, memset)."""
    return text_mask(gpu["kind"].to_numpy(), lambda k: k == kind)


def _in_steps_ns(intervals, steps: Steps) -> int:
    """Length of union(intervals) within the steps."""
    return overlap_ns(intervals, steps.intervals) if intervals[0].size else 0


def _on_threads(ops: pd.DataFrame, rows: np.ndarray, threads: Set[Tuple[int, int]]) -> np.ndarray:
    """The rows (indices into ops) on one of the threads; all of them without threads."""
    if not threads:
        return rows
    pid, tid = ops["pid"].to_numpy()[rows], ops["tid"].to_numpy()[rows]
    on = np.zeros(rows.size, dtype=bool)
    for p, t in threads:
        on |= (pid == p) & (tid == t)
    return rows[on]


def _pct(part, whole) -> float:
    return 100.0 * float(part) / float(whole) if whole else float("nan")


def _bytes(n) -> str:
    n = float(n)
    return f"{n / 1e9:.3g} GB" if n >= 1e9 else f"{n / 1e6:.3g} MB" if n >= 1e6 else f"{n / 1e3:.3g} kB"


def _finding(rule: str, severity: str, title: str, text: str, remedy: str, figures: Dict[str, tuple]) -> Finding:
    return finding(f"torch.{rule}", severity, title, text, remedy, figures)


def op_chain(ops: pd.DataFrame, row: int, keep: int = 4) -> str:
    """The innermost `keep` operators enclosing op `row`, outermost first ("a > b > c")."""
    names, parent = ops["name"].to_numpy(), ops["parent"].to_numpy()
    chain = []
    while row >= 0:
        chain.append(str(names[row]))
        row = int(parent[row])
    shown = chain[:keep][::-1]
    return (" > ".join(shown) if len(chain) <= keep else "... > " + " > ".join(shown)) or "(no operator)"


# ---------------------------------------------------------------- 1. DataLoader
def dataloader_bound(torch, steps: Steps, context: CaptureContext) -> Optional[Finding]:
    ops = torch.ops
    # The name first: the few loader rows are then checked for the thread.
    rows = np.flatnonzero(text_mask(ops["name"].to_numpy(), lambda n: n.startswith(DATALOADER_PREFIX)))
    loader = ops.iloc[_on_threads(ops, rows, steps.threads)]
    if loader.empty:
        return None
    waited = _in_steps_ns(_intervals(loader), steps)
    share = _pct(waited, steps.total_ns)
    if not share >= DATALOADER_SHARE_PCT:
        return None
    iterators = sorted(set(loader["name"].astype(str)))
    single = any(SINGLE_PROCESS_ITER in n for n in iterators)
    pageable = _pageable_host_to_device(torch)
    return _finding(
        "dataloader_bound", "high" if share >= DATALOADER_HIGH_PCT else "medium",
        f"The training loop waits for data {share:.0f}% of {steps.whole}",
        f"{len(loader)} calls of {iterators[0]}{' and others' if len(iterators) > 1 else ''} took {time_text(waited)} "
        f"of the {time_text(steps.total_ns)} in {steps.label} ({share:.1f}%, threshold {DATALOADER_SHARE_PCT:.0f}%"
        f"{steps.per_step(waited)}): the GPU gets no new batch while the loop waits"
        + (f"; the iterator is {SINGLE_PROCESS_ITER}, so the DataLoader runs with num_workers=0 and loads "
           f"every batch in the training process" if single else ""),
        _dataloader_remedy(single, pageable),
        {"loader_ns": (float(waited), "ns"), "step_ns": (float(steps.total_ns), "ns"), "share_pct": (share, "%"),
         "steps": (steps.count, "count"), "calls": (len(loader), "count"), "iterator": (iterators[0], ""),
         "num_workers_zero": (single, ""), "pageable_host_to_device_copies": (pageable, "count"),
         "threshold_pct": (DATALOADER_SHARE_PCT, "%")})


def _pageable_host_to_device(torch) -> int:
    gpu = torch.gpu
    copies = np.flatnonzero(_of_kind(gpu, "memcpy"))
    return _rows_passing(gpu["name"].to_numpy(), copies, lambda n: "HtoD" in n and "Pageable" in n).size


def _dataloader_remedy(single: bool, pageable: int) -> str:
    workers = ("Set DataLoader(num_workers=N) with N up to the CPU cores per GPU (this trace shows num_workers=0), "
               "with persistent_workers=True so the workers survive between epochs and prefetch_factor=2-4"
               if single else
               "Give the loader more throughput: raise num_workers (up to the CPU cores per GPU) and prefetch_factor, "
               "keep persistent_workers=True so workers are not restarted every epoch, and move decoding / "
               "augmentation out of __getitem__ (pre-process once, cache, or augment on the GPU)")
    pin = (f"; pin_memory=True (the trace's {pageable} host-to-device copies come from pageable memory) with "
           f"tensor.to(device, non_blocking=True)" if pageable else "")
    return workers + pin


# ---------------------------------------------------------------- 2. host syncs
def host_sync(torch, steps: Steps, context: CaptureContext) -> Optional[Finding]:
    calls = torch.runtime.iloc[blocking_calls(torch)]
    items = torch.ops.iloc[item_ops_on_gpu(torch)]
    calls, items = calls[_inside(calls, steps)], items[_inside(items, steps)]
    if not steps.count:  # a bare torch.cuda.synchronize() brackets the measured region of a script without steps
        calls = calls[calls["op"] >= 0]
    if calls.empty and items.empty:
        return None
    starts = np.concatenate([_intervals(calls)[0], _intervals(items)[0]])
    ends = np.concatenate([_intervals(calls)[1], _intervals(items)[1]])
    blocked = _in_steps_ns((starts, ends), steps)
    share = _pct(blocked, steps.total_ns)
    if not share >= HOST_SYNC_SHARE_PCT:
        return None
    syncs = int(merge(starts, ends)[0].size)  # a .item() (copy + wait) is one sync
    callers = sync_callers(torch, calls)
    named = "; ".join(f"{c['caller']} > {c['call']} x{c['calls']} ({time_text(c['blocked_ns'])})" for c in callers)
    per_step = f" ({syncs / steps.count:.3g} per step)" if steps.count else ""
    return _finding(
        "host_sync", "high" if share >= HOST_SYNC_HIGH_PCT else "medium",
        f"The host blocks on the GPU {share:.0f}% of {steps.whole}",
        f"{syncs} host syncs{per_step} blocked the CPU for {time_text(blocked)} of the {time_text(steps.total_ns)} in "
        f"{steps.label} ({share:.1f}%, threshold {HOST_SYNC_SHARE_PCT:.0f}%): synchronize calls, copies to or "
        f"from pageable memory" + (f" and {len(items)} .item() reads of GPU tensors (aten::item / "
                                   f"_local_scalar_dense)" if len(items) else "")
        + f"; the callers holding the most: {named}",
        "Keep the step free of host syncs: no .item() / .cpu() / .tolist() / print / Python if on GPU tensors "
        "per step (accumulate metrics on the GPU and read them every N steps), no torch.cuda.synchronize() "
        "outside timing code; host-to-device copies from pinned memory (DataLoader(pin_memory=True)) with "
        "non_blocking=True, device-to-host copies into pinned tensors with non_blocking=True read after an event; "
        "torch.cuda.set_sync_debug_mode('warn') reports every sync with its Python line",
        {"blocked_ns": (float(blocked), "ns"), "step_ns": (float(steps.total_ns), "ns"), "share_pct": (share, "%"),
         "syncs": (syncs, "count"), "steps": (steps.count, "count"), "item_ops": (len(items), "count"),
         "callers": (callers, ""), "threshold_pct": (HOST_SYNC_SHARE_PCT, "%")})


def blocking_calls(torch) -> np.ndarray:
    """The rows of the runtime calls that block the host until the GPU catches up: synchronize
    calls, copies without Async, and (Async) copies from or to pageable memory (staged, so
    synchronous)."""
    sync = text_mask(torch.runtime["name"].to_numpy(), lambda n: SYNC_API.match(n) is not None)
    gpu = torch.gpu
    launched = np.flatnonzero(_of_kind(gpu, "memcpy") & (gpu["runtime"].to_numpy() >= 0))
    pageable = _rows_passing(gpu["name"].to_numpy(), launched, lambda n: "Pageable" in n)
    sync[gpu["runtime"].to_numpy()[pageable]] = True
    return np.flatnonzero(sync)


def item_ops_on_gpu(torch) -> np.ndarray:
    """The rows of the aten::item / _local_scalar_dense instances that called the GPU runtime (GPU
    tensors; on a CPU tensor .item() is a plain read)."""
    ops, runtime = torch.ops, torch.runtime
    items = np.flatnonzero(text_mask(ops["name"].to_numpy(), lambda n: n in ITEM_OPS))
    if not items.size:  # no walk up a million call chains for nothing
        return items
    called = np.zeros(len(ops), dtype=bool)
    row = runtime["op"].to_numpy()
    parent = ops["parent"].to_numpy()
    row = row[row >= 0]
    while row.size:  # mark every op enclosing a runtime call
        called[row] = True
        row = parent[row]
        row = row[row >= 0]
        row = row[~called[row]]
    return items[called[items]]


def sync_callers(torch, calls: pd.DataFrame) -> List[dict]:
    """The TOP operator chains by time blocked in their calls: caller, call, calls, blocked_ns."""
    if calls.empty:
        return []
    frame = pd.DataFrame({"caller": [op_chain(torch.ops, int(r)) for r in calls["op"]],
                          "call": calls["name"].astype(str).to_numpy(),
                          "blocked_ns": (calls["end_ns"] - calls["start_ns"]).to_numpy(np.float64)})
    grouped = frame.groupby(["caller", "call"], sort=False)["blocked_ns"].agg(["size", "sum"]).reset_index()
    best = grouped.sort_values("sum", ascending=False, kind="stable").head(TOP)
    return [{"caller": c, "call": n, "calls": int(k), "blocked_ns": float(t)}
            for c, n, k, t in zip(best["caller"], best["call"], best["size"], best["sum"])]


# ---------------------------------------------------------------- 3. launch-bound
def launch_bound(torch, steps: Steps, context: CaptureContext) -> Optional[Finding]:
    start, end = _intervals(torch.gpu)
    inside = _starts_inside(start, steps)
    kernels = np.flatnonzero(inside & _of_kind(torch.gpu, "kernel"))
    per_step = kernels.size / max(steps.count, 1)
    if not kernels.size or per_step < MIN_KERNELS_PER_STEP:
        return None
    median = float(pd.Series(end[kernels] - start[kernels]).median())
    busy = _in_steps_ns((start[inside], end[inside]), steps)
    idle = _pct(steps.total_ns - busy, steps.total_ns)
    call_start, call_end = _intervals(torch.runtime)
    launches = np.flatnonzero(text_mask(torch.runtime["name"].to_numpy(),
                                            lambda n: re.match(LAUNCH_API, n) is not None))
    launches = launches[_starts_inside(call_start[launches], steps)]  # the launches only: a fraction of the calls
    launch_ns = float((call_end[launches] - call_start[launches]).sum())
    launch_to_busy = _pct(launch_ns, busy)
    if not (median < TINY_KERNEL_NS and launch_to_busy >= LAUNCH_TO_BUSY_PCT and idle >= LAUNCH_IDLE_PCT):
        return None
    graphs = "HIP graphs" if context.gpu_api == "HIP" else "CUDA graphs"
    calls = launches.size
    return _finding(
        "launch_bound", "high" if idle >= LAUNCH_IDLE_HIGH_PCT else "medium",
        f"Launch-bound: {kernels.size} kernels with a median of {median / 1e3:.1f} us, GPU idle {idle:.0f}%",
        f"{kernels.size} kernels in {steps.label} ran a median {median / 1e3:.2f} us (threshold "
        f"{TINY_KERNEL_NS / 1e3:.0f} us); the CPU spent {time_text(launch_ns)} in {calls} launch calls, "
        f"{launch_to_busy:.0f}% of the GPU's {time_text(busy)} busy time (threshold {LAUNCH_TO_BUSY_PCT:.0f}%), "
        f"and the GPU "
        f"idled {idle:.1f}% of the {time_text(steps.total_ns)} (threshold {LAUNCH_IDLE_PCT:.0f}%): it waits for "
        f"launches",
        f"Launch fewer, larger kernels: torch.compile(model) fuses element-wise chains, "
        f"torch.compile(mode=\"reduce-overhead\") (or capturing the static step with torch.cuda.graph) "
        f"replays the whole step as {graphs} with one launch; use fused optimizers (foreach=True / fused=True) and "
        f"larger batches",
        {"kernels": (kernels.size, "count"), "median_kernel_ns": (median, "ns"),
         "launch_calls": (calls, "count"), "launch_ns": (launch_ns, "ns"), "busy_ns": (float(busy), "ns"),
         "launch_to_busy_pct": (launch_to_busy, "%"), "step_ns": (float(steps.total_ns), "ns"),
         "gpu_idle_pct": (idle, "%"), "steps": (steps.count, "count")})


# ---------------------------------------------------------------- 4. FP32 GEMMs
def fp32_gemm(torch, steps: Steps, devices, context: CaptureContext) -> Optional[Finding]:
    gpu = torch.gpu
    start, end = _intervals(gpu)
    is_kernel = _of_kind(gpu, "kernel")
    device = _kernel_device(devices, gpu["device"].to_numpy()[is_kernel], end[is_kernel] - start[is_kernel])
    cores = matrix_cores(device)
    kernels = np.flatnonzero(is_kernel & _starts_inside(start, steps))
    if cores is None or not kernels.size:
        return None
    gemm_op = fp32_gemm_op_of_kernels(torch, gpu["op"].to_numpy()[kernels])
    names = gpu["name"].to_numpy()[kernels]
    picked = (gemm_op >= 0) & ~_names_matching(names, uses_tensor_cores, gemm_op >= 0)
    duration = (end[kernels] - start[kernels]).astype(np.float64)
    total, fp32 = float(duration.sum()), float(duration[picked].sum())
    share = _pct(fp32, total)
    if not picked.any() or not share >= FP32_GEMM_SHARE_PCT:
        return None
    ops = _time_by(duration[picked], torch.ops["name"].to_numpy()[gemm_op[picked]])
    top_kernels = _time_by(duration[picked], gpu["name"].iloc[kernels[picked]].astype(str).to_numpy())
    return _finding(
        "fp32_gemm", "high" if share >= FP32_GEMM_HIGH_PCT else "medium",
        f"FP32 matrix multiplies / convolutions take {share:.0f}% of GPU kernel time",
        f"{int(picked.sum())} kernels of FP32 {', '.join(o['name'] for o in ops)} ran {time_text(fp32)} of "
        f"{time_text(total)} "
        f"kernel time in {steps.label} ({share:.1f}%, threshold {FP32_GEMM_SHARE_PCT:.0f}%) on FP32 units, none a "
        f"tensor-core kernel (the longest: {top_kernels[0]['name'][:100]}); the {device.name} has {CORES_TEXT[cores]}",
        FP32_REMEDIES[cores],
        {"fp32_gemm_ns": (fp32, "ns"), "kernel_ns": (total, "ns"), "share_pct": (share, "%"),
         "kernels": (int(picked.sum()), "count"), "ops": (ops, ""), "top_kernels": (top_kernels, ""),
         "device": (device.name, ""), "compute_capability": (device.compute_capability, ""),
         "matrix_cores": (cores, ""), "threshold_pct": (FP32_GEMM_SHARE_PCT, "%")})


def uses_tensor_cores(kernel: str) -> bool:
    """Whether a kernel's name shows tensor (matrix) cores at work."""
    if FP32_ONLY_GEMM_KERNEL.search(kernel) and "tf32" not in kernel.lower():
        return False
    return TENSOR_CORE_KERNEL.search(kernel) is not None


def _names_matching(names: np.ndarray, test, rows: np.ndarray) -> np.ndarray:
    """Per name: test(name), asked once per distinct name among `rows` (False elsewhere)."""
    hit = np.zeros(names.size, dtype=bool)
    hit[rows] = text_mask(names[rows], test)
    return hit


def _time_by(duration: np.ndarray, names: np.ndarray) -> List[dict]:
    """The TOP names by summed duration: name, gpu_ns."""
    sums = pd.Series(duration).groupby(names).sum().sort_values(ascending=False, kind="stable").head(TOP)
    return [{"name": str(n), "gpu_ns": float(t)} for n, t in sums.items()]


# What the device's matrix units take (matrix_cores) and the remedy for each.
CORES_TEXT = {
    "nvidia_tf32": "tensor cores for bf16, fp16 and TF32 (compute capability 8.0+)",
    "nvidia_fp16": "tensor cores for fp16 only (compute capability 7.x: no bf16, no TF32)",
    "amd_cdna": "matrix cores (MFMA) whose bf16 / fp16 rate is several times their fp32 rate",
}
_AUTOCAST = "Run the forward pass and the loss under torch.autocast(device_type=\"cuda\", dtype=torch.{dtype})"
FP32_REMEDIES = {
    "nvidia_tf32": _AUTOCAST.format(dtype="bfloat16") + " so matmuls and convolutions run on tensor cores; or, "
                   "keeping FP32 tensors, allow TF32: torch.set_float32_matmul_precision(\"high\") (sets "
                   "torch.backends.cuda.matmul.allow_tf32) and torch.backends.cudnn.allow_tf32 = True",
    "nvidia_fp16": _AUTOCAST.format(dtype="float16") + " with torch.amp.GradScaler(\"cuda\") for the loss scaling "
                   "fp16 training needs (this GPU has no bf16 or TF32 tensor cores); channels_last memory format "
                   "(model.to(memory_format=torch.channels_last)) helps convolutions reach the tensor-core kernels",
    "amd_cdna": _AUTOCAST.format(dtype="bfloat16") + " (ROCm keeps the \"cuda\" device type) so matmuls and "
                "convolutions run on the matrix cores at their bf16 rate",
}


def fp32_gemm_op_of_kernels(torch, kernel_op: np.ndarray) -> np.ndarray:
    """Per kernel (by its launching op): the innermost enclosing GEMM / convolution op whose inputs
    are FP32, -1 for none.  An op is FP32 when its first input is "float" (input_types)."""
    ops = torch.ops
    gemm = np.flatnonzero(text_mask(ops["name"].to_numpy(), GEMM_OPS.match))
    # Each distinct input_types text parsed once (GEMMs repeat a few signatures thousands of times).
    fp32_gemm_ops = _rows_passing(ops["input_types"].to_numpy(), gemm, _first_input_is_fp32)
    found = np.full(kernel_op.size, -1, dtype=np.int64)
    if not fp32_gemm_ops.size:
        return found
    is_gemm = np.zeros(len(ops), dtype=bool)
    is_gemm[fp32_gemm_ops] = True
    parent = ops["parent"].to_numpy()
    looking = np.flatnonzero(kernel_op >= 0)  # kernels still looking, each at op `row`
    row = kernel_op[looking]
    while looking.size:  # one level up the chains per pass
        hit = is_gemm[row]
        found[looking[hit]] = row[hit]
        looking, row = looking[~hit], parent[row[~hit]]
        up = row >= 0
        looking, row = looking[up], row[up]
    return found


def _first_input_is_fp32(types: str) -> bool:
    if not types:
        return False
    try:
        parsed = json.loads(types)
    except ValueError:
        return False
    return bool(parsed) and parsed[0] == "float"


def _kernel_device(devices, kernel_device: np.ndarray, kernel_ns: np.ndarray):
    """The device that ran the most kernel time (a rank's trace lists every GPU of the node), from
    each kernel's device and duration; None without kernels or devices."""
    if not kernel_device.size or not devices:
        return None
    busiest = int(pd.Series(kernel_ns).groupby(kernel_device).sum().idxmax())
    return next((d for d in devices if d.id == busiest), None)


def matrix_cores(device) -> Optional[str]:
    """A key of CORES_TEXT for the device's tensor / matrix cores; None without them or unknown
    (an AMD device named only "AMD Radeon Graphics" may be a Vega without matrix cores)."""
    if device is None:
        return None
    if device.vendor == "AMD":
        return "amd_cdna" if AMD_MATRIX_CORES.search(f"{device.name} {device.architecture}") else None
    try:
        major = int(str(device.compute_capability).split(".")[0])
    except ValueError:
        return None
    return "nvidia_tf32" if major >= 8 else "nvidia_fp16" if major >= 7 else None


# ---------------------------------------------------------------- 5. pageable copies
def pageable_copies(torch, steps: Steps, context: CaptureContext) -> Optional[Finding]:
    gpu = torch.gpu
    start, end = _intervals(gpu)
    inside = _starts_inside(start, steps)
    copies = gpu.iloc[_rows_passing(gpu["name"].to_numpy(), np.flatnonzero(inside & _of_kind(gpu, "memcpy")),
                                    lambda n: "Pageable" in n)]
    if copies.empty:
        return None
    copy_ns = float((copies["end_ns"] - copies["start_ns"]).sum())
    busy = _in_steps_ns((start[inside], end[inside]), steps)
    launched = copies[copies["runtime"] >= 0]
    calls = torch.runtime.iloc[launched["runtime"].to_numpy()]
    # Host time: the host-to-device calls, which stage the data through a pinned buffer on the CPU
    # (a device-to-host call's time is mostly the wait for the queue: torch.host_sync counts it).
    to_device = calls[text_mask(launched["name"].to_numpy(), lambda n: "HtoD" in n)]
    host_ns = float(interval_union_ns(*_intervals(to_device)))
    gpu_share, host_share = _pct(copy_ns, busy), _pct(host_ns, steps.total_ns)
    if not (gpu_share >= PAGEABLE_SHARE_PCT or host_share >= PAGEABLE_SHARE_PCT):  # NaN: nothing to weigh against
        return None
    share = max(x for x in (gpu_share, host_share) if x >= 0)
    nbytes = float(copies["bytes"].where(copies["bytes"] >= 0).sum())
    kinds = copies["name"].astype(str).value_counts()
    callers = sorted({op_chain(torch.ops, int(r)) for r in calls["op"]})[:TOP]
    return _finding(
        "pageable_copies", "high" if share >= PAGEABLE_HIGH_PCT else "medium",
        f"{len(copies)} copies to or from pageable host memory",
        f"{len(copies)} copies ({', '.join(f'{n} x{c}' for n, c in kinds.items())}) moved {_bytes(nbytes)} in "
        f"{time_text(copy_ns)} of GPU time, {gpu_share:.1f}% of the GPU's {time_text(busy)} busy time in "
        f"{steps.label}, and held "
        f"the host {time_text(host_ns)} in their host-to-device calls, {host_share:.1f}% of {steps.whole} (threshold "
        f"{PAGEABLE_SHARE_PCT:.0f}% of either); pageable memory is staged through a pinned buffer, so these copies "
        f"run slower and block the host; called from {'; '.join(callers)}",
        "Pin the host side: DataLoader(pin_memory=True) for batches, torch.empty(..., pin_memory=True) or "
        "tensor.pin_memory() for buffers you reuse, then tensor.to(device, non_blocking=True) (and for results, copy "
        "into a pinned tensor with non_blocking=True before reading it after an event)",
        {"copies": (len(copies), "count"), "bytes": (nbytes, "bytes"), "copy_ns": (copy_ns, "ns"),
         "busy_ns": (float(busy), "ns"), "share_of_busy_pct": (gpu_share, "%"), "host_ns": (host_ns, "ns"),
         "share_of_step_pct": (host_share, "%"), "step_ns": (float(steps.total_ns), "ns"),
         "threshold_pct": (PAGEABLE_SHARE_PCT, "%")})


# ---------------------------------------------------------------- 6-8. memory (profile_memory=True)
def _gpu_peaks(summaries: Dict[str, pd.DataFrame]) -> pd.DataFrame:
    peaks = summaries.get("memory_peak")
    if peaks is None or peaks.empty:
        return pd.DataFrame()
    return peaks[peaks["device"].astype(str).str.startswith("GPU")]


def memory_capacity(summaries: Dict[str, pd.DataFrame]) -> Optional[Finding]:
    peaks = _gpu_peaks(summaries)
    if peaks.empty:
        return None
    held = np.maximum(peaks["peak_reserved_bytes"].to_numpy(dtype=float), peaks["peak_allocated_bytes"].to_numpy(dtype=float))
    share = 100.0 * held / peaks["capacity_bytes"].to_numpy(dtype=float)
    if not np.nanmax(np.r_[share, -1.0]) >= MEMORY_CAPACITY_PCT:  # NaN: a device of no known capacity
        return None
    worst = int(np.nanargmax(share))
    row = peaks.iloc[worst]
    pct = float(share[worst])
    return _finding(
        "memory_capacity", "high" if pct >= MEMORY_CAPACITY_HIGH_PCT else "medium",
        f"{row['device']} memory peaks at {pct:.0f}% of its capacity",
        f"{row['device']} reserved {_bytes(held[worst])} at its peak ({_bytes(row['peak_allocated_bytes'])} allocated "
        f"by tensors), {pct:.1f}% of its {_bytes(row['capacity_bytes'])} (threshold {MEMORY_CAPACITY_PCT:.0f}%); the "
        f"allocated peak is reached in {row['call_stack'] or 'no operator'}: a larger batch or input runs out of memory",
        "Cut the activations kept for the backward pass: activation checkpointing (torch.utils.checkpoint) on the "
        "largest blocks, mixed precision (torch.autocast with bf16 / fp16), or a smaller micro-batch with gradient "
        "accumulation; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lowers what the allocator reserves beyond "
        "what tensors use",
        {"device": (str(row["device"]), ""), "peak_reserved_bytes": (float(row["peak_reserved_bytes"]), "bytes"),
         "peak_allocated_bytes": (float(row["peak_allocated_bytes"]), "bytes"),
         "capacity_bytes": (float(row["capacity_bytes"]), "bytes"), "share_pct": (pct, "%"),
         "threshold_pct": (MEMORY_CAPACITY_PCT, "%")})


def memory_fragmentation(summaries: Dict[str, pd.DataFrame]) -> Optional[Finding]:
    peaks = _gpu_peaks(summaries)
    if peaks.empty:
        return None
    reserved = peaks["reserved_at_peak_bytes"].to_numpy(dtype=float)
    gap = reserved - peaks["peak_allocated_bytes"].to_numpy(dtype=float)
    share = np.where(reserved > 0, 100.0 * gap / np.where(reserved > 0, reserved, 1.0), 0.0)
    firing = np.flatnonzero((share >= FRAGMENTATION_GAP_PCT) & (gap >= FRAGMENTATION_MIN_BYTES))
    if firing.size == 0:
        return None
    worst = int(firing[np.argmax(gap[firing])])
    row = peaks.iloc[worst]
    return _finding(
        "memory_fragmentation", "medium",
        f"{row['device']} reserves {_bytes(gap[worst])} more than its tensors use at the peak",
        f"When {row['device']}'s allocated memory peaked at {_bytes(row['peak_allocated_bytes'])} the caching allocator "
        f"held {_bytes(reserved[worst])}: {_bytes(gap[worst])} ({share[worst]:.0f}%) reserved by no tensor (thresholds "
        f"{FRAGMENTATION_GAP_PCT:.0f}% and {_bytes(FRAGMENTATION_MIN_BYTES)}); cached blocks of sizes the peak cannot "
        "use (fragmentation) are memory a larger batch cannot have",
        "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (PYTORCH_HIP_ALLOC_CONF on ROCm): segments then grow "
        "in place instead of caching blocks of fixed sizes; allocating the largest long-lived tensors first, and "
        "keeping shapes steady between steps, also leaves fewer unusable blocks",
        {"device": (str(row["device"]), ""), "gap_bytes": (float(gap[worst]), "bytes"),
         "reserved_bytes": (float(reserved[worst]), "bytes"),
         "allocated_bytes": (float(row["peak_allocated_bytes"]), "bytes"), "gap_pct": (float(share[worst]), "%"),
         "threshold_pct": (FRAGMENTATION_GAP_PCT, "%"), "threshold_bytes": (float(FRAGMENTATION_MIN_BYTES), "bytes")})


def allocator_churn(summaries: Dict[str, pd.DataFrame], steps: Steps) -> Optional[Finding]:
    peaks = _gpu_peaks(summaries)
    if peaks.empty or "short_lived_count" not in peaks.columns:
        return None
    per_step = peaks["short_lived_count"].to_numpy(dtype=float) / max(steps.count, 1)
    worst = int(np.argmax(per_step))
    if not per_step[worst] >= CHURN_PER_STEP:
        return None
    row = peaks.iloc[worst]
    count, size = int(row["short_lived_count"]), int(row["short_lived_bytes"])
    return _finding(
        "allocator_churn", "low",
        f"{per_step[worst]:.0f} short-lived allocations of {_bytes(size)} per step on {row['device']}",
        f"{count} allocations of {size:,} bytes on {row['device']} were freed within {time_text(CHURN_LIFETIME_NS)}, "
        f"{per_step[worst]:.0f} per step over {steps.label} (threshold {CHURN_PER_STEP} per step; "
        f"{int(row['allocations'])} allocations on it in all); most from {row['short_lived_ops']}: each is an "
        "allocator call on the host, a temporary made and dropped again and again",
        "Reuse the buffer: preallocate it once and write into it (out= arguments, in-place ops such as add_ / mul_), "
        "fuse the elementwise chain that makes the temporaries (torch.compile), or capture the step in a CUDA graph",
        {"device": (str(row["device"]), ""), "bytes": (float(size), "bytes"), "allocations": (count, "count"),
         "per_step": (float(per_step[worst]), "count"), "steps": (steps.count, "count"),
         "lifetime_below_ns": (float(CHURN_LIFETIME_NS), "ns"), "threshold_per_step": (CHURN_PER_STEP, "count")})


# ---------------------------------------------------------------- the domain
ADVICE_GPU_COLUMNS = ("kind", "name", "start_ns", "end_ns", "device", "bytes", "runtime", "op")


def advise(profile, summaries: Dict[str, pd.DataFrame], context: CaptureContext) -> List[Finding]:
    """PyTorch findings, most severe first, for a profile read from a PyTorch profiler trace; [] otherwise."""
    torch = getattr(profile, "torch", None)
    steps = steps_of(torch) if torch is not None else None
    if steps is None or not steps.total_ns:
        return []
    # The rules read these of the GPU rows: selections then copy 8 columns, not the launch columns too.
    torch = dataclasses.replace(torch, gpu=torch.gpu[[c for c in ADVICE_GPU_COLUMNS if c in torch.gpu.columns]])
    found = [dataloader_bound(torch, steps, context), host_sync(torch, steps, context),
             launch_bound(torch, steps, context), fp32_gemm(torch, steps, profile.devices, context),
             pageable_copies(torch, steps, context), memory_capacity(summaries), memory_fragmentation(summaries),
             allocator_churn(summaries, steps)]
    return by_severity(f for f in found if f)
