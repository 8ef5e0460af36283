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

from ...errors import InputError
from ...model import Device, Profile, normalise_kernels
from . import devices as amd_devices
from .dispatch import devices_for, kernel_stats, provenance, stats_of, timing_notes, with_units
from ..common import SQLITE_MAGIC
from ..common.sqlite_columns import open_read_only

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


# ---------------------------------------------------------------- rocprof v1 results.db

def _v1_activity(conn, table: str) -> pd.DataFrame:
    return query(conn, f'SELECT * FROM "{table}"')


def read_v1_db(path: Path) -> Profile:
    conn = connect(path)
    try:
        names = schema_names(conn)
        ops = _v1_activity(conn, "OPS")
        summaries = {}
        for table, key in (("COPY", "memory_copies"), ("HIP", "hip_api_trace"), ("HSA", "hsa_api_trace")):
            if table in names:
                df = _v1_activity(conn, table)
                if len(df):
                    summaries[key] = with_units(pd.DataFrame({
                        "name": df["Name"], "start_ns": df["BeginNs"], "end_ns": df["EndNs"],
                        "duration_ns": (df["EndNs"] - df["BeginNs"]).astype("float64"),
                        **({"args": df["args"]} if "args" in df.columns else {})}))
    except sqlite3.DatabaseError as e:
        raise InputError(path, f"damaged rocprof results.db ({e})", FIX) from None
    finally:
        conn.close()
    table = ops.rename(columns={"Name": "KernelName"}).astype(str)
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


def rocpd_kernels(conn) -> pd.DataFrame:
    k = query(conn, KERNEL_SQL)
    wg = [k[f"workgroup_{d}"].astype("float64") for d in "xyz"]
    blocks = [np.ceil(k[f"grid_{d}"] / w) for d, w in zip("xyz", wg)]  # rocpd grid sizes count work-items
    symbol = k["symbol"].fillna("").astype(str)
    frame = pd.DataFrame({
        "name": [amd_devices.display_name(n) for n in k["name"].astype(str)],
        "demangled_name": [amd_devices.strip_suffix(n) for n in k["name"].astype(str)],
        "mangled_name": [amd_devices.strip_suffix(s) if s.startswith("_Z") else "" for s in symbol],
        "device": k["device"], "stream": k["queue_id"],
        "start_ns": k["start"].astype("float64"), "end_ns": k["end"].astype("float64"),
        "duration_ns": (k["end"] - k["start"]).astype("float64"),
        "grid": [f"({int(a)}, {int(b)}, {int(c)})" for a, b, c in zip(*blocks)],
        "block": [f"({int(a)}, {int(b)}, {int(c)})" for a, b, c in zip(*wg)],
        "grid_size": blocks[0] * blocks[1] * blocks[2], "block_size": wg[0] * wg[1] * wg[2],
        # Per-lane vector registers: arch VGPRs + AGPRs (SGPRs are per wavefront, so not counted).
        "registers_per_thread": k["vgpr_count"] + k["accum_vgpr_count"].fillna(0),
        "shared_mem_bytes": k["lds_size"], "correlation_id": k["corr_id"],
    })
    frame["launch_id"] = np.arange(len(frame))
    frame["range_id"] = 0
    return normalise_kernels(frame)


def rocpd_devices(conn, kernels: pd.DataFrame) -> List[Device]:
    """GPU agents (type_index = HIP device ordinal) with CU count and clock from the agent's extdata."""
    known: Dict[int, Device] = {}
    for _id, index, product, arch, ext in conn.execute(
            "SELECT id, type_index, product_name, name, extdata FROM rocpd_info_agent WHERE type = 'GPU'"):
        try:
            info = json.loads(ext or "{}")
        except ValueError:
            info = {}
        cus = info.get("cu_count")
        known[int(index)] = Device(id=int(index), name=product or "", vendor="AMD", architecture=arch or "",
                                   sm_count=cus, clock_mhz=info.get("max_engine_clk_fcompute"),
                                   peaks=amd_devices.datasheet_peaks(product or "", cus))
    return devices_for(kernels, known)


def rocpd_summaries(conn, names: Set[str]) -> Dict[str, pd.DataFrame]:
    out = {}
    copies = query(conn, "SELECT name, start, \"end\", size, src_device, dst_device FROM memory_copies")
    if len(copies):
        out["memory_copies"] = with_units(copies.rename(columns={"start": "start_ns", "end": "end_ns",
                                                                 "size": "size_bytes"}).assign(
            duration_ns=lambda d: (d["end_ns"] - d["start_ns"]).astype("float64")))
    regions = query(conn, "SELECT category, name, start, \"end\" FROM regions")
    if len(regions):
        regions = regions.rename(columns={"start": "start_ns", "end": "end_ns"})
        regions["duration_ns"] = (regions["end_ns"] - regions["start_ns"]).astype("float64")
        out["api_trace"] = with_units(regions)
        out["api_stats"] = stats_of(regions["name"], regions["duration_ns"])
    counters = query(conn, "SELECT dispatch_id, kernel_name, counter_name, value FROM counters_collection") \
        if "counters_collection" in names else pd.DataFrame()
    if len(counters):
        out["counters"] = with_units(counters.rename(columns={"dispatch_id": "dispatch", "kernel_name": "kernel",
                                                              "counter_name": "counter"}))
    if "top" in names:
        out["rocpd_top"] = with_units(query(conn, "SELECT * FROM top"))  # the tool's own view (durations in us)
        out["rocpd_top"].attrs["units"].update({"total_duration": "us", "average": "us", "percentage": "%"})
    return out


def rocpd_notes(conn, kernels: pd.DataFrame) -> List[str]:
    meta = dict(conn.execute("SELECT tag, value FROM rocpd_metadata").fetchall())
    notes = [f"rocprofv3 rocpd database, schema_version {meta.get('schema_version', '?')}: "
             f"{len(kernels)} kernel dispatch(es)"]
    for (env,) in conn.execute("SELECT environment FROM rocpd_info_process LIMIT 1"):
        m = re.search(r"rocm-(\d+\.\d+(?:\.\d+)?)", env or "")
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
        names = schema_names(conn)
        kernels = rocpd_kernels(conn)
        devices = rocpd_devices(conn, kernels)
        summaries = rocpd_summaries(conn, names)
        notes = rocpd_notes(conn, kernels) + timing_notes(kernels, pd.Series(np.nan, index=kernels.index),
                                                           pd.Series(np.nan, index=kernels.index))
    except (sqlite3.DatabaseError, KeyError) as e:
        raise InputError(path, f"damaged or unexpected rocpd database ({e})", FIX) from None
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
