"""Writes a Profile as a TensorBoard run, atomically.

TensorBoard lists every folder under the logdir holding a file whose name contains "tfevents"
(io_wrapper.IsTensorFlowEventsFile, hidden folders included), so no such file ever exists outside a
run: a run is built in a hidden area beside it, <parent>/.tb-hwprof/, with its event file named
"events.out.tfpending.*" inside the asset folder; the file takes its tfevents name only in the run
folder, as the last step.  A new run is one folder rename into place; replacing a
run moves our files only (the asset folder, our event files: other files and nested runs stay):
  1. our event files are renamed into the old asset folder under pending names (TensorBoard stops
     listing the old run),  2. the old asset folder goes to .tb-hwprof/old/,  3. the new one comes
     in,  4. its event file takes its tfevents name,  5. the old copy is removed.
A kill at any step leaves the old run or the new one complete (load_run reads it), never a listed
leftover; recover_interrupted (called by the next export of that name, load_run and the plugin)
puts back the old copy or finishes step 4.

An export holds its run's lock (fcntl.flock on .tb-hwprof/locks/<name>.lock, which holds its pid
and host) from staging to the rename: a second export of the same run is refused with that pid.
Staging folders and old copies are named <name>@<pid>@<host>[@random]: any later export into the
folder removes those of this host whose pid is gone.  Without fcntl (not POSIX) runs are not locked.
"""
from __future__ import annotations

import datetime as _dt
import errno
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from urllib.parse import quote, unquote

try:
    import fcntl
except ImportError:  # not POSIX: exports are not locked (documented above)
    fcntl = None

from ..core import __version__
from ..core.errors import HwprofError, InputError, RunExists
from ..core.scratch import owner_gone, owner_tag, process_gone
from . import metadata, records, run_checks, summary, tables

AREA = metadata.WORK_AREA  # per folder holding runs: locks/, staging/, old/
EVENTS_PREFIX = "events.out.tfevents."
PENDING_PREFIX = metadata.PENDING_EVENTS_PREFIX  # an event file TensorBoard must not see yet
# Folders of earlier versions, beside the run: '.<run><tag><pid or random>' (still repaired).
STAGING_TAG = ".tb-hwprof-staging-"
OLD_TAG = ".tb-hwprof-old-"
# Run names may hold any character a file name may ('*', '[', '%', spaces): the area's names use
# a percent-encoding of it, or a hash where that would be too long for a file name.
KEY_MAX = 120
# Read-only logdirs: a reader's repair gives up quietly (it could not write anyway).
READ_ONLY_ERRORS = (errno.EROFS, errno.EACCES, errno.EPERM)
NO_LOCKS_ERRORS = (errno.ENOLCK, errno.EOPNOTSUPP)


class RunBusy(HwprofError):
    """Another export holds the run's lock."""


def check_run_name(run: str) -> PurePosixPath:
    """A run name is a relative path inside the logdir (metadata.run_name_problem says what is not)."""
    problem = metadata.run_name_problem(run)
    if problem:
        raise HwprofError(problem)
    return PurePosixPath(run.replace(os.sep, "/"))


def run_folder(logdir, run: str, overwrite: bool, beside: bool = False) -> Path:
    """<logdir>/<run>, the name checked; RunExists when the run is there and overwrite is not asked.
    beside: the run goes into a folder that holds other files (a PyTorch run folder with the traces
    torch-tb-profiler reads): it is there when our asset folder is."""
    run_dir = Path(logdir).joinpath(*check_run_name(run).parts)
    taken = asset_dir(run_dir).exists() if beside else run_dir.exists()
    if taken and not overwrite:
        raise RunExists(f"{run_dir}: run already exists -- pass --overwrite to replace it, or choose another --run")
    return run_dir


def asset_dir(run_dir: Path) -> Path:
    return run_dir.joinpath(*metadata.ASSET_DIR)


# ---------------------------------------------------------------- the hidden area and its names
def area_of(run_dir: Path) -> Path:
    return run_dir.parent / AREA


def key_of(name: str) -> str:
    """The run folder's name as a safe file name: percent-encoded ('/', '*', '[', '@' cannot appear),
    or '%%' and a hash when too long ('%%' is no percent-encoding, so the two never meet)."""
    key = quote(name, safe="")
    return key if len(key) <= KEY_MAX else "%%" + hashlib.sha256(name.encode()).hexdigest()[:40]


def name_of_key(key: str):
    """The run folder name a key encodes; None for hashed keys."""
    return None if key.startswith("%%") else unquote(key)


def own_entries(folder: Path, key: str) -> list:
    """Entries of an area folder belonging to run `key`, oldest first."""
    dated = []
    for p in list_dir(folder):
        if p.name.split("@", 1)[0] == key:
            try:
                dated.append((p.stat().st_mtime_ns, p))
            except FileNotFoundError:  # a dead export's, removed meanwhile by another export
                pass
    return [p for _, p in sorted(dated)]


def retrying(make):
    """make(), which creates area folders then something in them; retried when another export's tidy-up
    (an rmdir of an empty area folder) came between the two."""
    for _ in range(50):
        try:
            return make()
        except FileNotFoundError:
            continue
    return make()


def tidy_area(area: Path) -> None:
    """Remove the area's folders once empty, so a logdir with no export running holds no trace of us."""
    for folder in (area / "locks", area / "staging", area / "old", area):
        try:
            folder.rmdir()
        except OSError:  # not empty (another export's), or already gone
            pass


# ---------------------------------------------------------------- the run's lock
class RunLock:
    """The run's exclusive lock: flock on <area>/locks/<key>.lock, which holds the holder's pid and
    host.  The holder removes the file before unlocking; a process that locked a file removed
    meanwhile locks the new one instead."""

    def __init__(self, path: Path):
        self.path = path
        self.fd = None

    @classmethod
    def of(cls, run_dir: Path) -> "RunLock":
        return cls(area_of(run_dir) / "locks" / (key_of(run_dir.name) + ".lock"))

    def take(self) -> bool:
        """Lock without waiting: False when another process holds it."""
        if fcntl is None:
            return True
        for _ in range(50):  # each turn: the file was removed by its holder as we opened it
            fd = retrying(self._open)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if self._still_linked(fd):
                    os.ftruncate(fd, 0)
                    os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
                    self.fd, fd = fd, None
                    return True
            except BlockingIOError:
                return False
            except OSError as e:
                if e.errno in NO_LOCKS_ERRORS:
                    return True  # a filesystem without locks (an NFS mount without lockd): as without fcntl
                # Writing our pid failed (a full disk): the file we hold is removed, not left empty, and
                # the error names it (os.write's has no file name: "no space left on the logdir").
                if self._still_linked(fd):
                    self.path.unlink(missing_ok=True)
                raise OSError(e.errno, e.strerror, str(self.path)) from e
            finally:
                if fd is not None:
                    os.close(fd)
        return False

    def holder(self) -> str:
        """'pid N on host H' from the lock file, as well as it can be read."""
        pid, host = self.owner()
        return f"pid {pid} on {host}" if pid else "another process"

    def owner(self) -> tuple:
        """(pid, host) the lock file names; ('', '') when it names none."""
        try:
            pid, host = self.path.read_text().split()[:2]
            return pid, host
        except (OSError, ValueError):  # just created, not yet written, or just removed
            return "", ""

    def release(self) -> None:
        if self.fd is None:
            return
        self.path.unlink(missing_ok=True)
        os.close(self.fd)
        self.fd = None

    def _open(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)

    def _still_linked(self, fd: int) -> bool:
        try:
            return os.path.samestat(os.fstat(fd), os.stat(self.path))
        except FileNotFoundError:
            return False


def lock_run(run_dir: Path, run: str) -> RunLock:
    """The run's lock, taken; RunBusy naming the holder when another export has it."""
    lock = RunLock.of(run_dir)
    if not lock.take():
        raise RunBusy(f"{run_dir}: run {run!r} is being exported by {lock.holder()} -- wait for it to finish, "
                      "or export under another --run")
    return lock


# ---------------------------------------------------------------- repair of interrupted exports
def recover_interrupted(run_dir: Path) -> None:
    """Repair what a killed export of this run left: put back the run an interrupted --overwrite moved
    aside, give a run moved into place its event file's listed name, drop dead exports' leftovers.
    Safe for readers (load_run, the plugin): does nothing while an export holds the run's lock or
    when there is nothing to repair, never raises on a read-only logdir."""
    run_dir = Path(run_dir)
    if not needs_repair(run_dir):
        return
    lock = RunLock.of(run_dir)
    try:
        if lock.take():
            try:
                repair(run_dir)
            finally:
                lock.release()
                tidy_area(area_of(run_dir))
    except OSError as e:
        if e.errno not in READ_ONLY_ERRORS:
            raise


def needs_repair(run_dir: Path) -> bool:
    """Whether a killed export left anything of this run (cheap: a few stats and listings)."""
    if not run_dir.parent.is_dir():
        return False
    area, key = area_of(run_dir), key_of(run_dir.name)
    return bool(own_entries(area / "old", key) or own_entries(area / "staging", key) or pending_events(run_dir)
                or legacy_leftovers(run_dir, OLD_TAG, OLD_SUFFIX)
                or legacy_leftovers(run_dir, STAGING_TAG, STAGING_SUFFIX))


def repair(run_dir: Path) -> None:
    """recover_interrupted's work, with the run's lock held."""
    area, key = area_of(run_dir), key_of(run_dir.name)
    olds = own_entries(area / "old", key)
    if olds and not asset_dir(run_dir).exists():  # killed between steps 2 and 3: our run is aside
        asset_dir(run_dir).parent.mkdir(parents=True, exist_ok=True)
        os.rename(olds.pop(), asset_dir(run_dir))
    show_events(run_dir)
    for stale in olds + own_entries(area / "staging", key):
        if owner_gone(stale.name):
            shutil.rmtree(stale, ignore_errors=True)
    recover_legacy(run_dir)


def clean_area(area: Path) -> None:
    """Leftovers of exports of this host that died, whatever their run: staging folders (a whole run
    each) are removed, old copies repaired as their run's own repair would (when free to), lock
    files nobody holds removed."""
    for path in list_dir(area / "locks"):
        lock = RunLock(path)
        if process_gone(*lock.owner()) and lock.take():  # only a dead one's: a live export keeps its file
            lock.release()
    for staging in list_dir(area / "staging"):
        if owner_gone(staging.name):
            shutil.rmtree(staging, ignore_errors=True)
    for old in list_dir(area / "old"):
        name = name_of_key(old.name.split("@", 1)[0])
        if name is not None and owner_gone(old.name):
            recover_interrupted(area.parent / name)


def list_dir(folder: Path) -> list:
    """The folder's entries, sorted; none when it is not there (area folders come and go)."""
    try:
        return sorted(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []


# What follows a tag in earlier versions' hidden folders: the pid of the --overwrite that renamed the
# old run aside; tempfile.mkdtemp's random part.
OLD_SUFFIX, STAGING_SUFFIX = re.compile(r"\d+"), re.compile(r"[a-z0-9_]+")


def recover_legacy(run_dir: Path) -> None:
    """An earlier version's interrupted --overwrite: the whole run renamed aside beside it."""
    olds = legacy_leftovers(run_dir, OLD_TAG, OLD_SUFFIX)
    if olds and not run_dir.exists():
        os.rename(olds[-1], run_dir)
        olds = olds[:-1]
    for stale in olds + legacy_leftovers(run_dir, STAGING_TAG, STAGING_SUFFIX):
        shutil.rmtree(stale, ignore_errors=True)


def legacy_leftovers(run_dir: Path, tag: str, suffix: "re.Pattern") -> list:
    """The run's own hidden folders '.<run><tag><suffix>' (earlier versions), sorted.  Names are
    compared as text, never as a glob pattern: a run named '*' or '[a]' must not match other runs'."""
    prefix = f".{run_dir.name}{tag}"
    return sorted(p for p in run_dir.parent.iterdir()
                  if p.name.startswith(prefix) and suffix.fullmatch(p.name[len(prefix):]) and p.is_dir())



# ---------------------------------------------------------------- event files: hidden and shown
def is_events(name: str, prefix: str = EVENTS_PREFIX) -> bool:
    """Whether `name` is one of our event files (listed, or pending with PENDING_PREFIX)."""
    return name.startswith(prefix) and name.endswith(metadata.EVENTS_SUFFIX)


def pending_events(run_dir: Path) -> list:
    """Our event files waiting in the run's asset folder for their listed name."""
    assets = asset_dir(run_dir)
    return sorted(p for p in assets.iterdir() if is_events(p.name, PENDING_PREFIX)) if assets.is_dir() else []


def hide_events(run_dir: Path) -> None:
    """Our listed event files into the asset folder under pending names (TensorBoard stops listing
    the run; a user's other event files stay)."""
    for p in sorted(run_dir.iterdir()):
        if is_events(p.name) and p.is_file():
            os.rename(p, asset_dir(run_dir) / (PENDING_PREFIX + p.name[len(EVENTS_PREFIX):]))


def show_events(run_dir: Path) -> None:
    """The asset folder's pending event files to the run folder under their listed names."""
    for p in pending_events(run_dir):
        os.replace(p, run_dir / (EVENTS_PREFIX + p.name[len(PENDING_PREFIX):]))


def manifest_of(profile, analysis) -> dict:
    """The run's manifest: the profile's facts and its analysis (tb_hwprof.analysis.Analysis)."""
    details = has_details(profile)  # tracers have no raw metrics or rules: no details files, details = null
    return {
        "format_version": metadata.FORMAT_VERSION,
        "writer": f"tb-hwprof {__version__}",
        "provenance": profile.provenance.to_dict(),
        "devices": [d.to_dict() for d in profile.devices],
        "roofline": {str(device): roofs for device, roofs in analysis.roofline.items()},
        "summary": analysis.scalars,
        "notes": list(profile.notes),
        "advice": [f.to_dict() for f in analysis.findings],  # typed findings (tb_hwprof.core.findings)
        "kernel_count": len(profile.kernels),
        "files": {"kernels": metadata.KERNELS, "details": metadata.DETAILS_DIR if details else None,
                  "details_chunk": metadata.DETAILS_CHUNK if details else None,
                  **{metadata.summary_key(name): summary_file(name) for name in analysis.tables(profile)}},
    }


def summary_file(name: str) -> str:
    """Asset file of summary table `name`; names are identifiers, so they cannot escape the folder."""
    try:
        return metadata.summary_file(name)
    except ValueError as e:
        raise HwprofError(f"reader or analysis bug: {e}") from None


def _write_launch_tables(profile, kernels, assets: Path) -> None:
    """The kernels table and the per-launch details files."""
    tables.write_kernels_gz(assets / metadata.KERNELS, kernels)  # already JSON-safe
    _write_details(profile, assets)


def _write_assets(profile, summaries: dict, assets: Path, manifest: dict, timeline_files, launch_tables) -> None:
    """Everything the background jobs did not write, then the manifest, which lists what the timeline
    job wrote (timeline_files / launch_tables: their Futures; None: not started, or no timeline)."""
    if launch_tables is None:
        _write_launch_tables(profile, profile.kernels, assets)
    else:
        launch_tables.result()
    for name, frame in summaries.items():
        doc = tables.frame_to_json(frame, frame.attrs.get("units", {}), with_dtypes=True)
        tables.write_json_gz(assets / summary_file(name), tables.clean_table_json(doc, frame))
    if timeline_files is not None:
        manifest["timeline"] = timeline_files.result()
        manifest["files"].update(timeline_index=metadata.TIMELINE_INDEX)
        if manifest["timeline"]["trace_written"]:
            manifest["files"].update(timeline=metadata.TIMELINE)
    # What each table inflates to, so readers can refuse a file that inflates to more (a bomb).
    manifest["inflated_bytes"] = {p.relative_to(assets).as_posix(): tables.inflated_size(p)
                                  for p in sorted(assets.rglob("*.json.gz")) if p.name != metadata.TIMELINE}
    tmp = assets / (metadata.MANIFEST + ".tmp")
    # finish() made the manifest JSON-safe (tables.clean) before the timeline and sizes were added.
    text = json.dumps(manifest, indent=1, sort_keys=True, allow_nan=False)
    tables.check_unicode(text, tmp)
    check_own_manifest(tmp, text)
    tmp.write_text(text)
    os.rename(tmp, assets / metadata.MANIFEST)


def check_own_manifest(path: Path, text: str) -> None:
    """Refuse (UnsoundRun) to finish a run whose manifest, as written, its own reader would refuse: a
    reader that let a bad value through fails the export that read it, not every later load."""
    try:
        run_checks.check_manifest(path, json.loads(text))
    except InputError as e:
        raise tables.UnsoundRun(f"{path}: the run's own reader would refuse this manifest ({e.problem})",
                                e.problem) from None


def _write_timeline(timeline, assets: Path, window, mode: str) -> dict:
    from . import trace
    return tables.clean(trace.write_timeline(timeline, assets / metadata.TIMELINE, assets / metadata.TIMELINE_INDEX,
                                             window, mode))


def has_details(profile) -> bool:
    """Whether the report gave any launch raw metrics or rules (tracers give none)."""
    return any(profile.raw_metrics) or any(profile.rules)


def _write_details(profile, assets: Path) -> None:
    """Raw metrics and rule results, DETAILS_CHUNK launches a file (absent ones as empty); none at all
    without any (tracers: the manifest's files.details is null)."""
    if not has_details(profile):
        return
    (assets / metadata.DETAILS_DIR).mkdir()
    n = len(profile.kernels)
    raw = profile.raw_metrics or [{}] * n
    rules = profile.rules or [[]] * n
    if len(raw) != n or len(rules) != n:
        raise HwprofError(f"reader bug: {len(raw)} raw metric sets and {len(rules)} rule lists for {n} launches")
    for first in range(0, n, metadata.DETAILS_CHUNK):
        last = first + metadata.DETAILS_CHUNK
        doc = tables.details_doc(first, raw[first:last], rules[first:last])
        tables.write_json_gz(assets / metadata.details_file(first), doc, fast=True)


def _write_events(assets: Path, scalars: dict, manifest: dict, step: int) -> None:
    """Written into the asset folder under a pending name: TensorBoard lists a folder once it holds a
    "tfevents" file, so the file takes that name only once the run is in place (show_events)."""
    tmp = assets / "events.tmp"
    with open(tmp, "wb") as f:
        for record in summary.run_events(scalars, manifest, step):
            records.write_record(f, record)
        f.flush()
        os.fsync(f.fileno())
    name = f"{PENDING_PREFIX}{int(time.time())}.{socket.gethostname()}.{os.getpid()}{metadata.EVENTS_SUFFIX}"
    os.rename(tmp, assets / name)


def write_series_events(logdir, group: str, points) -> Path:
    """<logdir>/<group>/events.out.tfevents.*.tb-hwprof-series: every run of a series' headline scalars
    at the run's step, so TensorBoard's Scalars tab draws the series as lines (each run's own event
    file holds its one step).  Replaces the group's earlier series file; written under another name
    and renamed, so TensorBoard never reads half of it."""
    folder = Path(logdir).joinpath(*check_run_name(group).parts)
    earlier = [p for p in folder.iterdir() if p.name.endswith(metadata.SERIES_EVENTS_SUFFIX) and p.is_file()]
    tmp = folder / ".series-events.tmp"
    with open(tmp, "wb") as f:
        for record in summary.series_events(points):
            records.write_record(f, record)
        f.flush()
        os.fsync(f.fileno())
    path = folder / (f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}"
                     f"{metadata.SERIES_EVENTS_SUFFIX}")
    os.rename(tmp, path)
    for old in earlier:
        if old != path:
            old.unlink()
    return path


class StagedRun:
    """A run being written into its staging folder (<parent>/.tb-hwprof/staging/), its lock held.

    The timeline's files (index and trace: ~0.3 s of sorts, gathers and file writes at 1M kernels,
    which release the GIL) need only the profile, so they start on a background thread as soon as
    the run is staged, while the caller analyses the profile; finish(analysis) writes the rest and
    puts the run in place, abort() removes it.  `timeline_pool`: an executor shared by several
    staged runs (their timeline jobs then queue on it), else the run makes its own.  RunBusy when
    another export of the same run holds its lock."""

    def __init__(self, profile, logdir, run: str, overwrite: bool = False, window=None, trace: str = "auto",
                 timeline_pool=None, beside: bool = False, listed: bool = True):
        self.profile = profile
        self.beside = beside
        self.listed = listed  # False: into place with its event files pending (a job's staged rank)
        self.run_dir = Path(logdir).joinpath(*check_run_name(run).parts)
        self.area = area_of(self.run_dir)
        self.created = [p for p in [self.run_dir.parent, *self.run_dir.parent.parents] if not p.exists()]
        self.staging = None
        self.old = self.area / "old" / f"{key_of(self.run_dir.name)}@{owner_tag()}"
        self.timeline_files = self.launch_tables = self._own_pool = self._launch_pool = None
        self._timeline_pool = None
        self.lock = lock_run(self.run_dir, run)
        try:
            clean_area(self.area)  # dead exports' leftovers, whatever their run
            repair(self.run_dir)  # an interrupted --overwrite's run is put back before the check
            run_folder(logdir, run, overwrite, beside)
            self.staging = Path(retrying(self._make_staging))
            # mkdtemp makes it 0700; renamed into place it is the run folder, which a TensorBoard running
            # as another user must read: the mode a plain mkdir would give (the umask's).
            os.chmod(self.staging, 0o777 & ~current_umask())
            self.assets = asset_dir(self.staging)
            self.assets.mkdir(parents=True)
        except BaseException:
            if self.staging is not None:
                shutil.rmtree(self.staging, ignore_errors=True)
            self._release()
            raise
        if profile.timeline is not None:
            if timeline_pool is None:
                timeline_pool = self._own_pool = ThreadPoolExecutor(1, thread_name_prefix="tb-hwprof-timeline")
            self.timeline_files = timeline_pool.submit(_write_timeline, profile.timeline, self.assets, window, trace)
            self._timeline_pool = timeline_pool

    def _make_staging(self) -> str:
        (self.area / "staging").mkdir(parents=True, exist_ok=True)
        return tempfile.mkdtemp(prefix=f"{key_of(self.run_dir.name)}@{owner_tag()}@", dir=self.area / "staging")

    def write_launch_tables(self, profile) -> None:
        """Start writing the kernels table and the details files in the background, on the timeline
        files' thread after them (run at once, their temporaries added ~15 MB to a 1M-kernel export's
        peak, for no time: both together take less than the analysis), else on a thread of its own.
        Call it once the kernels table is final (tb_hwprof.analysis.analyse's kernels_final), while
        the rest of the analysis runs.  The job encodes its own frame object over the same columns,
        so the analysis may read the profile's table meanwhile.  profile: the staged one (analyse
        passes it)."""
        if profile is not self.profile:
            raise ValueError("write_launch_tables: not the profile this run was staged with")
        kernels = profile.kernels.copy(deep=False)
        pool = self._timeline_pool  # after the timeline's files: their temporaries and these never add up
        if pool is None:
            pool = self._launch_pool = ThreadPoolExecutor(1, thread_name_prefix="tb-hwprof-kernels")
        self.launch_tables = pool.submit(_write_launch_tables, self.profile, kernels, self.assets)

    def finish(self, analysis, step: int = 0) -> Path:
        """Write the run with its `analysis` (tb_hwprof.analysis.analyse) and put it in place."""
        try:
            self.profile.provenance.export_time = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
            manifest = tables.clean(manifest_of(self.profile, analysis))  # JSON-safe once, for both files
            _write_assets(self.profile, analysis.tables(self.profile), self.assets, manifest, self.timeline_files,
                          self.launch_tables)
            _write_events(self.assets, analysis.scalars, manifest, step)
            self._close_pool()
            put_in_place(self.staging, self.run_dir, self.old, show=self.listed)
        except BaseException:
            self.abort()
            raise
        self._release()
        return self.run_dir

    def abort(self) -> None:
        """Remove the staging folder (after the timeline job, which writes into it), put back the run
        it was replacing if it got that far, and remove the folders made for it."""
        for job in (self.timeline_files, self.launch_tables):
            if job is not None:
                job.cancel()
                try:
                    job.exception()  # wait: it must not write into a folder being removed
                except BaseException:  # noqa: BLE001  (cancelled or interrupted: nothing more to wait for)
                    pass
        self._close_pool()
        if self.lock.fd is not None or fcntl is None:  # still ours: no other export can be at work here
            repair(self.run_dir)
            shutil.rmtree(self.old, ignore_errors=True)  # not put back by repair: the new run is in place
        if self.staging is not None:
            shutil.rmtree(self.staging, ignore_errors=True)
        self._release()

    def _release(self) -> None:
        """Unlock, and leave no empty folders behind: the area's, then those made for the run
        (innermost first)."""
        self.lock.release()
        tidy_area(self.area)
        for p in self.created:
            try:
                p.rmdir()
            except OSError:
                break

    def _close_pool(self) -> None:
        for pool in (self._own_pool, self._launch_pool):
            if pool is not None:
                pool.shutdown(wait=True)
        self._own_pool = self._launch_pool = None


def write_run(profile, analysis, logdir, run: str, overwrite: bool = False, step: int = 0,
              window=None, trace: str = "auto", beside: bool = False) -> Path:
    """Write `profile` and its `analysis` (tb_hwprof.analysis.analyse) to <logdir>/<run>/ and return
    that folder.  window (tb_hwprof.core.model.Window): the part of a trace to keep (None: all);
    trace: whether timeline.json.gz is written now (logdir/trace.py TRACE_MODES); beside: into a
    folder that holds other files, which stay (a PyTorch run folder)."""
    return StagedRun(profile, logdir, run, overwrite, window, trace, beside=beside).finish(analysis, step)


def current_umask() -> int:
    """The process' umask, read without changing it where Linux says it (/proc/self/status), else
    by setting and restoring it."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def put_in_place(staging: Path, run_dir: Path, old: Path, show: bool = True) -> None:
    """The staged run into place: a new run in one rename; over an existing folder, our files only
    (the module's steps 1-5: other files, such as a PyTorch run's traces or nested runs, stay).
    show=False leaves its event files pending (show_events lists the run later)."""
    if not run_dir.exists():
        os.rename(staging, run_dir)
        if show:
            show_events(run_dir)
        return
    replace_ours(asset_dir(staging), run_dir, old, show)
    shutil.rmtree(staging, ignore_errors=True)


def replace_ours(new_assets: Path, run_dir: Path, old: Path, show: bool = True) -> None:
    assets = asset_dir(run_dir)
    if assets.is_dir():
        hide_events(run_dir)  # 1
        retrying(lambda: (old.parent.mkdir(parents=True, exist_ok=True), os.rename(assets, old)))  # 2
    else:
        assets.parent.mkdir(parents=True, exist_ok=True)
    os.rename(new_assets, assets)  # 3
    if show:
        show_events(run_dir)  # 4
    shutil.rmtree(old, ignore_errors=True)  # 5
