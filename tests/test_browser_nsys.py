"""The plugin in a real browser on Nsight Systems runs: Overview (advice, GPU busy), Timeline
(canvas lanes, hover, zoom, pan, 100,000 kernels), Phases (NVTX ranges) and Compare's phases.

Same machinery as tests/test_browser.py (its fixtures and helpers are imported): a real
TensorBoard + headless Chromium.  Expected values come from the exports themselves (plain SQL),
never from the backend.  Screenshots go to test-artifacts/screenshots/.
"""
from __future__ import annotations

import shutil
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from browser_support import export_run as _export, nav_of_run, open_timeline, wait_rows, wait_window
from support_nsys import DLPROF, query

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
KERNEL, RUNTIME, NVTX = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"
NVTX_XSS = "step <img src=x onerror=alert(1)> & </script>"
BIG_KERNELS = 100_000
EXPECTED_RUNS = {"dlprof", "dlprof_twice", "dlprof_xss", "annikola", "big", "ncu"}  # the imported `tensorboard` waits


@pytest.fixture(scope="module")
def sources(tmp_path_factory, samples_dir):
    from bench_nsys_export import grow
    src = samples_dir / DLPROF
    if not src.is_file():
        pytest.skip(f"{DLPROF} not in the samples")
    folder = tmp_path_factory.mktemp("nsys-sources")
    out = {"dlprof": src, "annikola": samples_dir / "nsys/annikola_gtx1050_2024.5.1.sqlite",
           "ncu": samples_dir / "ncu/lakshya_gtx1660s_full_2024.1.1.ncu-rep"}
    out["big"] = folder / "big.sqlite"
    grow(src, out["big"], kernels=BIG_KERNELS, nvtx=20_000)
    n_kernels = query(src, f"SELECT count(*) FROM {KERNEL}")[0][0]
    n_ranges = query(src, f"SELECT count(*) FROM {NVTX} WHERE end IS NOT NULL")[0][0]
    out["dlprof_twice"] = folder / "twice.sqlite"
    grow(src, out["dlprof_twice"], kernels=2 * n_kernels, nvtx=2 * n_ranges)
    out["dlprof_xss"] = folder / "xss.sqlite"
    shutil.copyfile(src, out["dlprof_xss"])
    conn = sqlite3.connect(out["dlprof_xss"])
    conn.execute(f"UPDATE {NVTX} SET text = ? WHERE text = 'aten::conv2d, seq = 0'", (NVTX_XSS,))
    conn.commit()
    conn.close()
    return out


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, sources):
    root = tmp_path_factory.mktemp("browser_nsys") / "logs"
    for run, path in sources.items():
        _export([path], root, run)
    return root


def canvas_box(frame):
    c = frame.locator("canvas[data-role=timeline]")
    return {k: float(c.get_attribute(f"data-{k}")) for k in ("start", "end", "returned", "in-window")}


def manifest_figure(manifest, finding_id, name):
    """A figure's value as the export stored it with the run."""
    [finding] = [f for f in manifest["advice"] if f["id"] == finding_id]
    return finding["figures"][name]["value"]


def test_overview_advice_and_gpu_busy(session, logdir, sources):
    import json
    path = sources["dlprof"]
    manifest = json.loads((logdir / "dlprof/plugins/tb_hwprof/profile.json").read_text())
    session.open()
    frame = session.go("#view=overview&run=dlprof")
    frame.locator("[data-role=advice] .advice-card").first.wait_for()
    cards = frame.locator("[data-role=advice] .advice-card")
    ids = cards.evaluate_all("cs => cs.map(c => c.dataset.adviceId)")
    assert ids == [a["id"] for a in manifest["advice"]] and {"gpu.sync_stalls", "gpu.pageable_copies"} <= set(ids)
    (nbytes,), = query(path, "SELECT sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1 AND srcKind = 0")
    pageable = frame.locator("[data-advice-id='gpu.pageable_copies']")
    assert float(pageable.locator("dd[data-key=bytes]").get_attribute("data-value")) == nbytes
    assert f"({nbytes} bytes)" in pageable.locator("[data-role=evidence]").inner_text()
    assert "pin_memory=True" in pageable.locator("[data-role=remedy]").inner_text()
    # Figures show in their units: the pageable bytes (SQL above) scaled to kB, the share in %.
    figure = pageable.locator("dd[data-key=bytes]")
    assert figure.get_attribute("data-unit") == "bytes" and 1e3 <= nbytes < 1e6
    assert figure.inner_text() == f"{nbytes / 1e3:.3g} KB"
    share = manifest_figure(manifest, "gpu.pageable_copies", "share_of_busy_pct")
    assert pageable.locator("dd[data-key=share_of_busy_pct]").inner_text() == f"{share:.1f} %"
    busy = frame.locator("[data-role=gpu-busy]")
    assert float(busy.get_attribute("data-value")) == pytest.approx(manifest["summary"]["gpu_busy_pct"])
    assert frame.locator("svg[data-role=utilisation]").get_attribute("data-bins") == "200"
    assert frame.locator("table[data-role=idle-gaps] tbody tr").count() == 20
    link = frame.locator("[data-role=trace-info] a[data-role=download-trace]")
    assert "trace?run=dlprof" in link.get_attribute("href")
    assert "ui.perfetto.dev" in frame.locator("[data-role=trace-info]").inner_text()
    status = frame.evaluate("u => fetch(u).then(r => [r.status, r.headers.get('content-type'), "
                            "r.headers.get('content-disposition')])", link.get_attribute("href"))
    assert status == [200, "application/gzip", 'attachment; filename="dlprof.trace.json.gz"']
    session.shot("overview-dlprof")
    # "timeline →" on a gap opens the Timeline around it.
    frame.locator("table[data-role=idle-gaps] tr[data-rank='3'] [data-role=show-gap]").click()
    wait_window(frame, "true")
    assert frame.locator("nav.views button.active").inner_text() == "Timeline"


def test_timeline_lanes_hover_zoom_pan(session, sources):
    path = sources["dlprof"]
    frame = open_timeline(session, "dlprof", "c.dataset.returned === '423'")
    lanes = frame.locator("[data-role=timeline-lanes] .lane-label")
    streams = {r[0] for r in query(path, f"SELECT DISTINCT streamId FROM {KERNEL} UNION SELECT streamId FROM "
                                         f"CUPTI_ACTIVITY_KIND_MEMCPY UNION SELECT streamId FROM CUPTI_ACTIVITY_KIND_MEMSET")}
    kinds = lanes.evaluate_all("ls => ls.map(l => [l.dataset.kind, l.querySelector('.lane-thread').textContent])")
    assert sorted(t for k, t in kinds if k == "stream") == sorted(f"Stream {s}" for s in streams)
    assert [t for k, t in kinds if k == "thread"] == ["python3"]
    session.shot("timeline-dlprof")
    # Zoom onto the longest kernel and hover its middle: the tooltip names it, as text.
    (start, end, name, stream), = query(path, f"""SELECT k.start, k.end, s.value, k.streamId FROM {KERNEL} k
                                                 JOIN StringIds s ON s.id = k.shortName ORDER BY k.end - k.start DESC LIMIT 1""")
    frame.evaluate("h => { location.hash = h; }", f"#view=timeline&run=dlprof&start={start - 20000}&end={end + 20000}")
    wait_window(frame, f"c.dataset.start === '{start - 20000}' && c.dataset.end === '{end + 20000}'")
    box = canvas_box(frame)
    canvas = frame.locator("canvas[data-role=timeline]")
    width = canvas.evaluate("c => c.clientWidth")
    lane = frame.locator(f"[data-role=timeline-lanes] .lane-label[data-kind=stream]:has-text('Stream {stream}')").first
    y = float(lane.get_attribute("data-y")) + 8
    x = ((start + end) / 2 - box["start"]) / (box["end"] - box["start"]) * width
    canvas.hover(position={"x": x, "y": y})
    tip = frame.locator("[data-role=tooltip]")
    tip.wait_for(state="visible")
    assert tip.locator("[data-role=tip-name]").inner_text() == name
    assert f"Stream {stream}" in tip.locator("[data-role=tip-lane]").inner_text()
    assert "kernel" in tip.locator("[data-role=tip-duration]").inner_text()
    session.shot("timeline-dlprof-hover")
    # Wheel zooms in around the cursor (and fetches that window), drag pans, Reset shows everything.
    span = box["end"] - box["start"]
    canvas.hover(position={"x": width / 2, "y": y})
    session.page.mouse.wheel(0, -300)
    wait_window(frame, f"(c.dataset.end - c.dataset.start) < {span * 0.9}")
    before = canvas_box(frame)
    canvas.hover(position={"x": width / 2, "y": y})
    session.page.mouse.down()
    session.page.mouse.move(*_page_xy(canvas, width / 2 + 200, y), steps=5)
    session.page.mouse.up()
    wait_window(frame, f"Number(c.dataset.start) < {before['start']}")
    after = canvas_box(frame)
    assert after["end"] - after["start"] == pytest.approx(before["end"] - before["start"], abs=2)  # rounding only
    frame.click("[data-role=zoom-reset]")
    wait_window(frame, "c.dataset.returned === '423'")


def _page_xy(locator, x, y):
    box = locator.bounding_box()
    return box["x"] + x, box["y"] + y


def test_timeline_at_100k_kernels_stays_fast(session):
    session.open()
    started = time.time()
    frame = session.go("#view=timeline&run=big")
    wait_window(frame, "c.dataset.decimated === '1'", timeout=60000)
    first = time.time() - started
    box = canvas_box(frame)
    assert box["in-window"] >= 2 * BIG_KERNELS and box["returned"] <= 20000
    drawn = int(frame.locator("canvas[data-role=timeline]").get_attribute("data-drawn"))
    assert drawn == box["returned"]
    assert "zoom in for all" in frame.locator("[data-role=timeline-status]").inner_text()
    session.shot("timeline-100k")
    timings = []
    for _ in range(6):
        previous = canvas_box(frame)
        started = time.time()
        frame.click("[data-role=zoom-in]")
        wait_window(frame, f"(c.dataset.end - c.dataset.start) < {(previous['end'] - previous['start']) * 0.6} "
                           f"&& Number(c.dataset['inWindow']) < {previous['in-window']}")
        timings.append(time.time() - started)
    print(f"timeline 100k: first view {first:.2f} s, zoom steps {', '.join(f'{t:.2f}' for t in timings)} s")
    assert max(timings) < 5
    session.shot("timeline-100k-zoomed")


def test_phases_table(session, sources):
    path = sources["dlprof"]
    session.open()
    frame = session.go("#view=phases&run=dlprof")
    expected = query(path, f"SELECT count(DISTINCT text) FROM {NVTX} WHERE eventType = 59")[0][0]
    wait_rows(frame, "phases", min(expected, 200))
    frame.fill("input[data-role=filter]", "aten::cudnn_convolution, seq = 0")
    wait_rows(frame, "phases", 1)
    row = frame.locator("table[data-role=phases] tbody tr[data-row-id]")
    (cpu,), = query(path, f"SELECT end - start FROM {NVTX} WHERE text = 'aten::cudnn_convolution, seq = 0'")
    assert float(row.locator("td[data-col=total_ns]").get_attribute("data-value")) == cpu
    assert row.locator("td[data-col=kernels]").inner_text().strip() == "23"
    (gpu,), = query(path, f"""SELECT sum(k.end - k.start) FROM {NVTX} n JOIN {RUNTIME} r ON r.globalTid = n.globalTid
                              AND r.start >= n.start AND r.start < n.end JOIN {KERNEL} k ON k.correlationId = r.correlationId
                              WHERE n.text = 'aten::cudnn_convolution, seq = 0'""")
    assert float(row.locator("td[data-col=gpu_time_ns]").get_attribute("data-value")) == gpu
    frame.fill("input[data-role=filter]", "")
    wait_rows(frame, "phases", min(expected, 200))
    session.shot("phases-dlprof")


def test_compare_phases(session):
    session.open()
    frame = session.go("#view=compare&base=dlprof&run=dlprof_twice")
    frame.locator("table[data-role=matched-phases] tbody tr").first.wait_for()
    row = frame.locator("table[data-role=matched-phases] tr[data-name='aten::cudnn_convolution, seq = 0']")
    assert row.locator("td[data-col=speedup]").inner_text().strip() == "0.50×"
    assert row.locator("td[data-col=gpu_speedup]").inner_text().strip() == "0.50×"
    session.shot("compare-phases")


def test_nav_shows_the_servers_views_of_each_run(session):
    """The nav is the server's list (GET /runs), and that list is what each run holds: an Nsight
    Compute run has no trace, a trace without NVTX ranges no Phases."""
    session.open()
    views = {run: [name for name, _ in nav_of_run(session, run)] for run in ("ncu", "annikola", "dlprof")}
    assert {"kernels", "roofline", "bottlenecks", "overview"} <= set(views["ncu"])
    assert not {"timeline", "phases", "summaries", "cpu"} & set(views["ncu"])
    assert {"kernels", "overview", "timeline", "summaries"} <= set(views["annikola"]) and "phases" not in views["annikola"]
    assert {"kernels", "overview", "timeline", "phases"} <= set(views["dlprof"]) and "cpu" not in views["dlprof"]
    # A view a run lacks stays in the nav while it is open (from a link), and says why it is empty.
    frame = session.go("#view=phases&run=annikola")
    frame.locator(".error").wait_for()
    assert "no NVTX ranges" in frame.locator(".error").inner_text()
    assert frame.locator("nav.views button.active").get_attribute("data-view") == "phases"


def test_nvtx_names_are_text(session):
    session.open()
    frame = session.go("#view=phases&run=dlprof_xss")
    frame.fill("input[data-role=filter]", "onerror")
    wait_rows(frame, "phases", 1)
    assert frame.locator("table[data-role=phases] td[data-col=name]").inner_text().strip() == NVTX_XSS
    frame = session.go("#view=timeline&run=dlprof_xss")
    wait_window(frame, "c.dataset.returned === '423'")
    assert frame.locator("img").count() == 0 and session.page.locator("img[src=x]").count() == 0
    assert not session.dialogs
