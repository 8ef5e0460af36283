"""Nsight Systems SQLite export reader (`nsys export --type sqlite`), nsys 2020.5 to 2026.1.

The export is opened read-only and queried in place.  The per-row columns of the big tables
(kernels, API calls, NVTX ranges) are fetched once as int64 arrays through sqlite_columns (its C
reader, else SQLite renders them as text and numpy parses it: no Python object per row), on two
threads; names are resolved once per distinct string id.  This module fetches and builds the
kernels table; nsys_summaries.py makes the `nsys stats` summaries and nsys_timeline.py the
Timeline from the same arrays; nsys_schema.py names the tables.  Busy / idle time and the NVTX
projection are the analysis' (tb_hwprof/analysis/gpu_trace.py), from the Timeline.

Schemas differ across versions: tables exist only when they had rows, metadata
lives in EXPORT_META_DATA (2022.x), META_DATA_EXPORT (2024+) or nowhere (older),
GPU info in TARGET_INFO_GPU (`id` or `deviceId`) and/or TARGET_INFO_CUDA_GPU,
and `mangledName` only in newer kernel tables.  Every query is built from the
columns actually present.

A damaged export is one InputError naming the file: the columns relied on are checked once up
front (nsys_schema.REQUIRED_COLUMNS), SQLite's own errors are caught where reading starts, and
values no export holds (a NULL or text in an integer column, an end before its start, a stream id
CUDA never gives) are refused naming table, column and row -- vectorised on the big tables.
"""
from __future__ import annotations

import dataclasses
import math
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set

import numpy as np
import pandas as pd

from ...core import columnar
from ...core.columnar import distinct
from ...core.errors import InputError
from ...core.model import Device, Peak, Profile, Provenance, normalise_kernels
from . import nsys_timeline
from ..common import sqlite_columns
from ..common import SQLITE_MAGIC, sha256_file
from ..common.csvtext import one_line
from .nsys_schema import (KERNEL, META_TABLES, NVTX, NVTX_RANGE_ROWS, REEXPORT, RUNTIME, check_bounds,
                          check_durations, checked, columns, connect, lookup, memcpy_labels, schema_problem,
                          string_map, strings_of, table_names)
from .nsys_summaries import kernel_summary, read_summaries


# ---------------------------------------------------------------- the export

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


# ---------------------------------------------------------------- metadata and devices

def export_metadata(conn, names: Set[str]) -> Dict[str, str]:
    for table in META_TABLES:
        if table in names:
            rows = conn.execute(f"SELECT rowid, name, value FROM {table}").fetchall()
            return {k: v for _, k, v in checked(table, rows, ((str,), (str, type(None))), ("name", "value"))}
    return {}


NUMBER_OR_NULL, TEXT_OR_NULL = (int, float, type(None)), (str, type(None))
# The device columns read, with the Python types their values may have (any other is damage).
DEVICE_COLUMNS = {"id": (int,), "deviceId": (int,), "name": TEXT_OR_NULL, **{c: NUMBER_OR_NULL for c in (
    "computeMajor", "computeMinor", "clockRate", "smCount", "memoryBandwidth", "computeCapabilityMajor",
    "computeCapabilityMinor", "coreClockRate", "numMultiprocessors", "globalMemoryBandwidth",
    # launch limits (GPU_LAUNCH_LIMITS, CUDA_GPU_LAUNCH_LIMITS)
    "threadsPerWarp", "maxThreadsPerBlock", "maxWarpsPerSm", "maxBlocksPerSm", "maxRegistersPerSm",
    "maxRegistersPerBlock", "maxShmemPerSm", "maxShmemPerBlockOptin", "numThreadsPerWarp", "maxWarpsPerMultiprocessor",
    "maxBlocksPerMultiprocessor", "maxRegistersPerMultiprocessor", "maxSharedMemoryPerMultiprocessor")}}


def _rows(conn, table: str) -> List[dict]:
    """The rows of a device table, as dicts of the DEVICE_COLUMNS it has, their types checked."""
    present = [c for c in columns(conn, table) if c in DEVICE_COLUMNS]
    rows = conn.execute(f'SELECT rowid, {", ".join(present)} FROM "{table}"').fetchall()
    checked(table, rows, tuple(DEVICE_COLUMNS[c] for c in present), tuple(present))
    devices = [dict(zip(present, r[1:])) for r in rows]
    # The same bounds as the kernels' deviceId (ID_BOUNDS): an id beyond them is a damaged row.
    check_bounds(conn, table, [np.array([d.get("id", d.get("deviceId", 0)) for d in devices], np.int64)],
                 "id" if "id" in present else "deviceId")
    return devices


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
                  peaks=_bandwidth_peak(_num(row.get("memoryBandwidth")), "TARGET_INFO_GPU.memoryBandwidth"),
                  **_launch_limits(row, GPU_LAUNCH_LIMITS))


# model.Device launch-limit field -> column of TARGET_INFO_GPU (2021+) / TARGET_INFO_CUDA_GPU (2020.x).
GPU_LAUNCH_LIMITS = {"warp_size": "threadsPerWarp", "max_threads_per_block": "maxThreadsPerBlock",
                     "max_warps_per_sm": "maxWarpsPerSm", "max_blocks_per_sm": "maxBlocksPerSm",
                     "registers_per_sm": "maxRegistersPerSm", "registers_per_block": "maxRegistersPerBlock",
                     "shared_mem_per_sm": "maxShmemPerSm", "shared_mem_per_block_optin": "maxShmemPerBlockOptin"}
CUDA_GPU_LAUNCH_LIMITS = {"warp_size": "numThreadsPerWarp", "max_threads_per_block": "maxThreadsPerBlock",
                          "max_warps_per_sm": "maxWarpsPerMultiprocessor",
                          "max_blocks_per_sm": "maxBlocksPerMultiprocessor",
                          "registers_per_sm": "maxRegistersPerMultiprocessor", "registers_per_block": "maxRegistersPerBlock",
                          "shared_mem_per_sm": "maxSharedMemoryPerMultiprocessor"}


def _launch_limits(row: dict, columns: Dict[str, str]) -> Dict[str, Optional[int]]:
    """The SM's launch limits among a GPU info row's columns (None where the export lacks one)."""
    values = {field: _num(row.get(column)) for field, column in columns.items()}
    return {field: int(v) if v else None for field, v in values.items()}


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
    for field, limit in _launch_limits(row, CUDA_GPU_LAUNCH_LIMITS).items():
        setattr(dev, field, getattr(dev, field) or limit)
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

class BadShape(ValueError):
    """A packed launch shape no CUDA kernel has (a dimension of 0, or negative): raised by
    kernel_frame, given its table row by _read_tables."""

    def __init__(self, field: str, packed: int):
        self.field, self.packed = field, packed
        super().__init__(f"{field} {packed}")


def _is_cuda_shape(p: int) -> bool:
    """Absent (-1), or every dimension at least 1 (x < 2^31 and y, z < 2^16 hold by the packing)."""
    return p == -1 or (p >> 32 >= 1 and (p >> 16) & 0xFFFF >= 1 and p & 0xFFFF >= 1)


def _dim_labels(packed: np.ndarray, field: str) -> np.ndarray:
    """"(x, y, z)" per launch ("" where absent), formatted and checked once per distinct shape."""
    codes, uniques = pd.factorize(packed)  # a hash of one int64 per launch: no per-row Python object
    bad = next((int(p) for p in uniques if not _is_cuda_shape(int(p))), None)
    if bad is not None:
        raise BadShape(field, bad)
    labels = np.array(["" if p < 0 else f"({p >> 32}, {(p >> 16) & 0xFFFF}, {p & 0xFFFF})" for p in uniques],
                      dtype=object)
    return labels[codes] if len(codes) else np.array([], dtype=object)


def _dim_product(packed: np.ndarray, out: np.ndarray) -> None:
    """x * y * z of each packed shape into `out` (NaN where absent)."""
    np.multiply((packed >> 32) * ((packed >> 16) & 0xFFFF), packed & 0xFFFF, out=out, casting="unsafe")
    out[packed < 0] = math.nan


# (expression, columns it needs); -1 stands for "absent".  CUDA caps gridX at 2^31-1 and
# gridY/gridZ/block dims at 65535, so a shape packs into one int64 as x<<32 | y<<16 | z.  (A y or z
# above 65535 spills into its neighbour unseen: checking each in SQL costs ~0.25 s per 1M launches.)
SHAPES = {field: f"({field}X << 32) | ({field}Y << 16) | {field}Z" for field in ("grid", "block")}
KERNEL_SELECT = [
    ("start", ()), ("end", ()), ("deviceId", ()), ("coalesce(contextId, -1)", ("contextId",)),
    ("coalesce(streamId, -1)", ("streamId",)), ("coalesce(correlationId, -1)", ("correlationId",)),
    ("coalesce(shortName, -1)", ("shortName",)), ("coalesce(demangledName, -1)", ("demangledName",)),
    ("coalesce(mangledName, -1)", ("mangledName",)), ("coalesce(registersPerThread, -1)", ("registersPerThread",)),
    (f"coalesce({SHAPES['grid']}, -1)", ("gridX", "gridY", "gridZ")),
    (f"coalesce({SHAPES['block']}, -1)", ("blockX", "blockY", "blockZ")),
    ("coalesce(staticSharedMemory + dynamicSharedMemory, -1)", ("staticSharedMemory", "dynamicSharedMemory")),
    ("coalesce(globalPid, 0)", ("globalPid",)),  # the process, as nsys_timeline.pid_of() (flows pair by pid + id)
]
KERNEL_FIELDS = ["start", "end", "device", "context", "stream", "correlation", "short", "demangled", "mangled",
                 "registers", "grid", "block", "shared", "pid"]


def kernel_exprs(present: Sequence[str]) -> List[str]:
    """The KERNEL_SELECT expressions this export's kernel table can answer ("-1" for the others)."""
    return [expr if all(c in present for c in needs) else "-1" for expr, needs in KERNEL_SELECT]


def kernel_arrays(cols: Sequence[np.ndarray]) -> Dict[str, np.ndarray]:
    """KERNEL_FIELDS from the columns of kernel_exprs() in rowid order, sorted as ORDER BY start, rowid."""
    start = cols[0]
    if start.size < 2 or (start[1:] >= start[:-1]).all():  # exports mostly store kernels in start order
        return dict(zip(KERNEL_FIELDS, cols))
    order = np.argsort(start, kind="stable")
    return {f: c[order] for f, c in zip(KERNEL_FIELDS, cols)}


def kernel_strings(conn, c: Dict[str, np.ndarray]) -> pd.Series:
    """The StringIds values the kernel table's name columns refer to (one per distinct id)."""
    ids = np.concatenate([distinct(c[f]) for f in ("short", "demangled", "mangled")])
    return strings_of(conn, ids[ids >= 0])


# Float columns of the kernels table straight from a kernel_arrays() field; -1 means absent there.
FLOAT_FROM_FIELD = {"device": "device", "context": "context", "stream": "stream", "registers_per_thread": "registers",
                    "shared_mem_bytes": "shared", "start_ns": "start", "end_ns": "end", "correlation_id": "correlation"}
ABSENT_IF_NEGATIVE = ("context", "stream", "registers_per_thread", "shared_mem_bytes", "correlation_id")


def kernel_frame(c: Dict[str, np.ndarray], strings: pd.Series, name: np.ndarray) -> pd.DataFrame:
    """The columns an nsys export holds, from kernel_arrays() and the launches' names
    (kernel_names()); normalise_kernels adds the rest.

    Consumes `c`: each array is dropped once copied, so the table and all the columns it comes
    from never exist at once (~110 MB of peak at 1M launches).  The float columns are written
    straight into one 2-D block, the frame's own storage (pandas would copy them once more to
    consolidate them)."""
    n = c["start"].size
    floats = ["device", "context", "stream", "duration_ns", "grid_size", "block_size", "registers_per_thread",
              "shared_mem_bytes", "start_ns", "end_ns", "correlation_id"]
    block = np.empty((len(floats), n))
    row = dict(zip(floats, block))
    np.subtract(c["end"], c["start"], out=row["duration_ns"], casting="unsafe")
    _dim_product(c["grid"], row["grid_size"])
    _dim_product(c["block"], row["block_size"])
    for column, field in FLOAT_FROM_FIELD.items():
        values = c.pop(field)
        row[column][:] = values
        if column in ABSENT_IF_NEGATIVE:
            row[column][values < 0] = math.nan
        del values
    frame = pd.DataFrame(block.T, columns=floats, copy=False)
    text = {"name": name, "demangled_name": lookup(strings, c.pop("demangled")),
            "mangled_name": lookup(strings, c.pop("mangled")), "grid": _dim_labels(c.pop("grid"), "grid"),
            "block": _dim_labels(c.pop("block"), "block")}
    del c["short"]
    for at, (name, values) in enumerate(text.items()):  # object dtype: pandas 3 would infer its slower str
        frame.insert(at, name, pd.Series(values, dtype=object, copy=False))
    frame.insert(0, "launch_id", np.arange(n, dtype=np.int64))
    frame.insert(1, "range_id", np.zeros(n, dtype=np.int64))  # one capture = one range
    return frame


# ---------------------------------------------------------------- NVTX ranges

def nvtx_int_exprs(conn) -> List[str]:
    """The integer columns of the closed ranges: start, end, thread, text id, domain, style."""
    cols = columns(conn, NVTX)
    return ["start", "end", "coalesce(globalTid, -1)", "coalesce(textId, -1)" if "textId" in cols else "-1",
            "coalesce(domainId, 0)" if "domainId" in cols else "0", "eventType"]


def nvtx_columns(conn) -> tuple:
    """(the closed ranges' nvtx_int_exprs() columns, their inline texts as text_codes(): None
    without a text column); char(1) stands for "no inline text" (NULL: the StringIds text is used)."""
    ints = sqlite_columns.int_columns(conn, NVTX, nvtx_int_exprs(conn), NVTX_RANGE_ROWS, own_connection=True)
    texts = sqlite_columns.text_codes(conn, NVTX, "coalesce(text, char(1))", NVTX_RANGE_ROWS, own_connection=True) \
        if "text" in columns(conn, NVTX) else None
    return ints, texts


def nvtx_ranges(conn) -> Dict[str, np.ndarray]:
    """Closed NVTX push/pop and start/end ranges, in rowid order: start, end, tid, nid, domain and
    etype as int64 arrays, "nid" indexing "names" (each distinct text once, in order of first
    appearance: the inline text, else StringIds via textId)."""
    (start, end, tid, tids, dom, etype), texts = nvtx_columns(conn)
    check_durations(conn, NVTX, start, end, NVTX_RANGE_ROWS)
    codes, labels = texts if texts is not None else (np.zeros(start.size, np.int64), ["\1"])
    labels = list(labels)
    missing = codes == labels.index("\1") if "\1" in labels else np.zeros(start.size, dtype=bool)
    if missing.any():
        ids, inverse = columnar.codes(tids[missing])
        by_id = string_map(conn, ids[ids >= 0]) if "textId" in columns(conn, NVTX) else {}
        codes[missing] = len(labels) + inverse
        labels += [by_id.get(i, "") for i in ids.tolist()]
    # One id per distinct string (an inline text may equal a StringIds one), numbered by first appearance.
    index: Dict[str, int] = {}
    same = np.array([index.setdefault(label, len(index)) for label in labels], dtype=np.int64)
    nid, first = pd.factorize(same[codes])
    return {"start": start, "end": end, "tid": tid, "nid": nid.astype(np.int64), "domain": dom, "etype": etype,
            "names": np.array(list(index), dtype=object)[first]}


# ---------------------------------------------------------------- timeline

def _timeline_job(path: Path, names: Set[str], devices, fetched: "Fetched", kernel_name):
    """The capture's Timeline, built on a connection of its own (kernel_name: the kernels table's
    "name" per launch, None without kernels)."""
    def job():
        conn = connect(path)
        try:
            return nsys_timeline.read_timeline(conn, names, devices, fetched.kernels, kernel_name,
                                               memcpy_labels(conn, names), fetched.ranges, fetched.api)
        finally:
            conn.close()
    return job


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


# ---------------------------------------------------------------- fetch and entry point

# globalTid is nullable in every schema (2022.4 - 2026.1): a call without one goes to thread 0, as the
# kernel, NVTX and OS runtime rows' ids already do.
API_EXPRS = ["start", "end", "coalesce(globalTid, 0)", "coalesce(correlationId, -1)", "nameId"]


@dataclasses.dataclass
class Fetched:
    """The per-row columns pulled out of the export once, shared by the summaries, the timeline and
    the kernels table."""

    kernels: Optional[Dict[str, np.ndarray]] = None  # KERNEL_FIELDS, in GPU start order
    api: Optional[tuple] = None  # runtime/driver calls: (start, end, globalTid, correlation, nameId)
    ranges: Optional[Dict[str, np.ndarray]] = None  # closed NVTX ranges: nvtx_ranges()
    sha256: str = ""


def _fetch_rows(pool, conn, path: Path, table: str, exprs: List[str]):
    """`exprs` of every row of `table`, fetched by every worker (a stretch of rows each): the
    function that waits for them."""
    return sqlite_columns.columns_in_parts(pool, path, table, exprs, sqlite_columns.rowid_span(conn, table))


def _kernel_plan(conn, names: Set[str]):
    """(KERNEL_SELECT expressions, the indices of those the export can answer)."""
    exprs = kernel_exprs(columns(conn, KERNEL)) if KERNEL in names else []
    return exprs, [i for i, e in enumerate(exprs) if e != "-1"]


def _assemble_kernels(exprs: List[str], asked: List[int], cols: List[np.ndarray]) -> Dict[str, np.ndarray]:
    got = dict(zip(asked, cols))
    n = got[0].size
    kernels = kernel_arrays([got.get(i, np.full(n, -1, np.int64)) for i in range(len(exprs))])
    # The pid out of globalPid here, not in SQL: SQL would shift a text (damage) to 0 unseen.
    kernels["pid"] = nsys_timeline.pid_of(kernels["pid"])
    return kernels


def _read_tables(conn, path: Path, names: Set[str], devices):
    """(kernels, summaries, timeline, sha256): the per-row columns fetched once, then the summaries
    and the timeline from them, and the kernels table last, once the columns it is built from are
    the only intermediates left (building it earlier, beside the timeline's, costs ~300 MB of peak
    at 1M launches)."""
    fetched, strings, kernel_sum = _fetch(conn, path, names)
    name = kernel_names(strings, fetched.kernels) if fetched.kernels is not None else None
    summaries, timeline = _summaries_and_timeline(conn, path, names, devices, fetched, name, kernel_sum)
    kcols, sha = fetched.kernels, fetched.sha256
    del fetched  # the timeline holds what it needs: the kernels table comes last, on its own
    try:
        frame = [] if kcols is None else kernel_frame(kcols, strings, name)
    except BadShape as e:
        row = conn.execute(f"SELECT rowid FROM {KERNEL} WHERE {SHAPES[e.field]} = ? LIMIT 1", (e.packed,)).fetchone()
        raise sqlite_columns.DamagedValues(KERNEL, f"{e.field}X, {e.field}Y, {e.field}Z", row[0] if row else None,
                                           "a launch shape no CUDA kernel has (a dimension below 1)") from None
    # kernel_frame gives its columns their final dtypes (no NaN in its text): only absent ones are added.
    table = normalise_kernels(frame, copy=False, sparse_absent=True, only=())
    return table, summaries, timeline, sha


def _fetch(conn, path: Path, names: Set[str]):
    """(Fetched, kernel names by string id, cuda_gpu_kern_sum).

    Two worker threads fetch the kernel rows (a half each), then the API calls (a half each) and
    the file's hash; meanwhile this thread reads the NVTX ranges and builds what needs only the
    kernels.  SQLite and hashlib release the GIL: both cores work."""
    exprs, asked = _kernel_plan(conn, names)
    with ThreadPoolExecutor(sqlite_columns.WORKERS, thread_name_prefix="tb-hwprof-nsys") as pool:
        kernel_cols = _fetch_rows(pool, conn, path, KERNEL, [exprs[i] for i in asked]) if asked else None
        api = _fetch_rows(pool, conn, path, RUNTIME, API_EXPRS) if RUNTIME in names else None
        sha = pool.submit(sha256_file, path)
        fetched = Fetched()
        if kernel_cols is not None:
            fetched.kernels = _assemble_kernels(exprs, asked, kernel_cols())
            check_durations(conn, KERNEL, fetched.kernels["start"], fetched.kernels["end"])
            check_bounds(conn, KERNEL, (fetched.kernels[f] for f in ("device", "context", "stream")))
        fetched.ranges = nvtx_ranges(conn) if NVTX in names else None
        strings, kernel_sum = _kernel_only(conn, fetched.kernels)
        fetched.api = tuple(api()) if api is not None else None
        if fetched.api is not None:
            check_durations(conn, RUNTIME, fetched.api[0], fetched.api[1])
        fetched.sha256 = sha.result()
    return fetched, strings, kernel_sum


def _summaries_and_timeline(conn, path: Path, names: Set[str], devices, fetched: Fetched, name, kernel_sum):
    """The summaries and the timeline, built side by side: the timeline on a second thread with a
    connection of its own (much of both is numpy sorting and copying, which releases the GIL).
    name: each kernel's name (kernel_names())."""
    with ThreadPoolExecutor(1, thread_name_prefix="tb-hwprof-timeline") as pool:
        timeline = pool.submit(_timeline_job(path, names, devices, fetched, name))
        summaries, range_rows = read_summaries(conn, names, fetched, kernel_sum)
        timeline = timeline.result()
    if timeline is not None and range_rows.size:  # the NVTX slices, in the ranges' order
        timeline.range_rows = (np.flatnonzero(timeline.slices["cat"] == nsys_timeline.CAT["nvtx"]), range_rows)
    return summaries, timeline


def _kernel_only(conn, kcols):
    """(names by string id, cuda_gpu_kern_sum) from the kernel columns alone."""
    if kcols is None:
        return None, None
    strings = kernel_strings(conn, kcols)
    return strings, kernel_summary(conn, kcols, strings)


def kernel_names(strings: pd.Series, c: Dict[str, np.ndarray]) -> np.ndarray:
    """The kernels table's "name" column (the timeline names its slices so too): the short name,
    the demangled one where there is none."""
    short = lookup(strings, c["short"])
    return np.where(short == "", lookup(strings, c["demangled"]), short)


def _read_export(conn, path: Path):
    """(metadata, table names, devices, kernels, summaries, timeline, sha256) of an open export."""
    names = table_names(conn)
    if not is_nsys_schema(names):
        raise InputError(path, "SQLite file but not an Nsight Systems export (no StringIds with "
                         "CUPTI_ACTIVITY_KIND_* / TARGET_INFO_* tables)",
                         "export the report with `nsys export --type sqlite REPORT.nsys-rep`")
    problem = schema_problem(conn, names)
    if problem:
        raise InputError(path, f"not a complete Nsight Systems export: {problem} (every nsys version writes it; "
                         "the file was edited or damaged)", REEXPORT)
    meta = export_metadata(conn, names)
    devices = read_devices(conn, names)
    return (meta, names, devices) + _read_tables(conn, path, names, devices)


def _sqlite_says(error: sqlite3.DatabaseError, limit: int = 200) -> str:
    """SQLite's message on one line, cut short: it may quote damaged text ("Could not decode ...
    with text '...'", "malformed database schema (...)"), newlines and all."""
    text = one_line(error)
    return text if len(text) <= limit else text[:limit] + "..."


def read_nsys_sqlite(path) -> Profile:
    path = Path(path)
    check_size(path)
    conn = connect(path)
    # Damage found anywhere in reading (SQLite's, its page check's, or values no export holds) is one
    # line naming the file.
    try:
        with sqlite_columns.pages_checked(path):
            meta, names, devices, kernels, summaries, timeline, sha = _read_export(conn, path)
    except sqlite3.DatabaseError as e:
        raise InputError(path, f"the SQLite file is damaged ({_sqlite_says(e)})", REEXPORT) from None
    except sqlite_columns.DamagedValues as e:
        raise InputError(path, f"damaged Nsight Systems export: {e}", REEXPORT) from None
    finally:
        conn.close()
    provenance = Provenance(tool="nsys", tool_version=meta.get("EXPORT_PRODUCT_VERSION", ""),
                            source_path=str(path.resolve()), source_sha256=sha,
                            source_format="nsys-sqlite")
    return Profile(provenance, devices, kernels, notes=_notes(meta, names, kernels), summaries=summaries,
                   timeline=timeline)


# ---------------------------------------------------------------- registry hooks (readers/__init__.py)
FORMATS = ("nsys-sqlite",)


def sniff(path: Path, head) -> Optional[str]:
    if head is None or not head.startswith(SQLITE_MAGIC):
        return None
    return "nsys-sqlite" if looks_like_nsys(path) else None  # the tables say which tool wrote it


def refuse(path: Path, head: bytes) -> None:
    """A SQLite file no reader claimed (neither nsys' nor rocprof's tables)."""
    if head.startswith(SQLITE_MAGIC):
        raise InputError(path, "SQLite database but not an Nsight Systems export (no StringIds with "
                         "CUPTI_ACTIVITY_KIND_* / TARGET_INFO_* tables) nor a rocprof database",
                         "pass an `nsys export --type sqlite` file, a rocpd / rocprof results.db, an Nsight "
                         "Compute report or `ncu --csv` output")


def read(path, fmt: str = "nsys-sqlite") -> Profile:
    return read_nsys_sqlite(path)
