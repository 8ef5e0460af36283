"""Multi-rank job export (issue 14): the files of a distributed job's ranks become one run per rank,
<job>/rank_N, and a cross-rank run <job>, the work spread over Dask (`dask.distributed`).

Each Dask task reads one rank, analyses it and writes its run through the export pipeline
(app/export.py: read_report, then _analyse_and_write, the path every export takes) into a
staging logdir, and hands back only the rank's digest (analysis/ranks.py RankDigest): a worker
holds one rank at a time.  The driver then checks the ranks are of one job, builds and writes the
job's run from the digests, and only then puts every run in place:

  <logdir>/.tb-hwprof/jobs/<job key>@<pid>@<host>@<random>/   the staging logdir (hidden area)
      pos_<i>/    rank i of the files as given, its event files under pending names (TensorBoard
                  lists runs in dot-folders too: a staged rank's event file never takes its name)
      job/        the job's run; the ranks move into it as job/rank_N

A new job is then one folder rename into <logdir>/<job>; over an existing one (--overwrite) each
run is replaced by the writer's put_in_place, under its lock.  A bad rank (missing, damaged, of
another job) stops the export with the staging removed: the logdir is as it was.  With
skip_bad_ranks the other ranks are written and the job's notes list the skipped ones.

Which cluster: scheduler None (or $TB_HWPROF_SCHEDULER unset) starts a local cluster of one
single-threaded worker process per core (at most one per rank); a worker exports each rank in a
child process forked for it (in_child), so its peak memory is one rank's export, never what earlier
ranks left behind (a worker that may not have children, such as a daemonic Dask worker, exports in process);
an address ("tcp://host:8786") sends the tasks to that cluster, whose workers
read the files and write the runs at the same paths (made absolute here: a path all of them see);
"none" exports the ranks one after another in this process, without Dask.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gzip
import json
import os
import re
import resource
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, List, Optional, Sequence

from ..core.errors import HwprofError, InputError, MissingDependency, RunExists

SCHEDULER_ENV = "TB_HWPROF_SCHEDULER"
IN_PROCESS = "none"
INSTALL_HINT = ("Dask is not installed: pip install 'tb-hwprof[distributed]' (or --scheduler none to export "
                "the ranks one after another in this process)")
MAIN_GUARD_HINT = ("a script that exports a job must make the call under `if __name__ == \"__main__\":` (the "
                   "local cluster's worker processes import the main script, as multiprocessing's do), or pass "
                   "scheduler=\"none\" (--scheduler none) to export the ranks in this process")
JOBS_AREA = "jobs"  # inside the logdir's hidden area (logdir/writer.py AREA)
IN_PROCESS_WORKER = "in-process"
CONNECT_TIMEOUT = "20s"  # to reach a --scheduler (Dask's own default is 30 s)
# How our local cluster starts its workers: forked from one fork server that has imported Dask and
# pandas once, not each a fresh interpreter importing them (Dask's default, spawn): on 2 busy cores
# the job's cluster was up and closed 1-2 s sooner (60k-kernel ranks: 2.0 s vs 3.0-4.2 s from start
# to a first task done and the cluster closed).  A worker still exits when its nanny (here) is gone.
WORKER_START = "forkserver"
# What that fork server imports beside Dask's own list (distributed, pandas, numpy, ...): our modules,
# so the workers share their pages instead of each importing them, then worker_preload, which
# freezes all of it out of the workers' garbage collections (copy-on-write).
FORKSERVER_PRELOAD = ("tb_hwprof.readers.detect", "tb_hwprof.analysis.pipeline", "tb_hwprof.analysis.ranks",
                      "tb_hwprof.app.export", "tb_hwprof.app.jobs", "tb_hwprof.app.worker_preload")


# ------------------------------------------------------------------ what a rank task returns
@dataclasses.dataclass
class RankResult:
    """One rank exported into the staging logdir."""

    position: int  # in the files as given
    path: str
    digest: object  # analysis/ranks.py RankDigest
    staged: str  # its run folder in the staging logdir
    worker: str  # the Dask worker's address, or IN_PROCESS_WORKER
    seconds: float
    cpu_seconds: float  # the worker process' CPU time meanwhile (all its threads)
    peak_mb: float  # the peak resident memory (ru_maxrss) of the process that exported the rank
    worker_mb: float = 0.0  # the worker process' own peak so far (the same process without a child)

    @property
    def rank(self) -> int:
        return self.digest.rank


@dataclasses.dataclass
class RankFailure:
    position: int
    path: str
    error: BaseException


def export_rank(path: str, position: int, staging: str, job: str, step: int = 0, trace: str = "auto",
                window=None, salvage: bool = False, isolate: bool = False) -> RankResult:
    """The Dask task: read, analyse and write one rank as run pos_<position> of the staging logdir,
    its event files pending; returns its digest.  isolate: in a child process forked for this rank
    (where the process may have children), so a worker's peak memory is one rank's whatever ranks
    it ran before, and a rank that kills its process (a crash, the OOM killer) fails alone."""
    started, cpu = time.perf_counter(), time.process_time()
    work = (path, position, staging, job, step, trace, window, salvage)
    if isolate and can_fork():
        digest, run_dir, child_cpu, child_mb = in_child(path, work)
    else:
        try:
            digest, run_dir = _export_one(*work)
        finally:
            give_back_freed_memory()  # the rank's profile is gone: the next rank starts from a small process
        child_cpu = child_mb = 0.0
    own_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return RankResult(position, str(path), digest, str(run_dir), _worker_address(), time.perf_counter() - started,
                      time.process_time() - cpu + child_cpu, child_mb or own_mb, own_mb)


# Each rank's child is forked from the worker itself, our modules imported there first (no start-up
# cost per rank).  Not multiprocessing's forkserver: a fork server outlives a worker that is closed
# while a rank runs (the cluster closing after another rank failed), and its children then block
# writing their result to nobody, holding the terminal's pipes; a forked child's result pipe breaks
# when its worker is gone, so it ends.  Its peak counts the worker's own pages (~100 MB, shared).
CHILD_CONTEXT = "fork"


def can_fork() -> bool:
    """Whether this process may start a child: POSIX, and not a daemonic process (Dask workers are
    by default; our local cluster's are started non-daemonic)."""
    import multiprocessing
    return hasattr(os, "fork") and not multiprocessing.current_process().daemon


def in_child(path: str, work: tuple):
    """_export_one(*work) in a child process of its own (CHILD_CONTEXT); (digest, run folder, its
    CPU seconds, its peak MB)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool
    from ..readers import detect  # noqa: F401  (imported once here, not again in every child)
    from ..analysis import pipeline, ranks  # noqa: F401
    from . import export  # noqa: F401
    context = multiprocessing.get_context(CHILD_CONTEXT)
    try:
        with ProcessPoolExecutor(1, mp_context=context) as pool:
            return forked_without_gc_copies(lambda: pool.submit(_export_in_child, work)).result()
    except BrokenProcessPool:
        raise InputError(path, "the process exporting this rank died (a crash, or out of memory)",
                         "export this rank alone to see why") from None


# One freeze at a time: two ranks forking at once on a threaded worker would otherwise see each
# other's freeze as the fork server's and leave the worker's objects frozen for good.
_FREEZE_LOCK = threading.Lock()


def forked_without_gc_copies(fork: Callable):
    """fork() (which forks this process) with every object it holds frozen out of the garbage
    collector (gc.freeze) meanwhile: a collection in the child would otherwise write to the header of
    every object it inherited, copying each page holding one (the worker's Dask, pandas and modules).
    The parent's objects are collected again as soon as the child exists, but in a worker whose fork
    server froze what they share (below)."""
    import gc
    import sys
    with _FREEZE_LOCK:
        gc.collect()  # garbage is not frozen
        gc.freeze()
        try:
            return fork()
        finally:
            # A worker of our local cluster (its fork server imported worker_preload, which froze what
            # they share) keeps it all frozen: unfreezing would hand those objects back to its
            # collections, which would copy their pages into the worker.  What the worker made itself
            # stays frozen too (collected beforehand, so only live objects).
            if "tb_hwprof.app.worker_preload" not in sys.modules:
                gc.unfreeze()


def _export_in_child(work: tuple):
    digest, run_dir = _export_one(*work)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return digest, run_dir, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _export_one(path, position, staging, job, step, trace, window, salvage):
    """(digest, staged run folder) of one rank; its profile lives only as long as this call."""
    from .export import WindowOptions, _analyse_and_write, read_report
    from ..analysis.ranks import rank_digest, rank_of
    report = read_report(path, window or WindowOptions(), salvage=salvage)
    rank = rank_of(report.profile, Path(path), position)
    (run_dir,), _ = _analyse_and_write([report], Path(staging), [f"pos_{position}"], False, [step], trace,
                                       lambda line: None, lambda run_dir: None, listed=False)
    return rank_digest(report.profile, rank, str(path), run=f"{job}/rank_{rank}"), run_dir


def give_back_freed_memory() -> None:
    """Hand the pages of freed memory back to the OS (glibc malloc_trim; nothing elsewhere).  A
    worker exports rank after rank, and its heap, fragmented by the last one, would otherwise add
    to the next one's peak (50k-kernel ranks: +85 MB on the second rank without, +27 MB with)."""
    import gc
    gc.collect()
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _worker_address() -> str:
    try:
        from distributed import get_worker
        return get_worker().address
    except (ImportError, ValueError):  # not in a Dask worker
        return IN_PROCESS_WORKER


# ------------------------------------------------------------------ the job
def export_job(paths: Sequence, logdir, job: str, *, scheduler: Optional[str] = None, skip_bad_ranks: bool = False,
               overwrite: bool = False, step: int = 0, trace: str = "auto", window=None, salvage: bool = False,
               workers: Optional[int] = None, progress: Callable[[str], None] = lambda line: None) -> List[Path]:
    """Export the files of one job's ranks as runs <job>/rank_N and the job's run <job> under `logdir`;
    returns their folders (ranks by rank, then the job).  scheduler: None ($TB_HWPROF_SCHEDULER, else a
    local cluster of `workers` processes, default one per core), a Dask scheduler's address, or
    "none" (this process, no Dask).  Nothing is written when a rank fails, unless skip_bad_ranks."""
    from ..logdir import fs
    from ..logdir.writer import check_run_name, lock_run
    if importing_the_main_script():
        raise HwprofError(f"export_job called while a worker process imported the main script -- {MAIN_GUARD_HINT}")
    if not paths:
        raise HwprofError("a job needs at least one rank file")
    check_run_name(job)
    options = dict(scheduler=scheduler, skip_bad_ranks=skip_bad_ranks, step=step, trace=trace, window=window,
                   salvage=salvage, workers=workers, progress=progress)
    if fs.is_url(logdir):
        return export_job_remote(paths, logdir, job, overwrite, options)
    logdir = Path(os.path.abspath(logdir))  # the workers' cwd is not ours
    paths = [os.path.abspath(p) for p in paths]
    job_dir = logdir.joinpath(*check_run_name(job).parts)
    if job_dir.exists() and not overwrite:
        raise RunExists(f"{job_dir}: run already exists -- pass --overwrite to replace the job, or choose another --run")
    created = [p for p in [job_dir.parent, *job_dir.parent.parents] if not p.exists()]
    job_dir.parent.mkdir(parents=True, exist_ok=True)
    placed = False
    try:
        lock = lock_run(job_dir, job)  # one export of this job at a time (plain exports of the name included)
        try:
            staging = make_staging(logdir, job)
            try:
                results = run_ranks(paths, staging, dict(job=job, step=step, trace=trace, window=window,
                                                         salvage=salvage), scheduler, workers, skip_bad_ranks, progress)
                runs = place_job(results, staging, logdir, job, overwrite, step, trace, progress)
                placed = True
                return runs
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        finally:
            lock.release()
            tidy_job_area(logdir)
    finally:
        if not placed:
            remove_empty(created)  # a failed job leaves no folder it made (the logdir included)


def importing_the_main_script() -> bool:
    """Whether this runs while a child process of multiprocessing (a local Dask worker) imports the
    parent's main script or module (multiprocessing.spawn's _fixup_main_from_path / _from_name run it
    as __mp_main__): an unguarded script's call, about to start a cluster of its own from a worker."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name in ("_fixup_main_from_path", "_fixup_main_from_name") and \
                code.co_filename.endswith(os.path.join("multiprocessing", "spawn.py")):
            return True
        frame = frame.f_back
    return False


def export_job_remote(paths, url: str, job: str, overwrite: bool, options: dict) -> List[str]:
    """A job into a URL logdir (s3://...; logdir/fs.py): exported into a local temporary logdir as
    above (a bad rank stops it before anything is uploaded), then each rank's run and the job's
    published as a plain export publishes a run; their URLs.  The workers write that local folder,
    so the cluster must be a local one (or none)."""
    from ..logdir import fs
    from ..core.scratch import scratch_folder
    address = options["scheduler"] if options["scheduler"] is not None else os.environ.get(SCHEDULER_ENV) or None
    if address not in (None, IN_PROCESS):
        raise HwprofError(f"{url}: a job's ranks exported on the Dask cluster at {address} are written by its "
                          f"workers into the logdir, which must then be a path they all see, not a URL -- give "
                          f"a shared folder as --logdir, or export to the URL without --scheduler (a local cluster)")
    remote = fs.RemoteDir(url)
    fs.check_free(remote, job, overwrite, beside=True)  # before reading anything
    with scratch_folder("job") as local:
        runs = export_job(paths, local, job, overwrite=False, **options)
        earlier = earlier_remote_rank_runs(remote, job) if overwrite else set()
        out = []
        for run_dir in runs[:-1]:  # the ranks
            out.append(fs.publish_run(remote, run_dir, run_dir.relative_to(local).as_posix(), overwrite))
            options["progress"](f"published {out[-1]}")
        for rank_run in sorted(earlier - {run_dir.name for run_dir in runs[:-1]}):
            remove_remote_run(remote, f"{job}/{rank_run}")
            options["progress"](f"removed {remote.url_of(remote.key(f'{job}/{rank_run}'))}: no rank of this job")
        out.append(fs.publish_run(remote, runs[-1], job, overwrite, beside=True))  # its folder holds the ranks
        options["progress"](f"published {out[-1]}")
    return out


def earlier_remote_rank_runs(remote, job: str) -> set:
    """earlier_rank_runs of a job in a URL logdir: those its ranks table lists (its tables fetched),
    else the rank_<N> folders holding our event file."""
    from ..logdir import fs
    from ..logdir.reader import load_run
    job_key = remote.key(job)
    if not remote.listing(f"{job_key}/{fs.ASSET_PREFIX}"):
        return set()
    try:
        return rank_runs_of(load_run(remote.url_of(job_key), with_details=False).summaries, job)
    except (HwprofError, OSError, KeyError):
        folders = [k.rsplit("/", 1)[-1] for k, info in remote.listing(job_key).items() if info.get("type") == "directory"]
        return {name for name in folders
                if RANK_RUN.fullmatch(name) and fs.our_event_keys(remote.listing(f"{job_key}/{name}"))}


def remove_remote_run(remote, run: str) -> None:
    """Our objects of a run in a URL logdir deleted: its event file first (TensorBoard stops listing
    it), then its asset folder; a user's other objects stay."""
    from ..logdir import fs
    run_key = remote.key(run)
    fs.delete(remote, fs.our_event_keys(remote.listing(run_key)))
    fs.delete(remote, [f"{run_key}/{fs.ASSET_PREFIX}"], recursive=True)


def run_ranks(paths, staging: Path, options: dict, scheduler, workers, skip_bad_ranks: bool, progress):
    """Every rank exported into `staging`; (results by rank, failures).  A failure stops the job
    (after the ranks still running have finished: none writes into a removed folder) unless
    skip_bad_ranks, which keeps going but never skips a bug (an error that is not the input's)."""
    address = scheduler if scheduler is not None else os.environ.get(SCHEDULER_ENV) or None
    if address == IN_PROCESS:
        results, failures = _run_in_process(paths, staging, options, skip_bad_ranks, progress)
    else:
        results, failures = _run_on_dask(paths, staging, options, address, workers, skip_bad_ranks, progress)
    if failures and not (skip_bad_ranks and all(skippable(f.error) for f in failures)):
        raise job_failure(failures, len(paths))
    if not results:
        raise InputError(failures[0].path, f"no rank of the job could be exported ({len(failures)} failed)",
                         "check the rank files")
    return sorted(results, key=lambda r: r.position), failures


def skippable(error: BaseException) -> bool:
    """A rank's own problem (missing, damaged, refused): --skip-bad-ranks leaves it out.  A bug is not."""
    return isinstance(error, (HwprofError, OSError))


def job_failure(failures: List[RankFailure], count: int) -> BaseException:
    """The first failed rank's error, saying nothing was written; others are counted."""
    first = min(failures, key=lambda f: f.position)
    others = f"; {len(failures) - 1} other rank(s) failed too" if len(failures) > 1 else ""
    if isinstance(first.error, InputError):
        e = first.error
        return InputError(e.path, f"{e.problem} (rank file {first.position + 1} of {count}: nothing was written{others})",
                          "; ".join(x for x in (e.fix, "or --skip-bad-ranks to export the other ranks") if x))
    if skippable(first.error):
        return InputError(first.path, f"{first.error} (nothing was written{others})",
                          "fix or remove this rank, or --skip-bad-ranks to export the other ranks")
    return first.error


def _run_in_process(paths, staging: Path, options: dict, skip_bad_ranks: bool, progress):
    results, failures = [], []
    for i, path in enumerate(paths):
        try:
            results.append(export_rank(path, i, str(staging), **options))
            _tell_done(progress, len(results) + len(failures), len(paths), results[-1])
        except Exception as e:  # noqa: BLE001  (sorted out by run_ranks)
            failures.append(RankFailure(i, path, e))
            _tell_failed(progress, len(results) + len(failures), len(paths), failures[-1])
            if not (skip_bad_ranks and skippable(e)):
                break
    return results, failures


def _run_on_dask(paths, staging: Path, options: dict, address, workers, skip_bad_ranks: bool, progress):
    client, close = dask_client(address, workers or default_workers(len(paths)), progress)
    try:
        from distributed import as_completed
        token = os.urandom(4).hex()
        futures = {client.submit(export_rank, path, i, str(staging), **options, isolate=True,
                                 key=f"tb-hwprof-rank-{i}-{token}", pure=False): (i, path)
                   for i, path in enumerate(paths)}
        results, failures = [], []
        for future in as_completed(list(futures)):
            i, path = futures[future]
            if future.status == "error":
                failures.append(RankFailure(i, path, worker_death(future.exception(), path)))
                _tell_failed(progress, len(results) + len(failures), len(paths), failures[-1])
                if not (skip_bad_ranks and skippable(failures[-1].error)):
                    stop_queued(client, futures)
                    break
            elif future.status == "finished":
                results.append(future.result())
                _tell_done(progress, len(results) + len(failures), len(paths), results[-1])
        return results, failures
    finally:
        close()


def stop_queued(client, futures) -> None:
    """Cancel the ranks not started yet and wait for those running (a cancelled running task would
    go on writing into the staging folder the job is about to remove)."""
    from distributed import wait
    running = {key for keys in client.processing().values() for key in keys}
    client.cancel([f for f in futures if not f.done() and f.key not in running])
    started = [f for f in futures if f.key in running and not f.done()]
    if started:
        wait(started)  # they end as they do; their errors were not the first


def worker_death(error: BaseException, path: str) -> BaseException:
    """Dask's KilledWorker (the workers running this rank's task died, each time it was retried:
    out of memory, most often) as the rank's one-line error; other errors as they are."""
    if type(error).__name__ != "KilledWorker":
        return error
    return InputError(path, "the Dask workers exporting this rank died (out of memory?)",
                      "give the workers more memory, or export this rank alone to see why")


def default_workers(ranks: int) -> int:
    """One single-threaded worker per core, never more than there are ranks."""
    return max(1, min(os.cpu_count() or 1, ranks))


def dask_client(address: Optional[str], workers: int, progress):
    """(client, close): a client of the cluster at `address`, or of a local cluster of `workers`
    processes of one thread each (their peak memory: one rank's export) started here."""
    try:
        import logging
        from distributed import Client, LocalCluster
    except ImportError:
        raise MissingDependency(INSTALL_HINT) from None
    if address:
        try:
            client = Client(address, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as e:
            raise HwprofError(f"cannot reach the Dask scheduler at {address} ({e}) -- start it, check the address, "
                              f"or --scheduler none") from None
        progress(f"job: on the Dask cluster at {address} ({len(client.scheduler_info().get('workers', {}))} workers)")
        return client, client.close
    import dask
    import multiprocessing
    start = WORKER_START if WORKER_START in multiprocessing.get_all_start_methods() else "spawn"  # Windows: spawn
    # Not daemonic: a worker forks a child per rank (export_rank's isolate).  No statistical profiler in
    # the workers: its thread samples every 10 ms, and a rank's work is in its child, out of its sight.
    with dask.config.set({"distributed.nanny.pre-spawn-environ": local_worker_environ(),
                          "distributed.worker.profile.enabled": False,
                          "distributed.worker.daemon": False,
                          "distributed.worker.multiprocessing-method": start}):
        if start == "forkserver":
            preload_our_modules()
        try:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                                   silence_logs=logging.ERROR)
        except RuntimeError as e:  # Dask's "Nanny failed to start." (the worker's own error went to stderr)
            raise HwprofError(f"the local Dask cluster's workers did not start ({e}; their own errors are printed "
                              f"above) -- if a script of yours started the job: {MAIN_GUARD_HINT}") from e
    client = Client(cluster)
    progress(f"job: on a local Dask cluster of {workers} single-threaded worker process(es)")

    def close():
        client.close()
        cluster.close()
    return client, close


def preload_our_modules() -> None:
    """Have the fork server our local cluster's workers start from import FORKSERVER_PRELOAD after
    Dask's own list (a fork server already running keeps what it has)."""
    from multiprocessing import forkserver

    from distributed.utils import get_mp_context
    context = get_mp_context()  # sets Dask's list first, as it would when the cluster starts
    theirs = list(getattr(forkserver._forkserver, "_preload_modules", None) or [])
    context.set_forkserver_preload(theirs + [m for m in FORKSERVER_PRELOAD if m not in theirs])


def local_worker_environ() -> dict:
    """The environment our local cluster's workers start with: Dask's own, and glibc told to keep
    freed memory for the next allocation, as the CLI's exports do (cli.reuse_freed_memory: an
    export allocates and frees hundreds of MB of numpy temporaries; handing them back to the OS
    each time costs ~a third of its time in page faults), and numpy told not to ask for huge pages
    (cli.no_huge_page_advice).  A cluster of the user's is left as it is."""
    import dask
    big = str(1 << 30)
    return {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), "MALLOC_ARENA_MAX": "1",
            "MALLOC_MMAP_THRESHOLD_": big, "MALLOC_TRIM_THRESHOLD_": big,
            "NUMPY_MADVISE_HUGEPAGE": os.environ.get("NUMPY_MADVISE_HUGEPAGE", "0")}  # as cli.no_huge_page_advice


def _tell_done(progress, done: int, total: int, result: RankResult) -> None:
    progress(f"[{done}/{total}] rank {result.rank}: {result.path} exported on {result.worker} "
             f"in {result.seconds:.2f} s")


def _tell_failed(progress, done: int, total: int, failure: RankFailure) -> None:
    progress(f"[{done}/{total}] rank file {failure.path} failed: {failure.error}")


# ------------------------------------------------------------------ staging and putting in place
def make_staging(logdir: Path, job: str) -> Path:
    """A fresh staging logdir in the logdir's hidden area (TensorBoard lists no run there: staged
    event files carry pending names); leftovers of this host's dead job exports are removed first."""
    from ..core.scratch import owner_gone, owner_tag
    from ..logdir.writer import AREA, key_of, retrying
    jobs = logdir / AREA / JOBS_AREA
    for old in _list(jobs):
        if owner_gone(old.name):
            shutil.rmtree(old, ignore_errors=True)

    def make():
        jobs.mkdir(parents=True, exist_ok=True)
        return tempfile.mkdtemp(prefix=f"{key_of(job.replace('/', '_'))}@{owner_tag()}@", dir=jobs)
    return Path(retrying(make))


def remove_empty(folders: List[Path]) -> None:
    """The folders, innermost first, as far as they are empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            break


def tidy_job_area(logdir: Path) -> None:
    from ..logdir.writer import AREA, tidy_area
    try:
        (logdir / AREA / JOBS_AREA).rmdir()
    except OSError:  # another job export's, or gone
        pass
    tidy_area(logdir / AREA)


def _list(folder: Path) -> list:
    try:
        return sorted(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []


def place_job(outcome, staging: Path, logdir: Path, job: str, overwrite: bool, step: int, trace: str, progress):
    """Check the ranks are of one job, write the job's run into staging, then put every run in place."""
    from ..analysis.ranks import check_same_job
    results, failures = outcome
    check_same_job([r.digest for r in results])
    staged_job = write_job_run(results, failures, staging, job, step, trace)
    progress(f"job {job}: {len(results)} rank(s) checked and the cross-rank run written")
    names = {r.position: f"rank_{r.rank}" for r in results}
    job_dir = logdir.joinpath(*job.split("/"))
    if job_dir.exists():  # --overwrite (export_job refused it otherwise): run by run
        runs = replace_runs(results, names, staged_job, job_dir, job)
    else:
        runs = move_new_job(results, names, staged_job, job_dir)
    progress(f"job {job}: wrote {len(runs)} runs under {job_dir}")
    return runs


def write_job_run(results: List[RankResult], failures: List[RankFailure], staging: Path, job: str, step: int,
                  trace: str) -> Path:
    """The job's cross-rank run (analysis/ranks.py job_profile) as run `job` of the staging logdir,
    its event files pending like the ranks'."""
    from .export import Report, _analyse_and_write
    from ..analysis.ranks import job_profile
    profile = job_profile([r.digest for r in results], job_notes(results, failures), job=job)
    source = Path(results[0].path)
    (run_dir,), _ = _analyse_and_write([Report(source, profile)], staging, ["job"], False, [step], trace,
                                       lambda line: None, lambda run_dir: None, listed=False)
    return run_dir


def job_notes(results: List[RankResult], failures: List[RankFailure]) -> List[str]:
    """Where each rank ran and which were skipped (--skip-bad-ranks), for the job's notes."""
    notes = [f"rank {r.rank}: {r.path} exported on {r.worker} in {r.seconds:.2f} s (CPU {r.cpu_seconds:.2f} s; "
             f"peak memory {r.peak_mb:.0f} MB; the worker's own {r.worker_mb:.0f} MB)" for r in results]
    notes += [f"skipped rank file {f.path} (position {f.position + 1}): {f.error}" for f in failures]
    return notes


def move_new_job(results, names: dict, staged_job: Path, job_dir: Path) -> List[Path]:
    """A new job: the ranks into the staged job's folder, then that folder into place in one rename;
    the event files take their listed names last."""
    from ..logdir.writer import show_events
    for r in results:
        os.rename(r.staged, staged_job / names[r.position])
    os.rename(staged_job, job_dir)
    runs = [job_dir / names[r.position] for r in sorted(results, key=lambda r: r.rank)]
    for run_dir in runs + [job_dir]:
        show_events(run_dir)
    return runs + [job_dir]


def replace_runs(results, names: dict, staged_job: Path, job_dir: Path, job: str) -> List[Path]:
    """--overwrite of an existing job: each rank's run replaced by the writer's put_in_place under
    the run's lock (our files only), then the earlier job's rank runs that this one has no rank for
    removed, then the job's run replaced: once the new job's run is listed, its ranks are the job's."""
    from ..logdir.writer import area_of, lock_run, put_in_place, tidy_area
    stale = sorted(earlier_rank_runs(job_dir, job) - set(names.values()))
    runs = []
    staged = [(Path(r.staged), job_dir / names[r.position], f"{job}/{names[r.position]}")
              for r in sorted(results, key=lambda r: r.rank)]
    for source, run_dir, name in staged:
        with held(lock_run(run_dir, name)):
            put_in_place(source, run_dir, old_copy(run_dir))
        runs.append(run_dir)
    for rank_run in stale:
        with held(lock_run(job_dir / rank_run, f"{job}/{rank_run}")):
            remove_our_run(job_dir / rank_run)
    tidy_area(area_of(job_dir / "rank_0"))  # the ranks' locks, held by this export only
    put_in_place(staged_job, job_dir, old_copy(job_dir))  # the job's own lock is held already
    return runs + [job_dir]


@contextlib.contextmanager
def held(lock):
    try:
        yield lock
    finally:
        lock.release()


def old_copy(run_dir: Path) -> Path:
    """Where the writer moves a run's earlier asset folder while replacing it (logdir/writer.py)."""
    from ..core.scratch import owner_tag
    from ..logdir.writer import area_of, key_of
    return area_of(run_dir) / "old" / f"{key_of(run_dir.name)}@{owner_tag()}"


RANK_RUN = re.compile(r"rank_\d+")


def earlier_rank_runs(job_dir: Path, job: str) -> set:
    """The rank runs (folder names under job_dir) of the job already there: those its ranks table
    lists; where that table cannot be read, the rank_<N> folders holding a run of ours."""
    from ..logdir.reader import read_manifest, read_summaries
    from ..logdir.writer import asset_dir
    try:
        return rank_runs_of(read_summaries(job_dir, read_manifest(job_dir)), job)
    except (HwprofError, OSError, KeyError):
        return {p.name for p in _list(job_dir) if RANK_RUN.fullmatch(p.name) and asset_dir(p).is_dir()}


def rank_runs_of(summaries: dict, job: str) -> set:
    """The rank runs (folder names under the job's) that a job run's ranks table lists; KeyError
    without that table."""
    names = [run[len(job) + 1:] for run in summaries["ranks"]["run"].tolist()
             if isinstance(run, str) and run.startswith(job + "/")]
    return {name for name in names if RANK_RUN.fullmatch(name)}


def remove_our_run(run_dir: Path) -> None:
    """Our files of a run removed: its event files first, under pending names (TensorBoard stops
    listing the run), then its asset folder renamed into the hidden area's staging folder, where a
    dead export's leftovers are removed (logdir/writer.py clean_area), and removed; the run folder
    too once nothing else is in it (a user's files stay).  A kill before that rename leaves the run
    whole (its repair shows the event files again), one after it leaves no run."""
    from ..core.scratch import owner_tag
    from ..logdir.writer import AREA, asset_dir, hide_events, key_of, retrying
    assets = asset_dir(run_dir)
    if not assets.is_dir():
        return
    doomed = run_dir.parent / AREA / "staging" / f"{key_of(run_dir.name)}@{owner_tag()}@removed"
    hide_events(run_dir)
    retrying(lambda: (doomed.parent.mkdir(parents=True, exist_ok=True), os.rename(assets, doomed)))
    shutil.rmtree(doomed, ignore_errors=True)
    remove_empty([assets.parent, run_dir])


# ------------------------------------------------------------------ is it a job? (the CLI's rule)
PEEK_BYTES = 1 << 20
DISTRIBUTED_INFO = re.compile(rb'"distributedInfo"\s*:\s*(\{[^{}]*\})')


def distributed_info(path) -> Optional[dict]:
    """A PyTorch trace's distributedInfo, from the first MB of the file (PyTorch writes it among the
    first top-level keys); None for any other file, or one without it."""
    try:
        with open(path, "rb") as f:
            head = f.read(2)
        opener = gzip.open if head == b"\x1f\x8b" else open
        with opener(path, "rb") as f:
            text = f.read(PEEK_BYTES)
        match = DISTRIBUTED_INFO.search(text)
        info = json.loads(match.group(1)) if match else None
    except (OSError, EOFError, ValueError, gzip.BadGzipFile):
        return None
    return info if isinstance(info, dict) else None


def looks_like_job(paths: Sequence) -> bool:
    """Several PyTorch traces, each naming its rank in distributedInfo, the ranks distinct and the
    world size the same: the ranks of one job (the CLI exports them as a job without --ranks)."""
    if len(paths) < 2:
        return False
    infos = [distributed_info(p) for p in paths]
    if any(info is None or not isinstance(info.get("rank"), int) for info in infos):
        return False
    ranks = [info["rank"] for info in infos]
    return len(set(ranks)) == len(ranks) and len({info.get("world_size") for info in infos}) == 1
