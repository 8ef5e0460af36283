"""The reader registry: one module per source format, asked in order.

Each reader module (readers/nvidia/, readers/amd/, readers/intel/, readers/torch/) declares
  FORMATS                 the format names it reads
  sniff(path, head)       the format name when the input is its own, else None; `head` is the file's
                          first bytes (None for a folder).  It may raise InputError for an input it
                          recognises but cannot read (a VTune text report, a Perfetto trace), with the fix
  read(path, fmt)         the Profile (format-specific options have defaults)
  refuse(path, head)      optional: asked only when no module claimed the file, to say what it is
                          (e.g. a file named .ncu-rep without the report header)
Adding a format is one module plus its line in READER_MODULES.  Modules are imported when a file is
detected, never by `import tb_hwprof`.
"""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import Dict, List

# Asked in this order: binary headers first (they are certain), then text layouts, most specific first
# (ncu's CSV before the generic rocprof / VTune ones, a rocprof-compute workload before its files).
READER_MODULES = (
    "nvidia.ncu_rep",          # NVR header
    "nvidia.ncu_csv",          # `ncu --csv` text
    "nvidia.nsys_sqlite",      # SQLite with nsys' tables
    "amd.rocprof_db",          # SQLite with rocpd / rocprof v1 tables
    "nvidia.nsys_rep",         # .nsys-rep / .qdrep container (converted by nsys when on PATH)
    "torch.kineto",            # PyTorch profiler (Kineto) Chrome-trace JSON, plain or gzipped
    "nvidia.nsys_stats",       # `nsys stats --format csv` output
    "amd.rocprof_compute",     # rocprof-compute / Omniperf workload folder (or its pmc_perf.csv)
    "amd.rocprof",             # rocprof v1 / v2 / v3 text files
    "intel.vtune",             # VTune -report ... -format csv
)


def reader_modules() -> List[ModuleType]:
    return [importlib.import_module(f"{__name__}.{name}") for name in READER_MODULES]


def formats() -> Dict[str, ModuleType]:
    """format name -> the module that reads it."""
    return {fmt: module for module in reader_modules() for fmt in module.FORMATS}
