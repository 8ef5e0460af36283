"""/summaries (docs/http_api.md): the summary tables a run exported, the profiler's own first, each
table as /summary serves it with values equal to the source file's, read independently (sqlite3 over
the Nsight Systems export, the csv module over rocprof's CSV)."""
from __future__ import annotations

import csv
import sqlite3

import pytest

import tb_hwprof
from conftest import sample
from support_plugin import App

NSYS = "nsys/annikola_gtx1050_2024.5.1.sqlite"
HIP_STATS = "rocprof/v3_docs_hip_api_stats.csv"
ROCPROF_V1 = "rocprof/v1_mi250x_laplacian/results.csv"
VTUNE = "vtune/amplxe2018_advanced_hotspots_loops.csv"
RUNS = {"nsys": NSYS, "hip": HIP_STATS, "rocprof": ROCPROF_V1, "vtune": VTUNE}


@pytest.fixture(scope="module")
def app(tmp_path_factory, samples_dir):
    logdir = tmp_path_factory.mktemp("summaries")
    for run, rel in RUNS.items():
        tb_hwprof.export(sample(samples_dir, rel), logdir, run)
    return App(logdir)


def listed(app, run):
    return {t["name"]: t for t in app.json("/summaries", run=run)["tables"]}


def table(app, run, name):
    doc = app.json("/summary", run=run, name=name)
    return [dict(zip(doc["columns"], row)) for row in zip(*(doc["data"][c] for c in doc["columns"]))]


def nsys_api_calls(path):
    """{CUDA API function: (calls, total ns, min ns, max ns)} straight from the export's runtime table."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT s.value, COUNT(*), SUM(r.end - r.start), MIN(r.end - r.start), MAX(r.end - r.start) "
                          "FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId GROUP BY s.value")
        return {name: tuple(rest) for name, *rest in rows}


def test_nsys_lists_its_own_tables_first_and_says_which_view_shows_the_derived_ones(app):
    doc = app.json("/summaries", run="nsys")
    assert doc["tool"] == "nsys"
    names = [t["name"] for t in doc["tables"]]
    derived = [t for t in doc["tables"] if t["derived"]]
    own = [t for t in doc["tables"] if not t["derived"]]
    assert "cuda_api_sum" in {t["name"] for t in own}
    assert names.index("cuda_api_sum") < min(names.index(t["name"]) for t in derived)
    assert {t["name"]: t["shown_in"] for t in derived if t["name"].startswith("gpu_")} == {
        "gpu_activity": "overview", "gpu_utilisation": "overview", "gpu_idle_gaps": "overview",
        "gpu_idle_attribution": "overview"}
    assert all(t["origin"] == "tb-hwprof" for t in derived) and all(t["origin"] == "nsys" for t in own)
    # Each entry's shape is the table /summary serves.
    for t in doc["tables"]:
        served = app.json("/summary", run="nsys", name=t["name"])
        assert (t["rows"], t["columns"]) == (served["rows"], served["columns"])
        assert t["units"] == {c: u for c, u in served["units"].items() if u}


def test_nsys_cuda_api_sum_equals_the_sqlite_runtime_table(app, samples_dir):
    expected = nsys_api_calls(samples_dir / NSYS)
    rows = table(app, "nsys", "cuda_api_sum")
    got = {r["name"]: (r["num_calls"], r["total_ns"], r["min_ns"], r["max_ns"]) for r in rows}
    assert got == expected
    assert listed(app, "nsys")["cuda_api_sum"]["units"]["total_ns"] == "ns"


def test_rocprof_hip_api_stats_equal_the_csv(app, samples_dir):
    with open(samples_dir / HIP_STATS, newline="") as f:
        expected = {r["Name"]: (int(r["Calls"]), int(r["TotalDurationNs"])) for r in csv.DictReader(f)}
    entry = listed(app, "hip")["hip_api_stats"]
    assert entry["derived"] is False and entry["origin"].startswith("rocprof") and entry["rows"] == len(expected)
    assert entry["columns"][:3] == ["name", "calls", "total_ns"] and entry["units"]["total_ns"] == "ns"
    assert {r["name"]: (r["calls"], r["total_ns"]) for r in table(app, "hip", "hip_api_stats")} == expected


def test_rocprof_kernel_stats_equal_the_trace_grouped_by_kernel(app, samples_dir):
    """kernel_stats of a rocprof v1 trace: calls and total time per kernel of results.csv."""
    expected = {}
    with open(samples_dir / ROCPROF_V1, newline="") as f:
        for r in csv.DictReader(f):
            name = r["KernelName"].removesuffix(" [clone .kd]").removesuffix(".kd")
            calls, total = expected.get(name, (0, 0))
            expected[name] = (calls + 1, total + int(r["EndNs"]) - int(r["BeginNs"]))
    got = {r["name"]: (r["calls"], r["total_ns"]) for r in table(app, "rocprof", "kernel_stats")}
    assert got == expected


def test_vtune_hotspots_are_listed_as_the_tools_table_the_cpu_view_shows(app):
    entry = listed(app, "vtune")["cpu_hotspots"]
    assert entry == {**entry, "derived": False, "origin": "vtune", "shown_in": "cpu"}


def test_a_run_without_summary_tables_is_a_404(tmp_path, samples_dir, ncu_report_module):
    tb_hwprof.export(sample(samples_dir, "ncu/armleth_t4_full_2024.2.1.ncu-rep"), tmp_path, "ncu")
    app = App(tmp_path)
    assert "summaries" not in app.json("/runs")["runs"][0]["views"]
    app.json("/summaries", expect=404, run="ncu")
