"""Intel VTune (and VTune Amplifier) CLI reports written with `vtune -report <type> -format csv`.

Handled: function / loop / source-line tables (hotspots, bottom-up, uarch-exploration with
top-down columns), GPU computing-task tables, and the summary report (a
"Hierarchy Level / Metric Name / Metric Value" list). Delimiters are sniffed (VTune's
default is a tab; `-csv-delimiter comma|semicolon` change it). Column names are
hierarchical ("CPU Time:Effective Time:Idle"), units ride on the name ("(%)") or on the
value ("0.170s" in text reports), and numbers may carry thousands separators.

VTune's results are CPU functions, not GPU kernels: the kernels table stays empty and the
rows go to profile.summaries["cpu_hotspots"] (or "gpu_computing_tasks" / "vtune_summary").
The default TEXT output (space-aligned columns under a dashed rule) is refused with a
one-line error saying how to export CSV.
"""
from __future__ import annotations

import csv
import math
import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pandas as pd

from ...core.errors import InputError
from ...core.model import Device, Profile, Provenance, normalise_kernels
from ..common import csvtext, read_input_bytes, sha256_of

DELIMITERS = (",", "\t", ";")
CSV_FIX = "re-export it with `vtune -report hotspots -r <result> -format csv -csv-delimiter comma -report-output out.csv`"
SUMMARY_HEADER = ["Hierarchy Level", "Metric Name", "Metric Value"]
GROUP_COLUMNS = ("Function", "Function Stack", "Source File", "Source Line", "Module", "Computing Task",
                 "Hierarchy Level", "Thread", "Process", "Call Stack", "Basic Block", "Loop", "Task Type",
                 "Frame Domain", "Core", "Package", "H/W Context", "Address")
METRIC_HINTS = ("CPU Time", "Clockticks", "Instructions Retired", "Metric Name", "Retiring", "GPU", "Total Time",
                "Elapsed Time", "Spin Time", "Wait Time", "Front-End Bound", "Back-End Bound")
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_NUMBER = re.compile(r"^\s*([-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:[eE][-+]?\d+)?|[-+]?\.\d+)\s*"
                     r"(%|s|ms|us|µs|ns|B|KB|MB|GB|GB/s|MB/s|GHz|MHz|Hz)?\s*(\(.*\))?\s*$")
_UNIT_IN_NAME = re.compile(r"\s*\(([^()]*)\)\s*$")


# ---------------------------------------------------------------- sniffing

def _first_lines(text: str, n: int = 3) -> List[str]:
    return [l for l in text.lstrip("\ufeff").splitlines()[:n]]


def sniff_delimiter(header: str) -> Optional[str]:
    """The delimiter that splits the header into the most fields (ties: tab, then comma)."""
    best, fields = None, 1
    for d in ("\t", ",", ";"):
        n = len(next(csv.reader([header], delimiter=d)))
        if n > fields:
            best, fields = d, n
    return best


def is_text_report(text: str) -> bool:
    """VTune's default text output: column titles, then a rule of dashes under each column."""
    lines = _first_lines(text, 2)
    return (len(lines) == 2 and re.fullmatch(r"-+(?:\s+-+)+\s*", lines[1] or "") is not None
            and any(h in lines[0] for h in GROUP_COLUMNS + METRIC_HINTS))


def sniff_vtune(head: bytes) -> Optional[str]:
    """'vtune-csv', 'vtune-text' or None."""
    text = head.decode("utf-8", errors="replace")
    if is_text_report(text):
        return "vtune-text"
    lines = _first_lines(text, 1)
    if not lines:
        return None
    delim = sniff_delimiter(lines[0])
    if not delim:
        return None
    cols = [c.strip() for c in next(csv.reader([lines[0]], delimiter=delim))]
    if cols and cols[0] in GROUP_COLUMNS and any(h in c for c in cols[1:] for h in METRIC_HINTS):
        return "vtune-csv"
    return None


# ---------------------------------------------------------------- values and columns

def parse_value(text) -> Tuple[float, str]:
    """(number, unit) of a VTune cell ("1,455" -> 1455, "0.170s" -> 0.17 s, "3.8% (0.759 out of 20)" -> 3.8 %)."""
    m = _NUMBER.match(str(text or ""))
    if not m:
        return math.nan, ""
    return float(m.group(1).replace(",", "")), m.group(2) or ""


def column_unit(name: str) -> Tuple[str, str]:
    """("CPU Time", "") or ("Retiring", "%") from "Retiring(%)"."""
    m = _UNIT_IN_NAME.search(name)
    if m and m.group(1) in ("%", "s", "ms", "us", "GB/sec", "GB/s", "MB/s", "GHz", "MHz", "bytes"):
        return name[:m.start()].strip(), m.group(1)
    return name.strip(), ""


def numeric_column(values: List[str]) -> Tuple[Optional[List[float]], str]:
    """Floats of a column where every non-empty cell is a number (seconds for time units), else None."""
    out, units = [], set()
    for v in values:
        if str(v).strip() == "":
            out.append(math.nan)
            continue
        x, unit = parse_value(v)
        if math.isnan(x):
            return None, ""
        if unit in TIME_UNITS:
            x, unit = x * TIME_UNITS[unit], "s"
        out.append(x)
        units.add(unit)
    return out, (units.pop() if len(units) == 1 else "")


def read_rows(path: Path, text: str) -> Tuple[List[str], List[Tuple[int, List[str]]], str]:
    """(header, [(line number, cells)] of the non-blank rows, delimiter); a header naming a column
    twice is refused (which of the two would the table show?)."""
    header_line = _first_lines(text, 1)[0] if text.strip() else ""
    delim = sniff_delimiter(header_line)
    if not delim:
        raise InputError(path, "no delimiter found in the header line", CSV_FIX)
    rows = [(line, r) for line, r in csvtext.records(path, csvtext.lines(text.lstrip("\ufeff")), CSV_FIX, delimiter=delim)
            if any(c.strip() for c in r)]
    header = [c.strip() for c in rows[0][1]]
    csvtext.require_unique(path, header, CSV_FIX, rows[0][0])
    return header, rows[1:], delim


def table_rows(path: Path, header: List[str], rows: List[Tuple[int, List[str]]]) -> List[List[str]]:
    """The cells of a function / task table, each row exactly as wide as the header (VTune writes
    every cell, empty ones too): a wider or narrower row is cut, merged or shifted."""
    for line, record in rows:
        csvtext.require_width(path, line, record, len(header), CSV_FIX)
    return [record for _, record in rows]


# ---------------------------------------------------------------- tables

def table_frame(header: List[str], rows: List[List[str]]) -> Tuple[pd.DataFrame, Dict[str, str]]:
    """All columns by their VTune names: numbers parsed where a column holds only numbers, else text."""
    data, units = {}, {}
    for i, name in enumerate(header):
        cells = [r[i] for r in rows]
        values, unit = numeric_column(cells)
        base, name_unit = column_unit(name)
        data[name] = values if values is not None and any(not math.isnan(v) for v in values) else cells
        if values is not None and (unit or name_unit):
            units[name] = unit or name_unit
    return pd.DataFrame(data, columns=header), units


def find_column(header: List[str], path: str, prefer_p_core: bool = True) -> Optional[str]:
    """The column whose hierarchical name (unit dropped) is `path` or ends with ':' + path."""
    hits = [h for h in header if column_unit(h)[0] == path or column_unit(h)[0].endswith(":" + path)]
    hits = [h for h in hits if "Efficient-core" not in h] or hits  # hybrid CPUs: the P-core figure
    return min(hits, key=len) if hits else None


# Top-down columns (% of pipeline slots) by VTune's column path; the analysis labels them (Intel TMA).
TOPDOWN_PATHS = {"retiring_pct": "Retiring", "front_end_bound_pct": "Front-End Bound",
                 "bad_speculation_pct": "Bad Speculation", "back_end_bound_pct": "Back-End Bound",
                 "memory_bound_pct": "Memory Bound", "core_bound_pct": "Core Bound"}


def _series(frame: pd.DataFrame, col: Optional[str]) -> pd.Series:
    if not col:
        return pd.Series(math.nan, index=frame.index, dtype="float64")
    return pd.to_numeric(frame[col], errors="coerce").astype("float64")


def hotspots(header: List[str], frame: pd.DataFrame, units: Dict[str, str]) -> Tuple[pd.DataFrame, List[str]]:
    """Normalised columns first (name, module, times in s, top-down %), then every VTune column as written."""
    notes = []
    group = header[0]
    name = frame[group].astype(str)
    out = pd.DataFrame({"name": name})
    for key, col in (("module", "Module"), ("function_full", "Function (Full)"), ("source_file", "Source File")):
        out[key] = frame[col].astype(str) if col in frame.columns and col != group else ""
    # Bottom-up / hotspots reports: "CPU Time" is the row's own (self) time; top-down tree reports
    # split it into "CPU Time:Self" and "CPU Time:Total" (callees included).
    self_col = next((c for c in ("CPU Time", "CPU Time:Self") if c in header), None)
    cpu = _series(frame, self_col)
    spin = _series(frame, next((c for c in ("CPU Time:Spin Time", "Spin Time") if c in header), None))
    over = _series(frame, next((c for c in ("CPU Time:Overhead Time", "Overhead Time") if c in header), None))
    eff_col = "CPU Time:Effective Time" if "CPU Time:Effective Time" in header else None
    out["cpu_time_s"], out["spin_time_s"], out["overhead_time_s"] = cpu, spin, over
    out["total_time_s"] = _series(frame, "CPU Time:Total" if "CPU Time:Total" in header else None)
    if eff_col:
        out["effective_time_s"] = _series(frame, eff_col)
    elif spin.notna().any() or over.notna().any():
        # VTune: CPU Time = Effective Time + Spin Time + Overhead Time (older reports omit the first).
        out["effective_time_s"] = cpu - spin.fillna(0) - over.fillna(0)
        notes.append("effective time derived as CPU Time - Spin Time - Overhead Time (this report has no "
                     "CPU Time:Effective Time column)")
    else:
        out["effective_time_s"] = math.nan
    # Per-row counters and where the code starts: CPI tells stalls from work, and the start address
    # tells apart rows of the same name (one "[Loop at line N in f]" per inlined copy).
    out["instructions_retired"] = _series(frame, "Instructions Retired" if "Instructions Retired" in header else None)
    out["cpi_rate"] = _series(frame, "CPI Rate" if "CPI Rate" in header else None)
    out["start_address"] = frame["Start Address"].astype(str) if "Start Address" in frame.columns else ""
    loops = name.str.match(r"^\[(Loop|Outside any loop)")
    out["is_loop"] = loops
    topdown = {key: find_column(header, path) for key, path in TOPDOWN_PATHS.items()}
    for key, col in topdown.items():
        values = _series(frame, col)
        if col and not column_unit(col)[1] and values.dropna().between(0, 1).all() and values.notna().any():
            values = values * 100  # older uarch reports give fractions of pipeline slots
        out[key] = values
    if any(topdown.values()):
        notes.append("top-down labels use Intel TMA thresholds (tb_hwprof/analysis/topdown.py)")
    for col in header:
        if col not in out.columns:
            out[col] = frame[col].values
    if loops.any():
        notes.append(f"{int(loops.sum())} rows are loops ('[Loop at line N in f]' / '[Outside any loop]'): "
                     "the report was grouped by loop")
    out.attrs["units"] = {"cpu_time_s": "s", "spin_time_s": "s", "overhead_time_s": "s", "effective_time_s": "s",
                          "total_time_s": "s",
                          **{k: "%" for k in TOPDOWN_PATHS}, **units}
    return out, notes


def summary_level(record: List[str]) -> int:
    """The hierarchy level opening every summary row (-1 when absent: the row is damaged, not skipped)."""
    try:
        return int(record[0]) if len(record) >= 2 else -1
    except ValueError:
        return -1


def summary_rows(path: Path, rows: List[Tuple[int, List[str]]], width: int = 3) -> Tuple[pd.DataFrame, List[str]]:
    """The summary report: (level, metric, value) rows; a row wider than the header (`width` cells) is a
    sub-table header, kept as text."""
    records, stack, ragged = [], [], 0
    for line, r in rows:
        level = summary_level(r)
        if level < 0:
            raise InputError(path, f"line {line}: a summary row without a hierarchy level and metric name "
                             f"({csvtext.shown(r[0] if r else '')} ...): the file is damaged", CSV_FIX)
        if level > len(stack):  # a tree listed depth first: a row is at most one level below the row above
            raise InputError(path, f"line {line}: hierarchy level {csvtext.shown(r[0])} under a row of level "
                             f"{len(stack) - 1} (a level was skipped): the file is damaged", CSV_FIX)
        metric = r[1].strip() if len(r) > 1 else ""
        rest = r[2:] if len(r) > width else r[2:3]
        ragged += len(rest) > 1
        text = " | ".join(c.strip() for c in rest) if len(rest) > 1 else (rest[0].strip() if rest else "")
        stack = stack[:level] + [metric]
        value, unit = parse_value(text) if len(rest) <= 1 else (math.nan, "")
        records.append({"level": level, "metric": metric, "path": ":".join(stack), "value_text": text,
                        "value": value, "unit": unit})
    frame = pd.DataFrame(records, columns=["level", "metric", "path", "value_text", "value", "unit"])
    frame.attrs["units"] = {}
    notes = [f"VTune summary report: {len(frame)} metrics"]
    if ragged:
        notes.append(f"{ragged} row(s) carry more than one value (a sub-table header such as 'Function, Module, "
                     "CPU Time'); kept as text joined with ' | '")
    return frame, notes


def cpu_device(path: Path, summary: pd.DataFrame) -> List[Device]:
    by_path = dict(zip(summary["path"], summary["value_text"]))
    name = next((v for p, v in by_path.items() if p.endswith("CPU:Name")), "")
    if not name:
        return []
    freq = cpu_fact(path, by_path, "CPU:Frequency")
    count = cpu_fact(path, by_path, "CPU:Logical CPU Count")
    return [Device(id=0, name=name, vendor="Intel", sm_count=None if math.isnan(count) else int(count),
                   clock_mhz=None if math.isnan(freq) else freq / 1e6)]


def cpu_fact(path: Path, by_path: Dict[str, str], key: str) -> float:
    """A CPU figure of the summary (NaN when absent); an infinite or negative one is a damaged value."""
    text = next((v for p, v in by_path.items() if p.endswith(key)), "")
    value, _ = parse_value(text)
    if math.isinf(value) or value < 0:
        raise InputError(path, f"the summary's {key} is {csvtext.shown(text)}: the file is damaged", CSV_FIX)
    return value


# ---------------------------------------------------------------- entry point

def header_era(header: List[str]) -> str:
    if "CPU Time:Effective Time" in header:
        return "VTune Amplifier 2016+ / VTune header (CPU Time:Effective/Spin/Overhead Time breakdown)"
    if "Spin Time" in header or "Overhead Time" in header:
        return "VTune Amplifier 2015-era header (Spin Time / Overhead Time as top-level columns)"
    return "VTune header"


def read_vtune(path) -> Profile:
    path = Path(path)
    data = read_input_bytes(path)
    text = csvtext.decode(path, data, CSV_FIX)
    if is_text_report(text):
        raise InputError(path, "VTune text report (space-aligned columns), not CSV", CSV_FIX)
    csvtext.check_characters(path, text, CSV_FIX)
    header, rows, delim = read_rows(path, text)
    delim_name = {",": "comma", "\t": "tab", ";": "semicolon"}[delim]
    devices: List[Device] = []
    if header[0] == SUMMARY_HEADER[0] and header[:3] != SUMMARY_HEADER:
        raise InputError(path, f"a summary report's header is {SUMMARY_HEADER}, this one {len(header)} cell(s) "
                         f"({', '.join(csvtext.shown(h, 20) for h in header[:4])}): the file is damaged", CSV_FIX)
    if header[:3] == SUMMARY_HEADER:  # columns after these three: a newer VTune's, left out (noted)
        table, notes = summary_rows(path, rows, width=len(header))
        if len(header) > 3:
            notes.append(f"columns after {', '.join(SUMMARY_HEADER)} left out: "
                         f"{', '.join(csvtext.shown(h, 30) for h in header[3:])}")
        summaries, devices = {"vtune_summary": table}, cpu_device(path, table)
    else:
        frame, units = table_frame(header, table_rows(path, header, rows))
        if header[0] == "Computing Task":
            frame.attrs["units"] = units
            summaries, notes = {"gpu_computing_tasks": frame}, [
                f"VTune GPU computing tasks: {len(frame)} tasks (per-task aggregates, not per-launch rows)"]
        else:
            table, notes = hotspots(header, frame, units)
            summaries = {"cpu_hotspots": table}
            notes = [f"VTune {header[0].lower()} table: {len(table)} rows; {header_era(header)}"] + notes
    notes = [f"{delim_name}-delimited CSV"] + notes + [
        "VTune results are CPU functions (or GPU computing-task aggregates), not per-launch GPU kernels: the "
        "kernels table is empty; see the CPU hotspots and Summaries views"]
    prov = Provenance(tool="vtune", tool_version="", source_path=str(path.resolve()),
                      source_sha256=sha256_of(data), source_format="vtune-csv")
    return Profile(prov, devices, normalise_kernels([]), notes=notes, summaries=summaries)


# ---------------------------------------------------------------- registry hooks (readers/__init__.py)
FORMATS = ("vtune-csv",)


def sniff(path: Path, head) -> Optional[str]:
    if head is None:
        return None
    kind = sniff_vtune(head)
    if kind == "vtune-text":
        raise InputError(path, "VTune text report (space-aligned columns), not CSV", CSV_FIX)
    return kind


def read(path, fmt: str = "vtune-csv") -> Profile:
    return read_vtune(path)
