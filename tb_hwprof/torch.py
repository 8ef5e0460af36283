"""tb_hwprof.torch (its public path; the code is app/torch_runs.py) -- PyTorch run folders: export the traces torch.profiler writes where TensorBoard reads them.

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
from .app.torch_runs import (TRACE_NAME, export_folder, folder_exports, is_torch_run_folder,  # noqa: F401
                             trace_files, trace_handler)

__all__ = ["trace_handler", "export_folder", "folder_exports", "is_torch_run_folder", "trace_files", "TRACE_NAME"]
