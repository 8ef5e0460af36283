"""`tb-hwprof trace`: an exported run's Chrome trace rendered from its timeline index.

Runs exported with `--trace never`, or above `--trace auto`'s size, hold only timeline_index.npz;
this writes their timeline.json.gz later (atomically: a temp name renamed into place, then the
manifest rewritten the same way to list it), or writes the trace anywhere else with `-o`.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Callable, Optional

from ..core.errors import HwprofError, InputError
from . import metadata, reader, trace

PROGRESS_EVERY = 500_000  # slices between progress lines (a multiple of trace.CHUNK), for big traces


def render(run_dir: Path, out: Optional[Path] = None, progress: Callable[[str], None] = lambda line: None):
    """Write the run's trace into `out` (default: the run's own timeline.json.gz, then listed in its
    manifest); returns {"path", "events", "gz_bytes", "uncompressed_bytes"}, or None when the run's
    own file is already there."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.\-]+:/", str(run_dir)):  # a URL (Path() makes s3:// s3:/)
        raise InputError(run_dir, "tb-hwprof trace writes into local runs only",
                         "render a local copy of the run, or use the plugin's Download trace (rendered from the run's index)")
    manifest = reader.read_manifest(run_dir)  # one line for a folder that is not a run
    assets = reader.asset_dir(run_dir)
    own = assets / metadata.TIMELINE
    files = manifest.get("files") or {}
    if out is None and files.get("timeline") and own.is_file():
        return None
    target = own if out is None else out
    index = _read_index(run_dir, assets, files, (manifest.get("timeline") or {}).get("kept_events"))
    if "flow" not in index:
        progress(f"{run_dir}: timeline index v1 (older tb-hwprof): the trace has no launch flows and no bytes "
                 f"args; re-export the run for them")
    events = int(index["start"].size)
    written = _write_atomically(target, trace.index_trace(index, _chunk_progress(events, progress)))
    if Path(os.path.abspath(target)) == Path(os.path.abspath(own)):
        _list_in_manifest(assets, manifest, written)
    return {"path": target, "events": events, "gz_bytes": target.stat().st_size, "uncompressed_bytes": written}


def _read_index(run_dir: Path, assets: Path, files: dict, expected_events: Optional[int]) -> dict:
    name = files.get("timeline_index")
    path = assets / Path(str(name)).name if name else None  # confined to the asset folder
    if path is None or not path.is_file():
        raise HwprofError(f"{run_dir}: no timeline in this run (traces have one: Nsight Systems exports, "
                          f"rocprof kernel / API traces)")
    try:
        return trace.read_index(path, expected_events=expected_events)
    except (OSError, EOFError, ValueError) as e:
        raise InputError(path, f"unreadable timeline index ({type(e).__name__}: {e})",
                         "re-export the run with --overwrite") from None


def _chunk_progress(events: int, progress: Callable[[str], None]):
    if events <= trace.TRACE_EAGER_EVENTS:
        return None  # small: done before a progress line would help

    def report(done: int, total: int) -> None:
        if done % PROGRESS_EVERY == 0 or done == total:
            progress(f"rendered {done:,}/{total:,} slices" + ("; adding launch flows" if done == total else ""))
    progress(f"rendering {events:,} slices")
    return report


def _write_atomically(target: Path, pieces) -> int:
    """Pieces gzipped under a temp name beside `target`, renamed over it once complete."""
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        written = trace.write_pieces(pieces, tmp)
        os.replace(tmp, target)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise HwprofError(f"{target}: cannot write the trace ({e.strerror or e})") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return written


def _list_in_manifest(assets: Path, manifest: dict, written: int) -> None:
    """The manifest, rewritten atomically, lists the trace file (the plugin then serves it as is)."""
    manifest.setdefault("files", {})["timeline"] = metadata.TIMELINE
    manifest["timeline"] = {**(manifest.get("timeline") or {}), "trace_written": True, "uncompressed_bytes": written}
    tmp = assets / f".{metadata.MANIFEST}.tmp-{os.getpid()}"
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True, allow_nan=False))
    os.replace(tmp, assets / metadata.MANIFEST)
