"""The one path from a report to a run: read -> window -> analyse -> write.

`analyse(profile)` computes everything derived from a profile, in the order of STEPS: the kernels
table's bound labels and roofline columns (in place: they are columns of that table), each
device's roofs and ridge points, the summary tables the analysis makes, the headline scalars and
the advice.  A step is `run(profile, analysis)` and sees the Analysis built so far, so advice,
which comes last, sees every table.  Adding an analysis is one line in STEPS.

`export_reports(paths, logdir, runs, ...)` is what `tb-hwprof export` and `tb_hwprof.export` both
run: every input read, windowed and analysed before any run is written (one bad file leaves the
logdir untouched), then each written by the writer, which only serialises.
"""
from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from .advice import advise
from .bottleneck import classify_profile
from .compare import COMPARE_TABLE, compare_table
from .findings import Finding
from .gpu_trace import TABLES as GPU_TRACE_TABLES, gpu_trace_tables, label_phases
from .occupancy import theoretical_occupancy
from .join import OP_COUNTERS_TABLE, operator_counters
from .roofline import apply_roofline, device_roofs, ridge_points
from .summary import headline_scalars
from .topdown import label_topdown_tables
from .torch_tables import TABLES as TORCH_TABLES, torch_tables


@dataclasses.dataclass
class Analysis:
    """Everything derived from a profile (besides the kernels table's own derived columns)."""

    findings: List[Finding] = dataclasses.field(default_factory=list)  # advice, most severe first per domain
    scalars: Dict[str, float] = dataclasses.field(default_factory=dict)  # headline figures (Scalars tab)
    roofline: Dict[int, dict] = dataclasses.field(default_factory=dict)  # device id -> {"roofs", "ridge_points"}
    summaries: Dict[str, pd.DataFrame] = dataclasses.field(default_factory=dict)  # tables the analysis made

    def tables(self, profile) -> Dict[str, pd.DataFrame]:
        """The reader's summary tables and the analysis' together (the analysis' win a shared name)."""
        return {**profile.summaries, **self.summaries}


# ------------------------------------------------------------------ the kernels table's labels
# What the classifier and the roofline read.  When none of it has a value (a tracer's launches),
# every launch of a device gets the same result: computed on one launch per device, then copied.
COUNTER_INPUTS = ("sm_throughput_pct", "memory_throughput_pct", "achieved_occupancy_pct", "theoretical_occupancy_pct",
                  "flops", "flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor", "flop_per_s",
                  "ai_dram", "ai_l2", "ai_l1", "dram_bytes", "l2_bytes", "l1_bytes")
OUTPUTS = ("ai_dram", "ai_l2", "ai_l1", "peak_flop_per_s", "roofline_precision", "attainable_flop_per_s",
           "roofline_efficiency_pct", "binding_roof", "bound", "bound_level", "bound_reason", "occupancy_note")


def label_kernels(profile):
    """Fill the bound label, reason, occupancy note and roofline columns of the profile's kernels
    table in place; returns the profile."""
    from ..model import normalise_kernels

    if len(profile.kernels) and not any(_has_values(profile.kernels[c]) for c in COUNTER_INPUTS):
        _label_once_per_device(profile)
    else:
        apply_roofline(profile)
        classify_profile(profile)
    # The reader normalised its table, though some set columns after that: every dtype is checked
    # again (text columns written since then show pandas' str dtype, not object).
    profile.kernels = normalise_kernels(profile.kernels, copy=False, scan_text=False)
    return profile


def _has_values(column) -> bool:
    from ..model import ALL_NAN_DTYPE, is_all_nan_column
    if column.dtype == ALL_NAN_DTYPE:
        return not is_all_nan_column(column)
    return bool(column.notna().any())


def _label_once_per_device(profile) -> None:
    """The full analysis on the first launch of each device, copied to that device's launches
    (all-missing float results stay sparse: no memory per launch)."""
    from ..model import all_nan_column
    kernels = profile.kernels
    which, devices = pd.factorize(kernels["device"].to_numpy(dtype=float), use_na_sentinel=False)
    first = np.zeros(len(devices), dtype=np.int64)
    first[which[::-1]] = np.arange(len(which))[::-1]  # the last write per device is its first launch
    sample = kernels.iloc[first].copy()
    for col in sample.columns:
        if hasattr(sample[col], "sparse"):
            sample[col] = sample[col].astype("float64")
    one = dataclasses.replace(profile, kernels=sample)
    apply_roofline(one)
    classify_profile(one)
    for col in OUTPUTS:
        values = one.kernels[col].to_numpy()
        if values.dtype.kind == "f" and np.isnan(values).all():
            kernels[col] = all_nan_column(len(kernels))
        elif values.dtype == object:  # kept object: pandas 3 would infer (and later undo) its str dtype
            kernels[col] = pd.Series(values[which], index=kernels.index, dtype=object, copy=False)
        else:
            kernels[col] = values[which]


def label_tables(profile):
    """The profile's tables with their own derived columns, in place (what the steps below fill
    in them too): the kernels' labels, the CPU hotspots' top-down labels, a trace's GPU time
    projected onto its NVTX ranges.  Returns the profile (tb_hwprof.read gives it so)."""
    label_kernels(profile)
    label_topdown_tables(profile.summaries)
    label_phases(profile)
    return profile


# ------------------------------------------------------------------ the steps, in order
def kernel_labels(profile, analysis: Analysis) -> None:
    label_kernels(profile)


def device_roofline(profile, analysis: Analysis) -> None:
    analysis.roofline = {d.id: {"roofs": device_roofs(d), "ridge_points": ridge_points(device_roofs(d))}
                         for d in profile.devices}


def topdown_labels(profile, analysis: Analysis) -> None:
    """CPU hotspot tables (VTune): the Intel TMA label of each row, in place (columns of that table)."""
    label_topdown_tables(profile.summaries)


def compare_kernels(profile, analysis: Analysis) -> None:
    """The kernels grouped per instantiation as compare pairs them (analysis/compare.py), so comparing
    a written run reads this table, not its launches.  None for a run without kernels."""
    if len(profile.kernels):
        analysis.summaries[COMPARE_TABLE] = compare_table(profile.kernels)


def headline_figures(profile, analysis: Analysis) -> None:
    analysis.scalars = headline_scalars(profile.kernels, analysis.tables(profile))


def findings(profile, analysis: Analysis) -> None:
    analysis.findings = advise(profile, analysis.tables(profile))


@dataclasses.dataclass(frozen=True)
class Step:
    run: Callable[..., None]  # run(profile, analysis): fills its part of the analysis
    makes: Tuple[str, ...] = ()  # names of the summary tables it adds to analysis.summaries
    kernels_final: bool = False  # the kernels table is final once this step has run (no later step changes it)


STEPS = (
    # The timeline's tables need nothing else, and run first: beside the start of the timeline files'
    # writing (a sort), not its middle (gathered columns, depths, overview), whose temporaries and
    # theirs added up to the export's peak at 1M kernels.
    Step(gpu_trace_tables, makes=GPU_TRACE_TABLES),
    Step(kernel_labels),
    # After the labels (a trace's launches stay labelled once per device), before the table is final.
    Step(theoretical_occupancy, kernels_final=True),
    Step(device_roofline),
    Step(topdown_labels),
    # Summary-table steps go here, before the figures and the advice that read the tables.
    Step(torch_tables, makes=TORCH_TABLES),
    Step(operator_counters, makes=(OP_COUNTERS_TABLE,)),  # joined traces (analysis/join.py)
    Step(compare_kernels, makes=(COMPARE_TABLE,)),
    Step(headline_figures),
    Step(findings),
)
# Summary tables the analysis makes: a written run's tables of these names are its Analysis'
# (load_analysis), the others the reader's (load_run's Profile.summaries).
ANALYSIS_SUMMARIES = tuple(name for step in STEPS for name in step.makes)


def analyse(profile, kernels_final: Optional[Callable[[object], None]] = None) -> Analysis:
    """Everything derived from `profile` (its kernels table's labels filled in place).
    kernels_final(profile): called as soon as the kernels table is final (the export starts writing
    it then, while the other steps run)."""
    analysis = Analysis()
    for step in STEPS:
        step.run(profile, analysis)
        if step.kernels_final and kernels_final is not None:
            kernels_final(profile)
    return analysis


# ------------------------------------------------------------------ read -> window -> analyse -> write
@dataclasses.dataclass
class Report:
    """One input, read, with the part of its trace the export keeps."""

    path: Path
    profile: object  # tb_hwprof.model.Profile
    window: Optional[object] = None  # tb_hwprof.model.Window; None: the whole capture


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
    from ..detect import read
    path = Path(path)
    with blamed_on(path):
        profile = read(path, salvage=salvage)
        if located and path in located:
            profile.provenance = dataclasses.replace(profile.provenance, source_path=str(Path(located[path]).resolve()))
        return Report(path, profile, trace_window(profile, path, window, progress))


@contextlib.contextmanager
def blamed_on(path: Path):
    """An unexpected exception (a bug, or damage no reader foresaw) while this input is handled
    carries the input's path (`input_path`, and a note in its traceback), so the one-line error
    can name the file; it is re-raised, never swallowed."""
    from ..errors import HwprofError
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
    """Text a reader let through that cannot be written (not Unicode) is named as the input's, not as
    the internal staging file the writer was filling."""
    from ..errors import InputError
    from ..logdir.tables import UnwritableText
    try:
        yield
    except UnwritableText as e:
        raise InputError(path, f"holds text that is not Unicode ({e.cause}), which its reader let through",
                         "report it with the input file") from None


def trace_window(profile, path: Path, window: WindowOptions, progress: Callable[[str], None]):
    """The Window a trace's export keeps (None: all of it)."""
    if not window:
        return None
    if profile.timeline is None:
        progress(f"{path}: no timeline in this report: --time-range/--nvtx-range ignored")
        return None
    from . import timeline as tl
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
    from ..errors import HwprofError
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
    import tempfile
    from ..logdir import fs
    remote = fs.RemoteDir(url)
    for name in runs:
        fs.check_free(remote, name, overwrite, beside)  # before reading anything: a name in use fails at once
    with tempfile.TemporaryDirectory(prefix="tb-hwprof-export-") as local:
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
