"""PyTorch profiler (Kineto) traces: operators -> runtime calls -> GPU work, as a Profile.

Reads the Chrome-trace JSON torch.profiler writes (plain or gzipped, any file name), every
generation we hold: 2021 categories (Operator, Runtime, Kernel, Memcpy, Memset, "external id") and
current ones (cpu_op, cuda_runtime, cuda_driver, kernel, gpu_memcpy, gpu_memset, python_function,
user_annotation, gpu_user_annotation), CUDA and ROCm (HIP runtime names), ns-resolution timestamps.

The join: a GPU activity's correlation id names the runtime call that launched it; that call's
innermost enclosing operator on its thread (nested by containment, core/nesting.py) is
the operator that launched it.  The result is `Profile.torch` (model.TorchTrace), the kernels table
(one row per kernel, with its operator and input shapes) and the Timeline.
"""
from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import tempfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np
import pandas as pd

from ...core.columnar import first_rows, launching_call, object_factorize, start_then_longest
from ...core.errors import InputError
from ...core.progress import tell
from ...core.model import (SLICE_COLUMNS, TIMELINE_CATEGORIES, TORCH_MEMORY_COLUMNS, Device, Profile, Provenance,
                      Timeline, TorchTrace, Track, normalise_kernels)
from ..common import mapped_input, opening_errors, read_input_bytes, sha256_file
from ..common.lanes import spread_over_lanes
from ..amd.devices import datasheet_peaks as amd_datasheet_peaks
from ..common.datasheets import nvidia_datasheet_peaks
from ...core.nesting import Intervals, depths
from ..common.timeline_builder import GPU_PID_BASE, NameTable
from .decode import STRING_ID_BASE, KinetoEvents, TraceError, decode_events, string_id_code

FORMATS = ("pytorch-trace",)
# Kineto categories, every generation, by the role they play.
OP_CATS = {"cpu_op", "operator", "user_annotation"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "runtime"}
GPU_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset", "memset": "memset"}
GPU_ANNOTATION_CATS = {"gpu_user_annotation"}
PYTHON_CATS = {"python_function"}
STEP_PREFIX = "ProfilerStep#"
MEMORY_EVENT = "[memory]"  # the instant events of profile_memory=True
# A child operator may end this long after its parent (timestamps pass through doubles: at
# today's epoch µs a double resolves 0.25 µs, and ts + dur rounds twice).
NESTING_TOLERANCE_NS = 500
FIX = "pass the .pt.trace.json[.gz] file torch.profiler wrote (tensorboard_trace_handler or export_chrome_trace)"
CAT = {name: code for code, name in enumerate(TIMELINE_CATEGORIES)}
ESTIMATE_COLUMNS = ("est_occupancy_pct", "blocks_per_sm", "warps_per_sm")
STRING_TID_TOP = (1 << 31) - 1  # string tids count down from here (lane tracks from 2**32 - 1)


# ---------------------------------------------------------------- detection
def _text_head(head: bytes) -> str:
    if head[:2] == b"\x1f\x8b":
        try:
            head = zlib.decompressobj(wbits=31).decompress(head, 1 << 16)
        except zlib.error:
            return ""
    return head[:1 << 16].decode("utf-8", errors="replace")


def sniff(path: Path, head) -> Optional[str]:
    """'pytorch-trace' for a Kineto Chrome trace (by content: its keys and categories)."""
    if head is None:
        return None
    text = _text_head(head).lstrip("\ufeff \t\r\n")
    if not text.startswith(("{", "[")):
        return None
    kineto_keys = ('"schemaVersion"', '"deviceProperties"', '"distributedInfo"', '"baseTimeNanoseconds"')
    kineto_cats = ('"cpu_op"', '"Operator"', '"python_function"', '"cuda_runtime"', '"user_annotation"',
                   '"gpu_memcpy"', '"Runtime"', '"ac2g"')
    if '"traceEvents"' in text and any(k in text for k in kineto_keys):
        return "pytorch-trace"
    if any(c in text for c in kineto_cats) and '"ph"' in text:
        return "pytorch-trace"
    return None


# ---------------------------------------------------------------- reading
# A gzip trace inflates to at most this many times its size, and at least 1 GiB is always allowed:
# real Kineto traces compress 10-30x; a gzip of zeros ~1000x (an 8 MB file: 8 GB, past the machine's
# memory).  TB_HWPROF_MAX_INFLATE_BYTES raises (or lowers) the bound.
INFLATE_RATIO = 100
INFLATE_FLOOR = 1 << 30
INFLATE_VARIABLE = "TB_HWPROF_MAX_INFLATE_BYTES"


def inflate_limit(compressed: int) -> int:
    given = os.environ.get(INFLATE_VARIABLE, "")
    return int(given) if given.isdigit() else max(INFLATE_FLOOR, INFLATE_RATIO * compressed)


READ_STEP = 1 << 20  # compressed bytes read at a time
INFLATE_STEP = 16 << 20  # the most one inflate step gives, whatever the ratio
MAP_FROM_BYTES = 64 << 20  # a larger trace is mapped: a plain one from its file, a gzip one once inflated


def inflated_pieces(path: Path, f) -> Iterator[bytes]:
    """The JSON of the gzip file `f` (at its start), INFLATE_STEP bytes at most at a time: a damaged
    gzip is an error naming the file, never partial data, and one that inflates beyond
    inflate_limit() is refused before it takes the machine's memory or disk."""
    compressed = os.fstat(f.fileno()).st_size
    limit, total = inflate_limit(compressed), 0
    inflater, fed, tail, ended = zlib.decompressobj(wbits=31), False, b"", False
    try:
        while True:
            if not tail and not ended:
                tail = f.read(READ_STEP)
                ended = not tail
            if ended and not tail and not fed:
                return  # the file ends where a member does
            fed = fed or bool(tail)
            piece = inflater.decompress(tail, INFLATE_STEP)
            tail = inflater.unconsumed_tail
            total += len(piece)
            if total > limit:
                raise InputError(path, f"inflates to more than {limit:,} bytes ({compressed:,} compressed): far "
                                 f"beyond any real trace", f"set {INFLATE_VARIABLE} to a larger size if it is one")
            if piece:
                yield piece
            if inflater.eof:  # a gzip file may hold several members, one after another
                tail, inflater, fed = inflater.unused_data, zlib.decompressobj(wbits=31), False
            elif ended and not tail and not piece:  # all read, and zlib has nothing more to give
                raise EOFError("the gzip stream is cut short")
    except (EOFError, zlib.error, OSError) as e:
        raise InputError(path, f"damaged gzip ({e})", "copy the trace again; it is truncated or corrupt") from None


@contextlib.contextmanager
def trace_bytes(path: Path) -> Iterator[Tuple[object, bool, Optional[bytes]]]:
    """(data, mapped, own): the trace's JSON for the block and whether it is a read-only map of a
    file, whose pages the scanner may hand back as it passes them (the page cache holds them, not
    the export; the whole trace held had been the export's peak).  A large plain trace is its file
    mapped (sparing a copy of ~0.7 GB and its first-touch page faults, ~0.4 s of a 4M-event export);
    a gzip one that inflates past MAP_FROM_BYTES is inflated into an unlinked temporary file
    (TMPDIR) and mapped from there: a 0.7 GB trace gzipped had peaked at 1.6 GB, 0.9 GB as plain
    (where TMPDIR has no room for it, it is inflated in memory as before, and the progress says so).
    own: the file's bytes where they were read whole (hashed from them), else None (hashed from the
    file).  (A file truncated by another process while mapped would fault: traces are complete once
    torch.profiler has written them.)"""
    head = read_input_bytes(path, 2)
    if head != b"\x1f\x8b":
        if path.stat().st_size < MAP_FROM_BYTES:
            raw = read_input_bytes(path)
            yield raw, False, raw
            return
        with mapped_input(path) as data:  # read instead where the file cannot be mapped
            mapped = isinstance(data, mmap.mmap)
            yield data, mapped, None if mapped else data
        return
    with opening_errors(path):
        f = open(path, "rb")
    with f:
        pieces, inflated, size = inflated_pieces(path, f), [], 0
        for piece in pieces:
            inflated.append(piece)
            size += len(piece)
            if size > MAP_FROM_BYTES:
                break
        else:
            yield b"".join(inflated), False, None
            return
        try:
            spill, mapped = inflated_file(inflated, pieces)
        except OSError as e:  # no room (or no writable folder) in TMPDIR: inflated in memory, as it once was
            tell(f"{path}: cannot inflate the trace into {tempfile.gettempdir()} ({e.strerror or e}): inflating it "
                 "in memory instead (set TMPDIR to a folder with room for it to spare that memory)")
            del inflated, pieces
            f.seek(0)
            yield b"".join(inflated_pieces(path, f)), False, None
            return
        with spill, mapped:
            yield mapped, True, None


def inflated_file(first: List[bytes], rest: Iterator[bytes]):
    """(an unlinked temporary file in TMPDIR, its read-only map) holding the pieces `first` (emptied
    as they are written) and then `rest`; OSError where TMPDIR cannot hold them.  Each piece is
    written on a thread while the next is inflated (both release the GIL; one after the other,
    writing 0.7 GB into the page cache added ~1.2 s to the ~1 s of inflating it)."""
    spill = tempfile.TemporaryFile(prefix="tb-hwprof-trace-", buffering=0)
    try:
        with ThreadPoolExecutor(1, thread_name_prefix="tb-hwprof-inflate") as pool:
            writing = pool.submit(_write_all, spill, first)
            for piece in rest:
                writing.result()
                writing = pool.submit(_write_all, spill, [piece])
            writing.result()
        return spill, mmap.mmap(spill.fileno(), 0, access=mmap.ACCESS_READ)
    except BaseException:
        spill.close()
        raise


def _write_all(f, pieces: List[bytes]) -> None:
    """The pieces written to the unbuffered file `f` (emptied as they are written)."""
    while pieces:
        view = memoryview(pieces.pop(0))
        while view:
            view = view[f.write(view):]


def _sha256_hex(data) -> str:
    return hashlib.sha256(data).hexdigest()


def read(path, fmt: str = "pytorch-trace") -> Profile:
    path = Path(path)
    with trace_bytes(path) as (data, mapped, own):
        try:
            # A large trace on two threads (decode.scan_in_two); a mapped file's pages are handed back as
            # they are scanned (all of them held, the trace's size came on top of the export's peak).
            events = decode_events(data, file_map=mapped)
        except TraceError as e:
            raise InputError(path, f"not a readable PyTorch profiler trace: {e}", FIX) from None
        except RecursionError:  # an arg value (Input Dims) nested thousands deep: no profiler writes that
            raise InputError(path, "damaged trace: a value nested deeper than Python can decode", FIX) from None
        except ValueError as e:  # msgspec's ValidationError: a number beyond what any field holds (1e400, 5,000 digits)
            raise InputError(path, f"damaged trace: {str(e).splitlines()[0]}", FIX) from None
        finally:
            del data
    if len(events) == 0:
        raise InputError(path, "trace has no events", "profile at least one step (check the profiler schedule: "
                         "wait/warmup/active) and pass the trace it wrote")
    # The file's digest is taken on a thread while the events become tables (SHA-256 releases the
    # GIL: the ~0.4 s for a 0.7 GB trace runs beside that Python work, which holds one core): from its
    # bytes where they were read whole, else from the file (a map is closed by now: its pages would
    # count in the peak).
    with ThreadPoolExecutor(1, thread_name_prefix="tb-hwprof-sha256") as pool:
        digest = pool.submit(sha256_file, path) if own is None else pool.submit(_sha256_hex, own)
        del own
        try:
            profile = profile_from_events(events, path, sha256=_DIGEST_PENDING)
        finally:
            sha256 = digest.result()
    profile.provenance.source_sha256 = sha256
    return profile


_DIGEST_PENDING = "pending"  # read() sets the digest its thread takes meanwhile


def profile_from_events(events: KinetoEvents, path: Path, sha256: Optional[str] = None) -> Profile:
    roles = _roles(events)
    torch = _torch_trace(events, roles)
    devices = _devices(events.top.get("deviceProperties") or [])
    notes = []
    if torch.gpu.empty:
        notes.append("CPU-only trace: no GPU kernels, copies or sets were recorded (profile with "
                     "ProfilerActivity.CUDA to see GPU work)")
    unmatched = int((torch.gpu["runtime"] < 0).sum()) if len(torch.gpu) else 0
    if unmatched:
        notes.append(f"{unmatched} GPU activities have no launching runtime call in the trace (launched before "
                     "the profiling window, or by a thread the profiler did not record): no operator for them")
    profile = Profile(
        provenance=Provenance(tool="pytorch", tool_version=_version(events.top), source_path=str(path),
                              source_sha256=sha256 or sha256_file(path), source_format="pytorch-trace"),
        devices=devices, kernels=_kernels_table(torch), notes=notes, torch=torch)
    profile.timeline = _timeline(events, roles, torch, devices)
    return profile


def _version(top: dict) -> str:
    parts = []
    for key in ("cuda_runtime_version", "hip_runtime_version", "cupti_version", "roctracer_version"):
        if key in top:
            parts.append(f"{key.replace('_version', '')} {top[key]}")
    schema = top.get("schemaVersion")
    return ", ".join(([f"schema {schema}"] if schema is not None else []) + parts)


ROLES = ("", "op", "runtime", "gpu_annotation", "python", "kernel", "memcpy", "memset")


def _roles(events: KinetoEvents) -> Dict[str, np.ndarray]:
    """Per complete event, masks by role (from its category, case-insensitive), decided once per
    distinct string and spread by code (no Python work per event)."""
    x = events.x
    table = events.strings
    role_of_cat = {**{c: "op" for c in OP_CATS}, **{c: "runtime" for c in RUNTIME_CATS},
                   **{c: "gpu_annotation" for c in GPU_ANNOTATION_CATS}, **{c: "python" for c in PYTHON_CATS},
                   **GPU_KINDS}
    code_of = {r: i for i, r in enumerate(ROLES)}
    lookup = np.array([code_of[role_of_cat.get(s.lower(), "")] for s in table] + [0], dtype=np.int8)
    role = lookup[np.where(x["cat"] < 0, len(table), x["cat"])]
    step_name = np.array([s.startswith(STEP_PREFIX) for s in table] + [False], dtype=bool)
    is_step = step_name[np.where(x["name"] < 0, len(table), x["name"])]
    is_op = role == code_of["op"]
    roles = {"op": is_op & ~is_step, "step": is_step & is_op, "runtime": role == code_of["runtime"],
             "gpu_annotation": role == code_of["gpu_annotation"], "python": role == code_of["python"]}
    kinds = np.array(["", "", "", "", "", "kernel", "memcpy", "memset"], dtype=object)
    roles["gpu"] = role >= code_of["kernel"]
    roles["gpu_kind"] = kinds[role]
    return roles


class _Side:
    """Columns of a side table (x_gpu / x_op) for some complete-event rows: the rows are looked up
    once, every column then gathered."""

    def __init__(self, events: KinetoEvents, table: str, rows: np.ndarray):
        self.side = getattr(events, table)
        side_rows = self.side["row"]
        self.size = rows.size
        if side_rows.size and rows.size:
            pos = np.minimum(np.searchsorted(side_rows, rows), side_rows.size - 1)
            # where each row's values are and go, as indices: a gather per column, no mask passes
            self.at = np.flatnonzero(side_rows[pos] == rows)
            self.pos = pos[self.at]
        else:
            self.at = self.pos = np.zeros(0, dtype=np.int64)

    def get(self, column: str, fill) -> np.ndarray:
        values = self.side[column]
        out = np.full(self.size, fill, dtype=values.dtype)
        out[self.at] = values[self.pos]
        return out


def _side(events: KinetoEvents, table: str, rows: np.ndarray, column: str, fill):
    """Values of one side-table column for the given complete-event rows."""
    return _Side(events, table, rows).get(column, fill)


def _thread_group(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    return (pid.astype(np.int64) << 32) ^ (tid.astype(np.int64) & 0xFFFFFFFF)


def _torch_trace(events: KinetoEvents, roles) -> TorchTrace:
    x = events.x
    end = x["ts_ns"] + x["dur_ns"]
    op_rows = np.flatnonzero(roles["op"])
    op_rows = op_rows[start_then_longest(x["ts_ns"][op_rows], end[op_rows])]
    # Each column gathered once for these rows (the nesting and the table share them).
    op_start, op_end, op_pid, op_tid = x["ts_ns"][op_rows], end[op_rows], x["pid"][op_rows], x["tid"][op_rows]
    op_iv = Intervals(op_start, op_end, _thread_group(op_pid, op_tid), presorted=True)
    op_side = _Side(events, "x_op", op_rows)
    parent = op_iv.parents(NESTING_TOLERANCE_NS)
    # copy=False: columns stay separate blocks (pandas would otherwise copy same-dtype columns into
    # one 2D block: ~0.35 s at 4M events), the arrays are this function's own.
    ops = pd.DataFrame({
        "name": events.text(x["name"][op_rows]), "cat": events.text(x["cat"][op_rows]),
        "start_ns": op_start, "end_ns": op_end, "pid": op_pid, "tid": op_tid,
        "parent": parent, "depth": depths(parent), "ext": x["ext"][op_rows],
        "seq": op_side.get("seq", -1), "fwd_tid": op_side.get("fwd_tid", -1)}, copy=False)
    for column in ("input_dims", "input_types", "concrete_inputs"):
        ops[column] = events.text(op_side.get(column, -1))

    rt_rows = np.flatnonzero(roles["runtime"])
    rt_rows = rt_rows[np.argsort(x["ts_ns"][rt_rows], kind="stable")]
    rt_start, rt_end, rt_pid, rt_tid = x["ts_ns"][rt_rows], end[rt_rows], x["pid"][rt_rows], x["tid"][rt_rows]
    runtime = pd.DataFrame({
        "name": events.text(x["name"][rt_rows]), "start_ns": rt_start, "end_ns": rt_end,
        "pid": rt_pid, "tid": rt_tid, "corr": x["corr"][rt_rows], "ext": x["ext"][rt_rows],
        "op": op_iv.enclosing(rt_start, rt_end, _thread_group(rt_pid, rt_tid), NESTING_TOLERANCE_NS)}, copy=False)

    gpu_rows = np.flatnonzero(roles["gpu"])
    gpu_rows = gpu_rows[np.argsort(x["ts_ns"][gpu_rows], kind="stable")]
    gpu_side = _Side(events, "x_gpu", gpu_rows)
    gpu = pd.DataFrame({
        "kind": roles["gpu_kind"][gpu_rows], "name": events.text(x["name"][gpu_rows]),
        "start_ns": x["ts_ns"][gpu_rows], "end_ns": end[gpu_rows],
        "device": _gpu_ids(gpu_side, gpu_rows, "device", x["pid"]), "stream": _gpu_ids(gpu_side, gpu_rows, "stream", x["tid"]),
        "corr": x["corr"][gpu_rows], "ext": x["ext"][gpu_rows], "bytes": gpu_side.get("bytes", -1)}, copy=False)
    for column in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers", "shared_mem"):
        gpu[column] = gpu_side.get(column, -1)
    for column in ("blocks_per_sm", "warps_per_sm", "est_occupancy_pct"):
        gpu[column] = gpu_side.get(column, np.nan)
    gpu["runtime"] = launching_call(runtime["corr"].to_numpy(), gpu["corr"].to_numpy())
    launched = gpu["runtime"].to_numpy()
    gpu["op"] = np.where(launched >= 0, runtime["op"].to_numpy()[np.maximum(launched, 0)] if len(runtime) else -1, -1)

    step_rows = np.flatnonzero(roles["step"])
    step_rows = step_rows[np.argsort(x["ts_ns"][step_rows], kind="stable")]
    step_names = events.text(x["name"][step_rows])
    steps = pd.DataFrame({"step": [_step_number(n) for n in step_names], "name": step_names,
                          "start_ns": x["ts_ns"][step_rows], "end_ns": end[step_rows],
                          "pid": x["pid"][step_rows], "tid": x["tid"][step_rows]})
    return TorchTrace(ops=ops, runtime=runtime, gpu=gpu, steps=steps,
                      device_properties=list(events.top.get("deviceProperties") or []),
                      distributed=events.top.get("distributedInfo"), memory=_memory_events(events))


def _memory_events(events: KinetoEvents) -> pd.DataFrame:
    """TorchTrace.memory: the `[memory]` instants' columns, in time order (stable: the trace's order
    breaks ties, as torch-tb-profiler's sort)."""
    instants = events.instants
    try:
        code = events.strings.index(MEMORY_EVENT)
    except ValueError:
        code = -2  # no such string: no row matches
    rows = np.flatnonzero(instants["name"] == code)
    rows = rows[np.argsort(instants["ts_ns"][rows], kind="stable")]
    memory = pd.DataFrame({c: instants[c][rows] for c in TORCH_MEMORY_COLUMNS}, copy=False)
    memory["tid"] = _as_operator_tids(events, memory["tid"].to_numpy())
    return memory


def _as_operator_tids(events: KinetoEvents, tid: np.ndarray) -> np.ndarray:
    """Thread ids as the operators write them: 2021 traces write an operator's tid as text ("25738")
    and a memory event's as a number; such a number becomes that text's id (decode.STRING_ID_BASE)."""
    if tid.size == 0 or not (events.x["tid"] <= STRING_ID_BASE).any():
        return tid
    out = tid.copy()
    index = None
    for value in np.unique(tid[tid >= 0]):
        if index is None:
            index = {text: code for code, text in enumerate(events.strings) if text.isdigit()}
        code = index.get(str(int(value)))
        if code is not None:
            out[tid == value] = STRING_ID_BASE - code
    return out


def _gpu_ids(side: "_Side", rows: np.ndarray, column: str, fallback: np.ndarray) -> np.ndarray:
    """device / stream from the args; else the event's pid / tid (Kineto puts GPU events on pid =
    device, tid = stream; 2021 traces write tid "stream 7")."""
    values = side.get(column, -1)
    missing = values < 0
    values[missing] = np.maximum(fallback[rows][missing], -1)
    return values


def _step_number(name: str) -> int:
    try:
        return int(name[len(STEP_PREFIX):])
    except ValueError:
        return -1


# ---------------------------------------------------------------- devices
def _devices(properties: List[dict]) -> List[Device]:
    devices = []
    for p in properties:
        # A device without an integer id ("cuda:0", an object: a newer or another writer's form) cannot be
        # matched to the events' device numbers: left out, as one without an id.
        if not isinstance(p, dict) or not isinstance(p.get("id"), int) or isinstance(p.get("id"), bool):
            continue
        name = str(p.get("name", ""))
        amd = "AMD" in name or "Instinct" in name or "gcnArchName" in p or "Radeon" in name
        major, minor = p.get("computeMajor"), p.get("computeMinor")
        cc = f"{major}.{minor}" if major is not None and minor is not None else ""
        sms = int(p["numSms"]) if isinstance(p.get("numSms"), int) else None
        peaks = amd_datasheet_peaks(name, sms) if amd else nvidia_datasheet_peaks(name)
        devices.append(Device(id=int(p["id"]), name=name, vendor="AMD" if amd else "NVIDIA", peaks=peaks,
                              architecture=str(p.get("gcnArchName") or (f"cc{cc}" if cc and not amd else "")),
                              compute_capability="" if amd else cc,
                              sm_count=sms, **_launch_limits(p)))
    return devices


def _launch_limits(p: dict) -> dict:
    """model.Device launch limits from a deviceProperties entry (cudaDeviceProp names; ROCm's
    traces spell the LDS per CU maxSharedMemoryPerMultiProcessor).  None where absent."""
    def whole(*keys):
        for key in keys:
            if isinstance(p.get(key), int) and not isinstance(p.get(key), bool) and p[key] > 0:
                return p[key]
        return None
    warp, threads = whole("warpSize"), whole("maxThreadsPerMultiprocessor")
    return {"warp_size": warp, "max_threads_per_block": whole("maxThreadsPerBlock"),
            "max_warps_per_sm": threads // warp if warp and threads else None,
            "registers_per_sm": whole("regsPerMultiprocessor"), "registers_per_block": whole("regsPerBlock"),
            "shared_mem_per_sm": whole("sharedMemPerMultiprocessor", "maxSharedMemoryPerMultiProcessor"),
            "shared_mem_per_block_optin": whole("sharedMemPerBlockOptin")}


# ---------------------------------------------------------------- kernels table
def _kernels_table(torch: TorchTrace) -> pd.DataFrame:
    k = torch.gpu[torch.gpu["kind"] == "kernel"].reset_index(drop=True)
    ops = torch.ops
    op = k["op"].to_numpy()
    has_op = op >= 0
    pick = lambda column: np.where(has_op, ops[column].to_numpy()[np.maximum(op, 0)] if len(ops) else "", "")
    known_grid = k["grid_x"].to_numpy() >= 0
    known_block = k["block_x"].to_numpy() >= 0
    table = pd.DataFrame({
        "launch_id": np.arange(len(k), dtype=np.int64), "range_id": np.zeros(len(k), dtype=np.int64),
        "name": k["name"], "demangled_name": k["name"],
        "device": k["device"].astype(float), "stream": k["stream"].astype(float),
        "duration_ns": (k["end_ns"] - k["start_ns"]).astype(float),
        "start_ns": k["start_ns"].astype(float), "end_ns": k["end_ns"].astype(float),
        "correlation_id": k["corr"].where(k["corr"] >= 0).astype(float),
        "grid": _dim3_text(k, "grid", known_grid), "block": _dim3_text(k, "block", known_block),
        "grid_size": np.where(known_grid, k["grid_x"] * k["grid_y"] * k["grid_z"], np.nan),
        "block_size": np.where(known_block, k["block_x"] * k["block_y"] * k["block_z"], np.nan),
        "registers_per_thread": k["registers"].where(k["registers"] >= 0).astype(float),
        "shared_mem_bytes": k["shared_mem"].where(k["shared_mem"] >= 0).astype(float),
        # Kineto's estimates from the launch configuration: not a measured achieved occupancy.
        "est_occupancy_pct": k["est_occupancy_pct"], "blocks_per_sm": k["blocks_per_sm"],
        "warps_per_sm": k["warps_per_sm"],
        "op": pick("name"), "op_input_dims": pick("input_dims"), "op_input_types": pick("input_types"),
    }, copy=False)
    # Kineto's estimates exist for CUDA only (ROCm traces have none): no all-empty columns.
    table = table.drop(columns=[c for c in ESTIMATE_COLUMNS if not table[c].notna().any()])
    return normalise_kernels(table, copy=False, sparse_absent=True)


def _dim3_text(k: pd.DataFrame, prefix: str, known: np.ndarray) -> np.ndarray:
    """"(x, y, z)" per launch, formatted once per distinct shape."""
    xs, ys, zs = (k[f"{prefix}_{a}"].to_numpy().astype(np.int64) for a in "xyz")
    if xs.size == 0:
        return np.zeros(0, dtype=object)
    codes, shapes = pd.factorize((xs << 32) ^ ((ys & 0xFFFF) << 16) ^ (zs & 0xFFFF))
    texts = np.array([f"({xs[i]}, {ys[i]}, {zs[i]})" for i in first_rows(codes, len(shapes))], dtype=object)
    return np.where(known, texts[codes], "")


# ---------------------------------------------------------------- timeline
def _timeline(events: KinetoEvents, roles, torch: TorchTrace, devices: List[Device]) -> Optional[Timeline]:
    x = events.x
    names = NameTable()
    tracks: List[Track] = []
    track_ids: Dict[tuple, int] = {}
    device_names = {d.id: d.name for d in devices}
    process_names, thread_names = _metadata_names(events)

    def track(key, make) -> int:
        if key not in track_ids:
            track_ids[key] = len(tracks)
            tracks.append(make())
        return track_ids[key]

    def cpu_track(pid: int, tid: int) -> int:
        # A string tid (2021 traces: "thread 1 (python)") is its own name, under a number of its own.
        code = string_id_code(tid)
        named = events.strings[code] if code >= 0 else None
        if named is not None and named.isdigit():  # "25738": an OS thread id written as text
            number, named = int(named), None
        else:  # a negative tid is an int32-wrapped pthread id
            number = (STRING_TID_TOP - code) if named is not None else tid & 0xFFFFFFFF
        return track(("cpu", pid, tid), lambda: Track(
            pid=pid, tid=number, process=process_names.get(pid, f"process {pid}"),
            thread=named if named is not None else thread_names.get((pid, number), f"thread {number}"), kind="thread"))

    def gpu_track(device: int, stream: int) -> int:
        name = device_names.get(device)
        return track(("gpu", device, stream), lambda: Track(
            pid=GPU_PID_BASE + max(device, 0), tid=max(stream, 0), process=f"GPU {device}" + (f" ({name})" if name else ""),
            thread=f"Stream {stream}", kind="stream", device=device))

    parts = []

    def add(rows: np.ndarray, cat: str, track_of, flow=None, nbytes=None):
        if rows.size == 0:
            return
        codes, uniques = pd.factorize(x["name"][rows])
        labels = events.text(np.asarray(uniques, dtype=np.int32))
        parts.append({"start": x["ts_ns"][rows], "end": x["ts_ns"][rows] + x["dur_ns"][rows],
                      "track": track_of(rows), "name": names.codes(list(labels), codes),
                      "cat": CAT[cat], "flow": -1 if flow is None else flow, "bytes": -1 if nbytes is None else nbytes})

    def cpu_tracks(rows):
        return cpu_tracks_of(x["pid"][rows], x["tid"][rows])

    gpu_rows = np.flatnonzero(roles["gpu"])
    gpu_side = _Side(events, "x_gpu", gpu_rows)
    device = _gpu_ids(gpu_side, gpu_rows, "device", x["pid"])
    stream = _gpu_ids(gpu_side, gpu_rows, "stream", x["tid"])

    def gpu_tracks_of(dev, strm):
        return _pair_ids(dev, strm, gpu_track)

    def add_frame(frame: pd.DataFrame, cat: str, end: np.ndarray, flow=None):
        if frame.empty:
            return
        codes, uniques = object_factorize(frame["name"].to_numpy())
        parts.append({"start": frame["start_ns"].to_numpy(), "end": end,
                      "track": cpu_tracks_of(frame["pid"].to_numpy(), frame["tid"].to_numpy()),
                      "name": names.codes(list(uniques), codes), "cat": CAT[cat],
                      "flow": -1 if flow is None else flow, "bytes": -1})

    def cpu_tracks_of(pid, tid):
        return _pair_ids(pid, tid, cpu_track)

    # Operators and calls as nested: one that overhangs its parent by rounding ends with it here
    # (trace viewers drop a slice that is not nested); TorchTrace keeps the recorded times.
    op_end = _clipped_ends(torch.ops["end_ns"].to_numpy(), torch.ops["parent"].to_numpy(), torch.ops["depth"].to_numpy())
    add_frame(torch.ops, "cpu_op", op_end)
    add_frame(torch.steps, "nvtx", torch.steps["end_ns"].to_numpy())
    add(np.flatnonzero(roles["python"]), "python", cpu_tracks)
    rt_end = torch.runtime["end_ns"].to_numpy()
    rt_op = torch.runtime["op"].to_numpy()
    if rt_end.size and op_end.size:
        rt_end = np.where(rt_op >= 0, np.minimum(rt_end, op_end[np.maximum(rt_op, 0)]), rt_end)
    corr = torch.runtime["corr"].to_numpy()
    add_frame(torch.runtime, "cuda_api", rt_end, flow=np.where(corr >= 0, corr, -1))
    for kind in ("kernel", "memcpy", "memset"):
        sel = roles["gpu_kind"][gpu_rows] == kind
        rows = gpu_rows[sel]
        add(rows, kind, lambda r, d=device[sel], s=stream[sel]: gpu_tracks_of(d, s),
            flow=np.where(x["corr"][rows] >= 0, x["corr"][rows], -1),
            nbytes=_side(events, "x_gpu", rows, "bytes", -1) if kind != "kernel" else None)
    ann = np.flatnonzero(roles["gpu_annotation"])
    ann_side = _Side(events, "x_gpu", ann)
    add(ann, "nvtx", lambda r: gpu_tracks_of(_gpu_ids(ann_side, r, "device", x["pid"]), _gpu_ids(ann_side, r, "stream", x["tid"])))
    if not parts:
        return None
    # In no order: the writer puts slices in event order (logdir/trace.py event_order).
    slices = _joined_parts(parts)
    timeline = Timeline(tracks=tracks, names=names.names(), slices=slices)
    # GPU annotations span kernels of their stream; operators overlap by rounding: lanes keep nesting.
    cat = timeline.slices["cat"]
    spread_over_lanes(timeline, np.flatnonzero(np.isin(cat, [CAT["kernel"], CAT["memcpy"], CAT["memset"]])), "overlap")
    return timeline


def _joined_parts(parts: List[dict]) -> Dict[str, np.ndarray]:
    """The parts' columns one after the other, each written once into an array of its SLICE_COLUMNS
    type (a part's value: an array, or one number for all its rows).  Concatenating, then casting,
    made each column twice and a full array per constant: ~0.3 s at 2.6M slices."""
    sizes = [len(p["start"]) for p in parts]
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    slices = {}
    for column, dtype in SLICE_COLUMNS.items():
        out = slices[column] = np.empty(int(bounds[-1]), dtype=dtype)
        for part, lo, hi in zip(parts, bounds[:-1], bounds[1:]):
            out[lo:hi] = part[column]
    return slices


def _pair_ids(a: np.ndarray, b: np.ndarray, make) -> np.ndarray:
    """make(a, b) once per distinct pair, spread to every row.  Pairs are pids / tids / device and
    stream ids (OS ids < 2**22, string ids small negatives): one int64 key each, hashed by pandas."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if a.size == 0:
        return np.zeros(0, dtype=np.int64)
    codes, keys = pd.factorize((a << 32) ^ (b & 0xFFFFFFFF))
    ids = np.array([make(int(a[i]), int(b[i])) for i in first_rows(codes, keys.size)], dtype=np.int64)
    return ids[codes]


def _clipped_ends(end: np.ndarray, parent: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Each end no later than its parent's (clipped), top-down so a clipped parent clips its children."""
    end = end.copy()
    if end.size == 0:
        return end
    for d in range(1, int(depth.max()) + 1):
        rows = np.flatnonzero(depth == d)
        end[rows] = np.minimum(end[rows], end[parent[rows]])
    return end


def _metadata_names(events: KinetoEvents):
    processes, threads = {}, {}
    for m in events.metadata:
        args = m.get("args") or {}
        pid, tid = m.get("pid"), m.get("tid")
        if not isinstance(pid, int):
            continue
        if m.get("name") == "process_name" and isinstance(args.get("name"), str):
            processes[pid] = args["name"]
        elif m.get("name") == "process_labels" and isinstance(args.get("labels"), str) and pid not in processes:
            processes[pid] = args["labels"]
        elif m.get("name") == "thread_name" and isinstance(args.get("name"), str) and isinstance(tid, int):
            threads[(pid, tid)] = args["name"]
    return processes, threads
