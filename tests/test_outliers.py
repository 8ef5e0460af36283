"""kernels.outlier_launch on real samples: the detector against a plain recomputation (every launch
compared with the median of its same-work siblings, from the raw files where the test can read
them), silent where no launch is 10x its siblings, and firing, with its figures, where one is
slower at a lower ratio (no sample holds a 10x launch)."""
from __future__ import annotations

import csv
import math
import statistics

import pytest

import tb_hwprof
from tb_hwprof.analysis.advice import kernels as rule

VCOPY = "rocprof/omniperf_vcopy_mi200"
WORK_COUNTERS = ("SQ_INSTS", "SQ_INSTS_VALU", "SQ_INSTS_SALU", "SQ_INSTS_VMEM", "SQ_WAVES")
TRACES_AND_REPORTS = ("ncu/spyinfer_a10_105launches_2023.2.0.ncu-rep", "ncu/kprattis_gtx1650_basic_2022.4.1.ncu-rep",
                      "nsys/annikola_gtx1050_2024.5.1.sqlite", "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite",
                      "rocprof/v1_mi250x_laplacian/results.csv", "rocprof/v3_rocpd_mi300x_ck_bmm_results.db",
                      "rocprof/rocprof-compute_bmm1_mi300x", VCOPY)


def raw_dispatches(folder):
    """pmc_perf.csv by the csv module: (name, grid, workgroup, work counters) and duration per dispatch."""
    with open(folder / "pmc_perf.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return [((r["Kernel_Name"], r["Grid_Size"], r["Workgroup_Size"]) + tuple(float(r[c]) for c in WORK_COUNTERS),
             float(r["End_Timestamp"]) - float(r["Start_Timestamp"])) for r in rows]


def plain_outliers(keys, durations, ratio):
    """{position: (sibling median, siblings)} of launches > ratio x the median of the other launches
    with the same key and at least MIN_EXCESS_NS above it, one launch at a time."""
    out = {}
    for i, (key, d) in enumerate(zip(keys, durations)):
        others = [e for j, (k, e) in enumerate(zip(keys, durations)) if j != i and k == key and not math.isnan(e)]
        if math.isnan(d) or len(others) < rule.MIN_SIBLINGS:
            continue
        median = statistics.median(others)
        # ... by more than the timestamps resolve (whole-µs traces: a 0 median is no baseline).
        if d > ratio * median and median > 0 and d - median >= rule.MIN_EXCESS_NS:
            out[i] = (median, len(others))
    return out


def model_keys(profile):
    """Each launch's sibling key from the model and raw metrics, NaN made comparable."""
    k = profile.kernels
    columns = [c for c in ("name", "grid_size", "block_size") + rule.WORK_COLUMNS if c in k]
    raw = profile.raw_metrics or [{}] * len(k)
    return [tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in row)
            + tuple(str((r.get(n) or [None])[0]) for n in rule.WORK_COUNTERS)
            for row, r in zip(k[columns].itertuples(index=False), raw)]


@pytest.fixture(scope="module")
def profiles(samples_dir):
    cache = {}

    def get(relative):
        if relative not in cache:
            path = samples_dir / relative
            if not path.exists():
                pytest.skip(f"{relative} not in the samples")
            cache[relative] = tb_hwprof.read(path)
        return cache[relative]
    return get


@pytest.mark.parametrize("relative", TRACES_AND_REPORTS)
@pytest.mark.parametrize("ratio", (rule.OUTLIER_RATIO, 2.0, 1.25))
def test_detector_equals_the_plain_comparison(profiles, relative, ratio):
    profile = profiles(relative)
    durations = list(profile.kernels["duration_ns"].astype(float))
    expected = plain_outliers(model_keys(profile), durations, ratio)
    found = rule.outliers(profile.kernels, profile.raw_metrics, ratio)
    assert set(found.index) == set(expected)
    for i, row in found.iterrows():
        assert (row["sibling_median_ns"], row["siblings"]) == (pytest.approx(expected[i][0]), expected[i][1])


@pytest.mark.parametrize("relative", TRACES_AND_REPORTS)
def test_silent_where_no_launch_is_ten_times_its_siblings(profiles, relative):
    profile = profiles(relative)
    assert not plain_outliers(model_keys(profile), list(profile.kernels["duration_ns"].astype(float)),
                              rule.OUTLIER_RATIO)
    findings = tb_hwprof.analyse(profile).findings
    assert "kernels.outlier_launch" not in {f.id for f in findings}


def test_vcopy_first_dispatch_fires_at_a_lower_ratio_with_its_figures(roc, profiles):
    """Omniperf vcopy on MI200: dispatch 0 takes 20480 ns, its two siblings (same grid, block and
    instruction counts) 16320 and 15520: 1.29x their median, a first-call cost.  Below 1.29x the
    rule fires, and its figures are the raw file's; at 10x it does not."""
    dispatches = raw_dispatches(roc / "omniperf_vcopy_mi200")
    keys, durations = [k for k, _ in dispatches], [d for _, d in dispatches]
    assert len(set(keys)) == 1  # identical work, by the raw counters
    median = statistics.median(durations[1:])
    ratio = durations[0] / median
    assert 1.25 < ratio < rule.OUTLIER_RATIO
    profile = profiles(VCOPY)
    assert rule.outlier_finding(profile.kernels, profile.raw_metrics) is None
    found = rule.outlier_finding(profile.kernels, profile.raw_metrics, ratio=1.25)
    assert found.id == "kernels.outlier_launch"
    [record] = found.figure("outliers")
    assert (record["launch_id"], record["duration_ns"], record["siblings"]) == (0, durations[0], 2)
    assert record["sibling_median_ns"] == median and record["ratio"] == pytest.approx(ratio)
    assert record["kernel_mean_ns"] == pytest.approx(statistics.mean(durations))
    assert record["kernel_mean_without_ns"] == pytest.approx(statistics.mean(durations[1:]))
    assert found.figure("total_kernel_ns") == sum(durations)
    assert found.figure("total_kernel_without_ns") == sum(durations[1:])
    share = 100 * (durations[0] - median) / sum(durations)
    assert found.figure("excess_share_pct") == pytest.approx(share) and share >= rule.MATERIAL_SHARE_PCT
    assert f"{ratio:.1f}x the median {median / 1e6:.3g} ms of its 2 siblings" in found.text
    assert f">= {rule.MATERIAL_SHARE_PCT:g}%" in found.text


def test_outliers_below_the_material_share_stay_silent(roc, profiles):
    """bmm1 on MI300X at 1.3x: a few launches are slower than their siblings, but what they take
    beyond the siblings' median is under 5% of kernel time (recomputed from pmc_perf.csv)."""
    dispatches = raw_dispatches(roc / "rocprof-compute_bmm1_mi300x")
    keys, durations = [k for k, _ in dispatches], [d for _, d in dispatches]
    slow = plain_outliers(keys, durations, 1.3)
    assert slow
    share = 100 * sum(durations[i] - median for i, (median, _) in slow.items()) / sum(durations)
    assert share < rule.MATERIAL_SHARE_PCT
    profile = profiles("rocprof/rocprof-compute_bmm1_mi300x")
    assert set(rule.outliers(profile.kernels, profile.raw_metrics, 1.3).index) == set(slow)
    assert rule.outlier_finding(profile.kernels, profile.raw_metrics, ratio=1.3) is None


def test_launches_whose_work_differs_are_not_siblings(profiles):
    """gene_v100: kernel_assign_6 runs 12 times with one grid and block but three FP64 workloads
    (dadd + dmul + 2 dfma from the raw counters): three sibling groups, never one."""
    profile = profiles("ncu/gene_v100_cli_flops_2020.ncu-rep")
    groups = rule.sibling_groups(profile.kernels, profile.raw_metrics)
    flops = [sum(r[f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum"][0] * w for op, w in
                 (("dadd", 1), ("dmul", 1), ("dfma", 2))) for r in profile.raw_metrics]
    assert len(set(profile.kernels[["name", "grid_size", "block_size"]].itertuples(index=False))) == 1
    assert len(set(flops)) == 3
    for i in range(len(flops)):
        for j in range(len(flops)):
            assert (groups[i] == groups[j]) == (flops[i] == flops[j])
