"""Nsight Compute metric names -> model columns, shared by the .ncu-rep and CSV readers.

Both readers hand over one mapping per launch: metric name (as Nsight Compute
names it) -> value in the metric's base unit (ns, byte, %, inst, cycle, hz...).
Everything here uses only what that mapping holds; a column whose inputs are
absent stays NaN.
"""
from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Dict, Mapping, Optional

if TYPE_CHECKING:
    from ...core.model import Device


Metrics = Mapping[str, object]

DURATION = "gpu__time_duration.sum"
SM_THROUGHPUT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY_THROUGHPUT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
# Renamed across versions: the newer SOL section uses gpu__dram_throughput.
DRAM_THROUGHPUT = ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                   "dram__throughput.avg.pct_of_peak_sustained_elapsed")
L2_THROUGHPUT = ("lts__throughput.avg.pct_of_peak_sustained_elapsed",)
L1_THROUGHPUT = ("l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
                 "l1tex__throughput.avg.pct_of_peak_sustained_active")
ACHIEVED_OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
THEORETICAL_OCCUPANCY = "sm__maximum_warps_per_active_cycle_pct"
WAVES = "launch__waves_per_multiprocessor"
L1_HIT = "l1tex__t_sector_hit_rate.pct"
L2_HIT = "lts__t_sector_hit_rate.pct"
OCCUPANCY_LIMITS = {  # launch__occupancy_limit_* (blocks per SM each resource allows) -> label
    "launch__occupancy_limit_registers": "registers",
    "launch__occupancy_limit_shared_mem": "shared memory",
    "launch__occupancy_limit_blocks": "block size",
    "launch__occupancy_limit_warps": "warps",
}
# Sub-metric name stems per precision: {f,d,h}{add,mul,fma}.
PRECISION_PREFIX = {"fp64": "d", "fp32": "f", "fp16": "h"}
SMSP_PER_CYCLE = "smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed"
SM_COUNT_OP = "sm__sass_thread_inst_executed_op_{op}_pred_on.sum"
SMSP_COUNT_OP = "smsp__sass_thread_inst_executed_op_{op}_pred_on.sum"
PEAK_FMA = "sm__sass_thread_inst_executed_op_{p}fma_pred_on.sum.peak_sustained"
TENSOR_X512 = "derived__smsp__inst_executed_pipe_tensor_x512"
OPS = ("add", "mul", "fma")
# The names above per precision letter, formatted once: (add, mul, fma) each.
RATE_NAMES = {p: tuple(SMSP_PER_CYCLE.format(op=p + op) for op in OPS) for p in PRECISION_PREFIX.values()}
COUNT_NAMES = {p: tuple((SM_COUNT_OP.format(op=p + op), SMSP_COUNT_OP.format(op=p + op)) for op in OPS)
               for p in PRECISION_PREFIX.values()}
TENSOR_PEAK_X512 = "derived__sm__inst_executed_pipe_tensor_x512"
# Hopper and later (Nsight Compute 2025.3 on an H200; no x512 metric there) count tensor-core work in
# operations (an FMA = 2) per source precision: sm__ops_path_tensor_src_<type>[_dst_<type>]
# [_sparsity_on|off].sum, and per instruction kind (hmma, hgmma, ...) under sm__ops_path_tensor_op_.
# Integer types (int8, int1) are operations, not FLOPs: left out.
TENSOR_PREFIX = "sm__ops_path_tensor_"
TENSOR_PRECISIONS = ("fp64", "tf32", "fp16", "bf16", "fp8")
_TENSOR_NAME = r"sm__ops_path_tensor_(op_[a-z0-9]+_)?src_(fp64|tf32|fp16|bf16|fp8)(?:_dst_[a-z0-9]+)?(_sparsity_o(?:n|ff))?"
TENSOR_METRIC = re.compile(_TENSOR_NAME + r"\.(sum(?:\.per_second|\.peak_sustained)?)")
TENSOR_COUNT, TENSOR_RATE, TENSOR_PEAK = "sum", "sum.per_second", "sum.peak_sustained"  # the suffixes read


def num(m: Metrics, *names: str) -> float:
    """The first of `names` present as a number, else NaN."""
    for name in names:
        v = m.get(name)
        if v.__class__ is float:  # most values: no conversion (~100 lookups a launch)
            if v == v:
                return v
            continue
        if v is None or isinstance(v, str):
            continue
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if not math.isnan(f):
            return f
    return math.nan


def text(m: Metrics, name: str) -> str:
    v = m.get(name)
    return "" if v is None else str(v)


def _dims(m: Metrics, prefix: str) -> str:
    xyz = [num(m, f"{prefix}_{a}") for a in "xyz"]
    if any(math.isnan(v) for v in xyz):
        return ""
    return "(" + ", ".join(str(int(v)) for v in xyz) + ")"


def _sum_or_nan(*values: float) -> float:
    present = [v for v in values if not math.isnan(v)]
    return sum(present) if present else math.nan


def _elapsed_seconds(m: Metrics) -> float:
    """Kernel time in s for FLOP/s: the duration, else SM cycles / SM clock."""
    d = num(m, DURATION)
    if not math.isnan(d):
        return d * 1e-9
    cycles = num(m, "sm__cycles_elapsed.avg", "smsp__cycles_elapsed.avg")
    hz = num(m, "sm__cycles_elapsed.avg.per_second", "smsp__cycles_elapsed.avg.per_second")
    return cycles / hz if cycles > 0 and hz > 0 else math.nan


# Nsight Compute 2025.3's half-precision roofline counts packed instructions (HADD2, HMUL2, HFMA2):
# hadd x 2 + hmul x 2 + hfma x 4, its peak hfma x 4 (SpeedOfLight_HierarchicalHalfRooflineChart's
# derived__*_hfma_pred_on_x4); a report carrying that metric is counted its way, others as before.
HALF_PACKED = "derived__smsp__sass_thread_inst_executed_op_hfma_pred_on_x4"


def op_factors(m: Metrics, p: str):
    """FLOPs per (add, mul, fma) thread instruction of precision letter `p`, as the report's tool counts."""
    return (2.0, 2.0, 4.0) if p == "h" and HALF_PACKED in m else (1.0, 1.0, 2.0)


def precision_flops(m: Metrics, precision: str) -> float:
    """FLOPs of one precision: add + mul + 2 x fma, as Nsight Compute's roofline counts them.

    Full/roofline sets give per-cycle rates over smsp elapsed cycles; `--metrics` runs
    give plain counts (sm__ or smsp__ rollups). Count = rate x elapsed cycles.
    """
    p = PRECISION_PREFIX[precision]
    cycles = num(m, "smsp__cycles_elapsed.avg")
    if math.isnan(cycles):
        # Rate x clock x time is the same count when only the clock is there.
        hz = num(m, "smsp__cycles_elapsed.avg.per_second")
        secs = num(m, DURATION) * 1e-9
        cycles = hz * secs
    rates = [num(m, name) for name in RATE_NAMES[p]]
    if not any(math.isnan(r) for r in rates) and not math.isnan(cycles):
        return sum(f * r for f, r in zip(op_factors(m, p), rates)) * cycles
    counts = [num(m, *names) for names in COUNT_NAMES[p]]
    if any(math.isnan(c) for c in counts):
        return math.nan
    return sum(f * c for f, c in zip(op_factors(m, p), counts))


def tensor_flops(m: Metrics) -> float:
    """Tensor-pipe FLOPs the way Nsight Compute's tensor roofline counts them (inst x 512)."""
    rate = num(m, TENSOR_X512)
    cycles = num(m, "smsp__cycles_elapsed.avg")
    if math.isnan(cycles):
        cycles = num(m, "smsp__cycles_elapsed.avg.per_second") * num(m, DURATION) * 1e-9
    return rate * cycles


_TENSOR_NAMES: Dict[tuple, list] = {}  # a report's metric names (one tuple per distinct set) -> its tensor metrics


def _tensor_names(m: Metrics) -> list:
    """(name, instruction kind or None, precision, sparsity suffix or None, rollup suffix) of the
    launch's tensor metrics; found once per distinct set of names (a report's launches share one:
    a scan of every name per launch cost ~25% of reading a 105-launch report)."""
    names = tuple(m)
    found = _TENSOR_NAMES.get(names)
    if found is None:
        found = [(name, *match.groups()) for name in names if name.startswith(TENSOR_PREFIX)
                 for match in [TENSOR_METRIC.fullmatch(name)] if match]
        if len(_TENSOR_NAMES) >= 8:
            _TENSOR_NAMES.clear()
        _TENSOR_NAMES[names] = found
    return found


def _tensor_matches(m: Metrics, suffix: str):
    """(name, instruction kind or None, precision, sparsity suffix or None) of the launch's tensor
    metrics ending in `suffix` (TENSOR_COUNT, TENSOR_RATE or TENSOR_PEAK)."""
    for name, kind, precision, sparsity, rollup in _tensor_names(m):
        if rollup == suffix:
            yield name, kind, precision, sparsity


def tensor_ops_by_precision(m: Metrics, pattern: str = TENSOR_COUNT) -> Dict[str, float]:
    """{source precision: tensor-core operations} from the per-precision totals (not the
    per-instruction breakdown, which counts the same work again); {} for reports without them."""
    out: Dict[str, float] = {}
    for name, kind, precision, _ in _tensor_matches(m, pattern):
        value = num(m, name)
        if kind is None and not math.isnan(value):
            out[precision] = out.get(precision, 0.0) + value
    return out


def dense_tensor_peaks(m: Metrics) -> Dict[str, float]:
    """{source precision: dense tensor-core operations per cycle}, the device's highest: the
    per-instruction peaks without sparsity (`_sparsity_on` is 2:4 sparse work, twice as fast), else
    the per-precision total's `_sparsity_off` peak, else its only one (fp64 has no sparse kind).  The
    per-precision total without a sparsity word is the sparse peak where the precision has one."""
    by_kind: Dict[str, float] = {}
    totals: Dict[str, Dict[Optional[str], float]] = {}
    for name, kind, precision, sparsity in _tensor_matches(m, TENSOR_PEAK):
        value = num(m, name)
        if math.isnan(value) or value <= 0 or sparsity == "_sparsity_on":
            continue
        if kind is not None:
            by_kind[precision] = max(by_kind.get(precision, 0.0), value)
        else:
            totals.setdefault(precision, {})[sparsity] = value
    for precision, peaks in totals.items():
        if precision not in by_kind:
            by_kind[precision] = peaks.get("_sparsity_off", peaks.get(None) if len(peaks) == 1 else math.nan)
    return {k: v for k, v in by_kind.items() if not math.isnan(v)}


def dominant_tensor_precision(ops: Dict[str, float]) -> str:
    """The source precision that did most tensor-core operations; "" when none did any."""
    best = max(ops.items(), key=lambda kv: kv[1], default=("", 0.0))
    return best[0] if best[1] > 0 else ""


def level_bytes(m: Metrics):
    """(dram, l2, l1) bytes moved, from counts or from rate x time."""
    secs = num(m, DURATION) * 1e-9
    dram = num(m, "dram__bytes.sum")
    if math.isnan(dram):
        read, write = num(m, "dram__bytes_read.sum"), num(m, "dram__bytes_write.sum")
        dram = read + write if not (math.isnan(read) or math.isnan(write)) \
            else num(m, "dram__bytes.sum.per_second") * secs
    l2 = num(m, "lts__t_bytes.sum")
    if math.isnan(l2):
        l2 = num(m, "lts__t_bytes.sum.per_second") * secs
    l1 = num(m, "l1tex__t_bytes.sum")
    if math.isnan(l1):
        l1 = num(m, "l1tex__t_bytes.sum.per_second") * secs
    return dram, l2, l1


MEMORY_BREAKDOWN = "breakdown:gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
UNIT_LEVEL = {"dram": "DRAM", "fbpa": "DRAM", "lts": "L2", "l1tex": "L1"}


def busiest_memory_unit(m: Metrics) -> str:
    """The level of the top sub-metric of the memory throughput breakdown, as Nsight Compute's
    SOL rule names it ("identify the DRAM bottleneck"); "" when the report has no breakdown."""
    parts = text(m, MEMORY_BREAKDOWN).split(",")
    scored = [(num(m, name), name) for name in parts if name]
    scored = [(v, name) for v, name in scored if not math.isnan(v)]
    if not scored:
        return ""
    unit = max(scored)[1].split("__")[0]
    return UNIT_LEVEL.get(unit, "")


def occupancy_limiter(m: Metrics) -> str:
    """The resource allowing the fewest blocks per SM; ties list every limiter."""
    limits = {label: num(m, name) for name, label in OCCUPANCY_LIMITS.items()}
    limits = {k: v for k, v in limits.items() if not math.isnan(v)}
    if not limits:
        return ""
    low = min(limits.values())
    return ", ".join(k for k, v in limits.items() if v == low)


def kernel_fields(m: Metrics) -> Dict[str, object]:
    """Model columns for one launch (before analysis fills bound/roofline)."""
    row: Dict[str, object] = {
        "duration_ns": num(m, DURATION),
        "grid": _dims(m, "launch__grid_dim"),
        "block": _dims(m, "launch__block_dim"),
        "grid_size": num(m, "launch__grid_size"),
        "block_size": num(m, "launch__block_size"),
        "registers_per_thread": num(m, "launch__registers_per_thread"),
        "shared_mem_bytes": _sum_or_nan(num(m, "launch__shared_mem_per_block_static"),
                                        num(m, "launch__shared_mem_per_block_dynamic")),
        "waves_per_sm": num(m, WAVES),
        "achieved_occupancy_pct": num(m, ACHIEVED_OCCUPANCY),
        "theoretical_occupancy_pct": num(m, THEORETICAL_OCCUPANCY),
        "occupancy_limiter": occupancy_limiter(m),
        "sm_throughput_pct": num(m, SM_THROUGHPUT),
        "memory_throughput_pct": num(m, MEMORY_THROUGHPUT),
        "dram_throughput_pct": num(m, *DRAM_THROUGHPUT),
        "l2_throughput_pct": num(m, *L2_THROUGHPUT),
        "l1_throughput_pct": num(m, *L1_THROUGHPUT),
        "busiest_memory_unit": busiest_memory_unit(m),
        "l1_hit_rate_pct": num(m, L1_HIT),
        "l2_hit_rate_pct": num(m, L2_HIT),
        "dram_bytes_read": num(m, "dram__bytes_read.sum"),
        "dram_bytes_write": num(m, "dram__bytes_write.sum"),
        "device": num(m, "launch__device_id"),
        "context": num(m, "launch__context_id"),
        "stream": num(m, "launch__stream_id"),
    }
    if math.isnan(row["grid_size"]) and row["grid"]:
        row["grid_size"] = math.prod(int(v) for v in row["grid"][1:-1].split(", "))
    if math.isnan(row["block_size"]) and row["block"]:
        row["block_size"] = math.prod(int(v) for v in row["block"][1:-1].split(", "))
    row["dram_bytes"], row["l2_bytes"], row["l1_bytes"] = level_bytes(m)
    for precision in PRECISION_PREFIX:
        row[f"flops_{precision}"] = precision_flops(m, precision)
    tensor = tensor_ops_by_precision(m)
    row["flops_tensor"] = sum(tensor.values()) if tensor else tensor_flops(m)
    row["tensor_precision"] = dominant_tensor_precision(tensor)
    row["flops"] = _sum_or_nan(*(row[f"flops_{p}"] for p in ("fp64", "fp32", "fp16", "tensor")))
    row["flop_per_s"] = achieved_flop_per_s(m)
    if math.isnan(row["flop_per_s"]):
        secs = _elapsed_seconds(m)
        row["flop_per_s"] = row["flops"] / secs if secs > 0 else math.nan
    # Intensity as Nsight Compute's roofline plots it: achieved FLOP/s over achieved bytes/s.
    for level, rate in (("dram", "dram__bytes.sum.per_second"), ("l2", "lts__t_bytes.sum.per_second"),
                        ("l1", "l1tex__t_bytes.sum.per_second")):
        bytes_per_s = num(m, rate)
        row[f"ai_{level}"] = row["flop_per_s"] / bytes_per_s if bytes_per_s > 0 else math.nan
    return row


def achieved_flop_per_s(m: Metrics) -> float:
    """Sum over precisions of (add + mul + 2 fma) per cycle x smsp__cycles_elapsed.avg.per_second:
    the roofline section's own expression. NaN unless some precision's rates are present."""
    hz = num(m, "smsp__cycles_elapsed.avg.per_second")
    per_cycle = []
    for p in PRECISION_PREFIX.values():
        rates = [num(m, name) for name in RATE_NAMES[p]]
        if not any(math.isnan(r) for r in rates):
            per_cycle.append(sum(f * r for f, r in zip(op_factors(m, p), rates)))
    tensor = num(m, TENSOR_X512)
    if not math.isnan(tensor):
        per_cycle.append(tensor)
    achieved = sum(per_cycle) * hz if per_cycle and hz > 0 else math.nan
    tensor_rates = tensor_ops_by_precision(m, TENSOR_RATE)  # the tensor-core operations' own rate
    if tensor_rates and math.isnan(tensor):
        achieved = _sum_or_nan(achieved, sum(tensor_rates.values()))
    return achieved


def kernel_peaks(m: Metrics) -> Dict[str, float]:
    """Per-launch peaks at the clocks measured during that launch (Nsight Compute's roofline)."""
    sm_hz = num(m, "sm__cycles_elapsed.avg.per_second")
    peaks = {}
    for precision, p in PRECISION_PREFIX.items():
        peaks[f"flop_per_s_{precision}"] = op_factors(m, p)[2] * num(m, PEAK_FMA.format(p=p)) * sm_hz
    peaks["flop_per_s_tensor"] = num(m, TENSOR_PEAK_X512) * sm_hz
    for precision, per_cycle in dense_tensor_peaks(m).items():
        peaks[f"flop_per_s_tensor_{precision}"] = per_cycle * sm_hz
    peaks["bytes_per_s_dram"] = (num(m, "dram__bytes.sum.peak_sustained")
                                 * num(m, "dram__cycles_elapsed.avg.per_second"))
    peaks["bytes_per_s_l2"] = (num(m, "lts__t_bytes.sum.peak_sustained")
                               * num(m, "lts__cycles_elapsed.avg.per_second"))
    peaks["bytes_per_s_l1"] = (num(m, "l1tex__t_bytes.sum.peak_sustained")
                               * num(m, "l1tex__cycles_elapsed.avg.per_second"))
    return {k: v for k, v in peaks.items() if not math.isnan(v) and v > 0}


PEAK_UNITS = {"flop": "FLOP/s", "bytes": "byte/s"}
PEAK_HOW = {
    "flop_per_s_fp64": "2 x sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained x sm__cycles_elapsed.avg.per_second",
    "flop_per_s_fp32": "2 x sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained x sm__cycles_elapsed.avg.per_second",
    "flop_per_s_fp16": "2 (4 where the report counts packed HFMA2: 2025.3+) x sm__sass_thread_inst_executed_op_hfma_pred_on.sum.peak_sustained x sm__cycles_elapsed.avg.per_second",
    "flop_per_s_tensor": "derived__sm__inst_executed_pipe_tensor_x512 x sm__cycles_elapsed.avg.per_second",
    **{f"flop_per_s_tensor_{p}": f"the highest dense sm__ops_path_tensor_op_*_src_{p}*.sum.peak_sustained (no "
       f"2:4 sparsity) x sm__cycles_elapsed.avg.per_second" for p in TENSOR_PRECISIONS},
    "bytes_per_s_dram": "dram__bytes.sum.peak_sustained x dram__cycles_elapsed.avg.per_second",
    "bytes_per_s_l2": "lts__t_bytes.sum.peak_sustained x lts__cycles_elapsed.avg.per_second",
    "bytes_per_s_l1": "l1tex__t_bytes.sum.peak_sustained x l1tex__cycles_elapsed.avg.per_second",
}


# model.Device launch-limit field -> Nsight Compute device attribute (what its occupancy calculator reads).
LAUNCH_LIMIT_ATTRIBUTES = {
    "warp_size": "device__attribute_warp_size",
    "max_threads_per_block": "device__attribute_max_threads_per_block",
    "max_warps_per_sm": "device__attribute_max_warps_per_multiprocessor",
    "max_blocks_per_sm": "device__attribute_max_blocks_per_multiprocessor",
    "registers_per_sm": "device__attribute_max_registers_per_multiprocessor",
    "registers_per_block": "device__attribute_max_registers_per_block",
    "shared_mem_per_sm": "device__attribute_max_shared_memory_per_multiprocessor",
    "shared_mem_per_block_optin": "device__attribute_max_shared_memory_per_block_optin",
    "reserved_shared_mem_per_block": "device__attribute_reserved_shared_memory_per_block",
}


def launch_limits(m: Metrics) -> Dict[str, Optional[int]]:
    """The device's launch limits among the launch's metrics (None where the report lacks one)."""
    values = {field: num(m, name) for field, name in LAUNCH_LIMIT_ATTRIBUTES.items()}
    return {field: None if math.isnan(v) else int(v) for field, v in values.items()}


def device_from_metrics(device_id: int, m: Metrics, peaks: Optional[Dict[str, float]] = None) -> "Device":
    from ...core.model import Device, Peak  # here: the ncu worker processes import this module without pandas
    major, minor = num(m, "device__attribute_compute_capability_major"), num(m, "device__attribute_compute_capability_minor")
    cc = "" if math.isnan(major) or math.isnan(minor) else f"{int(major)}.{int(minor)}"
    sms = num(m, "device__attribute_multiprocessor_count", "launch__sm_count")
    clock_khz = num(m, "device__attribute_max_gpu_frequency_khz", "device__attribute_clock_rate")
    mem_khz = num(m, "device__attribute_max_mem_frequency_khz", "device__attribute_memory_clock_rate")
    dev = Device(
        id=device_id,
        name=text(m, "device__attribute_display_name"),
        vendor="NVIDIA",
        architecture=f"cc{cc}" if cc else "",
        compute_capability=cc,
        sm_count=None if math.isnan(sms) else int(sms),
        clock_mhz=None if math.isnan(clock_khz) else clock_khz / 1000,
        memory_clock_mhz=None if math.isnan(mem_khz) else mem_khz / 1000,
        **launch_limits(m),
    )
    for key, value in (peaks or {}).items():
        unit = PEAK_UNITS[key.split("_")[0]]
        dev.peaks[key] = Peak(value=value, unit=unit, source="measured",
                              how=f"Nsight Compute: {PEAK_HOW[key]} (max over launches)")
    return dev
