"""Compare across runs that differ (issue 32 item 3): per-step figures where both runs have profiler
steps, the basis said in /compare and `tb-hwprof compare`, warnings where the step counts or the
programs differ.

Expected figures come from each run's own tables read back (`tb_hwprof.load_run` kernels,
`tb_hwprof.load_analysis` step_time_breakdown), not from the comparison.
"""
import json

import pytest

import tb_hwprof
from tb_hwprof.app.cli import main
from tb_hwprof.core.plain import duration_text

from conftest import sample
from support_plugin import App

R50 = "torch/h200_resnet50_bf16_handler_stack.pt.trace.json.gz"  # ResNet-50, ProfilerStep#2..4
R18 = "pairs/h200_resnet18_bf16/resnet18_step3.pt.trace.json.gz"  # ResNet-18, one step
HTA_CONTROL, HTA_TEST = "torch/hta_trace_diff_control.json.gz", "torch/hta_trace_diff_test.json.gz"
NO_STEPS = "torch/kineto_h100_cuda129_small.json"  # no ProfilerStep#N
LAKSHYA = "ncu/lakshya_gtx1660s_full_2024.1.1.ncu-rep"
RUNS = {"r50": R50, "r18": R18, "control": HTA_CONTROL, "test": HTA_TEST, "nosteps": NO_STEPS, "ncu": LAKSHYA,
        "ncu_again": LAKSHYA}


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir):
    root = tmp_path_factory.mktemp("compare_steps") / "logs"
    for run, relative in RUNS.items():
        assert main(["export", str(sample(samples_dir, relative)), "--logdir", str(root), "--run", run, "--quiet"]) == 0
    return root


@pytest.fixture(scope="module")
def app(logdir):
    return App(logdir)


# -- what each run holds, read back independently --------------------------------------------------
def steps_of(run_dir):
    """The run's profiler steps: rows of its step time breakdown with a ProfilerStep number (-1 is
    the whole capture of a trace without steps); None without any."""
    table = tb_hwprof.load_analysis(run_dir).summaries.get("step_time_breakdown")
    count = 0 if table is None else int((table["step"] >= 0).sum())
    return count or None


def kernel_totals(run_dir):
    """{demangled name: (total ns, launches)} and the run's kernel time, from its kernels table."""
    kernels = tb_hwprof.load_run(run_dir).kernels
    grouped = kernels.groupby("demangled_name")["duration_ns"].agg(["sum", "count"])
    return {name: (float(row["sum"]), int(row["count"])) for name, row in grouped.iterrows()}, float(kernels["duration_ns"].sum())


def biggest_common_kernel(base, run):
    return max((name for name in base if name in run), key=lambda name: base[name][0])


# -- GET /compare ----------------------------------------------------------------------------------
def test_resnet50_three_steps_against_resnet18_one_step_per_step(app, logdir):
    """The issue's case: 3 steps of ResNet-50 against 1 of ResNet-18 compare per step, and say both
    that the step counts differ and that the programs do (the speed-up is no result)."""
    b_steps, r_steps = steps_of(logdir / "r50"), steps_of(logdir / "r18")
    assert (b_steps, r_steps) == (3, 1)
    b_kernels, b_total = kernel_totals(logdir / "r50")
    r_kernels, r_total = kernel_totals(logdir / "r18")
    doc = app.json("/compare", base="r50", run="r18")
    assert doc["basis"]["per_step"] is True and doc["basis"]["steps"] == [3, 1]
    assert doc["basis"]["text"] == "per step: baseline 3 steps, run 1 step"
    t = doc["totals"]
    assert t["base_ns"] == pytest.approx(b_total / 3) and t["run_ns"] == pytest.approx(r_total / 1)
    assert doc["basis"]["whole_ns"] == pytest.approx([b_total, r_total])
    assert t["speedup"] == pytest.approx((b_total / 3) / r_total)
    name = biggest_common_kernel(b_kernels, r_kernels)
    [m] = [m for m in doc["matched"] if m["key"] == name]
    assert m["base_ns"] == pytest.approx(b_kernels[name][0] / 3) and m["run_ns"] == pytest.approx(r_kernels[name][0])
    assert m["base_launches"] == pytest.approx(b_kernels[name][1] / 3) and m["run_launches"] == pytest.approx(r_kernels[name][1])
    assert m["speedup"] == pytest.approx((b_kernels[name][0] / 3) / r_kernels[name][0])
    ids = {w["id"]: w for w in doc["warnings"]}
    assert "different step counts (baseline 3 steps, run 1 step)" in ids["different-steps"]["text"] and not ids["different-steps"]["decisive"]
    assert ids["different-programs"]["decisive"] and doc["comparable"] is False
    assert "operator" in ids["different-programs"]["text"]
    # The operators section is on the same basis.
    assert doc["operators"]["totals"]["base_ns"] == pytest.approx(
        sum(o["base_ns"] for o in doc["operators"]["matched"]))


def test_one_model_of_equal_steps_compares_per_step_without_a_step_warning(app, logdir):
    b_steps, r_steps = steps_of(logdir / "control"), steps_of(logdir / "test")
    _, b_total = kernel_totals(logdir / "control")
    _, r_total = kernel_totals(logdir / "test")
    doc = app.json("/compare", base="control", run="test")
    assert doc["basis"]["per_step"] is True and doc["basis"]["steps"] == [b_steps, r_steps] == [6, 6]
    assert doc["totals"]["base_ns"] == pytest.approx(b_total / b_steps)
    assert doc["totals"]["run_ns"] == pytest.approx(r_total / r_steps)
    assert "different-steps" not in {w["id"] for w in doc["warnings"]}


def test_steps_on_one_side_only_compare_totals_and_say_which(app, logdir):
    _, b_total = kernel_totals(logdir / "r18")
    _, r_total = kernel_totals(logdir / "nosteps")
    doc = app.json("/compare", base="r18", run="nosteps")
    assert doc["basis"] == {"per_step": False, "steps": [1, None], "whole_ns": [pytest.approx(b_total), pytest.approx(r_total)],
                            "text": "whole runs: only the baseline has profiler steps (1 step)"}
    assert doc["totals"]["base_ns"] == pytest.approx(b_total)
    [w] = [w for w in doc["warnings"] if w["id"] == "steps-one-side"]
    assert "only the baseline" in w["text"]


def test_runs_without_steps_compare_totals_and_warn_of_nothing(app, logdir):
    _, total = kernel_totals(logdir / "ncu")
    doc = app.json("/compare", base="ncu", run="ncu_again")
    assert doc["basis"] == {"per_step": False, "steps": [None, None], "whole_ns": [pytest.approx(total)] * 2,
                            "text": "whole runs: neither has profiler steps"}
    assert doc["totals"]["base_ns"] == pytest.approx(total) and doc["totals"]["speedup"] == pytest.approx(1.0)
    assert doc["warnings"] == [] and doc["comparable"] is True


# -- tb-hwprof compare -----------------------------------------------------------------------------
def test_cli_says_per_step_and_warns(logdir, capsys):
    _, b_total = kernel_totals(logdir / "r50")
    _, r_total = kernel_totals(logdir / "r18")
    assert main(["compare", str(logdir / "r50"), str(logdir / "r18")]) == 0
    out = capsys.readouterr().out
    assert "basis: per step: baseline 3 steps, run 1 step" in out
    assert f"totals per step: baseline {duration_text(b_total / 3)}, run {duration_text(r_total)}" in out
    warnings = [line for line in out.splitlines() if line.startswith("WARNING:")]
    assert any("different step counts (baseline 3 steps, run 1 step)" in line for line in warnings)
    assert any("operator" in line for line in warnings)
    assert main(["compare", str(logdir / "r50"), str(logdir / "r18"), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["basis"]["steps"] == [3, 1] and doc["totals"]["base_ns"] == pytest.approx(b_total / 3)


def test_cli_reads_steps_of_traces_read_on_the_fly(logdir, samples_dir, capsys):
    """Two trace files (not exported runs): the same steps and per-step totals as the exported runs."""
    _, b_total = kernel_totals(logdir / "r50")
    assert main(["compare", str(sample(samples_dir, R50)), str(sample(samples_dir, R18)), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["basis"]["per_step"] is True and doc["basis"]["steps"] == [3, 1]
    assert doc["totals"]["base_ns"] == pytest.approx(b_total / 3)


def test_cli_gate_weighs_time_per_step(logdir, capsys):
    """--fail-if-slower weighs the total per step: ResNet-50's step (the run) against ResNet-18's (the
    baseline), not its 3-step capture against a 1-step one."""
    assert main(["compare", str(logdir / "r18"), str(logdir / "r50"), "--fail-if-slower", "5"]) == 1
    out = capsys.readouterr().out
    _, b_total = kernel_totals(logdir / "r18")
    _, r_total = kernel_totals(logdir / "r50")
    worse = ((r_total / 3) - b_total) / b_total * 100
    assert f"REGRESSED: total: {duration_text(b_total)} -> {duration_text(r_total / 3)} ({worse:+.1f}% worse)" in out
