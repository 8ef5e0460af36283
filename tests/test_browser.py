"""The plugin in a real browser: TensorBoard + the tb_hwprof plugin + headless Chromium.

Builds a logdir from real reports, starts `tensorboard`, opens the "HW Profile" tab and
drives the plugin's iframe with Playwright.  Expected values come from the reports
themselves (NVIDIA's ncu_report) and from the model (tb_hwprof.read), not from the backend.
What it needs, and the shared fixtures: tests/browser_support.py, tests/conftest.py.
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest

from browser_support import column, export_run as _export, get_json as _get_json, log_pos as _log_pos, open_roofline, wait_rows

XSS_NAME = "void k<float, 4>(float*) <img src=x onerror=alert(1)>"
V6 = "armleth_t4_series/report_v6_1d_1_per_thread"
BIG = 100_000

# --------------------------------------------------------------------------- expected values

def ncu_durations(ncu_report, path: Path):
    """gpu__time_duration.sum of every launch, in report order, read with NVIDIA's own reader."""
    ctx = ncu_report.load_report(str(path))
    out = []
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            metric = rng.action_by_idx(a)["gpu__time_duration.sum"]
            assert metric.unit() == "ns"
            out.append(float(metric.value()))
    return out


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def reports(samples_dir):
    ncu = samples_dir / "ncu"
    files = {
        "armleth_v1": ncu / "armleth_t4_full_2024.2.1.ncu-rep",
        "lakshya": ncu / "lakshya_gtx1660s_full_2024.1.1.ncu-rep",
        "series": sorted((ncu / "armleth_t4_series").glob("*.ncu-rep")),
    }
    # Optional, for screenshots only: 4 kernels with different bound labels and a 5-roof roofline.
    files["esmm"] = ncu / "esmm_a10g_rooflineset_2023.1.1.ncu-rep"
    missing = [str(p) for p in [files["armleth_v1"], files["lakshya"]] if not p.is_file()]
    if missing or not files["series"]:
        pytest.skip(f"samples missing under {ncu}: {missing or 'armleth_t4_series/*.ncu-rep'}")
    return files


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, reports):
    from tb_hwprof.logdir import columns, tables
    root = tmp_path_factory.mktemp("browser") / "logs"
    _export([reports["armleth_v1"]], root, "armleth_v1")
    _export(reports["series"], root, "armleth_t4_series")
    _export([reports["lakshya"]], root, "lakshya")
    # A run whose kernels table was cut short (a crashed copy): the plugin must say so, the rest work.
    _export([reports["armleth_v1"]], root, "broken")
    table = root / "broken" / "plugins" / "tb_hwprof" / "kernels.json.gz"
    table.write_bytes(table.read_bytes()[: max(20, table.stat().st_size // 3)])
    # A kernel name that is also HTML: it must render as text.
    _export([reports["lakshya"]], root, "xss")
    table = root / "xss" / "plugins" / "tb_hwprof" / "kernels.json.gz"
    doc = columns.data_only(tables.read_json_gz(table))  # every column value by value, to edit cells
    for col in ("name", "demangled_name"):
        doc["data"][col] = [XSS_NAME] * doc["rows"]
    tables.write_kernels_gz(table, tables.kernels_from_json(doc))  # the names become one constant
    # The lakshya run as format 1 wrote it (every column value by value): the same cells must show.
    _export([reports["lakshya"]], root, "lakshya_v1")
    assets = root / "lakshya_v1" / "plugins" / "tb_hwprof"
    tables.write_json_gz(assets / "kernels.json.gz", columns.data_only(tables.read_json_gz(assets / "kernels.json.gz")))
    manifest = json.loads((assets / "profile.json").read_text())
    (assets / "profile.json").write_text(json.dumps({**manifest, "format_version": 1}))
    # A run written by a newer tb-hwprof: /runs names its error, the others still work.
    _export([reports["armleth_v1"]], root, "future")
    manifest_path = root / "future" / "plugins" / "tb_hwprof" / "profile.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["format_version"] = 99
    manifest_path.write_text(json.dumps(manifest))
    # 100,000 launches (lakshya's, repeated with varied durations): the table must stay paginated and fast.
    _export([reports["lakshya"]], root, "big")
    assets = root / "big" / "plugins" / "tb_hwprof"
    doc = columns.data_only(tables.read_json_gz(assets / "kernels.json.gz"))
    n = doc["rows"]
    for col in doc["columns"]:
        doc["data"][col] = [doc["data"][col][i % n] for i in range(BIG)]
    doc["data"]["launch_id"] = list(range(BIG))
    doc["data"]["duration_ns"] = [1000.0 + (i * 7919) % BIG for i in range(BIG)]
    doc["rows"] = BIG
    tables.write_kernels_gz(assets / "kernels.json.gz", tables.kernels_from_json(doc))
    manifest = json.loads((assets / "profile.json").read_text())
    manifest["kernel_count"] = BIG
    manifest["inflated_bytes"]["kernels.json.gz"] = tables.inflated_size(assets / "kernels.json.gz")  # the table grew
    (assets / "profile.json").write_text(json.dumps(manifest))
    if reports["esmm"].is_file():
        _export([reports["esmm"]], root, "esmm")
    return root


EXPECTED_RUNS = {"armleth_v1", "lakshya", "lakshya_v1", "broken", "future", "xss", "big", V6}


# --------------------------------------------------------------------------- tests

def test_tab_is_listed_and_opens(session):
    listing = _get_json(f"{session.base}/data/plugins_listing")
    assert "tb_hwprof" in listing and listing["tb_hwprof"]["enabled"], listing.get("tb_hwprof")
    assert listing["tb_hwprof"]["tab_name"] == "HW Profile"
    frame = session.open()
    session.page.get_by_text("HW Profile").first.wait_for(timeout=10000)
    frame.wait_for_selector("table[data-role=runs] tbody tr[data-run]")
    runs = frame.eval_on_selector_all("table[data-role=runs] tbody tr[data-run]", "rs => rs.map(r => r.dataset.run)")
    assert EXPECTED_RUNS <= set(runs)
    row = frame.locator("tr[data-run=lakshya]")
    assert "ncu 2024.1.1" in row.inner_text()
    assert "GTX 1660 SUPER" in row.inner_text()
    assert "lakshya_gtx1660s_full_2024.1.1.ncu-rep" in row.inner_text()
    # The run of a newer format shows its error, in red; clicking a good run still works.
    error = frame.locator("tr[data-run=future] [data-role=run-error]")
    assert "format version 99" in error.inner_text() and "profile.json" in error.inner_text()
    assert error.evaluate("e => getComputedStyle(e).color") == "rgb(201, 42, 42)"
    session.shot("runs")
    frame.click("tr[data-run=lakshya]")
    wait_rows(frame, "kernels", 2)
    assert frame.locator("nav.views button.active").inner_text() == "Kernels"
    frame = session.go("#view=kernels&run=future")
    assert "format version 99" in frame.locator("main .error").inner_text()


def test_kernels_of_lakshya_match_ncu_report(session, reports, ncu_report_module):
    expected = ncu_durations(ncu_report_module, reports["lakshya"])
    assert len(expected) == 2
    session.open()
    frame = session.go("#view=kernels&run=lakshya")
    wait_rows(frame, "kernels", 2)
    ids = [int(v) for v in column(frame, "kernels", "launch_id")]
    durations = [float(v) for v in column(frame, "kernels", "duration_ns")]
    assert ids == [0, 1]
    assert durations == pytest.approx(expected, rel=1e-9)
    # Units in the header, human numbers in the cells: 4.79 ms.
    header = frame.locator("table[data-role=kernels] th[data-col=duration_ns]").inner_text()
    assert "(ms)" in header
    cell = frame.locator("table[data-role=kernels] tr[data-launch-id='0'] td[data-col=duration_ns]")
    assert cell.inner_text().strip() == f"{expected[0] / 1e6:.3g}"
    # Occupancy coloured against guidance (>= 50 % good); missing values are "—", never 0.
    occ = frame.locator("tr[data-launch-id='0'] td[data-col=achieved_occupancy_pct]")
    assert "good" in occ.get_attribute("class")
    assert set(frame.locator("table[data-role=kernels] td[data-missing]").all_inner_texts()) <= {"—"}
    session.shot("kernels")

    # Sorting by duration reorders (desc first, then asc).
    frame.click("table[data-role=kernels] th[data-col=duration_ns]")
    desc = [float(v) for v in column(frame, "kernels", "duration_ns")]
    assert desc == sorted(expected, reverse=True)
    assert [int(v) for v in column(frame, "kernels", "launch_id")] == sorted(range(2), key=lambda i: -expected[i])
    frame.click("table[data-role=kernels] th[data-col=duration_ns]")
    asc = [float(v) for v in column(frame, "kernels", "duration_ns")]
    assert asc == sorted(expected)
    assert "sort=duration_ns%3Aasc" in frame.evaluate("location.hash")

    # Filter box.
    frame.fill("input[data-role=filter]", "no-such-kernel")
    wait_rows(frame, "kernels", 0)
    frame.fill("input[data-role=filter]", "naive")
    wait_rows(frame, "kernels", 2)

    # Grouped by name: one group of 2 calls, total = sum of both.
    frame.check("input[data-role=group-toggle]")
    wait_rows(frame, "kernel-groups", 1)
    assert column(frame, "kernel-groups", "calls") == ["2"]
    assert float(column(frame, "kernel-groups", "total_ns")[0]) == pytest.approx(sum(expected), rel=1e-9)
    session.shot("kernels-grouped")


def test_format_1_kernels_table_shows_the_same_cells(session, logdir):
    """lakshya's table holds constant columns (format 2); the same table written value by value
    (format 1, runs exported before) must show exactly the same cells."""
    assert tables_on_disk(logdir, "lakshya")["constant"]
    assert "constant" not in tables_on_disk(logdir, "lakshya_v1")
    session.open()
    cells = {}
    for run in ("lakshya", "lakshya_v1"):
        frame = session.go(f"#view=kernels&run={run}")
        wait_rows(frame, "kernels", 2)
        cells[run] = frame.eval_on_selector_all(
            "table[data-role=kernels] tbody td", "tds => tds.map(td => [td.dataset.col, td.innerText, td.dataset.value ?? null])")
    assert len(cells["lakshya"]) > 20 and cells["lakshya"] == cells["lakshya_v1"]


def tables_on_disk(logdir: Path, run: str) -> dict:
    from tb_hwprof.logdir import tables
    return tables.read_json_gz(logdir / run / "plugins" / "tb_hwprof" / "kernels.json.gz")


def test_kernel_detail(session, reports, ncu_report_module):
    expected = ncu_durations(ncu_report_module, reports["lakshya"])
    session.open()
    frame = session.go("#view=kernels&run=lakshya")
    wait_rows(frame, "kernels", 2)
    frame.click("table[data-role=kernels] tr[data-launch-id='1']")
    drawer = frame.locator("aside#detail")
    drawer.locator("table[data-role=raw-metrics] tbody tr").first.wait_for()
    assert drawer.get_attribute("data-launch-id") == "1"
    assert "launch=1" in frame.evaluate("location.hash")
    metric = drawer.locator("tr[data-metric='gpu__time_duration.sum'] td[data-value]")
    assert float(metric.get_attribute("data-value")) == pytest.approx(expected[1], rel=1e-9)
    assert "naive_gemm(" in drawer.locator("[data-role=detail-name]").inner_text()
    assert "bound" in drawer.locator("[data-role=bound_reason]").inner_text()
    assert "occupancy" in drawer.locator("[data-role=occupancy_note]").inner_text()
    assert drawer.locator("table[data-role=rules] tbody tr").count() > 0
    total = drawer.locator("table[data-role=raw-metrics] tbody tr").count()
    assert total > 50
    drawer.locator("input[data-role=metric-search]").fill("gpu__time_duration")
    frame.wait_for_function(
        "() => [...document.querySelectorAll('table[data-role=raw-metrics] tbody tr')].filter(r => !r.hidden).length < 10")
    visible = [t for t in drawer.locator("table[data-role=raw-metrics] tbody tr:not([hidden])").all_inner_texts()]
    assert visible and all("gpu__time_duration" in t for t in visible)
    session.shot("kernel-detail")
    frame.click("[data-role=close-detail]")
    assert drawer.is_hidden()


def test_roofline_positions(session, reports):
    import tb_hwprof
    kernels = tb_hwprof.read(reports["lakshya"]).kernels
    points = kernels[(kernels["ai_dram"] > 0) & (kernels["flop_per_s"] > 0)]
    assert len(points) == 2
    frame, svg, box = open_roofline(session, "lakshya", len(points))
    circles = svg.locator("circle")
    assert circles.count() == len(points)  # one circle per kernel point, nothing else drawn as a circle
    for _, k in points.iterrows():
        c = svg.locator(f"circle[data-launch-id='{int(k['launch_id'])}']")
        assert box["x-min"] <= math.log10(k["ai_dram"]) <= box["x-max"]
        assert box["y-min"] <= math.log10(k["flop_per_s"]) <= box["y-max"]
        cx = _log_pos(k["ai_dram"], box["x-min"], box["x-max"], box["plot-left"], box["plot-right"])
        cy = _log_pos(k["flop_per_s"], box["y-min"], box["y-max"], box["plot-bottom"], box["plot-top"])
        assert float(c.get_attribute("cx")) == pytest.approx(cx, abs=1.0)
        assert float(c.get_attribute("cy")) == pytest.approx(cy, abs=1.0)
        assert float(c.get_attribute("data-ai")) == pytest.approx(k["ai_dram"], rel=1e-9)
        assert float(c.get_attribute("data-flops")) == pytest.approx(k["flop_per_s"], rel=1e-9)
    # Roofs: a compute roof per precision present, a DRAM roof; the legend says where peaks come from.
    assert svg.locator("line.compute-roof[data-roof=flop_per_s_fp32]").count() == 1
    assert svg.locator("line.memory-roof[data-roof=bytes_per_s_dram]").count() == 1
    assert svg.locator("path.ridge").count() >= 1
    legend = frame.locator("[data-role=roof-legend]")
    assert "measured" in legend.inner_text()
    assert legend.locator("li[data-source=measured]").count() >= 2
    # Hover: a tooltip with the numbers, as text.
    first = svg.locator("circle").last  # drawn last = on top (the points of lakshya overlap)
    first.hover()
    tip = frame.locator("[data-role=tooltip]")
    tip.wait_for(state="visible")
    tip_text = tip.inner_text()
    for word in ("naive_gemm", "FLOP/byte", "FLOP/s", "ms", "compute"):
        assert word in tip_text
    session.shot("roofline")
    # Click: the kernel detail opens for that launch (picked from the list of the points under the
    # cursor where the two overlap there).
    launch = first.get_attribute("data-launch-id")
    first.click()
    listed = frame.locator(f"[data-role=point-list] button[data-launch-id='{launch}']")
    frame.wait_for_function("() => !document.querySelector('[data-role=point-list]').hidden || !document.querySelector('aside#detail').hidden")
    if listed.count():
        listed.click()
    frame.locator("aside#detail table[data-role=raw-metrics]").wait_for()
    assert frame.locator("aside#detail").get_attribute("data-launch-id") == launch


def test_bottlenecks(session, reports, ncu_report_module):
    durations = ncu_durations(ncu_report_module, reports["lakshya"])
    session.open()
    frame = session.go("#view=bottlenecks&run=lakshya")
    frame.locator("[data-role=bound-bars] .bar-row").first.wait_for()
    assert frame.locator("[data-role=bound-bars] .bar-row[data-bound=compute]").count() == 1
    # One row per kernel: the report's launches are all of one kernel.
    rows = frame.locator("table[data-role=top-kernels] tbody tr")
    assert rows.count() == 1
    assert int(rows.first.locator("td[data-col=launches]").get_attribute("data-value")) == len(durations) == 2
    assert float(rows.first.locator("td[data-col=total_ns]").get_attribute("data-value")) == pytest.approx(sum(durations))
    assert rows.first.get_attribute("data-launch-id") == str(durations.index(max(durations)))
    assert "bound" in rows.first.locator("td[data-col=bound_reason]").inner_text()
    assert "occupancy" in rows.first.locator("[data-col=occupancy_note]").inner_text()
    session.shot("bottlenecks")


def test_compare_speedup(session, reports, ncu_report_module):
    base = sum(ncu_durations(ncu_report_module, reports["armleth_v1"]))
    v6 = next(p for p in reports["series"] if p.name == "report_v6_1d_1_per_thread.ncu-rep")
    run = sum(ncu_durations(ncu_report_module, v6))
    speedup = base / run
    session.open()
    frame = session.go(f"#view=compare&base=armleth_v1&run={V6.replace('/', '%2F')}")
    value = frame.locator("[data-role=speedup]")
    value.wait_for()
    assert value.inner_text().strip() == f"{speedup:.2f}×"
    assert float(value.get_attribute("data-value")) == pytest.approx(speedup, rel=1e-9)
    assert float(frame.locator("[data-role=base_ns]").get_attribute("data-value")) == pytest.approx(base, rel=1e-9)
    assert float(frame.locator("[data-role=run_ns]").get_attribute("data-value")) == pytest.approx(run, rel=1e-9)
    # The series renamed its kernel (2D -> 1D): paired as the only kernel left on each side, and said so.
    row = frame.locator("table[data-role=matched] tbody tr")
    assert row.count() == 1 and row.locator("td[data-col=paired_by]").inner_text().strip() == "only-one-left"
    assert "matrix_addition2D" in row.inner_text() and "matrix_addition1D" in row.inner_text()
    assert "no kernel name in common" in frame.locator("[data-role=warnings]").inner_text()
    session.shot("compare")

    # The same kernel in both runs (v1 vs v2, both matrix_addition2D): one matched row with its ratio and deltas.
    v2 = next(p for p in reports["series"] if p.name == "report_v2.ncu-rep")
    run_v2 = sum(ncu_durations(ncu_report_module, v2))
    frame = session.go("#view=compare&base=armleth_v1&run=armleth_t4_series%2Freport_v2")
    frame.wait_for_function("() => document.querySelectorAll('table[data-role=matched] tbody tr').length === 1")
    row = frame.locator("table[data-role=matched] tbody tr")
    assert "matrix_addition2D" in row.locator("td").first.inner_text()
    ratio = row.locator("td[data-col=speedup]")
    assert float(ratio.get_attribute("data-value")) == pytest.approx(base / run_v2, rel=1e-9)
    assert ratio.inner_text().strip() == f"{base / run_v2:.2f}×"
    assert "slower" in ratio.get_attribute("class")
    delta = row.locator("td[data-col=sm_throughput_pct]")
    text = delta.inner_text().strip()
    assert text == "—" or text[0] in "+−±"
    assert frame.locator("[data-role=speedup]").inner_text().strip() == f"{base / run_v2:.2f}×"
    session.shot("compare-matched")

    # Two programs on two GPUs (T4, GTX 1660 SUPER): said right above the totals, speed-up not coloured.
    frame = session.go("#view=compare&base=armleth_v1&run=lakshya")
    frame.locator("[data-role=warnings] + [data-role=totals]").wait_for()
    assert "different GPUs" in frame.locator("[data-role=warnings]").inner_text()
    classes = frame.locator(".stat.speedup").get_attribute("class")
    assert "not-comparable" in classes and "faster" not in classes and "slower" not in classes
    session.shot("compare-warnings")


def test_xss_kernel_name_is_text(session):
    session.open()
    frame = session.go("#view=kernels&run=xss")
    wait_rows(frame, "kernels")
    names = frame.locator("table[data-role=kernels] td[data-col=name]").all_inner_texts()
    assert names and all(n.strip() == XSS_NAME for n in names)
    assert frame.locator("table[data-role=kernels] td[data-col=name] .kname").first.get_attribute("title") == XSS_NAME
    assert frame.locator("img").count() == 0
    session.shot("xss-kernels")
    # Everywhere else the name shows up: detail, roofline tooltip, bottlenecks, groups.
    frame.click("table[data-role=kernels] tbody tr[data-row-id]")
    frame.locator("aside#detail [data-role=detail-name]").wait_for()
    assert frame.locator("aside#detail [data-role=detail-name]").inner_text().strip() == XSS_NAME
    frame = session.go("#view=roofline&run=xss")
    frame.locator("svg[data-role=roofline] circle").last.hover()
    frame.locator("[data-role=tooltip]").wait_for(state="visible")
    assert XSS_NAME in frame.locator("[data-role=tooltip]").inner_text()
    frame = session.go("#view=bottlenecks&run=xss")
    frame.locator("table[data-role=top-kernels] tbody tr").first.wait_for()
    assert XSS_NAME in frame.locator("table[data-role=top-kernels]").inner_text()
    frame = session.go("#view=kernels&run=xss&group=1")
    wait_rows(frame, "kernel-groups", 1)
    assert frame.locator("table[data-role=kernel-groups] td[data-col=name]").inner_text().strip() == XSS_NAME
    assert frame.locator("img").count() == 0
    assert session.page.locator("img[src=x]").count() == 0
    assert not session.dialogs


def test_corrupt_run_shows_error_others_work(session):
    session.open()
    frame = session.go("#view=kernels&run=broken")
    error = frame.locator("main .error")
    error.wait_for()
    assert "kernels.json.gz" in error.inner_text()
    assert "422" in error.inner_text()
    session.shot("corrupt-run")
    # Other runs are unaffected: pick one from the run picker.
    frame.select_option("#run-picker", "lakshya")
    wait_rows(frame, "kernels", 2)
    assert frame.locator("main .error").count() == 0
    frame = session.go("#view=roofline&run=broken")
    frame.locator("main .error").wait_for()


def test_state_survives_reload(session):
    session.open()
    frame = session.go("#view=roofline&run=lakshya")
    frame.locator("svg[data-role=roofline] circle").first.wait_for()
    # TensorBoard re-creates the iframe without our hash: the state comes back from localStorage.
    session.page.reload()
    frame = session.frame()
    frame.locator("svg[data-role=roofline] circle").first.wait_for()
    assert frame.locator("nav.views button.active").inner_text() == "Roofline"
    assert frame.locator("#run-picker").input_value() == "lakshya"
    # A shared link (the plugin page with a hash) opens that view directly.
    page = session.page
    page.goto(f"{session.base}/data/plugin_entry.html?name=tb_hwprof#view=compare&base=armleth_v1&run=lakshya")
    page.locator("[data-role=speedup]").wait_for()
    assert page.locator("nav.views button.active").inner_text() == "Compare"


def test_100k_launches_stay_paginated(session):
    session.open()
    frame = session.go("#view=kernels&run=big")
    rows = wait_rows(frame, "kernels", 200, timeout=60000)
    assert rows.count() == 200  # one page in the DOM, not 100,000 rows
    assert "of 100,000 launches" in frame.locator("[data-role=table-info]").inner_text()
    started = time.time()
    frame.click("table[data-role=kernels] th[data-col=duration_ns]")
    top = [float(v) for v in column(frame, "kernels", "duration_ns")]
    assert time.time() - started < 10
    assert top[0] == 1000.0 + BIG - 1 and top == sorted(top, reverse=True)
    ids = [int(v) for v in column(frame, "kernels", "launch_id")]  # launch ids arrive as steps (delta)
    assert top == [1000.0 + (i * 7919) % BIG for i in ids]
    frame.click("[data-role=next-page]")
    assert frame.locator("[data-role=page-no]").inner_text().strip() == "page 2 / 500"
    second = [float(v) for v in column(frame, "kernels", "duration_ns")]
    assert max(second) < min(top)
    frame.fill("input[data-role=filter]", "naive_gemm")
    frame.wait_for_function("() => document.querySelector('[data-role=page-no]').textContent.includes('page 1 /')")
    assert frame.locator("table[data-role=kernels] tbody tr[data-row-id]").count() == 200


def test_screenshots_of_a_varied_run(session):
    """Screenshots (for docs) of a run with several kernels and bound labels."""
    session.open()
    if "esmm" not in {r for r in frame_runs(session)}:
        pytest.skip("esmm_a10g_rooflineset_2023.1.1.ncu-rep not in the samples")
    frame = session.go("#view=kernels&run=esmm")
    wait_rows(frame, "kernels")
    session.shot("kernels-esmm")
    frame = session.go("#view=roofline&run=esmm")
    frame.locator("svg[data-role=roofline] circle").first.wait_for()
    session.shot("roofline-esmm")
    frame = session.go("#view=bottlenecks&run=esmm")
    frame.locator("table[data-role=top-kernels] tbody tr").first.wait_for()
    session.shot("bottlenecks-esmm")


def frame_runs(session):
    return [r["run"] for r in _get_json(f"{session.base}/data/plugin/tb_hwprof/runs")["runs"]]
