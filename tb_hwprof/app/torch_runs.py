"""PyTorch run folders: export the traces torch.profiler writes where TensorBoard reads them.

`torch.profiler.tensorboard_trace_handler(dir)` writes `<dir>/<worker>.<ms>.pt.trace.json[.gz]`;
TensorBoard's run is `dir` (torch-tb-profiler finds its traces by that file name).  Exported
*beside* those files (our asset folder and events file in the same folder, the traces untouched),
the run shows both tabs.  A folder with several traces (several workers, or several profiling
cycles) gets one tb-hwprof run per trace in sub-folders `<dir>/<trace stem>`: a run folder holds
one tb-hwprof profile.

`trace_handler(logdir, run=None, worker=None, use_gzip=True)` is a drop-in for
`tensorboard_trace_handler`: it writes the trace where torch-tb-profiler looks and exports it at
once.  torch is an optional dependency (`pip install tb-hwprof[torch]`): it is imported by the
profiler that calls the handler, never by this module.
"""
from __future__ import annotations

import os
import re
import socket
import time
from pathlib import Path
from typing import Callable, List, Optional, Tuple

from ..core.errors import HwprofError

# torch-tb-profiler's discovery pattern (run_loader / io: "*.pt.trace.json" and ".gz").
TRACE_NAME = re.compile(r"^(?P<stem>.+)\.pt\.trace\.json(\.gz)?$")


def trace_files(folder) -> List[Path]:
    """The PyTorch traces of a run folder, by name as torch-tb-profiler finds them, sorted."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and TRACE_NAME.match(p.name))


def is_torch_run_folder(folder) -> bool:
    return bool(trace_files(folder))


def folder_exports(folder, logdir, run: Optional[str] = None) -> List[Tuple[Path, str, bool]]:
    """(trace file, run name, beside) for each trace of a PyTorch run folder.

    Inside the logdir, the run is the folder itself (one trace: written beside it) or its
    sub-folders (several traces).  Outside, the run is `run` (default: the folder's name) under
    the logdir, as for any report."""
    folder, logdir = Path(folder), Path(logdir)
    files = trace_files(folder)
    if not files:
        raise HwprofError(f"{folder}: no *.pt.trace.json[.gz] files -- pass a folder torch.profiler's "
                          "tensorboard_trace_handler wrote, or the trace file itself")
    inside = _relative_inside(folder, logdir)
    if inside is not None and run is None:
        if inside == ".":
            raise HwprofError(f"{folder}: the traces are in the logdir itself -- move them into a run folder "
                              f"({logdir}/<run>/) as tensorboard_trace_handler does, or pass --run")
        base, beside = inside, True
    else:
        base, beside = (run if run is not None else folder.resolve().name), False
    if len(files) == 1:
        return [(files[0], base, beside)]
    return [(f, f"{base}/{TRACE_NAME.match(f.name).group('stem')}", False) for f in files]


def _relative_inside(folder: Path, logdir: Path) -> Optional[str]:
    try:
        rel = os.path.relpath(folder.resolve(), logdir.resolve())
    except ValueError:  # another drive (Windows)
        return None
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return None
    return Path(rel).as_posix()


def export_folder(folder, logdir, run: Optional[str] = None, overwrite: bool = False,
                  progress: Callable[[str], None] = lambda line: None, **options) -> List[Path]:
    """Export every trace of a PyTorch run folder (see folder_exports); returns the run folders."""
    from .export import export_reports
    out = []
    plan = folder_exports(folder, logdir, run)
    for beside in (True, False):
        part = [(f, name) for f, name, b in plan if b == beside]
        if part:
            out += export_reports([f for f, _ in part], logdir, [name for _, name in part], overwrite=overwrite,
                                  progress=progress, beside=beside, **options)
    return out


def trace_handler(logdir, run: Optional[str] = None, worker: Optional[str] = None, use_gzip: bool = True):
    """on_trace_ready for torch.profiler.profile: writes `<logdir>/<run>/<worker>.<ms>.pt.trace.json[.gz]`
    (where torch-tb-profiler looks, as tensorboard_trace_handler does) and exports it to the
    tb-hwprof tab of the same run.  run default: "<host>_<pid>"; worker default: "<host>_<pid>".
    Each profiling cycle's trace replaces the previous export of that run (the trace files stay)."""
    name = worker or f"{socket.gethostname()}_{os.getpid()}"
    run_name = run or f"{socket.gethostname()}_{os.getpid()}"

    def handler(prof) -> None:
        run_dir = Path(logdir, run_name)
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / f"{name}.{time.time_ns() // 1_000_000}.pt.trace.json{'.gz' if use_gzip else ''}"
        prof.export_chrome_trace(str(path))
        from .export import export_reports
        export_reports([path], logdir, [run_name], overwrite=True, beside=True)

    return handler


__all__ = ["trace_handler", "trace_files", "folder_exports", "export_folder", "is_torch_run_folder"]
