"""Part of the Nsight Systems SQLite reader (nsys_sqlite.py): the export's table names and enums,
opening it read-only, and its StringIds looked up once per distinct id (shared by nsys_sqlite,
nsys_summaries and nsys_timeline)."""
from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Dict, Iterable, List, Set, Tuple

import numpy as np
import pandas as pd

from ...core.columnar import distinct
from ...core.errors import InputError
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

# The columns the reader queries with no fallback, per table it reads when the export has it, and
# the type each is declared with ("a|b": either column).  Every nsys export 2020.5-2026.1 has them
# all: one missing means the file was edited or damaged, and a query would fail deep inside.
INT, TEXT = "INTEGER", "TEXT"
_GPU_ACTIVITY = {"start": INT, "end": INT, "deviceId": INT, "contextId": INT, "streamId": INT,
                 "correlationId": INT, "globalPid": INT, "bytes": INT}
REQUIRED_COLUMNS = {
    KERNEL: {"start": INT, "end": INT, "deviceId": INT, "globalPid": INT, "shortName": INT},
    MEMCPY: dict(_GPU_ACTIVITY, copyKind=INT, srcKind=INT, dstKind=INT),
    MEMSET: _GPU_ACTIVITY,
    RUNTIME: {"start": INT, "end": INT, "globalTid": INT, "correlationId": INT, "nameId": INT},
    NVTX: {"start": INT, "end": INT, "eventType": INT, "globalTid": INT},
    OSRT: {"start": INT, "end": INT, "globalTid": INT, "nameId": INT},
    "StringIds": {"id": INT, "value": TEXT},
    "ThreadNames": {"globalTid": INT, "nameId": INT},
    "PROCESSES": {"pid": INT, "name": TEXT},
    "TARGET_INFO_GPU": {"id|deviceId": INT, "name": TEXT},
    "TARGET_INFO_CUDA_GPU": {"deviceId": INT},
    "ENUM_CUDA_MEMCPY_OPER": {"id": INT, "label": TEXT},
    "ENUM_CUDA_MEM_KIND": {"id": INT, "label": TEXT},
    **{table: {"name": TEXT, "value": TEXT} for table in META_TABLES},
}

REEXPORT = "re-export it with `nsys export --type sqlite`"


def connect(path: Path) -> sqlite3.Connection:
    """Read-only, through a URI: nothing is ever created or locked next to the user's file."""
    try:
        conn = sqlite_columns.open_read_only(path)
        conn.execute("PRAGMA temp_store = MEMORY")  # our helper tables stay in memory, never on disk
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as e:
        raise InputError(path, f"the SQLite file is damaged ({e})", REEXPORT) from None
    return conn


def table_names(conn: sqlite3.Connection) -> Set[str]:
    return {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def columns(conn: sqlite3.Connection, table: str) -> List[str]:
    return [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')]


def _affinity(declared: str) -> str:
    """SQLite's type affinity of a declared column type (its rules, in their order)."""
    declared = declared.upper()
    if "INT" in declared:
        return INT
    if any(t in declared for t in ("CHAR", "CLOB", "TEXT")):
        return TEXT
    if not declared or "BLOB" in declared:
        return "BLOB"  # no affinity: values keep whatever type they were written with
    return "REAL" if any(t in declared for t in ("REAL", "FLOA", "DOUB")) else "NUMERIC"


def schema_problem(conn: sqlite3.Connection, names: Set[str]) -> str:
    """What is wrong with the tables the reader relies on ("" when nothing): a required column
    missing or declared with another type."""
    for table, required in REQUIRED_COLUMNS.items():
        if table not in names:
            continue
        declared = {row[1]: row[2] or "" for row in conn.execute(f'PRAGMA table_info("{table}")')}
        for spec, kind in required.items():
            present = [c for c in spec.split("|") if c in declared]
            if not present:
                return f"table {table} has no {' or '.join(spec.split('|'))} column"
            if _affinity(declared[present[0]]) not in (kind, "NUMERIC" if kind == INT else TEXT, "BLOB"):
                return f"column {table}.{present[0]} is declared {declared[present[0]]}, not {kind}"
    return ""


def first_non_integer(conn: sqlite3.Connection, table: str, cols: Iterable[str]) -> Tuple[str, int]:
    """(column, rowid) of the first value of `cols` in `table` that is not an integer (NULL, text or
    a REAL: what a damaged page puts there), ("", 0) when there is none.  One scan, for tables
    whose values SQL aggregates without the reader seeing them."""
    cols = list(cols)
    test = " OR ".join(f"typeof(\"{c}\") != 'integer'" for c in cols)
    kinds = ", ".join(f"typeof(\"{c}\")" for c in cols)
    row = conn.execute(f'SELECT rowid, {kinds} FROM "{table}" WHERE {test} LIMIT 1').fetchone()
    if row is None:
        return "", 0
    return next(c for c, kind in zip(cols, row[1:]) if kind != "integer"), row[0]


def check_integers(conn: sqlite3.Connection, table: str, cols: Iterable[str]) -> None:
    """Refuse (DamagedValues) a non-integer value in `cols` of `table`."""
    column, rowid = first_non_integer(conn, table, cols)
    if column:
        raise sqlite_columns.DamagedValues(table, column, rowid)


# (column, lowest, highest) of the ids the reader packs into one int64 per GPU operation (its
# stream key: device < 2^7, context < 2^24, stream < 2^32); -1 stands for "absent".
ID_BOUNDS = (("deviceId", 0, 127), ("contextId", -1, (1 << 24) - 1), ("streamId", -1, (1 << 32) - 1))


def check_bounds(conn: sqlite3.Connection, table: str, values: Iterable[np.ndarray], device: str = "deviceId") -> None:
    """Refuse (DamagedValues) an id of ID_BOUNDS (`values`: their arrays, in that order; `device`:
    the device id's column in `table`) outside its range: CUDA never numbers a device, context or
    stream so, a damaged page does.  One vectorised pass per column; the row is looked up only then."""
    for (column, lo, hi), array in zip(ID_BOUNDS, values):
        column = device if column == "deviceId" else column
        if array.size and (array.min() < lo or array.max() > hi):
            row = conn.execute(f'SELECT rowid FROM "{table}" WHERE NOT coalesce("{column}", {max(lo, 0)}) '
                               f"BETWEEN {lo} AND {hi} LIMIT 1").fetchone()
            raise sqlite_columns.DamagedValues(table, column, row[0] if row else None,
                                               f"an id outside {lo}..{hi}")


# No operation, call or range lasts years (~3 years): a longer one, or one whose end - start
# overflows int64, is a damaged value, not data.
MAX_DURATION_NS = 10 ** 17


def check_durations(conn: sqlite3.Connection, table: str, start: np.ndarray, end: np.ndarray, where: str = "") -> None:
    """Refuse (DamagedValues) a row of `table` (of those `where` keeps) that ends before it starts
    or lasts longer than MAX_DURATION_NS: CUPTI, NVTX and nsys never record one, a damaged page
    does.  Vectorised (a negative end - start, wrapped or not, is huge as unsigned); the row is
    looked up only then."""
    if start.size and ((end < start) | (np.subtract(end, start).view(np.uint64) > MAX_DURATION_NS)).any():
        keep = f"AND ({where})" if where else ""
        row = conn.execute(f'SELECT rowid FROM "{table}" WHERE ("end" < start OR "end" - start > {MAX_DURATION_NS}) '
                           f"{keep} LIMIT 1").fetchone()
        raise sqlite_columns.DamagedValues(table, "end - start", row[0] if row else None,
                                           "a negative or impossibly long duration")


def checked(table: str, rows: List[tuple], kinds: Tuple[tuple, ...], names: Tuple[str, ...]) -> List[tuple]:
    """`rows` (rowid first, then one value per `names`), each value of one of its `kinds` of Python
    types; a row with another (a NULL id, a text where a number must be) is refused as damage."""
    for row in rows:
        for value, allowed, name in zip(row[1:], kinds, names):
            if not isinstance(value, allowed):
                raise sqlite_columns.DamagedValues(table, name, row[0])
    return rows


def memcpy_labels(conn, names: Set[str]) -> Dict[int, str]:
    """copyKind -> label, from the export's own enum table when it has one."""
    if "ENUM_CUDA_MEMCPY_OPER" in names:
        rows = conn.execute("SELECT rowid, id, label FROM ENUM_CUDA_MEMCPY_OPER").fetchall()
        # label is nullable in the schema: a kind without one is named as nsys_summaries names it.
        return {i: label if label is not None else f"kind {i}"
                for _, i, label in checked("ENUM_CUDA_MEMCPY_OPER", rows, ((int,), (str, type(None))), ("id", "label"))}
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
    rows = conn.execute("SELECT s.id, s.id, s.value FROM StringIds s JOIN tbh_ids USING (id)").fetchall()
    return {i: value for _, i, value in checked("StringIds", rows, ((int,), (str,)), ("id", "value"))}


def strings_of(conn, ids: np.ndarray) -> pd.Series:
    """StringIds values of the distinct `ids` (one per distinct string, not one per row)."""
    found = string_map(conn, ids)
    return pd.Series(list(found.values()), index=pd.Index(list(found), dtype="int64"), dtype=object)


def lookup(strings: pd.Series, ids: np.ndarray) -> np.ndarray:
    """strings[id] per row ("" for a negative id: none): one lookup per distinct id, then an array
    index.  An id StringIds does not hold is damage (its page swapped or overwritten): the export
    writes every string its rows name."""
    codes, uniq = pd.factorize(ids)
    named = uniq[uniq >= 0] if uniq.dtype.kind in "iuf" else uniq
    dangling = pd.Index(named).difference(strings.index)
    if len(dangling):
        raise sqlite_columns.DamagedValues("StringIds", "id", problem=f"{len(dangling)} string ids the rows name "
                                           f"are missing (e.g. {dangling[0]})")
    values = strings.reindex(uniq).fillna("").to_numpy(dtype=object)
    return values[codes] if codes.size else np.zeros(0, dtype=object)
