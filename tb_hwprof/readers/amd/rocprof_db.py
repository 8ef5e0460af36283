"""rocprof SQLite outputs: rocprof v1 `results.db` and rocprofv3's rocpd database (ROCm 7).

v1 results.db holds one table per activity: HIP / HSA (API calls), OPS (kernel dispatches),
COPY (memory copies), KERN (kernel names). rocpd keeps GUID-suffixed tables behind plain
views (kernels, memory_copies, regions, counters_collection, rocpd_info_agent, ...); only the
views are queried, so a database merged from several processes reads the same way.
Both are opened read-only through a URI (nothing is created beside the user's file).
"""
from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Dict, List, Optional, Set

import numpy as np
import pandas as pd

from ...core.errors import InputError
from ...core.model import Device, Profile, normalise_kernels
from . import devices as amd_devices
from .dispatch import (refuse_calls_ending_before_start, DAMAGED_FIX, INT64_LIMIT, devices_for, fitting_numbers, kernel_stats, one_line,
                       provenance, refuse_repeated_dispatches, shown, stats_of, timing_notes, with_units)
from ..common import SQLITE_MAGIC
from ..common.sqlite_columns import open_read_only, pages_checked

V1_TABLES = {"OPS", "KERN"}
ROCPD_VIEWS = {"kernels", "rocpd_info_agent", "rocpd_metadata"}
FIX = "pass a rocprof v1 results.db or a rocprofv3 --output-format rocpd database"


def connect(path: Path) -> sqlite3.Connection:
    try:
        conn = open_read_only(path)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as e:
        raise InputError(path, f"unreadable SQLite file ({e})", FIX) from None
    return conn


def schema_names(conn) -> Set[str]:
    return {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def db_kind(path: Path) -> Optional[str]:
    """'rocpd', 'rocprof-v1-db' or None for any other SQLite file."""
    try:
        conn = connect(path)
    except InputError:
        return None
    try:
        names = schema_names(conn)
    finally:
        conn.close()
    if ROCPD_VIEWS <= names:
        return "rocpd"
    if V1_TABLES <= names and ("HIP" in names or "HSA" in names or "COPY" in names):
        return "rocprof-v1-db"
    return None


def query(conn, sql: str) -> pd.DataFrame:
    cur = conn.execute(sql)
    return pd.DataFrame(cur.fetchall(), columns=[d[0] for d in cur.description])


# ---------------------------------------------------------------- values checked as they leave SQLite

# Object columns whose cells are all text, or all numbers (pandas' infer_dtype, in C): nothing to look at.
# ("mixed-integer" is integers with anything else, blobs included: those columns are looked at cell by cell.)
TEXT_OR_NUMBERS = {"string", "integer", "floating", "mixed-integer-float", "decimal", "empty"}


def refuse_binary_cells(path: Path, frame: pd.DataFrame, what: str) -> None:
    """A blob where rocprof writes text or numbers (e.g. invalid UTF-8 stored as bytes) is damage."""
    for name in frame.columns:
        cells = frame[name]
        if cells.dtype != object or pd.api.types.infer_dtype(cells, skipna=True) in TEXT_OR_NUMBERS:
            continue
        binary = cells.map(lambda v: isinstance(v, (bytes, bytearray, memoryview)))  # rare: mixed columns only
        if binary.any():
            row = int(np.flatnonzero(binary.to_numpy())[0])
            raise InputError(path, f"{what} column {name!r}, row {row + 1}{_id(frame, row)}: binary data "
                             f"{bytes(cells.iloc[row])[:20]!r} where rocprof writes text or a number", DAMAGED_FIX)


def _id(frame: pd.DataFrame, row: int) -> str:
    return f" (id {frame['id'].iloc[row]})" if "id" in frame.columns else ""


def refuse_non_text(path: Path, frame: pd.DataFrame, what: str, columns) -> None:
    """Name columns hold text (or NULL): a number or a blob there is damage."""
    for name in columns:
        cells = frame[name]
        if cells.dtype == object and pd.api.types.infer_dtype(cells, skipna=True) in ("string", "empty"):
            continue
        wrong = ~cells.map(lambda v: isinstance(v, str)) & cells.notna()
        if wrong.any():
            row = int(np.flatnonzero(wrong.to_numpy())[0])
            raise InputError(path, f"{what} column {name!r}, row {row + 1}{_id(frame, row)}: "
                             f"{shown(repr(cells.iloc[row]))} where rocprof writes text", DAMAGED_FIX)


def sql_numbers(path: Path, frame: pd.DataFrame, what: str, columns, at_least: float = -INT64_LIMIT) -> None:
    """Columns rocprof writes as integers, made float64 in place, once each non-NULL cell is a number
    within int64 (and >= at_least): text, blobs, inf or 1e300 in them are damage."""
    for name in columns:
        cells = frame[name]
        frame[name] = fitting_numbers(str(path), name, cells, pd.to_numeric(cells, errors="coerce"),
                                      cells.notna(), at_least, table=what)


# ---------------------------------------------------------------- rocprof v1 results.db

# The columns the reader relies on in each v1 activity table, all filled on every row.
V1_ACTIVITY_COLUMNS = {"OPS": ("Name", "BeginNs", "EndNs", "dev-id", "queue-id")}
V1_CALL_COLUMNS = ("Name", "BeginNs", "EndNs")  # COPY, HIP, HSA


def _v1_activity(path: Path, conn, table: str) -> pd.DataFrame:
    """One v1 table, its schema and cell types checked: the columns the reader relies on, no blobs."""
    frame = query(conn, f'SELECT * FROM "{table}"')
    needed = V1_ACTIVITY_COLUMNS.get(table, V1_CALL_COLUMNS)
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise InputError(path, f"table {table} has no column {', '.join(map(repr, missing))} "
                         f"(rocprof v1 writes {', '.join(needed)})", DAMAGED_FIX)
    refuse_binary_cells(path, frame, table)
    refuse_nulls(path, frame, table, needed)
    refuse_non_text(path, frame, table, ["Name"])
    return frame


def refuse_nulls(path: Path, frame: pd.DataFrame, what: str, columns) -> None:
    """Columns rocprof fills on every row: NULL there is a wiped cell."""
    for name in columns:
        null = frame[name].isna()
        if null.any():
            row = int(np.flatnonzero(null.to_numpy())[0])
            raise InputError(path, f"{what} column {name!r}, row {row + 1}{_id(frame, row)} is NULL "
                             "(rocprof fills it on every row)", DAMAGED_FIX)


def _v1_calls(path: Path, frame: pd.DataFrame, table: str) -> pd.DataFrame:
    sql_numbers(path, frame, table, ["BeginNs", "EndNs"])
    calls = with_units(pd.DataFrame({
        "name": frame["Name"], "start_ns": frame["BeginNs"], "end_ns": frame["EndNs"],
        "duration_ns": (frame["EndNs"] - frame["BeginNs"]).astype("float64"),
        **({"args": frame["args"]} if "args" in frame.columns else {})}))
    if table in ("HIP", "HSA"):  # host API calls (COPY rows are GPU-timed, as dispatches)
        refuse_calls_ending_before_start(path, calls, f"table {table}")
    return calls


def _as_text(frame: pd.DataFrame) -> pd.DataFrame:
    """A table as the CSV readers see one: text cells, NULL as an empty cell (not the text 'None')."""
    return frame.astype(object).where(frame.notna(), "").astype(str)


def read_v1_db(path: Path) -> Profile:
    conn = connect(path)
    try:
        with pages_checked(path):
            names = schema_names(conn)
            ops = _v1_activity(path, conn, "OPS")
            summaries = {}
            for table, key in (("COPY", "memory_copies"), ("HIP", "hip_api_trace"), ("HSA", "hsa_api_trace")):
                if table in names:
                    df = _v1_activity(path, conn, table)
                    if len(df):
                        summaries[key] = _v1_calls(path, df, table)
    except sqlite3.DatabaseError as e:
        raise InputError(path, f"damaged rocprof results.db ({one_line(e)})", FIX) from None
    finally:
        conn.close()
    table = _as_text(ops.rename(columns={"Name": "KernelName"}))
    table.attrs["source"] = str(path)  # dispatch_kernels' refusals name the file
    refuse_repeated_dispatches(table)
    from .dispatch import dispatch_kernels, raw_rows
    kernels, notes = dispatch_kernels(table) if len(table) else (normalise_kernels([]), [])
    summaries.update(kernel_stats(kernels))
    if "hip_api_trace" in summaries:
        summaries["hip_api_stats"] = stats_of(summaries["hip_api_trace"]["name"],
                                              summaries["hip_api_trace"]["duration_ns"])
    notes = [f"rocprof v1 results.db: {len(kernels)} kernel dispatch(es) in OPS"
             + "".join(f", {len(df)} rows in {k}" for k, df in summaries.items() if k.endswith("_trace")
                       or k == "memory_copies")] + notes
    return Profile(provenance(path, "rocprof", "rocprof-v1-db"), devices_for(kernels), kernels,
                   raw_metrics=raw_rows(table) if len(table) else [], notes=notes, summaries=summaries)


# ---------------------------------------------------------------- rocpd (rocprofv3, ROCm 7)

KERNEL_SQL = """
SELECT K.id, K.name, S.kernel_name AS symbol, K.agent_type_index AS device, K.queue_id, K.stream_id,
       K.dispatch_id, K.start, K."end", K.grid_x, K.grid_y, K.grid_z, K.workgroup_x, K.workgroup_y,
       K.workgroup_z, K.lds_size, K.scratch_size, K.vgpr_count, K.accum_vgpr_count, K.sgpr_count, K.corr_id
FROM kernels K LEFT JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id AND S.guid = K.guid
ORDER BY K.start, K.id
"""


KERNEL_NUMBERS = ("id", "device", "queue_id", "stream_id", "dispatch_id", "start", "end", "lds_size",
                  "scratch_size", "vgpr_count", "accum_vgpr_count", "sgpr_count", "corr_id")


def checked_kernels(path: Path, conn, names: Set[str]) -> pd.DataFrame:
    """The kernels view's rows, once names are text and numbers fit the model (grid >= 0, workgroup >= 1)."""
    k = query(conn, KERNEL_SQL)
    refuse_lost_dispatches(path, conn, names, len(k))
    refuse_non_text(path, k, "kernels", ["name", "symbol"])
    sql_numbers(path, k, "kernels", KERNEL_NUMBERS)
    sql_numbers(path, k, "kernels", [f"grid_{d}" for d in "xyz"], at_least=0)
    sql_numbers(path, k, "kernels", [f"workgroup_{d}" for d in "xyz"], at_least=1)
    return k


def refuse_lost_dispatches(path: Path, conn, names: Set[str], listed: int) -> None:
    """The kernels view joins each dispatch to its agent, queue, stream and symbol: a dispatch whose
    reference is damaged drops out of it silently, so the view must list every stored dispatch."""
    if "rocpd_kernel_dispatch" not in names:
        return
    stored = conn.execute("SELECT count(*) FROM rocpd_kernel_dispatch").fetchone()[0]
    if stored != listed:
        raise InputError(path, f"{stored - listed} of {stored} kernel dispatches do not join their agent, queue, "
                         "stream or kernel symbol (damaged references)", DAMAGED_FIX)


def _triples(x: pd.Series, y: pd.Series, z: pd.Series) -> list:
    """'(x, y, z)' per row; '' where a dimension is NULL."""
    return [f"({int(a)}, {int(b)}, {int(c)})" if not np.isnan([a, b, c]).any() else "" for a, b, c in zip(x, y, z)]


def rocpd_kernels(path: Path, conn, names: Set[str]) -> pd.DataFrame:
    k = checked_kernels(path, conn, names)
    wg = [k[f"workgroup_{d}"] for d in "xyz"]
    blocks = [np.ceil(k[f"grid_{d}"] / w) for d, w in zip("xyz", wg)]  # rocpd grid sizes count work-items
    symbol = k["symbol"].fillna("").astype(str)
    frame = pd.DataFrame({
        "name": [amd_devices.display_name(n) for n in k["name"].fillna("").astype(str)],
        "demangled_name": [amd_devices.strip_suffix(n) for n in k["name"].fillna("").astype(str)],
        "mangled_name": [amd_devices.strip_suffix(s) if s.startswith("_Z") else "" for s in symbol],
        "device": k["device"], "stream": k["queue_id"],
        "start_ns": k["start"], "end_ns": k["end"], "duration_ns": k["end"] - k["start"],
        "grid": _triples(*blocks), "block": _triples(*wg),
        "grid_size": blocks[0] * blocks[1] * blocks[2], "block_size": wg[0] * wg[1] * wg[2],
        # Per-lane vector registers: arch VGPRs + AGPRs (SGPRs are per wavefront, so not counted).
        "registers_per_thread": k["vgpr_count"] + k["accum_vgpr_count"].fillna(0),
        "shared_mem_bytes": k["lds_size"], "correlation_id": k["corr_id"],
    })
    frame["launch_id"] = np.arange(len(frame))
    frame["range_id"] = 0
    return normalise_kernels(frame)


AGENT_SQL = "SELECT id, type_index, product_name, name, extdata FROM rocpd_info_agent WHERE type = 'GPU'"


def rocpd_devices(path: Path, conn, kernels: pd.DataFrame) -> List[Device]:
    """GPU agents (type_index = HIP device ordinal) with CU count and clock from the agent's extdata."""
    agents = query(conn, AGENT_SQL)
    refuse_non_text(path, agents, "rocpd_info_agent", ["product_name", "name", "extdata"])
    sql_numbers(path, agents, "rocpd_info_agent", ["type_index"], at_least=0)
    known: Dict[int, Device] = {}
    for row, (index, product, arch, ext) in enumerate(agents[["type_index", "product_name", "name", "extdata"]]
                                                      .itertuples(index=False)):
        if pd.isna(index):
            continue  # an agent without a HIP ordinal: no dispatch can name it
        info = agent_extdata(path, row, ext)
        cus, clock = info.get("cu_count"), info.get("max_engine_clk_fcompute")
        known[int(index)] = Device(id=int(index), name=product or "", vendor="AMD", architecture=arch or "",
                                   sm_count=cus, clock_mhz=clock, peaks=amd_devices.datasheet_peaks(product or "", cus))
    return devices_for(kernels, known)


def agent_extdata(path: Path, row: int, ext: Optional[str]) -> dict:
    """An agent's extdata: a JSON object whose cu_count / max_engine_clk_fcompute are numbers if present."""
    try:
        info = json.loads(ext or "{}")
    except (ValueError, RecursionError):
        info = None
    if not isinstance(info, dict):
        raise InputError(path, f"rocpd_info_agent row {row + 1}: extdata {shown(str(ext))} is not a JSON object",
                         DAMAGED_FIX)
    for key in ("cu_count", "max_engine_clk_fcompute"):
        value = info.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not 0 <= value < INT64_LIMIT):
            raise InputError(path, f"rocpd_info_agent row {row + 1}: extdata {key} is {shown(str(value))}, "
                             "not a count", DAMAGED_FIX)
    return info


def checked_query(path: Path, conn, sql: str, what: str, texts=(), numbers=()) -> pd.DataFrame:
    frame = query(conn, sql)
    refuse_non_text(path, frame, what, texts)
    sql_numbers(path, frame, what, numbers)
    return frame


COUNTERS_SQL = "SELECT dispatch_id, kernel_name, counter_name, value FROM counters_collection"


def rocpd_summaries(path: Path, conn, names: Set[str]) -> Dict[str, pd.DataFrame]:
    out = {}
    copies = checked_query(path, conn, "SELECT name, start, \"end\", size, src_device, dst_device FROM memory_copies",
                           "memory_copies", ["name"], ["start", "end", "size", "src_device", "dst_device"])
    if len(copies):
        out["memory_copies"] = with_units(copies.rename(columns={"start": "start_ns", "end": "end_ns",
                                                                 "size": "size_bytes"}).assign(
            duration_ns=lambda d: (d["end_ns"] - d["start_ns"]).astype("float64")))
    regions = checked_query(path, conn, "SELECT category, name, start, \"end\" FROM regions", "regions",
                            ["category", "name"], ["start", "end"])
    if len(regions):
        regions = regions.rename(columns={"start": "start_ns", "end": "end_ns"})
        regions["duration_ns"] = (regions["end_ns"] - regions["start_ns"]).astype("float64")
        refuse_calls_ending_before_start(path, regions, "table regions")
        out["api_trace"] = with_units(regions)
        out["api_stats"] = stats_of(regions["name"], regions["duration_ns"])
    counters = checked_query(path, conn, COUNTERS_SQL, "counters_collection", ["kernel_name", "counter_name"],
                             ["dispatch_id"]) if "counters_collection" in names else pd.DataFrame()
    if len(counters):  # a counter's value may be any number, inf included; text or a blob is damage
        refuse_binary_cells(path, counters, "counters_collection")
    if len(counters):
        out["counters"] = with_units(counters.rename(columns={"dispatch_id": "dispatch", "kernel_name": "kernel",
                                                              "counter_name": "counter"}))
    if "top" in names:
        out["rocpd_top"] = with_units(query(conn, "SELECT * FROM top"))
        refuse_binary_cells(path, out["rocpd_top"], "top")  # the tool's own view (durations in us)
        out["rocpd_top"].attrs["units"].update({"total_duration": "us", "average": "us", "percentage": "%"})
    return out


def rocpd_notes(conn, kernels: pd.DataFrame) -> List[str]:
    meta = dict(conn.execute("SELECT tag, value FROM rocpd_metadata").fetchall())
    notes = [f"rocprofv3 rocpd database, schema_version {meta.get('schema_version', '?')}: "
             f"{len(kernels)} kernel dispatch(es)"]
    for (env,) in conn.execute("SELECT environment FROM rocpd_info_process LIMIT 1"):
        m = re.search(r"rocm-(\d+\.\d+(?:\.\d+)?)", env) if isinstance(env, str) else None
        if m:
            notes.append(f"ROCm {m.group(1)} (from the profiled process's library path)")
    counters = conn.execute("SELECT count(*) FROM rocpd_info_pmc").fetchone()[0]
    if not counters:
        notes.append("no hardware counters were collected (trace only): throughput, occupancy and FLOP columns "
                     "are empty; profile with rocprof-compute for those")
    return notes


def read_rocpd(path: Path) -> Profile:
    conn = connect(path)
    try:
        with pages_checked(path):
            names = schema_names(conn)
            kernels = rocpd_kernels(path, conn, names)
            devices = rocpd_devices(path, conn, kernels)
            summaries = rocpd_summaries(path, conn, names)
            notes = rocpd_notes(conn, kernels) + timing_notes(kernels, pd.Series(np.nan, index=kernels.index),
                                                               pd.Series(np.nan, index=kernels.index))
    except (sqlite3.DatabaseError, KeyError) as e:
        raise InputError(path, f"damaged rocpd database ({one_line(e)})", FIX) from None
    finally:
        conn.close()
    summaries.update(kernel_stats(kernels))
    return Profile(provenance(path, "rocprofv3", "rocpd-sqlite"), devices, kernels, notes=notes, summaries=summaries)


def read_rocprof_db(path, kind: Optional[str] = None) -> Profile:
    path = Path(path)
    kind = kind or db_kind(path)
    from .timeline import attach  # kernels, copies and API calls as a timeline
    if kind == "rocpd":
        return attach(read_rocpd(path))
    if kind == "rocprof-v1-db":
        return attach(read_v1_db(path))
    raise InputError(path, "SQLite file but not a rocprof database", FIX)


# ---------------------------------------------------------------- registry hooks (readers/__init__.py)
FORMATS = ("rocprof-db",)


def sniff(path: Path, head) -> Optional[str]:
    if head is None or not head.startswith(SQLITE_MAGIC):
        return None
    return "rocprof-db" if db_kind(path) else None


def read(path, fmt: str = "rocprof-db") -> Profile:
    return read_rocprof_db(path)
