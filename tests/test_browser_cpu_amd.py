"""The plugin in a real browser on VTune (CPU hotspots) and AMD (rocprof-compute) runs.

Same machinery as tests/test_browser.py (its fixtures and helpers are imported): a real
TensorBoard + headless Chromium. Expected values come from the raw CSVs (csv module) or the
model (tb_hwprof.read). Screenshots go to test-artifacts/screenshots/.
"""
from __future__ import annotations

import csv
import json
import math

import pytest

from browser_support import column, export_run as _export, log_pos as _log_pos, nav_of_run, open_roofline, wait_rows
from tb_hwprof.logdir import columns, tables

LOOPS, OPENMP, LOOPS_XSS = "vtune_2018_loops", "vtune_2015_openmp", "vtune_2018_loops_renamed"
OPENMP_OLD = "vtune_2015_openmp_before_advice"  # its manifest without "advice", as runs exported before it
BMM1, MI200, NVIDIA = "amd_bmm1_mi300x", "amd_vcopy_mi200", "nvidia_lakshya"
ROCPD = "amd_rocpd_mi300x"
SAME_MI200, SAME_MI300 = "amd_vcopy_mi200_as_naive_gemm", "amd_vcopy_mi300x_as_naive_gemm"
SOURCES = {
    LOOPS: "vtune/amplxe2018_advanced_hotspots_loops.csv", OPENMP: "vtune/amplxe2015_hotspots_openmp.csv",
    BMM1: "rocprof/rocprof-compute_bmm1_mi300x", MI200: "rocprof/omniperf_vcopy_mi200",
    NVIDIA: "ncu/lakshya_gtx1660s_full_2024.1.1.ncu-rep", ROCPD: "rocprof/v3_rocpd_mi300x_ck_bmm_results.db",
}
# A C++ name with every character HTML cares about; it must show as text.
CPU_XSS = "std::vector<int>& operator<<(std::vector<int>&, A<B>&&) <img src=x onerror=alert(1)>"
EXPECTED_RUNS = {*SOURCES, LOOPS_XSS, OPENMP_OLD, SAME_MI200, SAME_MI300}  # what the imported `tensorboard` waits for


def _rewrite(run_dir, filename, edit):
    path = run_dir / "plugins" / "tb_hwprof" / filename
    doc = columns.data_only(tables.read_json_gz(path))  # every column value by value, to edit cells
    edit(doc)
    tables.write_json_gz(path, doc)


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir, ncu_report_module):
    import tb_hwprof
    from tb_hwprof.logdir.writer import write_run
    root = tmp_path_factory.mktemp("browser_cpu_amd") / "logs"
    for run, rel in SOURCES.items():
        _export([samples_dir / rel], root, run)
    # The loops report with its first row renamed to a name full of <, > and &.
    _export([samples_dir / SOURCES[LOOPS]], root, LOOPS_XSS)
    _rewrite(root / LOOPS_XSS, "summary_cpu_hotspots.json.gz", lambda d: d["data"]["name"].__setitem__(0, CPU_XSS))
    _export([samples_dir / SOURCES[OPENMP]], root, OPENMP_OLD)
    manifest = root / OPENMP_OLD / "plugins/tb_hwprof/profile.json"
    manifest.write_text(json.dumps({k: v for k, v in json.loads(manifest.read_text()).items() if k != "advice"}))
    # AMD vecCopy runs renamed to the NVIDIA kernel (no NVIDIA and AMD sample share a kernel name),
    # with the " [clone .kd]" suffix AMD tools append.
    nvidia = tb_hwprof.read(samples_dir / SOURCES[NVIDIA]).kernels
    for run, rel in ((SAME_MI200, SOURCES[MI200]), (SAME_MI300, "rocprof/omniperf_vcopy_mi300x")):
        # Renamed in the model, so every table of the run (kernels, compare_kernels) holds the name.
        profile = tb_hwprof.read(samples_dir / rel)
        profile.kernels["name"] = nvidia["name"][0]
        profile.kernels["demangled_name"] = nvidia["demangled_name"][0] + " [clone .kd]"
        write_run(profile, tb_hwprof.analyse(profile), root, run)
    return root


@pytest.fixture(scope="module")
def model(read_sample):
    """The model of a run's source report, by run name."""
    return lambda run: read_sample(SOURCES[run])


def csv_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def texts(frame, role, col):
    return frame.eval_on_selector_all(f"table[data-role={role}] tbody tr[data-row-id] td[data-col={col}]",
                                      "cells => cells.map(c => c.textContent)")


# --------------------------------------------------------------------------- CPU hotspots

def test_cpu_hotspots_rows_sorting_and_filter(session, samples_dir):
    rows = sorted(csv_rows(samples_dir / SOURCES[LOOPS]), key=lambda r: -float(r["CPU Time"]))
    session.open()
    frame = session.go(f"#view=cpu&run={LOOPS}")
    wait_rows(frame, "cpu-hotspots", len(rows))
    assert frame.locator("nav.views button[data-view=cpu]").is_visible()
    assert frame.locator("nav.views button.active").inner_text() == "CPU hotspots"
    # Rows: the CSV's, largest self time first; times in seconds as the report has them.
    assert texts(frame, "cpu-hotspots", "name") == [r["Function"] for r in rows]
    assert [float(v) for v in column(frame, "cpu-hotspots", "self_time_s")] == [float(r["CPU Time"]) for r in rows]
    assert texts(frame, "cpu-hotspots", "module") == [r["Module"] for r in rows]
    assert texts(frame, "cpu-hotspots", "source_file") == [r["Source File"] for r in rows]
    assert "Self time (s)" in frame.locator("th[data-col=self_time_s]").inner_text()
    total = sum(float(r["CPU Time"]) for r in rows)
    share = [float(v) for v in column(frame, "cpu-hotspots", "self_pct")]
    assert share == pytest.approx([100 * float(r["CPU Time"]) / total for r in rows])
    assert float(frame.locator("[data-role=cpu-time]").get_attribute("data-value")) == pytest.approx(total)
    # A bottom-up report has no total (with callees) time: the column is not shown (never as 0).
    assert frame.locator("table[data-role=cpu-hotspots] th[data-col=total_time_s]").count() == 0
    assert frame.locator("table[data-role=cpu-hotspots] th[data-col=cpi_rate]").count() == 1
    # Top-down: no such columns in a hotspots report; the legend gives Intel's TMA thresholds.
    legend = frame.locator("[data-role=topdown-legend]")
    assert legend.locator("li[data-label=memory-bound]").get_attribute("data-threshold") == "20"
    assert legend.locator("li[data-label=front-end-bound]").get_attribute("data-threshold") == "15"
    assert "uarch-exploration" in legend.locator("[data-role=topdown-missing]").inner_text()
    assert set(texts(frame, "cpu-hotspots", "topdown_label")) == {"unknown"}
    assert "No finding" in frame.locator("[data-role=advice]").inner_text()
    session.shot("cpu-hotspots-loops")

    # Sorting: self time flips to ascending; source file sorts as text.
    frame.click("table[data-role=cpu-hotspots] th[data-col=self_time_s]")
    asc = [float(v) for v in column(frame, "cpu-hotspots", "self_time_s")]
    assert asc == sorted(float(r["CPU Time"]) for r in rows)
    assert "sort=self_time_s%3Aasc" in frame.evaluate("location.hash")
    frame.click("table[data-role=cpu-hotspots] th[data-col=source_file]")
    assert frame.evaluate("""() => {
        const v = [...document.querySelectorAll('table[data-role=cpu-hotspots] td[data-col=source_file]')].map(c => c.textContent);
        return v.every((x, i) => i === 0 || v[i - 1].localeCompare(x) <= 0);
    }""")
    # Filter over function, module and source file.
    query = "gwce_new"
    hits = [r for r in rows if any(query in r[c].lower() for c in ("Function", "Function (Full)", "Module", "Source File"))]
    frame.fill("input[data-role=filter]", query)
    wait_rows(frame, "cpu-hotspots", len(hits))
    frame.fill("input[data-role=filter]", "itpackv.F")
    wait_rows(frame, "cpu-hotspots", sum(r["Source File"] == "itpackv.F" for r in rows))


def test_cpu_advice_card_on_openmp_spinning(session, samples_dir):
    rows = csv_rows(samples_dir / SOURCES[OPENMP])
    cpu = sum(float(r["CPU Time"]) for r in rows)
    spin = sum(float(r["Spin Time"]) for r in rows)
    session.open()
    frame = session.go(f"#view=cpu&run={OPENMP}")
    wait_rows(frame, "cpu-hotspots", len(rows))
    card = frame.locator("[data-role=advice] .advice-card[data-advice-id='cpu.spin']")
    assert card.get_attribute("data-severity") == "high"
    evidence = card.locator("[data-role=evidence]").inner_text()
    assert f"Spin Time {spin:.2f} s of {cpu:.2f} s CPU time ({100 * spin / cpu:.1f}%" in evidence
    assert "__kmp_barrier (libiomp5.so)" in evidence
    # The finding's figures in their units (seconds to 3 significant digits, % to one decimal).
    assert 1 <= spin < 1000
    assert card.locator("dd[data-key=spin_time_s]").inner_text() == f"{spin:.3g} s"
    assert card.locator("dd[data-key=spin_pct]").inner_text() == f"{100 * spin / cpu:.1f} %"
    assert "OMP_WAIT_POLICY" in card.locator("[data-role=remedy]").inner_text()
    assert float(frame.locator("[data-role=spin-pct]").get_attribute("data-value")) == pytest.approx(100 * spin / cpu)
    barrier = next(r for r in rows if r["Function"] == "__kmp_barrier")
    cell = frame.locator("tr[data-name='__kmp_barrier'] td[data-col=spin_pct]")
    assert float(cell.get_attribute("data-value")) == pytest.approx(100 * float(barrier["Spin Time"]) / float(barrier["CPU Time"]))
    session.shot("cpu-hotspots-openmp-advice")


def test_a_run_exported_before_advice_says_so(session):
    """The plugin never computes advice: where the export stored none, both views say why."""
    session.open()
    for view, wait in (("cpu", lambda f: wait_rows(f, "cpu-hotspots")), ("overview", lambda f: f.locator("[data-role=headline]").wait_for())):
        frame = session.go(f"#view={view}&run={OPENMP_OLD}")
        wait(frame)
        assert frame.locator("[data-role=advice] .advice-card").count() == 0
        assert "export it again" in frame.locator("[data-role=advice-not-stored]").inner_text()


def test_cpu_function_name_with_html_characters_is_text(session):
    session.open()
    frame = session.go(f"#view=cpu&run={LOOPS_XSS}")
    wait_rows(frame, "cpu-hotspots")
    cell = frame.locator("table[data-role=cpu-hotspots] tr[data-name] td[data-col=name]").first
    assert cell.inner_text().strip() == CPU_XSS
    assert frame.locator("table[data-role=cpu-hotspots] tbody tr").first.get_attribute("data-name") == CPU_XSS
    assert frame.locator("img").count() == 0 and session.page.locator("img[src=x]").count() == 0
    frame.fill("input[data-role=filter]", "<int>&")
    wait_rows(frame, "cpu-hotspots", 1)
    session.shot("cpu-hotspots-html-name")
    assert not session.dialogs


def test_vtune_run_opens_cpu_view_and_gpu_runs_hide_it(session):
    frame = session.open()
    frame.wait_for_selector(f"tr[data-run={LOOPS}]")
    frame.click(f"tr[data-run={LOOPS}]")
    wait_rows(frame, "cpu-hotspots")
    assert frame.locator("nav.views button.active").inner_text() == "CPU hotspots"
    frame = session.go(f"#view=kernels&run={BMM1}")
    wait_rows(frame, "kernels")
    assert frame.locator("nav.views button[data-view=cpu]").is_hidden()


def test_nav_shows_the_servers_views_of_each_run(session):
    """The nav is the server's list (GET /runs), and that list is what each run holds: a VTune
    run has CPU hotspots and no kernel views, Nsight Compute and rocprof-compute runs the reverse."""
    session.open()
    views = {run: [name for name, _ in nav_of_run(session, run)] for run in (LOOPS, NVIDIA, BMM1)}
    kernel_views = {"kernels", "roofline", "bottlenecks"}
    assert {"cpu", "overview", "summaries"} <= set(views[LOOPS]) and not kernel_views & set(views[LOOPS])
    for run in (NVIDIA, BMM1):
        assert kernel_views | {"overview"} <= set(views[run]) and "cpu" not in views[run]
    # Summaries: the runs with a profiler's tables (rocprof-compute's kernel_stats); the .ncu-rep has none.
    assert "summaries" in views[BMM1] and "summaries" not in views[NVIDIA]
    # A link naming no view, or one the server does not list, opens the run's first view.
    for link, table, title in ((f"#run={LOOPS}", "cpu-hotspots", "CPU hotspots"),
                               (f"#view=no_such_view&run={NVIDIA}", "kernels", "Kernels")):
        frame = session.go(link)
        wait_rows(frame, table)
        assert frame.locator("nav.views button.active").inner_text() == title


# --------------------------------------------------------------------------- AMD in the GPU views

def circles(frame):
    return frame.eval_on_selector_all("svg[data-role=roofline] circle", """cs => cs.map(c => ({
        launch: c.dataset.launchId, cx: +c.getAttribute('cx'), cy: +c.getAttribute('cy'),
        ai: +c.dataset.ai, flops: +c.dataset.flops}))""")


def test_amd_roofline_positions_and_measured_roofs(session, model):
    kernels = model(BMM1).kernels
    drawn = kernels[(kernels["flops"] / kernels["dram_bytes"] > 0) & (kernels["flops"] / kernels["duration_ns"] > 0)]
    assert len(drawn) == 150  # the matrix-core GEMM launches; fillBufferAligned does no FLOPs
    frame, svg, box = open_roofline(session, BMM1, len(drawn))
    got = {int(c["launch"]): c for c in circles(frame)}
    for _, k in drawn.iterrows():
        ai = k["flops"] / k["dram_bytes"]  # FLOP per HBM byte, from the model's counters
        flops = k["flops"] / (k["duration_ns"] * 1e-9)
        c = got[int(k["launch_id"])]
        assert c["ai"] == pytest.approx(ai, rel=1e-9) and c["flops"] == pytest.approx(flops, rel=1e-9)
        assert c["cx"] == pytest.approx(_log_pos(ai, box["x-min"], box["x-max"], box["plot-left"], box["plot-right"]), abs=1.0)
        assert c["cy"] == pytest.approx(_log_pos(flops, box["y-min"], box["y-max"], box["plot-bottom"], box["plot-top"]), abs=1.0)
    # Roofs from rocprof-compute's roofline.csv: measured, MFMA (tensor) and HBM.
    assert svg.locator("line.compute-roof[data-roof=flop_per_s_tensor][data-source=measured]").count() == 1
    assert svg.locator("line.memory-roof[data-roof=bytes_per_s_dram][data-source=measured]").count() == 1
    legend = frame.locator("[data-role=roof-legend]")
    assert legend.locator("li[data-source=measured]").count() >= 5
    assert "roofline.csv" in legend.locator("li[data-roof=bytes_per_s_dram] .source").get_attribute("title")
    session.shot("roofline-amd-bmm1-mi300x")


def test_amd_copy_kernel_roofline_draws_roofs_and_says_why_no_points(session):
    session.open()
    frame = session.go(f"#view=roofline&run={MI200}")
    frame.locator("svg[data-role=roofline]").wait_for()
    assert frame.locator("svg[data-role=roofline] circle").count() == 0  # vecCopy: 0 FLOP, 0 intensity
    assert "3 launch(es) without a positive" in frame.locator("main").inner_text()
    assert frame.locator("svg line.memory-roof[data-roof=bytes_per_s_dram]").count() == 1
    session.shot("roofline-amd-vcopy-mi200")


def test_amd_datasheet_roofs_are_marked(session):
    session.open()
    frame = session.go(f"#view=roofline&run={ROCPD}")
    legend = frame.locator("[data-role=roof-legend]")
    legend.wait_for()
    assert legend.locator("li[data-source=datasheet]").count() == 4 and legend.locator("li[data-source=measured]").count() == 0
    tag = legend.locator("li[data-roof=bytes_per_s_dram] .source")
    assert tag.inner_text() == "datasheet" and "MI300X data sheet" in tag.get_attribute("title")
    session.shot("roofline-amd-rocpd-datasheet")


def test_amd_kernels_view(session, model):
    kernels = model(BMM1).kernels
    session.open()
    frame = session.go(f"#view=kernels&run={BMM1}")
    wait_rows(frame, "kernels", 200)  # one page of 301
    assert "of 301 launches" in frame.locator("[data-role=table-info]").inner_text()
    durations = [float(v) for v in column(frame, "kernels", "duration_ns")]
    assert durations == kernels["duration_ns"].tolist()[:200]
    assert not any("[clone" in n or ".kd" in n for n in texts(frame, "kernels", "name"))
    session.shot("kernels-amd-bmm1")


def test_compare_nvidia_vs_amd(session, model):
    """Kernels are not paired across vendors, even under one name (compare.py): the warning says so,
    and the kernel of each side is listed as only in its run."""
    nvidia = model(NVIDIA).kernels
    base_ns = nvidia["duration_ns"].sum()
    session.open()
    for run in (SAME_MI200, SAME_MI300):
        frame = session.go(f"#view=compare&base={NVIDIA}&run={run}")
        frame.locator("table[data-role=only-in-run]").wait_for()
        assert frame.locator("[data-role=warnings] [data-id=different-vendors]").count() == 1
        assert frame.locator("table[data-role=matched]").count() == 0
        assert "naive_gemm" in frame.locator("table[data-role=only-in-base]").inner_text()
        assert "naive_gemm" in frame.locator("table[data-role=only-in-run]").inner_text()
    session.shot("compare-nvidia-vs-amd-same-name")
    # Different kernels on each side: nothing matched, both listed, totals compare.
    frame = session.go(f"#view=compare&base={NVIDIA}&run={BMM1}")
    frame.locator("table[data-role=only-in-run]").wait_for()
    assert "naive_gemm" in frame.locator("table[data-role=only-in-base]").inner_text()
    assert "batched_matrix_multiplication" in frame.locator("table[data-role=only-in-run]").inner_text()
    bmm = model(BMM1).kernels["duration_ns"].sum()
    assert float(frame.locator("[data-role=speedup]").get_attribute("data-value")) == pytest.approx(base_ns / bmm)
    assert not math.isnan(bmm)
    session.shot("compare-nvidia-vs-amd")
