"""AMD traces (rocprof kernel / copy / API records) in the timeline trace-file format of the
Nsight Systems exporter. Expected slices come from the raw files (csv, json, sqlite3 modules)."""
import csv
import gzip
import json
import sqlite3

import numpy as np
import pytest

import tb_hwprof
from tb_hwprof.logdir import metadata, trace
from tb_hwprof.core.model import TIMELINE_CATEGORIES


def slices_of(timeline, cat):
    s = timeline.slices
    mask = s["cat"] == TIMELINE_CATEGORIES.index(cat)
    return [(timeline.names[n], int(a), int(b)) for n, a, b in zip(s["name"][mask], s["start"][mask], s["end"][mask])]


def test_v1_kernel_trace_csv(roc):
    with open(roc / "v1_mi250x_laplacian/results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    tl = tb_hwprof.read(roc / "v1_mi250x_laplacian/results.csv").timeline
    got = slices_of(tl, "kernel")
    assert len(got) == len(rows) == 1004
    assert [(a, b) for _, a, b in got] == [(int(r["BeginNs"]), int(r["EndNs"])) for r in rows]
    assert not any("[clone" in name for name, _, _ in got)  # the model's names, suffix dropped
    assert {(t.process, t.thread, t.kind) for t in tl.tracks} == {("GPU 8 (AMD Instinct MI250X/MI250)", "Queue 0", "stream")}


def test_v1_json_kernels_copies_and_api_calls(roc):
    doc = json.loads((roc / "v1_mi300a_vecadd/results.json").read_text())
    lanes = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e.get("ph") == "M"}
    complete = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    by = lambda lane: [(int(e["args"]["BeginNs"]), int(e["args"]["EndNs"])) for e in complete  # noqa: E731
                       if lane(lanes[int(e["pid"])])]
    tl = tb_hwprof.read(roc / "v1_mi300a_vecadd/results.json").timeline
    assert [(a, b) for _, a, b in slices_of(tl, "memcpy")] == by(lambda n: n == "COPY")
    assert [(a, b) for _, a, b in slices_of(tl, "kernel")] == by(lambda n: n.startswith("GPU"))
    assert sorted((a, b) for _, a, b in slices_of(tl, "cuda_api")) == sorted(by(lambda n: n.startswith("CPU")))
    copy_track = {t.thread: t for t in tl.tracks}["Copies"]
    assert copy_track.kind == "stream" and copy_track.device == 4


def test_rocpd_kernels_and_regions(roc):
    path = roc / "v3_rocpd_mi300x_ck_bmm_results.db"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        kernels = conn.execute('SELECT start, "end" FROM kernels ORDER BY start, id').fetchall()
        regions = conn.execute('SELECT count(*) FROM regions').fetchone()[0]
    tl = tb_hwprof.read(path).timeline
    assert [(a, b) for _, a, b in slices_of(tl, "kernel")] == [tuple(k) for k in kernels]
    assert len(slices_of(tl, "cuda_api")) == regions


def test_counter_workloads_and_stats_have_no_timeline(roc):
    # rocprof-compute replays every kernel once per counter pass: no single timeline.
    assert tb_hwprof.read(roc / "omniperf_vcopy_mi200").timeline is None
    assert tb_hwprof.read(roc / "v1_mi250x_laplacian/results.stats.csv").timeline is None


def test_export_writes_the_trace_file_and_index(roc, tmp_path):
    source = roc / "v1_mi300a_vecadd/results.json"
    run = tb_hwprof.export(source, tmp_path, "amd")
    assets = run / "plugins" / "tb_hwprof"
    manifest = json.loads((assets / metadata.MANIFEST).read_text())
    assert manifest["files"]["timeline"] == metadata.TIMELINE
    assert manifest["timeline"]["kept"]["kernel"] == 1 and manifest["timeline"]["kept"]["memcpy"] == 3
    events = json.loads(gzip.decompress((assets / metadata.TIMELINE).read_bytes()))["traceEvents"]
    kernel = next(e for e in events if e.get("cat") == "kernel")
    model = tb_hwprof.read(source).kernels.iloc[0]
    assert kernel["name"] == model["name"]
    assert kernel["ts"] == pytest.approx(model["start_ns"] / 1000) and kernel["dur"] == pytest.approx(model["duration_ns"] / 1000)
    index = trace.read_index(assets / metadata.TIMELINE_INDEX)
    assert index["start"].size == 17 and np.all(np.diff(index["start"]) >= 0)


def test_lane_tracks_keep_the_thread_they_relieve(roc):
    """The rocpd MI300X capture runs kernels of one queue at once: its lanes name the queue's tid, so the
    analysis sees one queue (thread_keys), while the trace shows the lanes apart."""
    tl = tb_hwprof.read(roc / "v3_rocpd_mi300x_ck_bmm_results.db").timeline
    lanes = [t for t in tl.tracks if t.lane_of is not None]
    assert lanes and all("(overlap " in t.thread for t in lanes)
    keys = tl.thread_keys()
    by_pid_tid = {(t.pid, t.tid): i for i, t in enumerate(tl.tracks)}
    for i, t in enumerate(tl.tracks):
        if t.lane_of is not None:
            base = by_pid_tid[(t.pid, t.lane_of)]
            assert tl.tracks[base].lane_of is None and keys[i] == keys[base] and t.tid != t.lane_of
    assert len(set(keys.tolist())) == len(tl.tracks) - len(lanes)
