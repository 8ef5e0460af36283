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
import json
import math
import re
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import pandas as pd

from ...core.errors import InputError
from ...core.model import Device, Profile, normalise_kernels
from . import devices as amd_devices
from .dispatch import (refuse_calls_ending_before_start, CSV_FIX, DAMAGED_FIX, INT64_LIMIT, ALIASES, PER_DIMENSION, checked_numbers, column, dispatch_keys,
                       devices_for, dispatch_kernels, kernel_stats, measured_values, numeric, one_line, provenance,
                       raw_rows, read_table, read_text, refuse_blank_cells, refuse_repeated_dispatches,
                       require_columns, shown, source_of, stats_of, with_units)


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


def sibling_rocminfo(path: Path) -> Dict[int, Device]:
    """rocprof v1 writes results.sysinfo.txt (rocminfo) beside results.csv: GPU names, CUs, clocks."""
    for cand in (path.with_name(path.stem + ".sysinfo.txt"), path.with_name("results.sysinfo.txt")):
        if cand.is_file():
            return amd_devices.gpu_devices_from_rocminfo(amd_devices.rocminfo_agents(read_text(cand)))
    return {}


# One row per dispatch (not so counter collection): the columns each tool writes on every row.
TRACES = {"rocprof-v1-csv": ("rocprof v1 results.csv", ("Index", "KernelName", "gpu-id", "queue-id")),
          "rocprofv3-kernel-trace": ("rocprofv3 kernel_trace.csv", ("Agent_Id", "Queue_Id", "Kernel_Name",
                                     "Start_Timestamp", "End_Timestamp") + PER_DIMENSION)}
FILLED_FIELDS = ("kernel", "dispatch", "device", "start", "end", "grid", "workgroup")


def check_trace_table(table: pd.DataFrame, fmt: str) -> None:
    """Schema and rows of a kernel trace, checked once before anything is read from it."""
    what, required = TRACES[fmt]
    require_columns(table, required, what)
    filled = [column(table, f) for f in FILLED_FIELDS] + [c for c in PER_DIMENSION if c in table.columns]
    refuse_blank_cells(table, [c for c in filled if c])
    refuse_repeated_dispatches(table)


def read_dispatch_csv(path: Path, fmt: str) -> Profile:
    """rocprof v1 results.csv (trace or counters), rocprofv3 kernel_trace.csv, rocprof-compute per-pass CSVs."""
    table = read_table(path)
    if fmt in TRACES:
        check_trace_table(table, fmt)
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
    refuse_blank_cells(table, STATS_COLUMNS)
    refuse_repeated_names(table)
    none = table["Percentage"].astype(str).str.strip() == "None"  # rocprof v1's percentage of a zero total
    out = pd.DataFrame({"name": table["Name"].astype(str), "calls": measured_values(table, "Calls"),
                        "total_ns": measured_values(table, "TotalDurationNs"),
                        "avg_ns": measured_values(table, "AverageNs"),
                        "pct": measured_values(table.assign(Percentage=table["Percentage"].where(~none, "")),
                                               "Percentage")})
    for src, dst in (("MinNs", "min_ns"), ("MaxNs", "max_ns"), ("StdDev", "stddev_ns")):
        if src in table.columns:
            out[dst] = measured_values(table, src)
    kind = stats_kind(path, table)
    version = "rocprofv3" if "MinNs" in table.columns else "rocprof"
    notes = [f"{version} statistics file ({kind}, {len(out)} rows): aggregates only, no per-dispatch rows, "
             "so the kernels table is empty"]
    if none.any():
        notes.append("some Percentage cells read 'None' (rocprof v1 writes that when the total time is 0)")
    fmt = "rocprofv3-stats" if version == "rocprofv3" else "rocprof-v1-stats"
    return Profile(provenance(path, version, fmt), [], normalise_kernels([]), notes=notes,
                   summaries={kind: with_units(out)})


def refuse_repeated_names(table: pd.DataFrame) -> None:
    """A statistics file has one row per name (its aggregate): a name on two rows is a repeated row."""
    repeated = table["Name"].duplicated()
    if repeated.any():
        row = int(np.flatnonzero(repeated.to_numpy())[0])
        name = shown(table["Name"].iloc[row])
        raise InputError(source_of(table), f"data row {row + 1} repeats the name {name} of an earlier row (a "
                         "statistics file has one row per name)", DAMAGED_FIX)


def read_kernel_top(path: Path) -> Profile:
    """rocprof-compute's pmc_kernel_top.csv: Kernel_Name, Count, Sum(ns), Mean(ns), Median(ns), Pct."""
    table = read_table(path)
    optional = {c: measured_values(table, c) if c in table.columns else pd.Series(np.nan, index=table.index)
                for c in ("Mean(ns)", "Median(ns)", "Pct")}
    out = with_units(pd.DataFrame({
        "name": table["Kernel_Name"].astype(str), "calls": measured_values(table, "Count"),
        "total_ns": measured_values(table, "Sum(ns)"), "avg_ns": optional["Mean(ns)"],
        "median_ns": optional["Median(ns)"], "pct": optional["Pct"]}))
    notes = ["rocprof-compute pmc_kernel_top.csv: per-kernel totals only; export the workload folder for "
             "per-dispatch rows and metrics"]
    return Profile(provenance(path, "rocprof-compute", "rocprof-compute-kernel-top"), [], normalise_kernels([]),
                   notes=notes, summaries={"kernel_stats": out})


# ---------------------------------------------------------------- rocprofv3 counter collection (long form)

def read_counter_collection(path: Path) -> Profile:
    """One row per (dispatch, counter): pivoted to one kernel row per dispatch, counters as raw metrics."""
    table = read_table(path)
    key = next((c for c in ("Dispatch_Id", "Correlation_Id") if c in table.columns), None)
    if key is None:
        raise InputError(path, "no Dispatch_Id or Correlation_Id column to group the counters by", DAMAGED_FIX)
    refuse_blank_cells(table, (key, "Kernel_Name", "Counter_Name", "Counter_Value"))
    dispatch = dispatch_keys(table, key)  # (process, dispatch): ids restart per process in a merged file
    first = table[~dispatch.duplicated()].reset_index(drop=True)
    first.attrs["source"] = str(path)
    kernels, notes = dispatch_kernels(first)
    # Counter_Value per dispatch and counter; v3 sums the instances of a counter per dispatch already.
    values = table.assign(_v=measured_values(table, "Counter_Value"), _dispatch=dispatch)
    per = values.groupby(["_dispatch", "Counter_Name"], sort=False)["_v"].sum(min_count=1)
    raw = raw_rows(first, skip=("Counter_Name", "Counter_Value"))
    for i, dispatch in enumerate(dispatch[~dispatch.duplicated()]):
        for (_, counter), v in per.loc[[dispatch]].items():
            raw[i][counter] = [None if math.isnan(v) else float(v), ""]
    long = with_units(pd.DataFrame({"dispatch": checked_numbers(table, key), "kernel": table["Kernel_Name"],
                                    "counter": table["Counter_Name"], "value": values["_v"]}))
    era = "newer schema (with Kernel_Id)" if "Kernel_Id" in table.columns else "older schema (no Kernel_Id)"
    notes = [f"rocprofv3 counter_collection.csv, {era}: {table['Counter_Name'].nunique()} counter(s) over "
             f"{len(first)} dispatch(es); no timestamps in this file (durations are in kernel_trace.csv)"] + notes
    return Profile(provenance(path, "rocprofv3", "rocprofv3-counter-collection"), devices_for(kernels), kernels,
                   raw_metrics=raw, notes=notes, summaries={"counters": long})


# ---------------------------------------------------------------- rocprofv2: API trace and CLI stdout

API_TRACE_COLUMNS = ("Domain", "Function", "Start_Timestamp", "End_Timestamp")


def read_api_trace(path: Path) -> Profile:
    """rocprofv2 hip_api_trace_*.csv: Domain, Function, Start_Timestamp, End_Timestamp, Correlation_ID."""
    table = read_table(path)
    refuse_blank_cells(table, API_TRACE_COLUMNS)  # the sniffer found them in the header
    start, end = checked_numbers(table, "Start_Timestamp"), checked_numbers(table, "End_Timestamp")
    correlation = checked_numbers(table, "Correlation_ID") if "Correlation_ID" in table.columns else \
        pd.Series(np.nan, index=table.index)
    calls = with_units(pd.DataFrame({"domain": table["Domain"], "name": table["Function"], "start_ns": start,
                                     "end_ns": end, "duration_ns": (end - start).astype("float64"),
                                     "correlation_id": correlation}))
    refuse_calls_ending_before_start(path, calls, "API trace")
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
    table.attrs["source"] = str(path)  # dispatch_kernels' refusals name the file
    refuse_repeated_dispatches(table)
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


# What the reader takes from a results.json event, and the type rocprof writes it as (numbers as text).
EVENT_NUMBERS = frozenset(("pid", "tid", "ts", "dur", "id"))
EVENT_FIELDS = ("ph", "name", "cat", *sorted(EVENT_NUMBERS))
ARG_NUMBERS = frozenset(("BeginNs", "EndNs", "dev-id", "queue-id", "pid", "tid", "stream-id", "DurationNs"))


SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def decode_v1_json(path: Path) -> dict:
    """results.json decoded and type-checked once: an object with a list of event objects whose fields
    have the types rocprof writes (text, or numbers finite and within int64), and an otherData object
    of text values; anything else is damage, refused with the event index and field."""
    text = read_text(path)
    try:
        doc = json.loads(text)
    except RecursionError:  # the decoder recurses per nesting level: thousands of [ or { are no trace
        raise InputError(path, "JSON nested too deeply to be a rocprof trace", DAMAGED_FIX) from None
    except ValueError as e:
        raise InputError(path, f"unreadable JSON ({one_line(e)})", CSV_FIX) from None
    if SURROGATE_ESCAPE.search(text):  # \ud800-\udfff escapes decode to lone surrogates unless paired
        try:
            json.dumps(doc, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(path, "text that is not Unicode (an unpaired \\uD800-\\uDFFF escape)", DAMAGED_FIX) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents", []), list):
        raise InputError(path, "JSON without a traceEvents list (not a Chrome trace)", DAMAGED_FIX)
    seen: Dict[tuple, int] = {}
    for i, event in enumerate(doc.get("traceEvents", [])):
        _check_event(path, i, event)
        if event.get("ph") == "X":
            _refuse_repeated_event(path, i, event, seen)
    other = doc.get("otherData") or {}
    if not isinstance(other, dict):
        raise InputError(path, f"otherData is {_json_type(other)}, not an object", DAMAGED_FIX)
    for key, value in other.items():
        _check_field(path, "otherData", repr(key), value, number=False)
    return doc


def _check_event(path: Path, i: int, event) -> None:
    if not isinstance(event, dict):
        raise InputError(path, f"traceEvents[{i}] is {_json_type(event)}, not an event object", DAMAGED_FIX)
    args = event.get("args", {})
    if not isinstance(args, dict):
        raise InputError(path, f"traceEvents[{i}].args is {_json_type(args)}, not an object", DAMAGED_FIX)
    # Fast path (this runs per event): all text, so only the number fields need a look.
    if set(map(type, args.values())) <= _TEXT and all(type(event.get(k, "")) is str for k in EVENT_FIELDS):
        for key in ARG_NUMBERS.intersection(args):
            if args[key].strip() and not _int64_sized(args[key]):
                _check_field(path, f"traceEvents[{i}].args", key, args[key], True)
        return
    for key in EVENT_FIELDS:
        if key in event:
            _check_field(path, f"traceEvents[{i}]", key, event[key], key in EVENT_NUMBERS)
    for key, value in args.items():
        _check_field(path, f"traceEvents[{i}].args", key, value, key in ARG_NUMBERS)


_TEXT = {str}


def _refuse_repeated_event(path: Path, i: int, event: dict, seen: Dict[tuple, int]) -> None:
    """rocprof writes each activity once, with BeginNs/EndNs (always): an event without them, or one equal
    to another in every field, is damage.  (Equal times alone are not: the OpenMP offload sample has two
    dispatches with one BeginNs/EndNs, told apart by queue-index.)"""
    args = event.get("args", {})
    missing = [k for k in ("BeginNs", "EndNs") if k not in args]
    if missing:
        raise InputError(path, f"traceEvents[{i}] (a complete event) has no args.{missing[0]}", DAMAGED_FIX)
    key = (event.get("pid"), event.get("tid"), event.get("name"), tuple(args.items()))  # checked: all hashable
    if key in seen:
        raise InputError(path, f"traceEvents[{i}] repeats traceEvents[{seen[key]}] field for field", DAMAGED_FIX)
    seen[key] = i


def _check_field(path: Path, where: str, key: str, value, number: bool) -> None:
    """Text or a number (rocprof writes both as text); `number`: it must read as a finite int64-sized one.
    (Runs per field of every event: the message is only built for a refusal.)"""
    problem = _value_problem(value, number)
    if problem:
        raise InputError(path, f"{where}.{key} is {problem}", DAMAGED_FIX)


def _value_problem(value, number: bool) -> Optional[str]:
    if type(value) is str:  # the common case first
        return None if not number or not value.strip() or _int64_sized(value) else \
            f"{shown(value)}, not a number within 64 bits"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{_json_type(value)}, not text or a number"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value}, not a finite number"
    return None if not number or _int64_sized(value) else f"{shown(str(value))}, not a number within 64 bits"


def _int64_sized(value) -> bool:
    try:
        return abs(float(value)) < INT64_LIMIT
    except (ValueError, OverflowError):
        return False


def _json_type(value) -> str:
    return {dict: "an object", list: "a list", bool: "a boolean", type(None): "null", str: "text"}.get(
        type(value), "a number")


def read_v1_json(path: Path) -> Profile:
    """rocprof v1 results.json: kernels are the complete events of the GPUn processes, copies of COPY, API calls of CPU *."""
    doc = decode_v1_json(path)
    events = doc.get("traceEvents", [])
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
    table.attrs["source"] = str(path)  # dispatch_kernels' refusals name the file
    kernels, notes = dispatch_kernels(table) if len(table) else (normalise_kernels([]), [])
    summaries = kernel_stats(kernels)
    summaries.update(_json_activity(by_lane.get("copy", []), "memory_copies"))
    summaries.update(_json_activity(by_lane.get("api", []), "api_trace"))
    if "api_trace" in summaries:
        refuse_calls_ending_before_start(path, summaries["api_trace"], "API event")
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
    readers = {"rocprof-v1-csv": read_dispatch_csv, "rocprofv3-kernel-trace": read_dispatch_csv,
               "rocprof-compute-csv": read_dispatch_csv}
    from .timeline import attach  # traces also become a timeline (the nsys trace-file format)
    if fmt in readers:
        return attach(readers[fmt](path, fmt))
    simple = {"rocprof-stats": read_stats, "rocprof-compute-kernel-top": read_kernel_top,
              "rocprofv3-counter-collection": read_counter_collection, "rocprofv2-api-trace": read_api_trace,
              "rocprofv2-stdout": read_v2_stdout, "rocprof-v1-json": read_v1_json}
    if fmt in simple:
        return attach(simple[fmt](path))
    raise InputError(path, "not a rocprof report this version reads", CSV_FIX)


# ---------------------------------------------------------------- registry hooks (readers/__init__.py)
FORMATS = ("rocprof",)


def sniff(path: Path, head) -> Optional[str]:
    """'rocprof' for any rocprof v1/v2/v3 text variant; refuses look-alikes with a fix (Perfetto
    traces, rocminfo dumps, single files of a rocprof-compute workload)."""
    if head is None:
        return None
    refuse_non_reports(path, head)
    return "rocprof" if sniff_rocprof(path, head) else None


def read(path, fmt: str = "rocprof") -> Profile:
    return read_rocprof(path)
