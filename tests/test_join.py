"""The trace <-> counter-report join (issue 16, analysis/join.py) on real files.

No real pair exists (a PyTorch trace and an ncu report of the same program: no GPU to capture one),
so correctness on such a pair is NOT tested here.  What is tested, on real data, against NVIDIA's
ncu_report module and the trace JSON read with the stdlib:
- a report joined with itself: every launch pairs with itself, counters copied unchanged;
- a report cut down as ncu's filters (--kernel-name regex, --launch-skip, --launch-count) would cut
  it, joined with the whole report as the "trace" under those filters: each launch finds its own;
- a real PyTorch trace joined with an unrelated real report that shares one kernel name: the pairs
  made by name and order are exactly those an independent computation makes, the launch
  configurations differ, and nothing is joined (listed, never guessed);
- the per-operator counters' time-weighted means against numpy over the same rows.
"""
import dataclasses
import gzip
import json
import math
import re

import numpy as np
import pandas as pd
import pytest

import tb_hwprof
from tb_hwprof.analysis import join as J
from tb_hwprof.analysis.pipeline import analyse

from conftest import ncu_actions, sample

SPYINFER = "ncu/spyinfer_a10_105launches_2023.2.0.ncu-rep"  # 105 launches of one kernel
APLAINJANE = "ncu/aplainjane_rtx3060l_full_7k_2024.1.0.ncu-rep"  # 7 launches, several kernels
KPRATTIS = "ncu/kprattis_gtx1650_basic_2022.4.1.ncu-rep"  # 6 launches
ESMM = "ncu/esmm_a10g_metrics_all_2023.1.1.ncu-rep"  # 12 launches incl. 2 ampere_sgemm_128x64_nn
HTA_RANK0 = "torch/hta_sampled_2rank_rank0.json.gz"  # a real PyTorch trace with ampere_sgemm_128x64_nn


def oracle_launches(ncu_report, path):
    """[(function name, mangled name, grid, block, registers)] per launch, by ncu_report."""
    out = []
    for a in ncu_actions(ncu_report, path):
        dims = lambda p: tuple(int(a[f"launch__{p}_dim_{x}"].value()) for x in "xyz")
        out.append((a.name(), a.name(ncu_report.IAction.NameBase_MANGLED), dims("grid"), dims("block"),
                    int(a["launch__registers_per_thread"].value())))
    return out


def subset(profile, keep):
    """The report as ncu would have written it profiling only the launches `keep` (report order):
    those rows, renumbered from 0 as the report's own launch ids are."""
    kernels = profile.kernels.iloc[list(keep)].reset_index(drop=True)
    kernels["launch_id"] = np.arange(len(kernels), dtype=np.int64)
    pick = lambda per_launch: [per_launch[i] for i in keep] if per_launch else []  # tracers have none
    return dataclasses.replace(profile, kernels=kernels, raw_metrics=pick(profile.raw_metrics), rules=pick(profile.rules))


@pytest.mark.parametrize("relative", [SPYINFER, APLAINJANE, KPRATTIS])
def test_a_report_joined_with_itself_pairs_every_launch_with_itself(samples_dir, read_sample, ncu_report_module, relative):
    path = sample(samples_dir, relative)
    launches = oracle_launches(ncu_report_module, path)
    profile = read_sample(relative)
    result = J.join(profile, profile)
    table = result.table
    assert len(table) == len(launches) and set(table["status"]) == {"matched"}
    assert table["trace_launch"].tolist() == table["counter_launch"].tolist()
    assert sorted(table["trace_launch"]) == list(range(len(launches)))
    # Every launch has a mangled name in the report itself: the strongest stage is used.
    assert all(m for _, m, *_ in launches) and result.stage == "mangled"
    joined = result.profile.kernels
    assert joined[J.COUNTER_LAUNCH].tolist() == list(range(len(launches)))
    for column in J.COPIED_COLUMNS:
        pd.testing.assert_series_equal(joined[column].astype(object), profile.kernels[column].astype(object))
    assert result.profile.raw_metrics == profile.raw_metrics
    assert result.cross_tool["ratio"] == pytest.approx(1.0) and result.cross_tool["flagged"] == 0
    # The note states the matched time as people read it (it printed "2082944 ns"): ncu_report's own
    # gpu__time_duration.sum of the launches, in the largest unit it reaches.
    total = sum(a["gpu__time_duration.sum"].as_double() for a in ncu_actions(ncu_report_module, path))
    unit, scale = next((u, s) for u, s in (("s", 1e9), ("ms", 1e6), ("us", 1e3), ("ns", 1)) if total >= s)
    [note] = [n for n in J.join_notes(result, J.JoinFilters(), profile) if n.startswith("cross-tool time check")]
    assert f"took {total / scale:.4g} {unit} in ncu" in note, note


def expected_by_ncu_filters(names, regex, skip, count):
    """Report positions ncu keeps: names searched by the regex, then skip, then count (the oracle)."""
    kept = [i for i, n in enumerate(names) if re.search(regex, n)]
    return kept[skip:skip + count]


@pytest.mark.parametrize("relative, regex, skip, count", [
    (SPYINFER, "linear", 5, 10),
    (SPYINFER, ".", 100, 50),          # a count past the end keeps what is there
    (APLAINJANE, "Row|Col", 1, 3),
])
def test_launches_filtered_as_ncu_would_join_to_their_own_launches(samples_dir, read_sample, ncu_report_module,
                                                                   relative, regex, skip, count):
    path = sample(samples_dir, relative)
    names = [n for n, *_ in oracle_launches(ncu_report_module, path)]
    keep = expected_by_ncu_filters(names, regex, skip, count)
    assert keep, "the filter must keep something for the test to mean anything"
    whole = read_sample(relative)
    filters = J.JoinFilters(kernel_name=f"regex:{regex}", launch_skip=skip, launch_count=count)
    result = J.join(whole, subset(whole, keep), filters)
    table = result.table
    assert set(table["status"]) == {"matched"} and len(table) == len(keep)
    # The report's k-th launch is the k-th kept launch of the whole.
    assert dict(zip(table["counter_launch"], table["trace_launch"])) == dict(enumerate(keep))
    assert result.expected == len(keep) and result.filtered_out == len(names) - len(keep)
    joined = result.profile.kernels
    assert (joined[J.COUNTER_LAUNCH].to_numpy() >= 0).sum() == len(keep)
    pd.testing.assert_series_equal(joined["achieved_occupancy_pct"].iloc[keep],
                                   whole.kernels["achieved_occupancy_pct"].iloc[keep])


def test_launches_missing_without_the_filters_being_told_are_listed_not_joined(samples_dir, read_sample,
                                                                               ncu_report_module):
    """Order-based pairing cannot tell WHICH of identical launches is missing: the count left over is
    right, and it is listed as trace-only; nothing is invented for it."""
    path = sample(samples_dir, SPYINFER)
    n = len(oracle_launches(ncu_report_module, path))
    whole = read_sample(SPYINFER)
    result = J.join(whole, subset(whole, [i for i in range(n) if i % 10 != 3]))
    assert result.count("matched") == n - len(range(3, n, 10))
    assert result.count("trace-only") == len(range(3, n, 10))
    leftover = result.table[result.table["status"] == "trace-only"]
    assert (leftover["counter_launch"] == -1).all()
    assert result.profile.kernels[J.COUNTER_LAUNCH].iloc[leftover["trace_launch"]].eq(-1).all()


def trace_kernels(path):
    """The trace's kernel events in launch (correlation) order, read with the stdlib."""
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"]
    return sorted(kernels, key=lambda e: e["args"]["correlation"])


def test_a_real_trace_and_an_unrelated_report_pair_by_name_and_order_and_join_nothing(
        samples_dir, read_sample, ncu_report_module):
    trace_path, report_path = sample(samples_dir, HTA_RANK0), sample(samples_dir, ESMM)
    events = trace_kernels(trace_path)
    launches = oracle_launches(ncu_report_module, report_path)
    trace_names = {e["name"] for e in events}
    common = sorted({n for n, *_ in launches} & trace_names)
    assert common == ["ampere_sgemm_128x64_nn"]
    result = J.join(read_sample(HTA_RANK0), read_sample(ESMM))
    table = result.table
    # Independent pairing: the k-th trace launch of the name with the report's k-th.
    mine = [e for e in events if e["name"] == common[0]]
    theirs = [launch for launch in launches if launch[0] == common[0]]
    pairs = table[table["key"] == common[0]]
    paired = pairs[pairs["counter_launch"] >= 0].sort_values("counter_launch")
    assert len(paired) == min(len(mine), len(theirs)) == 2
    assert paired["trace_ns"].tolist() == [e["dur"] * 1000 for e in mine[:2]]
    for (_, row), event, launch in zip(paired.iterrows(), mine, theirs):
        differs = tuple(event["args"]["grid"]) != launch[2] or tuple(event["args"]["block"]) != launch[3] \
            or event["args"]["registers per thread"] != launch[4]
        assert row["status"] == ("config-differs" if differs else "matched")
        assert ("grid" in row["reason"]) == (tuple(event["args"]["grid"]) != launch[2])
    # Everything else is listed, nothing joined.
    assert result.count("report-only") == sum(1 for n, *_ in launches if n not in trace_names)
    assert result.count("trace-only") == len(events) - 2
    assert result.count("matched") == 0
    assert (result.profile.kernels[J.COUNTER_LAUNCH] == -1).all()
    assert any("not joined" in note for note in result.profile.notes)


NSYS_BITONIC = "nsys/annikola_gtx1050_2024.5.1.sqlite"  # 153 kernels of 3 names, with correlation ids


def nsys_launches(path):
    """[(correlationId, shortName, grid, block, registers)] in launch (correlation) order, by sqlite3."""
    import sqlite3
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT k.correlationId, s.value, k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ, "
                          "k.registersPerThread FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
                          "ORDER BY k.correlationId").fetchall()
    return [(r[0], r[1], r[2:5], r[5:8], r[8]) for r in rows]


@pytest.mark.parametrize("regex, skip, count", [("^internal", 2, 9), ("exchanges$", 40, 30), ("pre|int", 0, 100)])
def test_an_nsys_trace_is_filtered_and_ordered_as_ncu_would_see_it(samples_dir, read_sample, regex, skip, count):
    """A real Nsight Systems capture as the trace, and as the report the launches ncu's filters would
    keep (worked out from sqlite3 in launch order): each report launch finds its own trace launch."""
    path = sample(samples_dir, NSYS_BITONIC)
    launches = nsys_launches(path)
    keep = [c for c, name, *_ in launches if re.search(regex, name)][skip:skip + count]
    trace = read_sample(NSYS_BITONIC)
    corr = trace.kernels["correlation_id"].to_numpy()
    rows = [int(np.flatnonzero(corr == c)[0]) for c in keep]
    report = subset(trace, rows)
    result = J.join(trace, report, J.JoinFilters(kernel_name=f"regex:{regex}", launch_skip=skip, launch_count=count))
    assert set(result.table["status"]) == {"matched"} and len(result.table) == len(keep)
    by_report = result.table.sort_values("counter_launch")
    joined_corr = [corr[trace.kernels["launch_id"].to_numpy() == t][0] for t in by_report["trace_launch"]]
    assert joined_corr == keep
    assert result.filtered_out == len(launches) - len(keep)


def test_a_launch_configuration_that_differs_is_listed_not_joined(samples_dir, read_sample):
    """The nsys capture against itself with one launch's block changed in the 'report': that pair is
    listed with the difference (as sqlite3 gives the block), the others join."""
    path = sample(samples_dir, NSYS_BITONIC)
    launches = nsys_launches(path)
    trace = read_sample(NSYS_BITONIC)
    report = subset(trace, range(len(trace.kernels)))
    report.kernels.loc[5, "block"] = "(1, 1, 1)"
    result = J.join(trace, report)
    bad = result.table[result.table["status"] == "config-differs"]
    assert bad["counter_launch"].tolist() == [5] and result.count("matched") == len(launches) - 1
    block = launches[[c for c, *_ in launches].index(trace.kernels["correlation_id"].iloc[5])][3]
    assert f"block ({block[0]}, {block[1]}, {block[2]}) in the trace vs (1, 1, 1) in the report" in bad["reason"].iloc[0]


ROCPROF_COMPUTE_BMM = "rocprof/rocprof-compute_bmm1_mi300x"  # a real workload: 301 dispatches, 2 names


def test_a_rocprof_compute_workload_filtered_joins_each_dispatch_to_its_own(samples_dir, read_sample):
    """AMD's counter profile on both sides (no ROCm trace + rocprof-compute pair exists): the workload
    as the 'trace', and as the report the dispatches a name filter with skip/count keeps, worked out
    from pmc_perf.csv read with csv in Dispatch_ID order."""
    import csv
    folder = samples_dir / ROCPROF_COMPUTE_BMM
    if not folder.is_dir():
        pytest.skip(f"{ROCPROF_COMPUTE_BMM} not in the samples")
    with open(folder / "pmc_perf.csv", newline="") as f:
        dispatches = sorted(csv.DictReader(f), key=lambda r: int(r["Dispatch_ID"]))
    keep = [i for i, r in enumerate(dispatches) if "matrix_core" in r["Kernel_Name"]][10:10 + 25]
    whole = read_sample(ROCPROF_COMPUTE_BMM)
    assert len(whole.kernels) == len(dispatches)
    result = J.join(whole, subset(whole, keep), J.JoinFilters(kernel_name="regex:matrix_core", launch_skip=10,
                                                              launch_count=25))
    assert set(result.table["status"]) == {"matched"} and len(result.table) == 25
    assert dict(zip(result.table["counter_launch"], result.table["trace_launch"])) == dict(enumerate(keep))
    occupancy = result.profile.kernels["achieved_occupancy_pct"].iloc[keep]
    pd.testing.assert_series_equal(occupancy, whole.kernels["achieved_occupancy_pct"].iloc[keep])


def test_across_tools_the_bare_function_name_is_the_key(samples_dir, read_sample):
    """The report's own mangled names demangled by binutils' c++filt (as cxxabi, the PyTorch
    profiler's demangler, prints them) differ from Nsight Compute's demangled text for templates
    ('<32>(..., float const*)' vs '<(int)32>(..., const float *)'): a trace written so pairs with the
    report by bare function name and order, every launch with its own."""
    import shutil
    import subprocess
    if shutil.which("c++filt") is None:
        pytest.skip("binutils' c++filt not installed")
    sample(samples_dir, ESMM)
    report = read_sample(ESMM)
    mangled = report.kernels["mangled_name"].tolist()
    cxxabi = subprocess.run(["c++filt"], input="\n".join(mangled), capture_output=True, text=True,
                            check=True).stdout.splitlines()
    kernels = report.kernels.copy()
    kernels["name"] = kernels["demangled_name"] = pd.Series(cxxabi, dtype=object)
    kernels["mangled_name"] = pd.Series([""] * len(kernels), dtype=object)
    trace = dataclasses.replace(report, kernels=kernels, raw_metrics=[], rules=[],
                                provenance=dataclasses.replace(report.provenance, tool="pytorch"))
    differ = [a != b for a, b in zip(J.name_keys(trace.kernels, "demangled"), J.name_keys(report.kernels, "demangled"))]
    assert any(differ), "the two demanglers must print some name differently for the test to mean anything"
    result = J.join(trace, report)
    assert result.stage == "short"
    assert set(result.table["status"]) == {"matched"}
    assert result.table["trace_launch"].tolist() == result.table["counter_launch"].tolist()


def test_ncu_name_filters():
    exact, regex = J.name_matcher("gemm"), J.name_matcher("regex:^ampere_.*_nn$")
    assert exact("gemm") and not exact("sgemm")
    assert regex("ampere_sgemm_128x64_nn") and not regex("ampere_sgemm_128x64_tn")
    with pytest.raises(tb_hwprof.core.errors.HwprofError):
        J.name_matcher("regex:(")
    with pytest.raises(tb_hwprof.core.errors.HwprofError):
        J.JoinFilters(name_base="short")


def borrowed_counters(trace, report):
    """The real trace with counter values borrowed from a real report's launches (cyclically) on
    every third kernel: no real pair exists, so the aggregations are checked against numpy on it."""
    kernels = trace.kernels.copy()
    n, m = len(kernels), len(report.kernels)
    counted = np.arange(n) % 3 == 0
    src = np.arange(n) % m
    for column in J.OP_WEIGHTED:
        kernels[column] = np.where(counted, report.kernels[column].to_numpy(dtype=float)[src], np.nan)
    kernels[J.COUNTER_LAUNCH] = np.where(counted, src, -1)
    return dataclasses.replace(trace, kernels=kernels, raw_metrics=[], rules=[]), counted


def weighted(values, weights):
    ok = ~np.isnan(values)
    return (values[ok] * weights[ok]).sum() / weights[ok].sum() if weights[ok].sum() > 0 else math.nan


def same(a, b):
    return (a is None or (isinstance(a, float) and math.isnan(a))) and math.isnan(b) or a == pytest.approx(b)


def test_operator_counters_are_time_weighted_over_the_kernels_that_have_them(samples_dir, read_sample):
    sample(samples_dir, HTA_RANK0), sample(samples_dir, APLAINJANE)
    profile, counted = borrowed_counters(read_sample(HTA_RANK0), read_sample(APLAINJANE))
    analysis = analyse(profile)
    table = analysis.summaries[J.OP_COUNTERS_TABLE].set_index("op")
    k = profile.kernels[counted]
    for op, group in k.groupby(k["op"]):
        w = group["duration_ns"].to_numpy(dtype=float)
        row = table.loc[op]
        assert row["counted_kernels"] == len(group)
        for column in J.OP_WEIGHTED:
            assert same(row[column], weighted(group[column].to_numpy(dtype=float), w))
        labels = group["bound"].tolist()
        top = max(set(labels), key=lambda b: w[[lab == b for lab in labels]].sum())
        assert row["bound_mix"].startswith(top)


def test_the_operators_view_carries_the_counters_per_operator_and_kernel(samples_dir, read_sample, tmp_path):
    from tb_hwprof.logdir.writer import write_run
    from tb_hwprof.plugin import store, torch_views
    sample(samples_dir, HTA_RANK0), sample(samples_dir, APLAINJANE)
    profile, counted = borrowed_counters(read_sample(HTA_RANK0), read_sample(APLAINJANE))
    write_run(profile, analyse(profile), tmp_path, "joined")
    runs = store.RunStore(str(tmp_path))
    doc = torch_views.operators(runs.entry("joined", runs.run_dir("joined")))
    assert doc["has_counters"] is True
    k = profile.kernels[counted]
    ops = {r["op"]: r for r in doc["ops"]}
    for op, group in k.groupby(k["op"]):
        w = group["duration_ns"].to_numpy(dtype=float)
        assert ops[op]["counted_kernels"] == len(group)
        assert same(ops[op]["achieved_occupancy_pct"], weighted(group["achieved_occupancy_pct"].to_numpy(dtype=float), w))
        by_name = {r["name"]: r for r in doc["kernels"][op]}
        for name, launches in group.groupby("name"):
            lw = launches["duration_ns"].to_numpy(dtype=float)
            row = by_name[name]
            assert row["counted"] == len(launches)
            assert same(row["sm_throughput_pct"], weighted(launches["sm_throughput_pct"].to_numpy(dtype=float), lw))
            # The drill-down opens the longest launch that has counters (its drawer has the sections).
            assert row["counted_launch"] == int(launches.sort_values("duration_ns", ascending=False,
                                                                     kind="stable")["launch_id"].iloc[0])


# -- the Operators view in a real browser (conftest's tensorboard / browser / session fixtures) ----
EXPECTED_RUNS = {"joined"}


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir):
    """One run: the real trace with borrowed real counters (see borrowed_counters), as written."""
    from tb_hwprof.logdir.writer import write_run
    sample(samples_dir, HTA_RANK0), sample(samples_dir, APLAINJANE)
    profile, _ = borrowed_counters(tb_hwprof.read(samples_dir / HTA_RANK0), tb_hwprof.read(samples_dir / APLAINJANE))
    root = tmp_path_factory.mktemp("join_browser") / "logs"
    write_run(profile, analyse(profile), root, "joined")
    return root


def test_operators_show_counters_and_a_kernel_opens_its_counted_launch(session, logdir):
    from tb_hwprof.logdir.reader import read_kernels
    kernels = read_kernels(logdir / "joined")
    counted = kernels[kernels[J.COUNTER_LAUNCH] >= 0]
    session.open()
    frame = session.go("#view=operators&run=joined")
    rows = frame.locator("table[data-role=operators] tbody tr[data-row-id]")
    rows.first.wait_for()
    op = rows.first.get_attribute("data-op")
    mine = counted[counted["op"] == op]
    assert len(mine), "the top operator must have counted kernels for the test to mean anything"
    w = mine["duration_ns"].to_numpy(dtype=float)
    cell = rows.first.locator("td[data-col=achieved_occupancy_pct]").get_attribute("data-value")
    assert float(cell) == pytest.approx(weighted(mine["achieved_occupancy_pct"].to_numpy(dtype=float), w))
    assert frame.locator("[data-role=counters-note]").count() == 1
    rows.first.click()
    kernel_rows = frame.locator("table[data-role=op-kernels] tbody tr[data-row-id]")
    kernel_rows.first.wait_for()
    name = kernel_rows.first.get_attribute("data-name")
    launches = mine[mine["name"] == name]
    if len(launches):  # the op's most-time kernel has counted launches: it opens the longest of them
        want = int(launches.sort_values("duration_ns", ascending=False, kind="stable")["launch_id"].iloc[0])
        assert int(kernel_rows.first.get_attribute("data-launch-id")) == want
    kernel_rows.first.click()
    drawer = frame.locator("#detail")
    drawer.locator("[data-role=detail-name]").wait_for()
    launch = int(drawer.get_attribute("data-launch-id"))
    assert launch == int(kernel_rows.first.get_attribute("data-launch-id"))
    value = kernels.loc[kernels["launch_id"] == launch, "achieved_occupancy_pct"].iloc[0]
    shown = drawer.locator("tr[data-col=achieved_occupancy_pct] td[data-value]")
    if not math.isnan(value):
        assert float(shown.get_attribute("data-value")) == pytest.approx(value)
    session.shot("join-operators-counters")
