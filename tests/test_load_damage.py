"""Damaged runs (issue 13): copies of runs exported from the real samples, truncated, bit-flipped,
retyped, stripped of keys or files, load with one error naming the damaged file and the fix
(tb_hwprof.core.errors.HwprofError), never a KeyError / TypeError / RecursionError from deep inside; the
plugin answers them with a one-line 422, bounds what a timeline index may make it allocate, keeps a
damaged run's error in /runs after its cache entry is evicted, puts back a run an interrupted
--overwrite left renamed aside, and answers a clean error when its modules went away (issue 17)."""
import gzip
import json
import os
import pickle
import resource
import shutil
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import tb_hwprof
from tb_hwprof.core.errors import HwprofError, InputError
from tb_hwprof.logdir import metadata, reader, run_trace, writer
from tb_hwprof.plugin import views

from support_plugin import P, App, body

# Small real reports of three kinds: details files (counters), a timeline (tracer), both (rocprof).
SAMPLES = {"ncu": "ncu/esmm_a10g_cli_metrics_ncu-csv.csv", "nsys": "nsys/kmeans_rtx3080_openacc_2020.5.1.sqlite",
           "roc": "rocprof/v3_docs_kernel_trace_newer.csv"}


@pytest.fixture(scope="module")
def exported(tmp_path_factory, samples_dir) -> Path:
    """A logdir with one pristine run per SAMPLES entry (never modified: tests damage copies)."""
    logdir = tmp_path_factory.mktemp("pristine")
    for run, relative in SAMPLES.items():
        path = samples_dir / relative
        if not path.is_file():
            pytest.skip(f"{relative} not in the samples")
        tb_hwprof.export(path, logdir, run)
    return logdir


def copy_run(exported: Path, run: str, logdir: Path, name: str = None) -> Path:
    target = logdir / (name or run)
    shutil.copytree(exported / run, target)
    return target


def assets(run_dir: Path) -> Path:
    return run_dir.joinpath(*metadata.ASSET_DIR)


def manifest_of(run_dir: Path) -> dict:
    return json.loads((assets(run_dir) / metadata.MANIFEST).read_text())


def edit_manifest(run_dir: Path, change) -> None:
    manifest = manifest_of(run_dir)
    change(manifest)
    (assets(run_dir) / metadata.MANIFEST).write_text(json.dumps(manifest))


def edit_gz(path: Path, change) -> None:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    change(doc)
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def flip(path: Path) -> None:
    """Every bit of a run of bytes in the middle of the file inverted."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 16] = bytes(b ^ 0xFF for b in data[middle:middle + 16])
    path.write_bytes(bytes(data))


def refused(run_dir: Path, named: Path, load=tb_hwprof.load_run) -> str:
    """load(run_dir) raises the project's error, one line naming `named`; its text."""
    with pytest.raises(HwprofError) as caught:
        load(run_dir)
    text = str(caught.value)
    assert "\n" not in text and str(named) in text, text
    return text


def first_summary(run_dir: Path) -> Path:
    return sorted(assets(run_dir).glob(f"{metadata.SUMMARY_PREFIX}*.json.gz"))[0]


def details_file(run_dir: Path) -> Path:
    return assets(run_dir) / metadata.details_file(0)


# -- the manifest ----------------------------------------------------------------------------------
MANIFEST_DAMAGE = {
    "provenance deleted": lambda m: m.pop("provenance"),
    "devices deleted": lambda m: m.pop("devices"),
    "kernel_count deleted": lambda m: m.pop("kernel_count"),
    "kernel_count as text": lambda m: m.update(kernel_count=str(m["kernel_count"])),
    "kernel_count negative": lambda m: m.update(kernel_count=-1),
    "provenance a list": lambda m: m.update(provenance=[m["provenance"]]),
    "provenance with an unknown key": lambda m: m["provenance"].update(written_by="someone"),
    "a device a number": lambda m: m.update(devices=[1]),
    "a device with an unknown key": lambda m: m["devices"].append({"id": 0, "cores": 4}),
    "files a list": lambda m: m.update(files=[metadata.KERNELS]),
    "a summary file a number": lambda m: m["files"].update(summary_extra=3),
    "advice an object": lambda m: m.update(advice={"rule": "x"}),
    "advice items numbers": lambda m: m.update(advice=[1, 2]),
    "summary a list": lambda m: m.update(summary=[1, 2]),
    "roofline a list": lambda m: m.update(roofline=[1]),
    "inflated_bytes as text": lambda m: m.update(inflated_bytes={metadata.KERNELS: "big"}),
    "a roof as text": lambda m: m.update(roofline={"0": {"roofs": {"bytes_per_s_dram": "fast"}}}),
    "a headline figure a list": lambda m: m["summary"].update(kernel_launches=[9]),
    "timeline counts as text": lambda m: m.update(timeline={**(m.get("timeline") or {}), "kept": {"kernel": "many"}}),
    "a finding's figures a number": lambda m: m.update(advice=[{"id": "x.y", "severity": "low", "figures": 1.5}]),
}


@pytest.mark.parametrize("run", ["ncu", "nsys"])
@pytest.mark.parametrize("damage", sorted(MANIFEST_DAMAGE))
def test_a_retyped_or_stripped_manifest_is_one_error_naming_it(exported, tmp_path, run, damage):
    run_dir = copy_run(exported, run, tmp_path)
    edit_manifest(run_dir, MANIFEST_DAMAGE[damage])
    for load in (tb_hwprof.load_run, tb_hwprof.load_analysis):
        assert "re-export the run with --overwrite" in refused(run_dir, assets(run_dir) / metadata.MANIFEST, load)


MANIFEST_BYTES = {
    "truncated": lambda data: data[:len(data) // 2],
    "not UTF-8": lambda data: b"\xff\xfe" + data,
    "nested 100k deep": lambda data: b"[" * 100_000 + b"]" * 100_000,  # was a RecursionError
    "a JSON list": lambda data: b"[1, 2]",
    "empty": lambda data: b"",
}


@pytest.mark.parametrize("damage", sorted(MANIFEST_BYTES))
def test_an_unparsable_manifest_is_one_error_naming_it(exported, tmp_path, damage):
    run_dir = copy_run(exported, "ncu", tmp_path)
    path = assets(run_dir) / metadata.MANIFEST
    path.write_bytes(MANIFEST_BYTES[damage](path.read_bytes()))
    refused(run_dir, path)


def test_a_manifest_too_big_to_be_one_is_not_read(exported, tmp_path):
    run_dir = copy_run(exported, "ncu", tmp_path)
    with open(assets(run_dir) / metadata.MANIFEST, "r+b") as f:
        f.truncate(reader.MANIFEST_MAX_BYTES + 1)  # sparse: no disk used
    assert "more than any manifest" in refused(run_dir, assets(run_dir) / metadata.MANIFEST)


@pytest.mark.parametrize("version", [None, "2", True, 0, metadata.FORMAT_VERSION + 1])
def test_a_format_version_not_ours_is_refused_with_the_fix(exported, tmp_path, version):
    run_dir = copy_run(exported, "ncu", tmp_path)
    edit_manifest(run_dir, lambda m: m.pop("format_version") if version is None else m.update(format_version=version))
    assert "upgrade tb-hwprof or re-export the run" in refused(run_dir, assets(run_dir) / metadata.MANIFEST)


def test_a_run_without_its_files_says_it_is_not_a_run(exported, tmp_path):
    run_dir = copy_run(exported, "ncu", tmp_path)
    shutil.rmtree(assets(run_dir))
    assert "not a tb-hwprof run" in refused(run_dir, run_dir)


# -- tables ------------------------------------------------------------------------------------------
def _kernels_rows_plus_one(doc):
    doc["rows"] += 1


def _kernels_text_in_a_number_column(doc):
    column = next(c for c in ("duration_ns", "start_ns", "grid_x") if c in doc["data"])
    doc["data"][column] = ["slow"] * doc["rows"]


def _kernels_codes_outside_the_dictionary(doc):
    column = next(iter(doc["dictionary"]))
    doc["dictionary"][column]["codes"] = [len(doc["dictionary"][column]["values"])] * doc["rows"]


def _kernels_objects_in_a_text_column(doc):
    """The kernel names as JSON objects (the analyses group on them: 'unhashable type: dict')."""
    if "name" in doc["dictionary"]:
        values = doc["dictionary"]["name"]["values"]
        values[:] = [{"name": v} for v in values]
    else:
        doc["data"]["name"] = [{"name": v} for v in doc["data"]["name"]]


TABLE_DAMAGE = {
    "kernels objects in a text column": (lambda d: assets(d) / metadata.KERNELS,
                                         lambda p: edit_gz(p, _kernels_objects_in_a_text_column)),
    "kernels truncated": (lambda d: assets(d) / metadata.KERNELS, truncate),
    "kernels bit-flipped": (lambda d: assets(d) / metadata.KERNELS, flip),
    "kernels deleted": (lambda d: assets(d) / metadata.KERNELS, Path.unlink),
    "kernels rows differ from kernel_count": (lambda d: assets(d) / metadata.KERNELS,
                                              lambda p: edit_gz(p, _kernels_rows_plus_one)),
    "kernels text in a number column": (lambda d: assets(d) / metadata.KERNELS,
                                        lambda p: edit_gz(p, _kernels_text_in_a_number_column)),
    "kernels codes outside the dictionary": (lambda d: assets(d) / metadata.KERNELS,
                                             lambda p: edit_gz(p, _kernels_codes_outside_the_dictionary)),
    "summary truncated": (first_summary, truncate),
    "summary deleted": (first_summary, Path.unlink),
    "summary rows differ from its columns": (first_summary, lambda p: edit_gz(p, lambda doc: doc.update(rows=doc["rows"] + 1))),
    "summary a list": (first_summary, lambda p: p.write_bytes(gzip.compress(b"[1, 2]"))),
    "details truncated": (details_file, truncate),
    "details deleted": (details_file, Path.unlink),
    "details short of launches": (details_file, lambda p: edit_gz(p, lambda doc: doc["launches"].pop())),
    "details metric set out of range": (details_file, lambda p: edit_gz(
        p, lambda doc: doc["launches"][0].update(set=len(doc["metric_sets"])))),
    "details launch a number": (details_file, lambda p: edit_gz(p, lambda doc: doc["launches"].__setitem__(0, 5))),
}


@pytest.mark.parametrize("damage", sorted(TABLE_DAMAGE))
def test_a_damaged_table_is_one_error_naming_it(exported, tmp_path, damage):
    run_dir = copy_run(exported, "roc", tmp_path)  # kernels, summaries and details
    find, spoil = TABLE_DAMAGE[damage]
    path = find(run_dir)
    spoil(path)
    assert "re-export the run with --overwrite" in refused(run_dir, path)


@pytest.mark.parametrize("damage, route", [("kernels objects in a text column", "/kernel_groups"),
                                           ("kernels text in a number column", "/kernel_groups"),
                                           ("kernels rows differ from kernel_count", "/kernels"),
                                           ("details metric set out of range", "/kernel"),
                                           ("details short of launches", "/kernel")])
def test_the_plugin_answers_a_damaged_table_with_a_one_line_422_naming_it(exported, tmp_path, damage, route):
    run_dir = copy_run(exported, "roc", tmp_path / "logs")
    find, spoil = TABLE_DAMAGE[damage]
    spoil(find(run_dir))
    error = App(tmp_path / "logs").json(route, expect=422, run="roc", launch="0")["error"]
    # Named relative to the logdir (the run and its file), never the server's absolute path (issue 30).
    assert "\n" not in error and served_name(find(run_dir), tmp_path / "logs") in error
    assert str(tmp_path) not in error and "could not serve" not in error


def test_the_pristine_runs_load(exported):
    """The damage above is what fails: the same runs undamaged load whole."""
    for run in SAMPLES:
        profile = tb_hwprof.load_run(exported / run)
        assert len(profile.kernels) == manifest_of(exported / run)["kernel_count"]


# -- the timeline index ----------------------------------------------------------------------------
def index_path(run_dir: Path) -> Path:
    return assets(run_dir) / metadata.TIMELINE_INDEX


def index_members(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as z:
        return {name: z[name] for name in z.files}


def write_members(path: Path, members: dict) -> None:
    """An index as write_index lays it out; a member given as bytes is written as they are."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        for name, value in members.items():
            with z.open(name + ".npy", "w") as f:
                if isinstance(value, bytes):
                    f.write(value)
                else:
                    np.lib.format.write_array(f, value, allow_pickle=True)


def huge_header(count: int = 10 ** 12) -> bytes:
    """A .npy member whose header declares `count` int64 values (8 TB) over 8 real bytes."""
    import io
    f = io.BytesIO()
    np.lib.format.write_array_header_1_0(f, {"descr": "<i8", "fortran_order": False, "shape": (count,)})
    return f.getvalue() + bytes(8)


class MarkerWhenUnpickled:
    """Creates the file `path` if anything unpickles it (a loader must never)."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


@pytest.fixture
def timeline_app(exported, tmp_path):
    """(app, run folder) of a copy of the nsys run, damaged by the test before its first request."""
    run_dir = copy_run(exported, "nsys", tmp_path / "logs")
    return (lambda: App(tmp_path / "logs")), run_dir


def served_name(path: Path, logdir: Path) -> str:
    """How the plugin names a run's file in a 422: relative to the logdir."""
    return str(path.relative_to(logdir))


def served_timeline_error(make_app) -> str:
    doc = make_app().json("/timeline", expect=422, run="nsys")
    assert "\n" not in doc["error"]
    return doc["error"]


def test_lanes_beyond_the_track_list_are_damage_not_served(timeline_app):
    make_app, run_dir = timeline_app
    members = index_members(index_path(run_dir))
    tracks = len(json.loads(members["meta"].tobytes())["tracks"])
    members["track"] = members["track"].copy()
    members["track"][0] = tracks  # one past the last track
    write_members(index_path(run_dir), members)
    error = served_timeline_error(make_app)
    assert served_name(index_path(run_dir), run_dir.parent) in error and f"beyond the {tracks} tracks" in error
    with pytest.raises(InputError, match="track ids"):
        run_trace.render(run_dir, run_dir.parent / "out.json.gz")


def test_a_header_declaring_a_huge_array_is_refused_not_allocated(timeline_app):
    make_app, run_dir = timeline_app
    members = index_members(index_path(run_dir))
    write_members(index_path(run_dir), {**members, "start": huge_header()})
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    error = served_timeline_error(make_app)
    assert "declares 1,000,000,000,000 values" in error
    with pytest.raises(InputError, match="declares"):
        run_trace.render(run_dir, run_dir.parent / "out.json.gz")
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 200  # MB


def test_a_pickled_member_is_refused_never_unpickled(timeline_app, tmp_path):
    make_app, run_dir = timeline_app
    marker = tmp_path / "unpickled"
    members = index_members(index_path(run_dir))
    members["name"] = np.array([MarkerWhenUnpickled(marker)] * members["name"].size, dtype=object)
    pickle.loads(pickle.dumps(MarkerWhenUnpickled(tmp_path / "probe"))).close()
    assert (tmp_path / "probe").exists()  # the marker works: unpickling it makes the file
    write_members(index_path(run_dir), members)
    assert "not a column of integers" in served_timeline_error(make_app)
    assert not marker.exists()


@pytest.mark.parametrize("damage", ["a category renamed", "a track's pid as text"])
def test_a_retyped_index_meta_is_refused_before_rendering(timeline_app, damage):
    """The meta's categories and tracks go into the trace's text: damage there is refused, not rendered."""
    make_app, run_dir = timeline_app
    members = index_members(index_path(run_dir))
    meta = json.loads(members["meta"].tobytes())
    if damage == "a category renamed":
        meta["categories"][0] = "kernel\",\"x\":\""
    else:
        meta["tracks"][0]["pid"] = "1,\"x\":2"
    members["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    write_members(index_path(run_dir), members)
    with pytest.raises(InputError, match="timeline index"):
        run_trace.render(run_dir, run_dir.parent / "out.json.gz")
    assert served_name(index_path(run_dir), run_dir.parent) in served_timeline_error(make_app)


def test_a_truncated_index_is_a_422(timeline_app):
    make_app, run_dir = timeline_app
    truncate(index_path(run_dir))
    assert served_name(index_path(run_dir), run_dir.parent) in served_timeline_error(make_app)


def test_an_index_of_other_length_than_the_manifest_declares_is_refused(timeline_app):
    _, run_dir = timeline_app
    members = index_members(index_path(run_dir))
    write_members(index_path(run_dir), {k: v if k == "meta" else v[:-1] for k, v in members.items()})
    with pytest.raises(InputError, match="profile.json says"):
        run_trace.render(run_dir, run_dir.parent / "out.json.gz")


# -- the plugin's cache and /runs ---------------------------------------------------------------------
def test_runs_keeps_a_damaged_runs_error_after_its_entry_is_evicted(exported, tmp_path):
    logdir = tmp_path / "logs"
    broken = copy_run(exported, "roc", logdir, "broken")
    truncate(assets(broken) / metadata.KERNELS)
    others = [copy_run(exported, "roc", logdir, f"ok{i}").name for i in range(2)]
    app = App(logdir)
    app.store.max_loaded = len(others)  # the two others push the broken run out of the cache
    error = app.json("/kernels", expect=422, run="broken")["error"]
    for run in others:
        app.json("/kernels", run=run)
    assert "broken" not in app.store._loaded
    reads = app.store.loads["kernels"]
    rows = {row["run"]: row for row in app.json("/runs")["runs"]}
    assert rows["broken"]["error"] == error and served_name(assets(broken) / metadata.KERNELS, logdir) in error
    assert not rows["ok0"]["error"] and app.store.loads["kernels"] == reads  # nothing re-read


# -- repair on read ---------------------------------------------------------------------------------
def dead_pid() -> int:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(child.stdout)


def moved_aside_by_a_killed_overwrite(run_dir: Path) -> Path:
    """What an --overwrite killed after its step 2 leaves (writer.replace_ours): the event file hidden,
    the run's asset folder in the logdir's work area under the dead export's name."""
    writer.hide_events(run_dir)
    old = writer.area_of(run_dir) / "old" / f"{writer.key_of(run_dir.name)}@{dead_pid()}@{socket.gethostname()}"
    old.parent.mkdir(parents=True)
    os.rename(assets(run_dir), old)
    return old


def renamed_aside_by_an_older_export(run_dir: Path) -> Path:
    """What an --overwrite of tb-hwprof before the work area left: the whole run under a hidden name."""
    aside = run_dir.parent / f".{run_dir.name}{writer.OLD_TAG}4242"
    os.rename(run_dir, aside)
    return aside


INTERRUPTIONS = {"killed overwrite": moved_aside_by_a_killed_overwrite, "older export's": renamed_aside_by_an_older_export}


@pytest.mark.parametrize("interruption", sorted(INTERRUPTIONS))
def test_load_run_puts_back_a_run_an_interrupted_overwrite_left_aside(exported, tmp_path, interruption):
    run_dir = copy_run(exported, "ncu", tmp_path)
    aside = INTERRUPTIONS[interruption](run_dir)
    profile = tb_hwprof.load_run(run_dir)
    assert len(profile.kernels) == manifest_of(run_dir)["kernel_count"]
    assert not aside.exists()


@pytest.mark.parametrize("interruption", sorted(INTERRUPTIONS))
def test_the_plugin_puts_back_a_run_an_interrupted_overwrite_left_aside(exported, tmp_path, interruption):
    run_dir = copy_run(exported, "roc", tmp_path / "logs")
    app = App(tmp_path / "logs")
    served = app.json("/kernels", run="roc")
    aside = INTERRUPTIONS[interruption](run_dir)
    assert app.json("/kernels", run="roc") == served
    assert (assets(run_dir) / metadata.MANIFEST).is_file() and not aside.exists()


# -- the plugin's modules (issue 17) ----------------------------------------------------------------
@pytest.fixture
def plain_app(exported, tmp_path):
    copy_run(exported, "roc", tmp_path / "logs")
    return App(tmp_path / "logs")


def test_what_the_plugin_serves_with_is_imported_when_tensorboard_loads_it(plain_app):
    assert plain_app.loader.plugin._service is not None  # before any request


def test_a_service_that_cannot_be_imported_answers_a_one_line_500(plain_app, monkeypatch):
    plain_app.loader.plugin._service = None  # as if the package went away before it was imported
    monkeypatch.setitem(sys.modules, "tb_hwprof.plugin.service", None)  # import raises ImportError
    response = plain_app.get(P + "/runs")
    text = body(response).decode()
    assert response.status_code == 500 and response.headers["Content-Type"].startswith("text/plain")
    assert text.count("\n") == 1 and "restart TensorBoard" in text and "tb_hwprof.plugin.service" in text
    monkeypatch.undo()
    assert plain_app.json("/runs")["runs"][0]["run"] == "roc"  # served again once it imports


def test_a_module_gone_at_a_request_is_a_json_500_saying_restart(plain_app, monkeypatch):
    def gone(entry):
        raise ModuleNotFoundError("No module named 'tb_hwprof.analysis.groups'")
    monkeypatch.setattr(views, "kernel_groups", gone)
    response = plain_app.get(P + "/kernel_groups", run="roc")
    error = json.loads(body(response))["error"]
    assert response.status_code == 500 and "\n" not in error
    assert "tb_hwprof.analysis.groups" in error and "restart TensorBoard" in error
