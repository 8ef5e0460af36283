"""Join a trace (PyTorch profiler, Nsight Systems, a ROCm trace) with a counter profile of the same
program (Nsight Compute, rocprof-compute): each profiled launch's counters onto the trace kernel it
is, so the trace's kernels and operators gain occupancy, throughput and hit rates.

How launches are matched (never guessed):
  1. The trace's kernels in launch order (correlation id, else GPU start) are filtered as the
     counter profiler was told to filter them (JoinFilters: ncu's --kernel-name / --kernel-name-base,
     --launch-skip, --launch-count): what remains is what the report should hold, in order.
  2. Both sides are keyed by kernel name at the strongest stage every launch of both has: mangled,
     else demangled (when one tool's demangler wrote both sides), else the bare function name
     (analysis/compare.py's normalisation: clone suffixes dropped), and paired per key in order: the k-th expected trace launch of a name with
     the k-th report launch of that name (the report's own order, launch_id).
  3. Each pair is checked: grid, block and registers per thread must be equal wherever both sides
     know them.  A pair that fails is listed with the difference and gets no counters; a launch
     left over on either side is listed with the reason.

Checked on a real PyTorch trace + Nsight Compute 2025.3 pair of one program (an H200 ResNet-18
step, tests/test_h200_pair.py: 57 of 58 joined, the one whose grid cuDNN changed under ncu refused),
and on real files otherwise: a report joined with itself, launches dropped as ncu's filters would
drop them, and a PyTorch trace joined with an unrelated report sharing a kernel name.

The cross-tool time check (analysis/compare.py's) applies to every joined pair: Nsight Compute
replays each kernel at locked clocks with flushed caches, the trace ran at application clocks.
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from ..core.errors import HwprofError
from ..core.plain import duration_text
from .compare import CROSS_TOOL_CAUSES, CROSS_TOOL_RATIO_LIMIT, normalise_kernel_name, short_name

# Columns measured by the counter profiler copied onto the trace's kernel rows: counts and ratios,
# which do not depend on the replay's clocks.  Rates (flop_per_s) are recomputed on the trace's time.
COPIED_COLUMNS = ("waves_per_sm", "achieved_occupancy_pct", "theoretical_occupancy_pct", "occupancy_limiter",
                  "sm_throughput_pct", "memory_throughput_pct", "dram_throughput_pct", "l2_throughput_pct",
                  "l1_throughput_pct", "busiest_memory_unit", "l1_hit_rate_pct", "l2_hit_rate_pct",
                  "dram_bytes_read", "dram_bytes_write", "dram_bytes", "l2_bytes", "l1_bytes",
                  "flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor", "tensor_precision", "flops", "ai_dram",
                  "ai_l2", "ai_l1")
# Extra kernels-table columns a joined run has: which report launch, and its replayed duration.
COUNTER_LAUNCH = "counter_launch_id"
COUNTER_DURATION = "counter_duration_ns"

JOIN_TABLE = "counter_join"
JOIN_COLUMNS = ["status", "key", "trace_launch", "counter_launch", "trace_ns", "counter_ns", "ratio", "reason"]
STATUSES = ("matched", "config-differs", "trace-only", "report-only")
KEY_STAGES = ("mangled", "demangled", "short")
CHECKED = (("grid", "grid"), ("block", "block"), ("registers_per_thread", "registers"))
NAME_BASES = ("function", "demangled", "mangled")


@dataclasses.dataclass(frozen=True)
class JoinFilters:
    """What the counter profiler was told to profile (ncu's own options, as given to it).
    kernel_name: ncu --kernel-name: "regex:EXPR" (searched) or an exact name; None: every kernel.
    name_base: ncu --kernel-name-base the name filter reads (function, demangled or mangled).
    launch_skip / launch_count: ncu --launch-skip / --launch-count, counted over the launches the
    name filter keeps."""

    kernel_name: Optional[str] = None
    name_base: str = "function"
    launch_skip: int = 0
    launch_count: Optional[int] = None

    def __post_init__(self):
        if self.name_base not in NAME_BASES:
            raise HwprofError(f"kernel name base {self.name_base!r}: use one of {', '.join(NAME_BASES)}")
        if self.launch_skip < 0 or (self.launch_count is not None and self.launch_count < 1):
            raise HwprofError("launch skip must be >= 0 and launch count >= 1")

    def text(self) -> str:
        parts = [f"--kernel-name {self.kernel_name} (base {self.name_base})"] if self.kernel_name else []
        parts += [f"--launch-skip {self.launch_skip}"] if self.launch_skip else []
        parts += [f"--launch-count {self.launch_count}"] if self.launch_count is not None else []
        return " ".join(parts) or "no filters"

    def names_only(self) -> "JoinFilters":
        """The kernel-name filter alone: with ncu's per-launch-config mode, --launch-skip and
        --launch-count count within each configuration, not over the trace's launches."""
        return JoinFilters(self.kernel_name, self.name_base)


@dataclasses.dataclass
class JoinResult:
    profile: object  # the trace's Profile with the counters on its kernel rows
    table: pd.DataFrame  # JOIN_COLUMNS: one row per pair and per launch left over
    stage: str  # the name stage the keys were made at (KEY_STAGES)
    expected: int  # trace launches the filters keep (what the report should hold)
    filtered_out: int  # trace launches the filters leave out
    cross_tool: dict

    def count(self, status: str) -> int:
        return int((self.table["status"] == status).sum())


# ------------------------------------------------------------------ names and order
def _texts(kernels: pd.DataFrame, column: str) -> List[str]:
    return ["" if not isinstance(v, str) else v for v in kernels[column].tolist()]


def _per_distinct(values: List[str], make) -> List[str]:
    """make(value) once per distinct value (a trace repeats a few names a million times)."""
    done: Dict[str, str] = {}
    return [done[v] if v in done else done.setdefault(v, make(v)) for v in values]


def full_names(kernels: pd.DataFrame) -> List[str]:
    """Per launch its full (demangled) name, else its name."""
    return [d or n for d, n in zip(_texts(kernels, "demangled_name"), _texts(kernels, "name"))]


def name_keys(kernels: pd.DataFrame, stage: str) -> List[str]:
    """Per launch its key at `stage`: the mangled name, the normalised demangled name, or the bare
    function name (from the demangled name, else `name`)."""
    if stage == "mangled":
        return _per_distinct(_texts(kernels, "mangled_name"), str.strip)
    if stage == "demangled":
        return _per_distinct(_texts(kernels, "demangled_name"), normalise_kernel_name)
    return _per_distinct(full_names(kernels), short_name)


def key_stage(trace: pd.DataFrame, counters: pd.DataFrame, same_demangler: bool = True) -> str:
    """The strongest name stage every launch of both sides has a key at.  Demangled names compare
    only when one demangler wrote both (the same tool): Nsight Compute prints
    'void k<(int)32>(const float *)' where the PyTorch profiler (cxxabi) prints 'void k<32>(float const*)';
    across tools the bare function name is the key, and launch order plus the grid / block /
    registers check tell instantiations apart."""
    stages = KEY_STAGES if same_demangler else ("mangled", "short")
    for stage in stages:
        if all(name_keys(trace, stage)) and all(name_keys(counters, stage)):
            return stage
    return "short"


def launch_order(kernels: pd.DataFrame) -> np.ndarray:
    """Row positions in launch order: by correlation id (the host's launch order) where every launch
    has its own, else by GPU start, else as the table lists them (rocpd exports hold correlation id
    0 for every launch: not an order)."""
    for column in ("correlation_id", "start_ns"):
        values = kernels[column].to_numpy(dtype=float)
        if len(values) and not np.isnan(values).any() and (column != "correlation_id" or np.unique(values).size == len(values)):
            return np.argsort(values, kind="stable")
    return np.arange(len(kernels))


def filter_names(kernels: pd.DataFrame, base: str) -> List[str]:
    """The names ncu's --kernel-name filter would read, per --kernel-name-base."""
    if base == "mangled":
        return _texts(kernels, "mangled_name")
    if base == "demangled":
        return _per_distinct(_texts(kernels, "demangled_name"), normalise_kernel_name)
    return name_keys(kernels, "short")


def name_matcher(kernel_name: str):
    """ncu's --kernel-name: "regex:EXPR" searches, anything else is the exact name."""
    if kernel_name.startswith("regex:"):
        try:
            pattern = re.compile(kernel_name[len("regex:"):])
        except re.error as e:
            raise HwprofError(f"kernel name filter {kernel_name!r}: not a regular expression ({e})")
        return lambda name: pattern.search(name) is not None
    return lambda name: name == kernel_name


def expected_launches(kernels: pd.DataFrame, filters: JoinFilters) -> np.ndarray:
    """Trace row positions the counter profiler should have profiled, in launch order."""
    order = launch_order(kernels)
    if filters.kernel_name:
        names = filter_names(kernels, filters.name_base)
        kept = _per_distinct(names, lambda name, match=name_matcher(filters.kernel_name): "1" if match(name) else "")
        order = np.array([i for i in order.tolist() if kept[i]], dtype=np.int64)
    end = None if filters.launch_count is None else filters.launch_skip + filters.launch_count
    return np.asarray(order[filters.launch_skip:end], dtype=np.int64)


def _by_key(rows: Sequence[int], keys: List[str]) -> Dict[str, List[int]]:
    out: Dict[str, List[int]] = {}
    for row in rows:
        out.setdefault(keys[row], []).append(int(row))
    return out


# ------------------------------------------------------------------ checking a pair
def _known(value) -> bool:
    return isinstance(value, str) and value != "" or isinstance(value, (int, float, np.number)) and not math.isnan(value)


def checked_values(kernels: pd.DataFrame) -> Dict[str, np.ndarray]:
    """The columns a pair is checked on, as arrays (one lookup per pair, not a row object)."""
    return {column: kernels[column].to_numpy() for column, _ in CHECKED}


def config_differences(trace: Dict[str, np.ndarray], ti: int, counters: Dict[str, np.ndarray], ci: int) -> List[str]:
    """What differs between two launches' grid, block and registers (checked where both know it)."""
    out = []
    for column, label in CHECKED:
        a, b = trace[column][ti], counters[column][ci]
        if _known(a) and _known(b) and a != b:
            out.append(f"{label} {a} in the trace vs {b} in the report")
    return out


# ------------------------------------------------------------------ the join
def join(trace, counters, filters: JoinFilters = JoinFilters()) -> JoinResult:
    """The trace Profile with the counter Profile's launches joined onto its kernel rows (see the
    module's docstring); neither input is changed."""
    t, c = trace.kernels, counters.kernels
    stage = key_stage(t, c, trace.provenance.tool == counters.provenance.tool)
    t_keys, c_keys = name_keys(t, stage), name_keys(c, stage)
    expected = expected_launches(t, filters)
    trace_by_key = _by_key(expected, t_keys)
    counter_by_key = _by_key(np.argsort(c["launch_id"].to_numpy(), kind="stable"), c_keys)
    t_checked, c_checked = checked_values(t), checked_values(c)
    rows: List[Tuple[str, str, int, int, str]] = []  # (status, key, trace row, counter row, reason); -1: none
    pairs = []
    for key in list(dict.fromkeys([*trace_by_key, *counter_by_key])):
        mine, theirs = trace_by_key.get(key, []), counter_by_key.get(key, [])
        for ti, ci in zip(mine, theirs):
            differs = config_differences(t_checked, ti, c_checked, ci)
            rows.append(("config-differs" if differs else "matched", key, ti, ci, "; ".join(differs)))
            if not differs:
                pairs.append((ti, ci))
        if len(mine) > len(theirs):
            reason = (f"the report has {len(theirs)} launch(es) of this kernel, the trace's filtered launches "
                      f"{len(mine)}: this one is not in the report")
            rows.extend(("trace-only", key, ti, -1, reason) for ti in mine[len(theirs):])
        if len(theirs) > len(mine):
            reason = (f"the trace's filtered launches hold {len(mine)} of this kernel, the report {len(theirs)}: "
                      f"no trace launch left for this one")
            rows.extend(("report-only", key, -1, ci, reason) for ci in theirs[len(mine):])
    table = join_table(rows, t, c)
    cross = cross_tool_summary(table, counters.provenance.tool, trace.provenance.tool)
    joined = joined_profile(trace, counters, pairs)
    result = JoinResult(joined, table, stage, len(expected), len(t) - len(expected), cross)
    joined.summaries = {**joined.summaries, JOIN_TABLE: table}
    joined.notes = [*joined.notes, *join_notes(result, filters, counters)]
    return result


# ------------------------------------------------------------------ the per-configuration join
# A report profiled with ncu --filter-mode per-launch-config --launch-count 1 holds one launch per
# (kernel, grid, block): its counters go onto every trace launch of that configuration.  Names are
# compared as the PyTorch profiler writes them, the GNU demangler's style: ncu's own demangled names
# differ ('(int)4', '<unnamed>'), its mangled names demangled the GNU way equal the trace's (58 of 58
# launches of the H200 pair).
CONFIG_SOURCE = "counter_source"  # kernels column: which report launch(es) a row's counters are from


def _cxa_demangle():
    """The C++ runtime's __cxa_demangle (libstdc++ or libc++) through ctypes; None where there is none."""
    import ctypes
    import ctypes.util
    for name in (ctypes.util.find_library("stdc++"), "libstdc++.so.6", ctypes.util.find_library("c++")):
        try:
            lib = ctypes.CDLL(name) if name else None
            function = lib.__cxa_demangle if lib is not None else None
        except (OSError, AttributeError):
            continue
        if function is not None:
            function.restype = ctypes.c_void_p
            function.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t),
                                 ctypes.POINTER(ctypes.c_int)]
            free = ctypes.CDLL(None).free
            free.argtypes = [ctypes.c_void_p]
            return function, free
    return None


_DEMANGLER = []  # [(function, free) or None], found once


def gnu_demangled(mangled: str) -> str:
    """`mangled` demangled as GNU c++filt / cxxabi do ('' where it is not a mangled C++ name or no
    C++ runtime is at hand: an extern "C" kernel's mangled name is its plain name)."""
    import ctypes
    if not _DEMANGLER:
        _DEMANGLER.append(_cxa_demangle())
    if _DEMANGLER[0] is None or not mangled.startswith("_Z"):
        return ""
    function, free = _DEMANGLER[0]
    status = ctypes.c_int()
    pointer = function(mangled.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not pointer:
        return ""
    try:
        return ctypes.string_at(pointer).decode("utf-8", "replace")
    finally:
        free(pointer)


def config_keys(kernels: pd.DataFrame, from_mangled: bool) -> List[str]:
    """Per launch its configuration: the GNU-demangled kernel name (from the mangled name where
    `from_mangled`, a counter report's, else the name as the trace has it), grid and block."""
    names = full_names(kernels)
    if from_mangled:
        mangled = _texts(kernels, "mangled_name")
        names = [demangled or (m if m and not m.startswith("_Z") else f)
                 for demangled, m, f in zip(_per_distinct(mangled, gnu_demangled), mangled, names)]
    return [f"{name} grid {grid} block {block}"
            for name, grid, block in zip(names, _texts(kernels, "grid"), _texts(kernels, "block"))]


def config_means(counters, groups: Dict[str, List[int]]) -> pd.DataFrame:
    """The report's kernels with each configuration's first launch carrying the time-weighted mean of
    that configuration's launches (their report durations as weights) in every numeric copied column."""
    c = counters.kernels.copy()
    weights_all = c["duration_ns"].to_numpy(dtype=float)
    numeric = [col for col in COPIED_COLUMNS + ("duration_ns",) if col in c and c[col].dtype != object]
    for rows in groups.values():
        if len(rows) < 2:
            continue
        weights = weights_all[rows]
        for column in numeric:
            c.loc[c.index[rows[0]], column] = time_weighted_mean(c[column].to_numpy(dtype=float)[rows], weights)
    return c


def join_per_config(trace, counters, filters: JoinFilters = JoinFilters()) -> JoinResult:
    """Each report launch's counters onto every trace launch of its configuration (kernel, grid,
    block; registers checked where both know them); several report launches of one configuration are
    averaged, time-weighted.  Trace launches of a configuration the report lacks are listed, as are
    report configurations the trace lacks."""
    t, c = trace.kernels, counters.kernels
    t_keys, c_keys = config_keys(t, False), config_keys(c, True)
    expected = expected_launches(t, filters.names_only())
    trace_by_key = _by_key(expected, t_keys)
    counter_by_key = _by_key(np.argsort(c["launch_id"].to_numpy(), kind="stable"), c_keys)
    t_checked, c_checked = checked_values(t), checked_values(c)
    rows: List[Tuple[str, str, int, int, str]] = []
    pairs, sources = [], {}
    for key, mine in trace_by_key.items():
        theirs = counter_by_key.get(key)
        if not theirs:
            rows.extend(("trace-only", key, ti, -1, "no report launch of this configuration (kernel, grid, block)")
                        for ti in mine)
            continue
        ci = theirs[0]
        source = (f"report launch {int(c['launch_id'].iloc[ci])}" if len(theirs) == 1 else
                  f"report launches {', '.join(str(int(c['launch_id'].iloc[i])) for i in theirs)} (time-weighted "
                  f"mean; the sections and rules shown: launch {int(c['launch_id'].iloc[ci])})")
        for ti in mine:
            differs = config_differences(t_checked, ti, c_checked, ci)
            rows.append(("config-differs" if differs else "matched", key, ti, ci, "; ".join(differs)))
            if not differs:
                pairs.append((ti, ci))
                sources[ti] = f"{source}, per-configuration join (same kernel, grid and block)"
    for key, theirs in counter_by_key.items():
        if key not in trace_by_key:
            rows.extend(("report-only", key, -1, ci, "no trace launch of this configuration (kernel, grid, block)")
                        for ci in theirs)
    table = join_table(rows, t, c)
    cross = cross_tool_summary(table, counters.provenance.tool, trace.provenance.tool)
    averaged = dataclasses.replace(counters, kernels=config_means(counters, counter_by_key))
    joined = joined_profile(trace, averaged, pairs)
    source_column = np.full(len(t), "", dtype=object)
    for ti, text in sources.items():
        source_column[ti] = text
    joined.kernels[CONFIG_SOURCE] = source_column
    result = JoinResult(joined, table, "per-configuration", len(expected), len(t) - len(expected), cross)
    joined.summaries = {**joined.summaries, JOIN_TABLE: table}
    joined.notes = [*joined.notes, *per_config_notes(result, trace_by_key, counter_by_key, t, counters)]
    return result


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole > 0 else "none"


def per_config_notes(result: JoinResult, trace_by_key, counter_by_key, t: pd.DataFrame, counters) -> List[str]:
    """Coverage of a per-configuration join: launches and kernel time with counters, configurations."""
    durations = t["duration_ns"].to_numpy(dtype=float)
    matched = result.table[result.table["status"] == "matched"]
    covered = float(np.nansum(matched["trace_ns"].to_numpy(dtype=float)))
    total = float(np.nansum(durations))
    averaged = sum(1 for rows in counter_by_key.values() if len(rows) > 1)
    notes = [f"per-configuration join with {counters.provenance.tool} report {counters.provenance.source_path}: "
             f"{len(matched)} of {len(t)} trace launches ({_share(covered, total)} of the kernel time) carry "
             f"counters, from {sum(1 for k in counter_by_key if k in trace_by_key)} of the trace's "
             f"{len(trace_by_key)} configurations (kernel, grid, block) profiled in {len(counters.kernels)} report "
             f"launches; it assumes launches of one configuration behave alike (data-dependent kernels may not)"]
    if averaged:
        notes.append(f"{averaged} configuration(s) were profiled more than once: their counters are the "
                     f"time-weighted mean of those launches")
    notes += leftover_notes(result)
    return notes


def leftover_notes(result: JoinResult) -> List[str]:
    """The note counting what was not joined, by status ([] when everything was)."""
    leftovers = {s: result.count(s) for s in STATUSES[1:] if result.count(s)}
    return ["not joined (listed in the " + JOIN_TABLE + " table, never guessed): " +
            ", ".join(f"{n} {s}" for s, n in leftovers.items())] if leftovers else []


def join_table(rows: List[Tuple[str, str, int, int, str]], t: pd.DataFrame, c: pd.DataFrame) -> pd.DataFrame:
    """JOIN_COLUMNS from (status, key, trace row, counter row, reason) tuples, looked up in bulk."""
    status, key, ti, ci, reason = (list(x) for x in zip(*rows)) if rows else ([], [], [], [], [])
    ti, ci = np.array(ti, dtype=np.int64), np.array(ci, dtype=np.int64)

    def lookup(frame: pd.DataFrame, column: str, at: np.ndarray, missing):
        values = frame[column].to_numpy()
        out = np.full(len(at), missing, dtype=values.dtype if values.size else np.float64)
        out[at >= 0] = values[at[at >= 0]]
        return out
    trace_ns, counter_ns = lookup(t, "duration_ns", ti, np.nan), lookup(c, "duration_ns", ci, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(trace_ns > 0, counter_ns / trace_ns, np.nan)
    return pd.DataFrame({"status": pd.Series(status, dtype=object), "key": pd.Series(key, dtype=object),
                         "trace_launch": lookup(t, "launch_id", ti, -1).astype(np.int64),
                         "counter_launch": lookup(c, "launch_id", ci, -1).astype(np.int64),
                         "trace_ns": trace_ns.astype(float), "counter_ns": counter_ns.astype(float), "ratio": ratio,
                         "reason": pd.Series(reason, dtype=object)}, columns=JOIN_COLUMNS)


def joined_profile(trace, counters, pairs: List[Tuple[int, int]]):
    """A copy of the trace Profile whose paired kernel rows carry the counter launch's columns, raw
    metrics and rule results (the kernel drawer's sections), and devices with the report's peaks."""
    kernels = trace.kernels.copy(deep=False)  # columns are replaced, never written into (copy on write)
    t_rows = np.array([p[0] for p in pairs], dtype=np.int64)
    c_rows = np.array([p[1] for p in pairs], dtype=np.int64)
    for column in COPIED_COLUMNS + (("launch_id", COUNTER_LAUNCH), ("duration_ns", COUNTER_DURATION)):
        source, target = column if isinstance(column, tuple) else (column, column)
        _copy_column(kernels, target, counters.kernels[source].to_numpy(), t_rows, c_rows)
    # Work counts are the report's; the rate is over the time the application took.
    flops = kernels["flops"].to_numpy(dtype=float)
    kernels["flop_per_s"] = flops / kernels["duration_ns"].to_numpy(dtype=float) * 1e9
    n = len(kernels)
    if not pairs:
        return dataclasses.replace(trace, kernels=kernels, devices=joined_devices(trace.devices, counters.devices),
                                   summaries=dict(trace.summaries), notes=list(trace.notes))
    # Per launch; the unpaired share one empty entry (read only: the writer serialises them).
    raw = list(trace.raw_metrics) if len(trace.raw_metrics) == n else [{}] * n
    rules = list(trace.rules) if len(trace.rules) == n else [[]] * n
    for ti, ci in pairs:
        if ci < len(counters.raw_metrics):
            raw[ti] = counters.raw_metrics[ci]
        if ci < len(counters.rules):
            rules[ti] = counters.rules[ci]
    return dataclasses.replace(trace, kernels=kernels, raw_metrics=raw, rules=rules,
                               devices=joined_devices(trace.devices, counters.devices),
                               summaries=dict(trace.summaries), notes=list(trace.notes))


def _copy_column(kernels: pd.DataFrame, column: str, source: np.ndarray, t_rows: np.ndarray,
                 c_rows: np.ndarray) -> None:
    if source.dtype == object:
        values = np.full(len(kernels), "", dtype=object)
    elif column == COUNTER_LAUNCH:
        values = np.full(len(kernels), -1, dtype=np.int64)
    else:
        values = np.full(len(kernels), math.nan)
    values[t_rows] = source[c_rows]
    kernels[column] = values


def joined_devices(trace_devices, counter_devices):
    """Per trace device the report's device of the same id where it has one (its peaks are measured),
    else the trace's; devices only the report has are added."""
    by_id = {d.id: d for d in counter_devices}
    out = [by_id.get(d.id, d) for d in trace_devices]
    seen = {d.id for d in out}
    return out + [d for d in counter_devices if d.id not in seen]


# ------------------------------------------------------------------ the cross-tool time check
def cross_tool_summary(table: pd.DataFrame, counter_tool: str, trace_tool: str) -> dict:
    """Per matched kernel name: the report's and the trace's time per launch and their ratio (counter
    / trace), flagged beyond compare.py's CROSS_TOOL_RATIO_LIMIT either way, with the causes."""
    matched = table[table["status"] == "matched"]
    per_key = matched.groupby("key", sort=False).agg(launches=("key", "size"), trace_ns=("trace_ns", "sum"),
                                                     counter_ns=("counter_ns", "sum"))
    names = []
    for key, r in per_key.iterrows():
        ratio = r["counter_ns"] / r["trace_ns"] if r["trace_ns"] > 0 else math.nan
        flagged = bool(ratio > 0 and max(ratio, 1 / ratio) > CROSS_TOOL_RATIO_LIMIT)
        names.append({"key": key, "launches": int(r["launches"]), "trace_ns": float(r["trace_ns"]),
                      "counter_ns": float(r["counter_ns"]), "ratio": ratio, "flagged": flagged})
    trace_total, counter_total = float(matched["trace_ns"].sum()), float(matched["counter_ns"].sum())
    return {"counter_tool": counter_tool, "trace_tool": trace_tool, "threshold": CROSS_TOOL_RATIO_LIMIT,
            "trace_ns": trace_total, "counter_ns": counter_total,
            "ratio": counter_total / trace_total if trace_total > 0 else math.nan,
            "flagged": sum(n["flagged"] for n in names), "kernels": names, "causes": CROSS_TOOL_CAUSES}


def join_notes(result: JoinResult, filters: JoinFilters, counters) -> List[str]:
    """The run's notes on the join: what was matched, what was left over and the time check."""
    tool = counters.provenance.tool
    source = counters.provenance.source_path
    notes = [f"joined with {tool} report {source} ({filters.text()}): {result.count('matched')} of "
             f"{len(counters.kernels)} report launches matched to trace kernels by {result.stage} name and "
             f"launch order; {result.expected} trace launches expected in the report, {result.filtered_out} "
             f"left out by the filters"]
    notes += leftover_notes(result)
    cross = result.cross_tool
    if cross["trace_ns"] > 0:
        notes.append(f"cross-tool time check: matched kernels took {duration_text(cross['counter_ns'])} in {tool} and "
                     f"{duration_text(cross['trace_ns'])} in the trace (ratio {cross['ratio']:.2f}); {cross['flagged']} "
                     f"kernel name(s) beyond {cross['threshold']}x: {cross['causes']}")
    return notes


# ------------------------------------------------------------------ operators (PyTorch traces)
OP_COUNTERS_TABLE = "op_counters"
# Kernel counters averaged per operator, weighted by the kernels' time in the trace.
OP_WEIGHTED = ("achieved_occupancy_pct", "sm_throughput_pct", "memory_throughput_pct", "l1_hit_rate_pct",
               "l2_hit_rate_pct")
OP_COUNTER_COLUMNS = ["op", "counted_kernels", "counted_ns", *OP_WEIGHTED, "bound_mix"]


def operator_counters(profile, analysis) -> None:
    """Pipeline step: summaries["op_counters"] for a trace whose kernels carry joined counters (a
    PyTorch trace joined with a counter report): per operator, over the kernels it launched that
    have counters, their count and trace time, the time-weighted mean of each of OP_WEIGHTED, and
    the mix of their bound labels by time ("memory 70%, compute 30%")."""
    kernels = profile.kernels
    if "op" not in kernels.columns or COUNTER_LAUNCH not in kernels.columns:
        return
    counted = kernels[kernels[COUNTER_LAUNCH].to_numpy() >= 0]
    if counted.empty:
        return
    analysis.summaries[OP_COUNTERS_TABLE] = op_counter_table(counted)


def op_counter_table(counted: pd.DataFrame) -> pd.DataFrame:
    """op_counters over the kernel rows that have counters (see operator_counters)."""
    rows = []
    for op, group in counted.groupby(counted["op"].fillna(""), sort=False):
        weight = group["duration_ns"].to_numpy(dtype=float)
        row = {"op": op, "counted_kernels": len(group), "counted_ns": float(np.nansum(weight))}
        for column in OP_WEIGHTED:
            row[column] = time_weighted_mean(group[column].to_numpy(dtype=float), weight)
        row["bound_mix"] = bound_mix(group["bound"].tolist(), weight)
        rows.append(row)
    return pd.DataFrame(rows, columns=OP_COUNTER_COLUMNS).sort_values("counted_ns", ascending=False, kind="stable") \
        .reset_index(drop=True)


def time_weighted_mean(values: np.ndarray, weights: np.ndarray) -> float:
    """Mean of the values present, each weighted by its kernel's time; NaN when none is present."""
    known = ~np.isnan(values) & ~np.isnan(weights)
    total = weights[known].sum()
    return float((values[known] * weights[known]).sum() / total) if total > 0 else math.nan


def bound_mix(labels: List[str], weights: np.ndarray) -> str:
    """'memory 70%, compute 30%': each bound label's share of the time, largest first."""
    shares: Dict[str, float] = {}
    for label, weight in zip(labels, weights):
        if isinstance(label, str) and label and not math.isnan(weight):
            shares[label] = shares.get(label, 0.0) + weight
    total = sum(shares.values())
    if total <= 0:
        return ""
    return ", ".join(f"{label} {100 * w / total:.0f}%" for label, w in sorted(shares.items(), key=lambda kv: -kv[1]))
