"""Logdirs on object storage (issue 15): export to, load from and serve from s3:// on a real
S3-compatible server (moto in server mode on 127.0.0.1), and from fsspec filesystems that are not
S3 and need no server (memory://, local://, and one whose listings carry no change field at all).

Expected values come from the reports (NVIDIA's ncu_report, sqlite3 over the nsys export) and from
the bucket itself read with boto3 (not through tb_hwprof); a local export of the same report is
the reference for load_run's tables.
"""
import gzip
import json
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import tb_hwprof
import tb_hwprof.logdir.reader
from tb_hwprof.core.errors import HwprofError, InputError, RunExists
from tb_hwprof.logdir import fs, metadata

from conftest import ncu_actions, sample
from support_plugin import App, P
from support_series import CHAIN, ORACLE, oracle_step

fsspec = pytest.importorskip("fsspec")
from fsspec.implementations.memory import MemoryFileSystem  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BUCKET, OTHER_BUCKET = "hwprof-runs", "hwprof-secret"
LOGDIR = f"s3://{BUCKET}/runs"
NCU = "ncu/lakshya_gtx1660s_full_2024.1.1.ncu-rep"
NSYS = "nsys/annikola_gtx1050_2024.5.1.sqlite"
TORCH = "torch/kineto_h100_cuda129_small.json"
RUNS = {"ncu": NCU, "nsys": NSYS, "torch": TORCH}


# -- fixtures --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def s3():
    """A moto S3 server on 127.0.0.1, the environment pointing boto3, s3fs and TensorBoard at it
    (AWS_ENDPOINT_URL: the one variable all three read), and a boto3 client of our own."""
    moto_server = pytest.importorskip("moto.server", reason="moto[server] is not installed (pip install 'tb-hwprof[test]')")
    pytest.importorskip("s3fs", reason="s3fs is not installed (pip install 'tb-hwprof[s3]')")
    boto3 = pytest.importorskip("boto3")
    import s3fs
    # s3fs keeps one filesystem per set of arguments, whose client holds the endpoint it was made
    # with: one made by an earlier test module against its own (stopped) server must not be reused.
    s3fs.S3FileSystem.clear_instance_cache()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://{host}:{port}"}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        client = boto3.client("s3")
        for bucket in (BUCKET, OTHER_BUCKET):
            client.create_bucket(Bucket=bucket)
        # A run in another bucket: no run name of the logdir may reach it.
        client.put_object(Bucket=OTHER_BUCKET, Key="runs/secret/plugins/tb_hwprof/profile.json", Body=b"{}")
        yield client
    server.stop()
    s3fs.S3FileSystem.clear_instance_cache()


def keys(client, prefix: str, bucket: str = BUCKET) -> list:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def event_keys(client, run: str) -> list:
    return [k for k in keys(client, f"runs/{run}/") if "/" not in k[len(f"runs/{run}/"):] and "tfevents" in k]


@pytest.fixture(scope="module")
def exported(s3, samples_dir, tmp_path_factory):
    """The three samples exported to the bucket and to a local logdir: {run: local run folder}."""
    local = tmp_path_factory.mktemp("remote") / "local"
    out = {}
    for run, name in RUNS.items():
        url = tb_hwprof.export(sample(samples_dir, name), LOGDIR, run)
        assert url == f"{LOGDIR}/{run}"
        out[run] = tb_hwprof.export(sample(samples_dir, name), local, run)
    return out


@pytest.fixture(scope="module")
def app(exported):
    return App(LOGDIR)


def ncu_launches(ncu_report, path: Path) -> int:
    return sum(1 for _ in ncu_actions(ncu_report, path))


def nsys_kernels(path: Path) -> int:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]


def export_cli(*args, env=None):
    cmd = [sys.executable, "-m", "tb_hwprof", "export", *map(str, args)]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


# -- export and load_run ---------------------------------------------------------------------
def test_export_uploads_every_table_of_the_run(s3, exported):
    """The bucket holds, under each run, the files of the same report exported locally (inflated
    tables equal) and exactly one event file: nothing left under the staging prefix."""
    for run, local_run in exported.items():
        local_assets = local_run.joinpath(*metadata.ASSET_DIR)
        local_files = sorted(p.relative_to(local_assets).as_posix() for p in local_assets.rglob("*") if p.is_file())
        prefix = f"runs/{run}/plugins/tb_hwprof/"
        assert [k[len(prefix):] for k in keys(s3, prefix)] == local_files
        for name in local_files:
            if name.endswith(".json.gz"):
                body = s3.get_object(Bucket=BUCKET, Key=prefix + name)["Body"].read()
                assert gzip.decompress(body) == gzip.decompress((local_assets / name).read_bytes()), name
        assert len(event_keys(s3, run)) == 1
    assert keys(s3, f"runs/{metadata.WORK_AREA}/") == []


def test_load_run_from_s3_equals_the_local_export(s3, exported, samples_dir, ncu_report_module):
    import pandas.testing as pdt
    for run, local_run in exported.items():
        remote = tb_hwprof.load_run(f"{LOGDIR}/{run}")
        local = tb_hwprof.load_run(local_run)
        pdt.assert_frame_equal(remote.kernels, local.kernels)
        assert remote.raw_metrics == local.raw_metrics and remote.rules == local.rules
        assert sorted(remote.summaries) == sorted(local.summaries)
        assert tb_hwprof.load_analysis(f"{LOGDIR}/{run}").scalars == tb_hwprof.load_analysis(local_run).scalars
    assert len(tb_hwprof.load_run(f"{LOGDIR}/ncu").kernels) == ncu_launches(ncu_report_module, samples_dir / NCU)
    assert len(tb_hwprof.load_run(f"{LOGDIR}/nsys").kernels) == nsys_kernels(samples_dir / NSYS)


def test_load_run_fetches_what_it_reads(exported, monkeypatch):
    """load_run fetches the tables, not the timeline; without details or for load_analysis, no
    details files either (recorded by wrapping RemoteRun.fetch)."""
    fetched = []
    real_fetch = fs.RemoteRun.fetch
    monkeypatch.setattr(fs.RemoteRun, "fetch", lambda self, relative, local: fetched.append(relative) or
                        real_fetch(self, relative, local))
    tb_hwprof.load_run(f"{LOGDIR}/nsys")
    assert metadata.TIMELINE_INDEX not in fetched and metadata.TIMELINE not in fetched and metadata.KERNELS in fetched
    fetched.clear()
    tb_hwprof.load_run(f"{LOGDIR}/ncu", with_details=False)
    tb_hwprof.load_analysis(f"{LOGDIR}/ncu")
    assert fetched and not [f for f in fetched if f.startswith(metadata.DETAILS_DIR)]
    fetched.clear()
    assert len(tb_hwprof.load_run(f"{LOGDIR}/ncu").raw_metrics) == len(tb_hwprof.load_run(exported["ncu"]).kernels)
    assert [f for f in fetched if f.startswith(metadata.DETAILS_DIR)]


def test_load_run_of_a_too_new_run_names_the_url(s3, exported, samples_dir):
    from tb_hwprof.core.errors import FormatVersionError
    tb_hwprof.export(samples_dir / NCU, LOGDIR, "too-new")
    key = "runs/too-new/plugins/tb_hwprof/profile.json"
    manifest = json.loads(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    s3.put_object(Bucket=BUCKET, Key=key, Body=json.dumps({**manifest, "format_version": 99}).encode())
    with pytest.raises(FormatVersionError) as e:
        tb_hwprof.load_run(f"{LOGDIR}/too-new")
    assert str(e.value).startswith(f"{LOGDIR}/too-new/plugins/tb_hwprof/profile.json: format version 99")
    s3.delete_object(Bucket=BUCKET, Key=event_keys(s3, "too-new")[0])  # not listed by later tests


def test_load_run_of_no_run_names_the_url(exported):
    with pytest.raises(InputError) as e:
        tb_hwprof.load_run(f"{LOGDIR}/nothing-here")
    assert str(e.value).startswith(f"{LOGDIR}/nothing-here: not a tb-hwprof run")


def test_cli_export_to_s3(s3, exported, samples_dir):
    done = export_cli(samples_dir / NSYS, "--logdir", LOGDIR, "--run", "cli")
    assert done.returncode == 0, done.stderr
    assert f"{LOGDIR}/cli: timeline kept" in done.stdout
    assert f"to {LOGDIR}: tensorboard --logdir {LOGDIR}" in done.stdout
    assert len(event_keys(s3, "cli")) == 1
    assert tb_hwprof.logdir.reader.read_manifest(f"{LOGDIR}/cli")["kernel_count"] == nsys_kernels(samples_dir / NSYS)


def test_series_export_to_s3(s3, exported, samples_dir):
    """Two reports under one --run: runs series/<stem> and the group's series event file, whose
    steps TensorBoard reads (through its own S3 reader) for the Scalars tab."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    series = samples_dir / "ncu" / "armleth_t4_series"
    done = export_cli(series / "report_v2.ncu-rep", series / "report_v3_loop_unroll.ncu-rep",
                      "--logdir", LOGDIR, "--run", "series")
    assert done.returncode == 0, done.stderr
    for stem in ("report_v2", "report_v3_loop_unroll"):
        assert len(event_keys(s3, f"series/{stem}")) == 1
    [group_events] = [k for k in keys(s3, "runs/series/") if k.endswith(metadata.SERIES_EVENTS_SUFFIX)]
    assert group_events.count("/") == 2 and "tfevents" in group_events
    steps = {e.step for e in EventFileLoader(f"s3://{BUCKET}/{group_events}").Load() if e.HasField("summary")}
    assert steps == {0, 1}


def test_trace_command_refuses_a_url_in_one_line(exported):
    done = subprocess.run([sys.executable, "-m", "tb_hwprof", "trace", f"{LOGDIR}/nsys"], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode != 0 and "writes into local runs only" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_export_refuses_an_existing_run_before_reading(s3, exported, samples_dir):
    with pytest.raises(RunExists) as e:
        tb_hwprof.export(samples_dir / "missing-report-never-read.ncu-rep", LOGDIR, "ncu")
    assert f"{LOGDIR}/ncu: run already exists" in str(e.value)
    done = export_cli(samples_dir / NCU, "--logdir", LOGDIR, "--run", "ncu")
    assert done.returncode != 0 and "run already exists -- pass --overwrite" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


# -- the plugin ------------------------------------------------------------------------------
def test_plugin_lists_and_serves_runs_from_s3(s3, app, exported, samples_dir, ncu_report_module):
    runs = {r["run"]: r for r in app.json("/runs")["runs"]}
    assert set(RUNS) <= set(runs)  # (and the runs earlier tests exported)
    assert all(runs[r]["error"] is None for r in RUNS), runs
    n_ncu = ncu_launches(ncu_report_module, samples_dir / NCU)
    assert runs["ncu"]["kernel_count"] == n_ncu
    assert len(app.json("/kernels", run="ncu")["data"]["launch_id"]) == n_ncu
    assert len(app.json("/kernels", run="nsys")["data"]["launch_id"]) == nsys_kernels(samples_dir / NSYS)
    first = next(ncu_actions(ncu_report_module, samples_dir / NCU))
    detail = app.json("/kernel", run="ncu", launch="0")
    assert detail["raw_metrics"]["gpu__time_duration.sum"][0] == pytest.approx(
        first.metric_by_name("gpu__time_duration.sum").as_double())
    # The documents built from the bucket equal those built from the local export of the same reports.
    local = App(exported["ncu"].parent)
    for route, run in (("/roofline", "ncu"), ("/timeline", "nsys"), ("/overview", "torch")):
        assert app.json(route, run=run) == local.json(route, run=run), route
    prefix = "runs/nsys/plugins/tb_hwprof/summary_"
    names = [k[len(prefix):-len(".json.gz")] for k in keys(s3, prefix)]
    assert names
    for name in names:
        assert app.json("/summary", run="nsys", name=name) == local.json("/summary", run="nsys", name=name), name
    assert app.json("/compare", base="ncu", run="ncu") == local.json("/compare", base="ncu", run="ncu")
    assert app.json("/timeline", run="nsys")["returned"] > 0
    # The trace download: the run's timeline.json.gz, as the local plugin sends it.
    remote_trace, local_trace = app.get(P + "/trace", run="nsys"), local.get(P + "/trace", run="nsys")
    assert remote_trace.status_code == 200 and remote_trace.data == local_trace.data


def test_plugin_fetches_only_what_the_view_needs(exported):
    """Opening the Kernels view of a run fetches its manifest and kernels table, not its details
    files or timeline (a fresh store: nothing cached)."""
    app = App(LOGDIR)
    app.json("/runs")
    app.json("/kernels", run="ncu")
    mirror = app.store.mirror
    fetched = sorted(p.relative_to(mirror).parts[-1] for p in mirror.rglob("*") if p.is_file())
    listed = len(app.json("/runs")["runs"])
    assert fetched == sorted([metadata.MANIFEST] * listed + [metadata.KERNELS])
    app.json("/kernel", run="ncu", launch="1")
    # The launch's details file, and whichever summaries the drawer reads (its sections, hotspots).
    got = sorted(p.name for p in mirror.rglob("*.json.gz") if not p.name.startswith("summary_"))
    assert got == sorted([metadata.details_file(0).split("/")[-1], metadata.KERNELS])
    # The timeline index is read by ranges where it lies: nothing of it lands in the mirror.
    assert app.json("/timeline", run="nsys")["returned"] > 0
    assert not [p for p in mirror.rglob("*") if p.is_file() and metadata.TIMELINE_INDEX in p.name]


def test_plugin_rereads_a_run_replaced_in_the_bucket(s3, samples_dir, exported):
    """An --overwrite seen by a running plugin: the new version's objects, in a mirror folder of
    its own."""
    app = App(LOGDIR)
    before = len(app.json("/kernels", run="torch")["data"]["launch_id"])
    tb_hwprof.export(samples_dir / NSYS, LOGDIR, "torch", overwrite=True)
    try:
        after = len(app.json("/kernels", run="torch")["data"]["launch_id"])
        assert after == nsys_kernels(samples_dir / NSYS) != before
        # One version of the run in the mirror: the old one's objects were removed.
        assert len(list(app.store.mirror.glob(f"run-torch/*/plugins/tb_hwprof/{metadata.KERNELS}"))) == 1
    finally:
        tb_hwprof.export(samples_dir / TORCH, LOGDIR, "torch", overwrite=True)


# -- atomicity: killed exports, overwrite ----------------------------------------------------
def local_file_count(local_run: Path) -> int:
    return sum(1 for p in local_run.rglob("*") if p.is_file())


@pytest.mark.parametrize("phase", ["staging", "copy"])
def test_killed_export_is_never_listed_and_is_cleaned(s3, exported, samples_dir, phase, ncu_report_module,
                                                       tmp_path, monkeypatch):
    """An export killed (SIGKILL) while uploading to staging, or while copying into place, leaves no
    event file under the run (TensorBoard lists none, load_run refuses it).  The next export (of any
    run) deletes the dead export's staging prefix; one killed while copying is first rolled forward
    (its copies finished: the run complete), one killed while staging leaves the name free.  The
    local folder the dead export wrote its run into (a whole run, in TMPDIR) is removed too."""
    files = local_file_count(exported["ncu"])
    writes = 2 if phase == "staging" else files + 1 + 2  # every object staged, the COPYING mark, two copies
    run = f"killed-{phase}"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = export_cli(samples_dir / NCU, "--logdir", LOGDIR, "--run", run,
                      env={fs.KILL_AFTER_WRITES_ENV: str(writes), "TMPDIR": str(scratch)})
    assert done.returncode == -9, done.stderr
    [left] = scratch.iterdir()  # the dead export's local run
    assert left.name.startswith("tb-hwprof-export@") and local_file_count(left) >= files
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    live = scratch / f"tb-hwprof-export@{os.getpid()}@{socket.gethostname()}@live"
    live.mkdir()  # a live export's (this process'): kept
    staged = keys(s3, f"runs/{metadata.WORK_AREA}/staging/")
    assert staged and all(k.split("/")[3].startswith(run + "@") for k in staged)
    assert not any("tfevents" in k for k in staged)  # the staged event file has its pending name
    placed = keys(s3, f"runs/{run}/")
    assert (placed == []) if phase == "staging" else (len(placed) == 2 and not event_keys(s3, run))
    assert run not in {r["run"] for r in App(LOGDIR).json("/runs")["runs"]}
    with pytest.raises(InputError, match="not a tb-hwprof run"):
        tb_hwprof.load_run(f"{LOGDIR}/{run}")
    tb_hwprof.export(samples_dir / NSYS, LOGDIR, f"after-{phase}")  # any later export tidies up
    assert keys(s3, f"runs/{metadata.WORK_AREA}/") == []
    assert [p for p in scratch.iterdir() if p.name.startswith("tb-hwprof-export@")] == [live]
    if phase == "staging":
        assert keys(s3, f"runs/{run}/") == []
        tb_hwprof.export(samples_dir / NCU, LOGDIR, run)  # the name is free
    assert len(event_keys(s3, run)) == 1
    assert len(keys(s3, f"runs/{run}/plugins/")) == files - 1
    assert len(tb_hwprof.load_run(f"{LOGDIR}/{run}").kernels) == ncu_launches(ncu_report_module, samples_dir / NCU)


def test_a_dead_export_is_not_rolled_over_a_later_one(s3, exported, samples_dir, monkeypatch):
    """A dead export found only later (another host's, once stale) whose run was exported again
    since: its staging prefix is deleted, not copied over the newer run."""
    done = export_cli(samples_dir / NCU, "--logdir", LOGDIR, "--run", "later",
                      env={fs.KILL_AFTER_WRITES_ENV: str(local_file_count(exported["ncu"]) + 1)})  # COPYING written
    assert done.returncode == -9
    [staging] = {k.split("/")[3] for k in keys(s3, f"runs/{metadata.WORK_AREA}/staging/")}
    monkeypatch.setattr(fs, "staging_stale", lambda name, now: False)  # as another host's, not yet stale
    import time
    time.sleep(1.1)  # the later export's event file is written in a later second than the dead one started
    tb_hwprof.export(samples_dir / NSYS, LOGDIR, "later")
    monkeypatch.setattr(fs, "staging_stale", lambda name, now: True)  # hours later
    tb_hwprof.export(samples_dir / NSYS, LOGDIR, "later-too")
    assert keys(s3, f"runs/{metadata.WORK_AREA}/") == [] and staging.startswith("later@")
    assert len(tb_hwprof.load_run(f"{LOGDIR}/later").kernels) == nsys_kernels(samples_dir / NSYS)


def test_overwrite_replaces_the_run_and_its_old_files(s3, exported, samples_dir):
    tb_hwprof.export(samples_dir / NCU, LOGDIR, "replaced")
    old_events = event_keys(s3, "replaced")
    assert any("/details/" in k for k in keys(s3, "runs/replaced/"))
    tb_hwprof.export(samples_dir / NSYS, LOGDIR, "replaced", overwrite=True)
    assert len(tb_hwprof.load_run(f"{LOGDIR}/replaced").kernels) == nsys_kernels(samples_dir / NSYS)
    # The ncu run's details are gone (the nsys run has none), one event file: the new one.
    assert not any("/details/" in k for k in keys(s3, "runs/replaced/"))
    new_events = event_keys(s3, "replaced")
    # (An export in the same second, by the same process, writes an event file of the same name.)
    assert len(new_events) == 1 and (new_events != old_events or old_events[0].split(".")[3] == new_events[0].split(".")[3])
    manifest = json.loads(s3.get_object(Bucket=BUCKET, Key="runs/replaced/plugins/tb_hwprof/profile.json")["Body"].read())
    assert manifest["provenance"]["tool"] == "nsys"


# -- confinement -----------------------------------------------------------------------------
HOSTILE = ["../runs2/x", "..", "ncu/../../runs2", "%2e%2e/secret", "..%2f..%2fhwprof-secret", f"../../{OTHER_BUCKET}/runs/secret",
           "a?versionId=1", "a#b", "a\\..\\b", "/abs", ".tb-hwprof/staging"]


@pytest.mark.parametrize("run", HOSTILE)
def test_hostile_run_names_stay_in_the_logdir(app, run):
    from tb_hwprof.plugin.store import HttpError
    with pytest.raises(HwprofError):
        fs.RemoteDir(LOGDIR).key(run)
    with pytest.raises(HttpError) as e:
        app.store.run_dir(run)
    assert e.value.code == 404
    response = app.get("/data/plugin/tb_hwprof/kernels", run=run)
    assert response.status_code in (400, 404)


def test_a_run_missing_its_kernels_table_names_its_url(s3, exported, samples_dir):
    tb_hwprof.export(samples_dir / NCU, LOGDIR, "damaged")
    s3.delete_object(Bucket=BUCKET, Key="runs/damaged/plugins/tb_hwprof/kernels.json.gz")
    [row] = [r for r in App(LOGDIR).json("/runs")["runs"] if r["run"] == "damaged"]
    assert row["error"] == (f"{LOGDIR}/damaged: missing {metadata.KERNELS} -- re-export the run with --overwrite")
    s3.delete_object(Bucket=BUCKET, Key=event_keys(s3, "damaged")[0])  # not a run any more: not listed


def test_glob_characters_in_run_names_touch_no_other_run(s3, exported, samples_dir):
    """Runs named 'g*b' and 'g[x]b' are exported, overwritten and read as themselves: the other
    runs their names would match as globs ('gXb', 'gxb') keep every object."""
    for run in ("gXb", "gxb", "g*b", "g[x]b"):
        tb_hwprof.export(samples_dir / NCU, LOGDIR, run)
    kept = keys(s3, "runs/gXb/") + keys(s3, "runs/gxb/")
    for run in ("g*b", "g[x]b"):
        tb_hwprof.export(samples_dir / NSYS, LOGDIR, run, overwrite=True)
        assert len(tb_hwprof.load_run(f"{LOGDIR}/{run}").kernels) == nsys_kernels(samples_dir / NSYS)
    assert keys(s3, "runs/gXb/") + keys(s3, "runs/gxb/") == kept
    assert len(tb_hwprof.load_run(f"{LOGDIR}/gxb").raw_metrics) == len(tb_hwprof.load_run(exported["ncu"]).kernels)


def test_a_logdir_url_without_its_filesystem_answers_422_naming_the_extra(monkeypatch):
    """The plugin of a TensorBoard on gs:// without gcsfs: each run answers a one-line 422 saying what
    to install (TensorBoard itself still starts)."""
    from tb_hwprof.plugin.store import HttpError, RunStore
    monkeypatch.setitem(sys.modules, "gcsfs", None)  # importing it fails, installed or not
    store = RunStore("gs://bucket/runs")
    with pytest.raises(HttpError) as e:
        store.run_dir("baseline")
    assert e.value.code == 422 and "gs://bucket/runs" in e.value.message and "tb-hwprof[gcs]" in e.value.message


def test_an_asset_name_cannot_leave_the_run(app):
    from tb_hwprof.plugin.store import HttpError
    entry = app.store.entry("ncu", app.store.run_dir("ncu"))
    for relative in ("../../nsys/plugins/tb_hwprof/kernels.json.gz", "../profile.json"):
        with pytest.raises(HttpError) as e:
            entry.asset(relative)
        assert e.value.code == 404


# -- TensorBoard itself on s3:// and Chromium ------------------------------------------------
def test_tensorboard_on_s3_lists_runs_and_opens_the_views(s3, exported, tmp_path_factory, monkeypatch):
    browser_support = pytest.importorskip("browser_support")
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the TensorBoard subprocess imports this checkout's plugin
    served = browser_support.serve_tensorboard(LOGDIR, tmp_path_factory, set(RUNS))
    base = next(served)
    try:
        for browser in browser_support.launch_browser():
            for session in browser_support.open_session(browser, base):
                frame = session.open()
                frame.wait_for_selector("table[data-role=runs] tbody tr[data-run]")
                listed = frame.eval_on_selector_all("table[data-role=runs] tbody tr[data-run]",
                                                    "rs => rs.map(r => r.dataset.run)")
                assert set(RUNS) <= set(listed)
                n = len(tb_hwprof.load_run(exported["ncu"]).kernels)
                frame = session.go("#view=kernels&run=ncu")
                browser_support.wait_rows(frame, "kernels")
                assert frame.locator("table[data-role=kernels] tbody tr[data-row-id]").count() >= min(n, 20)
                kernels = tb_hwprof.load_run(exported["ncu"]).kernels
                points = int(((kernels["ai_dram"] > 0) & (kernels["flop_per_s"] > 0)).sum())
                assert points > 0
                browser_support.open_roofline(session, "ncu", points)
                frame = session.go("#view=timeline&run=nsys")
                frame.locator("[data-role=timeline-lanes] .lane-label").first.wait_for(timeout=30000)
                session.shot("remote-s3-timeline")
    finally:
        served.close()


# -- any fsspec URL: memory:// (in process), local:// and a filesystem without change fields ----
MEMORY = "memory://hwprof-mem/runs"
MEMORY_RUNS = {"ncu": NCU, "nsys": NSYS}


@pytest.fixture(scope="module")
def in_memory(samples_dir, tmp_path_factory):
    """Two samples exported to memory:// (fsspec's in-process filesystem: no ETag, no mtime, its
    own listing semantics) and to a local logdir: {run: local run folder}; the memory logdir is
    removed afterwards."""
    local = tmp_path_factory.mktemp("memory") / "local"
    out = {}
    for run, name in MEMORY_RUNS.items():
        assert tb_hwprof.export(sample(samples_dir, name), MEMORY, run) == f"{MEMORY}/{run}"
        out[run] = tb_hwprof.export(sample(samples_dir, name), local, run)
    yield out
    fsspec.filesystem("memory").rm("/hwprof-mem", recursive=True)


def memory_objects(prefix: str) -> dict:
    """{key under prefix: bytes} read with fsspec's memory filesystem itself, not through tb_hwprof."""
    memory = fsspec.filesystem("memory")
    root = f"/hwprof-mem/runs/{prefix}"
    return {k[len(root):]: memory.cat_file(k) for k in memory.find(root)}


def test_memory_logdir_holds_the_runs_files(in_memory):
    for run, local_run in in_memory.items():
        local_assets = local_run.joinpath(*metadata.ASSET_DIR)
        objects = memory_objects(f"{run}/plugins/tb_hwprof/")
        local_files = sorted(p.relative_to(local_assets).as_posix() for p in local_assets.rglob("*") if p.is_file())
        assert sorted(objects) == local_files
        for name in local_files:
            if name.endswith(".json.gz"):
                assert gzip.decompress(objects[name]) == gzip.decompress((local_assets / name).read_bytes()), name
        assert len([k for k in memory_objects(f"{run}/") if "/" not in k and "tfevents" in k]) == 1
    assert memory_objects(f"{metadata.WORK_AREA}/") == {}  # no staging left


def test_load_run_from_memory_equals_the_local_export(in_memory, samples_dir, ncu_report_module):
    import pandas.testing as pdt
    for run, local_run in in_memory.items():
        remote, local = tb_hwprof.load_run(f"{MEMORY}/{run}"), tb_hwprof.load_run(local_run)
        pdt.assert_frame_equal(remote.kernels, local.kernels)
        assert remote.raw_metrics == local.raw_metrics and sorted(remote.summaries) == sorted(local.summaries)
    assert len(tb_hwprof.load_run(f"{MEMORY}/ncu").kernels) == ncu_launches(ncu_report_module, samples_dir / NCU)
    assert len(tb_hwprof.load_run(f"{MEMORY}/nsys").kernels) == nsys_kernels(samples_dir / NSYS)


def test_plugin_serves_a_memory_logdir_as_the_local_one(in_memory, samples_dir, ncu_report_module):
    """TensorBoard (its fsspec gfile) lists the memory runs; /runs, /kernels, /timeline, /summary
    and /trace equal the local plugin's over the same reports."""
    app, local = App(MEMORY), App(in_memory["ncu"].parent)
    runs = {r["run"]: r for r in app.json("/runs")["runs"]}
    assert set(runs) == set(MEMORY_RUNS) and all(r["error"] is None for r in runs.values()), runs
    assert runs["ncu"]["kernel_count"] == ncu_launches(ncu_report_module, samples_dir / NCU)
    assert len(app.json("/kernels", run="nsys")["data"]["launch_id"]) == nsys_kernels(samples_dir / NSYS)
    for route, run in (("/kernels", "ncu"), ("/kernels", "nsys"), ("/timeline", "nsys"), ("/overview", "nsys")):
        assert app.json(route, run=run) == local.json(route, run=run), route
    assert app.json("/timeline", run="nsys", max_events=50) == local.json("/timeline", run="nsys", max_events=50)
    names = [k[len("summary_"):-len(".json.gz")] for k in memory_objects("nsys/plugins/tb_hwprof/")
             if k.startswith("summary_")]
    assert names
    for name in names:
        assert app.json("/summary", run="nsys", name=name) == local.json("/summary", run="nsys", name=name), name
    assert app.get(P + "/trace", run="nsys").data == local.get(P + "/trace", run="nsys").data


def test_a_burst_of_requests_lists_a_run_once(in_memory, monkeypatch):
    """The run signatures reuse one listing per run for LISTING_TTL_S: counted on the memory
    filesystem's ls, with a TTL long enough that timing cannot matter, then with none."""
    app = App(MEMORY)
    app.json("/runs")
    listed = []
    memory = fsspec.filesystem("memory")
    real_ls = type(memory).ls
    monkeypatch.setattr(type(memory), "ls", lambda self, path, *a, **k: listed.append(path) or real_ls(self, path, *a, **k))
    burst = lambda: [app.json(route, run="nsys") for route in ("/kernels", "/overview", "/timeline", "/kernels")]
    assets = "/hwprof-mem/runs/nsys/plugins/tb_hwprof"
    monkeypatch.setattr(fs, "LISTING_TTL_S", 3600.0)
    fs._RECENT.forget()
    burst()
    assert listed.count(assets) == 1
    listed.clear()
    monkeypatch.setattr(fs, "LISTING_TTL_S", 0.0)
    burst()
    assert listed.count(assets) >= 4  # every request lists again


def test_a_run_rewritten_by_another_process_is_seen_after_the_ttl(in_memory, monkeypatch):
    """A manifest rewritten behind the plugin's back (the memory filesystem directly, as another
    process would): the cached signature holds for LISTING_TTL_S, then the new one is read."""
    app = App(MEMORY)
    monkeypatch.setattr(fs, "LISTING_TTL_S", 3600.0)
    before = app.json("/runs")
    memory = fsspec.filesystem("memory")
    key = "/hwprof-mem/runs/ncu/plugins/tb_hwprof/profile.json"
    original = memory.cat_file(key)
    manifest = json.loads(original)
    memory.pipe_file(key, json.dumps({**manifest, "kernel_count": manifest["kernel_count"] + 1}).encode())
    try:
        assert app.json("/runs") == before  # within the TTL: the cached signature and manifest
        monkeypatch.setattr(fs, "LISTING_TTL_S", 0.0)
        runs = {r["run"]: r for r in app.json("/runs")["runs"]}
        assert runs["ncu"]["kernel_count"] == manifest["kernel_count"] + 1
    finally:
        memory.pipe_file(key, original)
        fs._RECENT.forget()


class UntaggedMemory(MemoryFileSystem):
    """fsspec's memory filesystem whose listings carry no field that changes when an object is
    rewritten (as some HTTP or FTP servers): only names, sizes and types."""

    protocol = "untaggedmem"
    store, pseudo_dirs = {}, [""]  # its own objects, not memory://'s

    @classmethod
    def _strip_protocol(cls, path):  # the base strips "memory://" only
        return super()._strip_protocol(path.replace("untaggedmem://", "memory://", 1))

    def info(self, path, **kwargs):
        return {k: v for k, v in super().info(path, **kwargs).items() if k in ("name", "size", "type")}

    def ls(self, path, detail=True, **kwargs):
        out = super().ls(path, detail=detail, **kwargs)
        return [{k: v for k, v in i.items() if k in ("name", "size", "type")} for i in out] if detail else out


def test_a_filesystem_without_change_fields_still_sees_a_rewritten_run(samples_dir, monkeypatch):
    """A run rewritten with objects of the same sizes: a signature of sizes alone would keep the old
    run; the manifest's content hash tells them apart."""
    fsspec.register_implementation("untaggedmem", UntaggedMemory, clobber=True)
    url = "untaggedmem://bucket/runs"
    try:
        tb_hwprof.export(sample(samples_dir, NCU), url, "ncu")
        remote = fs.RemoteRun(fs.RemoteDir(url), "ncu")
        monkeypatch.setattr(fs, "LISTING_TTL_S", 0.0)
        before = remote.signature()
        assert all(tag is not None for _, tag, _ in before)
        memory = fsspec.filesystem("untaggedmem")
        key = "/bucket/runs/ncu/plugins/tb_hwprof/profile.json"
        original = memory.cat_file(key)
        same_size = original.replace(b'"format_version": 2', b'"format_version": 3')
        assert same_size != original and len(same_size) == len(original)
        memory.pipe_file(key, same_size)
        after = remote.signature()
        assert [size for *_, size in after] == [size for *_, size in before] and after != before
    finally:
        UntaggedMemory.store.clear()
        UntaggedMemory.pseudo_dirs[:] = [""]


def test_plugin_on_a_local_url(samples_dir, tmp_path, ncu_report_module):
    """local:// (fsspec's local filesystem reached through the URL code: mtimes, real folders)."""
    url = f"local://{tmp_path}/runs"
    assert tb_hwprof.export(sample(samples_dir, NCU), url, "ncu") == f"{url}/ncu"
    assert len(tb_hwprof.load_run(f"{url}/ncu").kernels) == ncu_launches(ncu_report_module, samples_dir / NCU)
    staging = tmp_path / "runs" / metadata.WORK_AREA / "staging"
    assert not staging.exists() or not list(staging.iterdir())  # objects and their folders removed
    app = App(url)
    assert [r["run"] for r in app.json("/runs")["runs"]] == ["ncu"]
    assert app.json("/kernels", run="ncu") == App(tmp_path / "runs").json("/kernels", run="ncu")
    tb_hwprof.export(sample(samples_dir, NSYS), url, "ncu", overwrite=True)
    assert len(app.json("/kernels", run="ncu")["data"]["launch_id"]) == nsys_kernels(samples_dir / NSYS)
    assert not (tmp_path / "runs/ncu/plugins/tb_hwprof/details").exists() or not list(
        (tmp_path / "runs/ncu/plugins/tb_hwprof/details").rglob("*.json.gz"))  # the ncu run's details gone


def test_a_dead_export_is_not_rolled_over_a_later_one_on_memory(samples_dir, monkeypatch):
    """The roll-forward's 'exported again since' check on a filesystem that lists times as numbers
    ('created', seconds) rather than S3's LastModified datetimes."""
    url = "memory://hwprof-mem-dead/runs"

    def copies_fail(*args):
        raise RuntimeError("the export dies while copying into place")
    try:
        monkeypatch.setattr(fs, "copy_into_place", copies_fail)
        with pytest.raises(RuntimeError):
            tb_hwprof.export(sample(samples_dir, NCU), url, "later")  # staged, COPYING marked, kept
        monkeypatch.undo()
        [staging] = memory_objects_under("/hwprof-mem-dead/runs/.tb-hwprof/staging/")
        monkeypatch.setattr(fs, "staging_stale", lambda name, now: False)  # another host's, not yet stale
        import time
        time.sleep(1.1)  # the later export's event file is named by a later second than the dead one's
        tb_hwprof.export(sample(samples_dir, NSYS), url, "later")
        monkeypatch.setattr(fs, "staging_stale", lambda name, now: True)  # hours later
        tb_hwprof.export(sample(samples_dir, NSYS), url, "later-too")
        assert memory_objects_under("/hwprof-mem-dead/runs/.tb-hwprof/") == [] and staging.startswith("later@")
        assert len(tb_hwprof.load_run(f"{url}/later").kernels) == nsys_kernels(samples_dir / NSYS)
    finally:
        fsspec.filesystem("memory").rm("/hwprof-mem-dead", recursive=True)


def memory_objects_under(prefix: str) -> list:
    """The first key part under `prefix` of each object of fsspec's memory filesystem there."""
    return sorted({k[len(prefix):].split("/")[0] for k in fsspec.filesystem("memory").find(prefix)})


def test_modified_time_of_each_filesystems_listing():
    import datetime
    when = datetime.datetime(2026, 12, 1, 22, 0, tzinfo=datetime.timezone.utc)
    for info in ({"LastModified": when}, {"last_modified": when}, {"mtime": when.timestamp()},
                 {"updated": "2026-12-01T22:00:00.000Z"}, {"created": when.timestamp()}):
        assert fs.modified_time(info) == when.timestamp(), info
    assert fs.modified_time({"size": 3}) is None


def test_timeline_windows_read_by_ranges_from_s3_equal_the_local_ones(s3, samples_dir, tmp_path, monkeypatch):
    """An index of many chunks and a decimated overview (both shrunk for the 423-slice DLProf
    capture): the whole capture and zoomed windows served from S3 (chunks read by ranges) equal
    the local plugin's, and nothing of the index lands in the mirror."""
    from support_nsys import DLPROF
    from tb_hwprof.logdir import trace
    monkeypatch.setattr(trace, "CHUNK_ROWS", 16)
    monkeypatch.setattr(trace, "OVERVIEW_EVENTS", 100)
    local = tmp_path / "local"
    tb_hwprof.export(sample(samples_dir, DLPROF), LOGDIR, "chunked")
    tb_hwprof.export(sample(samples_dir, DLPROF), local, "chunked")
    try:
        remote_app, local_app = App(LOGDIR), App(local)
        whole = remote_app.json("/timeline", run="chunked", max_events=100)
        assert whole == local_app.json("/timeline", run="chunked", max_events=100) and whole["decimated"]
        lo, hi = whole["capture_ns"]
        for k in (2, 5, 9):
            window = {"start": lo + (hi - lo) * k // 10, "end": lo + (hi - lo) * (k + 1) // 10}
            assert remote_app.json("/timeline", run="chunked", **window) == local_app.json("/timeline", run="chunked", **window)
        mirror = remote_app.store.mirror
        assert not [p for p in mirror.rglob("*") if p.is_file() and metadata.TIMELINE_INDEX in p.name]
    finally:
        for key in keys(s3, "runs/chunked/"):
            s3.delete_object(Bucket=BUCKET, Key=key)


# -- an optimisation series on object storage ----------------------------------------------------
SERIES_MEMORY = "memory://hwprof-series/runs"  # a root of its own: the memory runs above list exactly theirs


@pytest.fixture(scope="module")
def series_in_memory(samples_dir, tmp_path_factory):
    """The T4 series (a kernel renamed twice) exported under one --run to memory:// and to a local
    logdir, and one report alone beside it; the memory root is removed afterwards."""
    from tb_hwprof.app import cli
    files = [str(sample(samples_dir, name)) for name in CHAIN]
    local = tmp_path_factory.mktemp("series") / "runs"
    for logdir in (SERIES_MEMORY, str(local)):
        assert cli.main(["export", *files, "--logdir", logdir, "--run", "tuning", "--step", "3", "--quiet"]) == 0
        assert cli.main(["export", files[0], "--logdir", logdir, "--run", "alone/v2", "--quiet"]) == 0
    yield local
    fsspec.filesystem("memory").rm("/hwprof-series", recursive=True)


def test_the_series_view_on_object_storage_equals_the_local_one(series_in_memory, samples_dir, ncu_report_module):
    """/series reads its steps from TensorBoard's listing and its runs where they lie: on memory://
    it equals the local logdir's document, whose figures test_series checks against ncu_report."""
    app, local = App(SERIES_MEMORY), App(series_in_memory)
    runs = [f"tuning/{name.rsplit('/', 1)[1][: -len('.ncu-rep')]}" for name in CHAIN]
    doc = app.json("/series", run=runs[1])
    assert doc == local.json("/series", run=runs[1])
    assert doc["steps"] == [{"step": 3 + i, "run": r} for i, r in enumerate(runs)]
    [chain] = doc["chains"]
    for point, name in zip(chain["points"], CHAIN):
        want = oracle_step(ncu_report_module, sample(samples_dir, name))
        assert point["label"] == want["name"]
        assert all(point[m] == pytest.approx(want[m], rel=1e-6) for m in ORACLE)
    # A run in a folder without the series' event file is no step of one, there as here.
    for logdir_app in (app, local):
        assert "not a step of a series" in logdir_app.json("/series", expect=404, run="alone/v2")["error"]
