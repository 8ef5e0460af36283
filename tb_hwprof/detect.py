"""Format detection by content (the extension is only a tie-breaker) and `read()`."""
from __future__ import annotations

import importlib
from pathlib import Path

from .errors import InputError
from .readers.common import read_input_bytes

SNIFF_BYTES = 64 << 10
SUPPORTED = ("tb-hwprof reads Nsight Compute .ncu-rep and `ncu --csv` output, Nsight Systems SQLite exports "
             "(`nsys export --type sqlite`; .nsys-rep/.qdrep with nsys on PATH; `nsys stats --format csv`), "
             "rocprof v1/v2/v3 and rocprof-compute/Omniperf outputs, and VTune `-report ... -format csv` reports")
# format name -> (reader module, function): each reader is imported only when its format is met.
READERS = {
    "ncu-rep": ("tb_hwprof.readers.ncu_rep", "read_ncu_rep"),
    "ncu-csv": ("tb_hwprof.readers.ncu_csv", "read_ncu_csv"),
    "nsys-sqlite": ("tb_hwprof.readers.nsys_sqlite", "read_nsys_sqlite"),
    "rocprof-compute": ("tb_hwprof.readers.rocprof_compute", "read_workload"),
    "rocprof-db": ("tb_hwprof.readers.rocprof_db", "read_rocprof_db"),
    "rocprof": ("tb_hwprof.readers.rocprof", "read_rocprof"),
    "vtune-csv": ("tb_hwprof.readers.vtune", "read_vtune"),
    "nsys-rep": ("tb_hwprof.readers.nsys_rep", "read_nsys_rep"),
    "nsys-stats-csv": ("tb_hwprof.readers.nsys_stats", "read_nsys_stats"),
}
# Containers only their own tool can open: say which command turns them into what we read.
NSYS_REPORT_MAGIC = b"NVIDIA Tegra Profiler Report"  # .nsys-rep and .qdrep alike (2021.2-2026.1 seen)


def sniff(path: Path) -> str:
    """Name of the format of `path` (a key of READERS), or raise InputError saying what it is."""
    if Path(path).is_dir():
        from .readers import rocprof_compute  # the one folder input: a rocprof-compute / Omniperf workload
        if rocprof_compute.is_workload(Path(path)):
            return "rocprof-compute"
    head = read_input_bytes(path, SNIFF_BYTES)
    if not head:
        raise InputError(path, "file is empty", "pass a profiler report; " + SUPPORTED)
    if head.startswith(b"NVR\x00"):
        return "ncu-rep"
    from .readers import ncu_csv  # imported here: keeps `import tb_hwprof` light
    if ncu_csv.looks_like_ncu_csv(head):
        return "ncu-csv"
    if path.suffix == ".ncu-rep":
        raise InputError(path, "not an Nsight Compute report (no NVR header; looks like "
                         f"{'text' if _is_text(head) else 'random bytes'})",
                         "pass a file written by `ncu -o`, or its `ncu --csv` output")
    if head.startswith(b"SQLite format 3\x00"):
        from .readers import nsys_sqlite  # the tables say which tool wrote it, not the header
        if nsys_sqlite.looks_like_nsys(path):
            return "nsys-sqlite"
        from .readers import rocprof_db
        if rocprof_db.db_kind(path):
            return "rocprof-db"
        raise InputError(path, "SQLite database but not an Nsight Systems export (no StringIds with "
                         "CUPTI_ACTIVITY_KIND_* / TARGET_INFO_* tables)",
                         "pass an `nsys export --type sqlite` file, an Nsight Compute report or `ncu --csv` output")
    if head.startswith(NSYS_REPORT_MAGIC):
        return "nsys-rep"  # converted by nsys when it is on PATH, else a one-line error naming the command
    if path.suffix in (".nsys-rep", ".qdrep"):
        raise InputError(path, "not an Nsight Systems report (no report header)",
                         "pass the file `nsys profile` wrote, or its `nsys export --type sqlite` output")
    from .readers import nsys_stats
    if nsys_stats.looks_like_nsys_stats(head):
        return "nsys-stats-csv"
    amd_intel = _sniff_rocprof_vtune(path, head)
    if amd_intel:
        return amd_intel
    raise InputError(path, "unrecognised report format", SUPPORTED)


def _sniff_rocprof_vtune(path: Path, head: bytes):
    """'rocprof' (any rocprof v1/v2/v3 text variant), 'vtune-csv', or None; refuses look-alikes with a fix."""
    from .readers import rocprof, vtune
    rocprof.refuse_non_reports(path, head)  # Perfetto traces, rocminfo dumps, single files of a workload
    if rocprof.sniff_rocprof(path, head):
        return "rocprof"
    kind = vtune.sniff_vtune(head)
    if kind == "vtune-text":
        raise InputError(path, "VTune text report (space-aligned columns), not CSV", vtune.CSV_FIX)
    return kind


def _is_text(head: bytes) -> bool:
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return b"\x00" not in head


def read(path):
    """Read any supported report into an analysed `Profile` (format detected from the content)."""
    from .analysis import analyse

    path = Path(path)
    module, function = READERS[sniff(path)]
    return analyse(getattr(importlib.import_module(module), function)(path))
