"""rocprof / rocprof-compute / Omniperf readers over every real file in the samples' rocprof folder.

Every expected figure is computed here from the raw file with the csv / json / sqlite3
modules, independently of the reader; derived rocprof-compute metrics are checked by hand
on one real dispatch of each workload, with the arithmetic written out below.
"""
import csv
import json
import math
import re
import sqlite3
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import tb_hwprof
from tb_hwprof.analysis.bottleneck import bound_label
from tb_hwprof.app.cli import main as cli_main
from tb_hwprof.readers.detect import sniff
from tb_hwprof.core.errors import InputError

# Every file and folder of samples/rocprof -> (source_format it reads as) or ("error", words of the message).
EXPECT = {
    "omniperf_vcopy_mi200": "rocprof-compute-workload",
    "omniperf_vcopy_mi200/SQ_IFETCH_LEVEL.csv": "rocprof-compute-csv",
    "omniperf_vcopy_mi200/SQ_INST_LEVEL_LDS.csv": "rocprof-compute-csv",
    "omniperf_vcopy_mi200/SQ_INST_LEVEL_SMEM.csv": "rocprof-compute-csv",
    "omniperf_vcopy_mi200/SQ_INST_LEVEL_VMEM.csv": "rocprof-compute-csv",
    "omniperf_vcopy_mi200/SQ_LEVEL_WAVES.csv": "rocprof-compute-csv",
    "omniperf_vcopy_mi200/log.txt": ("error", "pass the workload folder"),
    "omniperf_vcopy_mi200/pmc_dispatch_info.csv": "rocprof-compute-csv",
    "omniperf_vcopy_mi200/pmc_perf.csv": "rocprof-compute-workload",
    "omniperf_vcopy_mi200/roofline.csv": ("error", "pass the workload folder"),
    "omniperf_vcopy_mi200/sysinfo.csv": ("error", "pass the workload folder"),
    "omniperf_vcopy_mi200/timestamps.csv": "rocprof-compute-csv",
    "omniperf_vcopy_mi300x": "rocprof-compute-workload",
    "omniperf_vcopy_mi300x/SQ_IFETCH_LEVEL.csv": "rocprof-compute-csv",
    "omniperf_vcopy_mi300x/SQ_INST_LEVEL_LDS.csv": "rocprof-compute-csv",
    "omniperf_vcopy_mi300x/SQ_INST_LEVEL_SMEM.csv": "rocprof-compute-csv",
    "omniperf_vcopy_mi300x/SQ_INST_LEVEL_VMEM.csv": "rocprof-compute-csv",
    "omniperf_vcopy_mi300x/SQ_LEVEL_WAVES.csv": "rocprof-compute-csv",
    "omniperf_vcopy_mi300x/log.txt": ("error", "pass the workload folder"),
    "omniperf_vcopy_mi300x/pmc_perf.csv": "rocprof-compute-workload",
    "omniperf_vcopy_mi300x/sysinfo.csv": ("error", "pass the workload folder"),
    "omniperf_vcopy_mi300x/timestamps.csv": "rocprof-compute-csv",
    "rocprof-compute_bmm1_mi300x": "rocprof-compute-workload",
    "rocprof-compute_bmm1_mi300x/log.txt": ("error", "pass the workload folder"),
    "rocprof-compute_bmm1_mi300x/pmc_dispatch_info.csv": "rocprof-compute-csv",
    "rocprof-compute_bmm1_mi300x/pmc_kernel_top.csv": "rocprof-compute-kernel-top",
    "rocprof-compute_bmm1_mi300x/pmc_perf.csv": "rocprof-compute-workload",
    "rocprof-compute_bmm1_mi300x/profiling_config.yaml": ("error", "pass the workload folder"),
    "rocprof-compute_bmm1_mi300x/roofline.csv": ("error", "pass the workload folder"),
    "rocprof-compute_bmm1_mi300x/sysinfo.csv": ("error", "pass the workload folder"),
    "v1_mi250x_laplacian/results.csv": "rocprof-v1-csv",
    "v1_mi250x_laplacian/results.stats.csv": "rocprof-v1-stats",
    "v1_mi250x_laplacian/results.sysinfo.txt": ("error", "pass results.csv"),
    "v1_mi300a_vecadd/output_vec_add_gpu.csv": "rocprof-v1-csv",
    "v1_mi300a_vecadd/results.copy_stats.csv": "rocprof-v1-stats",
    "v1_mi300a_vecadd/results.db": "rocprof-v1-db",
    "v1_mi300a_vecadd/results.hip_stats.csv": "rocprof-v1-stats",
    "v1_mi300a_vecadd/results.json": "rocprof-v1-json",
    "v1_mi300a_vecadd/results.stats.csv": "rocprof-v1-stats",
    "v1_old_rome_omp/results.copy_stats.csv": "rocprof-v1-stats",
    "v1_old_rome_omp/results.csv": "rocprof-v1-csv",
    "v1_old_rome_omp/results.hsa_stats.csv": "rocprof-v1-stats",
    "v1_old_rome_omp/results.json": "rocprof-v1-json",
    "v1_old_rome_omp/results.stats.csv": "rocprof-v1-stats",
    "v1_rdna_wave32_llm170_EXCERPT/results.head10.csv": "rocprof-v1-csv",
    "v2_cli_stdout_golden_hip_vectoradd.txt": "rocprofv2-stdout",
    "v2_hip_api_trace_hiptrace.csv": "rocprofv2-api-trace",
    "v3_docs_counter_collection_newer.csv": "rocprofv3-counter-collection",
    "v3_docs_counter_collection_older.csv": "rocprofv3-counter-collection",
    "v3_docs_hip_api_stats.csv": "rocprofv3-stats",
    "v3_docs_kernel_trace_newer.csv": "rocprofv3-kernel-trace",
    "v3_docs_kernel_trace_older.csv": "rocprofv3-kernel-trace",
    "v3_mi300a_jacc_results.pftrace": ("error", "--output-format csv"),
    "v3_rocpd_mi300x_ck_bmm_results.db": "rocpd-sqlite",
}
READABLE = sorted(k for k, v in EXPECT.items() if isinstance(v, str))
WORKLOADS = ("omniperf_vcopy_mi200", "omniperf_vcopy_mi300x", "rocprof-compute_bmm1_mi300x")
SUFFIX = re.compile(r"(\s*\[clone [^\]]*\]|\s*\(\.kd\)|\.kd)$")  # the test's own suffix rule


@pytest.fixture(scope="session")
def read_cached(roc):
    cache = {}

    def read(rel):
        if rel not in cache:
            cache[rel] = tb_hwprof.read(roc / rel)
        return cache[rel]
    return read


def rows_of(path: Path):
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if any((v or "").strip() for v in r.values())]


def num(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def same(a, b, rel=1e-9):
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return b == pytest.approx(a, rel=rel, abs=1e-9)


# ---------------------------------------------------------------- every file: reads, or a one-line fix

def test_every_sample_is_listed(roc):
    found = {str(p.relative_to(roc)) for p in roc.rglob("*") if p.is_file()}
    found |= {p.name for p in roc.iterdir() if p.is_dir() and (p / "pmc_perf.csv").is_file()}
    assert found == set(EXPECT), "a sample was added or removed: update EXPECT"


@pytest.mark.parametrize("rel", sorted(EXPECT))
def test_each_input_reads_or_says_what_to_pass(roc, rel):
    expected = EXPECT[rel]
    if isinstance(expected, str):
        profile = tb_hwprof.read(roc / rel)
        assert profile.provenance.source_format == expected
        assert profile.notes, "every AMD profile says what it holds"
        assert list(profile.kernels.columns)[:3] == ["launch_id", "range_id", "name"]
        return
    with pytest.raises(InputError) as err:
        tb_hwprof.read(roc / rel)
    message = str(err.value)
    assert expected[1] in message and "\n" not in message and " -- " in message


# ---------------------------------------------------------------- dispatch CSVs against the csv module

DISPATCH_CSVS = {  # file -> (name, begin, end) columns as the tool spells them
    "v1_mi250x_laplacian/results.csv": ("KernelName", "BeginNs", "EndNs"),
    "v1_old_rome_omp/results.csv": ("KernelName", "BeginNs", "EndNs"),
    "v1_rdna_wave32_llm170_EXCERPT/results.head10.csv": ("KernelName", "BeginNs", "EndNs"),
    "v3_docs_kernel_trace_newer.csv": ("Kernel_Name", "Start_Timestamp", "End_Timestamp"),
    "v3_docs_kernel_trace_older.csv": ("Kernel_Name", "Start_Timestamp", "End_Timestamp"),
    "omniperf_vcopy_mi200/timestamps.csv": ("Kernel_Name", "Start_Timestamp", "End_Timestamp"),
    "omniperf_vcopy_mi200/SQ_LEVEL_WAVES.csv": ("Kernel_Name", "Start_Timestamp", "End_Timestamp"),
    "omniperf_vcopy_mi300x/timestamps.csv": ("Kernel_Name", "Start_Timestamp", "End_Timestamp"),
    "omniperf_vcopy_mi300x/SQ_LEVEL_WAVES.csv": ("Kernel_Name", "Start_Timestamp", "End_Timestamp"),
}


def expected_durations(rows, begin, end):
    """End - Begin as integers; NaN where a timestamp was saved rounded ("8.1097E+14")."""
    out = []
    for r in rows:
        if "E" in r[begin].upper() or "E" in r[end].upper():
            out.append(math.nan)
        else:
            out.append(float(int(r[end]) - int(r[begin])))
    return out


@pytest.mark.parametrize("rel", sorted(DISPATCH_CSVS))
def test_dispatch_durations_counts_and_totals(roc, read_cached, rel):
    name_col, begin, end = DISPATCH_CSVS[rel]
    rows = rows_of(roc / rel)
    kernels = read_cached(rel).kernels
    assert len(kernels) == len(rows)
    want = expected_durations(rows, begin, end)
    for got, exp in zip(kernels["duration_ns"], want):
        assert same(exp, got)
    assert list(kernels["demangled_name"]) == [SUFFIX.sub("", r[name_col]).strip() for r in rows]
    # Per-name counts and totals against the reader's kernel_stats summary.
    calls, totals = defaultdict(int), defaultdict(float)
    for r, d in zip(rows, want):
        key = SUFFIX.sub("", r[name_col]).strip()
        calls[key] += 1
        totals[key] += d
    stats = read_cached(rel).summaries.get("kernel_stats")
    if all(math.isnan(d) for d in want):
        assert stats is None
        return
    got = {row["name"]: (row["calls"], row["total_ns"]) for row in stats.to_dict("records")}
    assert got == {k: (calls[k], pytest.approx(totals[k])) for k in calls}
    assert kernels["duration_ns"].sum() == pytest.approx(sum(d for d in want if not math.isnan(d)))


def test_v1_durations_equal_the_tools_own_duration_column(roc, read_cached):
    for rel in ("v1_mi250x_laplacian/results.csv", "v1_old_rome_omp/results.csv",
                "v1_rdna_wave32_llm170_EXCERPT/results.head10.csv"):
        rows = rows_of(roc / rel)
        assert list(read_cached(rel).kernels["duration_ns"]) == [float(r["DurationNs"]) for r in rows]


def test_v1_trace_totals_match_the_tools_stats_file(roc, read_cached):
    """results.stats.csv (rocprof --stats) agrees with the per-dispatch trace, name by name."""
    for folder in ("v1_mi250x_laplacian", "v1_old_rome_omp"):
        stats = {SUFFIX.sub("", r["Name"]).strip(): (int(r["Calls"]), int(r["TotalDurationNs"]))
                 for r in rows_of(roc / folder / "results.stats.csv")}
        ours = read_cached(f"{folder}/results.csv").summaries["kernel_stats"]
        assert {r["name"]: (r["calls"], int(r["total_ns"])) for r in ours.to_dict("records")} == stats


def test_laplacian_figures(read_cached):
    p = read_cached("v1_mi250x_laplacian/results.csv")
    k = p.kernels
    assert len(k) == 1004 and (k["name"] == "laplacian_kernel<double>").sum() == 1001
    assert k.loc[0, "grid_size"] == 134217728 / 256 and k.loc[0, "block_size"] == 256
    assert k.loc[1, "registers_per_thread"] == 24 + 0  # arch_vgpr + accum_vgpr
    assert k.loc[2, "registers_per_thread"] == 12 + 4
    assert k.loc[0, "device"] == 8 and k.loc[0, "stream"] == 0
    dev = p.device(8)
    assert dev.name == "AMD Instinct MI250X/MI250" and dev.sm_count == 104 and dev.architecture == "gfx90a"
    assert dev.peaks["flop_per_s_fp64"].source == "datasheet" and "MI210" in dev.peaks["flop_per_s_fp64"].how


def test_negative_duration_and_foreign_clock_rows_are_kept_and_noted(roc, read_cached):
    rel = "v1_rdna_wave32_llm170_EXCERPT/results.head10.csv"
    rows = rows_of(roc / rel)
    p = read_cached(rel)
    negative = [i for i, r in enumerate(rows) if int(r["EndNs"]) < int(r["BeginNs"])]
    assert negative == [8] and p.kernels.loc[8, "duration_ns"] == -756
    foreign = [i for i, r in enumerate(rows)
               if int(r["BeginNs"]) < int(r["DispatchNs"]) or int(r["EndNs"]) > int(r["CompleteNs"])]
    assert len(foreign) == 10
    assert any("negative duration" in n and "launch 8" in n for n in p.notes)
    assert any("10 dispatch(es) have BeginNs/EndNs outside DispatchNs..CompleteNs" in n for n in p.notes)
    assert any("wave32" in n for n in p.notes)
    # The full trace has no such rows.
    assert not any("negative" in n or "clock" in n for n in read_cached("v1_mi250x_laplacian/results.csv").notes)


def test_counter_mode_results_csv(roc, read_cached):
    rel = "v1_mi300a_vecadd/output_vec_add_gpu.csv"
    (row,) = rows_of(roc / rel)
    p = read_cached(rel)
    assert len(p.kernels) == 1 and math.isnan(p.kernels.loc[0, "duration_ns"])
    assert p.kernels.loc[0, "name"] == "vector_add"
    assert p.raw_metrics[0]["GPUBusy"][0] == float(row["GPUBusy"])
    assert p.raw_metrics[0]["Wavefronts"][0] == float(row["Wavefronts"])
    assert p.kernels.loc[0, "grid_size"] == math.ceil(int(row["grd"]) / int(row["wgr"]))


def test_v3_kernel_trace_shape_columns(roc, read_cached):
    rel = "v3_docs_kernel_trace_newer.csv"
    rows = rows_of(roc / rel)
    k = read_cached(rel).kernels
    for r, got in zip(rows, k.to_dict("records")):
        blocks = [math.ceil(int(r[f"Grid_Size_{d}"]) / int(r[f"Workgroup_Size_{d}"])) for d in "XYZ"]
        assert got["grid"] == "({}, {}, {})".format(*blocks)
        assert got["block_size"] == int(r["Workgroup_Size_X"]) * int(r["Workgroup_Size_Y"]) * int(r["Workgroup_Size_Z"])
        assert got["stream"] == int(r["Queue_Id"]) and got["device"] == int(r["Agent_Id"])
        assert got["correlation_id"] == int(r["Correlation_Id"])


# ---------------------------------------------------------------- stats, API traces, counters, stdout

STATS = {"v1_mi250x_laplacian/results.stats.csv": "kernel_stats",
         "v1_mi300a_vecadd/results.stats.csv": "kernel_stats",
         "v1_mi300a_vecadd/results.copy_stats.csv": "copy_stats",
         "v1_mi300a_vecadd/results.hip_stats.csv": "hip_api_stats",
         "v1_old_rome_omp/results.copy_stats.csv": "copy_stats",
         "v1_old_rome_omp/results.hsa_stats.csv": "hsa_api_stats",
         "v1_old_rome_omp/results.stats.csv": "kernel_stats",
         "v3_docs_hip_api_stats.csv": "hip_api_stats"}


@pytest.mark.parametrize("rel", sorted(STATS))
def test_stats_files_are_summaries_equal_to_the_csv(roc, read_cached, rel):
    rows = rows_of(roc / rel)
    p = read_cached(rel)
    assert p.kernels.empty and list(p.summaries) == [STATS[rel]]
    table = p.summaries[STATS[rel]]
    assert len(table) == len(rows)
    for r, got in zip(rows, table.to_dict("records")):
        assert got["name"] == r["Name"] and got["calls"] == int(r["Calls"])
        assert got["total_ns"] == float(r["TotalDurationNs"]) and same(num(r["Percentage"]), got["pct"])
        if "MinNs" in r:
            assert got["min_ns"] == float(r["MinNs"]) and got["max_ns"] == float(r["MaxNs"])


def test_kernel_top_file(roc, read_cached):
    rel = "rocprof-compute_bmm1_mi300x/pmc_kernel_top.csv"
    rows = rows_of(roc / rel)
    t = read_cached(rel).summaries["kernel_stats"]
    assert [(r["Kernel_Name"], int(r["Count"]), float(r["Sum(ns)"])) for r in rows] == \
        list(zip(t["name"], t["calls"], t["total_ns"]))


def test_v2_api_trace(roc, read_cached):
    rel = "v2_hip_api_trace_hiptrace.csv"
    rows = rows_of(roc / rel)  # the blank line after the header is skipped
    p = read_cached(rel)
    calls = p.summaries["hip_api_trace"]
    assert len(calls) == len(rows) == 426
    assert list(calls["duration_ns"]) == [float(int(r["End_Timestamp"]) - int(r["Start_Timestamp"])) for r in rows]
    per = defaultdict(lambda: [0, 0])
    for r in rows:
        per[r["Function"]][0] += 1
        per[r["Function"]][1] += int(r["End_Timestamp"]) - int(r["Start_Timestamp"])
    stats = p.summaries["hip_api_stats"]
    assert {r["name"]: [r["calls"], r["total_ns"]] for r in stats.to_dict("records")} == {k: v for k, v in per.items()}


def test_v2_cli_stdout(roc, read_cached):
    rel = "v2_cli_stdout_golden_hip_vectoradd.txt"
    text = (roc / rel).read_text()
    begin = int(re.search(r"Begin_Timestamp\((\d+)\)", text).group(1))
    end = int(re.search(r"End_Timestamp\((\d+)\)", text).group(1))
    p = read_cached(rel)
    k = p.kernels
    assert len(k) == 1 and k.loc[0, "name"] == "vectoradd_float" and k.loc[0, "duration_ns"] == end - begin
    assert k.loc[0, "device"] == 4 and k.loc[0, "grid_size"] == 1048576 / 256
    assert p.raw_metrics[0]["GRBM_COUNT"][0] == 40539


@pytest.mark.parametrize("rel", ["v3_docs_counter_collection_newer.csv", "v3_docs_counter_collection_older.csv"])
def test_v3_counter_collection_long_form(roc, read_cached, rel):
    rows = rows_of(roc / rel)
    p = read_cached(rel)
    dispatches = list(dict.fromkeys(r["Dispatch_Id"] for r in rows))
    assert len(p.kernels) == len(dispatches)
    long = p.summaries["counters"]
    assert list(zip(long["counter"], long["value"])) == [(r["Counter_Name"], float(r["Counter_Value"])) for r in rows]
    for i, d in enumerate(dispatches):
        mine = [r for r in rows if r["Dispatch_Id"] == d]
        assert p.raw_metrics[i]["SQ_WAVES"][0] == sum(float(r["Counter_Value"]) for r in mine)
        assert p.kernels.loc[i, "registers_per_thread"] == int(mine[0]["VGPR_Count"])
        assert p.kernels.loc[i, "shared_mem_bytes"] == int(mine[0]["LDS_Block_Size"])


# ---------------------------------------------------------------- JSON and SQLite

@pytest.mark.parametrize("rel", ["v1_mi300a_vecadd/results.json", "v1_old_rome_omp/results.json"])
def test_v1_json_against_the_json_module(roc, read_cached, rel):
    doc = json.loads((roc / rel).read_text())
    lanes = {str(e["pid"]): e["args"]["name"] for e in doc["traceEvents"] if e.get("ph") == "M"}
    gpu = [e["args"] for e in doc["traceEvents"]
           if e.get("ph") == "X" and lanes.get(str(e["pid"]), "").startswith("GPU")]
    copies = [e for e in doc["traceEvents"] if e.get("ph") == "X" and lanes.get(str(e["pid"])) == "COPY"]
    p = read_cached(rel)
    assert list(p.kernels["duration_ns"]) == [float(int(a["EndNs"]) - int(a["BeginNs"])) for a in gpu]
    assert list(p.kernels["demangled_name"]) == [SUFFIX.sub("", a.get("KernelName", a.get("Name"))) for a in gpu]
    if copies:
        assert list(p.summaries["memory_copies"]["duration_ns"]) == [
            float(int(e["args"]["EndNs"]) - int(e["args"]["BeginNs"])) for e in copies]
    if not gpu:
        assert any("no kernel dispatch events" in n for n in p.notes)


def test_v1_results_db_against_sqlite(roc, read_cached):
    rel = "v1_mi300a_vecadd/results.db"
    conn = sqlite3.connect(f"file:{roc / rel}?mode=ro", uri=True)
    ops = conn.execute('SELECT Name, BeginNs, EndNs, "dev-id" FROM OPS').fetchall()
    copies = conn.execute("SELECT EndNs - BeginNs FROM COPY").fetchall()
    hip = conn.execute("SELECT Name, EndNs - BeginNs FROM HIP").fetchall()
    conn.close()
    p = read_cached(rel)
    assert [(n, float(e - b), float(d)) for n, b, e, d in ops] == list(
        zip(p.kernels["demangled_name"], p.kernels["duration_ns"], p.kernels["device"]))
    assert list(p.summaries["memory_copies"]["duration_ns"]) == [float(d) for (d,) in copies]
    assert len(p.summaries["hip_api_trace"]) == len(hip) == 13
    stats = p.summaries["hip_api_stats"].set_index("name")
    assert stats.loc["hipMalloc", "calls"] == sum(1 for n, _ in hip if n == "hipMalloc")
    assert stats.loc["hipMemcpy", "total_ns"] == sum(d for n, d in hip if n == "hipMemcpy")


def test_rocpd_against_its_base_tables(roc, read_cached):
    """Kernels from the raw rocpd_kernel_dispatch table (not the views the reader uses)."""
    rel = "v3_rocpd_mi300x_ck_bmm_results.db"
    conn = sqlite3.connect(f"file:{roc / rel}?mode=ro", uri=True)
    rows = conn.execute(
        "SELECT S.display_name, K.start, K.\"end\", K.workgroup_size_x, K.grid_size_x, K.grid_size_y, "
        "S.arch_vgpr_count + S.accum_vgpr_count, K.group_segment_size FROM rocpd_kernel_dispatch K "
        "JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id ORDER BY K.start, K.id").fetchall()
    conn.close()
    p = read_cached(rel)
    k = p.kernels
    assert len(k) == len(rows) == 151
    assert list(k["duration_ns"]) == [float(e - s) for _, s, e, *_ in rows]
    assert list(k["registers_per_thread"]) == [float(r[6]) for r in rows]
    assert list(k["shared_mem_bytes"]) == [float(r[7]) for r in rows]
    assert list(k["grid_size"]) == [math.ceil(gx / wx) * gy for _, _, _, wx, gx, gy, *_ in rows]
    per = defaultdict(lambda: [0, 0])
    for name, s, e, *_ in rows:
        per[name][0] += 1
        per[name][1] += e - s
    stats = p.summaries["kernel_stats"]
    assert {r["name"]: [r["calls"], r["total_ns"]] for r in stats.to_dict("records")} == per
    assert sorted(v[0] for v in per.values()) == [1, 150]
    dev = p.device(0)
    assert dev.name == "AMD Instinct MI300X" and dev.sm_count == 304 and dev.architecture == "gfx942"
    assert dev.peaks["bytes_per_s_dram"].source == "datasheet" and "MI300X" in dev.peaks["bytes_per_s_dram"].how
    assert any("ROCm 7.1.1" in n for n in p.notes)
    assert k["mangled_name"].str.startswith("_Z").sum() == 150  # the ck_tile kernels have mangled symbols


# ---------------------------------------------------------------- rocprof-compute workloads, by hand

def pmc_row(folder: Path, dispatch: int) -> dict:
    return next(r for r in rows_of(folder / "pmc_perf.csv") if int(r["Dispatch_ID"]) == dispatch)


def sysinfo(folder: Path) -> dict:
    return rows_of(folder / "sysinfo.csv")[0]


def f(row, name):
    return float(row[name])


def test_mi200_vcopy_dispatch_0_by_hand(roc, read_cached):
    folder = roc / "omniperf_vcopy_mi200"
    p = read_cached("omniperf_vcopy_mi200")
    k = p.kernels.loc[0]
    r, s = pmc_row(folder, 0), sysinfo(folder)
    lv = next(x for x in rows_of(folder / "SQ_LEVEL_WAVES.csv") if x["Dispatch_ID"] == "0")
    assert (s["gpu_arch"], s["cu_per_gpu"], s["max_waves_per_cu"], s["num_xcd"]) == ("gfx90a", "104", "32", "1")
    # Duration: 1411551767656192 - 1411551767635712 = 20480 ns.
    dur = int(r["End_Timestamp"]) - int(r["Start_Timestamp"])
    assert dur == 20480 and k["duration_ns"] == dur
    # Wavefront occupancy (SQ_LEVEL_WAVES pass): 44799316 / (27964 / 1) waves over 32 x 104 slots.
    assert (lv["SQ_ACCUM_PREV_HIRES"], lv["GRBM_GUI_ACTIVE"]) == ("44799316", "27964")
    assert k["achieved_occupancy_pct"] == pytest.approx(100 * 44799316 / (27964 / 1) / (32 * 104))
    # L2 hit rate: 72935 / (72935 + 131081).
    hit, miss = f(r, "TCC_HIT_sum"), f(r, "TCC_MISS_sum")
    assert k["l2_hit_rate_pct"] == pytest.approx(100 * hit / (hit + miss))
    to_l2 = sum(f(r, c) for c in ("TCP_TCC_READ_REQ_sum", "TCP_TCC_WRITE_REQ_sum",
                                  "TCP_TCC_ATOMIC_WITH_RET_REQ_sum", "TCP_TCC_ATOMIC_WITHOUT_RET_REQ_sum"))
    l1 = f(r, "TCP_TOTAL_CACHE_ACCESSES_sum")
    assert k["l1_hit_rate_pct"] == pytest.approx(100 - 100 * to_l2 / l1)
    # HBM bytes, MI200: 32 B and 64 B read requests, 64 B and 32 B write requests.
    rd = 32 * f(r, "TCC_EA_RDREQ_32B_sum") + 64 * (f(r, "TCC_EA_RDREQ_sum") - f(r, "TCC_EA_RDREQ_32B_sum"))
    wr = 64 * f(r, "TCC_EA_WRREQ_64B_sum") + 32 * (f(r, "TCC_EA_WRREQ_sum") - f(r, "TCC_EA_WRREQ_64B_sum"))
    assert (k["dram_bytes_read"], k["dram_bytes_write"], k["dram_bytes"]) == (rd, wr, rd + wr)
    # vcopy moves 2 x 1M doubles = 16 MiB: the counters agree to within a few cache lines.
    assert rd + wr == pytest.approx(2 * 1048576 * 8, rel=1e-3)
    assert k["l2_bytes"] == 64 * to_l2 and k["l1_bytes"] == 64 * l1
    assert k["flops"] == 0  # a copy kernel: every VALU / MFMA FLOP counter is 0
    # % of peak (SOL, gfx90a: 64 B lines): HBM vs sysinfo hbm_bw, L2 BW = TCC_REQ x 128 B vs sclk x 64 x channels.
    hbm_pct = 100 * ((rd + wr) / dur) / float(s["hbm_bw"])
    l2_pct = 100 * (f(r, "TCC_REQ_sum") * 128 / dur) / (1700 / 1000 * 64 * 32)
    l1_pct = 100 * (l1 * 64 / dur) / (1700 / 1000 * 64 * 104)
    assert (k["dram_throughput_pct"], k["l2_throughput_pct"], k["l1_throughput_pct"]) == pytest.approx(
        (hbm_pct, l2_pct, l1_pct))
    gui = f(r, "GRBM_GUI_ACTIVE") / 1
    valu = 100 * f(r, "SQ_ACTIVE_INST_VALU") / (gui * 104)
    mfma = 100 * f(r, "SQ_VALU_MFMA_BUSY_CYCLES") / (gui * 104 * 4)
    assert k["sm_throughput_pct"] == pytest.approx(max(valu, mfma))
    assert k["memory_throughput_pct"] == pytest.approx(max(hbm_pct, l2_pct, l1_pct))
    assert k["busiest_memory_unit"] == "DRAM"
    assert k["bound"] == bound_label(k["sm_throughput_pct"], k["memory_throughput_pct"], k["waves_per_sm"])
    assert k["bound"] == "latency"  # 50% of HBM peak and 5% VALU: both under the 60% line
    # Roofs: device 0 of roofline.csv, GB/s and GFLOP/s.
    roof = rows_of(folder / "roofline.csv")[0]
    peaks = p.devices[0].peaks
    assert peaks["bytes_per_s_dram"].value == pytest.approx(float(roof["HBMBw"]) * 1e9)
    assert peaks["flop_per_s_fp64"].value == pytest.approx(float(roof["FP64Flops"]) * 1e9)
    assert peaks["bytes_per_s_dram"].source == "measured" and "roofline.csv" in peaks["bytes_per_s_dram"].how
    assert p.provenance.tool == "omniperf" and p.provenance.tool_version == "2.0.0-RC1"
    assert any("backend rocprofv1" in n for n in p.notes)


def test_mi300x_omniperf_dispatch_0_by_hand(roc, read_cached):
    folder = roc / "omniperf_vcopy_mi300x"
    p = read_cached("omniperf_vcopy_mi300x")
    k = p.kernels.loc[0]
    r, s = pmc_row(folder, 0), sysinfo(folder)
    lv = next(x for x in rows_of(folder / "SQ_LEVEL_WAVES.csv") if x["Dispatch_ID"] == "0")
    assert (s["gpu_arch"], s["cu_per_gpu"], s["num_xcd"]) == ("gfx942", "304", "8")
    # The timestamps were saved rounded ("8.1097E+14"): no duration, so no rates or % of peak.
    assert r["Start_Timestamp"] == "8.1097E+14" and math.isnan(k["duration_ns"])
    assert math.isnan(k["memory_throughput_pct"]) and k["bound"] == "unknown"
    assert any("rounded scientific notation" in n for n in p.notes)
    # Occupancy per XCD: 155189876 / (486977 / 8) waves over 32 x 304 slots.
    acc, gui = f(lv, "SQ_ACCUM_PREV_HIRES"), f(lv, "GRBM_GUI_ACTIVE")
    assert (acc, gui) == (155189876, 486977)
    assert k["achieved_occupancy_pct"] == pytest.approx(100 * acc / (gui / 8) / (32 * 304))
    hit, miss = f(r, "TCC_HIT_sum"), f(r, "TCC_MISS_sum")
    assert k["l2_hit_rate_pct"] == pytest.approx(100 * hit / (hit + miss))
    # HBM bytes, MI300: TCC_BUBBLE_sum counts 128 B reads; EA0 counters.
    rd = (128 * f(r, "TCC_BUBBLE_sum") + 64 * (f(r, "TCC_EA0_RDREQ_sum") - f(r, "TCC_BUBBLE_sum")
                                               - f(r, "TCC_EA0_RDREQ_32B_sum")) + 32 * f(r, "TCC_EA0_RDREQ_32B_sum"))
    wr = 64 * f(r, "TCC_EA0_WRREQ_64B_sum") + 32 * (f(r, "TCC_EA0_WRREQ_sum") - f(r, "TCC_EA0_WRREQ_64B_sum"))
    assert k["dram_bytes"] == rd + wr == pytest.approx(2 * 1048576 * 8, rel=2e-3)
    # MFMA/VALU utilisation needs no duration: GRBM_GUI_ACTIVE cycles per XCD.
    gui_xcd = f(r, "GRBM_GUI_ACTIVE") / 8
    assert k["sm_throughput_pct"] == pytest.approx(max(100 * f(r, "SQ_ACTIVE_INST_VALU") / (gui_xcd * 304),
                                                       100 * f(r, "SQ_VALU_MFMA_BUSY_CYCLES") / (gui_xcd * 304 * 4)))
    # No roofline.csv: roofs from sysinfo with SOL's peak formulas.
    peaks = p.devices[0].peaks
    assert peaks["flop_per_s_fp32"].value == 2100e6 * 304 * 64 * 2
    assert peaks["bytes_per_s_dram"].value == pytest.approx(float(s["hbm_bw"]) * 1e9)
    assert peaks["bytes_per_s_l2"].value == pytest.approx(2100e6 * 128 * 128)
    assert "sysinfo.csv" in peaks["flop_per_s_fp32"].how
    assert p.provenance.tool_version == "2.0.0" and any("backend rocprofv2" in n for n in p.notes)


def test_mi300x_bmm1_matrix_core_kernel_by_hand(roc, read_cached):
    folder = roc / "rocprof-compute_bmm1_mi300x"
    p = read_cached("rocprof-compute_bmm1_mi300x")
    k = p.kernels.loc[2]
    r, s = pmc_row(folder, 2), sysinfo(folder)
    assert k["name"] == "batched_matrix_multiplication_matrix_core_64x64x4<64u, 64u, 8u>"
    dur = f(r, "End_Timestamp") - f(r, "Start_Timestamp")  # mean over passes: fractional ns
    assert k["duration_ns"] == pytest.approx(dur)
    # Occupancy: rocprofv3 merged the SQ_LEVEL_WAVES pass into pmc_perf.csv (SQ_ACCUM_PREV_HIRES_8).
    acc = f(r, "SQ_ACCUM_PREV_HIRES_8")
    assert acc == f(r, "SQ_LEVEL_WAVES") == 487764172
    assert k["achieved_occupancy_pct"] == pytest.approx(100 * acc / (f(r, "GRBM_GUI_ACTIVE") / 8) / (32 * 304))
    # bf16 MFMA: 512 FLOP per MOPS; no VALU float work.
    mops = f(r, "SQ_INSTS_VALU_MFMA_MOPS_BF16")
    assert k["flops_tensor"] == 512 * mops == 2 ** 31  # exactly 2^31 FLOP as the counters give it
    assert k["flops"] == 512 * mops and k["flops_fp32"] == 0
    rd = (128 * f(r, "TCC_BUBBLE_sum") + 64 * (f(r, "TCC_EA0_RDREQ_sum") - f(r, "TCC_BUBBLE_sum")
                                               - f(r, "TCC_EA0_RDREQ_32B_sum")) + 32 * f(r, "TCC_EA0_RDREQ_32B_sum"))
    wr = 64 * f(r, "TCC_EA0_WRREQ_64B_sum") + 32 * (f(r, "TCC_EA0_WRREQ_sum") - f(r, "TCC_EA0_WRREQ_64B_sum"))
    l1 = 64 * f(r, "TCP_TOTAL_CACHE_ACCESSES_sum")
    to_l2 = 64 * sum(f(r, c) for c in ("TCP_TCC_READ_REQ_sum", "TCP_TCC_WRITE_REQ_sum",
                                       "TCP_TCC_ATOMIC_WITH_RET_REQ_sum", "TCP_TCC_ATOMIC_WITHOUT_RET_REQ_sum"))
    # Roofline placement: intensity = FLOPs / bytes per level; roofs from roofline.csv device 0 (bf16 MFMA roof).
    flops = 512 * mops
    assert (k["ai_dram"], k["ai_l2"], k["ai_l1"]) == pytest.approx((flops / (rd + wr), flops / to_l2, flops / l1))
    roof = rows_of(folder / "roofline.csv")[0]
    peak = float(roof["MFMABF16Flops"]) * 1e9
    candidates = {"compute": peak, "dram": flops / (rd + wr) * float(roof["HBMBw"]) * 1e9,
                  "l2": flops / to_l2 * float(roof["L2Bw"]) * 1e9, "l1": flops / l1 * float(roof["L1Bw"]) * 1e9}
    assert k["roofline_precision"] == "tensor" and k["peak_flop_per_s"] == pytest.approx(peak)
    assert k["binding_roof"] == min(candidates, key=candidates.get)
    assert k["attainable_flop_per_s"] == pytest.approx(min(candidates.values()))
    assert k["flop_per_s"] == pytest.approx(flops / (dur / 1e9))
    assert k["roofline_efficiency_pct"] == pytest.approx(100 * k["flop_per_s"] / min(candidates.values()))
    # % of peak with MI300 line sizes (128 B) and HBM peak = max_mclk/1000 x 32 x num_hbm_channels.
    hbm_peak = 1300 / 1000 * 32 * float(s["num_hbm_channels"])
    assert k["dram_throughput_pct"] == pytest.approx(100 * ((rd + wr) / dur) / hbm_peak)
    assert k["l1_throughput_pct"] == pytest.approx(100 * (l1 / 64 * 128 / dur) / (2100 / 1000 * 128 * 304))
    assert k["bound"] == bound_label(k["sm_throughput_pct"], k["memory_throughput_pct"], k["waves_per_sm"])
    assert p.provenance.tool == "rocprof-compute" and p.provenance.tool_version == "3.3.0"
    assert any("backend rocprofv3" in n for n in p.notes)
    assert set(p.summaries) == {"kernel_stats", "pmc_kernel_top", "roofline_benchmark"}


@pytest.mark.parametrize("workload", WORKLOADS)
def test_workload_durations_and_counts(roc, read_cached, workload):
    rows = rows_of(roc / workload / "pmc_perf.csv")
    k = read_cached(workload).kernels
    assert len(k) == len(rows)
    for r, got in zip(rows, k["duration_ns"]):
        if "E" in r["Start_Timestamp"].upper():
            assert math.isnan(got)
        else:
            assert got == pytest.approx(float(r["End_Timestamp"]) - float(r["Start_Timestamp"]))
    names = defaultdict(int)
    for r in rows:
        names[SUFFIX.sub("", r["Kernel_Name"]).strip()] += 1
    assert k["demangled_name"].value_counts().to_dict() == dict(names)


def test_bmm1_counts_against_the_tools_kernel_top(roc, read_cached):
    """pmc_kernel_top.csv (rocprof-compute's own table) has the same dispatch counts as pmc_perf.csv."""
    top = {r["Kernel_Name"]: int(r["Count"]) for r in rows_of(roc / "rocprof-compute_bmm1_mi300x" / "pmc_kernel_top.csv")}
    k = read_cached("rocprof-compute_bmm1_mi300x").kernels
    assert k["demangled_name"].value_counts().to_dict() == top


# ---------------------------------------------------------------- CLI, round trip, comparison

@pytest.mark.parametrize("rel", READABLE)
def test_cli_export_and_load_run(roc, tmp_path, rel):
    assert cli_main(["export", str(roc / rel), "--logdir", str(tmp_path), "--run", "r", "--quiet"]) == 0
    back = tb_hwprof.load_run(tmp_path / "r")
    original = tb_hwprof.read(roc / rel)
    assert len(back.kernels) == len(original.kernels)
    assert back.kernels["duration_ns"].equals(original.kernels["duration_ns"])
    assert list(back.kernels["bound"]) == list(original.kernels["bound"])
    assert set(back.summaries) == set(original.summaries)
    for name, table in original.summaries.items():
        assert len(back.summaries[name]) == len(table)
    assert back.notes == original.notes
    assert back.provenance.source_format == EXPECT[rel]


def test_cli_subprocess_on_a_workload_folder(roc, tmp_path):
    result = subprocess.run([sys.executable, "-m", "tb_hwprof", "export", str(roc / "rocprof-compute_bmm1_mi300x"),
                             "--logdir", str(tmp_path), "--run", "bmm1"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    back = tb_hwprof.load_run(tmp_path / "bmm1")
    assert len(back.kernels) == 301 and back.devices[0].peaks["flop_per_s_tensor"].source == "measured"
    bad = subprocess.run([sys.executable, "-m", "tb_hwprof", "export", str(roc / "v3_mi300a_jacc_results.pftrace"),
                          "--logdir", str(tmp_path), "--run", "pf"], capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "--output-format csv" in bad.stderr


def test_sniff_names(roc):
    assert sniff(roc / "rocprof-compute_bmm1_mi300x") == "rocprof-compute"
    assert sniff(roc / "v3_rocpd_mi300x_ck_bmm_results.db") == "rocprof-db"
    assert sniff(roc / "v1_mi300a_vecadd/results.db") == "rocprof-db"
    assert sniff(roc / "v1_mi250x_laplacian/results.csv") == "rocprof"
    with pytest.raises(InputError, match="is a folder"):
        sniff(roc / "v1_mi250x_laplacian")  # a plain folder of files is not a workload


def test_nvidia_and_amd_runs_compare(samples_dir, read_cached):
    compare = pytest.importorskip("tb_hwprof.analysis.compare", reason="tb_hwprof/analysis/compare.py not there yet")
    nvidia_file = samples_dir / "ncu" / "esmm_a10g_cli_metrics_ncu-csv.csv"
    if not nvidia_file.is_file():
        pytest.skip("no NVIDIA sample")
    nvidia = tb_hwprof.read(nvidia_file)
    amd = read_cached("rocprof-compute_bmm1_mi300x")
    for base, run in ((nvidia, amd), (amd, nvidia), (amd, read_cached("v3_rocpd_mi300x_ck_bmm_results.db"))):
        result = compare.compare_kernels(base.kernels, run.kernels)
        assert isinstance(result, dict)
