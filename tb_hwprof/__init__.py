"""tb-hwprof: GPU and CPU profiler results (Nsight Compute, ...) in TensorBoard.

    import tb_hwprof
    profile = tb_hwprof.read("report.ncu-rep")      # format detected from content
    profile.kernels                                   # pandas DataFrame, one row per launch
    analysis = tb_hwprof.analyse(profile)             # findings, headline scalars, roofs, summaries
    tb_hwprof.export("report.ncu-rep", "runs", "baseline")
    tb_hwprof.load_run("runs/baseline")               # the same Profile, read back
    tb_hwprof.load_analysis("runs/baseline")          # the same Analysis, read back
"""
from .core import __version__


def read(path):
    """The report's Profile, its tables labelled (the kernels' bound and roofline columns, the CPU
    hotspots' top-down labels, the GPU time projected onto a trace's NVTX ranges)."""
    from .analysis.pipeline import label_tables
    from .readers.detect import read as _read
    return label_tables(_read(path))


def analyse(profile):
    """Everything derived from `profile`: a tb_hwprof.analysis.Analysis."""
    from .analysis.pipeline import analyse as _analyse
    return _analyse(profile)


def load_run(run_dir, with_details: bool = True):
    """The Profile a run was written from (the reader's tables; load_analysis has the analysis')."""
    from .analysis import pipeline
    from .logdir.reader import load_run as _load_run
    return _load_run(run_dir, with_details, pipeline.ANALYSIS_SUMMARIES)


def load_analysis(run_dir):
    """The Analysis a run was written with."""
    from .analysis import pipeline
    from .logdir.reader import load_analysis as _load_analysis
    return _load_analysis(run_dir, pipeline.ANALYSIS_SUMMARIES)


def export(path, logdir, run, overwrite: bool = False, step: int = 0, *, time_range=None, nvtx_range=None,
           nvtx_instances: str = "first", trace: str = "auto", salvage: bool = False):
    """Read `path` and write it as run `run` under `logdir`, as `tb-hwprof export` does (the same
    function); returns the run folder.  time_range 'START:END' ns or nvtx_range NAME keep a window of
    a trace; trace: "auto", "always" or "never" writes its timeline.json.gz now; salvage: a damaged
    .ncu-rep keeps its sound launches (the run's notes list the others) instead of being refused."""
    from .app.export import WindowOptions, export_report
    return export_report(path, logdir, run, overwrite=overwrite, step=step, trace=trace, salvage=salvage,
                         window=WindowOptions(time_range, nvtx_range, nvtx_instances))


__all__ = ["read", "analyse", "load_run", "load_analysis", "export", "__version__"]
