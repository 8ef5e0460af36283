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


def recover_interrupted(run_dir: Path) -> None:
    """Put back a run that an interrupted --overwrite renamed aside; drop stale staging folders."""
    parent = run_dir.parent
    if not parent.is_dir():
        return
    olds = sorted(parent.glob(f".{run_dir.name}{OLD_TAG}*"))
    if olds and not run_dir.exists():
        os.rename(olds[-1], run_dir)
        olds = olds[:-1]
    for stale in olds + list(parent.glob(f".{run_dir.name}{STAGING_TAG}*")):
        shutil.rmtree(stale, ignore_errors=True)


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


def _write_assets(profile, summaries: dict, staging: Path, manifest: dict, window, trace: str) -> None:
    assets = staging.joinpath(*metadata.ASSET_DIR)
    assets.mkdir(parents=True)
    # Tracers: the timeline index (and the trace file unless it is left for later) is written on a
    # second thread meanwhile: its sorts, gathers and file writes release the GIL (1M kernels: ~0.3 s).
    with ThreadPoolExecutor(1, thread_name_prefix="tb-hwprof-timeline") as pool:
        timeline = None if profile.timeline is None else pool.submit(
            _write_timeline, profile.timeline, assets, window, trace)
        tables.write_kernels_gz(assets / metadata.KERNELS, profile.kernels)  # already JSON-safe
        _write_details(profile, assets)
        for name, frame in summaries.items():
            doc = tables.frame_to_json(frame, frame.attrs.get("units", {}), with_dtypes=True)
            tables.write_json_gz(assets / summary_file(name), tables.clean(doc))
        if timeline is not None:
            manifest["timeline"] = timeline.result()
            manifest["files"].update(timeline_index=metadata.TIMELINE_INDEX)
            if manifest["timeline"]["trace_written"]:
                manifest["files"].update(timeline=metadata.TIMELINE)
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


def write_run(profile, analysis, logdir, run: str, overwrite: bool = False, step: int = 0,
              window=None, trace: str = "auto") -> Path:
    """Write `profile` and its `analysis` (tb_hwprof.analysis.analyse) to <logdir>/<run>/ and return
    that folder.  window (tb_hwprof.model.Window): the part of a trace to keep (None: all);
    trace: whether timeline.json.gz is written now (logdir/trace.py TRACE_MODES)."""
    run_dir = Path(logdir).joinpath(*check_run_name(run).parts)
    recover_interrupted(run_dir)
    if run_dir.exists() and not overwrite:
        raise RunExists(f"{run_dir}: run already exists -- pass --overwrite to replace it, or choose another --run")
    profile.provenance.export_time = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    manifest = tables.clean(manifest_of(profile, analysis))  # JSON-safe once, for both files
    created = [p for p in [run_dir.parent, *run_dir.parent.parents] if not p.exists()]
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{run_dir.name}{STAGING_TAG}", dir=run_dir.parent))
    try:
        _write_assets(profile, analysis.tables(profile), staging, manifest, window, trace)
        _write_events(staging, analysis.scalars, manifest, step)
        _swap_in(staging, run_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for p in created:  # leave no empty folders behind (innermost first)
            try:
                p.rmdir()
            except OSError:
                break
        raise
    return run_dir


def _swap_in(staging: Path, run_dir: Path) -> None:
    if not run_dir.exists():
        os.rename(staging, run_dir)
        return
    old = run_dir.parent / f".{run_dir.name}{OLD_TAG}{os.getpid()}"
    os.rename(run_dir, old)
    os.rename(staging, run_dir)
    shutil.rmtree(old, ignore_errors=True)
