"""tb-hwprof: GPU and CPU profiler results (Nsight Compute, ...) in TensorBoard.

    import tb_hwprof
    profile = tb_hwprof.read("report.ncu-rep")      # format detected from content
    profile.kernels                                   # pandas DataFrame, one row per launch
    tb_hwprof.export("report.ncu-rep", "runs", "baseline")
    tb_hwprof.load_run("runs/baseline")               # the same Profile, read back
"""
__version__ = "0.1.0"


def read(path):
    from .detect import read as _read
    return _read(path)


def load_run(run_dir, with_details: bool = True):
    from .logdir.reader import load_run as _load_run
    return _load_run(run_dir, with_details)


def export(path, logdir, run, overwrite: bool = False, step: int = 0):
    """Read `path` and write it as run `run` under `logdir`; returns the run folder."""
    from .logdir.writer import write_run
    return write_run(read(path), logdir, run, overwrite=overwrite, step=step)


__all__ = ["read", "load_run", "export", "__version__"]
