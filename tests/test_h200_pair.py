"""The real H200 pair (samples/pairs/h200_resnet18_bf16, issue 27): a PyTorch trace and a Nsight Compute
2025.3.1 full-set report of the same ResNet-18 step, captured with `tb-hwprof profile ncu`.

Every expected figure comes from the two files read independently: NVIDIA's ncu_report for the
report (metric names enumerated here with plain string tests, not the reader's patterns), the
trace's JSON for the trace.  CAPTURE.md: 57 of the 58 launches match by name and order with equal
grid and block; launch 48 (a cuDNN fprop kernel) ran with grid (15, 8, 1) under ncu and (132, 1, 1)
in the trace.
"""
import gzip
import json
import math
import subprocess
import sys

import numpy as np
import pytest

import tb_hwprof
from tb_hwprof.analysis import groups
from tb_hwprof.analysis.roofline import ABOVE_ROOFS, place_kernels

from conftest import decompressed, fresh_ncu_oracle, ncu_actions

PAIR = "pairs/h200_resnet18_bf16"
TRACE = f"{PAIR}/resnet18_step3.pt.trace.json.gz"
REPORT = f"{PAIR}/resnet18_step3_first58.ncu-rep.xz"
FLOAT_SOURCES = ("fp64", "tf32", "fp16", "bf16", "fp8")


@pytest.fixture(scope="module")
def report(samples_dir, tmp_path_factory):
    path = samples_dir / REPORT
    if not path.exists():
        pytest.fail(f"the H200 pair is missing at {path}")
    return decompressed(path, tmp_path_factory)


@pytest.fixture(scope="module")
def oracle(report, ncu_report_module):
    """Per launch, by ncu_report in a process of its own (conftest.fresh_ncu_oracle):
    ({metric: [value, unit]}, kernel name, demangled name, rule results, mangled name)."""
    return fresh_ncu_oracle(report)


@pytest.fixture(scope="module")
def launches(oracle):
    """[{metric: number}] per launch, and its kernel name under "__name__"."""
    out = []
    for metrics, name, _, _, _ in oracle:
        values = {n: float(v) for n, (v, _) in metrics.items() if isinstance(v, (int, float))}
        values["__name__"] = name
        out.append(values)
    return out


def test_every_launch_exports_as_ncu_report_reads_it(profile, oracle):
    """All 58 launches (2,243 metrics each), every metric's value and unit, the names and the rule
    results with their estimated speedups, as NVIDIA's module reads them; no note of damage."""
    assert len(profile.kernels) == len(oracle) == 58 and profile.notes == []
    assert profile.provenance.tool_version == "2025.3.1"
    for row, raw, rules, (metrics, name, demangled, theirs) in zip(
            profile.kernels.to_dict("records"), profile.raw_metrics, profile.rules, [o[:4] for o in oracle]):
        assert (row["name"], row["demangled_name"]) == (name, demangled)
        assert len(raw) == len(metrics) == 2243
        for metric, (value, unit) in metrics.items():
            ours = raw[metric]
            assert ours[1] == unit and (ours[0] == value or (ours[0] is None and value != value)), (metric, ours, value)
        assert row["duration_ns"] == metrics["gpu__time_duration.sum"][0]
        assert row["grid_size"] == metrics["launch__grid_size"][0]
        assert [r["rule"] for r in rules] == [d["rule_identifier"] for d in theirs]
        for ours, d in zip(rules, theirs):
            speedup = (d.get("speedup_estimation") or {}).get("speedup")
            if speedup is not None:
                assert ours["estimated_speedup_pct"] == speedup


@pytest.fixture(scope="module")
def profile(report):
    return tb_hwprof.read(report)


def per_source_totals(values, suffix):
    """{source precision: value} of the per-precision totals sm__ops_path_tensor_src_<type>...<suffix>
    (not the per-instruction sm__ops_path_tensor_op_... breakdown), float sources only."""
    out = {}
    for name, value in values.items():
        if name.startswith("sm__ops_path_tensor_src_") and name.endswith(suffix) and name.count(".") == suffix.count("."):
            source = name[len("sm__ops_path_tensor_src_"):].split(".")[0].split("_")[0]
            if source in FLOAT_SOURCES:
                out[source] = out.get(source, 0.0) + value
    return out


def test_tensor_core_flops_are_the_reports_tensor_operation_counts(profile, launches):
    """Every launch that ran tensor-core work (cuDNN bf16 convolutions, cuBLAS GEMMs) carries the
    report's own operation count, per source precision; the others carry none."""
    kernels = profile.kernels
    tensor_launches = 0
    for row, values in zip(kernels.to_dict("records"), launches):
        totals = per_source_totals(values, ".sum")
        assert row["flops_tensor"] == pytest.approx(sum(totals.values()), rel=1e-12), row["launch_id"]
        if sum(totals.values()) > 0:
            tensor_launches += 1
            assert row["tensor_precision"] == max(totals, key=totals.get) == "bf16"
            assert row["roofline_precision"] == "tensor_bf16"
        else:
            assert row["tensor_precision"] == ""
    assert tensor_launches == 7  # 1 cuDNN "Kernel" and 6 sm90_xmma fprop launches


def test_tensor_roofs_per_precision_are_the_dense_peaks(profile, launches):
    """The bf16 tensor roof is the highest dense (no 2:4 sparsity) per-instruction peak x the SM
    clock, the maximum over launches; the per-precision total's own peak is the sparse one, twice."""
    device = profile.devices[0]
    dense, sparse = [], []
    for values in launches:
        hz = values["sm__cycles_elapsed.avg.per_second"]
        kinds = [v for n, v in values.items() if n.startswith("sm__ops_path_tensor_op_") and "_src_bf16" in n
                 and n.endswith(".sum.peak_sustained") and "_sparsity_on" not in n]
        dense.append(max(kinds) * hz)
        sparse.append(values["sm__ops_path_tensor_src_bf16_dst_fp32.sum.peak_sustained"] * hz)
    roof = device.peaks["flop_per_s_tensor_bf16"]
    assert roof.value == pytest.approx(max(dense), rel=1e-12) and roof.source == "measured"
    assert max(sparse) == pytest.approx(2 * roof.value, rel=1e-12)
    assert device.peaks["flop_per_s_tensor_fp8"].value == pytest.approx(2 * roof.value, rel=1e-12)
    # FP16 (non-tensor) as 2025.3's half roofline counts packed HFMA2: the report's derived x4 peak.
    fp16 = max(v["derived__sm__sass_thread_inst_executed_op_hfma_pred_on_x4"] * v["sm__cycles_elapsed.avg.per_second"]
               for v in launches)
    assert device.peaks["flop_per_s_fp16"].value == pytest.approx(fp16, rel=1e-12)
    assert device.peaks["flop_per_s_fp16"].value == pytest.approx(2 * device.peaks["flop_per_s_fp32"].value, rel=1e-12)


def test_no_launch_of_the_pair_is_above_the_highest_roof(profile):
    roofs = {k: p.value for k, p in profile.devices[0].peaks.items()}
    highest = max(v for k, v in roofs.items() if k.startswith("flop_per_s_"))
    placed = profile.kernels["flop_per_s"].to_numpy(dtype=float)
    assert np.nanmax(placed) < highest
    assert not (profile.kernels["binding_roof"] == ABOVE_ROOFS).any()


def test_a_point_above_every_roof_is_flagged_and_not_drawn(profile):
    """What a wrong FLOP count would do (the pre-2025.3 reading of this very report put operator points
    far above the FP16 roof): a launch made faster than the device's highest roof is labelled
    ABOVE_ROOFS, gets no attainable FLOP/s, and leaves the drawn points for the listed ones."""
    kernels = profile.kernels.copy()
    roofs = {k: p.value for k, p in profile.devices[0].peaks.items()}
    highest = max(v for k, v in roofs.items() if k.startswith("flop_per_s_"))
    tensor_row = int(np.flatnonzero(kernels["flops_tensor"].to_numpy() > 0)[0])
    kernels.loc[tensor_row, "flop_per_s"] = 3 * highest
    for column, values in place_kernels(kernels, np.zeros(len(kernels)), {0.0: roofs}).items():
        kernels[column] = values
    assert kernels.loc[tensor_row, "binding_roof"] == ABOVE_ROOFS
    assert math.isnan(kernels.loc[tensor_row, "attainable_flop_per_s"])
    launch = int(kernels.loc[tensor_row, "launch_id"])
    assert launch not in {p["launch_id"] for p in groups.roofline_points(kernels)}
    assert [p["launch_id"] for p in groups.roofline_points(kernels, above_roofs=True)] == [launch]


def trace_kernels(samples_dir):
    events = json.load(gzip.open(samples_dir / TRACE))["traceEvents"]
    return sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["args"]["correlation"])


def function_name(demangled: str) -> str:
    """The bare function name of a GNU-demangled kernel name: no return type, namespaces, template
    arguments or parameters ("void at::native::(anonymous namespace)::f<4>(int)" -> "f")."""
    text = demangled.replace("(anonymous namespace)", "anonymous")
    text = text[len("void "):] if text.startswith("void ") else text
    cut = min([i for i in (text.find("<"), text.find("(")) if i >= 0] or [len(text)])
    return text[:cut].rsplit("::", 1)[-1]


def test_the_join_matches_exactly_the_launches_whose_name_grid_and_block_agree(samples_dir, report, launches,
                                                                               tmp_path, ncu_report_module):
    """Counted from the two files: the report is the step's first 58 launches; the k-th report launch
    of a kernel name is the k-th trace launch of that name among them, and it joins where grid and
    block are equal (cuDNN swapped two fprop tiles between the runs: 48 and 56 trade places)."""
    kernels = trace_kernels(samples_dir)[:len(launches)]
    trace_by_name = {}
    for event in kernels:
        trace_by_name.setdefault(function_name(event["name"]), []).append(event)
    seen, agree = {}, []
    for k, values in enumerate(launches):
        name = values["__name__"]
        nth = seen[name] = seen.get(name, -1) + 1
        event = trace_by_name[name][nth]
        grid = [int(values[f"launch__grid_dim_{x}"]) for x in "xyz"]
        block = [int(values[f"launch__block_dim_{x}"]) for x in "xyz"]
        if event["args"]["grid"] == grid and event["args"]["block"] == block:
            agree.append(k)
    assert len(trace_kernels(samples_dir)) == 360 and len(agree) == 57 and 48 not in agree
    # In a child process: a third load of the report here would keep another ~600 MB (ncu_report).
    subprocess.run([sys.executable, "-m", "tb_hwprof", "export", str(samples_dir / TRACE), str(report), "--join",
                    "--launch-count", "58", "--logdir", str(tmp_path), "--run", "j", "--quiet"], check=True)
    run = tmp_path / "j"
    table = tb_hwprof.load_run(run, with_details=False).summaries["counter_join"]
    matched = table[table["status"] == "matched"]
    assert sorted(matched["counter_launch"].astype(int)) == agree
    (refused,) = table[table["status"] != "matched"].to_dict("records")
    assert refused["status"] == "config-differs" and int(refused["counter_launch"]) == 48
    assert "(15, 8, 1)" in refused["reason"] and "(132, 1, 1)" in refused["reason"]
    # The joined kernels carry the report's tensor-core work and roof; the operators their counters.
    joined = tb_hwprof.load_run(run, with_details=False).kernels
    counted = joined[joined["counter_launch_id"] >= 0]
    assert len(counted) == 57
    by_launch = dict(zip(counted["counter_launch_id"].astype(int), counted["flops_tensor"]))
    for k in agree:
        assert by_launch[k] == pytest.approx(sum(per_source_totals(launches[k], ".sum").values()), rel=1e-12)
    operators = tb_hwprof.load_analysis(run).summaries["op_counters"]
    convolution = operators[operators["op"] == "aten::cudnn_convolution"].iloc[0]
    expected = counted[counted["op"] == "aten::cudnn_convolution"]
    assert convolution["counted_kernels"] == len(expected) > 0
    weights = expected["duration_ns"].to_numpy(dtype=float)
    assert convolution["sm_throughput_pct"] == pytest.approx(
        float((expected["sm_throughput_pct"].to_numpy(dtype=float) * weights).sum() / weights.sum()), rel=1e-9)


def test_flop_rates_follow_the_reports_own_roofline_expressions(profile, launches):
    """FLOP/s as 2025.3's roofline sections compute it from the report's own derived metrics: FP32 and
    FP64 (fadd + fmul + ffma x2 per cycle), half (packed: hadd x2 + hmul x2 + hfma x4 per cycle) times
    the SM clock, plus the tensor-core operations' own rate per second."""
    for row, v in zip(profile.kernels.to_dict("records"), launches):
        per_cycle = sum(v[f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum.per_cycle_elapsed"]
                        for p in "fd" for op in ("add", "mul"))
        per_cycle += (v["derived__smsp__sass_thread_inst_executed_op_ffma_pred_on_x2"]
                      + v["derived__smsp__sass_thread_inst_executed_op_dfma_pred_on_x2"]
                      + v["derived__smsp__sass_thread_inst_executed_op_hadd_pred_on_x2"]
                      + v["derived__smsp__sass_thread_inst_executed_op_hmul_pred_on_x2"]
                      + v["derived__smsp__sass_thread_inst_executed_op_hfma_pred_on_x4"])
        expected = per_cycle * v["smsp__cycles_elapsed.avg.per_second"] + sum(
            per_source_totals(v, ".sum.per_second").values())
        assert row["flop_per_s"] == pytest.approx(expected, rel=1e-9), row["launch_id"]
        assert row["ai_dram"] == pytest.approx(expected / v["dram__bytes.sum.per_second"], rel=1e-9)


def gnu_demangle(mangled):
    """GNU c++filt's demangling of the report's mangled names (the PyTorch profiler's style)."""
    import shutil
    if shutil.which("c++filt") is None:
        pytest.fail("c++filt (binutils) is needed to demangle the report's names independently")
    out = subprocess.run(["c++filt"], input="\n".join(mangled) + "\n", capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def test_the_per_configuration_join_covers_every_launch_of_a_profiled_configuration(samples_dir, report, oracle,
                                                                                   launches, tmp_path):
    """--join --per-config: a trace launch gets counters exactly when one of the 58 report launches has
    its kernel (the report's mangled name demangled by c++filt equals the trace's name), grid and block:
    137 of the step's 360 launches, 34% of its kernel time (by launch order: 57).  The bare function
    name would pair 153, wrongly.  Several report launches of one configuration: their time-weighted mean."""
    kernels = trace_kernels(samples_dir)
    names = gnu_demangle([o[4] for o in oracle])
    configs = {}
    for k, (name, values) in enumerate(zip(names, launches)):
        grid = tuple(int(values[f"launch__grid_dim_{x}"]) for x in "xyz")
        block = tuple(int(values[f"launch__block_dim_{x}"]) for x in "xyz")
        configs.setdefault((name, grid, block), []).append(k)
    covered = [e for e in kernels if (e["name"], tuple(e["args"]["grid"]), tuple(e["args"]["block"])) in configs]
    assert len(covered) == 137 and len(kernels) == 360
    share = sum(e["dur"] for e in covered) / sum(e["dur"] for e in kernels)
    assert 0.33 < share < 0.35
    short = {(function_name(name), grid, block) for name, grid, block in configs}
    assert sum((function_name(e["name"]), tuple(e["args"]["grid"]), tuple(e["args"]["block"])) in short
               for e in kernels) == 153
    subprocess.run([sys.executable, "-m", "tb_hwprof", "export", str(samples_dir / TRACE), str(report), "--join",
                    "--per-config", "--logdir", str(tmp_path), "--run", "c", "--quiet"], check=True)
    run = tb_hwprof.load_run(tmp_path / "c", with_details=False)
    joined = run.kernels[run.kernels["counter_launch_id"] >= 0]
    assert len(joined) == 137
    assert any(f"137 of 360 trace launches ({100 * share:.1f}% of the kernel time) carry counters" in n
               for n in run.notes)
    # Each joined launch: its configuration's report launches' time-weighted mean.
    by_launch = dict(enumerate(launches))  # report launch id = its position (one range)
    for row in joined.to_dict("records"):
        rows = configs[next(key for key, members in configs.items() if int(row["counter_launch_id"]) in members)]
        weights = np.array([by_launch[k]["gpu__time_duration.sum"] for k in rows])
        sol = np.array([by_launch[k]["sm__throughput.avg.pct_of_peak_sustained_elapsed"] for k in rows])
        assert row["sm_throughput_pct"] == pytest.approx(float((sol * weights).sum() / weights.sum()), rel=1e-9)
        assert "per-configuration join" in row["counter_source"] and f"report launch" in row["counter_source"]


def test_every_hotspots_sass_is_its_own_launchs(profile, report, ncu_report_module):
    """The source hotspots' SASS of all 58 launches (15 kernels): each kernel is disassembled once
    and answers for its other launches (the profiled process' addresses are absolute), so each row is
    checked here against the SASS that launch's own action gives at that address."""
    table = profile.summaries["ncu_source_hotspots"]
    assert table["launch_id"].nunique() > 15  # more launches with hotspots than kernels: reuse happens
    for launch_id, action in enumerate(ncu_actions(ncu_report_module, report)):
        rows = table[table["launch_id"] == launch_id]
        for address, sass in zip(rows["address"], rows["sass"]):
            assert sass == action.sass_by_pc(int(address)).strip() and sass, (launch_id, address)
