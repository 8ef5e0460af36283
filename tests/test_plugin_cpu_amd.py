"""The plugin backend on CPU (VTune) and AMD (rocprof-compute / Omniperf) runs.

Through a real TensorBoard WSGI app (tests/test_plugin_backend.py's App). Expected values come
from the raw files (the csv module) or from the model (tb_hwprof.read), never from the plugin.
"""
import csv
import gzip
import json
import math

import pytest

import tb_hwprof
from tb_hwprof.logdir import columns

from support_plugin import App

V2015, V2018, VSUM = "vtune/amplxe2015_openmp", "vtune/amplxe2018_loops", "vtune/summary_tab"
MI200, MI300, BMM1 = "amd/omniperf_vcopy_mi200", "amd/omniperf_vcopy_mi300x", "amd/rocprof-compute_bmm1_mi300x"
NVIDIA = "nvidia/lakshya_gtx1660s_full"
ROCPD = "amd/rocpd_mi300x_ck_bmm"
# AMD vecCopy runs renamed to the NVIDIA kernel: run name -> the AMD run it was exported as.
SAME_NAME = {"amd/vcopy_mi200_renamed_naive_gemm": MI200, "amd/vcopy_mi300x_renamed_naive_gemm": MI300}
SOURCES = {
    V2015: "vtune/amplxe2015_hotspots_openmp.csv", V2018: "vtune/amplxe2018_advanced_hotspots_loops.csv",
    VSUM: "vtune/vtune_summary_tab.csv", MI200: "rocprof/omniperf_vcopy_mi200",
    MI300: "rocprof/omniperf_vcopy_mi300x", BMM1: "rocprof/rocprof-compute_bmm1_mi300x",
    NVIDIA: "ncu/lakshya_gtx1660s_full_2024.1.1.ncu-rep", ROCPD: "rocprof/v3_rocpd_mi300x_ck_bmm_results.db",
}


def export_renamed(source, logdir, run: str, name: str, demangled: str) -> None:
    """Export `source` with every launch given one kernel name (no NVIDIA and AMD sample share one),
    renamed in the model so every table of the run (kernels, compare_kernels) holds the new name."""
    from tb_hwprof.logdir.writer import write_run
    profile = tb_hwprof.read(source)
    profile.kernels["name"] = name
    profile.kernels["demangled_name"] = demangled
    write_run(profile, tb_hwprof.analyse(profile), logdir, run)


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir, ncu_report_module):
    path = tmp_path_factory.mktemp("cpu_amd") / "logs"
    for run, rel in SOURCES.items():
        tb_hwprof.export(samples_dir / rel, path, run)
    # The AMD vecCopy run renamed to the NVIDIA kernel, with the " [clone .kd]" suffix AMD tools append:
    # Compare must match them by name although their metric sets differ.
    nvidia = tb_hwprof.read(samples_dir / SOURCES[NVIDIA]).kernels
    for run, amd in SAME_NAME.items():
        export_renamed(samples_dir / SOURCES[amd], path, run, nvidia["name"][0], nvidia["demangled_name"][0] + " [clone .kd]")
    return path


@pytest.fixture(scope="module")
def app(logdir):
    return App(logdir)


@pytest.fixture(scope="module")
def model(read_sample):
    """The model of a run's source report, by run name."""
    return lambda run: read_sample(SOURCES[run])


def csv_rows(path, delimiter=","):
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter=delimiter))


def by_self_time(rows, column="CPU Time"):
    """Rows by self time, largest first, report order on ties (the route's order)."""
    return sorted(rows, key=lambda r: -float(r[column]))


# -- /runs and /summary ---------------------------------------------------------------------------
def test_runs_list_tools_and_summary_tables(app, model, logdir):
    runs = {r["run"]: r for r in app.json("/runs")["runs"]}
    assert set(runs) == {*SOURCES, *SAME_NAME}
    for run in SOURCES:
        assert runs[run]["error"] is None
        written = sorted(p.name[len("summary_"):-len(".json.gz")] for p in (logdir / run / "plugins/tb_hwprof").glob("summary_*.json.gz"))
        assert runs[run]["summaries"] == written and set(written) >= set(model(run).summaries)
    assert runs[V2018]["tool"] == "vtune" and runs[V2018]["kernel_count"] == 0
    assert runs[V2018]["summaries"] == ["cpu_hotspots"]
    assert (runs[MI200]["tool"], runs[MI200]["tool_version"]) == ("omniperf", "2.0.0-RC1")
    assert runs[MI200]["devices"] == [{"id": d.id, "name": "MI200", "architecture": "gfx90a"} for d in model(MI200).devices]
    assert runs[BMM1]["tool"] == "rocprof-compute" and runs[BMM1]["devices"][0]["architecture"] == "gfx942"


def test_summary_is_the_exported_table(app, logdir, samples_dir):
    doc = app.json("/summary", run=VSUM, name="vtune_summary")
    on_disk = json.loads(gzip.decompress((logdir / VSUM / "plugins/tb_hwprof/summary_vtune_summary.json.gz").read_bytes()))
    assert doc == {"run": VSUM, "name": "vtune_summary", **on_disk}
    raw = [line.split("\t") for line in (samples_dir / SOURCES[VSUM]).read_text().splitlines()[1:]]
    assert doc["rows"] == len(raw) and doc["data"]["metric"] == [r[1] for r in raw]
    stats = app.json("/summary", run=BMM1, name="pmc_kernel_top")
    top = csv_rows(samples_dir / SOURCES[BMM1] / "pmc_kernel_top.csv")
    assert stats["data"]["calls"] == [float(r["Count"]) for r in top]
    assert stats["data"]["total_ns"] == [float(r["Sum(ns)"]) for r in top]


def test_summary_errors(app):
    error = app.json("/summary", expect=404, run=V2018, name="vtune_summary")["error"]
    assert "cpu_hotspots" in error  # says which tables the run has
    for bad in ("../profile", "Kernel_Stats", "a/b", ""):
        app.json("/summary", expect=400, run=V2018, name=bad)
    app.json("/summary", expect=400, run=V2018)
    app.json("/summary", expect=404, run="no-such-run", name="cpu_hotspots")


# -- /cpu_hotspots ----------------------------------------------------------------------------------
def test_cpu_hotspots_of_amplifier_2015_equal_the_csv(app, samples_dir):
    rows = by_self_time(csv_rows(samples_dir / SOURCES[V2015]))
    doc = app.json("/cpu_hotspots", run=V2015)
    d = doc["data"]
    assert doc["rows"] == len(rows) == 10
    assert d["name"] == [r["Function"] for r in rows] and d["module"] == [r["Module"] for r in rows]
    assert d["self_time_s"] == [float(r["CPU Time"]) for r in rows]
    assert d["spin_time_s"] == [float(r["Spin Time"]) for r in rows]
    assert d["overhead_time_s"] == [float(r["Overhead Time"]) for r in rows]
    total = sum(float(r["CPU Time"]) for r in rows)
    for i, r in enumerate(rows):
        cpu = float(r["CPU Time"])
        assert d["spin_pct"][i] == pytest.approx(100 * float(r["Spin Time"]) / cpu)
        assert d["overhead_pct"][i] == pytest.approx(100 * float(r["Overhead Time"]) / cpu)
        assert d["self_pct"][i] == pytest.approx(100 * cpu / total)
    assert d["total_time_s"] == [None] * 10  # a bottom-up report has no time with callees
    assert d["source_file"] == [""] * 10  # this report has no Source File column
    spin = sum(float(r["Spin Time"]) for r in rows)
    assert doc["totals"]["self_time_s"] == pytest.approx(total)
    assert doc["totals"]["spin_pct"] == pytest.approx(100 * spin / total)
    assert doc["units"]["self_time_s"] == "s" and doc["units"]["spin_pct"] == "%"


def test_cpu_hotspots_of_amplifier_2018_loops_equal_the_csv(app, samples_dir):
    rows = by_self_time(csv_rows(samples_dir / SOURCES[V2018]))
    d = app.json("/cpu_hotspots", run=V2018)["data"]
    assert len(d["name"]) == len(rows) == 148
    assert d["name"] == [r["Function"] for r in rows]
    assert d["self_time_s"] == [float(r["CPU Time"]) for r in rows]
    assert d["effective_time_s"] == [float(r["CPU Time:Effective Time"]) for r in rows]
    assert d["spin_time_s"] == [float(r["CPU Time:Spin Time"]) for r in rows]
    assert d["source_file"] == [r["Source File"] for r in rows]
    assert d["function_full"] == [r["Function (Full)"] for r in rows]
    assert d["is_loop"] == [r["Function"].startswith(("[Loop", "[Outside any loop]")) for r in rows]
    assert d["self_time_s"] == sorted(d["self_time_s"], reverse=True)


def test_topdown_labels_and_tma_thresholds(app):
    doc = app.json("/cpu_hotspots", run=V2018)
    # No real sample carries top-down columns (hotspots, not uarch-exploration): every row "unknown", saying how.
    assert doc["topdown"]["available"] is False
    assert set(doc["data"]["topdown_label"]) == {"unknown"}
    assert all("uarch-exploration" in r for r in doc["data"]["topdown_reason"])
    # Intel TMA thresholds (pmu-tools' toplev): % of pipeline slots.
    limits = {t["label"]: (t["threshold_pct"], t["parent"]) for t in doc["topdown"]["thresholds"]}
    assert limits == {"front-end-bound": (15.0, None), "bad-speculation": (15.0, None),
                      "back-end-bound": (20.0, None), "memory-bound": (20.0, "back-end-bound"),
                      "core-bound": (10.0, "back-end-bound"), "retiring": (70.0, None)}


def test_spin_advice_on_real_openmp_hotspots(app, samples_dir):
    rows = csv_rows(samples_dir / SOURCES[V2015])
    cpu = sum(float(r["CPU Time"]) for r in rows)
    spin = sum(float(r["Spin Time"]) for r in rows)
    top = sorted((r for r in rows if float(r["Spin Time"]) > 0), key=lambda r: -float(r["Spin Time"]))[:3]
    [advice] = app.json("/cpu_hotspots", run=V2015)["advice"]  # the finding stored at export, typed
    assert advice["id"] == "cpu.spin" and advice["severity"] == "high"  # 41% > 2 x the 10% threshold
    figures = advice["figures"]
    assert figures["spin_time_s"] == {"value": pytest.approx(spin), "unit": "s"}
    assert figures["cpu_time_s"] == {"value": pytest.approx(cpu), "unit": "s"}
    assert figures["spin_pct"] == {"value": pytest.approx(100 * spin / cpu), "unit": "%"} and round(100 * spin / cpu) == 41
    assert [(t["name"], t["module"], t["spin_time_s"]) for t in figures["top"]["value"]] == [
        (r["Function"], r["Module"], float(r["Spin Time"])) for r in top]
    assert f"{spin:.2f} s of {cpu:.2f} s" in advice["text"] and "__kmp_barrier" in advice["text"]
    assert "OMP_WAIT_POLICY" in advice["remedy"]  # the spinning is in the OpenMP runtime (libiomp5)


def test_cpu_advice_is_the_stored_advice_never_recomputed(tmp_path, samples_dir):
    """The CPU view serves the manifest's cpu.* findings: a run exported before advice was stored
    gets none (null: the view says so), and a finding edited on disk is served as it is."""
    root = tmp_path / "logs"
    for run in ("old", "edited"):
        tb_hwprof.export(samples_dir / SOURCES[V2015], root, run)
    old, edited = (root / run / "plugins/tb_hwprof/profile.json" for run in ("old", "edited"))
    manifest = json.loads(old.read_text())
    assert [a["id"] for a in manifest["advice"]] == ["cpu.spin"]
    old.write_text(json.dumps({k: v for k, v in manifest.items() if k != "advice"}))
    other = {"id": "gpu.idle", "severity": "low", "title": "not a CPU finding", "text": "t", "remedy": "r", "figures": {}}
    title = {**manifest["advice"][0], "title": "edited on disk"}
    edited.write_text(json.dumps({**manifest, "advice": [title, other]}))
    app = App(root)
    assert app.json("/cpu_hotspots", run="old")["advice"] is None
    assert [(a["id"], a["title"]) for a in app.json("/cpu_hotspots", run="edited")["advice"]] == [("cpu.spin", "edited on disk")]


def test_no_advice_without_evidence(app, samples_dir):
    rows = csv_rows(samples_dir / SOURCES[V2018])
    assert sum(float(r["CPU Time:Spin Time"]) for r in rows) == 0  # nothing spins in this report
    assert app.json("/cpu_hotspots", run=V2018)["advice"] == []


def test_cpu_hotspots_of_a_run_without_them_is_404(app):
    for run in (VSUM, MI200, NVIDIA):
        assert "no CPU hotspots" in app.json("/cpu_hotspots", expect=404, run=run)["error"]


# -- AMD runs in the GPU views ----------------------------------------------------------------------
def roofline_csv_device0(folder):
    return next(r for r in csv_rows(folder / "roofline.csv") if r["device"] == "0")


@pytest.mark.parametrize("run", [MI200, BMM1])
def test_amd_roofline_points_and_measured_roofs(app, model, samples_dir, run):
    kernels = model(run).kernels
    doc = app.json("/roofline", run=run)
    # One point per kernel launch that has FLOP/s and an intensity; positions from the model's FLOPs and bytes.
    placed = kernels[kernels["flops"].notna() & kernels["duration_ns"].notna()]
    assert len(doc["points"]) == len(placed) == len(kernels)
    for p, (_, k) in zip(doc["points"], placed.iterrows()):
        assert p["launch_id"] == k["launch_id"] and p["name"] == k["name"]
        for level in ("dram", "l2", "l1"):
            assert p[f"ai_{level}"] == pytest.approx(k["flops"] / k[f"{level}_bytes"])
        assert p["flop_per_s"] == pytest.approx(k["flops"] / (k["duration_ns"] * 1e-9))
    # Roofs: device 0 of rocprof-compute's measured roofline benchmark (GB/s, GFLOP/s).
    roof = roofline_csv_device0(samples_dir / SOURCES[run])
    [device] = doc["devices"]
    for key, column in (("bytes_per_s_dram", "HBMBw"), ("bytes_per_s_l2", "L2Bw"), ("bytes_per_s_l1", "L1Bw"),
                        ("flop_per_s_fp64", "FP64Flops"), ("flop_per_s_fp32", "FP32Flops")):
        assert device["roofs"][key]["value"] == pytest.approx(float(roof[column]) * 1e9)
        assert device["roofs"][key]["source"] == "measured" and "roofline.csv" in device["roofs"][key]["how"]
    fp64, dram = float(roof["FP64Flops"]), float(roof["HBMBw"])
    assert device["ridge_points"]["fp64"]["dram"] == pytest.approx(fp64 / dram)


def test_mi200_vcopy_is_a_copy_on_the_roofline(app, samples_dir):
    """vecCopy does no FLOPs: three points at intensity 0 (the frontend says why they are not drawn)."""
    points = app.json("/roofline", run=MI200)["points"]
    assert [p["launch_id"] for p in points] == [0, 1, 2]
    assert all(p["flop_per_s"] == 0 and p["ai_dram"] == 0 for p in points)
    pmc = csv_rows(samples_dir / SOURCES[MI200] / "pmc_perf.csv")
    assert [p["duration_ns"] for p in points] == [int(r["End_Timestamp"]) - int(r["Start_Timestamp"]) for r in pmc]


def test_rocpd_roofs_are_datasheet_figures_marked_so(app, model):
    """A kernel trace has no peak measurement: the roofs are the MI300X data sheet's, tagged datasheet."""
    doc = app.json("/roofline", run=ROCPD)
    [device] = doc["devices"]
    assert device["name"] == "AMD Instinct MI300X" and doc["points"] == []  # no FLOP counters in a trace
    assert {r["source"] for r in device["roofs"].values()} == {"datasheet"}
    assert device["roofs"]["bytes_per_s_dram"]["value"] == 5.3e12  # HBM3 5.3 TB/s
    assert device["roofs"]["flop_per_s_fp64"]["value"] == 81.7e12 and "data sheet" in device["roofs"]["flop_per_s_fp64"]["how"]
    assert app.json("/kernels", run=ROCPD)["rows"] == len(model(ROCPD).kernels) == 151


def test_bmm1_matrix_core_points_use_the_mfma_roof(app, model, samples_dir):
    doc = app.json("/roofline", run=BMM1)
    gemm = [p for p in doc["points"] if p["flop_per_s"] > 0]
    assert len(gemm) == 150 and {p["roofline_precision"] for p in gemm} == {"tensor"}
    roof = roofline_csv_device0(samples_dir / SOURCES[BMM1])
    tensor = doc["devices"][0]["roofs"]["flop_per_s_tensor"]
    assert tensor["value"] == pytest.approx(float(roof["MFMABF16Flops"]) * 1e9)  # a bf16 kernel
    assert "MFMABF16Flops" in tensor["how"]


def test_amd_kernels_groups_and_bottlenecks(app, model):
    kernels = model(BMM1).kernels
    doc = columns.data_only(app.json("/kernels", run=BMM1))  # names arrive as a dictionary
    assert doc["rows"] == 301 and doc["data"]["duration_ns"] == kernels["duration_ns"].tolist()
    assert not any("[clone" in n for n in doc["data"]["name"])
    groups = {g["name"]: g for g in app.json("/kernel_groups", run=BMM1)["groups"]}
    for name, launches in kernels.groupby("name"):
        assert groups[name]["calls"] == len(launches)
        assert groups[name]["total_ns"] == pytest.approx(launches["duration_ns"].sum())
    bottlenecks = app.json("/bottlenecks", run=BMM1)
    assert bottlenecks["total_ns"] == pytest.approx(kernels["duration_ns"].sum())
    detail = app.json("/kernel", run=BMM1, launch="2")
    assert detail["row"]["name"] == kernels["name"][2] and len(detail["raw_metrics"]) > 1000


# -- Compare NVIDIA vs AMD -------------------------------------------------------------------------
def test_compare_nvidia_and_amd_without_common_kernels(app, model):
    nvidia, amd = model(NVIDIA).kernels, model(BMM1).kernels
    for base, run, b, r in ((NVIDIA, BMM1, nvidia, amd), (BMM1, NVIDIA, amd, nvidia)):
        doc = app.json("/compare", base=base, run=run)
        assert doc["matched"] == []
        assert doc["totals"]["base_ns"] == pytest.approx(b["duration_ns"].sum())
        assert doc["totals"]["run_ns"] == pytest.approx(r["duration_ns"].sum())
        assert doc["totals"]["speedup"] == pytest.approx(b["duration_ns"].sum() / r["duration_ns"].sum())
        assert {k["name"] for k in doc["only_in_base"]} == set(b["name"])
        assert {k["name"] for k in doc["only_in_run"]} == set(r["name"])


def weighted(frame, column):
    """Duration-weighted mean; the plain mean where no launch has a duration; None where none has the metric."""
    both = frame[column].notna() & frame["duration_ns"].notna()
    if both.any():
        return float((frame[column] * frame["duration_ns"])[both].sum() / frame["duration_ns"][both].sum())
    return float(frame[column].mean()) if frame[column].notna().any() else None


def total(frame):
    return float(frame["duration_ns"].sum()) if frame["duration_ns"].notna().any() else None


@pytest.mark.parametrize("run", sorted(SAME_NAME))
def test_compare_same_kernel_name_across_vendors(app, model, run):
    from tb_hwprof.analysis.compare import DELTA_COLUMNS
    nvidia, amd = model(NVIDIA).kernels, model(SAME_NAME[run]).kernels
    unpaired = app.json("/compare", base=NVIDIA, run=run)
    # Kernels of two vendors are never paired by name alone: the compare says why and lists both.
    assert unpaired["matched"] == [] and len(unpaired["only_in_base"]) == len(unpaired["only_in_run"]) == 1
    assert any("different vendors" in w["text"] for w in unpaired["warnings"])
    # Paired by the user, the delta machinery applies as for any pair.
    [base_only], [run_only] = unpaired["only_in_base"], unpaired["only_in_run"]
    doc = app.json("/compare", base=NVIDIA, run=run, pair=f"{base_only['key']}:{run_only['key']}")
    [m] = doc["matched"]
    assert m["key"] == nvidia["demangled_name"][0]
    assert m["base_ns"] == pytest.approx(total(nvidia))
    assert m["run_ns"] == pytest.approx(total(amd))
    assert m["speedup"] == (pytest.approx(total(nvidia) / total(amd)) if total(amd) else None)
    assert (m["base_bound"], m["run_bound"]) == ("compute", amd["bound"][0])
    for column in DELTA_COLUMNS:
        b, r = weighted(nvidia, column), weighted(amd, column)
        assert m["deltas"][column] == (None if b is None or r is None else pytest.approx(r - b))
    assert doc["only_in_base"] == [] and doc["only_in_run"] == []
    assert doc["totals"]["speedup"] == m["speedup"]


def test_compare_where_the_amd_side_lacks_metrics_and_durations(app):
    """The MI300X Omniperf workload has no HBM counters and spreadsheet-rounded timestamps."""
    unpaired = app.json("/compare", base=NVIDIA, run="amd/vcopy_mi300x_renamed_naive_gemm")
    [base_only], [run_only] = unpaired["only_in_base"], unpaired["only_in_run"]
    doc = app.json("/compare", base=NVIDIA, run="amd/vcopy_mi300x_renamed_naive_gemm",
                   pair=f"{base_only['key']}:{run_only['key']}")
    [m] = doc["matched"]
    assert m["run_ns"] is None and m["speedup"] is None and doc["totals"]["run_ns"] is None
    assert m["deltas"]["dram_throughput_pct"] is None and m["deltas"]["memory_throughput_pct"] is None
    assert m["deltas"]["l2_hit_rate_pct"] is not None and m["deltas"]["achieved_occupancy_pct"] is not None
    assert not any(isinstance(v, float) and math.isnan(v) for v in m["deltas"].values())
