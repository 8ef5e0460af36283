"""Multi-rank job export (issue 14, tb_hwprof/app/jobs.py), in this process and on an in-process Dask
cluster, on HTA's real 2-rank capture (hta_sampled_2rank_rank0/1): runs job/rank_N and job, each
rank run equal to a plain export of its file, the rank and world size as the raw trace's
distributedInfo says (read with stdlib gzip/json), bad and mixed ranks leaving the logdir as it was."""
import gzip
import json
import os
import shutil
import sqlite3
import sys
import time

import pandas as pd
import pytest

from tb_hwprof.app import cli, jobs
from tb_hwprof.app.export import export_report
from tb_hwprof.core.errors import InputError, MissingDependency, RunExists
from tb_hwprof.logdir.reader import load_run, read_kernels, read_manifest

from conftest import sample

RANKS = ["torch/hta_sampled_2rank_rank0.json.gz", "torch/hta_sampled_2rank_rank1.json.gz"]
OTHER_JOB = "torch/hta_trace_diff_test.json.gz"  # distributedInfo: rank 1 of world size 2
NSYS = ["nsys/gpu4_t4_2022.4.2.sqlite", "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite"]


@pytest.fixture
def rank_files(samples_dir):
    return [sample(samples_dir, name) for name in RANKS]


def raw_trace(path) -> dict:
    with gzip.open(path) as f:
        return json.load(f)


def raw_kernels(path) -> int:
    return sum(1 for e in raw_trace(path)["traceEvents"] if e.get("cat") == "kernel")


def tree(folder):
    """Every path under `folder` with its size and mtime: what "the logdir is unchanged" compares."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) if p.is_file() else None
            for p in sorted(folder.rglob("*"))}


def truncated_copy(path, tmp_path):
    """A damaged rank: the real file cut at half its bytes (damage made by truncation)."""
    data = path.read_bytes()
    bad = tmp_path / "bad" / path.name
    bad.parent.mkdir()
    bad.write_bytes(data[: len(data) // 2])
    return bad


def test_in_process_job_has_a_run_per_rank_and_the_job_run(rank_files, tmp_path):
    runs = jobs.export_job(rank_files, tmp_path / "logs", "job", scheduler="none")
    logs = tmp_path / "logs"
    assert runs == [logs / "job" / "rank_0", logs / "job" / "rank_1", logs / "job"]
    for path in rank_files:
        info = raw_trace(path)["distributedInfo"]
        run = logs / "job" / f"rank_{info['rank']}"
        assert read_manifest(run)["kernel_count"] == raw_kernels(path)
    ranks = load_run(logs / "job").summaries["ranks"]
    expected = sorted(raw_trace(p)["distributedInfo"]["rank"] for p in rank_files)
    assert ranks["rank"].tolist() == expected
    assert ranks["world_size"].tolist() == [raw_trace(p)["distributedInfo"]["world_size"] for p in rank_files]
    assert ranks["run"].tolist() == [f"job/rank_{r}" for r in expected]
    # nothing of the export's hidden staging is left, and every run shows its event file
    assert not (logs / ".tb-hwprof").exists()
    for run in runs:
        assert len([p for p in run.iterdir() if p.name.startswith("events.out.tfevents.")]) == 1


def test_a_rank_run_equals_a_plain_export_of_its_file(rank_files, tmp_path):
    jobs.export_job(rank_files, tmp_path / "job", "job", scheduler="none")
    for rank, path in enumerate(rank_files):
        single = export_report(path, tmp_path / "single", f"r{rank}")
        in_job = tmp_path / "job" / "job" / f"rank_{rank}"
        pd.testing.assert_frame_equal(read_kernels(in_job), read_kernels(single))
        job_manifest, single_manifest = read_manifest(in_job), read_manifest(single)
        assert job_manifest["summary"] == single_manifest["summary"]
        assert sorted(job_manifest["files"]) == sorted(single_manifest["files"])


def test_job_notes_say_where_each_rank_ran(rank_files, tmp_path):
    jobs.export_job(rank_files, tmp_path, "job", scheduler="none")
    notes = read_manifest(tmp_path / "job")["notes"]
    for rank, path in enumerate(rank_files):
        assert any(n.startswith(f"rank {rank}: {path} exported on {jobs.IN_PROCESS_WORKER}") for n in notes)


def test_on_a_dask_cluster_the_ranks_run_on_its_workers(rank_files, tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        workers = set(cluster.scheduler.workers)
        jobs.export_job(rank_files, tmp_path, "job", scheduler=cluster.scheduler_address)
    ran_on = {n.split(" exported on ")[1].split(" in ")[0] for n in read_manifest(tmp_path / "job")["notes"]
              if " exported on " in n}
    assert ran_on and ran_on <= workers
    for rank, path in enumerate(rank_files):
        assert read_manifest(tmp_path / "job" / f"rank_{rank}")["kernel_count"] == raw_kernels(path)


def test_a_bad_rank_stops_the_job_and_leaves_the_logdir_as_it_was(rank_files, tmp_path):
    logs = tmp_path / "logs"
    export_report(rank_files[0], logs, "other")  # a run already there stays as it is
    jobs.export_job(rank_files, logs, "job", scheduler="none")  # and a job the failed --overwrite must keep
    before = tree(logs)
    bad = truncated_copy(rank_files[1], tmp_path)
    for name, overwrite in (("new", False), ("job", True)):
        with pytest.raises(InputError) as failed:
            jobs.export_job([rank_files[0], bad], logs, name, scheduler="none", overwrite=overwrite)
        assert str(failed.value).startswith(f"{bad}: ")
        assert "nothing was written" in str(failed.value) and "--skip-bad-ranks" in str(failed.value)
        assert tree(logs) == before


def test_a_bad_rank_on_a_dask_cluster_stops_the_job_too(rank_files, tmp_path):
    distributed = pytest.importorskip("distributed")
    bad = truncated_copy(rank_files[1], tmp_path)
    (tmp_path / "logs").mkdir()
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        with pytest.raises(InputError, match=f"^{bad}: .*nothing was written"):
            jobs.export_job([bad, *rank_files], tmp_path / "logs", "job", scheduler=cluster.scheduler_address)
    assert tree(tmp_path / "logs") == {}


def test_skip_bad_ranks_writes_the_others_and_lists_the_skipped_one(rank_files, tmp_path):
    bad = truncated_copy(rank_files[1], tmp_path)
    runs = jobs.export_job([rank_files[0], bad], tmp_path / "logs", "job", scheduler="none", skip_bad_ranks=True)
    job = tmp_path / "logs" / "job"
    assert runs == [job / "rank_0", job]
    assert not (job / "rank_1").exists()
    assert any(n.startswith(f"skipped rank file {bad} (position 2): ") for n in read_manifest(job)["notes"])
    assert load_run(job).summaries["ranks"]["rank"].tolist() == [0]


def test_a_missing_rank_is_named(rank_files, tmp_path):
    missing = tmp_path / "rank_5.json.gz"
    with pytest.raises(InputError, match=f"^{missing}: "):
        jobs.export_job([rank_files[0], missing], tmp_path / "logs", "job", scheduler="none")
    assert not (tmp_path / "logs").exists()  # not even the logdir the export would have made


def test_ranks_of_another_job_are_refused_with_the_reason(rank_files, samples_dir, tmp_path):
    other = sample(samples_dir, OTHER_JOB)
    theirs, ours = raw_trace(other)["distributedInfo"]["world_size"], raw_trace(rank_files[0])["distributedInfo"]["world_size"]
    assert theirs != ours
    (tmp_path / "logs").mkdir()
    with pytest.raises(InputError, match=f"^{other}: .*world size {theirs}.*{ours}"):
        jobs.export_job([rank_files[0], other], tmp_path / "logs", "job", scheduler="none")
    assert tree(tmp_path / "logs") == {}


def test_a_rank_given_twice_is_refused(rank_files, tmp_path):
    copy = tmp_path / "copy" / rank_files[0].name
    copy.parent.mkdir()
    shutil.copy(rank_files[0], copy)
    (tmp_path / "logs").mkdir()
    with pytest.raises(InputError, match="claims rank 0"):
        jobs.export_job([rank_files[0], copy], tmp_path / "logs", "job", scheduler="none")
    assert tree(tmp_path / "logs") == {}


def test_an_existing_job_needs_overwrite(rank_files, tmp_path):
    jobs.export_job(rank_files, tmp_path, "job", scheduler="none")
    with pytest.raises(RunExists):
        jobs.export_job(rank_files, tmp_path, "job", scheduler="none")
    first = read_manifest(tmp_path / "job" / "rank_0")["provenance"]["export_time"]
    jobs.export_job(rank_files, tmp_path, "job", scheduler="none", overwrite=True)
    for run in ("job", "job/rank_0", "job/rank_1"):  # one event file each: the old ones replaced
        assert len([p for p in (tmp_path / run).iterdir() if p.name.startswith("events.out.tfevents.")]) == 1
    assert read_manifest(tmp_path / "job" / "rank_0")["provenance"]["export_time"] >= first


def tensorboard_runs(logdir) -> set:
    """The runs TensorBoard lists in `logdir` (its own walk: folders holding a tfevents file)."""
    from tensorboard.backend.event_processing import io_wrapper
    return {os.path.relpath(d, logdir) for d in io_wrapper.GetLogdirSubdirectories(str(logdir))}


def test_overwrite_with_fewer_ranks_removes_the_earlier_jobs_other_ranks(rank_files, tmp_path):
    logs = tmp_path / "logs"
    jobs.export_job(rank_files, logs, "job", scheduler="none")
    export_report(rank_files[1], logs, "job/mine")  # a plain run in the job's folder: no rank of the job
    (logs / "job" / "rank_1" / "notes.txt").write_text("a user's file")
    assert tensorboard_runs(logs) == {"job", "job/rank_0", "job/rank_1", "job/mine"}
    jobs.export_job(rank_files[:1], logs, "job", scheduler="none", overwrite=True)
    assert tensorboard_runs(logs) == {"job", "job/rank_0", "job/mine"}
    assert [p.name for p in (logs / "job" / "rank_1").iterdir()] == ["notes.txt"]  # ours gone, theirs kept
    rank = raw_trace(rank_files[0])["distributedInfo"]["rank"]
    assert load_run(logs / "job").summaries["ranks"]["run"].tolist() == [f"job/rank_{rank}"]
    assert read_manifest(logs / "job" / "mine")["kernel_count"] == raw_kernels(rank_files[1])
    assert not (logs / "job" / ".tb-hwprof").exists() and not (logs / ".tb-hwprof").exists()


def test_tensorboard_never_lists_a_staged_rank(rank_files, tmp_path, monkeypatch):
    """Each time an event file takes its listed name, what TensorBoard would list then: only the
    job's runs, never a rank staged in the logdir's hidden area (TensorBoard walks dot-folders)."""
    from tb_hwprof.logdir import writer
    logs, seen, show = tmp_path / "logs", [], writer.show_events

    def show_and_look(run_dir):
        show(run_dir)
        seen.append(tensorboard_runs(logs))
    monkeypatch.setattr(writer, "show_events", show_and_look)
    jobs.export_job(rank_files, logs, "job", scheduler="none")
    assert seen and all(listed <= {"job", "job/rank_0", "job/rank_1"} for listed in seen), seen


def test_nsys_ranks_take_their_order_and_count_what_sqlite_counts(samples_dir, tmp_path):
    files = [sample(samples_dir, name) for name in NSYS]
    assert cli.main(["export", *map(str, files), "--ranks", "--logdir", str(tmp_path), "--run", "job",
                     "--scheduler", "none", "--quiet"]) == 0
    for rank, path in enumerate(files):  # no distributedInfo, no rank in the name: the order given
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            count = db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        assert read_manifest(tmp_path / "job" / f"rank_{rank}")["kernel_count"] == count
    assert load_run(tmp_path / "job").summaries["ranks"]["source"].tolist() == [str(f) for f in files]


# ------------------------------------------------------------------ the CLI's rule: series or job
def test_pytorch_traces_of_distinct_ranks_are_a_job_and_series_keeps_a_series(rank_files, tmp_path):
    assert jobs.looks_like_job(rank_files)
    assert cli.main(["export", *map(str, rank_files), "--logdir", str(tmp_path / "a"), "--run", "job",
                     "--scheduler", "none", "--quiet"]) == 0
    assert sorted(p.name for p in (tmp_path / "a" / "job").iterdir() if p.is_dir()) == ["plugins", "rank_0", "rank_1"]
    assert cli.main(["export", *map(str, rank_files), "--logdir", str(tmp_path / "b"), "--run", "s", "--series",
                     "--quiet"]) == 0
    stems = sorted(p.name[: -len(".gz")] for p in rank_files)  # a series' runs: NAME/<file stem>, as before
    assert sorted(p.name for p in (tmp_path / "b" / "s").iterdir() if p.is_dir()) == stems


def test_traces_of_different_world_sizes_are_no_job_by_themselves(rank_files, samples_dir):
    assert not jobs.looks_like_job([rank_files[0], sample(samples_dir, OTHER_JOB)])
    assert not jobs.looks_like_job([rank_files[0], rank_files[0]])  # the same rank twice
    assert not jobs.looks_like_job([sample(samples_dir, n) for n in NSYS])  # no distributedInfo


def test_job_options_outside_a_job_are_refused(rank_files, tmp_path, capsys):
    assert cli.main(["export", str(rank_files[0]), "--logdir", str(tmp_path), "--skip-bad-ranks"]) == 1
    assert "--skip-bad-ranks: only for the ranks of a job" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_without_dask_the_export_says_how_to_install_it(rank_files, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    monkeypatch.delenv(jobs.SCHEDULER_ENV, raising=False)
    with pytest.raises(MissingDependency, match=r"pip install 'tb-hwprof\[distributed\]'.*--scheduler none"):
        jobs.export_job(rank_files, tmp_path / "logs", "job")
    assert not os.path.exists(tmp_path / "logs" / "job")


def test_a_job_into_an_s3_logdir_is_published_run_by_run(rank_files, tmp_path, monkeypatch):
    moto_server = pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    boto3 = pytest.importorskip("boto3")
    import s3fs
    s3fs.S3FileSystem.clear_instance_cache()  # an earlier server's filesystem holds its endpoint
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
                     "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://{host}:{port}"}.items():
            monkeypatch.setenv(k, v)
        boto3.client("s3").create_bucket(Bucket="jobs")
        urls = jobs.export_job(rank_files, "s3://jobs/runs", "job", scheduler="none")
        assert urls == ["s3://jobs/runs/job/rank_0", "s3://jobs/runs/job/rank_1", "s3://jobs/runs/job"]
        for rank, path in enumerate(rank_files):
            assert len(load_run(urls[rank], with_details=False).kernels) == raw_kernels(path)
        assert load_run(urls[2], with_details=False).summaries["ranks"]["rank"].tolist() == [0, 1]
        listed = boto3.client("s3").list_objects_v2(Bucket="jobs")["Contents"]
        assert not [o["Key"] for o in listed if "/.tb-hwprof/" in o["Key"]]  # no staging left
        # --overwrite with rank 0 only: the earlier job's rank 1 goes, a user's object beside it stays
        boto3.client("s3").put_object(Bucket="jobs", Key="runs/job/rank_1/notes.txt", Body=b"a user's file")
        assert jobs.export_job(rank_files[:1], "s3://jobs/runs", "job", scheduler="none", overwrite=True) == \
            [urls[0], urls[2]]
        keys = [o["Key"] for o in boto3.client("s3").list_objects_v2(Bucket="jobs")["Contents"]]
        assert [k for k in keys if k.startswith("runs/job/rank_1/")] == ["runs/job/rank_1/notes.txt"]
        assert any(k.startswith("runs/job/rank_0/events.out.tfevents.") for k in keys)
        assert load_run(urls[2], with_details=False).summaries["ranks"]["rank"].tolist() == [0]
        with pytest.raises(jobs.HwprofError, match="must then be a path they all see"):
            jobs.export_job(rank_files, "s3://jobs/runs", "job2", scheduler="tcp://127.0.0.1:1")
    finally:
        server.stop()
        s3fs.S3FileSystem.clear_instance_cache()


def test_a_rank_whose_process_dies_fails_alone_naming_its_file(rank_files, tmp_path, monkeypatch):
    """On Dask each rank runs in a child process of its own: a crash there (here: the child exits at
    once, as the OOM killer would end it) is that rank's one-line error, the worker lives on."""
    monkeypatch.setattr(jobs, "_export_one", lambda *work: os._exit(9))
    with pytest.raises(InputError, match=f"^{rank_files[0]}: the process exporting this rank died"):
        jobs.export_rank(str(rank_files[0]), 0, str(tmp_path), "job", isolate=True)
    monkeypatch.undo()
    result = jobs.export_rank(str(rank_files[0]), 0, str(tmp_path), "job", isolate=True)
    assert result.rank == 0 and result.peak_mb > 0 and result.cpu_seconds > 0
    assert read_manifest(result.staged)["kernel_count"] == raw_kernels(rank_files[0])


def _private_dirty_after_a_collection(_):
    """In a forked child: a full collection, then the MB of pages this process has copied (written)."""
    import gc
    gc.collect()
    with open("/proc/self/smaps_rollup") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Private_Dirty:")) / 1024


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="needs Linux's smaps_rollup")
def test_a_rank_child_does_not_copy_the_workers_objects_by_collecting(tmp_path):
    """The rank's child is forked with the worker's objects frozen out of the garbage collector: a
    collection in the child then leaves their pages shared, where it would write to (and so copy)
    every page holding one.  Measured on 300k small lists; and the worker's own objects are
    collectable again afterwards."""
    import gc
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    assert gc.get_freeze_count() == 0  # else the plain fork below would not copy either
    held = [[i] for i in range(300_000)]  # noqa: F841  (what a worker holds: containers the collector tracks)
    assert gc.is_tracked(held[-1])

    def child_copies(fork_with) -> float:
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
            return fork_with(lambda: pool.submit(_private_dirty_after_a_collection, None)).result()

    plain = child_copies(lambda fork: fork())
    frozen = child_copies(jobs.forked_without_gc_copies)
    assert plain - frozen > 15 and frozen < plain / 3, (plain, frozen)  # seen: 25 MB vs 2.8 MB
    assert gc.get_freeze_count() == 0



def test_ranks_forking_at_once_on_a_threaded_worker_leave_nothing_frozen():
    """Two ranks forking their children at the same time (a Dask worker with threads) freeze, fork and
    unfreeze one after the other: overlapping, one took the other's freeze for our fork server's and
    kept everything frozen (a CI run's later test found the pytest process frozen)."""
    import gc
    import threading
    forks = []

    def fork():  # long enough for the other threads to arrive meanwhile
        began = time.monotonic()
        frozen = gc.get_freeze_count()
        time.sleep(0.02)
        forks.append((began, time.monotonic(), frozen))
    threads = [threading.Thread(target=jobs.forked_without_gc_copies, args=(fork,)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    forks.sort()
    assert len(forks) == 3 and all(frozen > 0 for _, _, frozen in forks)
    assert all(ended <= next_began for (_, ended, _), (next_began, _, _) in zip(forks, forks[1:]))
    assert gc.get_freeze_count() == 0

LOCAL_CLUSTER_WORKER_STATE = """
import gc, json, sys
from tb_hwprof.app import jobs
def state():
    import gc, sys
    return {"frozen": gc.get_freeze_count(), "ours": "tb_hwprof.analysis.pipeline" in sys.modules}
client, close = jobs.dask_client(None, 1, lambda line: None)
try:
    print(json.dumps(list(client.run(state).values())))
finally:
    close()
"""


@pytest.mark.skipif(jobs.WORKER_START not in __import__("multiprocessing").get_all_start_methods(),
                    reason="needs the forkserver start method")
def test_local_cluster_workers_start_with_our_modules_frozen():
    """Our local cluster's workers come from a fork server that imported our modules and froze its
    objects out of the garbage collector (what the workers share stays shared): seen from a worker,
    in a fresh interpreter (a fork server already running would keep its own list)."""
    pytest.importorskip("distributed")
    import subprocess
    done = subprocess.run([sys.executable, "-c", LOCAL_CLUSTER_WORKER_STATE], capture_output=True, text=True,
                          timeout=120, cwd=os.path.dirname(os.path.abspath(__file__)))
    assert done.returncode == 0, done.stderr[-2000:]
    (worker,) = json.loads(done.stdout.strip().splitlines()[-1])
    assert worker["ours"] and worker["frozen"] > 10_000, worker
