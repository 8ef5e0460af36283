"""The ranked optimisation plan (issue 34) on the real H200 pair joined per configuration and on the
pair's trace alone.  Every ranked row's arithmetic is redone here from the run's own rule results
(the details files: Nsight Compute's estimated speedups per launch), its kernels' trace times, its
op_shapes table and its step breakdown."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import defaultdict

import pytest

import tb_hwprof
from conftest import H200_PAIR, export_h200_pair, export_sample
from tb_hwprof.analysis.pipeline import ANALYSIS_SUMMARIES

TRACE = "resnet18_step3.pt.trace.json.gz"


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir):
    root = export_h200_pair(samples_dir, tmp_path_factory, tmp_path_factory.mktemp("plan") / "logs", "joined")
    export_sample(samples_dir, f"{H200_PAIR}/{TRACE}", root, "trace")
    # Another program (ResNet-50, 3 steps) as the run "after a change": the arithmetic, not the verdicts.
    export_sample(samples_dir, "torch/h200_resnet50_bf16_handler_stack.pt.trace.json.gz", root, "after")
    return root


def plan_of(logdir, run):
    return tb_hwprof.load_analysis(logdir / run).summaries["plan"]


def expected_rule_savings(logdir, run) -> dict:
    """{(op, rule): (saving ns, time the rule fired on)}: per launch the rule's largest estimate, x its
    trace duration, summed over the operator's launches."""
    r = tb_hwprof.load_run(logdir / run, with_details=True)
    out = defaultdict(lambda: [0.0, 0.0])
    for i, rules in enumerate(r.rules):
        best = {}
        for rule in rules:
            try:
                pct = float(rule["estimated_speedup_pct"])
            except (TypeError, ValueError):
                continue
            if math.isfinite(pct) and pct > 0:
                best[rule["rule"]] = max(best.get(rule["rule"], 0.0), pct)
        op = r.kernels["op"].iloc[i] or r.kernels["name"].iloc[i]
        for rule_id, pct in best.items():
            out[(op, rule_id)][0] += r.kernels["duration_ns"].iloc[i] * pct / 100
            out[(op, rule_id)][1] += r.kernels["duration_ns"].iloc[i]
    return out


def test_each_rule_row_is_the_operators_launch_time_times_ncus_estimate(logdir):
    plan = plan_of(logdir, "joined")
    rows = plan[(plan["source"] == "ncu rule") & (plan["rank"] > 0)]
    expected = expected_rule_savings(logdir, "joined")
    assert len(rows) >= 20
    for row in rows.to_dict("records"):
        rule_id = row["key"].split("|")[2]
        saving, applies = expected[(row["ops"], rule_id)]
        assert row["saving_ns"] == pytest.approx(saving, rel=1e-9)
        assert row["saving_ns"] <= row["applies_ns"] * (1 + 1e-12)  # never more than the time it applies to
        assert row["applies_ns"] >= applies * (1 - 1e-12)
    # Every (op, rule) with an estimate is a row, none is counted twice.
    ranked_keys = {(r["ops"], r["key"].split("|")[2]) for r in rows.to_dict("records")}
    assert ranked_keys == {k for k in expected if k[1] not in ("PMSamplingData", "PCSamplingData")}


def test_rows_are_ranked_by_saving_as_a_share_of_the_step(logdir):
    plan = plan_of(logdir, "joined")
    steps = tb_hwprof.load_analysis(logdir / "joined").summaries["step_time_breakdown"]
    ranked = plan[plan["rank"] > 0]
    assert ranked["rank"].tolist() == list(range(1, len(ranked) + 1))
    assert ranked["saving_ns"].is_monotonic_decreasing
    for row in ranked.to_dict("records"):
        assert row["saving_pct"] == pytest.approx(100 * row["saving_ns"] / steps["total_ns"].sum(), rel=1e-9)
    # Rules that fired without an estimate come after, unranked, never with a saving.
    unranked = plan[plan["rank"] == 0]
    assert len(unranked) and unranked["saving_ns"].isna().all()
    assert plan.index[plan["rank"] == 0].min() > plan.index[plan["rank"] > 0].max()


def test_headroom_is_the_time_above_the_roof_of_the_shapes(logdir):
    plan = plan_of(logdir, "joined")
    shapes = tb_hwprof.load_analysis(logdir / "joined").summaries["op_shapes"]
    rows = plan[plan["source"] == "headroom"]
    assert len(rows) >= 3
    for row in rows.to_dict("records"):
        own = shapes[shapes["op"] == row["ops"]]
        measured = roof = 0.0
        for s in own.to_dict("records"):
            # The longer of the times at the compute and DRAM roofs the shape model gives (one may be
            # unknown: a copy has bytes, no FLOPs): a lower bound of its time either way.
            times = [t for t in (s["flops_per_call"] / s["peak_flop_per_s"], s["bytes_per_call"] / s["peak_bytes_per_s"])
                     if math.isfinite(t)]
            at_roof = max(times) * s["calls"] * 1e9 if times else math.nan
            if math.isfinite(at_roof) and s["gpu_ns"] > 0:
                measured, roof = measured + s["gpu_ns"], roof + at_roof
        assert row["saving_ns"] == pytest.approx(measured - roof, rel=1e-9)
        assert row["applies_ns"] == pytest.approx(measured, rel=1e-12)


def test_a_trace_without_counters_still_ranks_headroom_and_step_structure(logdir):
    plan = plan_of(logdir, "trace")
    assert set(plan["source"]) >= {"headroom", "idle"} and "ncu rule" not in set(plan["source"])
    steps = tb_hwprof.load_analysis(logdir / "trace").summaries["step_time_breakdown"]
    [loader] = plan[plan["key"] == "steps|dataloader_ns|"].to_dict("records")
    assert loader["saving_ns"] == steps["dataloader_ns"].sum() > 0


def test_the_terminal_and_json_plans_show_the_runs_rows(logdir):
    plan = plan_of(logdir, "joined")
    done = subprocess.run([sys.executable, "-m", "tb_hwprof", "plan", str(logdir / "joined"), "--format", "json"],
                          capture_output=True, text=True, check=True)
    doc = json.loads(done.stdout)
    assert [r["key"] for r in doc["rows"]] == plan["key"].tolist()
    text = subprocess.run([sys.executable, "-m", "tb_hwprof", "plan", str(logdir / "joined"), "--limit", "5"],
                          capture_output=True, text=True, check=True).stdout
    first = plan.iloc[0]
    assert f"1  " in text and first["ops"] in text and "they are not added" in text
    assert "tb-hwprof compare" in text


def test_the_plan_is_an_analysis_table():
    assert "plan" in ANALYSIS_SUMMARIES


def test_compare_says_what_happened_to_each_plan_row(logdir):
    """Each ranked row of the baseline's plan, measured per step on both sides from their own tables:
    a rule's operator by its own GPU time, a headroom row by its subtree's, and the status by the
    documented shares of the expected saving."""
    done = subprocess.run([sys.executable, "-m", "tb_hwprof", "compare", str(logdir / "joined"), str(logdir / "after"),
                           "--format", "json", "--limit", "0"], capture_output=True, text=True, check=True)
    doc = json.loads(done.stdout)
    rows = doc["plan_outcome"]
    before, after = (tb_hwprof.load_analysis(logdir / r).summaries for r in ("joined", "after"))
    steps = (len(before["step_time_breakdown"]), len(after["step_time_breakdown"]))
    assert doc["basis"]["per_step"] and tuple(doc["basis"]["steps"]) == steps
    plan = before["plan"].set_index("key")
    assert len(rows) >= 20 and [r["rank"] for r in rows] == sorted(r["rank"] for r in rows)
    statuses = set()
    for r in rows:
        source = r["key"].split("|")[0]
        if source == "steps":
            column = r["key"].split("|")[1]
            b, a = before["step_time_breakdown"][column].sum(), after["step_time_breakdown"][column].sum()
        elif source == "idle":
            activity = r["key"].split("|")[1]
            pick = lambda t: t.loc[t["activity"] == activity, "idle_overlap_ns"].sum()  # noqa: E731
            b, a = pick(before["gpu_idle_attribution"]), pick(after["gpu_idle_attribution"])
        else:
            column = "subtree_gpu_ns" if source == "headroom" else "direct_gpu_ns"
            pick = lambda t: t.loc[t["op"] == r["ops"], column].sum()  # noqa: E731
            b, a = pick(before["op_gpu_time"]), pick(after["op_gpu_time"])
        b, a = b / steps[0], a / steps[1]
        expected = plan.loc[r["key"], "saving_ns"] / steps[0]
        assert (r["before_ns"], r["after_ns"], r["expected_ns"]) == pytest.approx((b, a, expected), rel=1e-9)
        saved = b - a
        assert r["status"] == ("worse" if saved < 0 else "done" if saved >= 0.8 * expected else
                               "partly" if saved >= 0.2 * expected else "not")
        statuses.add(r["status"])
    assert len(statuses) >= 2  # the arithmetic reaches more than one verdict on these runs
    text = subprocess.run([sys.executable, "-m", "tb_hwprof", "compare", str(logdir / "joined"), str(logdir / "after")],
                          capture_output=True, text=True, check=True).stdout
    assert "the baseline's plan: what happened" in text


@pytest.mark.parametrize("sample, finding_id", [
    ("torch/kineto_rn50_v100_jun2021.json.gz", "torch.pageable_copies"),
    ("torch/tracelens_h100_falconsai_vit.json.gz", "torch.launch_bound"),
    ("nsys/annikola_gtx1050_2024.5.1.sqlite", "gpu.pageable_copies"),
])
def test_rows_from_advice_are_bounded_by_the_findings_own_figures(samples_dir, sample, finding_id):
    profile = tb_hwprof.read(samples_dir / sample)
    analysis = tb_hwprof.analyse(profile)
    [finding] = [f for f in analysis.findings if f.id == finding_id]
    figures = {name: f.value for name, f in finding.figures.items()}
    [row] = analysis.summaries["plan"][analysis.summaries["plan"]["key"] == f"advice|{finding_id}|"].to_dict("records")
    if finding_id.endswith("launch_bound"):  # the GPU's idle time in the steps
        expected = figures["step_ns"] * figures["gpu_idle_pct"] / 100
    else:  # the host time the copies held, else (Nsight Systems) their GPU time
        expected = figures.get("host_ns", figures["copy_ns"])
    assert row["saving_ns"] == pytest.approx(expected, rel=1e-12) and row["evidence"] == finding.text
    assert finding.remedy.startswith(row["action"])  # the remedy the advice phrased for this capture
    if sample.startswith("nsys/"):  # a CUDA program, not PyTorch: no PyTorch lever proposed
        assert not any("DataLoader" in a or "torch" in a for a in analysis.summaries["plan"]["action"])


def test_each_operators_row_names_the_module_it_spent_most_time_in(samples_dir):
    """The H200 ResNet-50 trace recorded with modules: a row's module is the module_ops path with the
    most of that operator's own GPU time, its share said when it ran in several."""
    profile = tb_hwprof.read(samples_dir / "torch/h200_resnet50_bf16_handler_stack.pt.trace.json.gz")
    analysis = tb_hwprof.analyse(profile)
    plan, module_ops = analysis.summaries["plan"], analysis.summaries["module_ops"]
    # A backward operator's module: that of the forward operators whose autograd node it ran under.
    module_ops = module_ops.assign(label=[p + (" (backward)" if side == "backward" else "")
                                          for p, side in zip(module_ops["path"], module_ops["pass"])])
    named = backward = 0
    for row in plan.to_dict("records"):
        own = module_ops[module_ops["op"] == row["ops"]] if row["ops"] else module_ops.iloc[:0]
        if own.empty:
            assert row["module"] == ""
            continue
        weight, what = ("device_ns", "time") if own["device_ns"].sum() > 0 else ("calls", "calls")  # no GPU time of its own
        top = own.sort_values([weight, "calls", "label"], ascending=[False, False, True]).iloc[0]
        share = top[weight] / own[weight].sum()
        assert row["module"] == (top["label"] if share >= 0.999 else f"{top['label']} ({100 * share:.0f}% of its {what} in modules)")
        named += 1
        backward += top["pass"] == "backward"
    assert named >= 3 and backward >= 1
