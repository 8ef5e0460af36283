"""PyTorch advice (tb_hwprof/analysis/advice/torch.py) on real PyTorch profiler traces: every rule
fires on a sample where its figure is above the threshold and stays silent on one below it, and
each figure is recomputed here from the trace's JSON parsed with the stdlib (its own event
containment, correlation join and interval sweep: not the reader's tables)."""
import dataclasses
import functools
import gzip
import json
import re
import statistics
from collections import defaultdict
from decimal import Decimal

import pytest

import tb_hwprof
from tb_hwprof.analysis import advice
from tb_hwprof.analysis.advice import torch as rules
from tb_hwprof.analysis.context import capture_context
from tb_hwprof.core.findings import Finding

from conftest import sample, samples_path

RN50_WORKERS0 = "torch/kineto_rn50_v100_jun2021.json.gz"  # torch-tb-profiler's before/after pair
RN50_WORKERS4 = "torch/kineto_rn50_v100_workers4_jun2021.json.gz"
PARAM_RESNET = "torch/param_resnet_rtx2080ti.json.gz"  # no ProfilerStep ranges
DIFF_CONTROL = "torch/hta_trace_diff_control.json.gz"  # A100, FP32 GEMMs mostly on TF32 tensor cores
DIFF_TEST = "torch/hta_trace_diff_test.json.gz"  # V100
BERT_H100 = "torch/tracelens_h100_bert_small.json.gz"
BERT_MI300X = "torch/tracelens_mi300x_bert_small.json.gz"
VIT_H100 = "torch/tracelens_h100_falconsai_vit.json.gz"  # bf16
RESNET_V100 = "torch/hta_v100_resnet_rank0.json.gz"
SAMPLED_RANK0 = "torch/hta_sampled_2rank_rank0.json.gz"

OP_CATS = {"cpu_op", "operator", "user_annotation"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "runtime"}
GPU_CATS = {"kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset"}
KERNEL_CATS = {"kernel"}
MEMCPY_CATS = {"gpu_memcpy", "memcpy"}
# Independent spellings of what the rules look for (exact names, not the module's patterns).
SYNC_CALLS = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy",
              "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipMemcpy", "hipMemcpyWithStream"}
LAUNCH_CALLS = {"cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "hipLaunchKernel",
                "hipModuleLaunchKernel", "hipExtModuleLaunchKernel", "hipExtLaunchKernel"}
GEMMS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear", "aten::conv2d", "aten::convolution",
         "aten::_convolution", "aten::cudnn_convolution", "aten::convolution_backward",
         "aten::cudnn_convolution_backward", "aten::cudnn_convolution_backward_input",
         "aten::cudnn_convolution_backward_weight"}
# torch-tb-profiler's tensor-core kernel allowlist (tensor_core.py, after NVIDIA PyProf).
TB_PROFILER_TC = ("h884", "s884", "h1688", "s1688", "hmma", "i8816", "16816", "dgrad_1x1_stride_2x2",
                  "first_layer_wgrad_kernel", "conv1x1", "conv2d_c1_k1", "direct_group", "xmma_implicit_gemm",
                  "xmma_sparse_conv", "xmma_warp_specialized_implicit_gemm", "xmma_gemm", "xmma_sparse_gemm", "c1688")


# ---------------------------------------------------------------- the independent side: stdlib JSON
@functools.lru_cache(maxsize=4)
def trace_events(name):
    """(ops, runtime, gpu, steps) of a trace as lists of dicts with integer ns start / end."""
    path = samples_path() / name
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    ops, runtime, gpu, steps = [], [], [], []
    for e in events:
        if e.get("ph") != "X" or "dur" not in e:
            continue
        cat = str(e.get("cat", "")).lower()
        row = {"name": e.get("name", ""), "cat": cat, "start": to_ns(e["ts"]),
               "thread": (e.get("pid"), e.get("tid")), "args": e.get("args") or {}}
        row["end"] = row["start"] + to_ns(e["dur"])
        row["corr"] = row["args"].get("correlation")
        if cat in OP_CATS:
            (steps if row["name"].startswith("ProfilerStep#") else ops).append(row)
        elif cat in RUNTIME_CATS:
            runtime.append(row)
        elif cat in GPU_CATS:
            gpu.append(row)
    return ops, runtime, gpu, steps


def to_ns(us) -> int:
    """Kineto's microseconds (int, or float with ns decimals) as exact ns (a double holds today's
    epoch in ns only to ~256 ns)."""
    return int((Decimal(str(us)) * 1000).to_integral_value())


def union(intervals):
    """Sorted disjoint [start, end) pieces of a list of (start, end)."""
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        elif e > s:
            out.append([s, e])
    return out


def union_ns(intervals):
    return sum(e - s for s, e in union(intervals))


def covered(intervals, windows):
    """Length of union(intervals) inside union(windows), by a plain double loop over the pieces."""
    total = 0
    for s, e in union(intervals):
        for ws, we in union(windows):
            total += max(0, min(e, we) - max(s, ws))
    return total


def windows_of(name):
    """The profiled steps, or (without any) the span of every op, runtime call and GPU activity."""
    ops, runtime, gpu, steps = trace_events(name)
    if steps:
        return [(s["start"], s["end"]) for s in steps]
    every = ops + runtime + gpu
    return [(min(r["start"] for r in every), max(r["end"] for r in every))]


def starts_inside(row, windows):
    return any(s <= row["start"] < e for s, e in windows)


def enclosing_ops(ops, call):
    """The ops on the call's thread whose interval holds the call's start."""
    return [o for o in ops if o["thread"] == call["thread"] and o["start"] <= call["start"] <= o["end"]]


def by_thread(rows):
    grouped = defaultdict(list)
    for r in rows:
        grouped[r["thread"]].append(r)
    return grouped


# ---------------------------------------------------------------- the module's side
@functools.lru_cache(maxsize=4)
def profile_of(name):
    return tb_hwprof.read(samples_path() / name)


def torch_findings(name):
    profile = profile_of(name)
    return rules.advise(profile, profile.summaries, capture_context(profile))


def found(name, rule):
    hits = [f for f in torch_findings(name) if f.id == f"torch.{rule}"]
    assert len(hits) <= 1
    return hits[0] if hits else None


def figure_without_threshold(name, rule, figure, monkeypatch, **zeroed):
    """The figure a rule computes on a sample with its thresholds set to `zeroed` (to read the
    value it compares; the independent side checks it)."""
    for constant, value in zeroed.items():
        monkeypatch.setattr(rules, constant, value)
    hit = found(name, rule)
    assert hit is not None, f"torch.{rule} computes nothing on {name} even with thresholds {zeroed}"
    return hit.figure(figure)


@pytest.fixture(autouse=True)
def _needs_samples(samples_dir):
    for name in (RN50_WORKERS0, RN50_WORKERS4):
        sample(samples_dir, name)


# ---------------------------------------------------------------- 1. DataLoader
def dataloader_share_by_json(name):
    ops, _, _, steps = trace_events(name)
    threads = {s["thread"] for s in steps}
    loader = [(o["start"], o["end"]) for o in ops if o["name"].startswith("enumerate(DataLoader)")
              and (not threads or o["thread"] in threads)]
    windows = windows_of(name)
    return covered(loader, windows), union_ns(windows)


@pytest.mark.parametrize("name", [RN50_WORKERS0, PARAM_RESNET])
def test_dataloader_bound_fires_with_the_share_of_step_time(name, samples_dir):
    sample(samples_dir, name)
    waited, total = dataloader_share_by_json(name)
    hit = found(name, "dataloader_bound")
    assert 100 * waited / total > rules.DATALOADER_SHARE_PCT and hit is not None
    assert hit.figure("loader_ns") == pytest.approx(waited, abs=1000)
    assert hit.figure("step_ns") == pytest.approx(total, abs=1000)
    assert hit.figure("share_pct") == pytest.approx(100 * waited / total, abs=0.01)
    assert f"threshold {rules.DATALOADER_SHARE_PCT:.0f}%" in hit.text


def test_dataloader_names_num_workers_zero_from_the_iterator():
    """The num_workers=0 sample's iterator is the single-process one, and the remedy says so;
    the num_workers=4 trace (multi-process iterator) would get the other remedy."""
    ops, *_ = trace_events(RN50_WORKERS0)
    assert {o["name"] for o in ops if o["name"].startswith("enumerate(DataLoader)")} == {
        "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"}
    hit = found(RN50_WORKERS0, "dataloader_bound")
    assert hit.figure("num_workers_zero") is True and "num_workers=0" in hit.text
    assert "num_workers" in hit.remedy and "persistent_workers=True" in hit.remedy
    # The trace's 12 input copies come from pageable memory: pin_memory is named.
    pageable = [g for g in trace_events(RN50_WORKERS0)[2] if "HtoD (Pageable" in g["name"]]
    assert hit.figure("pageable_host_to_device_copies") == len(pageable) == 12 and "pin_memory=True" in hit.remedy


def test_dataloader_silent_after_num_workers_4(monkeypatch):
    """The 'after' sample: the same model with num_workers=4 waits ~1% of its steps for data
    (40% before); the rule stays silent and its figure (thresholds off) is the stdlib one."""
    waited, total = dataloader_share_by_json(RN50_WORKERS4)
    before, before_total = dataloader_share_by_json(RN50_WORKERS0)
    assert 100 * waited / total < rules.DATALOADER_SHARE_PCT < 100 * before / before_total
    assert found(RN50_WORKERS4, "dataloader_bound") is None
    share = figure_without_threshold(RN50_WORKERS4, "dataloader_bound", "share_pct", monkeypatch,
                                     DATALOADER_SHARE_PCT=0.0)
    assert share == pytest.approx(100 * waited / total, abs=0.01)


# ---------------------------------------------------------------- 2. host syncs
def host_sync_by_json(name):
    """Union, inside the steps, of: synchronize calls and copies without Async; calls whose copy
    is from / to pageable memory (joined by correlation id); aten::item / _local_scalar_dense on
    GPU tensors (the op holds a runtime call on its thread)."""
    ops, runtime, gpu, steps = trace_events(name)
    windows = windows_of(name)
    pageable = {g["corr"] for g in gpu if g["cat"] in MEMCPY_CATS and "Pageable" in g["name"]}
    calls = [c for c in runtime if (c["name"] in SYNC_CALLS or c["corr"] in pageable) and starts_inside(c, windows)]
    if not steps:  # a bare synchronize outside every op brackets a script's measured region
        calls = [c for c in calls if enclosing_ops(ops, c)]
    calls_of = by_thread(runtime)
    items = [o for o in ops if o["name"] in ("aten::item", "aten::_local_scalar_dense") and starts_inside(o, windows)
             and any(o["start"] <= c["start"] <= o["end"] for c in calls_of[o["thread"]])]
    blocked = covered([(c["start"], c["end"]) for c in calls] + [(o["start"], o["end"]) for o in items], windows)
    return blocked, union_ns(windows), len(items), calls


def top_caller_by_json(ops, calls):
    """(innermost enclosing op, call name) holding the most time in blocking calls."""
    spent = defaultdict(int)
    for c in calls:
        inner = min(enclosing_ops(ops, c), key=lambda o: o["end"] - o["start"], default={"name": "(no operator)"})
        spent[(inner["name"], c["name"])] += c["end"] - c["start"]
    return max(spent, key=spent.get)


@pytest.mark.parametrize("name, severity", [(DIFF_TEST, "high"), (DIFF_CONTROL, "medium")])
def test_host_sync_fires_with_the_time_blocked(name, severity, samples_dir):
    sample(samples_dir, name)
    blocked, total, items, calls = host_sync_by_json(name)
    hit = found(name, "host_sync")
    assert 100 * blocked / total > rules.HOST_SYNC_SHARE_PCT and hit is not None and hit.severity == severity
    assert hit.figure("blocked_ns") == pytest.approx(blocked, abs=1000)
    assert hit.figure("share_pct") == pytest.approx(100 * blocked / total, abs=0.01)
    assert hit.figure("item_ops") == items > 0
    # The caller holding the most blocked time is named with the op chain around it (innermost op last).
    innermost, call = top_caller_by_json(trace_events(name)[0], calls)
    top = hit.figure("callers")[0]
    assert top["call"] == call and top["caller"].endswith(innermost)
    assert any("aten::item > aten::_local_scalar_dense" in c["caller"] for c in hit.figure("callers"))  # .item()
    assert f"threshold {rules.HOST_SYNC_SHARE_PCT:.0f}%" in hit.text and ".item()" in hit.remedy


@pytest.mark.parametrize("name", [RN50_WORKERS0, BERT_H100])
def test_host_sync_silent_below_the_threshold(name, samples_dir, monkeypatch):
    sample(samples_dir, name)
    blocked, total, _, _ = host_sync_by_json(name)
    assert 100 * blocked / total < rules.HOST_SYNC_SHARE_PCT
    assert found(name, "host_sync") is None
    share = figure_without_threshold(name, "host_sync", "share_pct", monkeypatch, HOST_SYNC_SHARE_PCT=0.0)
    assert share == pytest.approx(100 * blocked / total, abs=0.01)


# ---------------------------------------------------------------- 3. launch-bound
def launch_figures_by_json(name):
    _, runtime, gpu, _ = trace_events(name)
    windows = windows_of(name)
    inside = [g for g in gpu if starts_inside(g, windows)]
    kernels = [g["end"] - g["start"] for g in inside if g["cat"] in KERNEL_CATS]
    launches = [c["end"] - c["start"] for c in runtime if c["name"] in LAUNCH_CALLS and starts_inside(c, windows)]
    busy = covered([(g["start"], g["end"]) for g in inside], windows)
    total = union_ns(windows)
    return {"kernels": len(kernels), "median_kernel_ns": statistics.median(kernels), "launch_ns": sum(launches),
            "busy_ns": busy, "gpu_idle_pct": 100 * (total - busy) / total}


@pytest.mark.parametrize("name, api", [(BERT_H100, "CUDA"), (BERT_MI300X, "HIP")])
def test_launch_bound_fires_on_a_small_model_step(name, api, samples_dir):
    sample(samples_dir, name)
    want = launch_figures_by_json(name)
    assert want["median_kernel_ns"] < rules.TINY_KERNEL_NS
    assert 100 * want["launch_ns"] / want["busy_ns"] >= rules.LAUNCH_TO_BUSY_PCT
    assert want["gpu_idle_pct"] >= rules.LAUNCH_IDLE_PCT
    hit = found(name, "launch_bound")
    assert hit is not None
    assert hit.figure("kernels") == want["kernels"]
    assert hit.figure("median_kernel_ns") == pytest.approx(want["median_kernel_ns"], abs=1)
    for figure in ("launch_ns", "busy_ns"):
        assert hit.figure(figure) == pytest.approx(want[figure], abs=1000), figure
    assert hit.figure("gpu_idle_pct") == pytest.approx(want["gpu_idle_pct"], abs=0.05)
    assert "reduce-overhead" in hit.remedy and f"{api} graphs" in hit.remedy


@pytest.mark.parametrize("name, failing", [(RN50_WORKERS0, "launch"), (RESNET_V100, "median")])
def test_launch_bound_silent_where_kernels_outweigh_launches(name, failing, samples_dir):
    """ResNet-50 on a V100: a median kernel of 2 us, but its convolutions keep the GPU busy far longer
    than the launches take; the other ResNet's median kernel is above 10 us."""
    sample(samples_dir, name)
    want = launch_figures_by_json(name)
    if failing == "launch":
        assert 100 * want["launch_ns"] / want["busy_ns"] < rules.LAUNCH_TO_BUSY_PCT
    else:
        assert want["median_kernel_ns"] >= rules.TINY_KERNEL_NS
    assert found(name, "launch_bound") is None


# ---------------------------------------------------------------- 4. FP32 GEMMs
def fp32_gemm_share_by_json(name):
    """Kernel time in the steps launched (by correlation id) from a call that lies inside an FP32
    GEMM / convolution op on its thread, less kernels torch-tb-profiler counts as tensor-core ones."""
    ops, runtime, gpu, _ = trace_events(name)
    windows = windows_of(name)
    fp32 = by_thread(o for o in ops if o["name"] in GEMMS and (o["args"].get("Input type") or [""])[0] == "float")
    pieces = {thread: union((o["start"], o["end"]) for o in rows) for thread, rows in fp32.items()}
    call_of = {c["corr"]: c for c in runtime if c["corr"] is not None}
    kernels = [g for g in gpu if g["cat"] in KERNEL_CATS and starts_inside(g, windows)]
    total = picked = 0
    for k in kernels:
        total += k["end"] - k["start"]
        call = call_of.get(k["corr"])
        if call is None or any(p in k["name"] for p in TB_PROFILER_TC):
            continue
        if any(s <= call["start"] <= e for s, e in pieces.get(call["thread"], ())):
            picked += k["end"] - k["start"]
    return picked, total


def test_fp32_gemm_fires_on_resnet50_v100_with_fp16_amp():
    picked, total = fp32_gemm_share_by_json(RN50_WORKERS0)
    hit = found(RN50_WORKERS0, "fp32_gemm")
    assert 100 * picked / total > rules.FP32_GEMM_HIGH_PCT and hit is not None and hit.severity == "high"
    assert hit.figure("fp32_gemm_ns") == pytest.approx(picked, abs=1000)
    assert hit.figure("kernel_ns") == pytest.approx(total, abs=1000)
    assert hit.figure("share_pct") == pytest.approx(100 * picked / total, abs=0.01)
    # V100 (compute capability 7.0 in the trace's deviceProperties): fp16 tensor cores, no TF32 / bf16.
    props = profile_of(RN50_WORKERS0).torch.device_properties[0]
    assert (props["computeMajor"], hit.figure("matrix_cores")) == (7, "nvidia_fp16")
    assert "float16" in hit.remedy and "GradScaler" in hit.remedy and "allow_tf32" not in hit.remedy
    assert f"threshold {rules.FP32_GEMM_SHARE_PCT:.0f}%" in hit.text


def test_fp32_gemm_silent_where_tf32_already_runs(monkeypatch):
    """The A100 control trace multiplies FP32 tensors, but cuBLAS runs most of them on TF32 tensor
    cores (cutlass ..._tensorop_s1688gemm): what is left on FP32 units is ~4% of kernel time."""
    picked, total = fp32_gemm_share_by_json(DIFF_CONTROL)
    assert 0 < 100 * picked / total < rules.FP32_GEMM_SHARE_PCT
    assert found(DIFF_CONTROL, "fp32_gemm") is None
    hit_share = figure_without_threshold(DIFF_CONTROL, "fp32_gemm", "share_pct", monkeypatch, FP32_GEMM_SHARE_PCT=0.0)
    assert hit_share == pytest.approx(100 * picked / total, abs=0.01)
    assert "allow_tf32" in found(DIFF_CONTROL, "fp32_gemm").remedy  # compute capability 8.0: TF32 offered


def test_fp32_gemm_silent_on_bf16_models(samples_dir):
    sample(samples_dir, VIT_H100)
    ops, *_ = trace_events(VIT_H100)
    assert not any(o["name"] in GEMMS and (o["args"].get("Input type") or [""])[0] == "float" for o in ops)
    assert found(VIT_H100, "fp32_gemm") is None


# ---------------------------------------------------------------- 5. pageable copies
def pageable_by_json(name):
    _, runtime, gpu, _ = trace_events(name)
    windows = windows_of(name)
    inside = [g for g in gpu if starts_inside(g, windows)]
    copies = [g for g in inside if g["cat"] in MEMCPY_CATS and "Pageable" in g["name"]]
    call_of = {c["corr"]: c for c in runtime if c["corr"] is not None}
    to_device = [call_of[g["corr"]] for g in copies if "HtoD" in g["name"] and g["corr"] in call_of]
    busy = covered([(g["start"], g["end"]) for g in inside], windows)
    return {"copies": len(copies), "copy_ns": sum(g["end"] - g["start"] for g in copies), "busy_ns": busy,
            "host_ns": union_ns([(c["start"], c["end"]) for c in to_device]), "step_ns": union_ns(windows),
            "bytes": sum(int(g["args"].get("bytes", 0)) for g in copies)}


@pytest.mark.parametrize("name, severity", [(RN50_WORKERS0, "medium"), (PARAM_RESNET, "high")])
def test_pageable_copies_fire_with_their_share(name, severity, samples_dir):
    sample(samples_dir, name)
    want = pageable_by_json(name)
    assert 100 * want["copy_ns"] / want["busy_ns"] >= rules.PAGEABLE_SHARE_PCT
    hit = found(name, "pageable_copies")
    assert hit is not None and hit.severity == severity
    for figure in ("copies", "copy_ns", "busy_ns", "host_ns", "step_ns", "bytes"):
        assert hit.figure(figure) == pytest.approx(want[figure], abs=1000), figure
    assert hit.figure("share_of_busy_pct") == pytest.approx(100 * want["copy_ns"] / want["busy_ns"], abs=0.01)
    assert "pin_memory=True" in hit.remedy and "non_blocking=True" in hit.remedy


@pytest.mark.parametrize("name", [SAMPLED_RANK0, DIFF_CONTROL])
def test_pageable_copies_silent_when_tiny(name, samples_dir):
    """24 pageable copies of ~22 KB (rank 0 of a sampled run); 60 4-byte .item() reads to pageable
    memory (control): far under 1% of GPU busy and step time."""
    sample(samples_dir, name)
    want = pageable_by_json(name)
    assert want["copies"] > 0
    assert 100 * want["copy_ns"] / want["busy_ns"] < rules.PAGEABLE_SHARE_PCT
    assert 100 * want["host_ns"] / want["step_ns"] < rules.PAGEABLE_SHARE_PCT
    assert found(name, "pageable_copies") is None


# ---------------------------------------------------------------- the domain
def test_every_torch_finding_has_its_figures_and_threshold():
    for name in (RN50_WORKERS0, DIFF_TEST):
        for item in torch_findings(name):
            assert isinstance(item, Finding) and item.id.startswith("torch.")
            assert item.severity in advice.SEVERITIES and item.title and item.remedy and item.figures
            assert "threshold" in item.text and any(ch.isdigit() for ch in item.text)
            units = {k: f.unit for k, f in item.figures.items()}
            assert set(units.values()) <= {"ns", "%", "bytes", "count", ""}
            assert all(u == "ns" for k, u in units.items() if k.endswith("_ns"))
            assert all(u == "%" for k, u in units.items() if k.endswith("_pct"))
            json.dumps(item.to_dict())  # serialisable as the manifest stores it


def test_analyse_lists_the_torch_domain():
    """The torch domain runs with the others in the pipeline; non-PyTorch profiles get nothing from it."""
    assert "torch" in advice.DOMAINS
    ids = {f.id for f in tb_hwprof.analyse(profile_of(RN50_WORKERS0)).findings}
    assert {"torch.dataloader_bound", "torch.fp32_gemm", "torch.pageable_copies"} <= ids
    without = dataclasses.replace(profile_of(RN50_WORKERS0), torch=None)
    assert rules.advise(without, without.summaries, capture_context(without)) == []


def test_idle_gaps_name_the_operator_the_cpu_was_in():
    """gpu_idle_gaps on a PyTorch trace: per gap the op (any thread) covering most of it, innermost
    on ties, recomputed from the JSON; on ResNet-50 with num_workers=0 the longest gaps are spent in
    the DataLoader's __next__."""
    gaps = tb_hwprof.analyse(profile_of(RN50_WORKERS0)).summaries["gpu_idle_gaps"]
    ops, *_ = trace_events(RN50_WORKERS0)
    for gap in gaps.head(5).itertuples():
        overlap = [(min(o["end"], gap.end_ns) - max(o["start"], gap.start_ns), -(o["end"] - o["start"]), o["name"])
                   for o in ops if o["start"] < gap.end_ns and o["end"] > gap.start_ns]
        best = max(overlap)
        assert (gap.cpu_op, gap.cpu_op_overlap_ns) == (best[2], best[0])
    assert re.match(r"enumerate\(DataLoader\)#_SingleProcessDataLoaderIter", gaps["cpu_op"].iloc[0])
