"""Nsight Compute `ncu --csv` text output reader.

Two layouts exist:

* long (`--page details`, the default, and `--metrics ...` runs): one row per
  metric, launches told apart by the "ID" column.  "Metric Name" is the ncu
  metric name for `--metrics` runs, or a section label ("Duration",
  "Achieved Occupancy", ...) for `--page details`; labels are mapped back to
  the metric names the section files give them (`DETAILS_LABELS`).  Newer
  versions add rule columns ("Rule Name", "Rule Type", ...), filled on rows
  that carry a rule result instead of a metric.
* wide (`--page raw`): a header row of metric names, a row of units, then one
  row per launch.

Both start with launch columns ("ID", "Kernel Name", "Context", "Stream",
"Block Size", "Grid Size", "Device", "CC"; which ones depends on the version),
and ncu prints its `==PROF==` log lines (and the application's own output,
when stdout was captured) before the table.

Values are printed for humans: thousands separators ("32,746,880"), "n/a",
and, unless `--print-units base` was given, scaled units ("usecond",
"Mbyte/second", "Ghz").  Each value is converted back to the metric's base
unit (ns, byte, byte/s, hz, as `ncu_report` gives them for a .ncu-rep) so
`ncu_metrics.kernel_fields` sees the same numbers for both formats.
"""
from __future__ import annotations

import csv
import dataclasses
import functools
import math
import operator
import re
from decimal import Decimal
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

from ...core.errors import InputError
from ...core.model import Profile, Provenance, normalise_kernels
from . import ncu_metrics
from ..common import csvtext, read_input_bytes, sha256_of
from ..common.csvtext import shown

LONG, RAW = "ncu-csv-long", "ncu-csv-raw"
NOT_NCU_FIX = ("export with `ncu --csv --page details` or `ncu --csv --page raw` "
               "(or pass the .ncu-rep written by `ncu -o`)")
DAMAGED_FIX = "export the report again with `ncu --csv` (or pass the .ncu-rep written by `ncu -o`)"

# Launch columns ncu prints before the metrics (all versions); everything else in a
# `--page raw` header is a metric.
LAUNCH_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time",
                  "Context", "Stream", "Block Size", "Grid Size", "Device", "CC")
LONG_COLUMNS = ("Section Name", "Metric Name", "Metric Unit", "Metric Value")
RULE_COLUMNS = ("Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type", "Estimated Speedup")

# `--page details` label -> metric name, from Nsight Compute's section files (SpeedOfLight,
# LaunchStatistics, Occupancy, MemoryWorkloadAnalysis).  Older labels of the same metric are
# listed too ("SOL DRAM" 2019-2020, "Compute (SM) [%]" 2021-2022, "Compute (SM) Throughput" 2023+).
DETAILS_LABELS = {
    # GPU Speed Of Light Throughput
    "Duration": "gpu__time_duration.sum",
    "Elapsed Cycles": "gpc__cycles_elapsed.max",
    "SM Active Cycles": "sm__cycles_active.avg",
    "SM Frequency": "gpc__cycles_elapsed.avg.per_second",
    "DRAM Frequency": "dram__cycles_elapsed.avg.per_second",
    "Memory Frequency": "dram__cycles_elapsed.avg.per_second",
    "Compute (SM) Throughput": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "Compute (SM) [%]": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "SM [%]": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "SOL SM": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "Memory Throughput": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "Memory [%]": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "SOL Memory": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "DRAM Throughput": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "SOL DRAM": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "L1/TEX Cache Throughput": "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "SOL L1/TEX Cache": "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "L2 Cache Throughput": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "SOL L2 Cache": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    # Launch Statistics
    "Grid Size": "launch__grid_size",
    "Block Size": "launch__block_size",
    "Registers Per Thread": "launch__registers_per_thread",
    "Static Shared Memory Per Block": "launch__shared_mem_per_block_static",
    "Dynamic Shared Memory Per Block": "launch__shared_mem_per_block_dynamic",
    "Driver Shared Memory Per Block": "launch__shared_mem_per_block_driver",
    "Shared Memory Configuration Size": "launch__shared_mem_config_size",
    "Threads": "launch__thread_count",
    "Waves Per SM": "launch__waves_per_multiprocessor",
    "# SMs": "launch__sm_count",
    "# TPCs": "launch__tpc_count",
    "Enabled TPC IDs": "launch__tpc_enabled",
    "Function Cache Configuration": "launch__func_cache_config",
    "Cluster Size": "launch__cluster_size",
    "Preferred Cluster Size": "launch__preferred_cluster_size",
    "Cluster Scheduling Policy": "launch__cluster_scheduling_policy",
    "Stack Size": "launch__stack_size",
    "Uses Green Context": "launch__uses_green_context",
    # Occupancy
    "Theoretical Occupancy": "sm__maximum_warps_per_active_cycle_pct",
    "Achieved Occupancy": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "Theoretical Active Warps per SM": "sm__maximum_warps_avg_per_active_cycle",
    "Achieved Active Warps Per SM": "sm__warps_active.avg.per_cycle_active",
    "Block Limit Registers": "launch__occupancy_limit_registers",
    "Block Limit Shared Mem": "launch__occupancy_limit_shared_mem",
    "Block Limit Warps": "launch__occupancy_limit_warps",
    "Block Limit SM": "launch__occupancy_limit_blocks",
    "Block Limit Barriers": "launch__occupancy_limit_barriers",
    "Cluster Occupancy": "launch__occupancy_cluster_pct",
    "Max Active Clusters": "launch__cluster_max_active",
    "Max Cluster Size": "launch__cluster_max_potential_size",
    "Overall GPU Occupancy": "launch__occupancy_cluster_gpu_pct",
    # Memory Workload Analysis ("Memory Throughput" there is DRAM byte/s: see metric_for_label)
    "Mem Busy": "gpu__compute_memory_access_throughput.avg.pct_of_peak_sustained_elapsed",
    "Max Bandwidth": "gpu__compute_memory_request_throughput.avg.pct_of_peak_sustained_elapsed",
    "Mem Pipes Busy": "sm__memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "L1/TEX Hit Rate": "l1tex__t_sector_hit_rate.pct",
    "L2 Hit Rate": "lts__t_sector_hit_rate.pct",
    "L2 Persisting Size": "launch__persisting_l2_cache_size",
    "L1TEX Throughput": "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
    "L2 Throughput": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
}

# ---------------------------------------------------------------------------- units
# Scaled unit -> (factor to the base unit, base unit as ncu_report names it).  ncu's SI
# prefixes are decimal ("Kbyte" = 1000 bytes); newer versions print "KB", "us", "GHz".
_SI = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_TIME_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6,
            "second": 1e9, "s": 1e9}
_PER_TIME = {"second": 1.0, "s": 1.0, "msecond": 1e3, "ms": 1e3, "usecond": 1e6, "us": 1e6,
             "nsecond": 1e9, "ns": 1e9}  # "x per <unit>" -> "x per second"
_COUNTS = ("cycle", "inst", "sector", "request", "thread", "warp", "block")


def _unit_table() -> Dict[str, Tuple[float, str]]:
    table = {u: (f, "ns") for u, f in _TIME_NS.items()}
    for prefix, factor in _SI.items():
        for byte in ("byte", "B"):
            table[prefix + byte] = (factor, "byte")
        for hz in ("hz", "Hz"):
            table[prefix + hz] = (factor, "hz")
        if prefix not in ("", "k"):
            for count in _COUNTS:
                table[prefix + count] = (factor, count)
    for prefix, power in (("Ki", 1), ("Mi", 2), ("Gi", 3), ("Ti", 4)):
        table[prefix + "B"] = (1024.0 ** power, "byte")
    return table


_UNITS = _unit_table()


@functools.lru_cache(maxsize=None)  # a report prints a few dozen distinct units
def unit_scale(unit: str) -> Tuple[float, str]:
    """(factor, base unit) for a unit as ncu prints it: 'usecond' -> (1e3, 'ns'),
    'Gbyte/second' -> (1e9, 'byte/s'), 'cycle/nsecond' -> (1e9, 'hz'); unknown units -> (1, unit)."""
    unit = unit.strip()
    top, _, per = unit.partition("/")
    factor, base = _UNITS.get(top, (1.0, top))
    if not per:
        return factor, base
    if per in _PER_TIME:
        factor, per = factor * _PER_TIME[per], "s"
    base = f"{base}/{per}"
    return factor, "hz" if base == "cycle/s" else base  # ncu_report names cycle rates "hz"


# ---------------------------------------------------------------------------- values
_GROUPED = re.compile(r"^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?$")  # "32,746,880" or "1,234.5"
MISSING = {"", "n/a", "N/A", "na", "NA"}


def parse_value(text: str):
    """A printed value -> float (NaN for "n/a"/empty), or the text itself when not a number
    ("CachePreferNone").  Only well-formed thousands grouping is read as one number."""
    text = text.strip()
    if text in MISSING:
        return math.nan
    try:
        return float(text)
    except ValueError:
        pass
    if _GROUPED.match(text):
        return float(text.replace(",", ""))
    return text


def base_value(text: str, unit: str) -> Tuple[object, str, float]:
    """(value in the base unit, base unit, factor applied); strings keep the unit as printed."""
    value = parse_value(text)
    if isinstance(value, str):
        return value, unit, 1.0
    factor, base = unit_scale(unit)
    if factor != 1.0 and math.isfinite(value):
        # Decimal: "3.94" usecond -> exactly 3940.0 ns, not 3940.0000000000005.
        value = float(Decimal(text.strip().replace(",", "")) * Decimal(factor))
    return value, base, factor


# ---------------------------------------------------------------------------- kernel names
def _strip_trailing_group(text: str, open_: str, close: str) -> str:
    """'f<a<b>>' -> 'f' for ('<', '>'): drop one balanced group at the end, if any."""
    if not text.endswith(close):
        return text
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        if text[i] == close:
            depth += 1
        elif text[i] == open_:
            depth -= 1
            if depth == 0:
                return text[:i].rstrip()
    return text


def function_name(kernel_name: str) -> str:
    """The function name alone, as ncu's FUNCTION name base shows it:
    'void gt::detail::kernel_assign_6<...>(...)' -> 'kernel_assign_6'."""
    text = kernel_name.strip()
    if not text or text.startswith("_Z"):  # mangled: nothing to demangle with here
        return text
    text = _strip_trailing_group(text, "(", ")")  # parameters
    text = _strip_trailing_group(text, "<", ">")  # template arguments
    text = text.rsplit("::", 1)[-1]  # namespaces / classes
    return text.split()[-1] if text.split() else text  # return type


# ---------------------------------------------------------------------------- header sniffing
def _split(line: str) -> List[str]:
    return next(csv.reader([line]), [])


def header_layout(fields: List[str]) -> Optional[str]:
    """LONG or RAW when `fields` is an ncu --csv header row, else None."""
    if not fields or fields[0].lstrip("\ufeff") != "ID" or "Kernel Name" not in fields:
        return None
    if all(c in fields for c in ("Metric Name", "Metric Value")):
        return LONG
    # --page raw: the launch columns, then metric names (ncu's names always hold "__").
    if any("__" in f for f in fields if f not in LAUNCH_COLUMNS):
        return RAW
    return None


def find_header(lines: Iterable[str]) -> Optional[Tuple[int, List[str], str]]:
    """(line index, header fields, layout) of the first ncu CSV header among `lines`."""
    for i, line in enumerate(lines):
        if "ID" not in line[:8] or "Kernel Name" not in line:  # cheap filter before csv parsing
            continue
        fields = _split(line)
        layout = header_layout(fields)
        if layout:
            fields[0] = "ID"  # a UTF-8 BOM may precede it
            return i, fields, layout
    return None


def _decode(data: bytes) -> str:
    return data.decode("utf-8-sig", errors="replace")


def _is_ncu_log(line: str) -> bool:
    return line.startswith("==PROF==") or line.startswith("==WARNING==") or line.startswith("==ERROR==")


def looks_like_ncu_csv(head: bytes) -> bool:
    """True for ncu --csv output: its header row, after any ==PROF== log lines.  ncu's
    console log without a table also counts, so the reader can say what is missing."""
    if b"\x00" in head:
        return False
    lines = _decode(head).splitlines()
    if find_header(lines) is not None:
        return True
    return any(_is_ncu_log(line) for line in lines)


# ---------------------------------------------------------------------------- launches
@dataclasses.dataclass
class Launch:
    """One profiled launch while reading: its launch columns, metrics and rule results."""

    columns: Dict[str, str]
    values: Dict[str, object] = dataclasses.field(default_factory=dict)  # metric -> base value
    raw: Dict[str, list] = dataclasses.field(default_factory=dict)  # metric -> [value, unit]
    rules: List[dict] = dataclasses.field(default_factory=list)
    sections: Dict[str, str] = dataclasses.field(default_factory=dict)  # raw key -> section
    scaled: bool = False  # some value was printed in a scaled unit
    infinite: List[str] = dataclasses.field(default_factory=list)  # metrics printed as inf / 1e309

    def put(self, name: str, value, unit: str) -> None:
        self.values[name] = value
        self.raw[name] = [value, unit]

    def put_infinite(self, name: str, text: str, unit: str) -> None:
        """An infinite value is a value: the details keep it as printed (JSON has no infinity), the
        kernel fields leave it empty (no sum, ratio or roofline point can use it)."""
        self.values[name] = math.nan
        self.raw[name] = [text.strip(), unit]
        self.infinite.append(name)


def _dims(text: str) -> Optional[List[float]]:
    """'(63, 63, 1)' -> [63.0, 63.0, 1.0]."""
    parts = text.strip().strip("()").split(",")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        return None
    return values if len(values) == 3 else None


def put_launch_columns(launch: Launch) -> None:
    """The launch columns as the metrics a .ncu-rep holds them under."""
    cols = launch.columns
    for column, metric in (("Context", "launch__context_id"), ("Stream", "launch__stream_id")):
        value = parse_value(cols.get(column, ""))
        if isinstance(value, float) and not math.isnan(value):
            launch.put(metric, value, "")
    device = parse_value(cols.get("Device", ""))
    if isinstance(device, float) and not math.isnan(device):
        launch.put("launch__device_id", device, "")
    elif isinstance(device, str):  # some versions print the device name
        launch.put("device__attribute_display_name", device, "")
    major, _, minor = cols.get("CC", "").strip().partition(".")
    if major.isdigit() and minor.isdigit():
        launch.put("device__attribute_compute_capability_major", float(major), "")
        launch.put("device__attribute_compute_capability_minor", float(minor), "")
    for column, prefix in (("Block Size", "launch__block_dim"), ("Grid Size", "launch__grid_dim")):
        dims = _dims(cols.get(column, ""))
        for axis, value in zip("xyz", dims or []):
            launch.put(f"{prefix}_{axis}", value, "")


@functools.lru_cache(maxsize=4096)
def metric_for_label(label: str, base_unit: str) -> str:
    """The metric name behind a Metric Name cell: a metric name as is, a section label mapped,
    an unknown label kept as printed.  `--print-metric-name label-name` adds "(name)"."""
    if "__" in label and " " not in label:
        return label
    match = re.search(r"\(([A-Za-z0-9_]+__[\w.:]+)\)\s*$", label)
    if match:
        return match.group(1)
    if label == "Memory Throughput" and base_unit == "byte/s":
        return "dram__bytes.sum.per_second"  # Memory Workload Analysis reuses SOL's label for DRAM bandwidth
    return DETAILS_LABELS.get(label, label)


def put_metric_row(launch: Launch, section: str, label: str, unit: str, text: str) -> None:
    value, base, factor = base_value(text, unit)
    name = metric_for_label(label, base)
    if name == label and "__" not in label:
        # An unmapped label: two sections may print the same one, keep both.
        if name in launch.raw and launch.sections.get(name) != section:
            name = f"{section}: {label}"
        launch.sections[name] = section
    if isinstance(value, float) and math.isinf(value):
        launch.put_infinite(name, text, base)
    else:
        launch.put(name, value, base)
    launch.scaled = launch.scaled or factor != 1.0


# ncu prints MsgType as a word; numbers as ncu_report's IRuleResult.MsgType (0 none .. 4 error).
RULE_TYPES = {"": 0, "OK": 1, "INF": 1, "INFO": 1, "OPT": 2, "WRN": 3, "WARNING": 3, "ERR": 4, "ERROR": 4}


def rule_result(cell) -> dict:
    """A rule row -> the dict read_ncu_rep gives (the CSV has no rule display name or title)."""
    speedup = parse_value(cell("Estimated Speedup"))
    return {
        "rule": cell("Rule Name"),
        "name": "",
        "section": cell("Section Name"),
        "type": RULE_TYPES.get(cell("Rule Type").strip().upper(), 0),
        "title": "",
        "message": cell("Rule Description"),
        "speedup_type": cell("Estimated Speedup Type").strip().lower(),
        "estimated_speedup_pct": speedup if isinstance(speedup, float) else math.nan,
    }


class Columns:
    """Cells by column name; short records (ncu ends metric rows early) read as ""."""

    def __init__(self, header: List[str]):
        self.index = {name: i for i, name in enumerate(header)}
        self.launch_names = [c for c in LAUNCH_COLUMNS if c in self.index]
        positions = [self.index[c] for c in self.launch_names]
        self._launch_cells = operator.itemgetter(*positions, 0)  # the ID too: a tuple even for one column
        self._launch_width = max(positions, default=0) + 1

    def getter(self, names: Tuple[str, ...]):
        """record -> the cells of `names` as a tuple ("" for a column the header lacks); one C call
        per row when all are present (records must then reach the last of them)."""
        if all(n in self.index for n in names):
            return operator.itemgetter(*(self.index[n] for n in names))
        return lambda record: tuple(self.get(record, n) for n in names)

    def launch_cells(self, record: List[str]) -> tuple:
        """The launch columns' cells of a record, in launch_names order (one C call per row)."""
        if len(record) >= self._launch_width:
            return self._launch_cells(record)[:-1]
        return tuple(self.get(record, c) for c in self.launch_names)

    def get(self, record: List[str], column: str) -> str:
        i = self.index.get(column)
        return record[i] if i is not None and i < len(record) else ""

    def launch_columns(self, record: List[str]) -> Dict[str, str]:
        return {c: self.get(record, c) for c in LAUNCH_COLUMNS if c in self.index}


def _is_launch_id(text: str) -> bool:
    return text.strip().isdigit()


def skip_row(path: Path, line: int, record: List[str], header: List[str], least: int) -> bool:
    """Whether a record without a launch ID can be skipped: application output or the header printed
    again.  A record as wide as a table row whose ID cell is not a number is a damaged row: skipping
    it would drop its metric silently."""
    if record == header or not least <= len(record) <= len(header):
        return True
    raise InputError(path, f"line {line}: a table row whose ID cell is {shown(record[0])}, not a launch number: "
                     "the file is damaged", DAMAGED_FIX)


Records = Iterable[Tuple[int, List[str]]]  # (line number, cells)


class MetricRows:
    """The (launch, section, metric) rows seen so far: ncu prints each once, so a repeat with another
    value is damage (a duplicated or spliced chunk, two reports concatenated) and refused; a repeat
    word for word changes nothing and is only counted (the caller notes it)."""

    def __init__(self, path: Path):
        self.path, self.first, self.repeats = path, {}, 0

    def is_new(self, line: int, key: tuple, printed: Tuple[str, str]) -> bool:
        seen = self.first.setdefault(key, (line, printed))
        if seen[0] == line:
            return True
        if seen[1] != printed:
            raise InputError(self.path, f"line {line}: launch {shown(key[1])} prints {shown(key[3])} again with "
                             f"another value ({shown(printed[1])}; line {seen[0]}: {shown(seen[1][1])}): "
                             "the file is damaged or joins two reports", DAMAGED_FIX)
        self.repeats += 1
        return False


def _finite_launch_columns(path: Path, line: int, launch: Launch) -> None:
    """A device ID, stream or grid dimension is a finite number: an infinite one is a damaged cell."""
    for name, value in launch.values.items():
        if isinstance(value, float) and math.isinf(value):
            raise InputError(path, f"line {line}: {name} of launch {shown(launch.columns.get('ID', ''))} is infinite "
                             "in the launch columns: the file is damaged", DAMAGED_FIX)


class LaunchRows:
    """Launches by (process ID, launch ID).  ncu numbers launches across the whole report, so an ID under a
    second process ID is a damaged cell, refused: it would read as an extra launch.  Later rows repeat
    their launch's columns; where they differ the first row's are kept and the rows counted (noted)."""

    def __init__(self, path: Path, cols: Columns):
        self.path, self.cols = path, cols
        self.launches: Dict[Tuple[str, str], Launch] = {}
        self.first_cells: Dict[Tuple[str, str], tuple] = {}
        self.process_of: Dict[str, Tuple[str, int]] = {}
        self.differing: Dict[str, int] = {}  # launch column -> rows whose copy differs

    def launch(self, line: int, record: List[str], process: str, launch_id: str) -> Launch:
        launch = self.launches.get((process, launch_id))
        if launch is None:
            first_process, first_line = self.process_of.setdefault(launch_id, (process, line))
            if first_process != process:
                raise InputError(self.path, f"line {line}: launch {shown(launch_id)} appears under process ID "
                                 f"{shown(process)} and, on line {first_line}, {shown(first_process)}: the file is "
                                 "damaged", DAMAGED_FIX)
            launch = self.launches[(process, launch_id)] = Launch(self.cols.launch_columns(record))
            self.first_cells[(process, launch_id)] = self.cols.launch_cells(record)
            put_launch_columns(launch)
            _finite_launch_columns(self.path, line, launch)
        else:
            self._compare(self.first_cells[(process, launch_id)], self.cols.launch_cells(record))
        return launch

    def _compare(self, first: tuple, cells: tuple) -> None:
        if cells == first:
            return
        for column, a, b in zip(self.cols.launch_names, first, cells):
            if a != b:
                self.differing[column] = self.differing.get(column, 0) + 1


@dataclasses.dataclass
class ReadingFacts:
    """What a reader saw that the run's notes must tell: rows repeated word for word, and rows whose
    copy of a launch column differs from their launch's first row (by column)."""

    repeats: int = 0
    differing: Dict[str, int] = dataclasses.field(default_factory=dict)


def long_launches(path: Path, header: List[str], records: Records) -> Tuple[List[Launch], "ReadingFacts"]:
    """One row per metric (or rule result), grouped by launch ID in the order ncu printed them; and
    how many rows repeated an earlier one word for word."""
    cols = Columns(header)
    # Rows may end after the metric columns (no rule columns filled); they must reach them.
    least = max(cols.index[c] for c in LONG_COLUMNS if c in cols.index) + 1
    metric_cells = cols.getter(LONG_COLUMNS)
    launches, rows = LaunchRows(path, cols), MetricRows(path)
    for line, record in records:
        launch_id = cols.get(record, "ID")
        if not _is_launch_id(launch_id) and skip_row(path, line, record, header, least):
            continue  # application output or a repeated header between rows
        csvtext.require_width(path, line, record, len(header), DAMAGED_FIX, least)
        process = cols.get(record, "Process ID")
        launch = launches.launch(line, record, process, launch_id)
        section, label, unit, value = metric_cells(record)
        key = (process, launch_id, section, label)
        if label and rows.is_new(line, key, (unit, value)):
            put_metric_row(launch, section, label, unit, value)
        if cols.get(record, "Rule Name"):
            launch.rules.append(rule_result(lambda column: cols.get(record, column)))
    return list(launches.launches.values()), ReadingFacts(rows.repeats, launches.differing)


def raw_launches(path: Path, header: List[str], records: Records) -> Tuple[List[Launch], ReadingFacts]:
    """`--page raw`: metric columns after the launch columns; a units row (empty ID) first.
    Every row is as wide as the header (a launch row with fewer or more cells is damaged)."""
    cols = Columns(header)
    metric_cols = [(i, name) for i, name in enumerate(header) if name not in LAUNCH_COLUMNS]
    units: Dict[int, str] = {}
    launches = []
    for line, record in records:
        launch_id = cols.get(record, "ID")
        if not launch_id.strip() and not launches:
            csvtext.require_width(path, line, record, len(header), DAMAGED_FIX, least=0)
            units = {i: record[i] for i, _ in metric_cols if i < len(record)}
            continue
        if not _is_launch_id(launch_id) and skip_row(path, line, record, header, len(header)):
            continue
        csvtext.require_width(path, line, record, len(header), DAMAGED_FIX)
        launch = Launch(cols.launch_columns(record))
        put_launch_columns(launch)
        _finite_launch_columns(path, line, launch)
        for i, name in metric_cols:
            put_metric_row(launch, "", name, units.get(i, ""), record[i] if i < len(record) else "")
        launches.append(launch)
    return launches, ReadingFacts()


# ---------------------------------------------------------------------------- reader
_VERSION_RE = re.compile(r"(20\d\d\.\d+\.\d+)(?:\.\d+)? \(build \d+\)")


def _records(path: Path, lines: List[str], start: int) -> Records:
    """Records after the header line `start` (0-based).  ncu's log lines may also follow the table:
    they read as empty records, so line numbers stay those of the file."""
    table = ("" if _is_ncu_log(line) else line for line in lines[start + 1:])
    return csvtext.records(path, table, DAMAGED_FIX, first_line=start + 2)


def _no_header_error(path: Path, lines: List[str]) -> InputError:
    if any(_is_ncu_log(line) for line in lines):
        return InputError(path, "Nsight Compute console output without a CSV table",
                          "re-run with `ncu --csv --page details` (or `--page raw`) and keep stdout in the file")
    return InputError(path, 'not Nsight Compute CSV output (no "ID",...,"Kernel Name" header row)', NOT_NCU_FIX)


def read_ncu_csv(path) -> Profile:
    path = Path(path)
    data = read_input_bytes(path)
    if not data.strip():
        raise InputError(path, "file is empty", NOT_NCU_FIX)
    if b"\x00" in data[:64 << 10]:
        raise InputError(path, "binary file, not Nsight Compute CSV output", NOT_NCU_FIX)
    text = _decode(data)
    lines = csvtext.lines(text)
    found = find_header(lines)
    if found is None:
        raise _no_header_error(path, lines)
    start, header, layout = found
    # The application's own output may precede the table in any encoding; the table itself is ncu's.
    csvtext.check_characters(path, text, DAMAGED_FIX, start=text.find(lines[start]))
    csvtext.require_unique(path, header, DAMAGED_FIX, line=start + 1)
    read_launches = long_launches if layout == LONG else raw_launches
    launches, facts = read_launches(path, header, _records(path, lines, start))
    if not launches:
        raise InputError(path, "the CSV holds no profiled kernel launches",
                         "check the ncu filters (-k, --launch-count) used to capture it")
    profile = build_profile(launches)
    version = _VERSION_RE.search("\n".join(lines[:start]))
    profile.provenance = Provenance(tool="ncu", tool_version=version.group(1) if version else "",
                                    source_path=str(path.resolve()), source_sha256=sha256_of(data),
                                    source_format=layout)
    if any(launch.scaled for launch in launches):
        profile.notes.append("ncu printed some values in scaled units with few digits (e.g. usecond); "
                             "they were converted to base units and carry only the printed precision")
    profile.notes += reading_notes(launches, facts)
    return profile


def reading_notes(launches: List[Launch], facts: ReadingFacts) -> List[str]:
    """What the run shows differently from the CSV, said in the run's notes."""
    notes = []
    infinite = [name for launch in launches for name in launch.infinite]
    if infinite:
        names = ", ".join(dict.fromkeys(infinite))
        notes.append(f"{len(infinite)} metric value(s) printed as infinite ({names}): kept as printed in the launch "
                     "details; the kernels table leaves them empty (no finite number to compute with)")
    if facts.repeats:
        notes.append(f"{facts.repeats} row(s) repeat an earlier row of the same launch and metric word for word: "
                     "read once")
    if facts.differing:
        columns = ", ".join(f"{column} ({n} row(s))" for column, n in facts.differing.items())
        notes.append(f"some rows print launch columns that differ from their launch's first row: {columns}; "
                     "each launch is read with its first row's")
    return notes


def build_profile(launches: List[Launch]) -> Profile:
    """The Profile read_ncu_rep would give for these launches (provenance filled by the caller)."""
    rows = []
    device_metrics: Dict[int, dict] = {}
    device_peaks: Dict[int, Dict[str, float]] = {}
    for launch in launches:
        name = launch.columns.get("Kernel Name", "")
        row = ncu_metrics.kernel_fields(launch.values)
        row.update(launch_id=len(rows), range_id=0, name=function_name(name),
                   demangled_name="" if name.startswith("_Z") else name,
                   mangled_name=name if name.startswith("_Z") else "")
        device = 0 if math.isnan(row["device"]) else int(row["device"])
        device_metrics.setdefault(device, launch.values)
        peaks = device_peaks.setdefault(device, {})
        for key, value in ncu_metrics.kernel_peaks(launch.values).items():
            peaks[key] = max(peaks.get(key, 0.0), value)
        rows.append(row)
    devices = [ncu_metrics.device_from_metrics(d, m, device_peaks.get(d)) for d, m in sorted(device_metrics.items())]
    provenance = Provenance(tool="ncu", tool_version="", source_path="", source_sha256="", source_format="")
    return Profile(provenance, devices, normalise_kernels(rows),
                   [launch.raw for launch in launches], [launch.rules for launch in launches])


# ---------------------------------------------------------------- registry hooks (readers/__init__.py)
FORMATS = ("ncu-csv",)


def sniff(path: Path, head) -> Optional[str]:
    return "ncu-csv" if head is not None and looks_like_ncu_csv(head) else None


def read(path, fmt: str = "ncu-csv") -> Profile:
    return read_ncu_csv(path)
