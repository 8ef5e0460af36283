"""What a new user tripped over (issue 17), in a real browser on real exports: a tracer run's kernels
table without all-empty columns and with its bound labelled "not measured (trace)"; the Summaries
view's tables equal to the source files; AMD runs in AMD terms, with grid / work-group sizes from
the rocprof CSV; VTune empty states that name no Nsight Compute; Bottlenecks grouped by kernel;
the Timeline's ruler, NVTX colours, click-to-select and its link to the kernel drawer.

One TensorBoard for the module (tests/browser_support.py). Expected values come from the raw files
(sqlite3, csv, json over the kernels table), never from the plugin's own answers.
"""
from __future__ import annotations

import csv
import json
import re
import sqlite3
from collections import Counter

import pytest

from browser_support import column, export_run, open_timeline, show_window, wait_rows, wait_window
from conftest import get_json
from tb_hwprof.logdir import columns, tables

NSYS, ROCPROF, HIP, VTUNE, NCU = "nsys_dlprof", "rocprof_laplacian", "rocprof_hip_stats", "vtune_loops", "ncu_a10_105"
SOURCES = {
    NSYS: "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite",
    ROCPROF: "rocprof/v1_mi250x_laplacian/results.csv",
    HIP: "rocprof/v3_docs_hip_api_stats.csv",
    VTUNE: "vtune/amplxe2018_advanced_hotspots_loops.csv",
    NCU: "ncu/spyinfer_a10_105launches_2023.2.0.ncu-rep",
}
EXPECTED_RUNS = set(SOURCES)
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
NVIDIA_WORDS = re.compile(r"\b(CUDA|SM|SMs|warps?|Nsight|shared mem)\b")


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir):
    root = tmp_path_factory.mktemp("browser_ui") / "logs"
    for run, rel in SOURCES.items():
        export_run([samples_dir / rel], root, run)
    return root


def kernels_file(logdir, run):
    """The run's kernels table, every column value by value (read from the file, not the plugin)."""
    return columns.data_only(tables.read_json_gz(logdir / run / "plugins/tb_hwprof/kernels.json.gz"))


def query(path, sql):
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return db.execute(sql).fetchall()


def view_text(frame):
    return frame.locator("main#view").inner_text()


# -- 1. tracer runs: no all-empty column, the bound says "not measured (trace)" ---------------------
def test_tracer_kernels_table_hides_empty_columns_and_says_not_measured(session, logdir):
    session.open()
    frame = session.go(f"#view=kernels&run={NSYS}")
    rows = wait_rows(frame, "kernels")
    shown = frame.eval_on_selector_all("table[data-role=kernels] thead th", "ths => ths.map(t => t.dataset.col)")
    data = kernels_file(logdir, NSYS)["data"]
    for col in shown:
        if col == "grid" or col == "block":
            continue
        assert any(v not in (None, "") for v in data[col]), f"column {col} shown though every launch lacks it"
    for col in ("sm_throughput_pct", "achieved_occupancy_pct", "dram_bytes", "flop_per_s", "l1_hit_rate_pct"):
        assert all(v is None for v in data[col]) and col not in shown
    assert {"launch_id", "name", "duration_ns", "bound"} <= set(shown)
    chips = rows.first.locator("td[data-col=bound] .bound-chip")
    assert chips.inner_text() == "not measured (trace)"
    labels = frame.eval_on_selector_all("table[data-role=kernels] td[data-col=bound]", "tds => tds.map(t => t.textContent)")
    assert set(labels) == {"not measured (trace)"}
    note = frame.locator("[data-role=bound-note]").inner_text()
    assert "SpeedOfLight" in note and "Nsight Systems" in note
    assert frame.locator("[data-role=hidden-columns]").is_visible()
    session.shot("ui-kernels-tracer")
    # Grouped by name: the same label.
    frame = session.go(f"#view=kernels&run={NSYS}&group=1")
    wait_rows(frame, "kernel-groups", len(set(data["name"])))
    labels = frame.eval_on_selector_all("table[data-role=kernel-groups] td[data-col=bound]", "tds => tds.map(t => t.textContent)")
    assert set(labels) == {"not measured (trace)"}


def test_counter_run_keeps_its_measured_columns(session, logdir):
    session.open()
    frame = session.go(f"#view=kernels&run={NCU}")
    wait_rows(frame, "kernels")
    shown = set(frame.eval_on_selector_all("table[data-role=kernels] thead th", "ths => ths.map(t => t.dataset.col)"))
    data = kernels_file(logdir, NCU)["data"]
    measured = {c for c in ("sm_throughput_pct", "memory_throughput_pct", "achieved_occupancy_pct", "registers_per_thread")
                if any(v is not None for v in data[c])}
    assert measured and measured <= shown
    assert frame.locator("[data-role=bound-note]").count() == 0


# -- 2. Summaries ---------------------------------------------------------------------------------
def summary_cells(frame, name, col):
    return column(frame, f"summary-{name}", col)


def test_summaries_nsys_cuda_api_sum_equals_the_sqlite(session, samples_dir):
    expected = {name: (calls, total) for name, calls, total in query(
        samples_dir / SOURCES[NSYS], "SELECT s.value, COUNT(*), SUM(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                                     "JOIN StringIds s ON s.id = r.nameId GROUP BY s.value")}
    session.open()
    frame = session.go(f"#view=summaries&run={NSYS}")
    assert frame.locator("nav.views button.active").inner_text() == "Summaries"
    wait_rows(frame, "summary-cuda_api_sum", len(expected))
    got = dict(zip(summary_cells(frame, "cuda_api_sum", "name"),
                   zip(map(int, summary_cells(frame, "cuda_api_sum", "num_calls")),
                       map(int, summary_cells(frame, "cuda_api_sum", "total_ns")))))
    assert got == expected
    header = frame.locator("table[data-role=summary-cuda_api_sum] th[data-col=total_ns]").inner_text()
    assert re.search(r"\((ns|µs|ms|s)\)", header), header
    session.shot("summaries")
    # Sortable: a click on Calls sorts by it.
    frame.click("table[data-role=summary-cuda_api_sum] th[data-col=num_calls]")
    calls = [int(v) for v in summary_cells(frame, "cuda_api_sum", "num_calls")]
    assert calls == sorted(calls, reverse=True)
    # A derived table says which view draws it; it opens on demand.
    derived = frame.locator("details.summary-table[data-table=gpu_activity]")
    assert derived.locator("[data-role=shown-in]").inner_text() == "also drawn in Overview"
    assert not derived.evaluate("d => d.open")
    derived.locator("summary").click()
    wait_rows(frame, "summary-gpu_activity", 1)


def test_summaries_rocprof_hip_api_stats_equal_the_csv(session, samples_dir):
    with open(samples_dir / SOURCES[HIP], newline="") as f:
        expected = {r["Name"]: (int(r["Calls"]), int(r["TotalDurationNs"])) for r in csv.DictReader(f)}
    session.open()
    frame = session.go(f"#view=summaries&run={HIP}")
    wait_rows(frame, "summary-hip_api_stats", len(expected))
    got = dict(zip(summary_cells(frame, "hip_api_stats", "name"),
                   zip(map(int, summary_cells(frame, "hip_api_stats", "calls")),
                       map(int, summary_cells(frame, "hip_api_stats", "total_ns")))))
    assert got == expected
    assert "from rocprofv3" in frame.locator("details.summary-table[data-table=hip_api_stats] summary").inner_text()


# -- 3. vendor terms ------------------------------------------------------------------------------
def test_amd_kernels_in_amd_terms_with_the_csv_grid_and_work_group(session, samples_dir):
    with open(samples_dir / SOURCES[ROCPROF], newline="") as f:
        rows = list(csv.DictReader(f))
    session.open()
    frame = session.go(f"#view=kernels&run={ROCPROF}&sort=launch_id%3Aasc")
    wait_rows(frame, "kernels", 200)
    grid = column(frame, "kernels", "grid")
    block = column(frame, "kernels", "block")
    # rocprof's grd counts work-items; the Grid column counts work-groups (grd / wgr).
    assert [float(v) for v in grid] == [int(r["grd"]) / int(r["wgr"]) for r in rows[:200]]
    assert [float(v) for v in block] == [float(r["wgr"]) for r in rows[:200]]
    headers = frame.locator("table[data-role=kernels] thead").inner_text()
    assert "Work-group" in headers and "Block" not in headers
    text = view_text(frame)
    assert not NVIDIA_WORDS.search(text), NVIDIA_WORDS.search(text)
    assert "rocprof-compute" in frame.locator("[data-role=bound-note]").inner_text()
    assert "CUs" in frame.locator("[data-role=bound-note]").inner_text()


def test_vtune_empty_states_name_no_nsight_compute(session):
    session.open()
    for view in ("bottlenecks", "kernels"):
        frame = session.go(f"#view={view}&run={VTUNE}")
        frame.locator(".view-body").wait_for()
        frame.wait_for_function("() => !document.querySelector('.view-body .loading')")
        text = view_text(frame)
        assert "Nsight" not in text and "SpeedOfLight" not in text, (view, text)


# -- 5. Bottlenecks grouped by kernel -------------------------------------------------------------
def test_bottlenecks_one_row_per_kernel_with_its_launch_count(session, logdir):
    for run in (NCU, NSYS):
        data = kernels_file(logdir, run)["data"]
        counts = Counter(data["name"])
        session.open()
        frame = session.go(f"#view=bottlenecks&run={run}")
        rows = frame.locator("table[data-role=top-kernels] tbody tr")
        rows.first.wait_for()
        shown = frame.eval_on_selector_all("table[data-role=top-kernels] tbody tr",
                                           "trs => trs.map(t => [t.dataset.name, Number(t.querySelector('[data-col=launches]').dataset.value)])")
        assert len(shown) == min(20, len(counts))
        assert all(counts[name] == n for name, n in shown)
    # A row opens its kernel's longest launch.
    durations = {i: d for i, (n, d) in enumerate(zip(data["name"], data["duration_ns"])) if n == shown[0][0]}
    rows.first.click()
    drawer = frame.locator("aside#detail")
    drawer.wait_for()
    frame.wait_for_function("() => document.querySelector('aside#detail').dataset.launchId !== undefined")
    assert durations[int(drawer.get_attribute("data-launch-id"))] == max(durations.values())


# -- 6. Timeline: ruler, NVTX colours, click-to-select and the link to the drawer -----------------
def ruler(frame):
    return frame.eval_on_selector_all("[data-role=timeline-ruler] .tick", "ts => ts.map(t => [Number(t.dataset.ns), t.textContent])")


def lane_y(frame, kind, text):
    lane = frame.locator(f"[data-role=timeline-lanes] .lane-label[data-kind={kind}]:has-text('{text}')").first
    return float(lane.get_attribute("data-y"))


UNITS_NS = {"ns": 1, "µs": 1e3, "ms": 1e6, "s": 1e9}


def test_timeline_ruler_has_units_and_follows_zoom(session):
    frame = open_timeline(session, NSYS)
    before = ruler(frame)
    assert len(before) >= 3
    for (ns_a, a), (ns_b, b) in zip(before, before[1:]):  # labels step as the ticks do, in their unit
        value_a, unit = a.replace(",", "").split(" ")
        value_b, unit_b = b.replace(",", "").split(" ")
        assert unit == unit_b and unit in UNITS_NS
        assert (float(value_b) - float(value_a)) * UNITS_NS[unit] == pytest.approx(ns_b - ns_a, rel=1e-6)
    start = int(frame.locator("canvas[data-role=timeline]").get_attribute("data-start"))
    end = int(frame.locator("canvas[data-role=timeline]").get_attribute("data-end"))
    show_window(frame, NSYS, start + (end - start) // 2, start + (end - start) // 2 + 50_000)  # 50 µs
    after = ruler(frame)
    assert after and [t for _, t in after] != [t for _, t in before]
    assert all(t.endswith(" µs") for _, t in after)
    step = after[1][0] - after[0][0]
    assert 50_000 / 12 <= step <= 50_000 / 4
    session.shot("timeline-ruler")


def test_timeline_nvtx_legend_colour_is_the_slices_colour(session, samples_dir):
    (start, end), = query(samples_dir / SOURCES[NSYS],
                          "SELECT start, end FROM NVTX_EVENTS WHERE end IS NOT NULL ORDER BY end - start DESC LIMIT 1")
    lo, hi = start + (end - start) // 10, end - (end - start) // 10  # the range spans the whole plot
    frame = open_timeline(session, NSYS)
    show_window(frame, NSYS, lo, hi)
    canvas = frame.locator("canvas[data-role=timeline]")
    width = canvas.evaluate("c => c.clientWidth")
    y = lane_y(frame, "thread", "python3")
    canvas.hover(position={"x": width / 2, "y": y + 8})
    tip = frame.locator("[data-role=tooltip]")
    tip.wait_for(state="visible")
    assert "NVTX range" in tip.locator("[data-role=tip-duration]").inner_text()
    name = tip.locator("[data-role=tip-name]").inner_text()
    swatch = frame.locator("[data-role=nvtx-names] .legend-nvtx").filter(has_text=name).locator(".swatch-box")
    legend_rgb = swatch.evaluate("s => getComputedStyle(s).backgroundColor")
    # The slice's pixels on the canvas (the row's lower edge, below the name's glyphs): their most common colour.
    pixels = canvas.evaluate("""(c, y) => { const g = c.getContext('2d'), d = window.devicePixelRatio || 1, out = [];
        for (let k = 1; k < 20; k++) { const p = g.getImageData(Math.round(c.width * k / 20), Math.round((y + 13.5) * d), 1, 1).data;
          out.push(`rgb(${p[0]}, ${p[1]}, ${p[2]})`); } return out; }""", y)
    assert Counter(pixels).most_common(1)[0][0] == legend_rgb


def test_timeline_click_selects_a_kernel_and_opens_its_launch(session, samples_dir, logdir):
    (start, end, name, stream, call_start, call), = query(samples_dir / SOURCES[NSYS], f"""
        SELECT k.start, k.end, s.value, k.streamId, r.start, c.value FROM {KERNEL} k
        JOIN StringIds s ON s.id = k.shortName
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId JOIN StringIds c ON c.id = r.nameId
        ORDER BY k.end - k.start DESC LIMIT 1""")
    data = kernels_file(logdir, NSYS)["data"]
    [launch] = [data["launch_id"][i] for i, s in enumerate(data["start_ns"]) if s == start]
    lo, hi = min(start, call_start) - 20000, end + 20000  # the kernel and the call that launched it
    frame = open_timeline(session, NSYS)
    show_window(frame, NSYS, lo, hi)
    canvas = frame.locator("canvas[data-role=timeline]")
    width = canvas.evaluate("c => c.clientWidth")
    x = ((start + end) / 2 - lo) / (hi - lo) * width
    canvas.click(position={"x": x, "y": lane_y(frame, "stream", f"Stream {stream}") + 8})
    selection = frame.locator("[data-role=timeline-selection]")
    frame.wait_for_function("n => document.querySelector('[data-role=selection-name]')?.textContent === n", arg=name)
    assert selection.get_attribute("data-start") == str(start) and selection.get_attribute("data-cat") == "kernel"
    # Its flow: the API call with the kernel's correlation id, an arrow from it to the kernel.
    flow = frame.locator("[data-role=selection-flow]")
    assert flow.get_attribute("data-partner-start") == str(call_start)
    assert call.startswith(flow.get_attribute("data-partner-name"))
    assert canvas.get_attribute("data-flow") == f"{call_start}->{start}"
    link = frame.locator("[data-role=open-launch]")
    link.wait_for()
    assert link.get_attribute("data-launch-id") == str(launch)
    link.click()
    frame.wait_for_function("l => document.querySelector('aside#detail')?.dataset.launchId === l", arg=str(launch))
    assert frame.locator("aside#detail").is_visible()
    session.shot("timeline-selected-kernel")
    # A click on empty space clears the selection.
    canvas.click(position={"x": 2, "y": canvas.evaluate("c => c.clientHeight") - 2})
    frame.wait_for_function("() => !document.querySelector('[data-role=selection-name]')")


# -- 4. Overview: the busy chart's scale, small shares, the run's own API ---------------------------
def test_overview_busy_chart_has_a_y_scale_and_small_shares_are_not_zero(session, logdir):
    activity = tables.read_json_gz(logdir / NSYS / "plugins/tb_hwprof/summary_gpu_activity.json.gz")
    busy = activity["data"]["busy_pct"][0]
    assert 0 < busy < 0.05
    session.open()
    frame = session.go(f"#view=overview&run={NSYS}")
    ticks = frame.locator("[data-role=spark-y-ticks] span")
    ticks.first.wait_for()
    assert ticks.all_inner_texts() == ["100 %", "75 %", "50 %", "25 %", "0 %"]
    label = frame.locator(".spark-label").first.inner_text()
    assert "(0.0 %)" not in label and f"({float(f'{busy:.2g}'):g} %)" in label
    assert "CUDA API call" in frame.locator("table[data-role=idle-gaps] thead").inner_text()


def test_amd_overview_and_timeline_say_hip(session):
    session.open()
    frame = session.go(f"#view=overview&run={ROCPROF}")
    frame.locator("table[data-role=idle-gaps] thead").wait_for()
    assert "HIP API call" in frame.locator("table[data-role=idle-gaps] thead").inner_text()
    frame = session.go(f"#view=timeline&run={ROCPROF}")
    wait_window(frame, "Number(c.dataset.returned) > 0")
    legend = frame.locator("[data-role=timeline-legend]").inner_text()
    assert "HIP API call" in legend and "CUDA" not in legend and "NVTX" not in legend


def test_vtune_cpu_view_shows_cpi_and_start_address_from_the_csv(session, samples_dir):
    with open(samples_dir / SOURCES[VTUNE], newline="") as f:
        by_address = {r["Start Address"]: r for r in csv.DictReader(f)}
    session.open()
    frame = session.go(f"#view=cpu&run={VTUNE}")
    wait_rows(frame, "cpu-hotspots")
    addresses = column(frame, "cpu-hotspots", "start_address")
    cpi = column(frame, "cpu-hotspots", "cpi_rate")
    names = column(frame, "cpu-hotspots", "name")
    assert len(addresses) == min(200, len(by_address))
    for address, c, name in zip(addresses, cpi, names):
        row = by_address[address]
        assert name == row["Function"]
        assert (float(c) if c is not None else None) == (float(row["CPI Rate"]) if row["CPI Rate"] else None)
