"""PyTorch profiler (Kineto) Chrome-trace JSON -> columns (`KinetoEvents`), never one dict per event.

A trace is often 0.5-2 GB of JSON with millions of events; `json.load` builds a dict per event and
takes minutes and several GB (docs/FACTS: torch-tb-profiler, HTA).  This decoder keeps only what the
reader uses, as numpy columns, and interns every string once:

- `x`: complete events (ph "X": operators, runtime calls, kernels, copies, sets, annotations),
- `flows`: flow events (ph "s" / "f" / "t": ac2g, async, fwdbwd ...),
- `instants`: instant events (ph "i" / "I"), with the args of the `[memory]` events profile_memory=True
  writes (MEMORY_INT_ARGS: bytes, addr, total_allocated, total_reserved, device_id, device_type),
- `metadata`: the few ph "M" events (process / thread names and sort order), as dicts,
- `top`: the top-level keys other than traceEvents (deviceProperties, distributedInfo, ...).

Column conventions (both decoders below give the same values):
- strings (cat, name, and text-valued args) are int32 codes into `strings`; -1 where absent;
- ints are int64, -1 where absent or not an integer (a float is truncated, a string is absent);
  but an instant's `bytes` is signed (a free is negative): absent there is 0, as the profiler's own
  readers (torch-tb-profiler) take it;
  an id above 2**63 keeps its low 64 bits (it still tells ids apart);
- pid / tid: an integer as is (negative ones occur: int32-wrapped pthread ids); a string (e.g.
  "Spans", 2021's "stream 7") as STRING_ID_BASE - its code (string_id_code() undoes it);
- ts_ns: the double `ts` (µs) to ns as floor(ts)*1000 + round(frac*1000): every tool reads `ts`
  as a double, and a double at today's epoch µs resolves 0.25 µs, so ts*1000 would lose up to
  256 ns; dur_ns = round(dur*1000);
- args lists (Input Dims, Input type, Concrete Inputs) are kept as their JSON text, compacted.

`decode_events(data)` picks the native scanner (_kineto_scan.c) where it was built, else the
msgspec path below; tests hold the two equal on every sample.
"""
from __future__ import annotations

import dataclasses
import os
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional, Union

import numpy as np

# ---------------------------------------------------------------- the columns
# Complete events are one table of core columns (`x`) plus two side tables that hold only the
# events whose args carry keys of their group, each row naming its event by `row` (index into x):
# `x_gpu` (kernels, copies, sets: ~10% of events) and `x_op` (operator shapes, sequence numbers,
# Python ids, collectives).  35 columns for every one of 4M events would be ~1.1 GB.
# Column -> the arg keys that fill it (first present wins; 2021 traces spell "external id").
CORE_INT_ARGS = {"ext": ("External id", "external id"), "corr": ("correlation",)}
GPU_INT_ARGS = {
    "device": ("device",), "stream": ("stream",), "context": ("context",), "bytes": ("bytes",),
    "registers": ("registers per thread",), "shared_mem": ("shared memory",), "graph_id": ("graph id",),
}
GPU_FLOAT_ARGS = {
    "blocks_per_sm": ("blocks per SM",), "warps_per_sm": ("warps per SM",),
    "est_occupancy_pct": ("est. achieved occupancy %",),
}
GPU_TEXT_ARGS = {"kind": ("kind",)}
DIM3_ARGS = {"grid": "grid", "block": "block"}  # [x, y, z] -> grid_x, grid_y, grid_z (x_gpu)
OP_INT_ARGS = {
    "seq": ("Sequence number",), "fwd_tid": ("Fwd thread id",), "py_id": ("Python id",),
    "py_parent": ("Python parent id",), "in_nelems": ("In msg nelems",), "out_nelems": ("Out msg nelems",),
    "group_size": ("Group size",),
}
# Text args: a string value is interned as is; a list / object as its compact JSON text.
OP_TEXT_ARGS = {
    "input_dims": ("Input Dims",), "input_types": ("Input type",), "concrete_inputs": ("Concrete Inputs",),
    "collective": ("Collective name",), "dtype": ("dtype",),
}
# Instant events' columns (the [memory] events): column -> its arg key.
MEMORY_INT_ARGS = {"bytes": "Bytes", "addr": "Addr", "total_allocated": "Total Allocated",
                   "total_reserved": "Total Reserved", "device_id": "Device Id", "device_type": "Device Type"}
INT_ARGS = {**CORE_INT_ARGS, **GPU_INT_ARGS, **OP_INT_ARGS}
FLOAT_ARGS = dict(GPU_FLOAT_ARGS)
TEXT_ARGS = {**GPU_TEXT_ARGS, **OP_TEXT_ARGS}

X_COLUMNS = ["cat", "name", "pid", "tid", "ts_ns", "dur_ns", "ext", "corr"]
X_GPU_COLUMNS = (["row"] + list(GPU_INT_ARGS) + list(GPU_FLOAT_ARGS) + list(GPU_TEXT_ARGS)
                 + [f"{d}_{a}" for d in DIM3_ARGS for a in "xyz"])
X_OP_COLUMNS = ["row"] + list(OP_INT_ARGS) + list(OP_TEXT_ARGS)
FLOW_COLUMNS = ["ph", "cat", "name", "id", "pid", "tid", "ts_ns", "bp_enclosing"]
INSTANT_COLUMNS = ["cat", "name", "pid", "tid", "ts_ns"] + list(MEMORY_INT_ARGS)
FLOW_PH = {"s": 0, "f": 1, "t": 2}
STRING_ID_BASE = -(1 << 62)  # pid / tid given as a string: STRING_ID_BASE - its code


def string_id_code(value: int) -> int:
    """The string code of a pid / tid given as a string, -1 for one given as a number."""
    return STRING_ID_BASE - value if value <= STRING_ID_BASE else -1
STRING_COLUMNS = {"cat", "name"} | set(TEXT_ARGS)
FLOAT_COLUMNS = set(FLOAT_ARGS)
GPU_KEYS = {k for keys in list(GPU_INT_ARGS.values()) + list(GPU_FLOAT_ARGS.values()) + list(GPU_TEXT_ARGS.values())
            for k in keys} | set(DIM3_ARGS.values())
OP_KEYS = {k for keys in list(OP_INT_ARGS.values()) + list(OP_TEXT_ARGS.values()) for k in keys}


@dataclasses.dataclass
class KinetoEvents:
    strings: List[str]
    x: Dict[str, np.ndarray]
    x_gpu: Dict[str, np.ndarray]
    x_op: Dict[str, np.ndarray]
    flows: Dict[str, np.ndarray]
    instants: Dict[str, np.ndarray]
    metadata: List[dict]
    top: dict
    other_events: int = 0  # events of a phase the reader does not use (counters "C", "B"/"E" pairs ...)

    def text(self, column: np.ndarray) -> np.ndarray:
        """The strings of a code column, "" where absent (object array)."""
        if getattr(self, "_text_table", None) is None or len(self._text_table) != len(self.strings) + 1:
            self._text_table = np.array(self.strings + [""], dtype=object)  # made once (not per column)
        return self._text_table[column]  # -1 (absent): the last entry, ""

    def __len__(self) -> int:
        return int(self.x["ts_ns"].size)


class TraceError(ValueError):
    """The bytes are not a Chrome-trace JSON document (the reader turns it into InputError)."""


TWO_PARTS_FROM = 64 << 20  # bytes: a larger trace is scanned as two parts on two threads
SPLIT_SEARCH = 16 << 20  # bytes after the middle searched for an event's start


def decode_events(data: bytes, file_map: bool = False) -> KinetoEvents:
    """Columns of a whole trace held in memory (uncompressed bytes).  file_map: `data` is a read-only
    map of the trace's file (mmap.ACCESS_READ), whose pages the native scan hands back as it passes
    them; never for any other memory (handed back, an anonymous page would read as zeros)."""
    try:
        from . import _kineto_scan  # built by setup.py where a C compiler is present
    except ImportError:
        _kineto_scan = None
    if _kineto_scan is not None:
        release = bool(file_map)
        if len(data) >= TWO_PARTS_FROM and _cores() >= 2:
            joined = scan_in_two(_kineto_scan, data, len(data) // 2, release)
            if joined is not None:
                return joined
        return _from_native(_kineto_scan.scan(data, release))
    return decode_events_python(data)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_EVENT_START = re.compile(rb",[ \t\r\n]*\{")


def scan_in_two(scanner, data, near: int, release: bool = False) -> Optional[KinetoEvents]:
    """The native scan of `data` as two parts on two threads (the scanner releases the GIL: ~0.5 s
    less for a 0.7 GB trace on two cores), joined to exactly what one scan gives; None where it
    cannot tell (no split found, or damage after the split: the caller's one scan then reports it).

    The split is a guess: the first '{' after a ',' past byte `near`.  The second part reads from
    there as from an event; the first part reads from the start and counts only if it lands on that
    very byte at an event's start (a guess inside a string or a value is passed over: the first part
    then simply reads the whole document, the second is dropped)."""
    found = _EVENT_START.search(data, near, min(len(data), near + SPLIT_SEARCH))
    if found is None:
        return None
    split = found.end() - 1
    # Leaving the pool waits for the second part, also when the first raised (the one scan's error).
    with ThreadPoolExecutor(1, thread_name_prefix="tb-hwprof-scan") as pool:
        rest = pool.submit(scanner.scan_part, data, split, 0, release)
        head, landed, restarted, _ = scanner.scan_part(data, 0, split, release)
        if not landed:
            return _from_native(head)  # the whole document, read by the first part alone
        if rest.exception() is not None:
            return None
        tail, _, tail_restarted, tail_string_ids = rest.result()
        if restarted or tail_restarted:  # a second traceEvents array: the one scan's rule applies
            return None
        return _from_native(_joined(head, tail, np.frombuffer(tail_string_ids or b"", dtype=np.int64), pool))


def _joined(head, tail, tail_string_ids: np.ndarray, pool: ThreadPoolExecutor):
    """One scan's result from its two parts': the tail's string codes renumbered into the head's
    table (new strings appended in their order of first sight, as one interner would), its rows
    after the head's.  The complete events are joined here while `pool` joins the other tables
    (about as many bytes; numpy copies without the GIL)."""
    strings, x, x_gpu, x_op, flows, instants, metadata, top, other = head
    t_strings, t_x, t_gpu, t_op, t_flows, t_instants, t_metadata, t_top, t_other = tail
    index = {text: code for code, text in enumerate(strings)}
    # (+ one unused entry: absent codes index it harmlessly, even where the tail has no strings)
    renumber = np.array([index.setdefault(text, len(index)) for text in t_strings] + [0], dtype=np.int64)
    rows = len(np.asarray(x["ts_ns"]))

    def codes(column: str, values):
        values = np.asarray(values)
        if column in STRING_COLUMNS:
            return np.where(values >= 0, renumber[np.maximum(values, 0)], values).astype(values.dtype)
        if column in ("pid", "tid"):
            named = values <= STRING_ID_BASE
            if not named.any():  # (the usual case: numeric ids)
                return values
            return np.where(named, STRING_ID_BASE - renumber[np.where(named, STRING_ID_BASE - values, 0)], values)
        if column == "row":
            return values + rows
        return values

    def table(one, two, fix=None):
        """The columns joined, each part's freed as soon as it is copied (the peak holds one column twice)."""
        out = {}
        for column in list(one):
            second = codes(column, two.pop(column))
            if fix is not None:
                second = fix(column, second)
            out[column] = np.concatenate([np.asarray(one.pop(column)), second])
        return out

    def flow_ids(column, values):
        if column == "id" and tail_string_ids.size:
            values = values.copy()
            values[tail_string_ids] = renumber[values[tail_string_ids]]
        return values

    others = pool.submit(lambda: (table(x_gpu, t_gpu), table(x_op, t_op), table(flows, t_flows, flow_ids),
                                  table(instants, t_instants)))
    complete = table(x, t_x)
    return (list(index), complete, *others.result(), list(metadata) + list(t_metadata), list(top) + list(t_top),
            other + t_other)


def decode_events_python(data: bytes) -> KinetoEvents:
    """The msgspec path, every failure on damaged input a TraceError (as the native scanner's)."""
    try:
        return decode_events_msgspec(data)
    except (OverflowError, RecursionError) as e:  # a ts beyond int64 ns, nesting deeper than Python's stack
        raise TraceError(f"not a Chrome trace ({type(e).__name__}: {e})") from None
    except ValueError as e:  # msgspec's errors on values inside raw args (1e400 ...) are ValueErrors
        if isinstance(e, TraceError):
            raise
        raise TraceError(f"not a Chrome trace ({e})") from None


def _from_native(result) -> KinetoEvents:
    """KinetoEvents of _kineto_scan.scan's result: its column buffers as arrays (no copy), the few
    metadata events and top-level values (JSON text) decoded here as the msgspec path decodes them."""
    import msgspec

    strings, x, x_gpu, x_op, flows, instants, metadata, top, other = result
    try:
        raws = dict(top)  # a repeated key: the last value, at the first place (as the reference's dict)
        top = {key: msgspec.json.decode(raw) for key, raw in raws.items()}
        metadata = [_metadata_event(msgspec.json.decode(raw)) for raw in metadata]
    except msgspec.DecodeError as e:
        raise TraceError(f"not valid JSON ({e})") from None
    except RecursionError:  # a value nested deeper than Python's stack (the scanner itself has no limit)
        raise TraceError("not a Chrome trace (a value nested thousands of levels deep)") from None
    return KinetoEvents(strings=strings, x=_arrays(x), x_gpu=_arrays(x_gpu), x_op=_arrays(x_op), flows=_arrays(flows),
                        instants=_arrays(instants), metadata=metadata, top=top, other_events=other)


def _arrays(columns: dict) -> Dict[str, np.ndarray]:
    return {column: np.asarray(values) for column, values in columns.items()}  # dtype from the buffer's format


def _metadata_event(full: dict) -> dict:
    return {"name": full.get("name"), "pid": full.get("pid"), "tid": full.get("tid"), "args": full.get("args") or {}}


# ---------------------------------------------------------------- the msgspec path
def _struct_types():
    """msgspec types for one event, imported on first use (msgspec is imported only to read traces)."""
    import msgspec

    number = Union[int, float, str, None]
    fields = []
    for column, keys in list(INT_ARGS.items()) + list(FLOAT_ARGS.items()):
        fields += [(f"{column}_{i}", number, msgspec.field(default=None, name=key)) for i, key in enumerate(keys)]
    for column, keys in TEXT_ARGS.items():
        fields += [(f"{column}_{i}", msgspec.Raw, msgspec.field(default=None, name=key))
                   for i, key in enumerate(keys)]
    for column, key in DIM3_ARGS.items():
        fields.append((f"{column}_0", msgspec.Raw, msgspec.field(default=None, name=key)))
    fields += [(f"memory_{column}", number, msgspec.field(default=None, name=key))
               for column, key in MEMORY_INT_ARGS.items()]
    args = msgspec.defstruct("Args", fields, gc=False)
    event = msgspec.defstruct("Event", [
        ("ph", Union[str, None], None), ("cat", Union[str, None], None), ("name", Union[str, None], None),
        ("pid", Union[int, str, None], None), ("tid", Union[int, str, None], None),
        ("ts", Union[int, float, None], None), ("dur", Union[int, float, None], None),
        ("id", Union[int, str, None], None), ("bp", Union[str, None], None),
        ("args", Union[args, None], None)], gc=False)
    raw_args = msgspec.defstruct("RawArgs", [("args", Union[msgspec.Raw, None], None)], gc=False)
    return msgspec, event, raw_args


class _Interner:
    def __init__(self):
        self.index: Dict[str, int] = {}

    def code(self, value) -> int:
        if value is None:
            return -1
        return self.index.setdefault(value, len(self.index))


def _int_or_absent(value) -> int:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return -1
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return -1
        value = int(value)
    return ((value + (1 << 63)) % (1 << 64)) - (1 << 63)  # low 64 bits, as int64


def _float_or_nan(value) -> float:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return float("nan")
    return float(value)


def _compact_json(raw) -> Optional[str]:
    """Compact JSON text of a list / object, the string itself for a string, None for null."""
    import msgspec

    value = msgspec.json.decode(raw)
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return msgspec.json.encode(value).decode("utf-8")


def _dim3(raw) -> List[int]:
    import msgspec

    value = msgspec.json.decode(raw) if raw is not None else None
    if isinstance(value, list) and len(value) == 3 and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return [_int_or_absent(v) for v in value]
    return [-1, -1, -1]


def _ts_ns(ts) -> int:
    if ts is None or isinstance(ts, bool):
        return -1
    ts = float(ts)
    whole = np.floor(ts)
    return int(whole) * 1000 + int(round((ts - whole) * 1000))


def _track_id(value, strings: _Interner) -> int:
    if isinstance(value, str):
        return STRING_ID_BASE - strings.code(value)
    return _int_or_absent(value) if value is not None else 0


def decode_events_msgspec(data: bytes) -> KinetoEvents:
    """The pure-Python decoder (msgspec structs, a batch at a time); the reference for the native one."""
    msgspec, event_type, _ = _struct_types()
    try:
        if data.lstrip()[:1] == b"[":  # the Chrome "JSON Array Format": events only
            raws, top = msgspec.json.decode(data, type=List[msgspec.Raw]), {}
        else:
            parts = msgspec.json.decode(data, type=Dict[str, msgspec.Raw])
            if "traceEvents" not in parts:
                raise TraceError("no traceEvents array")
            raws = msgspec.json.decode(parts.pop("traceEvents"), type=List[msgspec.Raw])
            top = {k: msgspec.json.decode(v) for k, v in parts.items()}
    except msgspec.DecodeError as e:
        raise TraceError(f"not valid JSON ({e})") from None
    except msgspec.ValidationError as e:
        raise TraceError(f"not a Chrome trace ({e})") from None
    strings = _Interner()
    x = {c: [] for c in X_COLUMNS}
    x_gpu = {c: [] for c in X_GPU_COLUMNS}
    x_op = {c: [] for c in X_OP_COLUMNS}
    flows = {c: [] for c in FLOW_COLUMNS}
    instants = {c: [] for c in INSTANT_COLUMNS}
    metadata: List[dict] = []
    other = 0
    text_codes: Dict[bytes, int] = {}
    dim3_cache: Dict[bytes, list] = {}
    batch = 50_000
    for first in range(0, len(raws), batch):
        try:
            events = msgspec.json.decode(b"[" + b",".join(raws[first:first + batch]) + b"]", type=List[event_type])
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise TraceError(f"an event is not a Chrome-trace event ({e})") from None
        for position, e in enumerate(events):
            ph = e.ph
            if ph == "X":
                _add_complete(e, x, x_gpu, x_op, strings, text_codes, dim3_cache)
            elif ph in FLOW_PH:
                flows["ph"].append(FLOW_PH[ph])
                flows["cat"].append(strings.code(e.cat))
                flows["name"].append(strings.code(e.name))
                flows["id"].append(_int_or_absent(e.id) if not isinstance(e.id, str) else strings.code(e.id))
                flows["pid"].append(_track_id(e.pid, strings))
                flows["tid"].append(_track_id(e.tid, strings))
                flows["ts_ns"].append(_ts_ns(e.ts))
                flows["bp_enclosing"].append(1 if e.bp == "e" else 0)
            elif ph in ("i", "I"):
                instants["cat"].append(strings.code(e.cat))
                instants["name"].append(strings.code(e.name))
                instants["pid"].append(_track_id(e.pid, strings))
                instants["tid"].append(_track_id(e.tid, strings))
                instants["ts_ns"].append(_ts_ns(e.ts))
                _add_memory_args(e.args, instants)
            elif ph == "M":
                full = msgspec.json.decode(raws[first + position])
                metadata.append({"name": full.get("name"), "pid": full.get("pid"), "tid": full.get("tid"),
                                 "args": full.get("args") or {}})
            else:
                other += 1
    return KinetoEvents(strings=list(strings.index), x=_columns(x), x_gpu=_columns(x_gpu), x_op=_columns(x_op), flows=_columns(flows),
                        instants=_columns(instants), metadata=metadata, top=top, other_events=other)


def _add_memory_args(a, instants: Dict[str, list]) -> None:
    """An instant's MEMORY_INT_ARGS columns: -1 where absent, but bytes 0 (signed: see the module doc)."""
    for column in MEMORY_INT_ARGS:
        value = getattr(a, f"memory_{column}") if a is not None else None
        if column == "bytes":
            instants[column].append(0 if value is None or isinstance(value, str) else _int_or_absent(value))
        else:
            instants[column].append(_int_or_absent(value))


def _first(a, column: str, keys) -> object:
    for i in range(len(keys)):
        value = getattr(a, f"{column}_{i}")
        if value is not None:
            return value
    return None


def _text_code(raw, strings: _Interner, text_codes: dict) -> int:
    if raw is None:
        return -1
    key = bytes(raw)
    code = text_codes.get(key)
    if code is None:
        text = _compact_json(raw)
        code = text_codes[key] = strings.code(text) if text is not None else -1
    return code


def _add_complete(e, x: Dict[str, list], x_gpu: Dict[str, list], x_op: Dict[str, list], strings: _Interner,
                  text_codes: dict, dim3_cache: dict) -> None:
    row = len(x["cat"])
    x["cat"].append(strings.code(e.cat))
    x["name"].append(strings.code(e.name))
    x["pid"].append(_track_id(e.pid, strings))
    x["tid"].append(_track_id(e.tid, strings))
    x["ts_ns"].append(_ts_ns(e.ts))
    x["dur_ns"].append(int(round(float(e.dur) * 1000)) if isinstance(e.dur, (int, float)) and not isinstance(e.dur, bool) else 0)
    a = e.args
    for column, keys in CORE_INT_ARGS.items():
        x[column].append(_int_or_absent(_first(a, column, keys)) if a is not None else -1)
    if a is None:
        return
    gpu = {column: _first(a, column, keys) for column, keys in {**GPU_INT_ARGS, **GPU_FLOAT_ARGS, **GPU_TEXT_ARGS}.items()}
    dims = {column: getattr(a, f"{column}_0") for column in DIM3_ARGS}
    if any(v is not None for v in gpu.values()) or any(v is not None for v in dims.values()):
        x_gpu["row"].append(row)
        for column in GPU_INT_ARGS:
            x_gpu[column].append(_int_or_absent(gpu[column]))
        for column in GPU_FLOAT_ARGS:
            x_gpu[column].append(_float_or_nan(gpu[column]))
        for column in GPU_TEXT_ARGS:
            x_gpu[column].append(_text_code(gpu[column], strings, text_codes))
        for column, raw in dims.items():
            key = bytes(raw) if raw is not None else b""
            values = dim3_cache.get(key)
            if values is None:
                values = dim3_cache[key] = _dim3(raw)
            for axis, v in zip("xyz", values):
                x_gpu[f"{column}_{axis}"].append(v)
    op = {column: _first(a, column, keys) for column, keys in {**OP_INT_ARGS, **OP_TEXT_ARGS}.items()}
    if any(v is not None for v in op.values()):
        x_op["row"].append(row)
        for column in OP_INT_ARGS:
            x_op[column].append(_int_or_absent(op[column]))
        for column in OP_TEXT_ARGS:
            x_op[column].append(_text_code(op[column], strings, text_codes))


def _columns(lists: Dict[str, list]) -> Dict[str, np.ndarray]:
    out = {}
    for column, values in lists.items():
        if column in FLOAT_COLUMNS:
            out[column] = np.array(values, dtype=np.float64)
        elif column in STRING_COLUMNS:
            out[column] = np.array(values, dtype=np.int32)
        elif column == "ph":
            out[column] = np.array(values, dtype=np.int8)
        elif column == "bp_enclosing":
            out[column] = np.array(values, dtype=np.bool_)
        else:
            out[column] = np.array(values, dtype=np.int64)
    return out
