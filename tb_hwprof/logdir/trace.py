"""A run's timeline as files: a columnar index the plugin's Timeline view reads and a Chrome
trace-event JSON (gzipped, for Perfetto / chrome://tracing) rendered from the same slices, at
export or later from the index alone (see docs/FORMAT.md).

The trace is formatted from numpy columns in chunks (FACTS.md: one Python dict per event and a
whole-document json.dumps cost ~11 s each at 1M kernels): one f-string per event, names quoted
once per distinct name, gzip level 1, written as it goes.
"""
from __future__ import annotations

import contextlib
import json
import os
import zipfile
import zlib
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Deque, Dict, Iterable, Iterator, Optional

import numpy as np
import orjson

from ..core.columnar import distinct, start_then_longest
from ..core.slices import decimate, nesting_depths
from ..core.model import TIMELINE_CATEGORIES, Timeline, Track, Window
from . import tables

CHUNK = 100_000  # events formatted and compressed at a time
GZIP_LEVEL = 1  # the trace is repetitive text: level 1 is ~as small as 6 and several times faster
FLOW_CAT, FLOW_NAME = "cuda_flow", "launch"
# 2: + flow and bytes, so the whole trace can be rendered from the index (v1 renders without them).
# 3: + each slice's nesting depth, a table of time-sorted chunks and an overview of the whole
#    capture, written first, so the Timeline reads a window's chunks by range (RangedIndex).
INDEX_VERSION = 3
INDEX_COLUMNS = ("start", "end", "track", "name", "cat", "flow", "bytes")
VIEW_COLUMNS = INDEX_COLUMNS[:5]  # all the Timeline view reads (and all a v1 index has)
DEPTH = "depth"
RANGED_COLUMNS = (*VIEW_COLUMNS, "flow", DEPTH)  # what the Timeline reads of a window's chunks
CHUNK_ROWS = 8192  # slices per chunk: a window reads the chunks its time range overlaps
CHUNK_MEMBERS = ("chunk_first", "chunk_start", "chunk_end")  # first row, earliest start, latest end
# The whole capture decimated at export to this many slices (the most the Timeline page asks for):
# its first request reads these and the chunk table, not the columns.
OVERVIEW_EVENTS = 20_000
OVERVIEW_COLUMNS = ("start", "end", "track", "name", "cat", "flow", DEPTH, "merged")
OVERVIEW = "overview_"
# `--trace auto` writes timeline.json.gz at export up to this many kept slices; bigger runs get it on
# demand (`tb-hwprof trace`, the plugin's /trace).  Rendering costs ~0.12-0.15 s per 100k slices
# (with their flows) on the project's 2-core machine, so 500k slices add at most ~0.75 s to an export.
TRACE_EAGER_EVENTS = 500_000
TRACE_MODES = ("auto", "always", "never")


def kept_mask(timeline: Timeline, window: Optional[Window]) -> np.ndarray:
    """Slices overlapping the window (all without one)."""
    s = timeline.slices
    if window is None:
        return np.ones(s["start"].size, dtype=bool)
    return (s["end"] >= window.start_ns) & (s["start"] <= window.end_ns)


def _flow_pairs(timeline: Timeline, keep: np.ndarray) -> np.ndarray:
    """The flow ids whose launching call and GPU operation are both kept (sorted).  Ids are the
    tracer's correlation ids: not an array as long as the largest of them (PyTorch's reach 10^8)."""
    s = timeline.slices
    has = keep & (s["flow"] >= 0)
    is_api = s["cat"] == TIMELINE_CATEGORIES.index("cuda_api")
    top = int(s["flow"].max()) + 1 if s["flow"].size else 0
    if top <= 8 * max(s["flow"].size, 1 << 20):  # dense ids (nsys): a flag per id, ~10 ms at 1M
        ends = [np.zeros(top, dtype=bool) for _ in range(2)]
        ends[0][s["flow"][has & is_api]] = True
        ends[1][s["flow"][has & ~is_api]] = True
        return np.flatnonzero(ends[0] & ends[1])
    calls = distinct(s["flow"][has & is_api])  # pandas' hash, sorted: numpy 2's np.unique is slow on ids
    ops = s["flow"][has & ~is_api]
    return calls[_paired(calls, distinct(ops))] if calls.size and ops.size else calls[:0]


def _paired(ids: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Per flow id: is it one of `pairs` (sorted)."""
    if pairs.size == 0:
        return np.zeros(ids.size, dtype=bool)
    pos = np.minimum(np.searchsorted(pairs, ids), pairs.size - 1)
    return pairs[pos] == ids


def event_order(timeline: Timeline, keep: np.ndarray) -> np.ndarray:
    """Kept slices by start, longer first on ties (a parent before the slices nested in it), then in
    slice order: np.lexsort((-end, start)) of the kept slices, as columnar.start_then_longest sorts
    them (a fraction of lexsort's time and temporaries over 2M slices)."""
    s = timeline.slices
    if keep.all():
        return start_then_longest(s["start"], s["end"])
    idx = np.flatnonzero(keep)
    return idx[start_then_longest(s["start"][idx], s["end"][idx])]


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
    hit = hit[_paired(s["flow"][hit], flows)]
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
    cats = timeline.slices["cat"]
    cats = np.bincount(cats if mask.all() else cats[mask], minlength=len(TIMELINE_CATEGORIES))
    return {name: int(n) for name, n in zip(TIMELINE_CATEGORIES, cats)}


def trace_pieces(timeline: Timeline, order: np.ndarray, flows: np.ndarray,
                 progress: Optional[Callable[[int, int], None]] = None) -> Iterator[str]:
    """The Chrome trace of the kept slices (`order`: event_order, `flows`: _flow_pairs) as text
    pieces, in file order: what the export writes, `tb-hwprof trace` writes and /trace streams;
    progress(slices done, total) after each chunk."""
    prefixes = [f'{{"ph":"X","cat":"{cat}","pid":{t.pid},"tid":{t.tid},"name":'
                for t in timeline.tracks for cat in TIMELINE_CATEGORIES]
    names = [json.dumps(n, ensure_ascii=False) for n in timeline.names]
    yield '{"displayTimeUnit":"ns","otherData":{"writer":"tb-hwprof","time_unit":"us"},"traceEvents":[\n'
    yield ",\n".join(_metadata_events(timeline))
    for first in range(0, order.size, CHUNK):
        yield ",\n" + ",\n".join(_slice_texts(timeline, order[first:first + CHUNK], prefixes, names))
        if progress is not None:
            progress(min(first + CHUNK, order.size), order.size)
    for first in range(0, order.size, CHUNK):
        texts = _flow_texts(timeline, order[first:first + CHUNK], flows)
        if texts:
            yield ",\n" + ",\n".join(texts)
    yield "\n]}\n"


def write_pieces(pieces: Iterable[str], path: Path) -> int:
    """Text pieces gzipped into `path` (compressed on a second thread); returns the uncompressed bytes."""
    out = _GzipText(path)
    try:
        for piece in pieces:
            out.write(piece)
    finally:
        out.close()
    return out.bytes


def gzip_pieces(pieces: Iterable[str]) -> Iterator[bytes]:
    """Text pieces as gzip bytes, compressed as they come: the same bytes write_pieces writes.

    Each piece is compressed on a second thread (zlib releases the GIL) while the next one is
    formatted, as GzipStream does for the file (2.2M slices: ~2.6 s there against ~3.5 s formatting
    and compressing on one thread, when the second core is free)."""
    z = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # wbits 31: the gzip container, as GzipStream
    with ThreadPoolExecutor(1, thread_name_prefix="tb-hwprof-gzip") as pool:  # one thread: in order
        pending: Deque[Future] = deque()
        for piece in pieces:
            pending.append(pool.submit(z.compress, piece.encode("utf-8")))
            while len(pending) > 2 or (pending and pending[0].done()):  # a few pieces in memory at most
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
        yield z.flush()


def timeline_counts(timeline: Timeline, keep: np.ndarray, flows: np.ndarray) -> dict:
    """What the window kept and dropped, per category (flows included), as the manifest records it."""
    kept = _counts(timeline, keep)
    total = dict(kept) if keep.all() else _counts(timeline, np.ones(keep.size, dtype=bool))  # no window: one count
    n_flows = int((timeline.slices["flow"][timeline.slices["cat"] == TIMELINE_CATEGORIES.index("cuda_api")] >= 0).sum())
    kept["flow"], total["flow"] = int(flows.size), n_flows
    return {"kept": kept, "dropped": {k: total[k] - kept[k] for k in total},
            "kept_events": int(keep.sum()), "dropped_events": int(keep.size - keep.sum())}


def write_index(timeline: Timeline, path: Path, order: np.ndarray) -> None:
    """The kept slices in event order (columns INDEX_COLUMNS and their depth) plus the tracks and
    names as JSON, in one uncompressed .npz: the plugin loads it in milliseconds, no parsing; the
    trace renders from it.  The meta, chunk table and overview come first (one range read)."""
    s = timeline.slices
    meta = {"version": INDEX_VERSION, "categories": list(TIMELINE_CATEGORIES), "names": timeline.names,
            "tracks": [{"pid": t.pid, "tid": t.tid, "process": t.process, "thread": t.thread, "kind": t.kind,
                        "device": t.device} for t in timeline.tracks],
            "events": int(order.size), "chunk_rows": CHUNK_ROWS, "overview_events": OVERVIEW_EVENTS}
    blob = np.frombuffer(json.dumps(meta, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)
    start, end, track = s["start"][order], s["end"][order], s["track"][order]
    depth = nesting_depths(start, end, track)
    # What np.savez writes, one member at a time: the other columns are put in event order just before
    # they are written, never all at once (at 1M kernels the gathered copy of all of them is ~90 MB).
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as z:
        _write_member(z, "meta", blob)
        for name, values in zip(CHUNK_MEMBERS, chunk_table(start, end)):
            _write_member(z, name, values)
        for name, values in overview(s, order, start, end, track, depth).items():
            _write_member(z, OVERVIEW + name, values)
        gathered = {"start": start, "end": end, "track": track}
        del start, end, track
        for name in INDEX_COLUMNS:
            _write_member(z, name, gathered.pop(name) if name in gathered else s[name][order])  # each freed once written
        _write_member(z, DEPTH, depth)


def chunk_table(start: np.ndarray, end: np.ndarray):
    """(first row, earliest start, latest end) of each CHUNK_ROWS slices in event order."""
    first = np.arange(0, start.size, CHUNK_ROWS, dtype=np.int64)
    if not start.size:
        return first, first.copy(), first.copy()
    return first, start[first].astype(np.int64), np.maximum.reduceat(end, first).astype(np.int64)


def overview(s: dict, order: np.ndarray, start, end, track, depth) -> Dict[str, np.ndarray]:
    """The whole capture as the Timeline's window shows it at OVERVIEW_EVENTS (core/slices.py's
    decimation): OVERVIEW_COLUMNS of the slices kept, each with how many it stands for."""
    if start.size > OVERVIEW_EVENTS:
        lo, hi = int(start.min()), int(end.max())
        idx, merged = decimate(start, end, track, depth, None, None, lo, max(hi, lo + 1), OVERVIEW_EVENTS)
    else:
        idx, merged = np.arange(start.size), np.ones(start.size, dtype=np.int64)
    rows = order[idx]
    return {"start": start[idx], "end": end[idx], "track": track[idx], "name": s["name"][rows],
            "cat": s["cat"][rows], "flow": s["flow"][rows], DEPTH: depth[idx], "merged": merged.astype(np.int64)}


def _write_member(z: zipfile.ZipFile, name: str, values: np.ndarray) -> None:
    with z.open(name + ".npy", "w", force_zip64=True) as f:
        np.lib.format.write_array(f, values, allow_pickle=False)


def read_index(path: Path, columns=INDEX_COLUMNS, expected_events: Optional[int] = None) -> dict:
    """{column: array, "meta": dict} of a timeline index: the `columns` it holds (a v1 index has no
    flow / bytes; only what is asked is read).  Checked before use (ValueError / EOFError naming what
    is wrong): plain 1-D integer members no larger than the file (a header declaring a huge array is
    refused, never allocated), no pickles, `expected_events` slices (the manifest's kept_events)
    in start order, and track / name / category ids within the lists the index holds."""
    limit = path.size() if hasattr(path, "open") and not isinstance(path, Path) else os.path.getsize(path)
    try:
        with _index_file(path) as source, zipfile.ZipFile(source) as z:
            members = {info.filename[:-len(".npy")]: info for info in z.infolist() if info.filename.endswith(".npy")}
            if "meta" not in members or "start" not in members:
                raise ValueError(f"not a timeline index (members: {sorted(members)[:10]})")
            out = {k: _read_member(z, members[k], limit, "iu") for k in columns if k in members}
            meta = _read_member(z, members["meta"], limit, "u")
    except zipfile.BadZipFile as e:  # a damaged zip is damage like any other: the readers catch ValueError
        raise ValueError(f"damaged zip ({e})") from None
    out["meta"] = _index_meta(meta)
    check_index(out, expected_events)
    return out


def _index_file(path):
    """The index opened for zipfile: a local path as it is, a remote one (logdir.fs.RemoteFile) as
    a file read by ranges (only the members asked for travel)."""
    if hasattr(path, "open") and not isinstance(path, Path):
        return path.open()
    return contextlib.nullcontext(path)


NPY_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def _read_member(z: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int, kinds: str) -> np.ndarray:
    """One .npy member as written by write_index: stored (not compressed), a 1-D array of one of
    `kinds` whose size matches the member's bytes, which are no more than the file's (`limit`)."""
    if info.compress_type != zipfile.ZIP_STORED or info.file_size > limit:
        raise ValueError(f"member {info.filename} is compressed or larger than the file: not written by tb-hwprof")
    with z.open(info) as f:
        dtype, count = _column_header(f, info, kinds)
        values = np.empty(count, dtype=dtype)
        if f.readinto(memoryview(values).cast("B")) != count * dtype.itemsize:
            raise EOFError(f"member {info.filename} ends early")
    return values


def _column_header(f, info: zipfile.ZipInfo, kinds: str) -> tuple:
    """(dtype, values) of the .npy header `f` is at, checked to be one 1-D column of `kinds` that fills
    the rest of the member; `f` is left at the first value."""
    read_header = NPY_HEADERS.get(np.lib.format.read_magic(f))
    if read_header is None:
        raise ValueError(f"member {info.filename} is not a .npy array of format 1 or 2")
    shape, _, dtype = read_header(f)
    if len(shape) != 1 or dtype.kind not in kinds or dtype.hasobject:
        raise ValueError(f"member {info.filename} is {dtype} of shape {shape}, not a column of integers")
    size = shape[0] * dtype.itemsize
    if size != info.file_size - f.tell():
        raise ValueError(f"member {info.filename} declares {shape[0]:,} values ({size:,} bytes) "
                         f"but holds {info.file_size - f.tell():,} bytes")
    return dtype, int(shape[0])


def _index_meta(blob: np.ndarray) -> dict:
    """The index's JSON part: categories, names and tracks as write_index writes them."""
    meta = orjson.loads(blob.tobytes())  # depth-bounded, UTF-8 checked: ValueError on damage
    if not isinstance(meta, dict) or not all(isinstance(meta.get(k), list) for k in ("categories", "names", "tracks")):
        raise ValueError("index meta lacks categories, names or tracks")
    if not all(isinstance(text, str) for text in meta["categories"] + meta["names"]):
        raise ValueError("index meta categories / names are not all text")
    if meta["categories"] != list(TIMELINE_CATEGORIES)[:len(meta["categories"])]:  # new ones are appended
        raise ValueError(f"categories {meta['categories']} differ from this tb-hwprof's {list(TIMELINE_CATEGORIES)}")
    for track in meta["tracks"]:
        _check_track(track)
    return meta


TRACK_TYPES = {"pid": int, "tid": int, "process": str, "thread": str, "kind": str,
               "device": (int, type(None)), "lane_of": (int, type(None))}


def _check_track(track) -> None:
    """One of the index's tracks: Track's fields with their types (pid and tid go into the trace's text)."""
    if not isinstance(track, dict) or not {"pid", "tid", "process", "thread", "kind"} <= set(track) <= set(TRACK_TYPES) \
            or not all(isinstance(v, TRACK_TYPES[k]) and not isinstance(v, bool) for k, v in track.items()):
        raise ValueError(f"index track {str(track)[:100]} is not a track")


def check_index(index: dict, expected_events: Optional[int] = None) -> None:
    """Columns of one length (the manifest's kept_events when given), slices in start order, and
    every id within its list: a lane beyond the track list is damage, never served."""
    n = index["start"].size
    sizes = {k: v.size for k, v in index.items() if k != "meta"}
    if any(size != n for size in sizes.values()) or (expected_events is not None and n != expected_events):
        raise ValueError(f"columns hold {sizes} slices, profile.json says {expected_events}")
    if n > 1 and bool((index["start"][1:] < index["start"][:-1]).any()):
        raise ValueError("slices are not in start order")
    meta = index["meta"]
    for column, listed in (("track", "tracks"), ("name", "names"), ("cat", "categories")):
        values = index.get(column)
        if values is not None and values.size and (int(values.min()) < 0 or int(values.max()) >= len(meta[listed])):
            raise ValueError(f"{column} ids {int(values.min())}..{int(values.max())} beyond the "
                             f"{len(meta[listed])} {listed} the index lists")


def timeline_from_index(index: dict) -> Timeline:
    """The Timeline of a written run's kept slices (already in event order); a v1 index gives no
    flows and no bytes (-1: none)."""
    meta = index["meta"]
    if meta["categories"] != list(TIMELINE_CATEGORIES)[:len(meta["categories"])]:  # new ones are appended
        raise ValueError(f"categories {meta['categories']} differ from this tb-hwprof's {list(TIMELINE_CATEGORIES)}")
    n = index["start"].size
    slices = {c: index[c] if c in index else np.full(n, -1, dtype=np.int64) for c in INDEX_COLUMNS}
    return Timeline([Track(**t) for t in meta["tracks"]], meta["names"], slices)


def index_trace(index: dict, progress=None) -> Iterator[str]:
    """The trace pieces of a written run, from its index alone: exactly what its export wrote
    (for a v1 index: without flows and bytes args)."""
    timeline = timeline_from_index(index)
    keep = np.ones(len(timeline), dtype=bool)  # the index holds the kept slices only, in event order
    return trace_pieces(timeline, np.arange(len(timeline)), _flow_pairs(timeline, keep), progress)


def eager_json(mode: str, kept_events: int) -> bool:
    """Whether the export writes timeline.json.gz (--trace MODE) for this many kept slices."""
    if mode not in TRACE_MODES:
        raise ValueError(f"trace mode {mode!r}: one of {', '.join(TRACE_MODES)}")
    return mode == "always" or (mode == "auto" and kept_events <= TRACE_EAGER_EVENTS)


def write_timeline(timeline: Timeline, trace_path: Path, index_path: Path, window: Optional[Window] = None,
                   mode: str = "auto") -> dict:
    """The index of the slices overlapping `window` (None: all), and the trace file when `mode`
    (--trace: TRACE_MODES) says so; returns the manifest's "timeline" entry (trace_written:
    whether trace_path was written)."""
    keep = kept_mask(timeline, window)
    order = event_order(timeline, keep)
    flows = _flow_pairs(timeline, keep)
    stats = timeline_counts(timeline, keep, flows)
    written = eager_json(mode, stats["kept_events"])
    stats["trace_written"] = written
    stats["uncompressed_bytes"] = write_pieces(trace_pieces(timeline, order, flows), trace_path) \
        if written else None
    write_index(timeline, index_path, order)
    s = timeline.slices
    span = [int(s["start"].min()), int(s["end"].max())] if s["start"].size else None
    stats["window"] = None if window is None else {"start_ns": int(window.start_ns), "end_ns": int(window.end_ns),
                                                   "label": window.label}
    stats["capture_ns"] = span
    return stats


# ---------------------------------------------------------------- a v3 index read by ranges
LOCAL_HEADER = 30  # bytes of a zip local file header before its name and extra field
HEADER_READ = 1024  # bytes read at a column's local header: its name, zip64 extra and .npy header


class RangedIndex:
    """A v3 timeline index read where it lies, by byte ranges (a local file or logdir.fs.RemoteFile):
    opening reads the zip's directory and one range at the front (meta, chunk table, overview); a
    window then reads its chunks' rows of RANGED_COLUMNS, one range per column and run of chunks
    (and, the first time, each column's headers).
    Every member is checked as read_index checks it (1-D integers no larger than the file, ids
    within the lists, start order)."""

    def __init__(self, path, members: Dict[str, zipfile.ZipInfo], expected_events: Optional[int] = None):
        self.path, self.members = path, members
        self.limit = path.size() if _is_remote(path) else os.path.getsize(path)
        self.layouts: Dict[str, tuple] = {}
        self._read_front()
        self.events = int(self.meta.get("events", -1))
        if expected_events is not None and self.events != expected_events:
            raise ValueError(f"columns hold {self.events} slices, profile.json says {expected_events}")

    def _read_front(self) -> None:
        """meta, the chunk table and the overview: the members before the first column, one read."""
        small = ["meta", *CHUNK_MEMBERS, *(OVERVIEW + c for c in OVERVIEW_COLUMNS)]
        missing = [m for m in small + list(RANGED_COLUMNS) if m not in self.members]
        if missing:
            raise ValueError(f"not a v{INDEX_VERSION} timeline index (no {', '.join(missing[:5])})")
        front = min(self.members[c].header_offset for c in RANGED_COLUMNS)
        if any(self.members[m].header_offset + self.members[m].file_size > front for m in small):
            raise ValueError("index members are not laid out as tb-hwprof writes them")
        data = _read_range(self.path, 0, front)
        values = {m: self._member(m, data, "u" if m == "meta" else "iu") for m in small}
        self.meta = _index_meta(values.pop("meta"))
        self.chunks = [values.pop(m) for m in CHUNK_MEMBERS]
        self.overview = {c: values[OVERVIEW + c] for c in OVERVIEW_COLUMNS}
        sizes = {v.size for v in self.overview.values()}
        if len(sizes) != 1 or len({v.size for v in self.chunks}) != 1:
            raise ValueError("index overview or chunk table columns differ in length")
        self._check_ids(self.overview)

    def _member(self, name: str, data: bytes, kinds: str) -> np.ndarray:
        layout = self._parse_layout(name, data, 0, kinds)
        offset, dtype, count = layout
        return np.frombuffer(data, dtype=dtype, count=count, offset=offset).copy()

    def _read_layouts(self) -> None:
        """(data offset, dtype, values) of each of RANGED_COLUMNS, their headers read once (together:
        one round trip where the filesystem reads ranges concurrently)."""
        if self.layouts:
            return
        offsets = [self.members[c].header_offset for c in RANGED_COLUMNS]
        heads = _read_ranges(self.path, [(o, min(o + HEADER_READ, self.limit)) for o in offsets])
        for column, offset, head in zip(RANGED_COLUMNS, offsets, heads):
            layout = self._parse_layout(column, head, offset, "iu")
            if layout[2] != self.meta.get("events"):
                raise ValueError(f"member {column}.npy holds {layout[2]:,} slices, "
                                 f"the index lists {self.meta.get('events')}")
            self.layouts[column] = layout

    def _parse_layout(self, name: str, data: bytes, base: int, kinds: str) -> tuple:
        """The member's local zip header and .npy header, found in `data` (read from `base`)."""
        import io
        import struct
        info = self.members[name]
        at = info.header_offset - base
        if info.compress_type != zipfile.ZIP_STORED or info.file_size > self.limit:
            raise ValueError(f"member {info.filename} is compressed or larger than the file: not written by tb-hwprof")
        if data[at:at + 4] != b"PK\x03\x04":
            raise ValueError(f"member {info.filename}: no zip header where the directory says")
        name_len, extra_len = struct.unpack("<HH", data[at + 26:at + LOCAL_HEADER])
        start = at + LOCAL_HEADER + name_len + extra_len
        f = io.BytesIO(data[start:start + HEADER_READ])
        dtype, count = _column_header(f, info, kinds)
        return base + start + f.tell(), dtype, count

    def rows(self, first: int, last: int) -> Dict[str, np.ndarray]:
        """RANGED_COLUMNS of rows first..last-1 (one range read per column), checked."""
        self._read_layouts()
        out = {}
        ranges = [(offset + first * dtype.itemsize, offset + last * dtype.itemsize)
                  for offset, dtype, _ in (self.layouts[c] for c in RANGED_COLUMNS)]
        for column, (a, b), data in zip(RANGED_COLUMNS, ranges, _read_ranges(self.path, ranges)):
            if len(data) != b - a:
                raise EOFError(f"member {column}.npy ends early")
            out[column] = np.frombuffer(data, dtype=self.layouts[column][1]).copy()
        if out["start"].size > 1 and bool((out["start"][1:] < out["start"][:-1]).any()):
            raise ValueError("slices are not in start order")
        self._check_ids(out)
        return out

    def _check_ids(self, columns: Dict[str, np.ndarray]) -> None:
        meta = self.meta
        for column, listed in (("track", "tracks"), ("name", "names"), ("cat", "categories")):
            values = columns[column]
            if values.size and (int(values.min()) < 0 or int(values.max()) >= len(meta[listed])):
                raise ValueError(f"{column} ids {int(values.min())}..{int(values.max())} beyond the "
                                 f"{len(meta[listed])} {listed} the index lists")
        if columns[DEPTH].size and int(columns[DEPTH].min()) < 0:
            raise ValueError("negative nesting depths")


def open_ranged(path, expected_events: Optional[int] = None) -> Optional[RangedIndex]:
    """The index at `path` to read by ranges, or None for an index older than v3 (read it whole)."""
    try:
        with _index_file(path) as source, zipfile.ZipFile(source) as z:
            members = {i.filename[:-len(".npy")]: i for i in z.infolist() if i.filename.endswith(".npy")}
    except zipfile.BadZipFile as e:
        raise ValueError(f"damaged zip ({e})") from None
    return RangedIndex(path, members, expected_events) if CHUNK_MEMBERS[0] in members else None


def _is_remote(path) -> bool:
    return hasattr(path, "open") and not isinstance(path, Path)


def _read_ranges(path, ranges) -> list:
    """Bytes of each (start, end) range: a remote file's requests go out together."""
    if _is_remote(path):
        return path.read_ranges(ranges)
    return [_read_range(path, a, b) for a, b in ranges]


def _read_range(path, start: int, end: int) -> bytes:
    """Bytes start..end-1 of a local file or a remote one (one range request)."""
    if end <= start:
        return b""
    if _is_remote(path):
        return path.read_range(start, end)
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(end - start)
