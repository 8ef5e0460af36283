"""Nsight Systems SQLite export reader (`nsys export --type sqlite`), nsys 2020.5 to 2026.1.

The export is opened read-only and queried in place: per-launch columns are
pulled as integers straight into numpy (no Python object per row), names are
resolved once per distinct string id, and every summary is a SQL GROUP BY
(FACTS.md: 1M kernels aggregate in ~1 s in SQL, ~14 s through pandas.read_sql).

Schemas differ across versions: tables exist only when they had rows, metadata
lives in EXPORT_META_DATA (2022.x), META_DATA_EXPORT (2024+) or nowhere (older),
GPU info in TARGET_INFO_GPU (`id` or `deviceId`) and/or TARGET_INFO_CUDA_GPU,
and `mangledName` only in newer kernel tables.  Every query is built from the
columns actually present.
"""
from __future__ import annotations

import hashlib
import itertools
import math
import re
import sqlite3
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set

import numpy as np
import pandas as pd

from ..analysis.summary import gpu_activity
from ..analysis.timeline import grouped_stats
from ..errors import InputError
from ..model import Device, Peak, Profile, Provenance, normalise_kernels
from . import nsys_timeline

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")  # 2024+ name first, then 2022.x
NVTX_STYLES = {59: "PushPop", 60: "StartEnd"}  # NVTX_EVENTS.eventType of ranges
NVTX_DOMAIN_CREATE = 75

# nsys' own ENUM_CUDA_MEMCPY_OPER / ENUM_CUDA_MEM_KIND, for exports written before those tables existed
# (the ids are nsys', not CUPTI's: old exports store HtoD copies as srcKind 0/1 -> dstKind 2 "Device").
MEMCPY_KINDS = {0: "Unknown", 1: "Host-to-Device", 2: "Device-to-Host", 3: "Host-to-Array", 4: "Array-to-Host",
                5: "Array-to-Array", 6: "Array-to-Device", 7: "Device-to-Array", 8: "Device-to-Device",
                9: "Host-to-Host", 10: "Peer-to-Peer", 11: "Unified Host-to-Device",
                12: "Unified Device-to-Host", 13: "Unified Device-to-Device"}
MEM_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static",
             6: "Managed Static", 7: "Unknown"}
_API_VERSION_TAG = re.compile(r"_v\d{4,}$")  # cudaMalloc_v3020 -> cudaMalloc (runtime version tag, not _v2 symbols)

# Column units of the summaries (suffix convention of the names, spelled out for the JSON "units").
SUMMARY_UNITS = {"_ns": "ns", "_pct": "%", "_bytes": "bytes", "_bytes_per_s": "byte/s"}


# ---------------------------------------------------------------- connection and schema

def connect(path: Path) -> sqlite3.Connection:
    """Read-only, through a URI: nothing is ever created or locked next to the user's file."""
    uri = Path(path).resolve().as_uri() + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
        conn.execute("PRAGMA temp_store = MEMORY")  # our helper tables stay in memory, never on disk
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as e:
        raise InputError(path, f"unreadable SQLite file ({e})", "re-run `nsys export --type sqlite`") from None
    return conn


def table_names(conn: sqlite3.Connection) -> Set[str]:
    return {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def columns(conn: sqlite3.Connection, table: str) -> List[str]:
    return [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')]


def is_nsys_schema(names: Set[str]) -> bool:
    """nsys exports always hold StringIds plus CUPTI tables, or at least target info / thread names."""
    if "StringIds" not in names:
        return False
    return any(n.startswith(("CUPTI_ACTIVITY_KIND_", "TARGET_INFO_")) for n in names) or "ThreadNames" in names


def check_size(path: Path) -> None:
    """A copy cut short fails deep inside a query; the header's page count says so up front."""
    with open(path, "rb") as f:
        header = f.read(100)
    if len(header) < 100:
        raise InputError(path, f"truncated SQLite file ({len(header)} bytes)", "copy the file again")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # The page count is only trusted when "version-valid-for" matches the change counter.
    if header[92:96] == header[24:28] and pages:
        expected, actual = page_size * pages, Path(path).stat().st_size
        if actual < expected:
            raise InputError(path, f"truncated SQLite file ({actual} of the {expected} bytes its header declares)",
                             "copy the file again or re-run `nsys export --type sqlite`")


def looks_like_nsys(path: Path) -> bool:
    """Content check for detect.sniff: a SQLite file whose tables are an nsys export's."""
    check_size(path)
    conn = connect(path)
    try:
        return is_nsys_schema(table_names(conn))
    except sqlite3.DatabaseError as e:
        raise InputError(path, f"damaged SQLite file ({e})", "copy the file again or re-run the export") from None
    finally:
        conn.close()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------- metadata and devices

def export_metadata(conn, names: Set[str]) -> Dict[str, str]:
    for table in META_TABLES:
        if table in names:
            return {k: v for k, v in conn.execute(f"SELECT name, value FROM {table}")}
    return {}


def _rows(conn, table: str) -> List[dict]:
    cur = conn.execute(f'SELECT * FROM "{table}"')
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def _num(value) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def _bandwidth_peak(bytes_per_s: Optional[float], how: str) -> Dict[str, Peak]:
    # The driver's theoretical figure (memory clock x bus width), not a measurement: hence "datasheet".
    if not bytes_per_s:
        return {}
    return {"bytes_per_s_dram": Peak(bytes_per_s, "byte/s", "datasheet",
                                     f"Nsight Systems {how}: driver-reported theoretical DRAM bandwidth, not measured")}


def _device_from_gpu_row(row: dict) -> Device:
    """TARGET_INFO_GPU (2021+: clockRate Hz, memoryBandwidth B/s; 2020.5: only id/name/bus)."""
    major, minor = row.get("computeMajor"), row.get("computeMinor")
    cc = f"{major}.{minor}" if major is not None and minor is not None else ""
    clock = _num(row.get("clockRate"))
    sms = _num(row.get("smCount"))
    return Device(id=int(row.get("id", row.get("deviceId", 0))), name=(row.get("name") or "").strip(),
                  vendor="NVIDIA", architecture=f"cc{cc}" if cc else "", compute_capability=cc,
                  sm_count=int(sms) if sms else None, clock_mhz=clock / 1e6 if clock else None,
                  peaks=_bandwidth_peak(_num(row.get("memoryBandwidth")), "TARGET_INFO_GPU.memoryBandwidth"))


def _fill_from_cuda_gpu(dev: Optional[Device], row: dict) -> Device:
    """TARGET_INFO_CUDA_GPU (2020.x): coreClockRate in kHz, globalMemoryBandwidth in kB/s."""
    major, minor = row.get("computeCapabilityMajor"), row.get("computeCapabilityMinor")
    cc = f"{major}.{minor}" if major is not None and minor is not None else ""
    dev = dev or Device(id=int(row.get("deviceId", 0)), name=(row.get("name") or "").strip(), vendor="NVIDIA")
    clock, sms, bw = _num(row.get("coreClockRate")), _num(row.get("numMultiprocessors")), _num(
        row.get("globalMemoryBandwidth"))
    dev.compute_capability = dev.compute_capability or cc
    dev.architecture = dev.architecture or (f"cc{cc}" if cc else "")
    dev.sm_count = dev.sm_count or (int(sms) if sms else None)
    dev.clock_mhz = dev.clock_mhz or (clock / 1e3 if clock else None)
    if not dev.peaks:
        dev.peaks = _bandwidth_peak(bw * 1e3 if bw else None, "TARGET_INFO_CUDA_GPU.globalMemoryBandwidth")
    return dev


def read_devices(conn, names: Set[str]) -> List[Device]:
    devices: Dict[int, Device] = {}
    if "TARGET_INFO_GPU" in names:
        for row in _rows(conn, "TARGET_INFO_GPU"):
            dev = _device_from_gpu_row(row)
            devices.setdefault(dev.id, dev)
    if "TARGET_INFO_CUDA_GPU" in names:
        for row in _rows(conn, "TARGET_INFO_CUDA_GPU"):
            dev_id = int(row.get("deviceId", 0))
            devices[dev_id] = _fill_from_cuda_gpu(devices.get(dev_id), row)
    return [devices[k] for k in sorted(devices)]


# ---------------------------------------------------------------- kernels table

def _int_matrix(conn, sql: str, ncols: int, nrows: int) -> np.ndarray:
    """Rows of integers straight into one int64 array: the cursor's tuples are consumed, never kept."""
    cur = conn.execute(sql)
    try:
        flat = np.fromiter(itertools.chain.from_iterable(cur), dtype=np.int64, count=nrows * ncols)
    except (TypeError, ValueError) as e:
        raise ValueError(f"unexpected NULL or non-integer value ({e})") from None
    return flat.reshape(nrows, ncols)


def _strings(conn, id_sql: str) -> pd.Series:
    """StringIds values for the ids `id_sql` selects (distinct strings only, not one per row)."""
    rows = conn.execute(f"SELECT id, value FROM StringIds WHERE id IN ({id_sql})").fetchall()
    return pd.Series([v for _, v in rows], index=pd.Index([i for i, _ in rows], dtype="int64"), dtype=object)


def _lookup(strings: pd.Series, ids: np.ndarray) -> np.ndarray:
    return strings.reindex(ids).fillna("").to_numpy(dtype=object)


def _unpack_dims(packed: np.ndarray):
    """(x, y, z) float arrays (NaN where absent) and "(x, y, z)" strings formatted once per distinct shape."""
    codes, uniques = pd.factorize(packed)  # a hash of one int64 per launch: no per-row Python object
    labels = np.array(["" if p < 0 else f"({p >> 32}, {(p >> 16) & 0xFFFF}, {p & 0xFFFF})" for p in uniques],
                      dtype=object)
    parts = [(packed >> 32).astype("float64"), ((packed >> 16) & 0xFFFF).astype("float64"),
             (packed & 0xFFFF).astype("float64")]
    for part in parts:
        part[packed < 0] = math.nan
    return parts, labels[codes] if len(codes) else np.array([], dtype=object)


# (expression, columns it needs); -1 stands for "absent".  CUDA caps gridX at 2^31-1 and
# gridY/gridZ/block dims at 65535, so a shape packs into one int64 as x<<32 | y<<16 | z.
KERNEL_SELECT = [
    ("start", ()), ("end", ()), ("deviceId", ()), ("coalesce(contextId, -1)", ("contextId",)),
    ("coalesce(streamId, -1)", ("streamId",)), ("coalesce(correlationId, -1)", ("correlationId",)),
    ("coalesce(shortName, -1)", ("shortName",)), ("coalesce(demangledName, -1)", ("demangledName",)),
    ("coalesce(mangledName, -1)", ("mangledName",)), ("coalesce(registersPerThread, -1)", ("registersPerThread",)),
    ("coalesce((gridX << 32) | (gridY << 16) | gridZ, -1)", ("gridX", "gridY", "gridZ")),
    ("coalesce((blockX << 32) | (blockY << 16) | blockZ, -1)", ("blockX", "blockY", "blockZ")),
    ("coalesce(staticSharedMemory + dynamicSharedMemory, -1)", ("staticSharedMemory", "dynamicSharedMemory")),
    ("(coalesce(globalPid, 0) >> 24) & 16777215", ("globalPid",)),  # the process (flows pair by pid + id)
]
KERNEL_FIELDS = ["start", "end", "device", "context", "stream", "correlation", "short", "demangled", "mangled",
                 "registers", "grid", "block", "shared", "pid"]


def _kernel_sql(present: Sequence[str]) -> str:
    exprs = [expr if all(c in present for c in needs) else "-1" for expr, needs in KERNEL_SELECT]
    return f"SELECT {', '.join(exprs)} FROM {KERNEL} ORDER BY start, rowid"


def _nan_negative(values: np.ndarray) -> np.ndarray:
    out = values.astype("float64")
    out[values < 0] = math.nan  # -1 stands for "absent" in the query
    return out


def kernel_columns(conn) -> Dict[str, np.ndarray]:
    """Per launch, in GPU start order: the integer columns of KERNEL_FIELDS (-1 = absent)."""
    present = columns(conn, KERNEL)
    n = conn.execute(f"SELECT count(*) FROM {KERNEL}").fetchone()[0]
    m = _int_matrix(conn, _kernel_sql(present), len(KERNEL_SELECT), n)
    return {f: np.ascontiguousarray(m[:, i]) for i, f in enumerate(KERNEL_FIELDS)}


def kernel_strings(conn) -> pd.Series:
    """The StringIds values the kernel table's name columns refer to (one per distinct id)."""
    present = columns(conn, KERNEL)
    id_cols = [col for col in ("shortName", "demangledName", "mangledName") if col in present]
    return _strings(conn, " UNION ".join(f'SELECT "{col}" FROM {KERNEL}' for col in id_cols))


def kernel_names(strings: pd.Series, c: Dict[str, np.ndarray]) -> np.ndarray:
    """The kernels table's "name" column: the short name, the demangled one where there is none."""
    short = _lookup(strings, c["short"])
    return np.where(short == "", _lookup(strings, c["demangled"]), short)


def read_kernels(conn, c: Optional[Dict[str, np.ndarray]] = None, strings: Optional[pd.Series] = None) -> pd.DataFrame:
    c = kernel_columns(conn) if c is None else c
    strings = kernel_strings(conn) if strings is None else strings
    return normalise_kernels(kernel_frame(c, strings), copy=False)  # our own frame: fixed in place, not copied


def kernel_frame(c: Dict[str, np.ndarray], strings: pd.Series) -> pd.DataFrame:
    """The columns an nsys export holds, from kernel_columns(); normalise_kernels adds the rest."""
    n = c["start"].size
    demangled = _lookup(strings, c["demangled"])
    short = _lookup(strings, c["short"])
    (gx, gy, gz), grid = _unpack_dims(c["grid"])
    (bx, by, bz), block = _unpack_dims(c["block"])
    frame = pd.DataFrame({
        "launch_id": np.arange(n, dtype=np.int64),
        "range_id": np.zeros(n, dtype=np.int64),  # one capture = one range
        "name": np.where(short == "", demangled, short),
        "demangled_name": demangled,
        "mangled_name": _lookup(strings, c["mangled"]),
        "device": c["device"].astype("float64"),
        "context": _nan_negative(c["context"]),
        "stream": _nan_negative(c["stream"]),
        "duration_ns": (c["end"] - c["start"]).astype("float64"),
        "grid": grid,
        "block": block,
        "grid_size": gx * gy * gz,
        "block_size": bx * by * bz,
        "registers_per_thread": _nan_negative(c["registers"]),
        "shared_mem_bytes": _nan_negative(c["shared"]),
        "start_ns": c["start"].astype("float64"),
        "end_ns": c["end"].astype("float64"),
        "correlation_id": _nan_negative(c["correlation"]),
    })
    return frame


# ---------------------------------------------------------------- summaries (SQL GROUP BY)

def duration_stats(conn, src_sql: str, keys: Sequence[str], value: str = "dur", extra: str = "") -> pd.DataFrame:
    """count/total/avg/med/min/max/sample-stddev of `value` per `keys`, in one SQL pass.

    `src_sql` yields the key columns and `value`.  The median is the mean of the middle
    one or two values (as nsys computes it); the stddev is the sample one, 0 for a single
    instance (as `nsys stats` prints it).  Only one row per group comes back to Python.
    """
    k = ", ".join(keys)
    sql = f"""
        SELECT {k}, count(*) AS n, sum(v) AS total, avg(v) AS mean, min(v) AS lo, max(v) AS hi,
               avg(CASE WHEN rn IN ((cnt + 1) / 2, (cnt + 2) / 2) THEN v END) AS med,
               sum((v - mu) * (v - mu)) AS ss {extra}
        FROM (SELECT *, {value} AS v,
                     row_number() OVER (PARTITION BY {k} ORDER BY {value}) AS rn,
                     count(*) OVER (PARTITION BY {k}) AS cnt,
                     avg({value}) OVER (PARTITION BY {k}) AS mu
              FROM ({src_sql}))
        GROUP BY {k}"""
    cur = conn.execute(sql)
    df = pd.DataFrame(cur.fetchall(), columns=[d[0] for d in cur.description])
    df["stddev"] = np.sqrt(df["ss"].astype("float64") / (df["n"] - 1).clip(lower=1)) if len(df) else []
    df.loc[df["n"] <= 1, "stddev"] = 0.0
    return df.drop(columns=["ss"])


def _stats_frame(df: pd.DataFrame, count_name: str, unit: str) -> pd.DataFrame:
    """Rename duration_stats' columns to <stat>_<unit> and add the nsys "Time (%)" share."""
    total = float(df["total"].sum()) if len(df) else 0.0
    out = pd.DataFrame({
        "time_pct" if unit == "ns" else "total_pct": 100.0 * df["total"].astype("float64") / total if total else
        np.full(len(df), math.nan),
        f"total_{unit}": df["total"].astype("int64"),
        count_name: df["n"].astype("int64"),
        f"avg_{unit}": df["mean"].astype("float64"),
        f"med_{unit}": df["med"].astype("float64"),
        f"min_{unit}": df["lo"].astype("int64"),
        f"max_{unit}": df["hi"].astype("int64"),
        f"stddev_{unit}": df["stddev"].astype("float64"),
    })
    return out


def _sorted(df: pd.DataFrame, by: str, name_col: str) -> pd.DataFrame:
    # nsys orders by total descending; the name breaks ties so the order is reproducible.
    return df.sort_values([by, name_col], ascending=[False, True], kind="stable").reset_index(drop=True)


def kernel_summary(conn, kcols: Optional[Dict[str, np.ndarray]] = None) -> pd.DataFrame:
    """`nsys stats --report cuda_gpu_kern_sum`: per demangled ("templated") name, as nsys groups by default.
    With the per-launch columns already fetched, the statistics are computed from them (numpy, one
    sort: ~0.2 s at 1M launches instead of ~1.9 s of SQL window functions)."""
    name_col = "demangledName" if "demangledName" in columns(conn, KERNEL) else "shortName"
    if kcols is not None:
        stats = grouped_stats(kcols["demangled" if name_col == "demangledName" else "short"],
                              kcols["end"] - kcols["start"], extra=kcols["short"])
        stats = stats.rename(columns={"key": "nid", "extra": "sid"})
    else:
        stats = duration_stats(conn, f"SELECT {name_col} AS nid, shortName AS sid, end - start AS dur FROM {KERNEL}",
                               ["nid"], extra=", min(sid) AS sid")
    strings = _strings(conn, f"SELECT nid FROM (SELECT {name_col} AS nid FROM {KERNEL}) UNION "
                             f"SELECT shortName FROM {KERNEL}")
    out = _stats_frame(stats, "instances", "ns")
    out["name"] = _lookup(strings, stats["nid"].to_numpy())
    out["short_name"] = _lookup(strings, stats["sid"].to_numpy())
    return _sorted(out, "total_ns", "name")


def _enum_cte(conn, names: Set[str], table: str, known: Dict[int, str], alias: str) -> str:
    """The export's own enum table when it has one, else nsys' known values inline."""
    if table in names:
        return f"{alias}(id, label) AS (SELECT id, label FROM {table})"
    values = ", ".join(f"({i}, '{label}')" for i, label in known.items())
    return f"{alias}(id, label) AS (VALUES {values})"


def _memops_sql(conn, names: Set[str]) -> Optional[str]:
    """One row per memcpy/memset: op, dur, bytes, src, dst (labels), device, start, end."""
    parts = []
    if MEMCPY in names:
        parts.append(f"""SELECT '[CUDA memcpy ' || coalesce(ck.label, 'kind ' || m.copyKind) || ']' AS op,
                             m.end - m.start AS dur, m.bytes AS bytes,
                             coalesce(sk.label, m.srcKind) AS src, coalesce(dk.label, m.dstKind) AS dst
                         FROM {MEMCPY} m LEFT JOIN copy_kind ck ON ck.id = m.copyKind
                         LEFT JOIN mem_kind sk ON sk.id = m.srcKind LEFT JOIN mem_kind dk ON dk.id = m.dstKind""")
    if MEMSET in names:
        has_kind = "memKind" in columns(conn, MEMSET)
        dst = "coalesce(dk.label, s.memKind)" if has_kind else "''"
        join = "LEFT JOIN mem_kind dk ON dk.id = s.memKind" if has_kind else ""
        parts.append(f"""SELECT '[CUDA memset]' AS op, s.end - s.start AS dur, s.bytes AS bytes, '' AS src,
                             {dst} AS dst FROM {MEMSET} s {join}""")
    if not parts:
        return None
    ctes = ", ".join([_enum_cte(conn, names, "ENUM_CUDA_MEMCPY_OPER", MEMCPY_KINDS, "copy_kind"),
                      _enum_cte(conn, names, "ENUM_CUDA_MEM_KIND", MEM_KINDS, "mem_kind")])
    return f"WITH {ctes} SELECT * FROM ({' UNION ALL '.join(parts)})"


def memory_summaries(conn, names: Set[str]) -> Dict[str, pd.DataFrame]:
    """cuda_gpu_mem_time_sum and cuda_gpu_mem_size_sum (per operation), plus bytes and time by
    source/destination memory kind (pageable vs pinned host memory is the usual lever)."""
    src = _memops_sql(conn, names)
    if src is None:
        return {}
    by_time = duration_stats(conn, src, ["op"])
    time_sum = _stats_frame(by_time, "count", "ns")
    time_sum["operation"] = by_time["op"]
    by_size = duration_stats(conn, src, ["op"], value="bytes")
    size_sum = _stats_frame(by_size, "count", "bytes")
    size_sum["operation"] = by_size["op"]
    cur = conn.execute(f"""SELECT op, CAST(src AS TEXT), CAST(dst AS TEXT), count(*), sum(bytes), sum(dur)
                           FROM ({src}) GROUP BY 1, 2, 3""")
    kinds = pd.DataFrame(cur.fetchall(), columns=["operation", "src_kind", "dst_kind", "count", "total_bytes",
                                                  "total_ns"])
    kinds["throughput_bytes_per_s"] = np.where(kinds["total_ns"] > 0,
                                               kinds["total_bytes"] * 1e9 / kinds["total_ns"].clip(lower=1), math.nan)
    return {"cuda_gpu_mem_time_sum": _sorted(time_sum, "total_ns", "operation"),
            "cuda_gpu_mem_size_sum": _sorted(size_sum, "total_bytes", "operation"),
            "cuda_gpu_mem_kind_sum": _sorted(kinds, "total_bytes", "operation")}


def api_summary(conn, api: Optional[tuple] = None) -> pd.DataFrame:
    """`nsys stats --report cuda_api_sum`: CUDA runtime and driver calls per name (from the fetched
    (start, end, globalTid, correlation, nameId) arrays when given)."""
    if api is not None:
        stats = grouped_stats(api[4], api[1] - api[0]).rename(columns={"key": "nid"})
    else:
        stats = duration_stats(conn, f"SELECT nameId AS nid, end - start AS dur FROM {RUNTIME}", ["nid"])
    strings = _strings(conn, f"SELECT nameId FROM {RUNTIME}")
    out = _stats_frame(stats, "num_calls", "ns")
    out["name"] = _lookup(strings, stats["nid"].to_numpy())
    out["api"] = [_API_VERSION_TAG.sub("", n) for n in out["name"]]
    return _sorted(out, "total_ns", "name")


# ---------------------------------------------------------------- NVTX phases

def _nvtx_ranges_sql(conn) -> str:
    """Closed NVTX push/pop and start/end ranges with their text (inline or via StringIds)."""
    cols = columns(conn, NVTX)
    if "text" in cols and "textId" in cols:
        text, join = "coalesce(n.text, s.value)", "LEFT JOIN StringIds s ON s.id = n.textId"
    elif "textId" in cols:
        text, join = "s.value", "LEFT JOIN StringIds s ON s.id = n.textId"
    else:
        text, join = "n.text", ""
    domain = "coalesce(n.domainId, 0)" if "domainId" in cols else "0"
    return f"""SELECT n.rowid AS rid, n.start AS start, n.end AS end, n.globalTid AS tid,
                      coalesce({text}, '') AS name, {domain} AS domain, n.eventType AS etype
               FROM {NVTX} n {join}
               WHERE n.eventType IN ({', '.join(map(str, NVTX_STYLES))}) AND n.end IS NOT NULL"""


def _nvtx_domains(conn) -> Dict[int, str]:
    cols = columns(conn, NVTX)
    text = "coalesce(n.text, s.value)" if "textId" in cols else "n.text"
    join = "LEFT JOIN StringIds s ON s.id = n.textId" if "textId" in cols else ""
    if "domainId" not in cols:
        return {}
    rows = conn.execute(f"SELECT n.domainId, {text} FROM {NVTX} n {join} "
                        f"WHERE n.eventType = {NVTX_DOMAIN_CREATE}").fetchall()
    return {int(d): t or "" for d, t in rows if d is not None}


def _materialise_ranges(conn) -> None:
    """Temp tables: range texts -> integer ids, and the closed ranges keyed by those ids, so grouping
    and joining sort integers instead of texts (PyTorch's NVTX texts run to a kilobyte)."""
    ranges = _nvtx_ranges_sql(conn)
    for table in ("tbh_name", "tbh_range"):
        conn.execute(f"DROP TABLE IF EXISTS temp.{table}")
    conn.execute("CREATE TEMP TABLE tbh_name (id INTEGER PRIMARY KEY, name TEXT UNIQUE)")
    conn.execute(f"INSERT OR IGNORE INTO tbh_name (name) SELECT name FROM ({ranges})")
    # rid as the primary key: the projection's GROUP BY rid then walks the table in order, no sort.
    conn.execute("CREATE TEMP TABLE tbh_range (rid INTEGER PRIMARY KEY, start, end, tid, nid, domain, etype)")
    conn.execute(f"""INSERT INTO tbh_range SELECT g.rid, g.start, g.end, g.tid, t.id, g.domain, g.etype
                     FROM ({ranges}) g JOIN tbh_name t ON t.name = g.name""")


def _build_launch_index(conn) -> None:
    """Temp table (memory): per kernel, the launching API call's thread and start, indexed for range joins.

    The call is matched on correlationId within the same process (ids restart per process).  The
    larger table is scanned and SQLite's automatic index built on the smaller (5x faster at 1M kernels).
    """
    n_kernels = conn.execute(f"SELECT count(*) FROM {KERNEL}").fetchone()[0]
    n_calls = conn.execute(f"SELECT count(*) FROM {RUNTIME}").fetchone()[0]
    order = f"{RUNTIME} r CROSS JOIN {KERNEL} k" if n_calls >= n_kernels else f"{KERNEL} k CROSS JOIN {RUNTIME} r"
    conn.execute("DROP TABLE IF EXISTS temp.tbh_launch")
    conn.execute(f"""CREATE TEMP TABLE tbh_launch AS
                     SELECT r.globalTid AS tid, r.start AS api_start, k.start AS kstart, k.end AS kend
                     FROM {order}
                       ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24)""")
    conn.execute("CREATE INDEX temp.tbh_launch_tid ON tbh_launch(tid, api_start, kstart, kend)")  # covering


def nvtx_projection(conn) -> pd.DataFrame:
    """Per range (nid, domain, etype): kernels whose launch call started inside an instance of the
    range on the same thread (nsys' nvtx_gpu_proj_sum rule), their summed GPU time, and the
    projected GPU span (first kernel start to last kernel end, per instance, summed)."""
    _build_launch_index(conn)
    cur = conn.execute("""
        WITH per AS (
            SELECT g.nid, g.domain, g.etype, count(l.kstart) AS k, total(l.kend - l.kstart) AS gpu,
                   max(l.kend) - min(l.kstart) AS span
            FROM tbh_range g LEFT JOIN tbh_launch l
              ON l.tid = g.tid AND l.api_start >= g.start AND l.api_start < g.end
            GROUP BY g.rid)
        SELECT nid, domain, etype, sum(k), CAST(sum(gpu) AS INTEGER), coalesce(sum(span), 0)
        FROM per GROUP BY 1, 2, 3""")
    out = pd.DataFrame(cur.fetchall(), columns=["nid", "domain", "etype", "kernels", "gpu_time_ns", "gpu_span_ns"])
    # The launch index (a row per kernel plus its index, ~100 MB at 1M kernels) is used only here:
    # dropped now rather than held in SQLite's memory until the connection closes.
    conn.execute("DROP TABLE IF EXISTS temp.tbh_launch")
    return out


def nvtx_phases(conn, names: Set[str]) -> Optional[pd.DataFrame]:
    """NVTX ranges per (domain, name, style): instances and CPU wall time as `nsys stats --report
    nvtx_sum` gives them, plus the GPU time of the kernels launched inside them."""
    _materialise_ranges(conn)
    keys = ["nid", "domain", "etype"]
    stats = duration_stats(conn, "SELECT nid, domain, etype, end - start AS dur FROM tbh_range", keys)
    if stats.empty:
        return None
    out = _stats_frame(stats, "instances", "ns")
    out[keys] = stats[keys]
    if KERNEL in names and RUNTIME in names:
        out = out.merge(nvtx_projection(conn), on=keys, how="left")
    else:
        out["kernels"], out["gpu_time_ns"], out["gpu_span_ns"] = 0, 0, 0
    texts = dict(conn.execute("SELECT id, name FROM tbh_name").fetchall())
    domains = _nvtx_domains(conn)
    out["name"] = [texts[i] for i in out.pop("nid")]
    out["domain"] = [domains.get(int(d), "" if int(d) == 0 else f"domain {d}") for d in out["domain"]]
    out["style"] = out.pop("etype").map(NVTX_STYLES)
    for col in ("kernels", "gpu_time_ns", "gpu_span_ns"):
        out[col] = out[col].fillna(0).astype("int64")
    return _sorted(out, "total_ns", "name")


# ---------------------------------------------------------------- GPU busy time

def _capture_span(conn, names: Set[str]) -> Optional[tuple]:
    """First to last CUDA event (API call or GPU operation).  ANALYSIS_DETAILS is not used: its
    start/stop are on a different clock than the events in some exports (2022.4, 2026.1)."""
    parts = [f"SELECT min(start) AS s, max(end) AS e FROM {t}" for t in (RUNTIME, KERNEL, MEMCPY, MEMSET)
             if t in names]
    if not parts:
        return None
    row = conn.execute(f"SELECT min(s), max(e) FROM ({' UNION ALL '.join(parts)})").fetchone()
    return None if row[0] is None else (row[0], row[1])


def _memop_intervals(conn, names: Set[str]) -> pd.DataFrame:
    frames = []
    for table, kind in ((MEMCPY, "memcpy"), (MEMSET, "memset")):
        if table not in names:
            continue
        n = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        m = _int_matrix(conn, f"SELECT deviceId, start, end FROM {table}", 3, n)
        frames.append(pd.DataFrame({"device": m[:, 0], "kind": kind, "start_ns": m[:, 1], "end_ns": m[:, 2]}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _kernel_intervals(kernels: pd.DataFrame, kcols=None) -> pd.DataFrame:
    """Kernel intervals for gpu_activity: from the fetched int64 columns when there are some (no
    float -> int copies of the kernels table), else from the table."""
    if kcols is not None:
        return pd.DataFrame({"device": kcols["device"], "kind": "kernel", "start_ns": kcols["start"],
                             "end_ns": kcols["end"]})
    return pd.DataFrame({"device": kernels["device"].to_numpy("int64"), "kind": "kernel",
                         "start_ns": kernels["start_ns"].to_numpy("int64"),
                         "end_ns": kernels["end_ns"].to_numpy("int64")})


def activity_summary(conn, names: Set[str], kernels: Optional[pd.DataFrame], kcols=None) -> Optional[pd.DataFrame]:
    span = _capture_span(conn, names)
    if span is None:
        return None
    ops = [_kernel_intervals(kernels, kcols), _memop_intervals(conn, names)]
    intervals = pd.concat([o for o in ops if len(o)], ignore_index=True) if any(len(o) for o in ops) else None
    return None if intervals is None else gpu_activity(intervals, span)


# ---------------------------------------------------------------- entry point

def units_of(df: pd.DataFrame) -> Dict[str, str]:
    """Column units from the name suffix (longest suffix wins)."""
    units = {}
    for col in df.columns:
        for suffix in sorted(SUMMARY_UNITS, key=len, reverse=True):
            if col.endswith(suffix):
                units[col] = SUMMARY_UNITS[suffix]
                break
    return units


def read_summaries(conn, names: Set[str], kernels: Optional[pd.DataFrame], kcols=None, api=None) -> Dict[str, pd.DataFrame]:
    out: Dict[str, pd.DataFrame] = {}
    if KERNEL in names:
        out["cuda_gpu_kern_sum"] = kernel_summary(conn, kcols)
    out.update(memory_summaries(conn, names))
    if RUNTIME in names:
        out["cuda_api_sum"] = api_summary(conn, api)
    if NVTX in names:
        phases = nvtx_phases(conn, names)
        if phases is not None:
            out["nvtx_phases"] = phases
    activity = activity_summary(conn, names, kernels, kcols)
    if activity is not None:
        out["gpu_activity"] = activity
    out = {name: df for name, df in out.items() if len(df)}  # "absent when there is no data", as documented
    for df in out.values():
        df.attrs["units"] = units_of(df)
    return out


def memcpy_labels(conn, names: Set[str]) -> Dict[int, str]:
    """copyKind -> label, from the export's own enum table when it has one."""
    if "ENUM_CUDA_MEMCPY_OPER" in names:
        return {int(i): label for i, label in conn.execute("SELECT id, label FROM ENUM_CUDA_MEMCPY_OPER")}
    return dict(MEMCPY_KINDS)


def read_timeline_and_idle(conn, names: Set[str], devices, kcols, kernel_name: Optional[np.ndarray],
                           summaries: Dict[str, pd.DataFrame], api=None):
    """The capture's Timeline; adds the idle-time summaries (gaps, utilisation, attribution).
    kernel_name: the kernels table's "name" per launch (None without kernels)."""
    timeline, extras = nsys_timeline.read_timeline(
        conn, names, devices, kcols, kernel_name if kcols is not None else None,
        memcpy_labels(conn, names), NVTX in names, api)
    span = _capture_span(conn, names)
    if timeline is not None and span is not None:
        idle = nsys_timeline.idle_summaries(conn, names, timeline, extras, span)
        for name, df in idle.items():
            if len(df):
                df.attrs["units"] = units_of(df)
                summaries[name] = df
    return timeline


def _notes(meta: Dict[str, str], names: Set[str], kernels: pd.DataFrame) -> List[str]:
    notes = []
    if meta:
        notes.append(f"Nsight Systems {meta.get('EXPORT_PRODUCT_VERSION', '?')} SQLite export, "
                     f"schema {meta.get('EXPORT_SCHEMA_VERSION', '?')}")
    else:
        notes.append("this export has no EXPORT_META_DATA / META_DATA_EXPORT table (nsys 2021.x and older write none): "
                     "the Nsight Systems version is unknown")
    if not any(n.startswith("CUPTI_ACTIVITY_KIND_") for n in names):
        notes.append("no CUDA trace in this export (no CUPTI_ACTIVITY_KIND_* tables): it was captured without "
                     "CUDA tracing (`nsys profile -t cuda`) or the application launched no GPU work, "
                     "so the profile is empty")
    elif kernels.empty:
        notes.append("CUDA was traced but no kernel ran (no rows in CUPTI_ACTIVITY_KIND_KERNEL)")
    if len(kernels):
        notes.append("Nsight Systems traces launches, it does not read hardware counters: throughput, "
                     "occupancy and FLOP columns are empty (profile the kernels with Nsight Compute for those)")
    return notes


def _read_tables(conn, names: Set[str], devices):
    """(kernels, summaries, timeline).  The summaries and the timeline are built from the fetched
    int64 columns first and the kernels table (~424 MB at 1M launches, 53 columns) last, once the
    columns it is built from are the only intermediates left (1M kernels: peak ~990 -> ~810 MB)."""
    if KERNEL not in names:  # no kernels: an empty table, and the summaries cover memory operations only
        kernels = normalise_kernels([])
        api = nsys_timeline.fetch_api(conn) if RUNTIME in names else None
        summaries = read_summaries(conn, names, kernels, None, api)
        return kernels, summaries, read_timeline_and_idle(conn, names, devices, None, None, summaries, api)
    kcols = kernel_columns(conn)
    strings = kernel_strings(conn)
    api = nsys_timeline.fetch_api(conn) if RUNTIME in names else None
    summaries = read_summaries(conn, names, None, kcols, api)
    timeline = read_timeline_and_idle(conn, names, devices, kcols, kernel_names(strings, kcols), summaries, api)
    del api  # the timeline holds what it needs: the kernels table comes last, on its own
    frame = kernel_frame(kcols, strings)
    del kcols  # 14 int64 columns (112 MB at 1M) freed before the 35 absent columns are added
    return normalise_kernels(frame, copy=False), summaries, timeline


def read_nsys_sqlite(path) -> Profile:
    path = Path(path)
    check_size(path)
    conn = connect(path)
    try:
        names = table_names(conn)
        if not is_nsys_schema(names):
            raise InputError(path, "SQLite file but not an Nsight Systems export (no StringIds with "
                             "CUPTI_ACTIVITY_KIND_* / TARGET_INFO_* tables)",
                             "export the report with `nsys export --type sqlite REPORT.nsys-rep`")
        meta = export_metadata(conn, names)
        devices = read_devices(conn, names)
        try:
            kernels, summaries, timeline = _read_tables(conn, names, devices)
        except (sqlite3.DatabaseError, ValueError) as e:
            raise InputError(path, f"damaged or unexpected Nsight Systems export ({e})",
                             "re-run `nsys export --type sqlite`") from None
    finally:
        conn.close()
    provenance = Provenance(tool="nsys", tool_version=meta.get("EXPORT_PRODUCT_VERSION", ""),
                            source_path=str(path.resolve()), source_sha256=sha256_file(path),
                            source_format="nsys-sqlite")
    return Profile(provenance, devices, kernels, notes=_notes(meta, names, kernels), summaries=summaries,
                   timeline=timeline)
