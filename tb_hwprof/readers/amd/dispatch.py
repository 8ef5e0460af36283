"""The per-dispatch table toolkit every AMD reader shares (rocprof v1/v2/v3 text files, rocpd and
results.db, rocprof-compute workloads): the column aliases of the three rocprof generations, CSV
reading, dispatch rows -> kernels table, raw rows, duration statistics, provenance and devices."""
from __future__ import annotations

import csv
import re
import io
import math
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

from ...core.errors import InputError
from ...core.model import Device, Provenance, normalise_kernels
from . import devices as amd_devices
from ..common import sha256_of

CSV_FIX = "export with rocprof (results.csv), rocprofv3 --kernel-trace --output-format csv, or pass a rocprof-compute workload folder"
DAMAGED_FIX = "the file is damaged: export it again from the profiler (or restore the original)"
# Timestamps, ids and sizes end up as int64 (model, timeline): a larger number is no profiler's output.
INT64_LIMIT = float(2 ** 63)

# model field -> the column names rocprof v1 / v2 / v3 / rocprof-compute use for it (first present wins).
ALIASES: Dict[str, Tuple[str, ...]] = {
    "kernel": ("KernelName", "Kernel_Name", "Kernel-Name"),
    "dispatch": ("Index", "Dispatch_ID", "Dispatch_Id"),
    "device": ("gpu-id", "GPU_ID", "Agent_Id", "dev-id"),
    "queue": ("queue-id", "Queue_ID", "Queue_Id"),
    "start": ("BeginNs", "Start_Timestamp", "Begin_Timestamp"),
    "end": ("EndNs", "End_Timestamp"),
    "dispatched": ("DispatchNs",),
    "completed": ("CompleteNs",),
    "grid": ("grd", "Grid_Size"),
    "workgroup": ("wgr", "Workgroup_Size"),
    "lds": ("lds", "LDS_Per_Workgroup", "Group_Segment_Size", "LDS_Block_Size", "LDS"),
    "arch_vgpr": ("arch_vgpr", "Arch_VGPR", "vgpr", "VGPR_Count", "Arch_VGPR_Count"),
    "accum_vgpr": ("accum_vgpr", "Accum_VGPR", "Accumulative_VGPR", "Accum_VGPR_Count"),
    "correlation": ("Correlation_Id", "Correlation_ID"),
}
TIME_COLUMNS = {"DispatchNs", "BeginNs", "EndNs", "CompleteNs", "DurationNs", "Start_Timestamp",
                "End_Timestamp", "Begin_Timestamp", "TotalDurationNs", "AverageNs", "MinNs", "MaxNs", "StdDev"}


# ---------------------------------------------------------------- reading text tables

def read_text(path: Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise InputError(path, f"cannot read ({e.strerror})", "check the file's permissions") from None


def read_csv_text(path: Path) -> str:
    """A profiler's CSV as text: UTF-8, no NUL bytes, and not cut short mid-row."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise InputError(path, f"cannot read ({e.strerror})", "check the file's permissions") from None
    if b"\0" in data:
        raise InputError(path, f"NUL byte at offset {data.index(0)}: not a CSV text file", DAMAGED_FIX)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(path, f"bytes that are not UTF-8 at offset {e.start}", DAMAGED_FIX) from None
    refuse_cut_last_row(path, text)
    return text


def refuse_cut_last_row(path: Path, text: str) -> None:
    """rocprof ends its rows with a line end, though some files (docs samples) lack the last one: a last
    line without one and with fewer cells than the header was cut short (its last cell is a fragment)."""
    if text.endswith(("\n", "\r")) or not text.strip():
        return
    lines = text.lstrip("\ufeff").splitlines()
    header = next((line for line in lines if line.strip()), "")
    if len(lines) > 1 and _cells(lines[-1]) < _cells(header):
        raise InputError(path, f"the last row has {_cells(lines[-1])} of the header's {_cells(header)} cells and no "
                         "line end: the file looks cut short", DAMAGED_FIX)


def _cells(line: str) -> int:
    return len(next(csv.reader([line]), []))


def read_table(path: Path, text: Optional[str] = None) -> pd.DataFrame:
    """A CSV as text columns (numbers converted by `numeric`): blank lines skipped, nothing guessed as NaN.
    The table remembers its file (attrs["source"]) so later checks can name it."""
    text = read_csv_text(path) if text is None else text
    refuse_repeated_header_cells(path, text)
    try:
        table = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, skip_blank_lines=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise InputError(path, f"unreadable CSV ({one_line(e)})", CSV_FIX) from None
    if not isinstance(table.index, pd.RangeIndex):  # pandas made the surplus first cells an index
        raise InputError(path, f"data row 1 has {table.index.nlevels} more cell(s) than the header", DAMAGED_FIX)
    table.attrs["source"] = str(path)
    return table


def one_line(error: Exception) -> str:
    """An exception's message on one line (pandas' tokenizer errors end in a newline)."""
    return " ".join(str(error).split())


def refuse_repeated_header_cells(path: Path, text: str) -> None:
    """pandas would rename a second 'Agent_Id' to 'Agent_Id.1': a header naming a column twice is damaged."""
    first = next((line for line in text.lstrip("\ufeff").splitlines() if line.strip()), "")
    cells = [c.strip() for c in next(csv.reader([first]), [])]
    seen: Dict[str, int] = {}
    for i, cell in enumerate(cells, 1):
        if cell and cell in seen:
            raise InputError(path, f"the header names column {cell!r} twice (columns {seen[cell]} and {i})",
                             DAMAGED_FIX)
        seen.setdefault(cell, i)


def source_of(table: pd.DataFrame) -> str:
    return table.attrs.get("source", "the dispatch table")


def shown(cell: str, limit: int = 40) -> str:
    """A cell quoted for an error message, cut short (damage can be megabytes)."""
    return repr(cell if len(cell) <= limit else cell[:limit] + "...")


def numeric(series: pd.Series) -> pd.Series:
    """Numbers of a text column (int64 where every value is an integer), NaN where not a number."""
    return pd.to_numeric(series.str.strip() if series.dtype == object else series, errors="coerce")


def column(table: pd.DataFrame, field: str) -> Optional[str]:
    return next((c for c in ALIASES[field] if c in table.columns), None)


def numeric_column(table: pd.DataFrame, field: str) -> pd.Series:
    name = column(table, field)
    return checked_numbers(table, name) if name else pd.Series(np.nan, index=table.index, dtype="float64")


# rocprofv3 (rocprofiler-sdk) writes an agent as its index's kind and number ("Agent 1", "GPU 0" with
# --agent-index type-relative), rocpd convert likewise; older versions wrote the bare number.
AGENT_LABEL = re.compile(r"^\s*(?:Agent|GPU|CPU)[ -]?(\d+)\s*$")


def device_column(table: pd.DataFrame) -> pd.Series:
    """The device number of each dispatch: a number, or an agent label ("Agent 1", "GPU 0") read as its
    number; anything else in the column, a negative number included (agents and GPUs count from 0),
    is damage (checked_numbers)."""
    name = column(table, "device")
    if name is None:
        return pd.Series(np.nan, index=table.index, dtype="float64")
    cells = table[name]
    if not pd.api.types.is_numeric_dtype(cells):
        labels = cells.astype(str).str.extract(AGENT_LABEL, expand=False)
        if labels.notna().any():
            table = table.assign(**{name: labels.where(labels.notna(), cells)})
    return checked_numbers(table, name, at_least=0)


def checked_numbers(table: pd.DataFrame, name: str, at_least: float = -INT64_LIMIT) -> pd.Series:
    """`numeric` of a column the model relies on, refusing cells that are text but not a number, or a
    number outside int64 (or below `at_least`): blank cells stay NaN (a field the row lacks)."""
    cells = table[name]
    values = numeric(cells)
    return fitting_numbers(source_of(table), name, cells, values, _filled_where_nan(cells, values), at_least)


def _filled_where_nan(cells: pd.Series, values: pd.Series) -> pd.Series:
    """Cells that hold text where `values` found no number (only those need a look: fast on clean files)."""
    filled = pd.Series(False, index=cells.index)
    nan = values.isna()
    if nan.any():
        filled[nan] = _filled(cells[nan])
    return filled


def measured_values(table: pd.DataFrame, name: str) -> pd.Series:
    """Numbers of a counter or statistic column: any float (inf and nan included: still readings), but a
    cell that is text and not a number is damage."""
    cells = table[name]
    values = numeric(cells)
    text = _filled_where_nan(cells, values)
    if text.any():  # 'nan' written as text is a reading too
        text[text] = cells[text].astype(str).str.strip().str.lower().str.lstrip("+-") != "nan"
    if text.any():
        row = int(np.flatnonzero(text.to_numpy())[0])
        raise InputError(source_of(table), f"column {name!r}, data row {row + 1}: {shown(str(cells.iloc[row]))} "
                         "is not a number", DAMAGED_FIX)
    return values


def fitting_numbers(source: str, name: str, cells: pd.Series, values: pd.Series, filled: pd.Series,
                    at_least: float = -INT64_LIMIT, table: str = "") -> pd.Series:
    """`values` (the numbers of `cells`), once every `filled` cell is a number from at_least to 2^63."""
    bad = ~((values >= at_least) & (values.abs() < INT64_LIMIT)) & (values.notna() | filled)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        bounds = f"{at_least:.0f} to 2^63" if at_least > -INT64_LIMIT else "beyond +-2^63"
        what = "not a number" if pd.isna(values.iloc[row]) else f"out of range ({bounds})"
        raise InputError(source, f"{table + ' ' if table else ''}column {name!r}, data row {row + 1}: "
                         f"{shown(str(cells.iloc[row]))} is {what}", DAMAGED_FIX)
    return values


# A file merging several processes (rocpd convert of several databases: a leading Guid column; counter
# collection: Process_Id) numbers dispatches per process: a dispatch is (process, dispatch id).
PROCESS_COLUMNS = ("Guid", "Process_Id")


def dispatch_keys(table: pd.DataFrame, name: str) -> pd.Series:
    """Each row's dispatch as text: its id, with its process where the file names one."""
    ids = table[name].astype(str).str.strip()
    process = next((c for c in PROCESS_COLUMNS if c in table.columns), None)
    return ids if process is None else table[process].astype(str).str.strip() + "/" + ids


def refuse_repeated_dispatches(table: pd.DataFrame) -> None:
    """A trace lists each dispatch once: a dispatch id on several rows is a duplicated (damaged) row;
    without ids (rocprofv3's older columns), a row repeated whole, timestamps included.
    (Counter collection repeats it per counter, rocpd merges processes: those do not call this.)"""
    if table.empty:
        return
    name = column(table, "dispatch")
    if name is None:
        whole = table.duplicated()
        if whole.any():
            raise InputError(source_of(table), f"data row {int(np.flatnonzero(whole.to_numpy())[0]) + 1} repeats an "
                             "earlier row cell for cell: a trace lists each dispatch once", DAMAGED_FIX)
        return
    ids = dispatch_keys(table, name)
    repeated = ids.duplicated(keep=False) & (table[name].astype(str).str.strip() != "")
    if repeated.any():
        rows = np.flatnonzero(repeated.to_numpy())
        first = ids.iloc[rows[0]]
        same = rows[(ids.iloc[rows] == first).to_numpy()]
        listed = ", ".join(str(r + 1) for r in same[:3]) + (f" and {same.size - 3} more" if same.size > 3 else "")
        raise InputError(source_of(table), f"dispatch id {shown(first)} ({name}) is on {same.size} rows "
                         f"(data rows {listed}): a trace lists each dispatch once", DAMAGED_FIX)


def require_columns(table: pd.DataFrame, names, what: str) -> None:
    missing = [c for c in names if c not in table.columns]
    if missing:
        raise InputError(source_of(table), f"no column {', '.join(map(repr, missing))} ({what} has "
                         f"{', '.join(names)})", DAMAGED_FIX)


def refuse_blank_cells(table: pd.DataFrame, names) -> None:
    """Columns a tool fills on every row: a blank cell there is a row cut short or wiped."""
    for name in names:
        blank = ~_filled(table[name])
        if blank.any():
            row = int(np.flatnonzero(blank.to_numpy())[0])
            raise InputError(source_of(table), f"column {name!r}, data row {row + 1} is blank (the profiler fills it "
                             "on every row)", DAMAGED_FIX)


def _filled(text: pd.Series) -> pd.Series:
    """Cells that are not blank (empty or whitespace); comparisons, not a strip per cell (2x faster)."""
    if not (text.dtype == object or pd.api.types.is_string_dtype(text)):
        return pd.Series(False, index=text.index)
    text = text.astype(str)
    return ~((text == "") | text.str.isspace().fillna(False).astype(bool))


# ---------------------------------------------------------------- dispatch rows -> kernels table

PER_DIMENSION = tuple(f"{what}_Size_{d}" for what in ("Grid", "Workgroup") for d in "XYZ")


def refuse_partial_launch_shape(table: pd.DataFrame) -> None:
    """rocprofv3 writes a grid and a workgroup size per dimension: all six columns or none."""
    present = [c for c in PER_DIMENSION if c in table.columns]
    if present and len(present) < len(PER_DIMENSION):
        missing = [c for c in PER_DIMENSION if c not in table.columns]
        raise InputError(source_of(table), f"no column {', '.join(map(repr, missing))} beside "
                         f"{', '.join(map(repr, present))} (a rocprofv3 launch shape has all six)", DAMAGED_FIX)


def _launch_shape(table: pd.DataFrame) -> Dict[str, object]:
    """Grid and workgroup from per-dimension columns (v3) or totals (v1/v2: the HSA grid in work-items)."""
    refuse_partial_launch_shape(table)
    if "Grid_Size_X" in table.columns:
        g = [checked_numbers(table, f"Grid_Size_{d}", at_least=0) for d in "XYZ"]
        w = [checked_numbers(table, f"Workgroup_Size_{d}", at_least=1) for d in "XYZ"]
        blocks = [np.ceil(gi / wi) for gi, wi in zip(g, w)]
        grid = [f"({int(a)}, {int(b)}, {int(c)})" if not np.isnan([a, b, c]).any() else ""
                for a, b, c in zip(*blocks)]
        block = [f"({int(a)}, {int(b)}, {int(c)})" if not np.isnan([a, b, c]).any() else "" for a, b, c in zip(*w)]
        return {"grid": grid, "block": block, "grid_size": blocks[0] * blocks[1] * blocks[2],
                "block_size": w[0] * w[1] * w[2]}
    items, wg = sizes(table, "grid", at_least=0), sizes(table, "workgroup", at_least=1)
    # rocprof's grid size counts work-items (threads); the model's counts workgroups (blocks).
    return {"grid_size": np.ceil(items / wg), "block_size": wg}


def sizes(table: pd.DataFrame, field: str, at_least: float) -> pd.Series:
    name = column(table, field)
    return checked_numbers(table, name, at_least) if name else pd.Series(np.nan, index=table.index, dtype="float64")


def _registers(table: pd.DataFrame) -> pd.Series:
    # Registers per thread = per-lane vector registers: arch VGPRs + accumulation VGPRs (AGPRs share the
    # unified VGPR file on CDNA2/3). SGPRs are per wavefront, not per thread, so they are left out.
    arch, accum = numeric_column(table, "arch_vgpr"), numeric_column(table, "accum_vgpr")
    return arch + accum.fillna(0) if column(table, "accum_vgpr") else arch


def parse_timestamps(table: pd.DataFrame, field: str) -> Tuple[pd.Series, int]:
    """Timestamps in ns, and how many were written rounded (e.g. "8.1097E+14": digits lost on the way)."""
    name = column(table, field)
    if not name:
        return pd.Series(np.nan, index=table.index, dtype="float64"), 0
    text = table[name].astype(str)
    rounded = text.str.contains(r"[eE][+]?\d", regex=True)
    return checked_numbers(table, name).where(~rounded), int(rounded.sum())


def dispatch_kernels(table: pd.DataFrame) -> Tuple[pd.DataFrame, List[str]]:
    """The model's kernels table from one row per dispatch, and notes on its timing."""
    full = table[column(table, "kernel")].astype(str) if column(table, "kernel") else pd.Series("", index=table.index)
    names = {n: (amd_devices.display_name(n), amd_devices.strip_suffix(n)) for n in pd.unique(full)}
    start, n_rounded = parse_timestamps(table, "start")
    end, _ = parse_timestamps(table, "end")
    frame = pd.DataFrame({
        "name": full.map(lambda n: names[n][0]),
        "demangled_name": full.map(lambda n: names[n][1]),
        "device": device_column(table),
        "stream": numeric_column(table, "queue"),  # HSA queue: the closest thing to a stream
        "start_ns": start, "end_ns": end,
        "duration_ns": (end - start).astype("float64"),  # negative durations are kept (and noted)
        "registers_per_thread": _registers(table),
        "shared_mem_bytes": numeric_column(table, "lds"),
        "correlation_id": numeric_column(table, "correlation"),
        **_launch_shape(table),
    })
    frame["mangled_name"] = [n if n.startswith("_Z") else "" for n in frame["demangled_name"]]
    frame["launch_id"] = np.arange(len(frame))
    frame["range_id"] = 0
    notes = timing_notes(frame, numeric_column(table, "dispatched"), numeric_column(table, "completed"))
    if n_rounded:
        notes.append(f"{n_rounded} dispatch(es) have start/end timestamps written in rounded scientific notation "
                     "(e.g. 8.1097E+14, as a spreadsheet saves them): their durations cannot be recovered and "
                     "are left empty")
    return normalise_kernels(frame), notes


def _ids(mask: pd.Series, frame: pd.DataFrame, limit: int = 5) -> str:
    ids = frame.loc[mask, "launch_id"].head(limit).tolist()
    more = int(mask.sum()) - len(ids)
    return ", ".join(str(i) for i in ids) + (f" and {more} more" if more > 0 else "")


def timing_notes(frame: pd.DataFrame, dispatched: pd.Series, completed: pd.Series) -> List[str]:
    """Flag rows whose times cannot be right: End before Begin, or Begin/End outside Dispatch..Complete."""
    notes = []
    negative = frame["end_ns"] < frame["start_ns"]
    if negative.any():
        notes.append(f"{int(negative.sum())} dispatch(es) end before they begin (negative duration, kept as "
                     f"reported): launch {_ids(negative, frame)}")
    foreign = (frame["start_ns"] < dispatched) | (frame["end_ns"] > completed)
    if foreign.any():
        gap = float(np.nanmedian((frame["start_ns"] - dispatched)[foreign]))
        notes.append(f"{int(foreign.sum())} dispatch(es) have BeginNs/EndNs outside DispatchNs..CompleteNs "
                     f"(median offset {gap / 1e9:+.3f} s): the GPU timestamps are on another clock than the "
                     f"host ones (or, in rocprof-compute pass files, copied from another pass); durations are "
                     f"kept, start times are not comparable to host events (launch {_ids(foreign, frame)})")
    return notes


# Columns the kernels table already holds verbatim: not repeated as raw metrics (they are not metrics).
MODEL_FIELDS = ("kernel", "dispatch", "device", "queue", "start", "end", "correlation")


def column_values(text: pd.Series) -> list:
    """A column as JSON-safe Python values, converted once per column (not per cell): ints, floats,
    None for empty cells, and the text itself where a cell is not a number."""
    num = numeric(text)
    blank = text.astype(str).str.strip() == ""
    if (num.notna() | blank).all():
        if num.dropna().mod(1).eq(0).all() and num.abs().max(skipna=True) < 2 ** 53:
            return num.astype("Int64").astype(object).where(num.notna(), None).tolist()
        return num.astype(object).where(num.notna(), None).tolist()
    return text.astype(str).tolist()


def raw_rows(table: pd.DataFrame, skip: Tuple[str, ...] = ()) -> List[Dict[str, list]]:
    """Every other column of every row as {name: [value, unit]}, the tool's own names and values."""
    mapped = {column(table, f) for f in MODEL_FIELDS} - {None}
    cols = [c for c in table.columns if c not in skip and c not in mapped]
    values = [column_values(table[c]) for c in cols]
    units = ["ns" if c in TIME_COLUMNS else "" for c in cols]
    return [{c: [v, u] for c, v, u in zip(cols, row, units)} for row in zip(*values)] if cols else \
        [{} for _ in range(len(table))]


# ---------------------------------------------------------------- summaries

SUMMARY_UNITS = {"total_ns": "ns", "avg_ns": "ns", "min_ns": "ns", "max_ns": "ns", "stddev_ns": "ns",
                 "median_ns": "ns", "pct": "%", "start_ns": "ns", "end_ns": "ns", "duration_ns": "ns",
                 "size_bytes": "bytes", "value": ""}


def with_units(frame: pd.DataFrame) -> pd.DataFrame:
    frame.attrs["units"] = {c: u for c, u in SUMMARY_UNITS.items() if c in frame.columns and u}
    return frame


def refuse_calls_ending_before_start(path, calls: pd.DataFrame, what: str) -> None:
    """Host API calls are timed on one CPU clock: a call that ends before it starts is a damaged
    timestamp, never a figure (its negative time would be summed into the API statistics).  GPU
    dispatches are another matter: their clocks are converted, and those are kept and noted."""
    backwards = (calls["end_ns"] < calls["start_ns"]).to_numpy()
    if backwards.any():
        row = int(np.flatnonzero(backwards)[0])
        call = calls.iloc[row]
        raise InputError(path, f"{what} row {row + 1}: call {shown(str(call['name']))} ends before it starts "
                               f"(begin {call['start_ns']}, end {call['end_ns']} ns; {int(backwards.sum())} such row(s))",
                         DAMAGED_FIX)


def stats_of(names: pd.Series, durations: pd.Series) -> pd.DataFrame:
    """Calls, total / mean / min / max time and share per name, longest total first (rocprof --stats columns)."""
    df = pd.DataFrame({"name": names.values, "d": durations.values})
    g = df.groupby("name", sort=False)["d"]
    out = pd.DataFrame({"calls": g.size(), "total_ns": g.sum(min_count=1), "avg_ns": g.mean(),
                        "min_ns": g.min(), "max_ns": g.max()}).reset_index()
    total = out["total_ns"].sum()
    out["pct"] = 100.0 * out["total_ns"] / total if total else math.nan
    return with_units(out.sort_values("total_ns", ascending=False, kind="stable").reset_index(drop=True))


def kernel_stats(kernels: pd.DataFrame) -> Dict[str, pd.DataFrame]:
    """Per kernel name, computed from the dispatches (tb-hwprof's own aggregation, like `rocprof --stats`)."""
    if kernels.empty or kernels["duration_ns"].isna().all():
        return {}
    return {"kernel_stats": stats_of(kernels["demangled_name"], kernels["duration_ns"])}


# ---------------------------------------------------------------- variants

def provenance(path: Path, tool: str, fmt: str, version: str = "") -> Provenance:
    return Provenance(tool=tool, tool_version=version, source_path=str(Path(path).resolve()),
                      source_sha256=sha256_of(Path(path).read_bytes()), source_format=fmt)


def devices_for(kernels: pd.DataFrame, known: Optional[Dict[int, Device]] = None) -> List[Device]:
    """One Device per device id the dispatches name (rocminfo facts where the report has them)."""
    known = known or {}
    ids = sorted({int(d) for d in kernels["device"].dropna()}) if len(kernels) else []
    return [known.get(i) or Device(id=i, vendor="AMD") for i in ids]
