"""Part of the Nsight Systems SQLite reader (nsys_sqlite.py): the export's table names and enums,
opening it read-only, and its StringIds looked up once per distinct id (shared by nsys_sqlite,
nsys_summaries and nsys_timeline)."""
from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Dict, List, Set

import numpy as np
import pandas as pd

from ...columnar import distinct
from ...errors import InputError
from ..common import sqlite_columns

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"
OSRT = "OSRT_API"
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")  # 2024+ name first, then 2022.x
NVTX_START_END = 60  # NVTX_EVENTS.eventType of start/end ranges (which need not nest)
NVTX_STYLES = {59: "PushPop", NVTX_START_END: "StartEnd"}  # NVTX_EVENTS.eventType of ranges
NVTX_DOMAIN_CREATE = 75
NVTX_RANGE_ROWS = f"eventType IN ({', '.join(map(str, NVTX_STYLES))}) AND end IS NOT NULL"

# nsys' own ENUM_CUDA_MEMCPY_OPER / ENUM_CUDA_MEM_KIND, for exports written before those tables existed
# (the ids are nsys', not CUPTI's: old exports store HtoD copies as srcKind 0/1 -> dstKind 2 "Device").
MEMCPY_KINDS = {0: "Unknown", 1: "Host-to-Device", 2: "Device-to-Host", 3: "Host-to-Array", 4: "Array-to-Host",
                5: "Array-to-Array", 6: "Array-to-Device", 7: "Device-to-Array", 8: "Device-to-Device",
                9: "Host-to-Host", 10: "Peer-to-Peer", 11: "Unified Host-to-Device",
                12: "Unified Device-to-Host", 13: "Unified Device-to-Device"}
MEM_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static",
             6: "Managed Static", 7: "Unknown"}
_API_VERSION_TAG = re.compile(r"_v\d{4,}$")  # cudaMalloc_v3020 -> cudaMalloc (runtime version tag, not _v2 symbols)


def connect(path: Path) -> sqlite3.Connection:
    """Read-only, through a URI: nothing is ever created or locked next to the user's file."""
    try:
        conn = sqlite_columns.open_read_only(path)
        conn.execute("PRAGMA temp_store = MEMORY")  # our helper tables stay in memory, never on disk
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as e:
        raise InputError(path, f"unreadable SQLite file ({e})", "re-run `nsys export --type sqlite`") from None
    return conn


def table_names(conn: sqlite3.Connection) -> Set[str]:
    return {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def columns(conn: sqlite3.Connection, table: str) -> List[str]:
    return [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')]


def memcpy_labels(conn, names: Set[str]) -> Dict[int, str]:
    """copyKind -> label, from the export's own enum table when it has one."""
    if "ENUM_CUDA_MEMCPY_OPER" in names:
        return {int(i): label for i, label in conn.execute("SELECT id, label FROM ENUM_CUDA_MEMCPY_OPER")}
    return dict(MEMCPY_KINDS)


def api_name(name: str) -> str:
    """A runtime call's name without its version tag (cudaLaunchKernel_v7000 -> cudaLaunchKernel)."""
    return _API_VERSION_TAG.sub("", name or "")


def string_map(conn, ids: np.ndarray) -> Dict[int, str]:
    """{id: StringIds value} of the distinct `ids` (through a temp table: no IN list of 100k ids)."""
    uniq = distinct(ids)
    if uniq.size == 0:
        return {}
    conn.execute("DROP TABLE IF EXISTS temp.tbh_ids")
    conn.execute("CREATE TEMP TABLE tbh_ids (id INTEGER PRIMARY KEY)")
    conn.executemany("INSERT INTO tbh_ids VALUES (?)", ((int(i),) for i in uniq))
    return dict(conn.execute("SELECT s.id, s.value FROM StringIds s JOIN tbh_ids USING (id)").fetchall())


def strings_of(conn, ids: np.ndarray) -> pd.Series:
    """StringIds values of the distinct `ids` (one per distinct string, not one per row)."""
    found = string_map(conn, ids)
    return pd.Series(list(found.values()), index=pd.Index(list(found), dtype="int64"), dtype=object)


def lookup(strings: pd.Series, ids: np.ndarray) -> np.ndarray:
    """strings[id] per row ("" where unknown): one lookup per distinct id, then an array index."""
    codes, uniq = pd.factorize(ids)
    values = strings.reindex(uniq).fillna("").to_numpy(dtype=object)
    return values[codes] if codes.size else np.zeros(0, dtype=object)
