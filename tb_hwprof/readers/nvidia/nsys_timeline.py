"""Part of the Nsight Systems SQLite reader: the capture's slices as a columnar Timeline (GPU
operations, CUDA API calls with their launch flows, NVTX ranges, OS runtime calls).  What the
analysis derives from it (busy and idle time, gaps, NVTX projection) is tb_hwprof/analysis/gpu_trace.py.

Rows come out of SQLite as integer tuples straight into numpy (one array per column, never one
Python object per row); names are resolved once per distinct string id.  Thread ids are nsys'
globalTid: pid = (globalTid >> 24) & 0xFFFFFF, tid = globalTid & 0xFFFFFF.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

import numpy as np
import pandas as pd

from ...core import columnar
from ..common import sqlite_columns
from ...core.model import SLICE_COLUMNS, TIMELINE_CATEGORIES, Device, Timeline, Track
from ..common.lanes import spread_over_lanes
from ..common.timeline_builder import GPU_PID_BASE, NameTable
from .nsys_schema import (MEMCPY, MEMSET, NVTX_START_END, OSRT, api_name, check_bounds, check_durations, checked,
                          string_map)

CAT = {name: code for code, name in enumerate(TIMELINE_CATEGORIES)}
PID_MASK = 0xFFFFFF


# ---------------------------------------------------------------- slices per category

def _gpu_ops(conn, names: Set[str], kernel_cols: Optional[dict], kernel_names: Optional[np.ndarray],
             table: NameTable, memcpy_labels: Dict[int, str]) -> List[dict]:
    """Kernels, then copies, then sets: one dict per table of slice columns (start, end, name, cat,
    bytes) plus the per-row stream_key, pid and corr(elation id), never concatenated (the
    timeline's slices are the only copy: the kernel part's start and end are the fetched arrays)."""
    parts = []
    if kernel_cols is not None and kernel_names is not None and kernel_names.size:
        c = kernel_cols
        codes, uniques = pd.factorize(kernel_names)
        parts.append(dict(start=c["start"], end=c["end"], name=table.codes(list(uniques), codes), cat=CAT["kernel"],
                          bytes=-1, stream_key=stream_key(c["device"], c["context"], c["stream"]),
                          pid=c["pid"], corr=c["correlation"]))
    for t, cat in ((MEMCPY, "memcpy"), (MEMSET, "memset")):
        if t not in names:
            continue
        kind = "coalesce(copyKind, 0)" if t == MEMCPY else "0"
        start, end, dev, ctx, stream, pid, corr, kinds, size = sqlite_columns.int_columns(conn, t, [
            "start", "end", "deviceId", "coalesce(contextId, 0)", "coalesce(streamId, 0)",
            "coalesce(globalPid, 0)", "coalesce(correlationId, -1)", kind, "coalesce(bytes, 0)"], own_connection=True)
        pid = pid_of(pid)
        check_bounds(conn, t, (dev, ctx, stream))
        check_durations(conn, t, start, end)
        distinct_kinds, inverse = columnar.codes(kinds)
        labels = [f"[CUDA memcpy {memcpy_labels.get(int(k), f'kind {int(k)}')}]" if t == MEMCPY else "[CUDA memset]"
                  for k in distinct_kinds]
        parts.append(dict(start=start, end=end, name=table.codes(labels, inverse), cat=CAT[cat], bytes=size,
                          stream_key=stream_key(dev, ctx, stream), pid=pid, corr=corr))
    return parts


def _api_calls(conn, table: NameTable, api: tuple) -> dict:
    """start, end, gtid (globalTid) and name of the API calls, from their (start, end, globalTid,
    correlation, nameId) arrays; names without the runtime's version tag."""
    start, end, gtid, _, nid = api
    strings = string_map(conn, nid)
    uniq, inverse = columnar.codes(nid)
    labels = [api_name(strings.get(int(i), f"api {int(i)}")) for i in uniq]
    return dict(start=start, end=end, gtid=gtid, name=table.codes(labels, inverse))


def _nvtx_ranges(table: NameTable, ranges: Dict[str, np.ndarray]) -> dict:
    """start, end, gtid and name of the closed NVTX ranges."""
    labels = [str(n) for n in ranges["names"]]
    return dict(start=ranges["start"], end=ranges["end"], gtid=ranges["tid"], name=table.codes(labels, ranges["nid"]))


# The finished OS runtime calls' columns the timeline reads, and which rows.
OSRT_EXPRS, OSRT_ROWS = ["start", "end", "coalesce(globalTid, 0)", "coalesce(nameId, -1)"], "end IS NOT NULL"


def _os_runtime_calls(conn, names: Set[str], table: NameTable) -> Optional[dict]:
    """start, end, gtid and name of the finished OS runtime calls (OSRT_API: the reads a data
    loader waits in, the waits of a synchronising thread), or None without that table."""
    if OSRT not in names:
        return None
    start, end, gtid, nid = sqlite_columns.int_columns(conn, OSRT, OSRT_EXPRS, OSRT_ROWS, own_connection=True)
    check_durations(conn, OSRT, start, end, OSRT_ROWS)
    strings = string_map(conn, nid)
    uniq, inverse = columnar.codes(nid)
    return dict(start=start, end=end, gtid=gtid,
                name=table.codes([strings.get(int(i), f"osrt {int(i)}") for i in uniq], inverse))


# ---------------------------------------------------------------- tracks

def _thread_names(conn, names: Set[str], gtids: np.ndarray) -> Dict[int, str]:
    if "ThreadNames" not in names or gtids.size == 0:
        return {}
    rows = conn.execute("SELECT t.rowid, t.globalTid, s.value FROM ThreadNames t "
                        "JOIN StringIds s ON s.id = t.nameId").fetchall()
    wanted = set(gtids.tolist())
    # globalTid is nullable in the schema: a name without its thread names nothing.
    return {g: v for _, g, v in checked("ThreadNames", rows, ((int, type(None)), (str,)), ("globalTid", "nameId"))
            if g is not None and g in wanted}


def _process_names(conn, names: Set[str]) -> Dict[int, str]:
    if "PROCESSES" not in names:
        return {}
    rows = checked("PROCESSES", conn.execute("SELECT rowid, pid, name FROM PROCESSES").fetchall(),
                   ((int, type(None)), (str, type(None))), ("pid", "name"))
    return {pid: name or "" for _, pid, name in rows if pid is not None}  # pid is nullable in the schema


def cpu_tracks(conn, names: Set[str], gtids: np.ndarray) -> Tuple[List[Track], np.ndarray]:
    """Tracks of the distinct threads in `gtids`, and each row's track index (from 0)."""
    uniq, inverse = columnar.codes(gtids)
    threads, procs = _thread_names(conn, names, uniq), _process_names(conn, names)
    tracks = []
    for g in uniq.tolist():
        pid, tid = (g >> 24) & PID_MASK, g & PID_MASK
        process = procs.get(pid) or f"process {pid}"
        tracks.append(Track(pid=pid, tid=tid, process=f"{process} ({pid})",
                            thread=threads.get(g) or f"thread {tid}", kind="thread"))
    return tracks, inverse.astype(np.int32)


def pid_of(global_id: np.ndarray) -> np.ndarray:
    """The process id in nsys' globalPid / globalTid values."""
    return (global_id >> 24) & PID_MASK


def stream_key(device: np.ndarray, context: np.ndarray, stream: np.ndarray) -> np.ndarray:
    """(device, context, stream) of each row as one int64 (device < 2^7, context < 2^24, stream < 2^32),
    hashed where np.unique(axis=0) of the triples would take ~1 s at 1M."""
    return (device.astype(np.int64) << 56) | ((context.astype(np.int64) & 0xFFFFFF) << 32) | (stream & 0xFFFFFFFF)


def gpu_tracks(devices: List[Device], key: np.ndarray) -> Tuple[List[Track], np.ndarray]:
    """One track per stream_key (device, context, stream), and each row's track index; the stream
    id is the track's tid unless two contexts of one device use the same stream id."""
    uniq_keys, inverse = columnar.codes(key)
    uniq = [(int(k >> 56), int((k >> 32) & 0xFFFFFF), int(k & 0xFFFFFFFF)) for k in uniq_keys.tolist()]
    per_stream = pd.Series([(d, s) for d, _, s in uniq], dtype=object).value_counts().to_dict() if uniq else {}
    dev_names = {d.id: d.name for d in devices}
    tracks = []
    for dev, ctx, st in uniq:
        shared = per_stream.get((dev, st), 1) > 1
        label = f"Stream {st}" + (f" (context {ctx})" if shared else "")
        name = dev_names.get(dev)
        tracks.append(Track(pid=GPU_PID_BASE + dev, tid=ctx * 100_000 + st if shared else st,
                            process=f"GPU {dev}" + (f" ({name})" if name else ""), thread=label,
                            kind="stream", device=dev))
    return tracks, inverse.reshape(-1).astype(np.int32)


# ---------------------------------------------------------------- flows

def flow_ids(gpu_call: np.ndarray, gpu_start: np.ndarray, call_flow: np.ndarray, gpu_flow: np.ndarray) -> None:
    """Flow ids into call_flow (per API call) and gpu_flow (per GPU operation): 0.. for each call and
    the operation it launched (gpu_call: the call's row, -1 for none) in the operations' start
    order, -1 elsewhere.  A call that launched several operations (a graph) flows to the first."""
    call_flow[:], gpu_flow[:] = -1, -1
    by_start = np.argsort(gpu_start, kind="stable")
    launched = by_start[gpu_call[by_start] >= 0]
    del by_start
    earliest = np.full(call_flow.size, launched.size, np.int64)  # per call: the rank of its first operation
    np.minimum.at(earliest, gpu_call[launched], np.arange(launched.size))
    firsts = launched[np.sort(earliest[earliest < launched.size])]
    ids = np.arange(firsts.size, dtype=np.int64)
    call_flow[gpu_call[firsts]] = ids
    gpu_flow[firsts] = ids


def api_keys(api: tuple) -> np.ndarray:
    """flow_key of each call of (start, end, globalTid, correlation, nameId) arrays."""
    return flow_key(pid_of(api[2]), api[3])


def flow_key(pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
    # pid < 2^24 and correlation ids < 2^31: one int64, negative where there is no correlation id.
    return np.where(corr >= 0, (pid.astype(np.int64) << 32) | (corr & 0xFFFFFFFF), -1)


# ---------------------------------------------------------------- the timeline

def read_timeline(conn, names: Set[str], devices: List[Device], kernel_cols: Optional[dict],
                  kernel_names: Optional[np.ndarray], memcpy_labels: Dict[int, str],
                  ranges: Optional[Dict[str, np.ndarray]], api_rows: Optional[tuple]) -> Optional[Timeline]:
    """The capture's Timeline, or None when it has no CUDA trace.  Slices in this order: GPU
    operations (kernels, copies, sets), API calls, NVTX ranges (in `ranges`' order), OS runtime
    calls."""
    table = NameTable()
    gpu = _gpu_ops(conn, names, kernel_cols, kernel_names, table, memcpy_labels)
    api = _api_calls(conn, table, api_rows) if api_rows is not None else None
    nvtx = _nvtx_ranges(table, ranges) if ranges is not None else None
    if not gpu and api is None and nvtx is None:
        return None
    osrt = _os_runtime_calls(conn, names, table)
    gpu_tr, gpu_track = gpu_tracks(devices, _joined(gpu, "stream_key"))
    cpu_parts = [dict(x, cat=CAT[cat]) for x, cat in ((api, "cuda_api"), (nvtx, "nvtx"), (osrt, "osrt"))
                 if x is not None]
    cpu_tr, cpu_track = cpu_tracks(conn, names, _joined(cpu_parts, "gtid"))
    n_gpu, n_api = gpu_track.size, api["start"].size if api is not None else 0
    parts = [dict(part, track=0, flow=-1) for part in gpu]  # GPU tracks and flows are set below
    first = 0
    for part in cpu_parts:
        n = part["start"].size
        parts.append(dict(part, track=cpu_track[first:first + n] + len(gpu_tr), flow=-1, bytes=-1))
        first += n
    slices = _stack(parts)
    del parts, cpu_track
    slices["track"][:n_gpu] = gpu_track
    if api is not None:
        flow_ids(_launching_calls(gpu, api_rows), slices["start"][:n_gpu], slices["flow"][n_gpu:n_gpu + n_api],
                 slices["flow"][:n_gpu])
    timeline = Timeline(tracks=gpu_tr + cpu_tr, names=table.names(), slices=slices)
    # Every track's slices must nest (trace viewers drop the others): GPU operations that overlap on
    # one stream get lanes, and so do NVTX start/end ranges, which need not nest by definition (their
    # thread's track holds its push/pop ranges and API calls, which do).
    spread_over_lanes(timeline, np.arange(n_gpu), "overlap")
    if ranges is not None:
        start_end = np.flatnonzero(ranges["etype"] == NVTX_START_END) + n_gpu + n_api
        spread_over_lanes(timeline, start_end, "NVTX start/end", keep_first=False)
    return timeline


def _launching_calls(gpu: List[dict], api_rows: tuple) -> np.ndarray:
    """Per GPU operation: the row of the API call that launched it (-1: none)."""
    keys = api_keys(api_rows)
    calls = [columnar.launching_call(keys, flow_key(p["pid"], p["corr"])) for p in gpu]
    return np.concatenate(calls) if calls else np.zeros(0, np.int64)


def _joined(parts: List[dict], column: str) -> np.ndarray:
    return np.concatenate([p[column] for p in parts]) if parts else np.zeros(0, np.int64)


def _stack(parts: List[dict]) -> Dict[str, np.ndarray]:
    """SLICE_COLUMNS of the parts one after another, each column allocated once (a part's value may
    be a scalar for all its rows; "start" sets the part's length)."""
    bounds = np.cumsum([0] + [len(p["start"]) for p in parts])
    out = {col: np.empty(int(bounds[-1]), dtype) for col, dtype in SLICE_COLUMNS.items()}
    for part, lo, hi in zip(parts, bounds[:-1], bounds[1:]):
        for col, values in out.items():
            values[lo:hi] = part[col]
    return out
