"""Writes a Profile as a TensorBoard run, atomically.

Everything is written into a hidden staging folder beside the run and renamed
into place at the end, so an export that fails or is killed leaves either the
previous run or nothing.  Replacing a run renames the old one aside first; a
kill between the two renames is repaired by the next export (or load).
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import re
import shutil
import socket
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from .. import __version__
from ..errors import HwprofError, RunExists
from . import metadata, records, summary, tables

STAGING_TAG = ".tb-hwprof-staging-"
OLD_TAG = ".tb-hwprof-old-"


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
    taken = run_dir.joinpath(*metadata.ASSET_DIR).exists() if beside else run_dir.exists()
    if taken and not overwrite:
        raise RunExists(f"{run_dir}: run already exists -- pass --overwrite to replace it, or choose another --run")
    return run_dir


# What follows a tag in the run's own hidden folders: the pid of the --overwrite that renamed the old
# run aside; tempfile.mkdtemp's random part.
OLD_SUFFIX, STAGING_SUFFIX = re.compile(r"\d+"), re.compile(r"[a-z0-9_]+")


def recover_interrupted(run_dir: Path) -> None:
    """Put back a run that an interrupted --overwrite renamed aside; drop stale staging folders."""
    if not run_dir.parent.is_dir():
        return
    olds = leftovers(run_dir, OLD_TAG, OLD_SUFFIX)
    if olds and not run_dir.exists():
        os.rename(olds[-1], run_dir)
        olds = olds[:-1]
    for stale in olds + leftovers(run_dir, STAGING_TAG, STAGING_SUFFIX):
        shutil.rmtree(stale, ignore_errors=True)


def leftovers(run_dir: Path, tag: str, suffix: "re.Pattern") -> list:
    """The run's own hidden folders '.<run><tag><suffix>', sorted.  Names are compared as text, never
    as a glob pattern: a run named '*' or '[a]' must not match other runs' folders."""
    prefix = f".{run_dir.name}{tag}"
    return sorted(p for p in run_dir.parent.iterdir()
                  if p.name.startswith(prefix) and suffix.fullmatch(p.name[len(prefix):]) and p.is_dir())


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
        "advice": [f.to_dict() for f in analysis.findings],  # typed findings (tb_hwprof.analysis.findings)
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
        tables.write_json_gz(assets / summary_file(name), tables.clean(doc))
    if timeline_files is not None:
        manifest["timeline"] = timeline_files.result()
        manifest["files"].update(timeline_index=metadata.TIMELINE_INDEX)
        if manifest["timeline"]["trace_written"]:
            manifest["files"].update(timeline=metadata.TIMELINE)
    # What each table inflates to, so readers can refuse a file that inflates to more (a bomb).
    manifest["inflated_bytes"] = {p.relative_to(assets).as_posix(): tables.inflated_size(p)
                                  for p in sorted(assets.rglob("*.json.gz")) if p.name != metadata.TIMELINE}
    tmp = assets / (metadata.MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True, allow_nan=False))
    os.rename(tmp, assets / metadata.MANIFEST)


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
        tables.write_json_gz(assets / metadata.details_file(first), doc)


def _write_events(staging: Path, scalars: dict, manifest: dict, step: int) -> None:
    """Written under a temporary name, renamed last: TensorBoard lists a folder only once it has one."""
    tmp = staging / "events.tmp"
    with open(tmp, "wb") as f:
        for record in summary.run_events(scalars, manifest, step):
            records.write_record(f, record)
        f.flush()
        os.fsync(f.fileno())
    name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}{metadata.EVENTS_SUFFIX}"
    os.rename(tmp, staging / name)


class StagedRun:
    """A run being written into its hidden staging folder.

    The timeline's files (index and trace: ~0.3 s of sorts, gathers and file writes at 1M kernels,
    which release the GIL) need only the profile, so they start on a background thread as soon as
    the run is staged, while the caller analyses the profile; finish(analysis) writes the rest and
    renames the folder into place, abort() removes it.  `timeline_pool`: an executor shared by
    several staged runs (their timeline jobs then queue on it), else the run makes its own."""

    def __init__(self, profile, logdir, run: str, overwrite: bool = False, window=None, trace: str = "auto",
                 timeline_pool=None, beside: bool = False):
        self.profile = profile
        self.beside = beside
        self.run_dir = Path(logdir).joinpath(*check_run_name(run).parts)
        if not beside:
            recover_interrupted(self.run_dir)  # an interrupted --overwrite's run is put back before the check
        run_folder(logdir, run, overwrite, beside)
        self.created = [p for p in [self.run_dir.parent, *self.run_dir.parent.parents] if not p.exists()]
        self.run_dir.parent.mkdir(parents=True, exist_ok=True)
        self.staging = Path(tempfile.mkdtemp(prefix=f".{self.run_dir.name}{STAGING_TAG}", dir=self.run_dir.parent))
        # mkdtemp makes it 0700; renamed into place it is the run folder, which a TensorBoard running
        # as another user must read: the mode a plain mkdir would give (the umask's).
        os.chmod(self.staging, 0o777 & ~current_umask())
        self.assets = self.staging.joinpath(*metadata.ASSET_DIR)
        self.assets.mkdir(parents=True)
        self._own_pool = None
        self._launch_pool = None
        self.timeline_files = None
        self.launch_tables = None
        if profile.timeline is not None:
            if timeline_pool is None:
                timeline_pool = self._own_pool = ThreadPoolExecutor(1, thread_name_prefix="tb-hwprof-timeline")
            self.timeline_files = timeline_pool.submit(_write_timeline, profile.timeline, self.assets, window, trace)

    def write_launch_tables(self, profile) -> None:
        """Start writing the kernels table and the details files on a thread of their own: call it once
        the kernels table is final (tb_hwprof.analysis.analyse's kernels_final), while the rest of the
        analysis runs.  The job encodes its own frame object over the same columns, so the analysis
        may read the profile's table meanwhile.  profile: the staged one (analyse passes it)."""
        if profile is not self.profile:
            raise ValueError("write_launch_tables: not the profile this run was staged with")
        kernels = profile.kernels.copy(deep=False)
        self._launch_pool = ThreadPoolExecutor(1, thread_name_prefix="tb-hwprof-kernels")
        self.launch_tables = self._launch_pool.submit(_write_launch_tables, self.profile, kernels, self.assets)

    def finish(self, analysis, step: int = 0) -> Path:
        """Write the run with its `analysis` (tb_hwprof.analysis.analyse) and put it in place."""
        try:
            self.profile.provenance.export_time = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
            manifest = tables.clean(manifest_of(self.profile, analysis))  # JSON-safe once, for both files
            _write_assets(self.profile, analysis.tables(self.profile), self.assets, manifest, self.timeline_files,
                          self.launch_tables)
            _write_events(self.staging, analysis.scalars, manifest, step)
            self._close_pool()
            if self.beside:
                _move_in_beside(self.staging, self.run_dir)
            else:
                _swap_in(self.staging, self.run_dir)
        except BaseException:
            self.abort()
            raise
        return self.run_dir

    def abort(self) -> None:
        """Remove the staging folder (after the timeline job, which writes into it) and the folders
        made for it."""
        for job in (self.timeline_files, self.launch_tables):
            if job is not None:
                job.cancel()
                try:
                    job.exception()  # wait: it must not write into a folder being removed
                except BaseException:  # noqa: BLE001  (cancelled or interrupted: nothing more to wait for)
                    pass
        self._close_pool()
        shutil.rmtree(self.staging, ignore_errors=True)
        for p in self.created:  # leave no empty folders behind (innermost first)
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
    that folder.  window (tb_hwprof.model.Window): the part of a trace to keep (None: all);
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


def _move_in_beside(staging: Path, run_dir: Path) -> None:
    """Put a staged run's asset folder and events file into an existing folder whose other files
    (the user's traces) stay untouched; our previous asset folder and events files are replaced."""
    run_dir.mkdir(parents=True, exist_ok=True)
    target = run_dir.joinpath(*metadata.ASSET_DIR)
    target.parent.mkdir(parents=True, exist_ok=True)
    old = target.parent / f".{target.name}{OLD_TAG}{os.getpid()}"
    if target.exists():
        os.rename(target, old)
    os.rename(staging.joinpath(*metadata.ASSET_DIR), target)
    ours_before = [p for p in run_dir.iterdir() if p.name.startswith("events.out.tfevents.")
                   and p.name.endswith(metadata.EVENTS_SUFFIX) and p.is_file()]
    moved_in = set()
    for events in staging.iterdir():
        if events.is_file() and events.name.endswith(metadata.EVENTS_SUFFIX):
            os.replace(events, run_dir / events.name)  # same name within a second: replaced
            moved_in.add(events.name)
    for p in ours_before:
        if p.name not in moved_in:
            p.unlink(missing_ok=True)
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(staging, ignore_errors=True)


def _swap_in(staging: Path, run_dir: Path) -> None:
    if not run_dir.exists():
        os.rename(staging, run_dir)
        return
    old = run_dir.parent / f".{run_dir.name}{OLD_TAG}{os.getpid()}"
    os.rename(run_dir, old)
    os.rename(staging, run_dir)
    shutil.rmtree(old, ignore_errors=True)
