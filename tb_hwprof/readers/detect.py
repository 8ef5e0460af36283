"""Format detection by content, through the reader registry (tb_hwprof/readers/__init__.py), and `read()`."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Tuple

from ..core.errors import InputError
from .common import describe_bytes, read_input_bytes

SNIFF_BYTES = 64 << 10
SUPPORTED = ("tb-hwprof reads Nsight Compute .ncu-rep and `ncu --csv` output, Nsight Systems SQLite exports "
             "(`nsys export --type sqlite`; .nsys-rep/.qdrep with nsys on PATH; `nsys stats --format csv`), "
             "rocprof v1/v2/v3 and rocprof-compute/Omniperf outputs, and VTune `-report ... -format csv` reports")
# What a sniffer may raise on bytes that are not its format at all (a bare '\r', binary noise, a
# gzip): "not mine", never the error the user sees.
NOT_MINE = (csv.Error, UnicodeDecodeError, ValueError)


def detect(path: Path) -> Tuple[str, object]:
    """(format name, reader module) of `path`, or InputError saying what it is and what to pass."""
    from . import reader_modules

    path = Path(path)
    refuse_streams(path)
    head = None if path.is_dir() else read_input_bytes(path, SNIFF_BYTES)
    if head is not None and not head:
        raise InputError(path, "file is empty", "pass a profiler report; " + SUPPORTED)
    modules = reader_modules()
    for module in modules:
        try:
            fmt = module.sniff(path, head)
        except NOT_MINE:
            fmt = None
        if fmt:
            return fmt, module
    if head is None:
        raise InputError(path, "is a folder, not a report file nor a rocprof-compute / Omniperf workload "
                         "(no pmc_perf.csv and sysinfo.csv)", "pass the report file itself, or a workload folder")
    for module in modules:
        if hasattr(module, "refuse"):
            module.refuse(path, head)
    raise InputError(path, f"unrecognised report format (looks like {describe_bytes(head)})", SUPPORTED)


def refuse_streams(path: Path) -> None:
    """A pipe (`<(cat trace.json)`, a FIFO) or a device cannot be read twice (detection, then the
    reader) and a FIFO without a writer would block the open forever: refused at once, before any
    open, with how to pass it."""
    import stat
    try:
        mode = path.stat().st_mode
    except OSError:
        return  # a missing file: the reader's open says so
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
        kind = "a pipe" if stat.S_ISFIFO(mode) else "a device or socket"
        raise InputError(path, f"is {kind}, not a file: its bytes can be read only once",
                         "write it to a file first (e.g. cat ... > trace.json) and pass that file")


def sniff(path: Path) -> str:
    """Name of the format of `path`, or raise InputError saying what it is."""
    return detect(path)[0]


def read(path, **options):
    """Read any supported report into a `Profile` (format detected from the content); the analysis
    (tb_hwprof.analysis.analyse) is the pipeline's next step, not the reader's.  options: read
    options (salvage=True: keep a damaged report's sound launches), each passed only to the readers
    that list it in their READ_OPTIONS; the others ignore it."""
    fmt, module = detect(Path(path))
    taken = {k: v for k, v in options.items() if k in getattr(module, "READ_OPTIONS", ())}
    return module.read(Path(path), fmt, **taken)
