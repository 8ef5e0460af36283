"""A run's timeline as files: a Chrome trace-event JSON (gzipped, for Perfetto / chrome://tracing)
and a columnar index the plugin's Timeline view reads (see docs/FORMAT.md).

The trace is formatted from numpy columns in chunks (FACTS.md: one Python dict per event and a
whole-document json.dumps cost ~11 s each at 1M kernels): one f-string per event, names quoted
once per distinct name, gzip level 1, written as it goes.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, Optional

import numpy as np

from ..model import TIMELINE_CATEGORIES, Timeline, Window
from . import tables

CHUNK = 100_000  # events formatted and compressed at a time
GZIP_LEVEL = 1  # the trace is repetitive text: level 1 is ~as small as 6 and several times faster
FLOW_CAT, FLOW_NAME = "cuda_flow", "launch"
INDEX_VERSION = 1


def kept_mask(timeline: Timeline, window: Optional[Window]) -> np.ndarray:
    """Slices overlapping the window (all without one)."""
    s = timeline.slices
    if window is None:
        return np.ones(s["start"].size, dtype=bool)
    return (s["end"] >= window.start_ns) & (s["start"] <= window.end_ns)


def _flow_pairs(timeline: Timeline, keep: np.ndarray) -> np.ndarray:
    """Per flow id: are its launching call and its GPU operation both kept (bool array)."""
    s = timeline.slices
    n = int(s["flow"].max()) + 1 if s["flow"].size else 0
    has = keep & (s["flow"] >= 0)
    is_api = s["cat"] == TIMELINE_CATEGORIES.index("cuda_api")
    ends = [np.zeros(n, dtype=bool) for _ in range(2)]
    ends[0][s["flow"][has & is_api]] = True
    ends[1][s["flow"][has & ~is_api]] = True
    return ends[0] & ends[1]


def event_order(timeline: Timeline, keep: np.ndarray) -> np.ndarray:
    """Kept slices by start, longer first on ties (a parent before the slices nested in it)."""
    idx = np.flatnonzero(keep)
    s = timeline.slices
    return idx[np.lexsort((-s["end"][idx], s["start"][idx]))]


def _us(ns: np.ndarray):
    """ns -> (whole µs, ns remainder) for exact "%d.%03d" µs text without float rounding."""
    return np.divmod(ns, 1000)


def _metadata_events(timeline: Timeline) -> list:
    events, seen = [], set()
    for i, t in enumerate(timeline.tracks):
        if t.pid not in seen:
            seen.add(t.pid)
            events.append({"ph": "M", "name": "process_name", "pid": t.pid, "tid": 0, "args": {"name": t.process}})
            # CPU processes first, then the GPUs (sort index is relative).
            events.append({"ph": "M", "name": "process_sort_index", "pid": t.pid, "tid": 0,
                           "args": {"sort_index": (1_000_000 + t.device) if t.kind == "stream" else len(seen)}})
        events.append({"ph": "M", "name": "thread_name", "pid": t.pid, "tid": t.tid, "args": {"name": t.thread}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": t.pid, "tid": t.tid, "args": {"sort_index": i}})
    return [json.dumps(e, ensure_ascii=False, separators=(",", ":")) for e in events]


def _slice_texts(timeline: Timeline, idx: np.ndarray, prefixes: list, names: list) -> list:
    s = timeline.slices
    start, end = s["start"][idx], s["end"][idx]
    (ts, tr), (du, dr) = _us(start), _us(np.maximum(end - start, 0))
    nbytes = s["bytes"][idx]
    args = ["" if b < 0 else f',"args":{{"bytes":{b}}}' for b in nbytes.tolist()] if (nbytes >= 0).any() \
        else [""] * idx.size
    pre = [prefixes[k] for k in (s["track"][idx].astype(np.int64) * len(TIMELINE_CATEGORIES) + s["cat"][idx]).tolist()]
    return [f'{p}{names[n]},"ts":{a}.{b:03d},"dur":{c}.{d:03d}{x}}}'
            for p, n, a, b, c, d, x in zip(pre, s["name"][idx].tolist(), ts.tolist(), tr.tolist(),
                                           du.tolist(), dr.tolist(), args)]


def _flow_texts(timeline: Timeline, idx: np.ndarray, flows: np.ndarray) -> list:
    """"s" at the launching call, "f" bound to the enclosing GPU slice ("bp":"e")."""
    s = timeline.slices
    f = s["flow"][idx]
    hit = idx[f >= 0]
    hit = hit[flows[s["flow"][hit]]]
    hit = hit[np.argsort(s["start"][hit], kind="stable")]
    is_api = (s["cat"][hit] == TIMELINE_CATEGORIES.index("cuda_api")).tolist()
    ts, tr = _us(s["start"][hit])
    # One prefix per (track, end of the flow), formatted once.
    heads = [f'{{"ph":{ph},"cat":"{FLOW_CAT}","name":"{FLOW_NAME}","pid":{t.pid},"tid":{t.tid},"id":'
             for t in timeline.tracks for ph in ('"f","bp":"e"', '"s"')]
    which = (s["track"][hit].astype(np.int64) * 2 + np.asarray(is_api, dtype=np.int64)).tolist()
    return [f'{heads[w]}{fid},"ts":{a}.{b:03d}}}'
            for w, fid, a, b in zip(which, s["flow"][hit].tolist(), ts.tolist(), tr.tolist())]


class _GzipText(tables.GzipStream):
    """Text in, UTF-8 through the threaded gzip stream; counts the uncompressed bytes."""

    def __init__(self, path: Path):
        super().__init__(path, GZIP_LEVEL)
        self.bytes = 0

    def write(self, text: str) -> None:
        data = text.encode("utf-8")
        self.bytes += len(data)
        super().write(data)


def _counts(timeline: Timeline, mask: np.ndarray) -> Dict[str, int]:
    cats = np.bincount(timeline.slices["cat"][mask], minlength=len(TIMELINE_CATEGORIES))
    return {name: int(n) for name, n in zip(TIMELINE_CATEGORIES, cats)}


def write_trace(timeline: Timeline, path: Path, window: Optional[Window] = None, order=None, keep=None) -> dict:
    """Write the Chrome trace; returns what was kept and dropped (per category, flows included)."""
    keep = kept_mask(timeline, window) if keep is None else keep
    order = event_order(timeline, keep) if order is None else order
    flows = _flow_pairs(timeline, keep)
    prefixes = [f'{{"ph":"X","cat":"{cat}","pid":{t.pid},"tid":{t.tid},"name":'
                for t in timeline.tracks for cat in TIMELINE_CATEGORIES]
    names = [json.dumps(n, ensure_ascii=False) for n in timeline.names]
    out = _GzipText(path)
    try:
        out.write('{"displayTimeUnit":"ns","otherData":{"writer":"tb-hwprof","time_unit":"us"},"traceEvents":[\n')
        out.write(",\n".join(_metadata_events(timeline)))
        for first in range(0, order.size, CHUNK):
            out.write(",\n" + ",\n".join(_slice_texts(timeline, order[first:first + CHUNK], prefixes, names)))
        for first in range(0, order.size, CHUNK):
            texts = _flow_texts(timeline, order[first:first + CHUNK], flows)
            if texts:
                out.write(",\n" + ",\n".join(texts))
        out.write("\n]}\n")
    finally:
        out.close()
    kept, total = _counts(timeline, keep), _counts(timeline, np.ones(keep.size, dtype=bool))
    n_flows = int((timeline.slices["flow"][timeline.slices["cat"] == TIMELINE_CATEGORIES.index("cuda_api")] >= 0).sum())
    kept["flow"], total["flow"] = int(flows.sum()), n_flows
    return {"kept": kept, "dropped": {k: total[k] - kept[k] for k in total},
            "kept_events": int(keep.sum()), "dropped_events": int(keep.size - keep.sum()),
            "uncompressed_bytes": out.bytes}


def write_index(timeline: Timeline, path: Path, order: np.ndarray) -> None:
    """The kept slices sorted by start (columns start, end, track, name, cat) plus the tracks and
    names as JSON, in one uncompressed .npz: the plugin loads it in milliseconds, no parsing."""
    s = timeline.slices
    meta = {"version": INDEX_VERSION, "categories": list(TIMELINE_CATEGORIES), "names": timeline.names,
            "tracks": [{"pid": t.pid, "tid": t.tid, "process": t.process, "thread": t.thread, "kind": t.kind,
                        "device": t.device} for t in timeline.tracks]}
    blob = np.frombuffer(json.dumps(meta, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, start=s["start"][order], end=s["end"][order], track=s["track"][order],
                 name=s["name"][order], cat=s["cat"][order], meta=blob)


def read_index(path: Path) -> dict:
    """{"start", "end", "track", "name", "cat": arrays, "meta": dict} of a timeline index."""
    with np.load(path, allow_pickle=False) as z:
        out = {k: z[k] for k in ("start", "end", "track", "name", "cat")}
        out["meta"] = json.loads(z["meta"].tobytes().decode("utf-8"))
    return out


def write_timeline(timeline: Timeline, trace_path: Path, index_path: Path) -> dict:
    """Both files for the timeline's window; returns the manifest's "timeline" entry."""
    window = timeline.window
    keep = kept_mask(timeline, window)
    order = event_order(timeline, keep)
    stats = write_trace(timeline, trace_path, window, order=order, keep=keep)
    write_index(timeline, index_path, order)
    s = timeline.slices
    span = [int(s["start"].min()), int(s["end"].max())] if s["start"].size else None
    stats["window"] = None if window is None else {"start_ns": int(window.start_ns), "end_ns": int(window.end_ns),
                                                   "label": window.label}
    stats["capture_ns"] = span
    return stats
