"""Plugin routes for traces (/overview, /phases, /timeline, /trace, /compare phases) through a real
TensorBoard WSGI app, on runs exported from real Nsight Systems exports.  Expected values come from
the exports themselves (plain SQL), never from the plugin."""
import gzip
import json
import sys
import time
from pathlib import Path

import pytest

import tb_hwprof
from tb_hwprof.logdir import metadata

from conftest import sample
from support_nsys import DLPROF, query, sql_gaps
from support_plugin import P, App

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
ANNIKOLA = "nsys/annikola_gtx1050_2024.5.1.sqlite"
KERNEL, RUNTIME, NVTX = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"
BIG_KERNELS = 100_000


@pytest.fixture(scope="module")
def grown(tmp_path_factory, samples_dir):
    """DLProf's export grown to 100,000 kernels (+ their launch calls) and 20,000 NVTX ranges, and
    one with exactly twice its NVTX ranges (for Compare)."""
    from bench_nsys_export import grow
    folder = tmp_path_factory.mktemp("grown")
    src = sample(samples_dir, DLPROF)
    big, twice = folder / "big.sqlite", folder / "twice.sqlite"
    grow(src, big, kernels=BIG_KERNELS, nvtx=20_000)
    n_kernels = query(src, f"SELECT count(*) FROM {KERNEL}")[0][0]
    n_ranges = query(src, f"SELECT count(*) FROM {NVTX} WHERE end IS NOT NULL")[0][0]
    grow(src, twice, kernels=2 * n_kernels, nvtx=2 * n_ranges)
    return {"big": big, "twice": twice}


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir, grown):
    root = tmp_path_factory.mktemp("plugin-nsys") / "logs"
    tb_hwprof.export(sample(samples_dir, DLPROF), root, "dlprof")
    tb_hwprof.export(sample(samples_dir, ANNIKOLA), root, "annikola")
    tb_hwprof.export(sample(samples_dir, "ncu/lakshya_gtx1660s_full_2024.1.1.ncu-rep"), root, "ncu")
    tb_hwprof.export(grown["big"], root, "big")
    tb_hwprof.export(grown["twice"], root, "twice")
    return root


@pytest.fixture(scope="module")
def app(logdir):
    return App(logdir)


def test_overview_of_a_trace(app, logdir, samples_dir):
    path = sample(samples_dir, DLPROF)
    doc = app.json("/overview", run="dlprof")
    assert doc["has_trace"] is True
    gaps, (lo, hi) = sql_gaps(path)
    (device,) = doc["devices"]
    assert device["name"] == "NVIDIA GeForce RTX 2070 SUPER"
    assert (device["span_ns"], device["idle_ns"]) == (hi - lo, sum(e - s for s, e in gaps))
    assert device["busy_ns"] == hi - lo - device["idle_ns"]
    longest = sorted(gaps, key=lambda g: (-(g[1] - g[0]), g[0]))[:20]
    assert [(g["start_ns"], g["end_ns"]) for g in doc["idle_gaps"]] == longest
    util = doc["utilisation"]
    assert len(util["busy_pct"]) == 200 and util["bin_start_ns"][0] == lo and util["bin_end_ns"][-1] == hi
    manifest = json.loads((logdir / "dlprof/plugins/tb_hwprof/profile.json").read_text())
    assert doc["advice"] == manifest["advice"] and {a["id"] for a in doc["advice"]} >= {"gpu.sync_stalls"}
    assert doc["headline"]["kernel_launches"] == 46 and doc["timeline"]["kept_events"] == 423
    assert any(a["activity"] == "all idle time" for a in doc["idle_attribution"])


def test_overview_of_a_counter_profile_and_of_an_older_run(app, logdir):
    doc = app.json("/overview", run="ncu")
    assert doc["has_trace"] is False and doc["devices"] == [] and doc["timeline"] is None
    assert doc["headline"]["kernel_launches"] == 2


def legacy_advice(finding: dict) -> dict:
    """A finding as runs exported before findings were typed hold it (evidence, suggestion, values)."""
    return {"id": finding["id"], "severity": finding["severity"], "title": finding["title"],
            "evidence": finding["text"], "suggestion": finding["remedy"],
            "values": {name: f["value"] for name, f in finding["figures"].items()}}


def test_overview_serves_stored_advice_only(tmp_path, samples_dir):
    """Advice is never computed by the plugin: a run exported before advice was stored shows none
    (null), and one stored in the older shape is served typed, units from the figures' names."""
    root = tmp_path / "logs"
    for run in ("none", "legacy"):
        tb_hwprof.export(sample(samples_dir, DLPROF), root, run)
    path = {run: root / run / "plugins/tb_hwprof/profile.json" for run in ("none", "legacy")}
    manifest = json.loads(path["none"].read_text())
    typed = manifest["advice"]
    stall = next(f for f in typed if f["id"] == "gpu.sync_stalls")
    assert stall["figures"]["stalled_ns"]["unit"] == "ns" and stall["figures"]["share_pct"]["unit"] == "%"
    path["none"].write_text(json.dumps({k: v for k, v in manifest.items() if k != "advice"}))
    path["legacy"].write_text(json.dumps({**manifest, "advice": [legacy_advice(f) for f in typed]}))
    app = App(root)
    assert app.json("/overview", run="none")["advice"] is None
    served = app.json("/overview", run="legacy")["advice"]
    assert [(f["id"], f["text"], f["remedy"]) for f in served] == [(f["id"], f["text"], f["remedy"]) for f in typed]
    [legacy_stall] = [f for f in served if f["id"] == "gpu.sync_stalls"]
    assert legacy_stall["figures"]["stalled_ns"] == stall["figures"]["stalled_ns"]
    assert legacy_stall["figures"]["share_pct"] == stall["figures"]["share_pct"]
    assert legacy_stall["figures"]["top"] == {"value": stall["figures"]["top"]["value"], "unit": ""}


def test_phases(app, samples_dir):
    path = sample(samples_dir, DLPROF)
    doc = app.json("/phases", run="dlprof")
    assert doc["source"] == "nvtx_phases"
    assert doc["columns"][:4] == ["name", "domain", "style", "instances"]
    rows = {n: i for i, n in enumerate(doc["data"]["name"])}
    expected = query(path, f"SELECT text, count(*), sum(end - start) FROM {NVTX} WHERE eventType = 59 GROUP BY text")
    assert doc["rows"] == len(expected) == len(rows)
    for text, count, total in expected:
        i = rows[text]
        assert (doc["data"]["instances"][i], doc["data"]["total_ns"][i]) == (count, total)
    conv = rows["aten::cudnn_convolution, seq = 0"]
    assert doc["data"]["kernels"][conv] == 23 and doc["units"]["gpu_time_ns"] == "ns"
    assert doc["data"]["total_ns"] == sorted(doc["data"]["total_ns"], reverse=True)
    error = app.json("/phases", expect=404, run="annikola")["error"]
    assert "no NVTX ranges" in error


def test_timeline_whole_capture(app, samples_dir):
    path = sample(samples_dir, DLPROF)
    doc = app.json("/timeline", run="dlprof")
    assert doc["decimated"] is False and doc["returned"] == doc["in_window"] == 423
    ev, lanes = doc["events"], doc["lanes"]
    assert ev["start_ns"] == sorted(ev["start_ns"]) and set(ev["merged"]) == {1}
    kernel = doc["categories"].index("kernel")
    got = sorted((s, e, lanes[l]["thread"]) for s, e, l, c in zip(ev["start_ns"], ev["end_ns"], ev["lane"], ev["cat"])
                 if c == kernel)
    assert got == sorted((s, e, f"Stream {st}") for s, e, st in query(path, f"SELECT start, end, streamId FROM {KERNEL}"))
    names = [doc["names"][i] for i, c in zip(ev["name"], ev["cat"]) if c == doc["categories"].index("nvtx")]
    assert "aten::conv2d, seq = 0" in names
    # An API call sits as many levels deep on its thread's lane as NVTX ranges enclose its start.
    api = doc["categories"].index("cuda_api")
    depths = sorted((s, d) for s, d, c in zip(ev["start_ns"], ev["depth"], ev["cat"]) if c == api)
    expected = query(path, f"""SELECT r.start, (SELECT count(*) FROM {NVTX} n WHERE n.globalTid = r.globalTid
                                 AND n.eventType IN (59, 60) AND n.start <= r.start AND n.end > r.start)
                               FROM {RUNTIME} r ORDER BY 1, 2""")
    assert depths == expected and max(d for _, d in depths) >= 3


def test_timeline_window_and_decimation(app, samples_dir):
    path = sample(samples_dir, DLPROF)
    (lo, hi), = query(path, f"SELECT min(start), max(end) FROM {KERNEL}")
    doc = app.json("/timeline", run="dlprof", start=lo, end=hi)
    expected = sum(query(path, f"SELECT count(*) FROM {t} WHERE end >= ? AND start <= ?{extra}", lo, hi)[0][0]
                   for t, extra in ((KERNEL, ""), ("CUPTI_ACTIVITY_KIND_MEMCPY", ""),
                                    ("CUPTI_ACTIVITY_KIND_MEMSET", ""), (RUNTIME, ""),
                                    (NVTX, " AND eventType IN (59, 60)")))
    assert doc["in_window"] == doc["returned"] == expected and (doc["start_ns"], doc["end_ns"]) == (lo, hi)
    small = app.json("/timeline", run="dlprof", start=lo, end=hi, max_events=40)
    assert small["decimated"] and small["returned"] <= 40 and sum(small["events"]["merged"]) == expected
    for bad in ({"start": "x"}, {"max_events": "0"}, {"end": "1.5"}, {"start": "nan"}, {"end": "1e400"}):
        assert "must be" in app.json("/timeline", expect=400, run="dlprof", **bad)["error"]
    # Out of int64 ns, or a start after the end: 400 with the reason, never a 422 nor a swapped window.
    assert "out of range" in app.json("/timeline", expect=400, run="dlprof", start="9" * 40)["error"]
    assert "out of range" in app.json("/timeline", expect=400, run="dlprof", end=str(-(1 << 63)))["error"]
    assert "after end" in app.json("/timeline", expect=400, run="dlprof", start=hi, end=lo)["error"]
    assert "no timeline" in app.json("/timeline", expect=404, run="ncu")["error"]


def test_timeline_is_fast_at_100k_kernels(app):
    started = time.perf_counter()
    doc = app.json("/timeline", run="big", max_events=5000)
    first = time.perf_counter() - started
    assert doc["in_window"] >= 2 * BIG_KERNELS and doc["returned"] <= 5000 and doc["decimated"]
    assert sum(doc["events"]["merged"]) == doc["in_window"]
    timings = []
    lo, hi = doc["capture_ns"]
    for k in range(1, 6):  # zooming in: narrower windows
        started = time.perf_counter()
        part = app.json("/timeline", run="big", start=lo, end=lo + (hi - lo) // (4 ** k), max_events=5000)
        timings.append(time.perf_counter() - started)
        assert part["returned"] <= 5000
    print(f"/timeline at {doc['in_window']} slices: first {first * 1000:.0f} ms, then "
          f"{', '.join(f'{t * 1000:.0f}' for t in timings)} ms")
    assert first < 5 and max(timings) < 1


def test_trace_download(app, logdir):
    response = app.get(P + "/trace", run="dlprof")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/gzip"
    assert response.headers["Content-Disposition"] == 'attachment; filename="dlprof.trace.json.gz"'
    assert response.data == (logdir / "dlprof/plugins/tb_hwprof" / metadata.TIMELINE).read_bytes()
    assert json.loads(gzip.decompress(response.data))["traceEvents"]
    assert app.get(P + "/trace", run="ncu").status_code == 404


def test_compare_matches_phases_by_name(app, samples_dir):
    path = sample(samples_dir, DLPROF)
    doc = app.json("/compare", base="dlprof", run="twice")
    phases = {m["name"]: m for m in doc["phases"]["matched"]}
    expected = query(path, f"SELECT text, count(*), sum(end - start) FROM {NVTX} WHERE eventType = 59 GROUP BY text")
    assert len(phases) == len(expected)
    for text, count, total in expected:
        m = phases[text]
        assert (m["base_instances"], m["run_instances"]) == (count, 2 * count)
        assert (m["base_ns"], m["run_ns"]) == (total, 2 * total) and m["speedup"] == pytest.approx(0.5)
    conv = phases["aten::cudnn_convolution, seq = 0"]
    assert conv["run_gpu_ns"] == 2 * conv["base_gpu_ns"] and conv["gpu_speedup"] == pytest.approx(0.5)
    assert doc["phases"]["only_in_base"] == doc["phases"]["only_in_run"] == []
    assert app.json("/compare", base="dlprof", run="annikola")["phases"] is None
