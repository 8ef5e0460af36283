"""Format detection by content (the extension is only a tie-breaker) and `read()`."""
from __future__ import annotations

from pathlib import Path

from .errors import InputError

SNIFF_BYTES = 64 << 10


def sniff(path: Path) -> str:
    """Name of the format of `path`: 'ncu-rep', 'ncu-csv', 'nsys-sqlite', or raise InputError."""
    if Path(path).is_dir():
        from .readers import rocprof_compute  # the one folder input: a rocprof-compute / Omniperf workload
        if rocprof_compute.is_workload(Path(path)):
            return "rocprof-compute"
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except FileNotFoundError:
        raise InputError(path, "no such file", "check the path") from None
    except IsADirectoryError:
        raise InputError(path, "is a folder, not a report file", "pass the report file itself") from None
    except OSError as e:
        raise InputError(path, f"cannot read ({e.strerror})", "check the file's permissions") from None
    if not head:
        raise InputError(path, "file is empty", "pass a report written by ncu")
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
    amd_intel = _sniff_rocprof_vtune(path, head)
    if amd_intel:
        return amd_intel
    raise InputError(path, "unrecognised report format",
                     "tb-hwprof reads Nsight Compute .ncu-rep files and `ncu --csv` output")


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
    """Read any supported report into a analysed `Profile` (format detected from the content)."""
    from .analysis import analyse

    path = Path(path)
    fmt = sniff(path)
    if fmt == "ncu-rep":
        from .readers.ncu_rep import read_ncu_rep
        profile = read_ncu_rep(path)
    elif fmt == "nsys-sqlite":
        from .readers.nsys_sqlite import read_nsys_sqlite
        profile = read_nsys_sqlite(path)
    elif fmt == "rocprof-compute":
        from .readers.rocprof_compute import read_workload
        profile = read_workload(path)
    elif fmt == "rocprof-db":
        from .readers.rocprof_db import read_rocprof_db
        profile = read_rocprof_db(path)
    elif fmt == "rocprof":
        from .readers.rocprof import read_rocprof
        profile = read_rocprof(path)
    elif fmt == "vtune-csv":
        from .readers.vtune import read_vtune
        profile = read_vtune(path)
    else:
        from .readers.ncu_csv import read_ncu_csv
        profile = read_ncu_csv(path)
    return analyse(profile)
