"""Advice for GPU traces (Nsight Systems, and any tracer whose summaries the analysis fills).

Reads the summary tables a trace holds (docs/FORMAT.md): gpu_activity, gpu_idle_attribution,
gpu_idle_gaps, cuda_gpu_mem_kind_sum, the API's call totals (API_TABLES: CUDA or HIP), and the
kernels table's durations.  Rules,
each firing only above a named share of the time it concerns (the text states it):
  gpu.data_loading    the GPU idles while the CPU loads data (NVTX loader ranges / OS reads)
  gpu.pageable_copies host-to-device copies from pageable memory
  gpu.tiny_kernels    many launches of kernels too short to hide their launch overhead
  gpu.sync_stalls     the GPU runs dry after synchronising calls
  gpu.copy_share      memory copies take a large share of GPU busy time
  gpu.idle            the GPU idles much of the time between its first and last operation
Remedies are phrased for the program and the API the capture shows (analysis/context.py):
PyTorch's levers only where the capture shows PyTorch, CUDA or HIP calls otherwise.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional

import pandas as pd

from ..context import CaptureContext
from ...core.findings import Finding, by_severity, finding, time_text
from ..timeline import SYNC_API

# Share of the capture the GPU idles before input starvation is worth a look: a training loop
# that feeds its GPU keeps it > 80% busy, so more than a fifth idle means time to win back.
IDLE_SHARE_PCT = 20.0
# Share of that idle time during which the CPU was loading data (loader NVTX ranges or file /
# socket reads) for loading to be the likely cause rather than a coincidence.
LOADING_SHARE_PCT = 25.0
# Pageable host-to-device copies: the driver stages them through a pinned buffer, ~2x slower
# and never overlapped with compute.  Below 1% of GPU busy time pinning cannot win 1% back (one
# 4-byte copy of 1.4 us is not a finding); from 10% it is a first lever.
PAGEABLE_SHARE_PCT, PAGEABLE_HIGH_PCT = 1.0, 10.0
# A kernel launch costs ~3-5 us of CPU time (cudaLaunchKernel); kernels shorter than ~10 us
# cannot hide that, so the GPU waits on the CPU's launch rate.
TINY_KERNEL_NS = 10_000
# Below ~a thousand launches the overhead sums to a few ms: not worth fusing or graph capture.
TINY_MIN_LAUNCHES = 1000
# Share of kernel time in those tiny launches: under a tenth, fusing all of them cannot change
# the run much, whatever their count (a few long kernels dominate).
TINY_TIME_SHARE_PCT = 10.0
# Idle time in gaps that begin inside a synchronising call, as a share of the GPU's active
# window (first to last operation): a tenth is where removing syncs pays visibly.
SYNC_STALL_PCT = 10.0
# Copy time as a share of GPU busy time: beyond a fifth the data movement is a lever on its own.
MEMCPY_SHARE_PCT = 20.0
# Idle share of the active window (first to last GPU operation) for the general idle finding.
ACTIVE_IDLE_PCT = 30.0
TOP = 3  # examples named in the evidence
# Kernel launch calls: CUDA runtime / driver, HIP (hipLaunchKernel, hipModuleLaunchKernel, hipExt...).
LAUNCH_API = r"^(?:cu(?:da)?|hip)(?:Ext)?(?:Module)?Launch(?:Kernel|KernelEx|CooperativeKernel)"  # a prefix: _v7000
# The GPU API's per-call totals, by the summary table a tracer writes: (table, name column, calls
# column), each with total_ns: nsys' cuda_api_sum, rocprof's hip_api_stats, rocpd's api_stats.
API_TABLES = (("cuda_api_sum", "api", "num_calls"), ("hip_api_stats", "name", "calls"), ("api_stats", "name", "calls"))

# Remedies: (PyTorch's, everyone else's); {names} are the capture's API calls (CaptureContext.words).
REMEDIES = {
    "data_loading": (
        "Load batches ahead of the GPU: DataLoader(num_workers=N with N up to the CPU cores per GPU, "
        "prefetch_factor=2-4, persistent_workers=True, pin_memory=True); move decoding and augmentation out of the "
        "training loop (or onto the GPU, e.g. DALI); cache preprocessed data",
        "Prepare the next batch while the GPU works on this one: read and decode input on worker threads or "
        "processes into a queue of pinned buffers ({malloc_host}), copy with {memcpy_async} on a second stream, "
        "and cache preprocessed data"),
    "pageable_copies": (
        "Pin the host buffers: DataLoader(pin_memory=True) and tensor.to(device, non_blocking=True), or allocate "
        "them with torch.empty(..., pin_memory=True)",
        "Allocate the host buffers pinned ({malloc_host}, or register existing ones with {host_register}) and copy "
        "with {memcpy_async} on a stream: pinned copies run at full bandwidth and overlap kernels"),
    "tiny_kernels": (
        "Cut the launch count: fuse element-wise kernels (torch.compile, custom fused kernels), batch small "
        "operations, and capture the steady-state step as a CUDA graph (torch.cuda.graphs / "
        "torch.compile(mode='reduce-overhead')) so one launch replays many kernels",
        "Cut the launch count: fuse small kernels into one, batch small operations into fewer larger launches, and "
        "capture the steady-state sequence as {graphs} (stream capture) so one launch replays many kernels"),
    "sync_stalls": (
        "Remove synchronisation from the steady-state loop: no .item() / .cpu() / print of GPU tensors per step, "
        "no torch.cuda.synchronize() outside timing code, non_blocking=True copies from pinned memory; queue the "
        "next step's work before waiting",
        "Remove host waits from the steady-state loop: {memcpy_async} on a stream instead of {memcpy}, events "
        "({stream_wait_event}) instead of {device_sync} / {stream_sync}; queue the next launches before waiting"),
    "copy_share": (
        "Move less and overlap the rest: keep tensors on the GPU between steps, copy once per batch (not per "
        "sample), use pinned memory with non_blocking copies on a side stream so they overlap compute, and check "
        "the copy direction table for device-to-host copies in the loop",
        "Move less and overlap the rest: keep data resident on the GPU between kernels, copy in few large "
        "transfers instead of many small ones, and use pinned host memory ({malloc_host}) with {memcpy_async} on a "
        "second stream so copies overlap compute; look for device-to-host copies inside the loop"),
    "idle": (
        "Open the Timeline at the longest gaps: the CPU thread row shows what held back the next launch (Python "
        "work, a synchronising call, data loading); queue work earlier or overlap it",
        "Open the Timeline at the longest gaps: the CPU thread row shows what held back the next launch (host "
        "code, a synchronising {api} call, reading input); queue work earlier or overlap it"),
}


def api_calls(summaries: Dict[str, pd.DataFrame]) -> Optional[pd.DataFrame]:
    """api, num_calls, total_ns per API call name, from the first of API_TABLES the capture has."""
    for name, api, calls in API_TABLES:
        table = summaries.get(name)
        if table is not None and len(table):
            return pd.DataFrame({"api": table[api].astype(str), "num_calls": table[calls],
                                 "total_ns": table["total_ns"]})
    return None


def remedy(rule: str, context: CaptureContext) -> str:
    pytorch, generic = REMEDIES[rule]
    return pytorch if context.pytorch else context.phrase(generic)


def _finding(rule: str, severity: str, title: str, text: str, figures: Dict[str, tuple],
             context: CaptureContext) -> Finding:
    return finding(f"gpu.{rule}", severity, title, text, remedy(rule, context), figures)


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _pct(part, whole) -> float:
    return 100.0 * float(part) / float(whole) if whole else math.nan


def _dev(device: int, many: bool) -> str:
    return f" (GPU {device})" if many else ""


def _attr(attribution: Optional[pd.DataFrame], device: int, activity: str) -> Optional[pd.Series]:
    if attribution is None:
        return None
    rows = attribution[(attribution["device"] == device) & (attribution["activity"] == activity)]
    return rows.iloc[0] if len(rows) else None


def data_loading(act: pd.Series, attribution, many: bool, context: CaptureContext) -> Optional[Finding]:
    device, idle, span = int(act["device"]), float(act["idle_ns"]), float(act["span_ns"])
    nvtx = _attr(attribution, device, "data loading (NVTX ranges)")
    reads = _attr(attribution, device, "file/socket reads (OS runtime)")
    parts = [(label, float(r["idle_overlap_ns"])) for label, r in (("loader NVTX ranges", nvtx),
                                                                    ("OS file/socket reads", reads)) if r is not None]
    if not parts or _pct(idle, span) < IDLE_SHARE_PCT:
        return None
    label, overlap = max(parts, key=lambda p: p[1])
    share = _pct(overlap, idle)
    if not overlap or share < LOADING_SHARE_PCT:
        return None
    return _finding("data_loading", "high" if share >= 2 * LOADING_SHARE_PCT else "medium",
                    f"GPU idle {_pct(idle, span):.0f}% of the capture while the CPU loads data{_dev(device, many)}",
                    f"The GPU idled {time_text(idle)} of {time_text(span)} ({_pct(idle, span):.1f}%, "
                    f"threshold {IDLE_SHARE_PCT:.0f}%); "
                    f"{time_text(overlap)} of that idle time ({share:.1f}%, threshold {LOADING_SHARE_PCT:.0f}%) "
                    f"overlaps "
                    f"{label}",
                    {"device": (device, ""), "idle_ns": (idle, "ns"), "span_ns": (span, "ns"),
                     "idle_pct": (_pct(idle, span), "%"), "loading_idle_ns": (overlap, "ns"),
                     "loading_share_pct": (share, "%"),
                     **{f"{k.split()[0].lower()}_idle_ns": (v, "ns") for k, v in parts}},
                    context)


def pageable_copies(kinds: Optional[pd.DataFrame], activity: pd.DataFrame,
                    context: CaptureContext) -> Optional[Finding]:
    if kinds is None or kinds.empty:
        return None
    rows = kinds[kinds["operation"].astype(str).str.contains("Host-to-Device") & (kinds["src_kind"] == "Pageable")]
    if rows.empty:
        return None
    count, nbytes, ns = int(rows["count"].sum()), float(rows["total_bytes"].sum()), float(rows["total_ns"].sum())
    busy = float(activity["busy_ns"].sum())
    share = _pct(ns, busy)
    if not share >= PAGEABLE_SHARE_PCT:  # also NaN: no busy time to weigh them against
        return None
    return _finding("pageable_copies", "high" if share >= PAGEABLE_HIGH_PCT else "medium",
                    f"{_count(count, 'host-to-device copy', 'host-to-device copies')} from pageable memory",
                    f"{_count(count, 'copy', 'copies')} moved {nbytes / 1e6:.3g} MB ({nbytes:.0f} bytes) host-to-device from pageable "
                    f"memory in {time_text(ns)}, {share:.1f}% of GPU busy time (threshold "
                    f"{PAGEABLE_SHARE_PCT:.0f}%); the "
                    f"driver stages pageable memory through a pinned buffer, so these copies run slower and cannot "
                    f"overlap compute",
                    {"copies": (count, "count"), "bytes": (nbytes, "bytes"), "copy_ns": (ns, "ns"),
                     "busy_ns": (busy, "ns"), "share_of_busy_pct": (share, "%")},
                    context)


def tiny_kernels(kernels: Optional[pd.DataFrame], api: Optional[pd.DataFrame],
                 context: CaptureContext) -> Optional[Finding]:
    if kernels is None or kernels.empty:
        return None
    durations = kernels["duration_ns"].dropna()
    n = int(durations.size)
    if n < TINY_MIN_LAUNCHES:
        return None
    median = float(durations.median())
    tiny = durations[durations < TINY_KERNEL_NS]
    share = _pct(tiny.sum(), durations.sum())
    if median >= TINY_KERNEL_NS or not share >= TINY_TIME_SHARE_PCT:
        return None
    figures = {"launches": (n, "count"), "median_ns": (median, "ns"), "tiny_launches": (int(tiny.size), "count"),
               "tiny_kernel_ns": (float(tiny.sum()), "ns"), "kernel_ns": (float(durations.sum()), "ns"),
               "tiny_share_pct": (share, "%")}
    launch_cost = ""
    if api is not None and len(api):
        launches = api[api["api"].astype(str).str.match(LAUNCH_API)]
        if len(launches):
            calls, spent = int(launches["num_calls"].sum()), float(launches["total_ns"].sum())
            figures.update(launch_api_ns=(spent, "ns"), launch_calls=(calls, "count"))
            launch_cost = (f"; the CPU spent {time_text(spent)} in {calls} launch calls "
                           f"({spent / max(calls, 1) / 1e3:.1f} us each)")
    return _finding("tiny_kernels", "high" if median < TINY_KERNEL_NS / 2 else "medium",
                    f"{n} kernel launches with a median of {median / 1e3:.1f} us",
                    f"Median kernel {median / 1e3:.2f} us (threshold {TINY_KERNEL_NS / 1e3:.0f} us) over {n} launches "
                    f"(threshold {TINY_MIN_LAUNCHES}); {tiny.size} launches under {TINY_KERNEL_NS / 1e3:.0f} us ran "
                    f"{time_text(tiny.sum())} of {time_text(durations.sum())} kernel time ({share:.1f}%, threshold "
                    f"{TINY_TIME_SHARE_PCT:.0f}%){launch_cost}",
                    figures, context)


def sync_stalls(act: pd.Series, attribution, api: Optional[pd.DataFrame], many: bool,
                context: CaptureContext) -> Optional[Finding]:
    device = int(act["device"])
    row = _attr(attribution, device, "gaps starting in a synchronisation call")
    active = float(act["last_op_ns"] - act["first_op_ns"])
    if row is None or not active or not row["idle_overlap_ns"]:
        return None
    stalled, gaps = float(row["idle_overlap_ns"]), int(row["intervals"])
    share = _pct(stalled, active)
    if share < SYNC_STALL_PCT:
        return None
    calls = ""
    top = []
    if api is not None and len(api):
        sync = api[api["api"].astype(str).str.match(SYNC_API)].sort_values("total_ns", ascending=False).head(TOP)
        top = [{"api": a, "calls": int(c), "total_ns": float(t)} for a, c, t in zip(sync["api"], sync["num_calls"],
                                                                                     sync["total_ns"])]
        calls = "; synchronising calls: " + ", ".join(f"{t['api']} x{t['calls']} "
                                                      f"({time_text(t['total_ns'])})" for t in top)
    return _finding("sync_stalls", "high" if share >= 3 * SYNC_STALL_PCT else "medium",
                    f"The GPU runs dry after synchronising calls{_dev(device, many)}",
                    f"{gaps} idle gaps began while the CPU waited in a synchronising call, {time_text(stalled)} "
                    f"of idle "
                    f"time, {share:.1f}% of the GPU's active window of {time_text(active)} (threshold "
                    f"{SYNC_STALL_PCT:.0f}%)"
                    f"{calls}",
                    {"device": (device, ""), "gaps": (gaps, "count"), "stalled_ns": (stalled, "ns"),
                     "active_ns": (active, "ns"), "share_pct": (share, "%"), "top": (top, "")},
                    context)


def copy_share(act: pd.Series, many: bool, context: CaptureContext) -> Optional[Finding]:
    share = act.get("memcpy_share_pct")
    if share is None or pd.isna(share) or share < MEMCPY_SHARE_PCT:
        return None
    device = int(act["device"])
    return _finding("copy_share", "high" if share >= 2 * MEMCPY_SHARE_PCT else "medium",
                    f"Memory copies take {share:.0f}% of GPU busy time{_dev(device, many)}",
                    f"Copies ran {time_text(act['memcpy_ns'])} of {time_text(act['busy_ns'])} GPU busy time "
                    f"({share:.1f}%, "
                    f"threshold {MEMCPY_SHARE_PCT:.0f}%)",
                    {"device": (device, ""), "memcpy_ns": (float(act["memcpy_ns"]), "ns"),
                     "busy_ns": (float(act["busy_ns"]), "ns"), "share_pct": (float(share), "%")},
                    context)


def idle(act: pd.Series, gaps: Optional[pd.DataFrame], many: bool, context: CaptureContext) -> Optional[Finding]:
    device = int(act["device"])
    active = float(act["last_op_ns"] - act["first_op_ns"])
    busy = float(act["busy_ns"])
    share = _pct(active - busy, active)
    if not active or share < ACTIVE_IDLE_PCT:
        return None
    examples = []
    if gaps is not None and len(gaps):
        own = gaps[(gaps["device"] == device) & (gaps["start_ns"] >= act["first_op_ns"]) &
                   (gaps["end_ns"] <= act["last_op_ns"])].head(TOP)
        for g in own.itertuples():
            doing = ", ".join(x for x in (g.cuda_api and f"in {g.cuda_api}", g.nvtx_range and
                                          f"inside NVTX range {str(g.nvtx_range)[:80]!r}") if x)
            examples.append({"start_ns": int(g.start_ns), "duration_ns": int(g.duration_ns),
                             "cuda_api": g.cuda_api, "nvtx_range": g.nvtx_range})
            examples[-1]["text"] = f"{time_text(g.duration_ns)} at {g.start_ns} ns" + (f" ({doing})" if doing else "")
    shown = "; longest gaps: " + "; ".join(e.pop("text") for e in examples) if examples else ""
    return _finding("idle", "high" if share >= 2 * ACTIVE_IDLE_PCT else "medium",
                    f"GPU idle {share:.0f}% between its first and last operation{_dev(device, many)}",
                    f"Busy {time_text(busy)} of the {time_text(active)} from the first to the last GPU operation "
                    f"({share:.1f}% idle, "
                    f"threshold {ACTIVE_IDLE_PCT:.0f}%){shown}",
                    {"device": (device, ""), "busy_ns": (busy, "ns"), "active_ns": (active, "ns"),
                     "idle_pct": (share, "%"), "gaps": (examples, "")},
                    context)


def advise(profile, summaries: Dict[str, pd.DataFrame], context: CaptureContext) -> List[Finding]:
    """GPU trace findings, most severe first, where `summaries` hold a gpu_activity table; [] otherwise."""
    activity = summaries.get("gpu_activity")
    if activity is None or activity.empty:
        return []
    attribution, gaps = summaries.get("gpu_idle_attribution"), summaries.get("gpu_idle_gaps")
    api = api_calls(summaries)
    many = len(activity) > 1
    found = []
    for _, act in activity.iterrows():
        found += [data_loading(act, attribution, many, context), sync_stalls(act, attribution, api, many, context),
                  copy_share(act, many, context), idle(act, gaps, many, context)]
    found += [pageable_copies(summaries.get("cuda_gpu_mem_kind_sum"), activity, context),
              tiny_kernels(getattr(profile, "kernels", None), api, context)]
    return by_severity(f for f in found if f)
