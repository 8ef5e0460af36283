"""The Chrome trace rendered from a written run's timeline index: byte for byte what the export
writes, `--trace auto|always|never`, the `tb-hwprof trace` subcommand, the plugin's /trace streaming
it when the run has no file, v1 indexes (no flow / bytes columns), and the v3 index's chunks and
overview that the Timeline reads by ranges (checked against sqlite3 over the capture).  Runs are exported from the
real Nsight Systems exports in the shared samples."""
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

import tb_hwprof
from tb_hwprof.app.cli import main as cli_main
from tb_hwprof.logdir import metadata, trace

from conftest import sample
from support_nsys import DLPROF
from support_trace import as_v2_index
from support_plugin import P, App

ANNIKOLA = "nsys/annikola_gtx1050_2024.5.1.sqlite"


def assets_of(run_dir: Path) -> Path:
    return run_dir / "plugins" / "tb_hwprof"


def manifest_of(run_dir: Path) -> dict:
    return json.loads((assets_of(run_dir) / metadata.MANIFEST).read_text())


def export(path, logdir: Path, run: str, *extra) -> Path:
    assert cli_main(["export", str(path), "--logdir", str(logdir), "--run", run, "--quiet", *extra]) == 0
    return logdir / run


def rendered(run_dir: Path, out: Path) -> bytes:
    """The run's trace rendered from its index alone (what `tb-hwprof trace` and /trace produce)."""
    index = trace.read_index(assets_of(run_dir) / metadata.TIMELINE_INDEX)
    trace.write_pieces(trace.index_trace(index), out)
    return out.read_bytes()


def events(data: bytes) -> list:
    return json.loads(gzip.decompress(data))["traceEvents"]


# ------------------------------------------------------------------ render from the index == export
def test_trace_from_the_index_is_the_exported_file(tmp_path, nsys_sqlite):
    run = export(nsys_sqlite, tmp_path / "logs", "r")
    if "timeline_index" not in manifest_of(run)["files"]:
        pytest.skip("no CUDA trace in this export")
    written = (assets_of(run) / metadata.TIMELINE).read_bytes()
    assert rendered(run, tmp_path / "again.json.gz") == written  # gzip bytes, not only the JSON
    gz = b"".join(trace.gzip_pieces(trace.index_trace(trace.read_index(assets_of(run) / metadata.TIMELINE_INDEX))))
    assert gz == written  # the plugin's streamed gzip too


def test_windowed_trace_from_the_index_is_the_exported_file(tmp_path, samples_dir):
    run = export(sample(samples_dir, DLPROF), tmp_path / "logs", "w", "--nvtx-range", "aten::conv2d, seq = 0")
    info = manifest_of(run)["timeline"]
    assert info["dropped_events"] > 0 and info["trace_written"] is True
    written = (assets_of(run) / metadata.TIMELINE).read_bytes()
    assert rendered(run, tmp_path / "again.json.gz") == written
    xs = [e for e in events(written) if e["ph"] == "X"]
    assert len(xs) == info["kept_events"]
    assert sum(e["ph"] == "s" for e in events(written)) == info["kept"]["flow"]


def test_index_holds_flows_and_bytes(tmp_path, samples_dir):
    run = export(sample(samples_dir, DLPROF), tmp_path / "logs", "r")
    index = trace.read_index(assets_of(run) / metadata.TIMELINE_INDEX)
    assert index["meta"]["version"] == trace.INDEX_VERSION == 3 and set(trace.INDEX_COLUMNS) <= set(index)
    slices = tb_hwprof.read(sample(samples_dir, DLPROF)).timeline.slices
    for column in ("flow", "bytes"):  # the same values per slice, in event order
        assert sorted(index[column].tolist()) == sorted(slices[column].tolist())
    api = index["cat"] == trace.TIMELINE_CATEGORIES.index("cuda_api")
    assert (index["flow"][api] >= 0).sum() == manifest_of(run)["timeline"]["kept"]["flow"]
    memcpy = index["cat"] == trace.TIMELINE_CATEGORIES.index("memcpy")
    assert (index["bytes"][memcpy] > 0).all() and (index["bytes"][~memcpy & (index["cat"] != 2)] == -1).all()
    view = trace.read_index(assets_of(run) / metadata.TIMELINE_INDEX, trace.VIEW_COLUMNS)
    assert set(view) == {*trace.VIEW_COLUMNS, "meta"}  # the Timeline view reads no more


# ------------------------------------------------------------------ --trace auto / always / never
@pytest.fixture
def small_threshold(monkeypatch):
    """--trace auto's limit below the DLProf capture's 423 slices."""
    monkeypatch.setattr(trace, "TRACE_EAGER_EVENTS", 100)


def test_auto_skips_a_big_trace_and_says_how_to_get_it(tmp_path, samples_dir, small_threshold, capsys):
    run = export(sample(samples_dir, DLPROF), tmp_path / "logs", "auto")
    out = capsys.readouterr().out
    assert "timeline kept 423 events, dropped 0" in out
    [line] = [ln for ln in out.splitlines() if "not written" in ln]
    assert "over 100 slices" in line and f"tb-hwprof trace {run}" in line and "Download trace" in line
    manifest = manifest_of(run)
    assert not (assets_of(run) / metadata.TIMELINE).exists() and "timeline" not in manifest["files"]
    assert manifest["files"]["timeline_index"] == metadata.TIMELINE_INDEX
    info = manifest["timeline"]
    assert info["trace_written"] is False and info["uncompressed_bytes"] is None
    assert info["kept_events"] == 423 and info["kept"]["kernel"] == 46 and info["kept"]["flow"] == 62


def test_always_and_never(tmp_path, samples_dir, small_threshold, capsys):
    always = export(sample(samples_dir, DLPROF), tmp_path / "logs", "always", "--trace", "always")
    assert (assets_of(always) / metadata.TIMELINE).is_file() and manifest_of(always)["timeline"]["trace_written"]
    assert "not written" not in capsys.readouterr().out
    never = export(sample(samples_dir, ANNIKOLA), tmp_path / "logs", "never", "--trace", "never")
    assert not (assets_of(never) / metadata.TIMELINE).exists() and "timeline" not in manifest_of(never)["files"]
    assert "(--trace never)" in capsys.readouterr().out


def test_auto_writes_a_small_trace(tmp_path, samples_dir):
    run = export(sample(samples_dir, DLPROF), tmp_path / "logs", "r")
    info = manifest_of(run)["timeline"]
    assert info["trace_written"] is True and info["uncompressed_bytes"] > 0
    assert manifest_of(run)["files"]["timeline"] == metadata.TIMELINE


# ------------------------------------------------------------------ tb-hwprof trace
def test_trace_command_writes_the_runs_file(tmp_path, samples_dir, small_threshold, capsys):
    logs = tmp_path / "logs"
    full = export(sample(samples_dir, DLPROF), logs, "full", "--trace", "always")
    run = export(sample(samples_dir, DLPROF), logs, "later")
    before = manifest_of(run)
    capsys.readouterr()
    assert cli_main(["trace", str(run)]) == 0
    assert f"wrote {assets_of(run) / metadata.TIMELINE}: 423 slices" in capsys.readouterr().out
    assert (assets_of(run) / metadata.TIMELINE).read_bytes() == (assets_of(full) / metadata.TIMELINE).read_bytes()
    after = manifest_of(run)
    assert after["files"] == {**before["files"], "timeline": metadata.TIMELINE}
    assert after["timeline"] == {**before["timeline"], "trace_written": True,
                                 "uncompressed_bytes": manifest_of(full)["timeline"]["uncompressed_bytes"]}
    assert tb_hwprof.load_run(run).provenance.tool == before["provenance"]["tool"]  # still a readable run
    assert not [p for p in assets_of(run).iterdir() if p.name.startswith(".")]  # no temp files left
    # Again: the file is there, nothing to do; -o writes a copy anywhere.
    assert cli_main(["trace", str(run)]) == 0 and "nothing to do" in capsys.readouterr().out
    out = tmp_path / "copy.json.gz"
    assert cli_main(["trace", str(full), "-o", str(out)]) == 0
    assert out.read_bytes() == (assets_of(full) / metadata.TIMELINE).read_bytes()
    assert manifest_of(full)["timeline"]["trace_written"] is True


def test_trace_command_errors_are_one_line(tmp_path, samples_dir, capsys):
    logs = tmp_path / "logs"
    no_timeline = export(sample(samples_dir, "nsys/cardiac_rtx3060l_nocuda_2021.3.3.sqlite"), logs, "cardiac")
    assert cli_main(["trace", str(logs)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a tb-hwprof run" in err
    assert cli_main(["trace", str(no_timeline)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no timeline in this run" in err
    run = export(sample(samples_dir, DLPROF), logs, "r", "--trace", "never")
    assert cli_main(["trace", str(run), "-o", str(tmp_path / "missing" / "t.json.gz")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot write the trace" in err


def test_trace_command_reports_progress_for_big_traces(tmp_path, samples_dir, monkeypatch, capsys):
    monkeypatch.setattr(trace, "TRACE_EAGER_EVENTS", 100)
    monkeypatch.setattr(trace, "CHUNK", 100)
    from tb_hwprof.logdir import run_trace
    monkeypatch.setattr(run_trace, "PROGRESS_EVERY", 200)
    run = export(sample(samples_dir, DLPROF), tmp_path / "logs", "r")
    assert cli_main(["trace", str(run)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == ["rendering 423 slices", "rendered 200/423 slices", "rendered 400/423 slices",
                   "rendered 423/423 slices; adding launch flows"]
    assert len(events((assets_of(run) / metadata.TIMELINE).read_bytes())) > 423  # chunking changes nothing visible


# ------------------------------------------------------------------ v1 index (no flow / bytes)
def as_v1_index(path: Path) -> None:
    """Rewrite a timeline index as tb-hwprof wrote version 1: five columns, meta version 1."""
    index = trace.read_index(path)
    meta = {**index["meta"], "version": 1}
    blob = np.frombuffer(json.dumps(meta, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **{c: index[c] for c in trace.VIEW_COLUMNS}, meta=blob)


def test_v1_index_is_read_and_renders_without_flows_and_bytes(tmp_path, samples_dir, capsys):
    from tb_hwprof.analysis.trace_views import TimelineIndex
    logs = tmp_path / "logs"
    full = export(sample(samples_dir, DLPROF), logs, "full")
    old = export(sample(samples_dir, DLPROF), logs, "old", "--trace", "never")
    as_v1_index(assets_of(old) / metadata.TIMELINE_INDEX)
    index = trace.read_index(assets_of(old) / metadata.TIMELINE_INDEX)
    assert set(index) == {*trace.VIEW_COLUMNS, "meta"} and index["meta"]["version"] == 1
    assert TimelineIndex(index).window(None, None, 5000)["in_window"] == 423
    capsys.readouterr()
    assert cli_main(["trace", str(old)]) == 0
    assert "no launch flows and no bytes args" in capsys.readouterr().err
    got = events((assets_of(old) / metadata.TIMELINE).read_bytes())
    want = events((assets_of(full) / metadata.TIMELINE).read_bytes())
    for e in want:
        if e["ph"] == "X":
            e.pop("args", None)
    assert got == [e for e in want if e["ph"] not in "sf"]


# ------------------------------------------------------------------ plugin /trace
@pytest.fixture(scope="module")
def plugin(tmp_path_factory, samples_dir):
    logs = tmp_path_factory.mktemp("trace-on-demand") / "logs"
    tb_hwprof.export(sample(samples_dir, DLPROF), logs, "written")
    assert cli_main(["export", str(sample(samples_dir, DLPROF)), "--logdir", str(logs), "--run", "lazy run",
                     "--trace", "never", "--quiet"]) == 0
    tb_hwprof.export(sample(samples_dir, "nsys/cardiac_rtx3060l_nocuda_2021.3.3.sqlite"), logs, "no-timeline")
    return logs, App(logs)


def test_trace_is_streamed_when_the_run_has_no_file_then_served_from_it(plugin):
    logs, app = plugin
    snapshot = sorted((p.relative_to(logs), p.stat().st_mtime_ns) for p in logs.rglob("*"))
    written = app.get(P + "/trace", run="written")
    lazy = app.get(P + "/trace", run="lazy run")
    assert written.status_code == lazy.status_code == 200
    assert "Content-Length" not in lazy.headers  # streamed as it is rendered
    assert lazy.data == written.data == (logs / "written/plugins/tb_hwprof" / metadata.TIMELINE).read_bytes()
    assert lazy.headers["Content-Disposition"] == 'attachment; filename="lazy_run.trace.json.gz"'
    same = ("Content-Type", "X-Content-Type-Options", "Expires", "Cache-Control")
    assert {h: lazy.headers.get(h) for h in same} == {h: written.headers.get(h) for h in same}
    assert lazy.headers["Content-Type"] == "application/gzip" and "Content-Encoding" not in lazy.headers
    assert sorted((p.relative_to(logs), p.stat().st_mtime_ns) for p in logs.rglob("*")) == snapshot  # nothing written
    assert app.get(P + "/trace", run="no-timeline").status_code == 404
    # Once `tb-hwprof trace` has written the run's file, the plugin sends that file.
    assert cli_main(["trace", str(logs / "lazy run"), "--quiet"]) == 0
    again = app.get(P + "/trace", run="lazy run")
    assert again.headers["Content-Length"] == str(len(written.data)) and again.data == written.data


# ------------------------------------------------------------------ v3: chunks read by ranges, the overview
SLICE_TABLES = (("CUPTI_ACTIVITY_KIND_KERNEL", ""), ("CUPTI_ACTIVITY_KIND_MEMCPY", ""),
                ("CUPTI_ACTIVITY_KIND_MEMSET", ""), ("CUPTI_ACTIVITY_KIND_RUNTIME", ""),
                ("NVTX_EVENTS", " AND eventType IN (59, 60)"))


def sqlite_slices(path: Path, lo: int, hi: int) -> list:
    """(start, end) of every slice of the capture overlapping lo..hi, by sqlite3 over the export."""
    from support_nsys import query
    return sorted((s, e) for table, extra in SLICE_TABLES
                  for s, e in query(path, f"SELECT start, end FROM {table} WHERE end >= ? AND start <= ?{extra}", lo, hi))


@pytest.fixture
def chunked(tmp_path, samples_dir, monkeypatch):
    """DLProf's capture (423 slices) exported with 16-slice chunks and a 100-slice overview; the
    byte ranges the plugin then reads of the index are recorded."""
    monkeypatch.setattr(trace, "CHUNK_ROWS", 16)
    monkeypatch.setattr(trace, "OVERVIEW_EVENTS", 100)
    run = export(sample(samples_dir, DLPROF), tmp_path / "logs", "r")
    reads = []
    real = trace._read_range
    monkeypatch.setattr(trace, "_read_range", lambda path, a, b: reads.append((a, b)) or real(path, a, b))
    return run, App(tmp_path / "logs"), reads


def test_the_whole_capture_comes_from_the_overview(chunked, samples_dir):
    run, app, reads = chunked
    path = assets_of(run) / metadata.TIMELINE_INDEX
    doc = app.json("/timeline", run="r", max_events=100)
    everything = sqlite_slices(sample(samples_dir, DLPROF), -(1 << 62), 1 << 62)
    assert doc["in_window"] == sum(doc["events"]["merged"]) == len(everything) == 423
    assert doc["decimated"] and doc["returned"] <= 100
    assert set(zip(doc["events"]["start_ns"], doc["events"]["end_ns"])) <= set(everything)
    # The zip's directory aside, one read at the front, which ends before the first column.
    with np.load(path) as z:
        front = min(i.header_offset for i in z.zip.infolist() if i.filename[:-4] in trace.RANGED_COLUMNS)
    assert reads == [(0, front)]
    # A budget above the overview's reads the columns: every slice, none merged.
    full = app.json("/timeline", run="r", max_events=1000)
    assert full["returned"] == 423 and not full["decimated"]
    assert sorted(zip(full["events"]["start_ns"], full["events"]["end_ns"])) == everything


def test_a_window_reads_only_the_chunks_it_overlaps(chunked, samples_dir):
    run, app, reads = chunked
    path = assets_of(run) / metadata.TIMELINE_INDEX
    lo, hi = app.json("/timeline", run="r", max_events=100)["capture_ns"]
    reads.clear()
    a, b = lo + (hi - lo) * 2 // 5, lo + (hi - lo) // 2
    doc = app.json("/timeline", run="r", start=a, end=b, max_events=100_000)
    expected = sqlite_slices(sample(samples_dir, DLPROF), a, b)
    assert doc["in_window"] == doc["returned"] == len(expected) > 0
    assert sorted(zip(doc["events"]["start_ns"], doc["events"]["end_ns"])) == expected
    index = trace.read_index(path, ("start", "end"))
    with np.load(path) as z:
        chunk_first, chunk_start, chunk_end = (z[m] for m in trace.CHUNK_MEMBERS)
    overlapping = int(((chunk_start <= b) & (chunk_end >= a)).sum())
    assert 0 < overlapping < chunk_first.size
    # Each column's bytes read: the overlapping chunks' rows, not the column.
    column_bytes = sum(r[1] - r[0] for r in reads if r[1] - r[0] != trace.HEADER_READ)
    itemsizes = sum(np.dtype(d).itemsize for d in ("<i8", "<i8", "<i4", "<i4", "<i1", "<i8", "<i2"))
    assert column_bytes <= overlapping * 16 * itemsizes < index["start"].size * itemsizes
    # The same window again: its chunks are kept, nothing is read.
    reads.clear()
    assert app.json("/timeline", run="r", start=a, end=b, max_events=100_000) == doc and reads == []


def test_a_v2_index_is_read_whole_and_shows_the_same_windows(tmp_path, samples_dir):
    logs = tmp_path / "logs"
    export(sample(samples_dir, DLPROF), logs, "new")
    old = export(sample(samples_dir, DLPROF), logs, "old")
    as_v2_index(assets_of(old) / metadata.TIMELINE_INDEX)
    assert trace.open_ranged(assets_of(old) / metadata.TIMELINE_INDEX) is None
    app = App(logs)
    lo, hi = app.json("/timeline", run="new")["capture_ns"]
    for params in ({}, {"start": lo + (hi - lo) // 3, "end": lo + (hi - lo) // 2}, {"max_events": 40}):
        new, older = app.json("/timeline", run="new", **params), app.json("/timeline", run="old", **params)
        assert {k: v for k, v in new.items() if k != "run"} == {k: v for k, v in older.items() if k != "run"}, params
    whole = app.json("/timeline", run="old")
    assert whole["in_window"] == len(sqlite_slices(sample(samples_dir, DLPROF), lo, hi))
