"""`tb_hwprof.torch.trace_handler(logdir)`: a drop-in for torch.profiler.tensorboard_trace_handler
that also exports each trace as a tb-hwprof run (the public path; the code is app/torch_runs.py)."""
from .app.torch_runs import (TRACE_NAME, export_folder, folder_exports, is_torch_run_folder,  # noqa: F401
                             trace_files, trace_handler)

__all__ = ["trace_handler", "export_folder", "folder_exports", "is_torch_run_folder", "trace_files", "TRACE_NAME"]
