"""`nsys stats --format csv` output (a secondary Nsight Systems input): summary tables only.

What `nsys stats` prints to stdout mixes, per report script, a "Processing [db] with [.../NAME.py]..."
line with either a CSV block (header + rows, ended by a blank line) or a "SKIPPED: ..." line; a
"Generating SQLite file ..." line may come first.  `nsys stats -o PREFIX` writes one bare CSV
block per file (PREFIX_NAME.csv).  Each block becomes Profile.summaries[NAME] with the column
names the SQLite reader uses (total_ns, avg_ns, ..., sizes in bytes); skipped reports become notes.
There are no per-launch rows in this output, so the kernels table is empty.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

from ...core.errors import InputError
from ...core.model import Profile, Provenance, normalise_kernels
from ..common import csvtext, read_input_bytes
from ..common import sha256_file
from .nsys_summaries import units_of

_PROCESSING = re.compile(r"^Processing \[(?P<db>.*)\] with \[(?P<script>.*?)\]\.\.\.\s*$")
STATS_FIX = "run `nsys stats --format csv REPORT` again and pass what it prints"
_SKIPPED = re.compile(r"^SKIPPED: (?P<why>.*)$")
_VERSION_IN_PATH = re.compile(r"[/\\](\d{4}\.\d+\.\d+)[/\\]")
# Header cells nsys stats prints -> the SQLite reader's column names (units in the suffix).
COLUMNS = {"Time (%)": "time_pct", "Total Time (ns)": "total_ns", "Num Calls": "num_calls",
           "Instances": "instances", "Count": "count", "Avg (ns)": "avg_ns", "Med (ns)": "med_ns",
           "Min (ns)": "min_ns", "Max (ns)": "max_ns", "StdDev (ns)": "stddev_ns", "Name": "name",
           "Operation": "operation", "Range": "name", "Style": "style", "Total (MB)": "total_bytes",
           "Avg (MB)": "avg_bytes", "Med (MB)": "med_bytes", "Min (MB)": "min_bytes", "Max (MB)": "max_bytes",
           "StdDev (MB)": "stddev_bytes"}
# `nsys stats -o PREFIX` names each file PREFIX_<report>.csv: the report is the longest of these it ends with.
KNOWN_REPORTS = ("cuda_api_sum", "cuda_api_gpu_sum", "cuda_gpu_kern_sum", "cuda_gpu_kern_gb_sum", "cuda_gpu_sum",
                 "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum", "cuda_kern_exec_sum", "nvtx_sum",
                 "nvtx_gpu_proj_sum", "nvtx_kern_sum", "nvtx_pushpop_sum", "nvtx_startend_sum", "osrt_sum",
                 "openmp_sum", "openacc_sum", "syscall_sum", "um_sum", "um_total_sum", "um_cpu_page_faults_sum",
                 "mpi_event_sum", "vulkan_marker_sum", "vulkan_gpu_marker_sum", "opengl_khr_range_sum",
                 "opengl_khr_gpu_range_sum", "dx11_pix_sum", "dx12_gpu_marker_sum", "dx12_pix_sum", "wddm_queue_sum")
MB = 1e6  # nsys stats prints memory sizes in MB of 10^6 bytes
_UNIT_SUFFIX = {"%": "pct", "ns": "ns", "us": "us", "ms": "ms", "s": "s", "mb": "bytes", "b": "bytes"}
# A header nsys stats writes for its *_sum reports: the time share first, then the total.
_HEADER = re.compile(r"^(?:\"?Time \(%\)\"?|\"?Time\(%\)\"?),")


def looks_like_nsys_stats(head: bytes) -> bool:
    """Detection by content: nsys stats' progress lines, or a bare *_sum CSV header."""
    text = head.decode("utf-8", "replace")
    lines = text.splitlines()
    if any(_PROCESSING.match(line) for line in lines[:50]):
        return True
    return bool(lines) and bool(_HEADER.match(lines[0])) and ("Total Time (ns)" in lines[0])


def column_name(label: str) -> Tuple[str, float]:
    """(our column name, factor to our unit) of one header cell."""
    label = label.strip()
    if label in COLUMNS:
        return COLUMNS[label], MB if label.endswith("(MB)") else 1.0
    m = re.match(r"^(.*?)\s*\(([^)]*)\)$", label)
    base, unit = (m.group(1), m.group(2).lower()) if m else (label, "")
    name = re.sub(r"[^a-z0-9]+", "_", base.lower()).strip("_") or "column"
    suffix = _UNIT_SUFFIX.get(unit, re.sub(r"[^a-z0-9]+", "_", unit).strip("_"))
    return (f"{name}_{suffix}" if suffix else name), (MB if unit == "mb" else 1.0)


_INTEGER = re.compile(r"-?\d+")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf(?:inity)?", re.I)
INT64_MAX = 2 ** 63 - 1


def column_values(cells: List[str], factor: float):
    """One column: int64 where every cell is an integer nsys printed so (counts, totals in ns), float64
    where every cell is a number (MB scaled to bytes), else the text.  Plain Python per cell: a table of
    thousands of columns must not cost a pandas call per column."""
    if cells and factor == 1.0 and all(_INTEGER.fullmatch(c) for c in cells):
        numbers = [int(c) for c in cells]
        if all(abs(n) <= INT64_MAX for n in numbers):
            return np.array(numbers, dtype="int64")
    if cells and all(_NUMBER.fullmatch(c) for c in cells):
        return np.array([float(c) for c in cells], dtype="float64") * factor
    return cells


def _table(path: Path, first_line: int, rows: List[List[str]]) -> pd.DataFrame:
    """One block: a header, then rows exactly as wide (nsys prints every cell)."""
    header, body = rows[0], rows[1:]
    csvtext.require_unique(path, header, STATS_FIX, first_line)
    for offset, record in enumerate(body, start=1):
        csvtext.require_width(path, first_line + offset, record, len(header), STATS_FIX)
    columns = list(zip(*body)) if body else [()] * len(header)
    out = {}
    for label, cells in zip(header, columns):
        name, factor = column_name(label)
        while name in out:  # two labels mapping to one name ("Name" and "Range"): keep both
            name += "_2"
        out[name] = column_values([c.strip() for c in cells], factor)
    table = pd.DataFrame(out)
    check_times(path, first_line, table)
    table.attrs["units"] = units_of(table)
    return table


def check_times(path: Path, first_line: int, table: pd.DataFrame) -> None:
    """Times (the "(ns)" columns: totals, averages, minima, starts) and shares are never negative,
    and a minimum never exceeds its maximum: a cell that says otherwise is damage, not a figure."""
    for column in table.columns:
        values = table[column]
        if (column.endswith("_ns") or column.endswith("_pct")) and values.dtype.kind in "if" and (values < 0).any():
            row = int(np.flatnonzero(values.to_numpy() < 0)[0])
            raise InputError(path, f"line {first_line + 1 + row}: {column} is negative ({values.iloc[row]})", STATS_FIX)
    if {"min_ns", "max_ns"} <= set(table.columns) and table["min_ns"].dtype.kind in "if" \
            and table["max_ns"].dtype.kind in "if" and (table["min_ns"] > table["max_ns"]).any():
        row = int(np.flatnonzero((table["min_ns"] > table["max_ns"]).to_numpy())[0])
        raise InputError(path, f"line {first_line + 1 + row}: min_ns {table['min_ns'].iloc[row]} exceeds max_ns "
                               f"{table['max_ns'].iloc[row]}", STATS_FIX)


def _report_name(script: str) -> str:
    stem = Path(script.replace("\\", "/")).stem
    return re.sub(r"[^a-z0-9_]+", "_", stem.lower()).strip("_") or "nsys_stats"


Block = Tuple[str, int, List[str]]  # (report name, line number of its header, its lines)


def _progress_line(path: Path, number: int, line: str) -> Optional[re.Match]:
    """A "Processing [db] with [script]..." line; one with anything after the dots is damaged (it
    would otherwise be read as a row of the table before it)."""
    m = _PROCESSING.match(line)
    if m is None and line.startswith("Processing ["):
        raise InputError(path, f"line {number}: a damaged 'Processing [...] with [...]...' line "
                         f"({csvtext.shown(line.rstrip()[-40:])} at its end)", STATS_FIX)
    return m


def split_blocks(path: Path, text: str, fallback_name: str) -> Tuple[List[Block], List[Tuple[str, str]], str]:
    """The CSV blocks of stats output (not parsed yet: damage anywhere is refused before any table is
    built), skipped [(name, why)], and the nsys version or "".  In stdout output a block is the one
    right after a "Processing" line: a notice holding a comma elsewhere (a path with one in
    "Generating SQLite file ...") is no table.  A bare `nsys stats -o` file is all table."""
    blocks: List[Block] = []
    skipped: List[Tuple[str, str]] = []
    version, name, block, start = "", fallback_name, [], 0
    bare = re.search(r"^Processing \[", text, re.M) is None
    expecting = bare  # whether a table may start here

    def flush():
        if block:
            blocks.append((name, start, list(block)))
        block.clear()

    for number, line in enumerate(csvtext.lines(text), start=1):
        m = _progress_line(path, number, line)
        if m:
            flush()
            name, expecting = _report_name(m.group("script")), True
            v = _VERSION_IN_PATH.search(m.group("script"))
            version = version or (v.group(1) if v else "")
            continue
        s = _SKIPPED.match(line)
        if s:
            flush()
            expecting = bare
            skipped.append((name, s.group("why").strip()))
            continue
        if not line.strip():
            expecting = expecting and (bare or not block)  # one table per report
            flush()
            continue
        if block or (expecting and "," in line):
            start = start if block else number
            block.append(line)
        # other lines ("Generating SQLite file ...", notices) carry no table
    flush()
    return blocks, skipped, version


def parse_blocks(path: Path, text: str, fallback_name: str):
    """(tables {name: frame}, skipped [(name, why)], nsys version or "") of stats output."""
    blocks, skipped, version = split_blocks(path, text, fallback_name)
    parsed = [(name, start, [r for _, r in csvtext.records(path, lines, STATS_FIX, first_line=start)])
              for name, start, lines in blocks]
    tables: Dict[str, pd.DataFrame] = {}
    for name, start, rows in parsed:
        if rows and rows[0]:
            key, n = name, 2
            while key in tables:
                key, n = f"{name}_{n}", n + 1
            tables[key] = _table(path, start, rows)
    return tables, skipped, version


def read_nsys_stats(path) -> Profile:
    path = Path(path)
    text = csvtext.decode(path, read_input_bytes(path), STATS_FIX)
    csvtext.check_characters(path, text, STATS_FIX)
    stem = path.stem.lower()
    fallback = max((r for r in KNOWN_REPORTS if stem.endswith(r)), key=len, default="nsys_stats")
    tables, skipped, version = parse_blocks(path, text, fallback)
    if not tables and not skipped:
        raise InputError(path, "nsys stats output without any report block",
                         "run `nsys stats --format csv REPORT` and pass what it prints")
    notes = [f"`nsys stats --format csv` output: summary tables only ({', '.join(tables) or 'none'}); "
             "no per-launch rows and no timeline (export the report with `nsys export --type sqlite` for those)"]
    notes += [f"nsys stats skipped {name}: {why}" for name, why in skipped]
    if "cuda_gpu_kern_sum" in tables:
        notes.append("per-kernel totals are in the cuda_gpu_kern_sum summary; the kernels table is empty")
    provenance = Provenance(tool="nsys", tool_version=version, source_path=str(path.resolve()),
                            source_sha256=sha256_file(path), source_format="nsys-stats-csv")
    return Profile(provenance, [], normalise_kernels([]), notes=notes, summaries=tables)


# ---------------------------------------------------------------- registry hooks (readers/__init__.py)
FORMATS = ("nsys-stats-csv",)


def sniff(path: Path, head) -> Optional[str]:
    return "nsys-stats-csv" if head is not None and looks_like_nsys_stats(head) else None


def read(path, fmt: str = "nsys-stats-csv") -> Profile:
    return read_nsys_stats(path)
