"""PyTorch step time breakdown and GPU summary (tb_hwprof/analysis/torch_steps.py) against
torch-tb-profiler 0.4.3 itself, run on the same real traces.

The oracle is driven as its RunLoader drives it for one worker file (loader._process_data):
RunProfileData.parse on a file named <worker>.pt.trace.json[.gz], then RunGenerator's profile,
whose `overview` rows and `gpu_summary` are what its Overview tab shows.

tb-profiler 0.4.3 knows the runtime category 'Runtime' (2021 traces) but not current PyTorch's
'cuda_runtime' / 'cuda_driver': on a current trace it silently drops every launch, so it reports
no Runtime time and never extends a step to its GPU work.  It is therefore run unmodified only on
the 2021 ResNet-50 traces.  Current-format traces are checked two ways: invariants computed here
from the stdlib-json events, and the oracle run on a copy spelled the 2021 way (runtime / driver
calls renamed 'Runtime', user annotations 'cpu_op' as its StepParser meant to count them, its
GPU-side duplicate 'gpu_user_annotation' steps dropped), which is what torch_steps.py claims to
compute.  That copy's timestamps are rebased to its first microsecond: at epoch magnitude a double
ts + dur rounds each end to 0.25 us, a few us per step over thousands of kernels, where our ends
are ts_ns + dur_ns."""
import gzip
import json
import re

import pytest

import tb_hwprof
from tb_hwprof.analysis import torch_steps

from conftest import sample

pytest.importorskip("torch_tb_profiler", reason="torch-tb-profiler (the oracle) is not installed")
from torch_tb_profiler.profiler import tensor_core, trace  # noqa: E402
from torch_tb_profiler.profiler.data import RunProfileData  # noqa: E402
from torch_tb_profiler.profiler.event_parser import ProfileRole  # noqa: E402
from torch_tb_profiler.profiler.run_generator import RunGenerator  # noqa: E402

TRACES_2021 = ["torch/kineto_rn50_v100_jun2021.json.gz", "torch/kineto_rn50_v100_workers4_jun2021.json.gz"]
# Current-format traces the 2021-spelled oracle runs on: DDP ResNet (nccl ops), 2-rank NCCL,
# Tensor-Core kernels (H100 ViT), and two without ProfilerStep#N (whole-trace step).
TRACES_CURRENT = ["torch/hta_v100_resnet_rank0.json.gz", "torch/hta_a100_nccl_2rank_rank0.json.gz",
                  "torch/tracelens_h100_falconsai_vit.json.gz", "torch/param_resnet_rtx2080ti.json.gz",
                  "torch/tracelens_b200_eager_8rank_rank0.json.gz"]
# Invariant checks (the oracle crashes on the sub-microsecond kineto_h100 trace: no GPU buckets).
TRACES_INVARIANTS = ["torch/hta_v100_resnet_rank0.json.gz", "torch/hta_mi250_rocm62_minitoy.json.gz",
                     "torch/kineto_h100_cuda129_small.json"]

# Overview column -> (our column, its cost index).
OVERVIEW_COLUMNS = {"Kernel": ("kernel_ns", ProfileRole.Kernel), "Memcpy": ("memcpy_ns", ProfileRole.Memcpy),
                    "Memset": ("memset_ns", ProfileRole.Memset),
                    "Communication": ("communication_ns", ProfileRole.Communication),
                    "Runtime": ("runtime_ns", ProfileRole.Runtime),
                    "DataLoader": ("dataloader_ns", ProfileRole.DataLoader),
                    "CPU Exec": ("cpu_exec_ns", ProfileRole.CpuOp), "Other": ("other_ns", ProfileRole.Other)}
US = 1000  # ns
TOLERANCE_NS = 1 * US  # tb-profiler works in (rounded) microseconds


# ---------------------------------------------------------------- the oracle
def load_events(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def oracle_on_file(path, folder):
    """tb-profiler on the sample as a worker file of a run folder: (RunProfileData, RunProfile)."""
    suffix = ".pt.trace.json.gz" if str(path).endswith(".gz") else ".pt.trace.json"
    link = folder / f"worker0{suffix}"
    link.symlink_to(path)
    data = RunProfileData.parse("worker0", None, str(link), str(folder))
    return data, RunGenerator("worker0", None, data).generate_run_profile()


RENAMED_2021 = {"cuda_runtime": "Runtime", "cuda_driver": "Runtime", "user_annotation": "cpu_op"}


def oracle_on_2021_spelling(path):
    """tb-profiler on a current trace spelled as it expects (module docstring); timestamps rebased
    to the first whole microsecond (ours are absolute: compare durations only)."""
    doc = load_events(path)
    events = [dict(e, cat=RENAMED_2021.get(e.get("cat"), e.get("cat"))) for e in doc["traceEvents"]
              if e.get("cat") != "gpu_user_annotation"]
    base = int(min(e["ts"] for e in events if "ts" in e))
    for e in events:
        if "ts" in e:
            e["ts"] -= base
    doc["traceEvents"] = events
    data = RunProfileData.from_json("worker0", None, doc)
    return data, RunGenerator("worker0", None, data).generate_run_profile()


def overview_rows(profile):
    """The Overview's step rows as {column name: value} (tooltip columns left out)."""
    columns = profile.overview["steps"]["columns"]
    return [{c["name"]: v for c, v in zip(columns, row) if c.get("name")} for row in profile.overview["steps"]["rows"]]


def gpu_summary_shown(profile):
    """The Overview's GPU summary as {gpu: {title: percent}} (the numbers shown, rounded to 0.01)."""
    shown, gpu = {}, None
    for item in profile.gpu_summary or []:
        head = re.match(r"GPU (\d+):", item["title"])
        if head:
            gpu = shown.setdefault(int(head.group(1)), {})
        elif item["value"].endswith(" %"):
            gpu[item["title"]] = float(item["value"][:-2])
    return shown


@pytest.fixture(scope="module")
def oracle_2021(samples_dir, tmp_path_factory):
    cache = {}

    def run(relative):
        if relative not in cache:
            cache[relative] = oracle_on_file(sample(samples_dir, relative), tmp_path_factory.mktemp("run"))
        return cache[relative]
    return run


# ---------------------------------------------------------------- comparisons
def oracle_step_name(ours_step):
    return "0" if ours_step == -1 else str(ours_step)  # tb-profiler names its whole-trace step '0'


def assert_breakdown_matches(ours, data, profile):
    rows = overview_rows(profile)
    assert [r["Step"] for r in rows] == [oracle_step_name(s) for s in ours["step"]]
    for i, row in enumerate(rows):
        for column, (ours_column, role) in OVERVIEW_COLUMNS.items():
            # A column the Overview leaves out (no communication, say) is zero in its costs.
            theirs_us = row.get(column, data.steps_costs[i].costs[role])
            assert abs(ours[ours_column].iloc[i] - theirs_us * US) <= TOLERANCE_NS, (row["Step"], column)
        total_us = data.steps_costs[i].costs[ProfileRole.Total]
        assert abs(ours["total_ns"].iloc[i] - total_us * US) <= TOLERANCE_NS, (row["Step"], "Total")


def assert_gpu_summary_matches(ours, data, profile):
    metrics = data.gpu_metrics_parser
    assert sorted(ours["devices"]) == sorted(metrics.gpu_ids)
    shown = gpu_summary_shown(profile)
    for gpu, mine in ours["devices"].items():
        assert mine["gpu_utilization"] == pytest.approx(metrics.gpu_utilization[gpu], rel=1e-6)
        assert abs(round(mine["gpu_utilization"] * 100, 2) - shown[gpu]["GPU Utilization"]) <= 0.01
        if metrics.avg_approximated_sm_efficiency_per_device[gpu] is None:
            assert mine["est_sm_efficiency"] is None
        else:
            theirs = metrics.avg_approximated_sm_efficiency_per_device[gpu]
            assert mine["est_sm_efficiency"] == pytest.approx(theirs, rel=1e-6)
            assert abs(round(mine["est_sm_efficiency"] * 100, 2) - shown[gpu]["Est. SM Efficiency"]) <= 0.01
        if metrics.avg_occupancy_per_device[gpu] is None:
            assert mine["est_achieved_occupancy_pct"] is None
        else:
            assert mine["est_achieved_occupancy_pct"] == pytest.approx(metrics.avg_occupancy_per_device[gpu], rel=1e-6)
            assert abs(round(mine["est_achieved_occupancy_pct"], 2) - shown[gpu]["Est. Achieved Occupancy"]) <= 0.01
    if len(ours["devices"]) == 1 and data.tc_used_ratio is not None:
        # Its Kernel view's Tensor-Core share: every kernel, by the same allowlist.
        (mine,) = ours["devices"].values()
        assert mine["tensor_core_kernel_share"] == pytest.approx(data.tc_used_ratio, rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("relative", TRACES_2021)
def test_step_breakdown_equals_tb_profiler_overview(relative, read_sample, oracle_2021):
    data, profile = oracle_2021(relative)
    ours = torch_steps.step_time_breakdown(read_sample(relative).torch)
    assert len(ours) > 1
    assert_breakdown_matches(ours, data, profile)


@pytest.mark.parametrize("relative", TRACES_2021)
def test_gpu_summary_equals_tb_profiler_overview(relative, read_sample, oracle_2021):
    data, profile = oracle_2021(relative)
    assert_gpu_summary_matches(torch_steps.gpu_summary(read_sample(relative).torch), data, profile)


@pytest.mark.parametrize("relative", TRACES_CURRENT)
def test_current_trace_equals_tb_profiler_on_its_2021_spelling(relative, samples_dir, read_sample):
    data, profile = oracle_on_2021_spelling(sample(samples_dir, relative))
    torch = read_sample(relative).torch
    assert_breakdown_matches(torch_steps.step_time_breakdown(torch), data, profile)
    assert_gpu_summary_matches(torch_steps.gpu_summary(torch), data, profile)


def test_cut_short_last_step_is_dropped_as_tb_profiler_drops_it(samples_dir, tmp_path):
    """The capture ending inside the last step's GPU work (its last 30% of kernels, copies and
    sets removed from the real 2021 trace): tb-profiler drops that step; so must we."""
    doc = load_events(sample(samples_dir, TRACES_2021[0]))
    events = doc["traceEvents"]
    last = max((e for e in events if e.get("name", "").startswith("ProfilerStep#")), key=lambda e: e["ts"])
    host_end = last["ts"] + last["dur"]
    launched = {e["args"]["correlation"] for e in events if e.get("cat") == "Runtime"
                and e["ts"] >= last["ts"] and e["ts"] + e["dur"] <= host_end}
    device = sorted((e for e in events if e.get("cat") in ("Kernel", "Memcpy", "Memset")
                     and e["args"].get("correlation") in launched), key=lambda e: e["ts"])
    cut = {id(e) for e in device[int(len(device) * 0.7):]}
    doc["traceEvents"] = [e for e in events if id(e) not in cut]
    path = tmp_path / "cut" / "worker0.pt.trace.json"
    path.parent.mkdir()
    path.write_text(json.dumps(doc))

    data, profile = oracle_on_file(path, tmp_path)
    torch = tb_hwprof.read(path).torch
    ours = torch_steps.step_time_breakdown(torch)
    assert oracle_step_name(ours["step"].iloc[-1]) != last["name"].split("#")[1]
    assert_breakdown_matches(ours, data, profile)
    assert_gpu_summary_matches(torch_steps.gpu_summary(torch), data, profile)


def test_launches_straddling_step_edges_as_tb_profiler(samples_dir, tmp_path):
    """The first step's host range narrowed to begin and end halfway through its first and last
    launching calls (the real 2021 trace otherwise): those calls then straddle the step's edges,
    so their GPU work belongs to no step, and the first one's kernel, ending after the step began,
    pushes the step's start back (tb-profiler's prev_step_end_time)."""
    doc = load_events(sample(samples_dir, TRACES_2021[0]))
    events = doc["traceEvents"]
    first = min((e for e in events if e.get("name", "").startswith("ProfilerStep#")), key=lambda e: e["ts"])
    host_start, host_end = first["ts"], first["ts"] + first["dur"]
    device_corr = {e["args"].get("correlation") for e in events if e.get("cat") in ("Kernel", "Memcpy", "Memset")}
    launches = sorted((e for e in events if e.get("cat") == "Runtime" and e["args"].get("correlation") in device_corr
                       and e["ts"] >= host_start and e["ts"] + e["dur"] <= host_end), key=lambda e: e["ts"])
    new_start = launches[0]["ts"] + launches[0]["dur"] // 2
    new_end = launches[-1]["ts"] + launches[-1]["dur"] // 2
    first["ts"], first["dur"] = new_start, new_end - new_start
    path = tmp_path / "edges" / "worker0.pt.trace.json"
    path.parent.mkdir()
    path.write_text(json.dumps(doc))

    data, profile = oracle_on_file(path, tmp_path)
    torch = tb_hwprof.read(path).torch
    assert torch_steps.step_spans(torch)["start_ns"].iloc[0] > new_start * US  # the rule fired
    assert_breakdown_matches(torch_steps.step_time_breakdown(torch), data, profile)
    assert_gpu_summary_matches(torch_steps.gpu_summary(torch), data, profile)


# ---------------------------------------------------------------- invariants (current traces)
def union_inside_us(intervals, lo, hi):
    """Length of the union of (start, end) pairs clipped to [lo, hi): a plain sort and sweep."""
    total, reach = 0.0, lo
    for start, end in sorted(intervals):
        start, end = max(start, reach), min(end, hi)
        if end > start:
            total += end - start
            reach = end
    return total


@pytest.mark.parametrize("relative", TRACES_INVARIANTS)
def test_step_breakdown_invariants(relative, samples_dir, read_sample):
    torch = read_sample(relative).torch
    ours = torch_steps.step_time_breakdown(torch)
    spans = torch_steps.step_spans(torch)
    assert len(ours) >= 1
    parts = ours[[f"{c}_ns" for c in torch_steps.CATEGORIES] + ["other_ns"]]
    assert (parts >= 0).all().all()
    assert (parts.sum(axis=1) == ours["total_ns"]).all()
    assert (spans["start_ns"].iloc[1:].to_numpy() >= spans["end_ns"].iloc[:-1].to_numpy()).all()  # no overlap

    # kernel_ns (first priority) is the union of the step's non-collective kernels, from the raw JSON.
    events = [e for e in load_events(sample(samples_dir, relative))["traceEvents"] if e.get("ph") == "X"]
    base = int(min(e["ts"] for e in events))
    collective_ext = {e["args"].get("External id") for e in events if e.get("name") in trace.NcclOpNameSet}
    kernels = [(e["ts"] - base, e["ts"] - base + e["dur"]) for e in events if e.get("cat", "").lower() == "kernel"
               and e.get("args", {}).get("External id", -1) not in collective_ext]
    for step, start, end, kernel_ns in zip(ours["step"], spans["start_ns"], spans["end_ns"], ours["kernel_ns"]):
        lo, hi = start / US - base, end / US - base
        assert abs(kernel_ns / US - union_inside_us(kernels, lo, hi)) <= 1, step


def test_communication_kernel_share_from_the_raw_events(samples_dir, read_sample):
    relative = "torch/hta_a100_nccl_2rank_rank0.json.gz"
    summary = torch_steps.gpu_summary(read_sample(relative).torch)
    kernels = [e for e in load_events(sample(samples_dir, relative))["traceEvents"]
               if e.get("ph") == "X" and e.get("cat") == "kernel"]
    for gpu, mine in summary["devices"].items():
        on_gpu = [e for e in kernels if e["args"]["device"] == gpu]
        nccl = sum(e["dur"] for e in on_gpu if e["name"].startswith("nccl"))
        assert nccl > 0
        assert mine["communication_kernel_share"] == pytest.approx(nccl / sum(e["dur"] for e in on_gpu), abs=1e-6)


def test_rule_lists_are_tb_profilers():
    assert list(torch_steps.TENSOR_CORE_PATTERNS) == tensor_core.TC_Allowlist.allowlist
    assert torch_steps.NCCL_OPS == set(trace.NcclOpNameSet)
    assert torch_steps.GLOO_OPS == set(trace.GlooOpNameSet)
