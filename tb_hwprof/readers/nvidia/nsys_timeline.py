"""Part of the Nsight Systems SQLite reader: the capture's slices as a columnar Timeline, and the
GPU idle-time summaries computed from it (gpu_idle_gaps, gpu_utilisation, gpu_idle_attribution).

Rows come out of SQLite as integer tuples straight into numpy (one array per column, never one
Python object per row); names are resolved once per distinct string id.  Thread ids are nsys'
globalTid: pid = (globalTid >> 24) & 0xFFFFFF, tid = globalTid & 0xFFFFFF.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Set, Tuple

import numpy as np
import pandas as pd

from ... import columnar
from ...analysis import timeline as tl
from ...analysis.summary import interval_union_ns
from ...analysis.timeline import DATA_LOADING_NVTX, OS_READS, SYNC_API
from ..common import sqlite_columns
from ...model import SLICE_COLUMNS, TIMELINE_CATEGORIES, Device, Timeline, Track
from ..common.lanes import spread_over_lanes
from ..common.timeline_builder import GPU_PID_BASE, NameTable
from .nsys_schema import MEMCPY, MEMSET, NVTX_START_END, OSRT, api_name, string_map

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
            f"(coalesce(globalPid, 0) >> 24) & {PID_MASK}", "coalesce(correlationId, -1)", kind, "coalesce(bytes, 0)"])
        distinct_kinds, inverse = columnar.codes(kinds)
        labels = [f"[CUDA memcpy {memcpy_labels.get(int(k), f'kind {int(k)}')}]" if t == MEMCPY else "[CUDA memset]"
                  for k in distinct_kinds]
        parts.append(dict(start=start, end=end, name=table.codes(labels, inverse), cat=CAT[cat], bytes=size,
                          stream_key=stream_key(dev, ctx, stream), pid=pid, corr=corr))
    return parts


def _api_calls(conn, table: NameTable, api: tuple):
    """(start, end, globalTid, correlation, name id, labels, per-row label codes) of the API calls,
    from their (start, end, globalTid, correlation, nameId) arrays."""
    start, end, gtid, corr, nid = api
    strings = string_map(conn, nid)
    uniq, inverse = columnar.codes(nid)
    labels = [api_name(strings.get(int(i), f"api {int(i)}")) for i in uniq]
    return start, end, gtid, corr, table.codes(labels, inverse), labels, inverse


def _nvtx_ranges(table: NameTable, ranges: Dict[str, np.ndarray]):
    """(start, end, globalTid, name id, labels, per-row label codes) of the closed NVTX ranges."""
    labels = [str(n) for n in ranges["names"]]
    return ranges["start"], ranges["end"], ranges["tid"], table.codes(labels, ranges["nid"]), labels, ranges["nid"]


# ---------------------------------------------------------------- tracks

def _thread_names(conn, names: Set[str], gtids: np.ndarray) -> Dict[int, str]:
    if "ThreadNames" not in names or gtids.size == 0:
        return {}
    rows = conn.execute("SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId")
    wanted = set(gtids.tolist())
    return {g: v for g, v in rows if g in wanted}


def _process_names(conn, names: Set[str]) -> Dict[int, str]:
    if "PROCESSES" not in names:
        return {}
    return {int(pid): name or "" for pid, name in conn.execute("SELECT pid, name FROM PROCESSES")}


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
    return flow_key((api[2] >> 24) & PID_MASK, api[3])


def flow_key(pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
    # pid < 2^24 and correlation ids < 2^31: one int64, negative where there is no correlation id.
    return np.where(corr >= 0, (pid.astype(np.int64) << 32) | (corr & 0xFFFFFFFF), -1)


# ---------------------------------------------------------------- the timeline

def read_timeline(conn, names: Set[str], devices: List[Device], kernel_cols: Optional[dict],
                  kernel_names: Optional[np.ndarray], memcpy_labels: Dict[int, str],
                  ranges: Optional[Dict[str, np.ndarray]], api_rows: Optional[tuple],
                  kernel_calls: Optional[np.ndarray] = None):
    """(Timeline, extras) of the capture, or (None, None) when it has no CUDA trace.  extras holds
    per-category arrays the idle-time summaries reuse (sync-call intervals, NVTX labels).
    kernel_calls: each kernel's launching call (its row in api_rows), when already known."""
    table = NameTable()
    gpu = _gpu_ops(conn, names, kernel_cols, kernel_names, table, memcpy_labels)
    api = _api_calls(conn, table, api_rows) if api_rows is not None else None
    nvtx = _nvtx_ranges(table, ranges) if ranges is not None else None
    if not gpu and api is None and nvtx is None:
        return None, None
    gpu_tr, gpu_track = gpu_tracks(devices, _joined(gpu, "stream_key"))
    cpu_gtids = np.concatenate([x[2] for x in (api, nvtx) if x is not None] or [np.zeros(0, np.int64)])
    cpu_tr, cpu_track = cpu_tracks(conn, names, cpu_gtids)
    n_gpu, n_api = gpu_track.size, api[0].size if api is not None else 0
    offset = len(gpu_tr)
    parts = [dict(part, track=0, flow=-1) for part in gpu]  # GPU tracks and flows are set below
    if api is not None:
        parts.append(dict(start=api[0], end=api[1], track=cpu_track[:n_api] + offset, name=api[4],
                          cat=CAT["cuda_api"], flow=-1, bytes=-1))
    if nvtx is not None:
        parts.append(dict(start=nvtx[0], end=nvtx[1], track=cpu_track[n_api:] + offset, name=nvtx[3],
                          cat=CAT["nvtx"], flow=-1, bytes=-1))
    slices = _stack(parts)
    del parts, cpu_track
    slices["track"][:n_gpu] = gpu_track
    g_start, g_end = slices["start"][:n_gpu], slices["end"][:n_gpu]
    if api is not None:
        flow_ids(_launching_calls(gpu, api_rows, kernel_calls), g_start, slices["flow"][n_gpu:n_gpu + n_api],
                 slices["flow"][:n_gpu])
    g_dev = np.array([t.device for t in gpu_tr], dtype=np.int64)[gpu_track]
    extras = {"gpu": (g_start, g_end, g_dev), "api": api, "nvtx": nvtx}
    timeline = Timeline(tracks=gpu_tr + cpu_tr, names=table.names(), slices=slices)
    # Every track's slices must nest (trace viewers drop the others): GPU operations that overlap on
    # one stream get lanes, and so do NVTX start/end ranges, which need not nest by definition (their
    # thread's track holds its push/pop ranges and API calls, which do).
    spread_over_lanes(timeline, np.arange(n_gpu), "overlap")
    if ranges is not None:
        start_end = np.flatnonzero(ranges["etype"] == NVTX_START_END) + n_gpu + n_api
        spread_over_lanes(timeline, start_end, "NVTX start/end", keep_first=False)
    return timeline, extras


def _launching_calls(gpu: List[dict], api_rows: tuple, kernel_calls: Optional[np.ndarray]) -> np.ndarray:
    """Per GPU operation: the row of the API call that launched it (-1: none); the kernels' rows are
    `kernel_calls` when already known."""
    known = [kernel_calls] if kernel_calls is not None and gpu and gpu[0]["cat"] == CAT["kernel"] else []
    rest = gpu[len(known):]
    keys = api_keys(api_rows) if rest else None
    calls = known + [columnar.launching_call(keys, flow_key(p["pid"], p["corr"])) for p in rest]
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


# ---------------------------------------------------------------- idle-time summaries

def _mask_of(labels: List[str], inverse: np.ndarray, pattern: re.Pattern) -> np.ndarray:
    hit = np.array([bool(pattern.search(label)) for label in labels], dtype=bool)
    return hit[inverse] if hit.size else np.zeros(inverse.size, dtype=bool)


def _os_reads(conn, names: Set[str]) -> tl.Intervals:
    if OSRT not in names:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ids = [i for i, v in conn.execute(f"SELECT id, value FROM StringIds WHERE id IN (SELECT DISTINCT nameId FROM {OSRT})")
           if OS_READS.match(v or "")]
    if not ids:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    start, end = sqlite_columns.int_columns(conn, OSRT, ["start", "end"],
                                            f"nameId IN ({','.join(map(str, ids))}) AND end IS NOT NULL")
    return start, end


def _thread_label(timeline: Timeline, track: int) -> str:
    t = timeline.tracks[track]
    return f"{t.thread} [{t.process}]"


def _gap_context(conn, names, timeline: Timeline, gaps: tl.Intervals, cat: str, threads=None):
    """Per gap: (name, thread, overlap ns) of the `cat` slice covering most of it."""
    s = timeline.slices
    mask = s["cat"] == CAT[cat]
    if threads is not None:
        mask &= np.isin(s["track"], threads, kind="table")
    idx = np.flatnonzero(mask)
    best, amount = tl.best_overlap(gaps, s["start"][idx], s["end"][idx])
    out = []
    for b, a in zip(best.tolist(), amount.tolist()):
        if b < 0:
            out.append(("", "", 0))
        else:
            i = idx[b]
            out.append((timeline.names[s["name"][i]], _thread_label(timeline, int(s["track"][i])), a))
    return out


def _osrt_context(conn, names: Set[str], gaps: tl.Intervals, gtids: List[int]):
    """Per gap: (call, overlap ns) of the OS runtime call of the CUDA threads covering most of it."""
    if OSRT not in names or not gtids or gaps[0].size == 0:
        return [("", 0)] * gaps[0].size
    conn.execute("DROP TABLE IF EXISTS temp.tbh_gap")
    conn.execute("CREATE TEMP TABLE tbh_gap (g INTEGER PRIMARY KEY, s INTEGER, e INTEGER)")
    conn.executemany("INSERT INTO tbh_gap VALUES (?, ?, ?)", zip(range(gaps[0].size), gaps[0].tolist(), gaps[1].tolist()))
    rows = conn.execute(f"""
        SELECT g, nameId, ov FROM (
            SELECT g.g, o.nameId, min(o.end, g.e) - max(o.start, g.s) AS ov,
                   row_number() OVER (PARTITION BY g.g ORDER BY min(o.end, g.e) - max(o.start, g.s) DESC,
                                      o.end - o.start) AS rn
            FROM tbh_gap g JOIN {OSRT} o ON o.start < g.e AND o.end > g.s
            WHERE o.globalTid IN ({','.join(map(str, gtids))}))
        WHERE rn = 1""").fetchall()
    strings = string_map(conn, np.array([r[1] for r in rows], dtype=np.int64))
    out = [("", 0)] * gaps[0].size
    for g, nid, ov in rows:
        out[g] = (strings.get(nid, ""), int(ov))
    return out


def idle_summaries(conn, names: Set[str], timeline: Timeline, extras: dict,
                   span: Tuple[int, int]) -> Dict[str, pd.DataFrame]:
    """gpu_idle_gaps (the longest gaps per device and what the CPU did then), gpu_utilisation
    (busy % per time bin) and gpu_idle_attribution (idle time overlapping data loading, reads,
    synchronisation) for each device with GPU work."""
    g_start, g_end, g_dev = extras["gpu"]
    if g_start.size == 0:
        return {}
    api, nvtx = extras["api"], extras["nvtx"]
    sync = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    cuda_tracks: Optional[np.ndarray] = None
    cuda_gtids: List[int] = []
    if api is not None:
        is_sync = _mask_of(api[5], api[6], SYNC_API)
        sync = (api[0][is_sync], api[1][is_sync])
        cuda_tracks = columnar.distinct(timeline.slices["track"][timeline.slices["cat"] == CAT["cuda_api"]])
        cuda_gtids = columnar.distinct(api[2]).tolist()
    loading = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    if nvtx is not None:
        is_loading = _mask_of(nvtx[4], nvtx[5], DATA_LOADING_NVTX)
        loading = (nvtx[0][is_loading], nvtx[1][is_loading])
    reads = _os_reads(conn, names)
    gaps_rows, util_rows, attr_rows = [], [], []
    for dev in columnar.distinct(g_dev).tolist():
        on = g_dev == dev
        islands = tl.merge(g_start[on], g_end[on])
        gaps = tl.idle_gaps(islands, span)
        util = tl.utilisation(islands, span)
        util.insert(0, "device", dev)
        util_rows.append(util)
        gaps_rows.append(_gap_table(conn, names, timeline, dev, gaps, sync, cuda_tracks, cuda_gtids))
        attr_rows.append(_attribution(dev, gaps, span, {"data loading (NVTX ranges)": loading,
                                                        "file/socket reads (OS runtime)": reads,
                                                        "CUDA synchronisation calls": sync}, sync, islands))
    return {"gpu_idle_gaps": pd.concat(gaps_rows, ignore_index=True),
            "gpu_utilisation": pd.concat(util_rows, ignore_index=True),
            "gpu_idle_attribution": pd.concat(attr_rows, ignore_index=True)}


def _gap_table(conn, names, timeline, dev, gaps, sync, cuda_tracks, cuda_gtids) -> pd.DataFrame:
    top = tl.longest(gaps)
    nvtx = _gap_context(conn, names, timeline, top, "nvtx")
    api = _gap_context(conn, names, timeline, top, "cuda_api", cuda_tracks)
    osrt = _osrt_context(conn, names, top, cuda_gtids)
    after_sync = tl.starts_inside(top[0], sync)
    return pd.DataFrame({
        "device": np.full(top[0].size, dev, np.int64), "rank": np.arange(1, top[0].size + 1, dtype=np.int64),
        "start_ns": top[0], "end_ns": top[1], "duration_ns": top[1] - top[0],
        "nvtx_range": [n for n, _, _ in nvtx], "nvtx_thread": [t for _, t, _ in nvtx],
        "nvtx_overlap_ns": np.array([o for _, _, o in nvtx], np.int64),
        "cuda_api": [n for n, _, _ in api], "cuda_api_thread": [t for _, t, _ in api],
        "cuda_api_overlap_ns": np.array([o for _, _, o in api], np.int64),
        "osrt_call": [n for n, _ in osrt], "osrt_overlap_ns": np.array([o for _, o in osrt], np.int64),
        "starts_in_sync": after_sync})


def _attribution(dev: int, gaps: tl.Intervals, span, activities: Dict[str, tl.Intervals], sync,
                 islands: tl.Intervals) -> pd.DataFrame:
    idle = int((gaps[1] - gaps[0]).sum())
    rows = [{"activity": "all idle time", "intervals": int(gaps[0].size), "cpu_ns": None, "idle_overlap_ns": idle}]
    for label, (s, e) in activities.items():
        clipped = tl.clip((s, e), span)
        rows.append({"activity": label, "intervals": int(s.size), "cpu_ns": interval_union_ns(*clipped),
                     "idle_overlap_ns": tl.overlap_ns(clipped, gaps) if s.size else 0})
    # Only gaps between the first and last GPU operation: the one after the last operation starts in
    # the program's final synchronisation as a matter of course.
    interior = (gaps[0] >= islands[0][0]) & (gaps[1] <= islands[1][-1])
    in_sync = tl.starts_inside(gaps[0], sync) & interior
    rows.append({"activity": "gaps starting in a synchronisation call", "intervals": int(in_sync.sum()),
                 "cpu_ns": None, "idle_overlap_ns": int((gaps[1] - gaps[0])[in_sync].sum())})
    out = pd.DataFrame(rows)
    out.insert(0, "device", dev)
    out["idle_ns"] = idle
    out["idle_share_pct"] = [tl.gap_share(idle, v) for v in out["idle_overlap_ns"]]
    out["cpu_ns"] = out["cpu_ns"].astype("float64")
    out["idle_share_pct"] = out["idle_share_pct"].astype("float64")
    return out
