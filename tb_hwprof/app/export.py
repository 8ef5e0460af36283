"""The one path from a report to a run: read -> window -> analyse -> write.

`export_reports(paths, logdir, runs, ...)` is what `tb-hwprof export` and `tb_hwprof.export` both
run: every input read (readers/), windowed and analysed (analysis/) before any run is written (one
bad file leaves the logdir untouched), then each written by the writer (logdir/), which only
serialises.
"""
from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from ..analysis.pipeline import analyse


@dataclasses.dataclass
class Report:
    """One input, read, with the part of its trace the export keeps."""

    path: Path
    profile: object  # tb_hwprof.core.model.Profile
    window: Optional[object] = None  # tb_hwprof.core.model.Window; None: the whole capture


@dataclasses.dataclass(frozen=True)
class WindowOptions:
    """--time-range 'START:END' (ns) or --nvtx-range NAME (the first range of that name, or with
    instances="all" from the first one's start to the last one's end); neither: everything."""

    time_range: Optional[str] = None
    nvtx_range: Optional[str] = None
    nvtx_instances: str = "first"

    def __bool__(self) -> bool:
        return self.time_range is not None or self.nvtx_range is not None


def read_report(path, window: WindowOptions = WindowOptions(),
                progress: Callable[[str], None] = lambda line: None, salvage: bool = False,
                located: Optional[Dict[Path, Path]] = None) -> Report:
    """Read and window one input (salvage: keep a damaged report's sound launches, for the readers
    that can tell them apart; the others ignore it).  located: {input path: the path the run names
    as its source instead} (`profile` moves its captured files into the run once it is written)."""
    from ..core.progress import told_to
    from ..readers.detect import read
    path = Path(path)
    with blamed_on(path):
        with told_to(progress):  # a big report's reader says how far it got
            profile = read(path, salvage=salvage)
        if located and path in located:
            profile.provenance = dataclasses.replace(profile.provenance, source_path=str(Path(located[path]).resolve()))
        return Report(path, profile, trace_window(profile, path, window, progress))


@contextlib.contextmanager
def blamed_on(path: Path):
    """An unexpected exception (a bug, or damage no reader foresaw) while this input is handled
    carries the input's path (`input_path`, and a note in its traceback), so the one-line error
    can name the file; it is re-raised, never swallowed."""
    from ..core.errors import HwprofError
    try:
        yield
    except (HwprofError, OSError):  # already name what they concern
        raise
    except Exception as e:
        if getattr(e, "input_path", None) is None:
            e.input_path = path
            e.add_note(f"while handling {path}")
        raise


@contextlib.contextmanager
def written_from(path: Path):
    """Text a reader let through that cannot be written (not Unicode), or a manifest the run's own
    reader would refuse, is named as the input's, not as the internal staging file the writer was
    filling."""
    from ..core.errors import InputError
    from ..logdir.tables import LetThrough
    try:
        yield
    except LetThrough as e:
        raise InputError(path, f"{e.did} ({e.cause}), which its reader let through",
                         "report it with the input file") from None


def trace_window(profile, path: Path, window: WindowOptions, progress: Callable[[str], None]):
    """The Window a trace's export keeps (None: all of it)."""
    if not window:
        return None
    if profile.timeline is None:
        progress(f"{path}: no timeline in this report: --time-range/--nvtx-range ignored")
        return None
    from ..analysis import timeline as tl
    if window.nvtx_range is not None:
        return tl.nvtx_window(profile.timeline, window.nvtx_range, every=window.nvtx_instances == "all")
    return tl.time_window(profile.timeline, *tl.parse_time_range(window.time_range))


def export_reports(paths: Sequence, logdir, runs: Sequence[str], *, overwrite: bool = False, step=0,
                   window: WindowOptions = WindowOptions(), trace: str = "auto",
                   progress: Callable[[str], None] = lambda line: None,
                   written: Callable[[Path], None] = lambda run_dir: None, beside: bool = False,
                   salvage: bool = False, series: Optional[str] = None,
                   located: Optional[Dict[Path, Path]] = None) -> List[Path]:
    """Export each of `paths` as the run of the same position in `runs` under `logdir`; returns the
    run folders.  Every input is read before any run is written; progress(line) tells the steps,
    written(run_dir) is called as each run is in place.  step: the scalars' step, one for all or one
    per input.  series: the runs are the steps of an optimisation series named so (their group
    folder): its own event file then holds every run's headline scalars at the run's step, which
    TensorBoard's Scalars tab draws as lines.  beside: the run folders hold other files
    that stay (PyTorch run folders: the traces torch-tb-profiler reads there).  salvage: a damaged
    report keeps its sound launches (the run's notes list the others) instead of being refused."""
    from ..core.errors import HwprofError
    from ..logdir import fs
    from ..logdir.trace import TRACE_MODES
    from ..logdir.writer import run_folder
    if trace not in TRACE_MODES:
        raise HwprofError(f"bad trace mode {trace!r}: use one of {', '.join(TRACE_MODES)}")
    if fs.is_url(logdir):
        return _export_remote(paths, logdir, runs, overwrite=overwrite, step=step, window=window, trace=trace,
                              progress=progress, written=written, beside=beside, salvage=salvage, series=series)
    logdir = Path(logdir)
    for name in runs:
        run_folder(logdir, name, overwrite, beside)  # before reading anything: a name in use fails at once
    reports = []
    for i, path in enumerate(paths, 1):
        started = time.perf_counter()
        reports.append(read_report(path, window, progress, salvage, located))
        progress(f"[{i}/{len(paths)}] read {path} ({len(reports[-1].profile.kernels)} launches, "
                 f"{time.perf_counter() - started:.2f} s)")
        for note in reports[-1].profile.notes:  # what the reader left out or assumed: said now, kept in the run
            progress(f"[{i}/{len(paths)}] note: {note}")
    steps = list(step) if isinstance(step, (list, tuple, range)) else [step] * len(reports)
    if len(steps) != len(reports):
        raise HwprofError(f"{len(steps)} steps for {len(reports)} inputs: give one step per input")
    out, analyses = _analyse_and_write(reports, logdir, runs, overwrite, steps, trace, progress, written, beside)
    if series is not None:
        from ..logdir.writer import write_series_events
        path = write_series_events(logdir, series, [(a.scalars, s) for a, s in zip(analyses, steps)])
        progress(f"series {series}: headline scalars of {len(out)} runs at steps {steps[0]}..{steps[-1]} in {path}")
    return out


def _export_remote(paths: Sequence, url: str, runs: Sequence[str], *, overwrite: bool, written, progress,
                   beside: bool, series: Optional[str], **options) -> List[str]:
    """export_reports to a URL logdir (logdir/fs.py): every run written locally into a temporary
    folder as to a local logdir, then each published (staged, then copied with its manifest and
    event file last); the runs' URLs."""
    from ..logdir import fs
    from ..core.scratch import scratch_folder
    remote = fs.RemoteDir(url)
    for name in runs:
        fs.check_free(remote, name, overwrite, beside)  # before reading anything: a name in use fails at once
    with scratch_folder("export") as local:
        local_runs = export_reports(paths, local, runs, progress=progress, beside=beside, series=series, **options)
        out = []
        for name, local_run in zip(runs, local_runs):
            out.append(fs.publish_run(remote, local_run, name, overwrite, beside))
            progress(f"published {out[-1]}")
            written(out[-1])
        if series is not None:
            fs.publish_series_events(remote, Path(local), series)
    return out


def _analyse_and_write(reports: List[Report], logdir: Path, runs: Sequence[str], overwrite: bool, steps: List[int],
                       trace: str, progress, written, beside: bool = False, listed: bool = True):
    """Stage every run (its timeline files start on a background thread: they need no analysis), analyse
    every report, then put each run in place; (run folders, analyses).  Anything failing before the
    first run is in place removes every staged folder: the logdir is as it was.  listed=False: the
    runs' event files stay pending (logdir/writer.py StagedRun listed; a job's staged ranks)."""
    from concurrent.futures import ThreadPoolExecutor
    from ..logdir.writer import StagedRun
    staged: List = []
    with ThreadPoolExecutor(1, thread_name_prefix="tb-hwprof-timeline") as timeline_pool:
        try:
            for report, name in zip(reports, runs):
                with written_from(report.path):
                    staged.append(StagedRun(report.profile, logdir, name, overwrite, report.window, trace,
                                            timeline_pool, beside=beside, listed=listed))
            analyses = []
            for i, report in enumerate(reports, 1):
                started = time.perf_counter()
                with blamed_on(report.path), written_from(report.path):
                    analyses.append(analyse(report.profile, kernels_final=staged[i - 1].write_launch_tables))
                progress(f"[{i}/{len(reports)}] analysed {report.path} ({len(analyses[-1].findings)} findings, "
                         f"{time.perf_counter() - started:.2f} s)")
        except BaseException:
            for run in staged:
                run.abort()
            raise
        out = []
        try:
            for i, (run, analysis, step, report) in enumerate(zip(staged, analyses, steps, reports), 1):
                with written_from(report.path):
                    out.append(run.finish(analysis, step))  # a run that fails here removes its own folder
                progress(f"[{i}/{len(staged)}] wrote {out[-1]}")
                written(out[-1])
        except BaseException:
            for run in staged[len(out) + 1:]:
                run.abort()
            raise
    return out, analyses


def export_report(path, logdir, run: str, **options) -> Path:
    """Export one input as run `run` under `logdir` (options: those of export_reports)."""
    return export_reports([path], logdir, [run], **options)[0]
