"""The .ncu-rep reader against NVIDIA's own ncu_report, launch by launch, on every real report."""
import math

import pytest

import tb_hwprof
from tb_hwprof.readers.nvidia import ncu_metrics

from conftest import fresh_ncu_oracle, ncu_actions

# model column -> the Nsight Compute metric(s) it must equal (first present wins)
DIRECT = {
    "duration_ns": ["gpu__time_duration.sum"],
    "achieved_occupancy_pct": ["sm__warps_active.avg.pct_of_peak_sustained_active"],
    "theoretical_occupancy_pct": ["sm__maximum_warps_per_active_cycle_pct"],
    "sm_throughput_pct": ["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
    "memory_throughput_pct": ["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"],
    "dram_throughput_pct": ["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                            "dram__throughput.avg.pct_of_peak_sustained_elapsed"],
    "l1_hit_rate_pct": ["l1tex__t_sector_hit_rate.pct"],
    "l2_hit_rate_pct": ["lts__t_sector_hit_rate.pct"],
    "dram_bytes_read": ["dram__bytes_read.sum"],
    "dram_bytes_write": ["dram__bytes_write.sum"],
    "registers_per_thread": ["launch__registers_per_thread"],
    "waves_per_sm": ["launch__waves_per_multiprocessor"],
    "grid_size": ["launch__grid_size"],
    "block_size": ["launch__block_size"],
}


def metric(action, *names):
    for name in names:
        m = action.metric_by_name(name)
        if m is not None:
            return float(m.value())
    return math.nan


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-12, abs=0)


@pytest.fixture(scope="module")
def read_cache():
    return {}


def profile_of(path, cache):
    if path not in cache:
        cache[path] = tb_hwprof.read(path)
    return cache[path]


def test_every_launch_equals_ncu_report(ncu_rep, ncu_report_module, read_cache):
    kernels = profile_of(ncu_rep, read_cache).kernels
    launches = list(ncu_actions(ncu_report_module, ncu_rep))
    assert len(kernels) == len(launches) > 0
    for row, action in zip(kernels.to_dict("records"), launches):
        assert row["demangled_name"] == action.name(ncu_report_module.IAction.NameBase_DEMANGLED)
        assert row["name"] == action.name(ncu_report_module.IAction.NameBase_FUNCTION)
        for column, names in DIRECT.items():
            expected = metric(action, *names)
            assert same(row[column], expected), (ncu_rep.name, row["launch_id"], column, row[column], expected)


def test_flops_follow_nsight_compute_roofline(ncu_rep, ncu_report_module, read_cache):
    """Achieved FLOP/s and DRAM intensity as Nsight Compute's roofline chart computes them:
    (fadd + fmul + its derived ffma x2 + dadd + dmul + dfma x2) per cycle x smsp clock, over
    dram__bytes.sum.per_second, using the report's own derived__ metrics."""
    kernels = profile_of(ncu_rep, read_cache).kernels
    checked = 0
    for row, action in zip(kernels.to_dict("records"), ncu_actions(ncu_report_module, ncu_rep)):
        sp_x2 = metric(action, "derived__smsp__sass_thread_inst_executed_op_ffma_pred_on_x2")
        dp_x2 = metric(action, "derived__smsp__sass_thread_inst_executed_op_dfma_pred_on_x2")
        if math.isnan(sp_x2):  # before 2021 the section multiplied the fma rate by 2 itself
            sp_x2 = 2 * metric(action, "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed")
            dp_x2 = 2 * metric(action, "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum.per_cycle_elapsed")
        if math.isnan(sp_x2) or math.isnan(dp_x2):
            continue
        sp = (metric(action, "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed")
              + metric(action, "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed") + sp_x2)
        dp = (metric(action, "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum.per_cycle_elapsed")
              + metric(action, "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum.per_cycle_elapsed") + dp_x2)
        per_cycle = sp + dp
        for extra in ("derived__smsp__sass_thread_inst_executed_op_hfma_pred_on_x2",):
            if not math.isnan(metric(action, extra)):
                per_cycle += (metric(action, "smsp__sass_thread_inst_executed_op_hadd_pred_on.sum.per_cycle_elapsed")
                              + metric(action, "smsp__sass_thread_inst_executed_op_hmul_pred_on.sum.per_cycle_elapsed")
                              + metric(action, extra))
        half_x4 = metric(action, "derived__smsp__sass_thread_inst_executed_op_hfma_pred_on_x4")
        if not math.isnan(half_x4):  # 2025.3's half roofline: packed HADD2 / HMUL2 / HFMA2, its own derived metrics
            per_cycle += (metric(action, "derived__smsp__sass_thread_inst_executed_op_hadd_pred_on_x2")
                          + metric(action, "derived__smsp__sass_thread_inst_executed_op_hmul_pred_on_x2") + half_x4)
        tensor_x512 = metric(action, "derived__smsp__inst_executed_pipe_tensor_x512")
        if not math.isnan(tensor_x512):
            per_cycle += tensor_x512
        flop_per_s = per_cycle * metric(action, "smsp__cycles_elapsed.avg.per_second")
        if math.isnan(tensor_x512):  # Hopper + 2025.3: tensor-core operations per source precision, per second
            flop_per_s += sum(metric(action, name) for name in action.metric_names()
                              if name.startswith("sm__ops_path_tensor_src_") and name.endswith(".sum.per_second")
                              and "_int" not in name)
        assert row["flop_per_s"] == pytest.approx(flop_per_s, rel=1e-9), (ncu_rep.name, row["launch_id"])
        dram_per_s = metric(action, "dram__bytes.sum.per_second")
        if not math.isnan(dram_per_s):
            assert row["ai_dram"] == pytest.approx(flop_per_s / dram_per_s, rel=1e-9)
        checked += 1
    if not checked:
        pytest.skip(f"{ncu_rep.name} has no roofline FLOP metrics")


def test_flop_counts_of_metrics_runs(ncu_rep, ncu_report_module, read_cache):
    """`--metrics` runs give instruction counts: FP64 FLOPs = dadd + dmul + 2 x dfma (likewise FP32)."""
    kernels = profile_of(ncu_rep, read_cache).kernels
    checked = 0
    for row, action in zip(kernels.to_dict("records"), ncu_actions(ncu_report_module, ncu_rep)):
        for precision, p in (("fp64", "d"), ("fp32", "f")):
            ops = [metric(action, f"sm__sass_thread_inst_executed_op_{p}{op}_pred_on.sum") for op in ("add", "mul", "fma")]
            if any(math.isnan(v) for v in ops):
                continue
            assert row[f"flops_{precision}"] == ops[0] + ops[1] + 2 * ops[2], (ncu_rep.name, row["launch_id"])
            checked += 1
    if not checked:
        pytest.skip(f"{ncu_rep.name} has no sm__sass_thread_inst_executed_op_*_pred_on.sum counts")


def expected_label_from_rule(rule):
    """Nsight Compute's SOLBottleneck result -> our label (title, or message text in old versions)."""
    title, message = rule["rule_message"]["title"], rule["rule_message"]["message"]
    if "returned an error" in message or "error set" in message:
        return None, None
    level = next((lvl for lvl in ("DRAM", "L2", "L1") if f"identify the {lvl} bottleneck" in message
                  or f"analyzing {lvl} in" in message), None)
    if title == "High Throughput" or "greater than 80.0%" in message:
        return ("compute" if "Compute Workload Analysis" in message.split("Start by")[-1] else "memory"), level
    if title == "High Memory Throughput" or message.startswith("Memory is more heavily utilized"):
        return "memory", level
    if title == "High Compute Throughput" or message.startswith("Compute is more heavily utilized"):
        return "compute", None
    if title == "Small Grid" or "grid is too small" in message:
        return "small-grid", None
    if title == "Latency Issue" or "low compute throughput and memory bandwidth" in message:
        return "latency", None
    if title == "Balanced Throughput" or message.startswith("Compute and Memory are well-balanced"):
        return "balanced", None
    raise AssertionError(f"unknown SOLBottleneck result: {title!r} {message[:80]!r}")


def test_label_agrees_with_nsight_compute_rule(ncu_rep, ncu_report_module, read_cache):
    kernels = profile_of(ncu_rep, read_cache).kernels
    compared = 0
    for row, action in zip(kernels.to_dict("records"), ncu_actions(ncu_report_module, ncu_rep)):
        for rule in action.rule_results_as_dicts():
            if rule["rule_identifier"] != "SOLBottleneck":
                continue
            label, level = expected_label_from_rule(rule)
            if label is None:
                continue
            assert row["bound"] == label, (ncu_rep.name, row["launch_id"], row["bound_reason"], rule["rule_message"])
            if level:
                assert row["bound_level"] == level, (ncu_rep.name, row["launch_id"], row["bound_reason"])
            compared += 1
    if not compared:
        pytest.skip(f"{ncu_rep.name} holds no SOLBottleneck rule result")


def test_rule_results_are_kept(ncu_rep, ncu_report_module, read_cache):
    profile = profile_of(ncu_rep, read_cache)
    for rules, action in zip(profile.rules, ncu_actions(ncu_report_module, ncu_rep)):
        theirs = action.rule_results_as_dicts()
        assert [r["rule"] for r in rules] == [d["rule_identifier"] for d in theirs]
        for ours, d in zip(rules, theirs):
            speedup = (d.get("speedup_estimation") or {}).get("speedup")
            if speedup is not None:
                assert ours["estimated_speedup_pct"] == speedup


def test_raw_metrics_are_every_metric(ncu_rep, ncu_report_module, read_cache):
    profile = profile_of(ncu_rep, read_cache)
    oracle = fresh_ncu_oracle(ncu_rep)
    assert len(profile.raw_metrics) == len(oracle)
    for raw, (metrics, *_) in zip(profile.raw_metrics, oracle):
        assert set(raw) == set(metrics)
        for name, (value, unit) in raw.items():
            expected, expected_unit = metrics[name]
            assert unit == expected_unit, name
            assert value == expected or (value is None and expected != expected), (name, value, expected)


def test_missing_counters_are_nan_not_zero(samples_dir, ncu_report_module, read_cache):
    """The `--metrics all` report lacks the SOL metrics: those columns are NaN, the label unknown."""
    kernels = profile_of(samples_dir / "ncu" / "esmm_a10g_metrics_all_2023.1.1.ncu-rep", read_cache).kernels
    assert kernels["sm_throughput_pct"].isna().all()
    assert kernels["l2_hit_rate_pct"].isna().all()
    assert (kernels["bound"] == "unknown").all()
    assert kernels["duration_ns"].notna().all()


def test_device_and_version(samples_dir, read_cache):
    profile = profile_of(samples_dir / "ncu" / "armleth_t4_full_2024.2.1.ncu-rep", read_cache)
    assert profile.provenance.tool_version == "2024.2.1"
    device = profile.devices[0]
    assert device.name == "Tesla T4" and device.compute_capability == "7.5"
    assert device.peaks["bytes_per_s_dram"].source == "measured"
    old = profile_of(samples_dir / "ncu" / "gene_v100_cli_flops_2020.ncu-rep", read_cache)
    assert old.provenance.tool_version == ""  # the 2020 CLI wrote no version string


def test_occupancy_limiter_is_the_smallest_block_limit(ncu_rep, ncu_report_module, read_cache):
    kernels = profile_of(ncu_rep, read_cache).kernels
    for row, action in zip(kernels.to_dict("records"), ncu_actions(ncu_report_module, ncu_rep)):
        limits = {label: metric(action, name) for name, label in ncu_metrics.OCCUPANCY_LIMITS.items()}
        limits = {k: v for k, v in limits.items() if not math.isnan(v)}
        if not limits:
            assert row["occupancy_limiter"] == ""
            continue
        low = min(limits.values())
        assert row["occupancy_limiter"].split(", ") == [k for k, v in limits.items() if v == low]
