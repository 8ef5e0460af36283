"""rocprof reports (ROCm's profiler, v1 `rocprof`, `rocprofv2`, `rocprofv3`) as a Profile.

One reader per file variant, all mapping the tool's per-dispatch columns onto the model
through `ALIASES` (the three generations spell the same field differently):

  v1  results.csv (kernel trace, `--stats`, or counter mode `-i`), *.stats.csv / *_stats.csv,
      results.json (Chrome trace), results.db (SQLite, see rocprof_db.py)
  v2  hip_api_trace_*.csv, CLI-plugin stdout (`Dispatch_ID(1), GPU_ID(4), ...`)
  v3  kernel_trace.csv (older and newer column sets), counter_collection.csv (one row per
      counter), *_stats.csv, rocpd SQLite (rocprof_db.py)
  rocprof-compute / Omniperf per-pass CSVs of a workload (timestamps.csv, SQ_*.csv,
      pmc_dispatch_info.csv, pmc_kernel_top.csv); the workload folder itself is rocprof_compute.py.

rocprof reads no memory throughput or FLOP counters unless asked, so traces fill names,
times, launch shapes and registers only; the bound label stays "unknown" for them.
"""
from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

from ..errors import InputError
from ..model import Device, Profile, Provenance, normalise_kernels
from . import amd_devices
from .common import sha256_of

CSV_FIX = "export with rocprof (results.csv), rocprofv3 --kernel-trace --output-format csv, or pass a rocprof-compute workload folder"

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


def read_table(path: Path, text: Optional[str] = None) -> pd.DataFrame:
    """A CSV as text columns (numbers converted by `numeric`): blank lines skipped, nothing guessed as NaN."""
    text = read_text(path) if text is None else text
    try:
        return pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, skip_blank_lines=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise InputError(path, f"unreadable CSV ({e})", CSV_FIX) from None


def numeric(series: pd.Series) -> pd.Series:
    """Numbers of a text column (int64 where every value is an integer), NaN where not a number."""
    return pd.to_numeric(series.str.strip() if series.dtype == object else series, errors="coerce")


def column(table: pd.DataFrame, field: str) -> Optional[str]:
    return next((c for c in ALIASES[field] if c in table.columns), None)


def numeric_column(table: pd.DataFrame, field: str) -> pd.Series:
    name = column(table, field)
    return numeric(table[name]) if name else pd.Series(np.nan, index=table.index, dtype="float64")


# ---------------------------------------------------------------- dispatch rows -> kernels table

def _launch_shape(table: pd.DataFrame) -> Dict[str, object]:
    """Grid and workgroup from per-dimension columns (v3) or totals (v1/v2: the HSA grid in work-items)."""
    if "Grid_Size_X" in table.columns and "Workgroup_Size_X" in table.columns:
        g = [numeric(table[f"Grid_Size_{d}"]) for d in "XYZ"]
        w = [numeric(table[f"Workgroup_Size_{d}"]) for d in "XYZ"]
        blocks = [np.ceil(gi / wi) for gi, wi in zip(g, w)]
        grid = [f"({int(a)}, {int(b)}, {int(c)})" if not np.isnan([a, b, c]).any() else ""
                for a, b, c in zip(*blocks)]
        block = [f"({int(a)}, {int(b)}, {int(c)})" if not np.isnan([a, b, c]).any() else "" for a, b, c in zip(*w)]
        return {"grid": grid, "block": block, "grid_size": blocks[0] * blocks[1] * blocks[2],
                "block_size": w[0] * w[1] * w[2]}
    items, wg = numeric_column(table, "grid"), numeric_column(table, "workgroup")
    # rocprof's grid size counts work-items (threads); the model's counts workgroups (blocks).
    return {"grid_size": np.ceil(items / wg), "block_size": wg}


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
    return numeric(table[name]).where(~rounded), int(rounded.sum())


def dispatch_kernels(table: pd.DataFrame) -> Tuple[pd.DataFrame, List[str]]:
    """The model's kernels table from one row per dispatch, and notes on its timing."""
    full = table[column(table, "kernel")].astype(str) if column(table, "kernel") else pd.Series("", index=table.index)
    names = {n: (amd_devices.display_name(n), amd_devices.strip_suffix(n)) for n in pd.unique(full)}
    start, n_rounded = parse_timestamps(table, "start")
    end, _ = parse_timestamps(table, "end")
    frame = pd.DataFrame({
        "name": full.map(lambda n: names[n][0]),
        "demangled_name": full.map(lambda n: names[n][1]),
        "device": numeric_column(table, "device"),
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

STATS_COLUMNS = ("Name", "Calls", "TotalDurationNs", "AverageNs", "Percentage")


def header_of(text: str) -> List[str]:
    first = text.lstrip("\ufeff").split("\n", 1)[0]
    return next(csv.reader([first])) if first.strip() else []


def sniff_rocprof(path: Path, head: bytes) -> Optional[str]:
    """Which rocprof variant `head` (the file's first bytes) is, or None."""
    text = head.decode("utf-8", errors="replace")
    if text.lstrip().startswith("{") and '"traceEvents"' in text[:200] and "rocminfo" in text:
        return "rocprof-v1-json"
    if "Dispatch_ID(" in text and "Kernel_Name(" in text:
        return "rocprofv2-stdout"
    cols = set(header_of(text))
    if {"Counter_Name", "Counter_Value", "Kernel_Name"} <= cols:
        return "rocprofv3-counter-collection"
    if {"Kind", "Kernel_Name", "Start_Timestamp", "End_Timestamp"} <= cols:
        return "rocprofv3-kernel-trace"
    if set(STATS_COLUMNS) <= cols:
        return "rocprof-stats"
    if {"Kernel_Name", "Count", "Sum(ns)"} <= cols:
        return "rocprof-compute-kernel-top"
    if {"Domain", "Function", "Start_Timestamp", "End_Timestamp"} <= cols:
        return "rocprofv2-api-trace"
    if "KernelName" in cols and "gpu-id" in cols:
        return "rocprof-v1-csv"
    if {"Dispatch_ID", "Kernel_Name"} <= cols:
        return "rocprof-compute-csv"
    return None


def provenance(path: Path, tool: str, fmt: str, version: str = "") -> Provenance:
    return Provenance(tool=tool, tool_version=version, source_path=str(Path(path).resolve()),
                      source_sha256=sha256_of(Path(path).read_bytes()), source_format=fmt)


def devices_for(kernels: pd.DataFrame, known: Optional[Dict[int, Device]] = None) -> List[Device]:
    """One Device per device id the dispatches name (rocminfo facts where the report has them)."""
    known = known or {}
    ids = sorted({int(d) for d in kernels["device"].dropna()}) if len(kernels) else []
    return [known.get(i) or Device(id=i, vendor="AMD") for i in ids]


def sibling_rocminfo(path: Path) -> Dict[int, Device]:
    """rocprof v1 writes results.sysinfo.txt (rocminfo) beside results.csv: GPU names, CUs, clocks."""
    for cand in (path.with_name(path.stem + ".sysinfo.txt"), path.with_name("results.sysinfo.txt")):
        if cand.is_file():
            return amd_devices.gpu_devices_from_rocminfo(amd_devices.rocminfo_agents(read_text(cand)))
    return {}


def read_dispatch_csv(path: Path, fmt: str) -> Profile:
    """rocprof v1 results.csv (trace or counters), rocprofv3 kernel_trace.csv, rocprof-compute per-pass CSVs."""
    table = read_table(path)
    kernels, notes = dispatch_kernels(table)
    tool = {"rocprof-v1-csv": "rocprof", "rocprofv3-kernel-trace": "rocprofv3"}.get(fmt, "rocprof-compute")
    known = sibling_rocminfo(path) if fmt == "rocprof-v1-csv" else {}
    notes = variant_notes(table, fmt, kernels) + notes
    return Profile(provenance(path, tool, fmt), devices_for(kernels, known), kernels,
                   raw_metrics=raw_rows(table), notes=notes, summaries=kernel_stats(kernels))


def variant_notes(table: pd.DataFrame, fmt: str, kernels: pd.DataFrame) -> List[str]:
    """What the file is (variant, column era) and what it lacks, so the views can say why a figure is empty."""
    cols = set(table.columns)
    notes = [_variant_line(cols, fmt)]
    wave = table.get("wave_size", table.get("Wave_Size"))
    sizes = sorted({int(v) for v in numeric(wave).dropna()}) if wave is not None else []
    if sizes:
        notes.append(f"wavefront size {', '.join(map(str, sizes))}" + (" (RDNA wave32)" if sizes == [32] else ""))
    counters = sorted(c for c in cols if c not in _KNOWN_COLUMNS)
    if counters and fmt == "rocprof-v1-csv":
        notes.append(f"counters collected: {', '.join(counters)} (kept as raw metrics)")
    if len(kernels) and kernels["duration_ns"].isna().all() and not column(table, "start"):
        notes.append("this file has no start/end timestamps: durations are empty")
    return notes


def _variant_line(cols: set, fmt: str) -> str:
    if fmt == "rocprof-v1-csv":
        era = "ROCm 5+ columns (arch_vgpr, accum_vgpr, wave_size)" if "arch_vgpr" in cols else \
            "pre-ROCm-5 columns (vgpr, sgpr, fbar)"
        mode = "kernel trace" if "BeginNs" in cols else "counter mode (-i input file)"
        return f"rocprof v1 results.csv, {mode}, {era}; the file carries no rocprof version"
    if fmt == "rocprofv3-kernel-trace":
        era = "newer column set (Thread_Id, Dispatch_Id)" if "Dispatch_Id" in cols else \
            "older column set (no Thread_Id / Dispatch_Id; Queue_Id is a raw queue handle)"
        return f"rocprofv3 kernel_trace.csv, {era}"
    return ("one pass of a rocprof-compute / Omniperf workload: export the workload folder (with pmc_perf.csv "
            "and sysinfo.csv) for occupancy, hit rates, bytes and FLOPs")


_KNOWN_COLUMNS = {c for names in ALIASES.values() for c in names} | {
    "queue-index", "pid", "tid", "scr", "sgpr", "wave_size", "sig", "obj", "DurationNs", "fbar",
    "Kind", "Thread_Id", "Kernel_Id", "Private_Segment_Size", "Workgroup_Size_X", "Workgroup_Size_Y",
    "Workgroup_Size_Z", "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z"}


# ---------------------------------------------------------------- stats files

def stats_kind(path: Path, table: pd.DataFrame) -> str:
    """kernel_stats, hip_api_stats, hsa_api_stats or copy_stats: from the file name, else the names in it."""
    name = path.name.lower()
    for key, kind in (("copy", "copy_stats"), ("hip", "hip_api_stats"), ("hsa", "hsa_api_stats"),
                      ("memory", "copy_stats"), ("kernel", "kernel_stats")):
        if key in name:
            return kind
    first = str(table["Name"].iloc[0]) if len(table) else ""
    return "hip_api_stats" if first.startswith("hip") else "hsa_api_stats" if first.startswith("hsa_") else "kernel_stats"


def read_stats(path: Path) -> Profile:
    """`rocprof --stats` (v1: 5 columns) and rocprofv3 *_stats.csv (v3: + MinNs, MaxNs, StdDev)."""
    table = read_table(path)
    out = pd.DataFrame({"name": table["Name"].astype(str), "calls": numeric(table["Calls"]),
                        "total_ns": numeric(table["TotalDurationNs"]), "avg_ns": numeric(table["AverageNs"]),
                        "pct": numeric(table["Percentage"])})
    for src, dst in (("MinNs", "min_ns"), ("MaxNs", "max_ns"), ("StdDev", "stddev_ns")):
        if src in table.columns:
            out[dst] = numeric(table[src])
    kind = stats_kind(path, table)
    version = "rocprofv3" if "MinNs" in table.columns else "rocprof"
    notes = [f"{version} statistics file ({kind}, {len(out)} rows): aggregates only, no per-dispatch rows, "
             "so the kernels table is empty"]
    if (table["Percentage"].astype(str) == "None").any():
        notes.append("some Percentage cells read 'None' (rocprof v1 writes that when the total time is 0)")
    fmt = "rocprofv3-stats" if version == "rocprofv3" else "rocprof-v1-stats"
    return Profile(provenance(path, version, fmt), [], normalise_kernels([]), notes=notes,
                   summaries={kind: with_units(out)})


def read_kernel_top(path: Path) -> Profile:
    """rocprof-compute's pmc_kernel_top.csv: Kernel_Name, Count, Sum(ns), Mean(ns), Median(ns), Pct."""
    table = read_table(path)
    out = with_units(pd.DataFrame({
        "name": table["Kernel_Name"].astype(str), "calls": numeric(table["Count"]),
        "total_ns": numeric(table["Sum(ns)"]), "avg_ns": numeric(table.get("Mean(ns)", pd.Series(dtype=str))),
        "median_ns": numeric(table.get("Median(ns)", pd.Series(dtype=str))), "pct": numeric(table["Pct"])}))
    notes = ["rocprof-compute pmc_kernel_top.csv: per-kernel totals only; export the workload folder for "
             "per-dispatch rows and metrics"]
    return Profile(provenance(path, "rocprof-compute", "rocprof-compute-kernel-top"), [], normalise_kernels([]),
                   notes=notes, summaries={"kernel_stats": out})


# ---------------------------------------------------------------- rocprofv3 counter collection (long form)

def read_counter_collection(path: Path) -> Profile:
    """One row per (dispatch, counter): pivoted to one kernel row per dispatch, counters as raw metrics."""
    table = read_table(path)
    key = "Dispatch_Id" if "Dispatch_Id" in table.columns else "Correlation_Id"
    first = table.drop_duplicates(key).reset_index(drop=True)
    kernels, notes = dispatch_kernels(first)
    # Counter_Value per dispatch and counter; v3 sums the instances of a counter per dispatch already.
    values = table.assign(_v=numeric(table["Counter_Value"]))
    per = values.groupby([key, "Counter_Name"], sort=False)["_v"].sum(min_count=1)
    raw = raw_rows(first, skip=("Counter_Name", "Counter_Value"))
    for i, dispatch in enumerate(first[key]):
        for (_, counter), v in per.loc[[dispatch]].items():
            raw[i][counter] = [None if math.isnan(v) else float(v), ""]
    long = with_units(pd.DataFrame({"dispatch": numeric(table[key]), "kernel": table["Kernel_Name"],
                                    "counter": table["Counter_Name"], "value": numeric(table["Counter_Value"])}))
    era = "newer schema (with Kernel_Id)" if "Kernel_Id" in table.columns else "older schema (no Kernel_Id)"
    notes = [f"rocprofv3 counter_collection.csv, {era}: {table['Counter_Name'].nunique()} counter(s) over "
             f"{len(first)} dispatch(es); no timestamps in this file (durations are in kernel_trace.csv)"] + notes
    return Profile(provenance(path, "rocprofv3", "rocprofv3-counter-collection"), devices_for(kernels), kernels,
                   raw_metrics=raw, notes=notes, summaries={"counters": long})


# ---------------------------------------------------------------- rocprofv2: API trace and CLI stdout

def read_api_trace(path: Path) -> Profile:
    """rocprofv2 hip_api_trace_*.csv: Domain, Function, Start_Timestamp, End_Timestamp, Correlation_ID."""
    table = read_table(path)
    start, end = numeric(table["Start_Timestamp"]), numeric(table["End_Timestamp"])
    calls = with_units(pd.DataFrame({"domain": table["Domain"], "name": table["Function"], "start_ns": start,
                                     "end_ns": end, "duration_ns": (end - start).astype("float64"),
                                     "correlation_id": numeric(table.get("Correlation_ID", pd.Series(dtype=str)))}))
    stats = stats_of(calls["name"], calls["duration_ns"])
    notes = [f"rocprofv2 API trace: {len(calls)} host API calls, no GPU dispatches (those are in the "
             "companion hcc_ops_trace / kernel trace file), so the kernels table is empty"]
    return Profile(provenance(path, "rocprofv2", "rocprofv2-api-trace"), [], normalise_kernels([]), notes=notes,
                   summaries={"hip_api_trace": calls, "hip_api_stats": stats})


_PAIR = re.compile(r'(\w+)\(("(?:[^"\\]|\\.)*"|[^()]*)\)')


def read_v2_stdout(path: Path) -> Profile:
    """rocprofv2 CLI-plugin output: one `Key(value), ...` line per dispatch among the tool's own messages."""
    rows = []
    for line in read_text(path).splitlines():
        if line.startswith("Dispatch_ID("):
            rows.append({k: v.strip('"') for k, v in _PAIR.findall(line)})
    if not rows:
        raise InputError(path, "rocprofv2 output without dispatch lines", CSV_FIX)
    table = pd.DataFrame(rows).fillna("").astype(str)
    kernels, notes = dispatch_kernels(table)
    notes = ["rocprofv2 CLI-plugin stdout (`Key(value)` pairs per dispatch); Begin/End timestamps are taken as "
             "written and could not be checked against any host clock"] + notes
    return Profile(provenance(path, "rocprofv2", "rocprofv2-stdout"), devices_for(kernels), kernels,
                   raw_metrics=raw_rows(table), notes=notes, summaries=kernel_stats(kernels))


# ---------------------------------------------------------------- rocprof v1 Chrome-trace JSON

def _json_devices(other: dict) -> Dict[int, Device]:
    """rocminfo as otherData flattens it: 'Agent3.MarketingName', 'Agent3.DeviceType', ... (spaces removed)."""
    agents: Dict[str, dict] = {}
    for key, value in (other or {}).items():
        m = re.match(r"Agent(\d+)\.([^.]+)$", key)
        if m:
            agents.setdefault(m.group(1), {})[m.group(2)] = value
    return amd_devices.gpu_devices_from_rocminfo([
        {"Device Type": a.get("DeviceType", ""), "Node": a.get("Node"), "Marketing Name": a.get("MarketingName", ""),
         "Name": a.get("Name", ""), "Compute Unit": a.get("ComputeUnit"),
         "Max Clock Freq. (MHz)": a.get("MaxClockFreq.(MHz)")} for a in agents.values()])


def read_v1_json(path: Path) -> Profile:
    """rocprof v1 results.json: kernels are the complete events of the GPUn processes, copies of COPY, API calls of CPU *."""
    try:
        doc = json.loads(read_text(path))
    except ValueError as e:
        raise InputError(path, f"unreadable JSON ({e})", CSV_FIX) from None
    events = [e for e in doc.get("traceEvents", []) if isinstance(e, dict)]
    lanes = {str(e.get("pid")): e.get("args", {}).get("name", "") for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    complete = [e for e in events if e.get("ph") == "X"]
    by_lane: Dict[str, List[dict]] = {}
    for e in complete:
        lane = lanes.get(str(e.get("pid")), "")
        kind = "gpu" if lane.startswith("GPU") else "copy" if lane == "COPY" else "api"
        by_lane.setdefault(kind, []).append(e)
    # --hip-trace JSON names kernels in args "Name" (dispatch traces: "KernelName"); the event name as a last resort.
    table = pd.DataFrame([{"KernelName": e.get("args", {}).get("Name", e.get("name", "")),
                           **{k: str(v) for k, v in e.get("args", {}).items()}} for e in by_lane.get("gpu", [])])
    kernels, notes = dispatch_kernels(table) if len(table) else (normalise_kernels([]), [])
    summaries = kernel_stats(kernels)
    summaries.update(_json_activity(by_lane.get("copy", []), "memory_copies"))
    summaries.update(_json_activity(by_lane.get("api", []), "api_trace"))
    notes = [f"rocprof v1 Chrome-trace JSON: {len(kernels)} kernel, {len(by_lane.get('copy', []))} copy and "
             f"{len(by_lane.get('api', []))} API events"] + notes
    if not len(kernels):
        notes.append("this trace holds no kernel dispatch events (rocprof writes kernels to results.csv / "
                     "results.db; export that file for them)")
    devices = devices_for(kernels, _json_devices(doc.get("otherData")))
    return Profile(provenance(path, "rocprof", "rocprof-v1-json"), devices, kernels,
                   raw_metrics=raw_rows(table) if len(table) else [], notes=notes, summaries=summaries)


def _json_activity(events: List[dict], name: str) -> Dict[str, pd.DataFrame]:
    if not events:
        return {}
    args = [e.get("args", {}) for e in events]
    start = pd.to_numeric(pd.Series([a.get("BeginNs") for a in args]), errors="coerce")
    end = pd.to_numeric(pd.Series([a.get("EndNs") for a in args]), errors="coerce")
    frame = pd.DataFrame({"name": [e.get("name", "") for e in events], "start_ns": start, "end_ns": end,
                          "duration_ns": (end - start).astype("float64"),
                          "device": pd.to_numeric(pd.Series([a.get("dev-id") for a in args]), errors="coerce")})
    return {name: with_units(frame)}


# ---------------------------------------------------------------- entry point

WORKLOAD_PARTS = {"sysinfo.csv", "roofline.csv", "log.txt", "profiling_config.yaml"}


def refuse_non_reports(path: Path, head: bytes) -> None:
    """Files that come with rocprof output but hold no profile: say which file to pass instead."""
    if head.startswith(b"\x0a") and path.suffix == ".pftrace":
        raise InputError(path, "Perfetto trace (rocprofv3 --output-format pftrace): tb-hwprof does not read "
                         "Perfetto protobuf", "re-run rocprofv3 with --output-format csv (or rocpd) and pass "
                         "kernel_trace.csv / the .db, or open this file in ui.perfetto.dev")
    text = head[:4096].decode("utf-8", errors="replace")
    if "CMD: rocminfo" in text or ("HSA System Attributes" in text and "HSA Agents" in text):
        raise InputError(path, "rocminfo dump that rocprof writes beside results.csv (device facts, no profile)",
                         "pass results.csv from the same folder")
    if path.name in WORKLOAD_PARTS and (path.parent / "pmc_perf.csv").is_file():
        raise InputError(path, "one file of a rocprof-compute / Omniperf workload",
                         f"pass the workload folder itself: {path.parent}")


def read_rocprof(path, fmt: Optional[str] = None) -> Profile:
    path = Path(path)
    if fmt is None:
        with open(path, "rb") as f:
            fmt = sniff_rocprof(path, f.read(64 << 10))
    if fmt in ("rocprof-compute-csv",) and path.name == "pmc_perf.csv" and (path.parent / "sysinfo.csv").is_file():
        from .rocprof_compute import read_workload  # the main table of a workload: read the whole folder
        return read_workload(path.parent)
    readers = {"rocprof-v1-csv": read_dispatch_csv, "rocprofv3-kernel-trace": read_dispatch_csv,
               "rocprof-compute-csv": read_dispatch_csv}
    from .amd_timeline import attach  # traces also become a timeline (the nsys trace-file format)
    if fmt in readers:
        return attach(readers[fmt](path, fmt))
    simple = {"rocprof-stats": read_stats, "rocprof-compute-kernel-top": read_kernel_top,
              "rocprofv3-counter-collection": read_counter_collection, "rocprofv2-api-trace": read_api_trace,
              "rocprofv2-stdout": read_v2_stdout, "rocprof-v1-json": read_v1_json}
    if fmt in simple:
        return attach(simple[fmt](path))
    raise InputError(path, "not a rocprof report this version reads", CSV_FIX)
