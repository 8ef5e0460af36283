"""The drawer's occupancy chart (frontend/views/occupancy.js) drawn in headless Chromium from the
documents tb_hwprof/analysis/occupancy.py serves for real launches: its points are the server's
curves, which equal the calculator's rules written out again as a plain loop, and report text stays
text.  No TensorBoard: the frontend folder is served as static files."""
from __future__ import annotations

import functools
import http.server
import math
import threading

import pytest

import browser_support  # noqa: F401  (skips the module without Playwright / Chromium)
import tb_hwprof
from tb_hwprof.analysis import occupancy

from conftest import REPO, sample
from support_occupancy import plain_occupancy, plain_waves_per_simd

LAUNCHES = {  # sample -> launch (row) drawn
    "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite": 0,
    "ncu/spyinfer_a10_105launches_2023.2.0.ncu-rep": 0,
    "torch/tracelens_h100_bert_small.json.gz": 3,
    "rocprof/v3_rocpd_mi300x_ck_bmm_results.db": 1,  # CK batched GEMM: VGPRs and LDS limit it
    "rocprof/rocprof-compute_bmm1_mi300x": 2,
}


@pytest.fixture(scope="module")
def frontend_base():
    handler = functools.partial(_Quiet, directory=str(REPO / "frontend"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def page(browser, frontend_base):
    context = browser.new_context()
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{frontend_base}/")
    yield page
    context.close()
    assert not errors, errors


def document_of(samples_dir, name, launch):
    folder = samples_dir / name  # a rocprof-compute workload is a folder
    profile = tb_hwprof.read(folder if folder.is_dir() else sample(samples_dir, name))
    tb_hwprof.analyse(profile)
    row = {k: (v.item() if hasattr(v, "item") else v) for k, v in profile.kernels.iloc[launch].items()}
    raw = profile.raw_metrics[launch] if profile.raw_metrics else None
    return profile, occupancy.kernel_document([d.to_dict() for d in profile.devices], row, raw)


def json_safe(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


DRAW = """async (doc) => {
  const m = await import("/views/occupancy.js");
  const section = m.occupancySection(doc);
  document.body.replaceChildren(section);
  const panels = [...section.querySelectorAll("g.occ-panel")].map((g) => {
    const line = g.querySelector("polyline"), now = g.querySelector("circle.occ-now");
    return {curve: g.dataset.curve, x: line.dataset.x.split(",").map(Number),
            warps: line.dataset.warps.split(",").map(Number),
            points: line.getAttribute("points").split(" ").map((p) => p.split(",").map(Number)),
            now: now ? {x: Number(now.dataset.x), warps: Number(now.dataset.warps),
                        cx: Number(now.getAttribute("cx")), cy: Number(now.getAttribute("cy"))} : null};
  });
  return {panels, panel: m.PANEL, limiter: section.querySelector("[data-role=occ-limiter]").textContent,
          theoretical: section.querySelector("[data-role=occ-theoretical]").textContent,
          images: section.querySelectorAll("img").length};
}"""


@pytest.mark.parametrize("name", LAUNCHES)
def test_chart_draws_the_served_curves(page, samples_dir, name):
    profile, doc = document_of(samples_dir, name, LAUNCHES[name])
    assert doc is not None
    drawn = page.evaluate(DRAW, json_safe(doc))
    curves = doc["curves"]
    assert [p["curve"] for p in drawn["panels"]] == ["registers_per_thread", "shared_mem_bytes", "block_size"]
    frame = drawn["panel"]
    height = frame["height"] - frame["top"] - frame["bottom"]
    for p in drawn["panels"]:
        served = curves[p["curve"]]
        assert p["x"] == served["x"] and p["warps"] == served["warps"]
        # each vertex sits at its warps on the y axis, left to right in x order
        for (px, py), warps in zip(p["points"], served["warps"]):
            assert (1 - (py - frame["top"]) / height) * curves["max_warps_per_sm"] == pytest.approx(warps, abs=0.02)
        assert [pt[0] for pt in p["points"]] == sorted(pt[0] for pt in p["points"])
        # the launch is marked where its own configuration is, at the warps the calculator gives it
        assert p["now"]["x"] == curves["current"][p["curve"]] and p["now"]["warps"] == curves["current"]["warps"]
    assert drawn["limiter"] == doc["limiter"]
    row_theoretical = profile.kernels["theoretical_occupancy_pct"].iat[LAUNCHES[name]]
    assert curves["current"]["occupancy_pct"] == pytest.approx(row_theoretical, rel=1e-12)


def test_served_curves_equal_a_plain_loop(samples_dir):
    """The nsys launch's three sweeps, point by point, against the rules written out again (support_occupancy)."""
    profile, doc = document_of(samples_dir, "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite", 0)
    d = profile.devices[0]
    dev = {"major": int(d.compute_capability.split(".")[0]), "warps": d.max_warps_per_sm, "blocks": d.max_blocks_per_sm,
           "regs": d.registers_per_sm, "smem": d.shared_mem_per_sm}
    now = doc["curves"]["current"]
    for field, curve in ((f, doc["curves"][f]) for f in ("registers_per_thread", "shared_mem_bytes", "block_size")):
        for x, warps in zip(curve["x"], curve["warps"]):
            args = {"block": now["block_size"], "regs": now["registers_per_thread"], "smem": now["shared_mem_bytes"]}
            args[{"registers_per_thread": "regs", "shared_mem_bytes": "smem", "block_size": "block"}[field]] = x
            pct, _, _ = plain_occupancy(dev, **args)
            assert warps == pytest.approx(pct / 100 * dev["warps"], abs=1e-9), (field, x)


def test_report_text_stays_text(page, samples_dir):
    _, doc = document_of(samples_dir, "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite", 0)
    doc = json_safe(doc)
    doc["limiter"] = '<img src=x onerror="alert(1)">'
    doc["source"] = "<b>bold</b>"
    drawn = page.evaluate(DRAW, doc)
    assert drawn["limiter"] == doc["limiter"] and drawn["images"] == 0
    assert "<b>bold</b>" in drawn["theoretical"]


def test_amd_curves_equal_a_plain_loop(samples_dir):
    """The CK GEMM dispatch's sweeps (waves per CU) against LLVM's rules written out again
    (support_occupancy.plain_waves_per_simd), with the dispatch's own accumulation VGPRs kept."""
    import sqlite3
    path = sample(samples_dir, "rocprof/v3_rocpd_mi300x_ck_bmm_results.db")
    profile, doc = document_of(samples_dir, "rocprof/v3_rocpd_mi300x_ck_bmm_results.db", 1)
    assert doc["curves"]["current"]["limiter"] == "VGPRs, LDS"
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    arch, accum, sgpr = conn.execute("SELECT vgpr_count, accum_vgpr_count, sgpr_count FROM kernels ORDER BY start, id "
                                     "LIMIT 1 OFFSET 1").fetchone()
    now = doc["curves"]["current"]
    assert now["registers_per_thread"] == arch + accum
    for field, curve in ((f, doc["curves"][f]) for f in ("registers_per_thread", "shared_mem_bytes", "block_size")):
        for x, waves in zip(curve["x"], curve["warps"]):
            wg, vgprs, lds = now["block_size"], now["registers_per_thread"], now["shared_mem_bytes"]
            if field == "block_size":
                wg = x
            elif field == "shared_mem_bytes":
                lds = x
            else:
                vgprs = x
            # the reader keeps no split or SGPRs for rocpd: the sum, SGPRs not limiting
            per_simd, _ = plain_waves_per_simd(wg, vgprs, 0, 0, lds)
            assert waves == pytest.approx(per_simd * 4, abs=1e-9), (field, x)
