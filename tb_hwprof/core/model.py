"""The tool-agnostic profile model every reader produces and every view reads.

A `Profile` is provenance + devices + a kernels table (one row per profiled
launch).  Column names and units are defined once, in `KERNEL_COLUMNS`; the
readers fill what their report holds and leave the rest NaN (never 0: a
missing counter is not a measured zero).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

# name -> (unit, dtype, description).  Order is the table order.
KERNEL_COLUMNS: Dict[str, tuple] = {
    "launch_id": ("", "int", "index of the launch in the report (0-based, report order)"),
    "range_id": ("", "int", "index of the profiling range the launch belongs to"),
    "name": ("", "str", "kernel name as the tool shows it (function name, no parameters)"),
    "demangled_name": ("", "str", "full demangled name, with templates and parameters"),
    "mangled_name": ("", "str", "mangled (linker) name where the report has it"),
    "device": ("", "float", "device id the kernel ran on"),
    "context": ("", "float", "CUDA context id"),
    "stream": ("", "float", "stream id"),
    "duration_ns": ("ns", "float", "GPU time of the launch (gpu__time_duration.sum)"),
    "grid": ("", "str", "grid dimensions \"(x, y, z)\""),
    "block": ("", "str", "block dimensions \"(x, y, z)\""),
    "grid_size": ("blocks", "float", "blocks in the grid"),
    "block_size": ("threads", "float", "threads per block"),
    "registers_per_thread": ("registers", "float", "registers per thread"),
    "shared_mem_bytes": ("bytes", "float", "shared memory per block (static + dynamic)"),
    "waves_per_sm": ("waves", "float", "launch__waves_per_multiprocessor"),
    "achieved_occupancy_pct": ("%", "float", "achieved occupancy: active warps / max warps per SM"),
    "theoretical_occupancy_pct": ("%", "float", "theoretical occupancy"),
    "occupancy_limiter": ("", "str", "what caps theoretical occupancy: registers, shared memory, block size or warps"),
    "occupancy_source": ("", "str", "where theoretical occupancy, its limiter and waves come from when no tool measured "
                         "them: 'theoretical (from launch configuration)' (analysis/occupancy.py); '' when the tool's"),
    "sm_throughput_pct": ("%", "float", "compute (SM) throughput, % of peak"),
    "memory_throughput_pct": ("%", "float", "memory throughput, % of peak (busiest memory unit)"),
    "dram_throughput_pct": ("%", "float", "DRAM throughput, % of peak"),
    "l2_throughput_pct": ("%", "float", "L2 throughput, % of peak"),
    "l1_throughput_pct": ("%", "float", "L1/TEX throughput, % of peak"),
    "busiest_memory_unit": ("", "str", "DRAM, L2 or L1: the memory unit at the top of the tool's own throughput breakdown"),
    "l1_hit_rate_pct": ("%", "float", "L1/TEX sector hit rate"),
    "l2_hit_rate_pct": ("%", "float", "L2 sector hit rate"),
    "dram_bytes_read": ("bytes", "float", "bytes read from DRAM"),
    "dram_bytes_write": ("bytes", "float", "bytes written to DRAM"),
    "dram_bytes": ("bytes", "float", "DRAM bytes read + written"),
    "l2_bytes": ("bytes", "float", "bytes through the L2 (hierarchical roofline)"),
    "l1_bytes": ("bytes", "float", "bytes through the L1 (hierarchical roofline)"),
    "flops_fp64": ("FLOP", "float", "double-precision floating-point operations (FMA = 2)"),
    "flops_fp32": ("FLOP", "float", "single-precision floating-point operations (FMA = 2)"),
    "flops_fp16": ("FLOP", "float", "half-precision floating-point operations (FMA = 2)"),
    "flops_tensor": ("FLOP", "float", "tensor-core operations as the tool's roofline counts them"),
    "tensor_precision": ("", "str", "source precision of most of the launch's tensor-core operations (bf16, fp16, "
                         "tf32, fp8, fp64) where the tool counts them per precision; its roof is flop_per_s_tensor_<it>"),
    "flops": ("FLOP", "float", "sum of the precisions present"),
    "flop_per_s": ("FLOP/s", "float", "achieved FLOP/s"),
    "ai_dram": ("FLOP/byte", "float", "arithmetic intensity against DRAM bytes"),
    "ai_l2": ("FLOP/byte", "float", "arithmetic intensity against L2 bytes"),
    "ai_l1": ("FLOP/byte", "float", "arithmetic intensity against L1 bytes"),
    "peak_flop_per_s": ("FLOP/s", "float", "compute roof used for this kernel (its dominant precision)"),
    "roofline_precision": ("", "str", "precision whose roof applies: fp64, fp32, fp16, tensor or "
                           "tensor_<source precision> (tensor_bf16, ...)"),
    "attainable_flop_per_s": ("FLOP/s", "float", "min over roofs at this kernel's intensities"),
    "roofline_efficiency_pct": ("%", "float", "achieved / attainable FLOP/s"),
    "binding_roof": ("", "str", "roof that bounds this kernel: compute, dram, l2 or l1"),
    "bound": ("", "str", "compute, memory, latency, small-grid, balanced or unknown"),
    "bound_level": ("", "str", "for memory-bound kernels: DRAM, L2 or L1 (busiest unit)"),
    "bound_reason": ("", "str", "one sentence with the numbers behind the label"),
    "occupancy_note": ("", "str", "occupancy limiter and whether occupancy is the lever"),
    # Timeline columns (Nsight Systems and other tracers); NaN for tools that do not record them.
    "start_ns": ("ns", "float", "GPU start timestamp of the launch, on the tool's own clock"),
    "end_ns": ("ns", "float", "GPU end timestamp of the launch, on the tool's own clock"),
    "correlation_id": ("", "float", "id tying the launch to the API call that launched it (CUPTI correlation id)"),
}

STRING_COLUMNS = [c for c, spec in KERNEL_COLUMNS.items() if spec[1] == "str"]
INT_COLUMNS = [c for c, spec in KERNEL_COLUMNS.items() if spec[1] == "int"]

PEAK_SOURCES = ("measured", "datasheet")


def is_count(value: Any) -> bool:
    """A non-negative int (JSON true/false are not counts): what a count read back must be."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclasses.dataclass
class Peak:
    """A device peak and where it comes from (the tool's own measurement or a datasheet)."""

    value: float
    unit: str
    source: str  # one of PEAK_SOURCES
    how: str = ""  # the metric expression or datasheet it came from

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Device:
    id: int
    name: str = ""
    vendor: str = ""
    architecture: str = ""  # e.g. "cc7.5" or "gfx90a"
    compute_capability: str = ""
    sm_count: Optional[int] = None  # SMs (NVIDIA) or CUs (AMD)
    clock_mhz: Optional[float] = None
    memory_clock_mhz: Optional[float] = None
    peaks: Dict[str, Peak] = dataclasses.field(default_factory=dict)
    # Launch limits of one SM (CU on AMD) as the export states them; None where it does not
    # (analysis/occupancy.py then takes them from its per-architecture table).
    warp_size: Optional[int] = None  # threads per warp (wavefront size on AMD)
    max_threads_per_block: Optional[int] = None
    max_warps_per_sm: Optional[int] = None  # resident warps (AMD: waves per CU)
    max_blocks_per_sm: Optional[int] = None  # resident blocks (work-groups)
    registers_per_sm: Optional[int] = None
    registers_per_block: Optional[int] = None
    shared_mem_per_sm: Optional[int] = None  # bytes (AMD: LDS per CU)
    shared_mem_per_block_optin: Optional[int] = None  # bytes a block may opt in to
    reserved_shared_mem_per_block: Optional[int] = None  # bytes the driver keeps per block (1 KB on cc >= 8.0)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["peaks"] = {k: p.to_dict() for k, p in self.peaks.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Device":
        known = {f.name for f in dataclasses.fields(cls)}
        d = {k: v for k, v in d.items() if k in known}  # a newer writer's fields are skipped
        d["peaks"] = {k: Peak(**p) for k, p in d.get("peaks", {}).items()}
        return cls(**d)


@dataclasses.dataclass
class Provenance:
    tool: str  # "ncu", "nsys", ...
    tool_version: str  # "" when the report does not say
    source_path: str
    source_sha256: str
    source_format: str  # "ncu-rep", "ncu-csv-long", "ncu-csv-raw", ...
    export_time: str = ""  # ISO 8601, set when exported

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Profile:
    provenance: Provenance
    devices: List[Device]
    kernels: pd.DataFrame
    # Per launch (same order as `kernels`): {metric name: [value, unit]} as the tool names them.
    raw_metrics: List[Dict[str, list]] = dataclasses.field(default_factory=list)
    # Per launch: the tool's own rule results (rule, type, title, message, speedup).
    rules: List[List[Dict[str, Any]]] = dataclasses.field(default_factory=list)
    notes: List[str] = dataclasses.field(default_factory=list)
    # Tool-computed aggregate tables by name (e.g. "cuda_gpu_kern_sum"); see docs/FORMAT.md.
    summaries: Dict[str, pd.DataFrame] = dataclasses.field(default_factory=dict)
    # Every traced slice of a capture (tracers such as Nsight Systems); None for counter profilers.
    timeline: Optional["Timeline"] = None
    # Framework level of a PyTorch profiler trace (operators, runtime calls, GPU work joined); None
    # for other tools.  Read by the analyses, not written to the logdir as such.
    torch: Optional["TorchTrace"] = None

    def device(self, device_id) -> Optional[Device]:
        for d in self.devices:
            if d.id == device_id:
                return d
        return self.devices[0] if self.devices else None

    def __repr__(self) -> str:
        p = self.provenance
        return (f"Profile({p.tool} {p.tool_version or '?'} from {p.source_path!r}: "
                f"{len(self.kernels)} launches on {[d.name for d in self.devices]})")


def empty_kernels(n: int = 0) -> pd.DataFrame:
    """A kernels table of `n` rows with every column present and missing."""
    data = {}
    for col, (_, dtype, _) in KERNEL_COLUMNS.items():
        if dtype == "str":
            data[col] = pd.Series([""] * n, dtype=object)
        elif dtype == "int":
            data[col] = pd.Series(range(n), dtype="int64")
        else:
            data[col] = pd.Series([math.nan] * n, dtype="float64")
    return pd.DataFrame(data)


def normalise_kernels(rows, copy: bool = True, sparse_absent: bool = False, only=None,
                      scan_text: bool = True) -> pd.DataFrame:
    """A kernels table from per-launch dicts (or a frame): every column, right dtype, NaN where absent.
    copy=False fixes a frame the caller owns in place (no copy of a million-row table).
    sparse_absent=True adds the float columns the rows lack as all-NaN SparseDtype columns, which
    hold no values: a tracer's 1M launches without counters save ~8 MB per column (~260 MB).
    Such a column reads like any other; `.astype("float64")` makes it dense for item assignment.
    only: check just these columns (the others are known to be right already).
    scan_text=False: trust object columns to hold no NaN (a table normalised once already, whose
    later columns would show a wrong dtype), sparing a scan of every text column."""
    if isinstance(rows, pd.DataFrame):
        df = rows.copy() if copy else rows
    else:
        df = pd.DataFrame(rows)
    # Absent columns of one kind share one array (pandas copies on write, and a SparseArray is immutable).
    absent = {"str": lambda: pd.Series(np.full(len(df), "", dtype=object), index=df.index, dtype=object, copy=False),
              "int": lambda: np.arange(len(df), dtype=np.int64),
              "float": (lambda: all_nan_column(len(df))) if sparse_absent else (lambda: np.full(len(df), math.nan))}
    made = {}
    for col, (_, dtype, _) in KERNEL_COLUMNS.items():
        if only is not None and col not in only and col in df:
            continue
        if col not in df:
            if dtype not in made:
                made[dtype] = absent[dtype]()
            df[col] = made[dtype]
            continue
        series = df[col]
        if dtype == "str":
            if series.dtype != object or (scan_text and series.isna().any()):
                df[col] = series.fillna("").astype(object)
        elif dtype == "int":
            if series.dtype != "int64":
                df[col] = series.astype("int64")
        elif series.dtype != "float64" and series.dtype != ALL_NAN_DTYPE:
            df[col] = pd.to_numeric(series, errors="coerce").astype("float64")
    extra = [c for c in df.columns if c not in KERNEL_COLUMNS]
    return df[list(KERNEL_COLUMNS) + extra]


ALL_NAN_DTYPE = pd.SparseDtype("float64", math.nan)


def all_nan_column(n: int) -> pd.arrays.SparseArray:
    """n missing float values that take no memory (a sparse column with no stored value)."""
    return pd.arrays.SparseArray(np.full(n, math.nan), dtype=ALL_NAN_DTYPE)


def is_all_nan_column(column: pd.Series) -> bool:
    """Whether a column is such a sparse column with no stored value (a tracer's counters), known
    without densifying it."""
    return column.dtype == ALL_NAN_DTYPE and column.array.sp_values.size == 0


# ------------------------------------------------------------------ timeline (tracers)
# Slice categories, by code (Timeline.slices["cat"]); the trace file's "cat" strings.  New ones are
# appended: a written index stores codes.  "cpu_op": framework operators (PyTorch aten:: ops),
# "python": Python function frames the framework profiler recorded.  "osrt": OS runtime calls (Nsight Systems' OSRT_API: read,
# ioctl, pthread waits ...) on the CPU threads; "cuda_api" holds any GPU API's host calls (HIP on AMD).
TIMELINE_CATEGORIES = ("kernel", "memcpy", "memset", "cuda_api", "nvtx", "osrt", "cpu_op", "python")
GPU_CATEGORIES = ("kernel", "memcpy", "memset")
# Columns of Timeline.slices: one numpy array each, one value per slice.
SLICE_COLUMNS = {"start": np.int64, "end": np.int64, "track": np.int32, "name": np.int32, "cat": np.int8,
                 "flow": np.int64, "bytes": np.int64}


@dataclasses.dataclass
class Track:
    """One row of a timeline: a CPU thread (pid, tid as the OS numbers them) or a GPU stream."""

    pid: int
    tid: int
    process: str
    thread: str
    kind: str  # "thread" or "stream"
    device: Optional[int] = None  # streams: the GPU
    lane_of: Optional[int] = None  # lane tracks (readers/common/lanes.py): the tid of the track they relieve


@dataclasses.dataclass
class Window:
    """The part of a capture to keep, in the tool's own ns timestamps; label says how it was chosen."""

    start_ns: int
    end_ns: int
    label: str = ""


@dataclasses.dataclass
class Timeline:
    """Slices columnar, as numpy arrays (a 1M-kernel capture is arrays, never 1M Python objects).

    slices[column] per SLICE_COLUMNS: start/end ns, track (index into `tracks`), name (index into
    `names`), cat (index into TIMELINE_CATEGORIES), flow (id shared by a launching API call and
    the GPU operation it launched, -1 for none), bytes (memory operations, -1 otherwise).
    """

    tracks: List[Track]
    names: List[str]
    slices: Dict[str, np.ndarray]
    # The tracer's own range summary (Profile.summaries["nvtx_phases"]) row each range slice is
    # counted in: (slice indices, rows), or None.  The analysis adds the GPU time projected onto
    # each row through it (the rows group by what the slices do not hold: NVTX domain and style).
    # Not written to the trace files.
    range_rows: Optional[Tuple[np.ndarray, np.ndarray]] = None

    def __len__(self) -> int:
        return int(self.slices["start"].size)

    def thread_keys(self) -> np.ndarray:
        """Per track: one int64 naming its thread or stream, the same for a track and its lanes (a code
        per distinct (pid, tid): a pid of 2^31 or more, or a text pid, fits no bit packing)."""
        codes: Dict[tuple, int] = {}
        return np.array([codes.setdefault((t.pid, t.tid if t.lane_of is None else t.lane_of), len(codes))
                         for t in self.tracks], dtype=np.int64)


# Column units of the summary tables, from the suffix of their names (the JSON "units").
SUMMARY_UNITS = {"_ns": "ns", "_pct": "%", "_bytes": "bytes", "_bytes_per_s": "byte/s"}


def units_of(df: pd.DataFrame) -> Dict[str, str]:
    """Column units from the name suffix (longest suffix wins)."""
    units = {}
    for col in df.columns:
        for suffix in sorted(SUMMARY_UNITS, key=len, reverse=True):
            if col.endswith(suffix):
                units[col] = SUMMARY_UNITS[suffix]
                break
    return units


# ------------------------------------------------------------------ framework level (PyTorch)
TORCH_MEMORY_COLUMNS = ("ts_ns", "pid", "tid", "device_type", "device_id", "bytes", "addr", "total_allocated",
                        "total_reserved")


@dataclasses.dataclass
class TorchTrace:
    """A PyTorch profiler trace's operator level, joined to the GPU work (docs/FORMAT.md "PyTorch").

    ops: one row per operator instance (cpu_op, user annotations other than ProfilerStep#N): name,
      cat, start_ns, end_ns, pid, tid, parent (row of the innermost enclosing op on its thread, -1),
      depth, ext, seq, fwd_tid, input_dims / input_types / concrete_inputs (compact JSON text, "").
    runtime: one row per CUDA / HIP runtime or driver call: name, start_ns, end_ns, pid, tid, corr,
      ext, op (row in ops of the innermost op enclosing the call, -1).
    gpu: one row per GPU activity: kind (kernel, memcpy, memset), name, start_ns, end_ns, device,
      stream, corr, ext, bytes, runtime (row of the launching call, -1), op (its op, -1), and the
      launch columns of kernels (grid_*, block_*, registers, shared_mem, blocks_per_sm,
      warps_per_sm, est_occupancy_pct).
    steps: one row per ProfilerStep#N range: step, start_ns, end_ns, pid, tid.
    memory: one row per `[memory]` event (profile_memory=True), in time order (stable): ts_ns, pid,
      tid, device_type (c10 DeviceType: 0 CPU, 1 CUDA, 6 HIP; -1 absent), device_id (-1 for the
      CPU or absent), bytes (signed: an allocation > 0, a free < 0; 0 where absent), addr (-1 where
      absent: traces before PyTorch 1.10), total_allocated / total_reserved (the allocator's totals
      on that device after the event; -1 where absent, as before 1.10).  Empty without memory events.
    """

    ops: pd.DataFrame
    runtime: pd.DataFrame
    gpu: pd.DataFrame
    steps: pd.DataFrame
    device_properties: List[dict] = dataclasses.field(default_factory=list)
    distributed: Optional[dict] = None
    memory: pd.DataFrame = dataclasses.field(default_factory=lambda: pd.DataFrame(
        {c: np.zeros(0, dtype=np.int64) for c in TORCH_MEMORY_COLUMNS}))
