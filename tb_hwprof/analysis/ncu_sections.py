"""One Nsight Compute launch as Nsight Compute groups it: its sections, each with the metrics its
section file shows, in the report's order and with Nsight Compute's labels.

The report keeps each launch's raw metrics ({name: [value, unit]}, the details files) but not the
sections' metric lists, so SECTIONS below holds them: the header and body metrics that
ncu_report's ISection.header_metrics()/body_metrics() list for the `--set full` sections of
Nsight Compute 2020.2 to 2024.2 (tests/test_ncu_sections.py checks the table against the reports).
A section shows only the metrics the launch has, and only when the report collected it (most of
its header metrics present, `collected`): a report without a section shows no empty section.

Besides rows, some sections carry the figures Nsight Compute draws:
- SpeedOfLight: the `breakdown:` metrics (the units each throughput is the maximum of), ranked;
- ComputeWorkloadAnalysis: the pipes' utilisation, ranked;
- MemoryWorkloadAnalysis: the memory chart (Kernel, L1/TEX, Shared, L2, DRAM and the traffic
  between them: instructions, requests, sectors, bytes, hit rates, bank conflicts);
- WarpStateStats: the warp stall reasons in cycles per issued instruction, ranked;
- SourceCounters: the sampled warp stall reasons (smsp__pcsamp_*), ranked.

`parse_markup` splits a rule message's `@url:text:link@` and `@section:Id:Title@` markup into
parts the drawer renders as links (never as raw text, never as HTML).
"""
from __future__ import annotations

import functools
import math
import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

# (section id, title, ((metric, label), ...)) in Nsight Compute's own order (ISection.order()).
SECTIONS: Tuple[Tuple[str, str, Tuple[Tuple[str, str], ...]], ...] = (
    ("SpeedOfLight", "GPU Speed Of Light Throughput", (
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "Compute (SM) Throughput"),
        ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "Memory Throughput"),
        ("l1tex__throughput.avg.pct_of_peak_sustained_active", "L1/TEX Cache Throughput"),
        ("lts__throughput.avg.pct_of_peak_sustained_elapsed", "L2 Cache Throughput"),
        ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "DRAM Throughput"),
        ("gpu__time_duration.sum", "Duration"),
        ("gpc__cycles_elapsed.max", "Elapsed Cycles"),
        ("sm__cycles_active.avg", "SM Active Cycles"),
        ("gpc__cycles_elapsed.avg.per_second", "SM Frequency"),
        ("dram__cycles_elapsed.avg.per_second", "DRAM Frequency"))),
    ("PmSampling", "PM Sampling", (
        ("profiler__pmsampler_interval_cycles", "Maximum Sampling Interval"),
        ("profiler__pmsampler_pass_groups", "# Pass Groups"),
        ("profiler__pmsampler_buffer_size_bytes", "Maximum Buffer Size"),
        ("profiler__pmsampler_dropped_samples", "Dropped Samples"))),
    ("ComputeWorkloadAnalysis", "Compute Workload Analysis", (
        ("sm__inst_executed.avg.per_cycle_elapsed", "Executed Ipc Elapsed"),
        ("sm__inst_executed.avg.per_cycle_active", "Executed Ipc Active"),
        ("sm__inst_issued.avg.per_cycle_active", "Issued Ipc Active"),
        ("sm__instruction_throughput.avg.pct_of_peak_sustained_active", "SM Busy"),
        ("sm__inst_issued.avg.pct_of_peak_sustained_active", "Issue Slots Busy"))),
    ("MemoryWorkloadAnalysis", "Memory Workload Analysis", (
        ("dram__bytes.sum.per_second", "Memory Throughput"),
        ("gpu__compute_memory_access_throughput.avg.pct_of_peak_sustained_elapsed", "Mem Busy"),
        ("gpu__compute_memory_request_throughput.avg.pct_of_peak_sustained_elapsed", "Max Bandwidth"),
        ("sm__memory_throughput.avg.pct_of_peak_sustained_elapsed", "Mem Pipes Busy"),
        ("l1tex__t_sector_hit_rate.pct", "L1/TEX Hit Rate"),
        ("lts__t_sector_hit_rate.pct", "L2 Hit Rate"),
        ("lts__average_gcomp_input_sector_success_rate.pct", "L2 Compression Success Rate"),
        ("lts__average_gcomp_output_sector_compression_achieved_rate.ratio", "L2 Compression Ratio"))),
    ("SchedulerStats", "Scheduler Statistics", (
        ("smsp__issue_active.avg.pct_of_peak_sustained_active", "One or More Eligible"),
        ("smsp__issue_inst0.avg.pct_of_peak_sustained_active", "No Eligible"),
        ("smsp__warps_active.avg.per_cycle_active", "Active Warps Per Scheduler"),
        ("smsp__warps_eligible.avg.per_cycle_active", "Eligible Warps Per Scheduler"),
        ("smsp__issue_active.avg.per_cycle_active", "Issued Warp Per Scheduler"))),
    ("WarpStateStats", "Warp State Statistics", (
        ("smsp__average_warp_latency_per_inst_issued.ratio", "Warp Cycles Per Issued Instruction"),
        ("smsp__average_warps_active_per_inst_executed.ratio", "Warp Cycles Per Executed Instruction"),
        ("smsp__thread_inst_executed_per_inst_executed.ratio", "Avg. Active Threads Per Warp"),
        ("smsp__thread_inst_executed_pred_on_per_inst_executed.ratio", "Avg. Not Predicated Off Threads Per Warp"))),
    ("InstructionStats", "Instruction Statistics", (
        ("smsp__inst_executed.sum", "Executed Instructions"),
        ("smsp__inst_issued.sum", "Issued Instructions"),
        ("smsp__inst_executed.avg", "Avg. Executed Instructions Per Scheduler"),
        ("smsp__inst_issued.avg", "Avg. Issued Instructions Per Scheduler"))),
    ("LaunchStats", "Launch Statistics", (
        ("launch__block_size", "Block Size"),
        ("launch__grid_size", "Grid Size"),
        ("launch__thread_count", "Threads"),
        ("launch__registers_per_thread", "Registers Per Thread"),
        ("launch__shared_mem_per_block_static", "Static Shared Memory Per Block"),
        ("launch__shared_mem_per_block_dynamic", "Dynamic Shared Memory Per Block"),
        ("launch__shared_mem_per_block_driver", "Driver Shared Memory Per Block"),
        ("launch__shared_mem_config_size", "Shared Memory Configuration Size"),
        ("launch__func_cache_config", "Function Cache Configuration"),
        ("launch__waves_per_multiprocessor", "Waves Per SM"),
        ("launch__sm_count", "# SMs"),
        ("launch__uses_green_context", "Uses Green Context"))),
    ("Occupancy", "Occupancy", (
        ("sm__maximum_warps_per_active_cycle_pct", "Theoretical Occupancy"),
        ("sm__warps_active.avg.pct_of_peak_sustained_active", "Achieved Occupancy"),
        ("sm__maximum_warps_avg_per_active_cycle", "Theoretical Active Warps per SM"),
        ("sm__warps_active.avg.per_cycle_active", "Achieved Active Warps Per SM"),
        ("launch__occupancy_limit_registers", "Block Limit Registers"),
        ("launch__occupancy_limit_shared_mem", "Block Limit Shared Mem"),
        ("launch__occupancy_limit_warps", "Block Limit Warps"),
        ("launch__occupancy_limit_blocks", "Block Limit SM"))),
    ("SourceCounters", "Source Counters", (
        ("smsp__inst_executed_op_branch.sum", "Branch Instructions"),
        ("derived__smsp__inst_executed_op_branch_pct", "Branch Instructions Ratio"),
        ("smsp__sass_average_branch_targets_threads_uniform.pct", "Branch Efficiency"),
        ("smsp__sass_branch_targets_threads_divergent.avg", "Avg. Divergent Branches"))),
    ("WorkloadDistribution", "GPU and Memory Workload Distribution", (
        ("sm__cycles_active.avg", "Average SM Active Cycles"),
        ("smsp__cycles_active.avg", "Average SMSP Active Cycles"),
        ("l1tex__cycles_active.avg", "Average L1 Active Cycles"),
        ("lts__cycles_active.avg", "Average L2 Active Cycles"),
        ("dram__cycles_active.avg", "Average DRAM Active Cycles"),
        ("sm__cycles_elapsed.sum", "Total SM Elapsed Cycles"),
        ("smsp__cycles_elapsed.sum", "Total SMSP Elapsed Cycles"),
        ("l1tex__cycles_elapsed.sum", "Total L1 Elapsed Cycles"),
        ("lts__cycles_elapsed.sum", "Total L2 Elapsed Cycles"),
        ("dram__cycles_elapsed.sum", "Total DRAM Elapsed Cycles"))),
)

# Rows shown after a section's header rows when the launch has them, not counted by `collected`:
# body metrics (its tables) and header metrics newer Nsight Compute versions added (2025.1's LaunchStats).
BODY = {
    "LaunchStats": (("launch__stack_size", "Stack Size"), ("launch__tpc_count", "# TPCs"),
                    ("launch__tpc_enabled", "Enabled TPC IDs")),
    "MemoryWorkloadAnalysis": (("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "Shared Load Bank Conflicts"),
                               ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "Shared Store Bank Conflicts")),
    "SchedulerStats": (("smsp__maximum_warps_avg_per_active_cycle", "Theoretical Warps Per Scheduler"),
                       ("smsp__warps_active.avg.peak_sustained", "GPU Maximum Warps Per Scheduler")),
}
# A section shows when the launch has this share of its header metrics: Nsight Compute collects a
# section's header whole (a version may lack one or two), while a few of them turn up in launches
# that did not collect the section (gpu__time_duration.sum in every report; launch__* always).
COLLECTED = 0.7

# Sections drawn inside another (Nsight Compute's parent_identifier): their rules go to the parent.
CHILD_SECTIONS = {"SpeedOfLight_RooflineChart": "SpeedOfLight", "SpeedOfLight_HierarchicalSingleRooflineChart": "SpeedOfLight",
                  "SpeedOfLight_HierarchicalDoubleRooflineChart": "SpeedOfLight",
                  "SpeedOfLight_HierarchicalHalfRooflineChart": "SpeedOfLight",
                  "SpeedOfLight_HierarchicalTensorRooflineChart": "SpeedOfLight",
                  "MemoryWorkloadAnalysis_Chart": "MemoryWorkloadAnalysis",
                  "MemoryWorkloadAnalysis_Tables": "MemoryWorkloadAnalysis"}

# The throughputs whose `breakdown:` lists Nsight Compute draws under Speed Of Light.
BREAKDOWNS = (("sm__throughput.avg.pct_of_peak_sustained_elapsed", "Compute (SM) throughput breakdown"),
              ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "Memory throughput breakdown"))

# Metric-name prefixes of units, as Nsight Compute names them in the breakdown ("{UNIT}: {COMPOUND_NAME}").
UNIT_NAMES = {"dram": "DRAM", "fbpa": "FBPA", "l1tex": "L1", "lts": "L2", "ltc": "LTC", "sm": "SM", "smsp": "SMSP",
              "idc": "IDC", "gpu": "GPU", "gpc": "GPC", "tpc": "TPC", "gcc": "GCC", "pcie": "PCIe", "nvlrx": "NVLink RX",
              "nvltx": "NVLink TX", "lrc": "LRC", "gxbar": "GXBAR", "ltcfabric": "LTC Fabric", "mmu": "MMU"}
ACRONYMS = {"lg": "LG", "mio": "MIO", "imc": "IMC", "lsu": "LSU", "tex": "TEX", "alu": "ALU", "fma": "FMA",
            "xu": "XU", "adu": "ADU", "cbu": "CBU", "ipa": "IPA", "fp16": "FP16", "fp64": "FP64", "fp32": "FP32",
            "dmma": "DMMA", "hmma": "HMMA", "imma": "IMMA", "uniform": "Uniform", "l1": "L1", "l2": "L2",
            "dram": "DRAM", "sm": "SM", "smsp": "SMSP", "ld": "Load", "st": "Store", "op": "Op", "gcomp": "GCOMP"}

PIPE_UTILISATION = re.compile(r"^sm__(?:pipe_(\w+?)_cycles_active|inst_executed_pipe_(\w+?))"
                              r"\.avg\.pct_of_peak_sustained_active$")
# Warp stall reasons: cycles a warp spent stalled per issued instruction (WarpStateStats).
STALL_RATIO = re.compile(r"^smsp__average_warps?_(?:latency_)?issue_stalled_(\w+?)_per_issue_active\.ratio$")
# Sampled warp stall reasons (SourceCounters' "Warp Stall Sampling (All Samples)").
STALL_SAMPLES = re.compile(r"^smsp__pcsamp_warps_issue_stalled_(\w+)$")


def words(snake: str) -> str:
    """'long_scoreboard' -> 'Long Scoreboard', 'lg_throttle' -> 'LG Throttle'."""
    return " ".join(ACRONYMS.get(w, w.capitalize()) for w in snake.split("_") if w)


def stall_label(reason: str) -> str:
    """Nsight Compute's stall label without its 'Stall ' prefix ('no_instructions' -> 'No Instruction')."""
    return words({"no_instructions": "no_instruction"}.get(reason, reason))


def breakdown_label(metric: str) -> str:
    """'l1tex__data_pipe_lsu_wavefronts.avg.pct_...' -> 'L1: Data Pipe LSU Wavefronts'."""
    unit, _, counter = metric.split(".")[0].partition("__")
    return f"{UNIT_NAMES.get(unit, unit.upper())}: {words(counter)}"


def _number(raw: Mapping[str, list], metric: str) -> Optional[float]:
    """The metric's value when it is a finite number, else None."""
    pair = raw.get(metric)
    if not isinstance(pair, (list, tuple)) or not pair:
        return None
    value = pair[0]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value


def _unit(raw: Mapping[str, list], metric: str) -> str:
    pair = raw.get(metric)
    return str(pair[1]) if isinstance(pair, (list, tuple)) and len(pair) > 1 and pair[1] is not None else ""


def row(raw: Mapping[str, list], metric: str, label: str) -> Optional[dict]:
    """{label, value, unit, metric} of a metric the launch has (a number or a text), else None."""
    pair = raw.get(metric)
    if not isinstance(pair, (list, tuple)) or not pair or pair[0] is None:
        return None
    value = pair[0]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return {"label": label, "value": value, "unit": _unit(raw, metric), "metric": metric}


def rows(raw: Mapping[str, list], metrics: Sequence[Tuple[str, str]]) -> List[dict]:
    return [r for r in (row(raw, m, label) for m, label in metrics) if r is not None]


def ranked(raw: Mapping[str, list], labelled: Sequence[Tuple[str, str]]) -> List[dict]:
    """Numeric rows, largest first (ties keep the given order)."""
    numeric = [r for r in rows(raw, labelled) if _number(raw, r["metric"]) is not None]
    return sorted(numeric, key=lambda r: -r["value"])


def bars(kind_id: str, title: str, ranked_rows: List[dict], quantity: str) -> Optional[dict]:
    """A ranked bar chart with its top entry named, or None without rows."""
    if not ranked_rows:
        return None
    return {"kind": "bars", "id": kind_id, "title": title, "quantity": quantity, "rows": ranked_rows,
            "top": ranked_rows[0]["label"]}


def sol_breakdowns(raw: Mapping[str, list]) -> List[dict]:
    """The units behind compute and memory throughput (the `breakdown:` lists), ranked."""
    out = []
    for throughput, title in BREAKDOWNS:
        listed = raw.get(f"breakdown:{throughput}")
        names = listed[0] if isinstance(listed, (list, tuple)) and listed else None
        if not isinstance(names, str):
            continue
        chart = bars(f"breakdown:{throughput}", title,
                     ranked(raw, [(n, breakdown_label(n)) for n in names.split(",") if n]), "% of peak")
        if chart:
            out.append(chart)
    return out


def pipe_utilisation(raw: Mapping[str, list]) -> List[dict]:
    """The pipes' utilisation (% of peak, active cycles and instructions executed), ranked."""
    cycles, executed = [], []
    for metric in raw:
        match = PIPE_UTILISATION.match(metric)
        if match:
            (cycles if match.group(1) else executed).append((metric, words(match.group(1) or match.group(2))))
    charts = (bars("pipes:cycles", "Pipe utilisation (% of active cycles)", ranked(raw, sorted(cycles)), "% of peak"),
              bars("pipes:inst", "Pipe utilisation (% of peak instructions executed)", ranked(raw, sorted(executed)),
                   "% of peak"))
    return [c for c in charts if c]


@functools.lru_cache(maxsize=8)
def _stall_ratio_metrics(names: Tuple[str, ...]) -> Tuple[Tuple[str, str], ...]:
    """((reason, metric), ...) by reason of the stall ratio metrics among `names`.  The launches of
    a report mostly share one list of names: matched once per list, not per launch (the export asks
    for every latency-bound launch, ~300 regex matches each)."""
    found = {}
    for metric in names:
        match = STALL_RATIO.match(metric)
        if match and not match.group(1).endswith("_not_issued"):
            found.setdefault(match.group(1), metric)
    return tuple(sorted(found.items()))


def warp_stalls(raw: Mapping[str, list]) -> List[Tuple[str, dict]]:
    """[(reason, row)] of the stall reasons in cycles per issued instruction, largest first."""
    found = _stall_ratio_metrics(tuple(raw))
    labelled = [(metric, stall_label(reason)) for reason, metric in found]
    reason_of = {metric: reason for reason, metric in found}
    return [(reason_of[r["metric"]], r) for r in ranked(raw, labelled)]


def top_stall(raw: Mapping[str, list]) -> Optional[Tuple[str, float]]:
    """(label, cycles per issued instruction) of the launch's largest stall reason other than
    'Selected' (issuing is not a stall), or None without stall metrics."""
    for reason, r in warp_stalls(raw):
        if reason != "selected" and r["value"] > 0:
            return r["label"], r["value"]
    return None


def sampled_stalls(raw: Mapping[str, list]) -> List[dict]:
    """Warp stall reasons by PC samples (all samples, not only those not issued), largest first."""
    labelled = []
    for metric in raw:
        match = STALL_SAMPLES.match(metric)
        if match and not match.group(1).endswith("_not_issued"):
            labelled.append((metric, stall_label(match.group(1))))
    return ranked(raw, sorted(labelled))


# -- memory chart: boxes and the traffic between them, as far as the launch has the metrics ------
CHART_BOXES = (
    ("kernel", "Kernel", ()),
    ("l1tex", "L1/TEX Cache", (("l1tex__t_sector_hit_rate.pct", "Hit Rate"),)),
    ("shared", "Shared Memory", (("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "Bank Conflicts"),)),
    ("l2", "L2 Cache", (("lts__t_sector_hit_rate.pct", "Hit Rate"),)),
    ("dram", "Device Memory", (("dram__bytes.sum.per_second", "Throughput"),)),
)


def _lsu_link(space: str, op: str, target: str) -> Tuple[str, str, str, tuple]:
    base = f"pipe_lsu_mem_{space}_op_{op}"
    if target == "shared":
        return ("kernel", "shared", f"Shared {words(op)}", (
            (f"smsp__sass_inst_executed_op_shared_{op}.sum", "Instructions"),
            (f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum", "Wavefronts"),
            (f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op}.sum", "Bank Conflicts")))
    return ("kernel", "l1tex", f"{words(space)} {words(op)}", (
        (f"smsp__sass_inst_executed_op_{space}_{op}.sum", "Instructions"),
        (f"l1tex__t_requests_{base}.sum", "Requests"),
        (f"l1tex__t_sectors_{base}.sum", "Sectors"),
        (f"l1tex__t_sector_{base}_hit_rate.pct", "Hit Rate")))


CHART_LINKS = (
    _lsu_link("global", "ld", "l1tex"), _lsu_link("global", "st", "l1tex"),
    _lsu_link("local", "ld", "l1tex"), _lsu_link("local", "st", "l1tex"),
    _lsu_link("shared", "ld", "shared"), _lsu_link("shared", "st", "shared"),
    ("l1tex", "l2", "L1 → L2 Read", (("lts__t_requests_srcunit_tex_op_read.sum", "Requests"),
                                    ("lts__t_sectors_srcunit_tex_op_read.sum", "Sectors"),
                                    ("lts__t_sector_op_read_hit_rate.pct", "L2 Hit Rate"))),
    ("l1tex", "l2", "L1 → L2 Write", (("lts__t_requests_srcunit_tex_op_write.sum", "Requests"),
                                     ("lts__t_sectors_srcunit_tex_op_write.sum", "Sectors"),
                                     ("lts__t_sector_op_write_hit_rate.pct", "L2 Hit Rate"))),
    ("l2", "dram", "L2 ↔ DRAM Read", (("dram__sectors_read.sum", "Sectors"), ("dram__bytes_read.sum", "Bytes"))),
    ("l2", "dram", "L2 ↔ DRAM Write", (("dram__sectors_write.sum", "Sectors"), ("dram__bytes_write.sum", "Bytes"))),
)


def memory_chart(raw: Mapping[str, list]) -> Optional[dict]:
    """Nsight Compute's memory chart as data: the links the launch has a metric for, and the
    boxes they join (with their own figures), or None when it has none."""
    links = [{"from": src, "to": dst, "label": label, "rows": found}
             for src, dst, label, metrics in CHART_LINKS for found in [rows(raw, metrics)] if found]
    if not links:
        return None
    joined = {end for link in links for end in (link["from"], link["to"])}
    boxes = [{"id": box, "label": label, "rows": rows(raw, metrics)} for box, label, metrics in CHART_BOXES
             if box in joined]
    return {"kind": "memory_chart", "id": "memory_chart", "title": "Memory chart", "boxes": boxes, "links": links}


# -- sections --------------------------------------------------------------------------------------
def figures(section_id: str, raw: Mapping[str, list]) -> List[dict]:
    """The charts Nsight Compute draws in a section, as far as the launch has their metrics."""
    if section_id == "SpeedOfLight":
        return sol_breakdowns(raw)
    if section_id == "ComputeWorkloadAnalysis":
        return pipe_utilisation(raw)
    if section_id == "MemoryWorkloadAnalysis":
        chart = memory_chart(raw)
        return [chart] if chart else []
    if section_id == "WarpStateStats":
        chart = bars("warp_stalls", "Warp stall reasons (cycles per issued instruction)",
                     [r for _, r in warp_stalls(raw)], "cycles per issued instruction")
        return [with_unit_note(chart, STALL_RATIO_NOTE)] if chart else []
    if section_id == "SourceCounters":
        chart = bars("sampled_stalls", "Warp stall sampling (all samples)", sampled_stalls(raw), "samples")
        return [with_unit_note(chart, SAMPLED_STALL_NOTE)] if chart else []
    return []


# Nsight Compute's units for the stall figures say what is counted, not what the number measures:
# the drawer shows ncu's unit as given, and says once per chart what the figure is.
STALL_RATIO_NOTE = ("Nsight Compute gives these ratios the unit {units}: each is the average number of cycles "
                    "a warp spent stalled for that reason per issued instruction.")
SAMPLED_STALL_NOTE = ("Nsight Compute gives these counts the unit {units} (by reason): each is a number of "
                      "samples, a warp found stalled for that reason when its instruction was sampled.")


def with_unit_note(chart: dict, note: str) -> dict:
    """The chart with `unit_note`: what its figures are, naming the units Nsight Compute gave them."""
    units = sorted({r["unit"] for r in chart["rows"] if r["unit"]})
    if units:
        chart["unit_note"] = note.format(units=", ".join(f"'{u}'" for u in units))
    return chart


def rule_section(rule: Mapping) -> str:
    section = str(rule.get("section") or "")
    return CHILD_SECTIONS.get(section, section)


def collected(raw: Mapping[str, list], header: Sequence[Tuple[str, str]]) -> bool:
    """Whether the launch holds the section: COLLECTED of its header metrics have a value."""
    present = sum(row(raw, metric, "") is not None for metric, _ in header)
    return bool(header) and present >= COLLECTED * len(header)


def source_hotspots(hotspots: Sequence[Mapping]) -> Optional[dict]:
    """The launch's instructions with most sampled warp stalls (the reader's ncu_source_hotspots
    rows of this launch) as a table figure, stall reasons in Nsight Compute's words; None without."""
    if not hotspots:
        return None
    out = []
    for h in sorted(hotspots, key=lambda r: r.get("rank", 0)):
        reasons = [{"reason": h.get(f"stall_{i}") or "", "label": stall_label(h.get(f"stall_{i}") or ""),
                    "samples": h.get(f"stall_{i}_samples")} for i in range(1, 4) if h.get(f"stall_{i}")]
        line = h.get("source_line") or 0
        out.append({"rank": h.get("rank"), "address": h.get("address"), "sass": h.get("sass") or "",
                    "source_file": h.get("source_file") or "", "source_line": line if line > 0 else None,
                    "samples": h.get("samples"), "stalls": reasons})
    return {"kind": "hotspots", "id": "source_hotspots", "title": "Top instructions by sampled warp stalls",
            "rows": out, "has_line_info": any(r["source_line"] for r in out)}


KNOWN_SECTIONS = {section_id for section_id, _, _ in SECTIONS} | set(CHILD_SECTIONS)


def other_sections(raw: Mapping[str, list], listed: Sequence[Mapping], rules: Sequence[Mapping]) -> List[dict]:
    """The report's sections that SECTIONS does not know (custom section files: LoadMetrics,
    SharedMemAnalysis, ...), from the reader's ncu_report_sections rows (`listed`): Nsight Compute's
    title, description, labels and header / body metrics, with the launch's values.  A section shows
    when the launch holds one of its metrics; child sections (a parent id) are left out."""
    by_id: Dict[str, List[Mapping]] = {}
    for r in listed:
        if r.get("section_id") not in KNOWN_SECTIONS and not r.get("parent_id"):
            by_id.setdefault(str(r.get("section_id")), []).append(r)
    out = []
    for section_id, entries in sorted(by_id.items(), key=lambda item: (item[1][0].get("order") or 0, item[0])):
        def part_rows(part):
            metrics = sorted((e for e in entries if e.get("part") == part), key=lambda e: e.get("position") or 0)
            return rows(raw, [(str(e["metric"]), str(e.get("label") or e["metric"])) for e in metrics])
        header, body = part_rows("header"), part_rows("body")
        if not header and not body:
            continue
        owned = [i for i, rule in enumerate(rules) if rule_section(rule) == section_id]
        out.append({"id": section_id, "title": str(entries[0].get("title") or section_id), "rows": header,
                    "body": body, "figures": [], "rules": owned, "custom": True,
                    "description": str(entries[0].get("description") or "")})
    return out


def sections(raw: Mapping[str, list], rules: Sequence[Mapping] = (), hotspots: Sequence[Mapping] = (),
             listed: Sequence[Mapping] = ()) -> List[dict]:
    """The launch's sections in Nsight Compute's order: {id, title, rows, figures, rules (indexes
    into `rules`)}; only the sections the report collected (`collected`).  `hotspots`: the launch's
    rows of the reader's ncu_source_hotspots table, a table under Source Counters; `listed`: the
    reader's ncu_report_sections rows, whose sections SECTIONS lacks follow (other_sections)."""
    return known_sections(raw, rules, hotspots) + other_sections(raw, listed, rules)


def known_sections(raw: Mapping[str, list], rules: Sequence[Mapping], hotspots: Sequence[Mapping]) -> List[dict]:
    out = []
    for section_id, title, metrics in SECTIONS:
        if not collected(raw, metrics):
            continue
        found, charts = rows(raw, metrics + BODY.get(section_id, ())), figures(section_id, raw)
        if section_id == "SourceCounters" and source_hotspots(hotspots):
            charts.append(source_hotspots(hotspots))
        owned = [i for i, rule in enumerate(rules) if rule_section(rule) == section_id]
        out.append({"id": section_id, "title": title, "rows": found, "figures": charts, "rules": owned})
    return out


# -- rule message markup -----------------------------------------------------------------------------
MARKUP = re.compile(r"@(url|section):([^@]*)@")
SAFE_LINK = re.compile(r"^https?://[^\s\"'<>]+$", re.IGNORECASE)


def _url_part(body: str) -> dict:
    """'text:link' -> a link part; the href only for an http(s) address."""
    text, sep, link = body.partition(":")
    if not sep or re.match(r"(?i)https?://", body):  # a bare address
        text, link = body, body
    link = link.strip()
    return {"kind": "url", "text": text.strip() or link, "href": link if SAFE_LINK.match(link) else ""}


def parse_markup(message: str) -> List[dict]:
    """A rule message as parts: {kind: "text", text}, {kind: "url", text, href} (href "" unless
    http(s)) and {kind: "section", id, text}; joined, the parts' text is the message as read."""
    parts: List[dict] = []
    position = 0
    for match in MARKUP.finditer(message or ""):
        if match.start() > position:
            parts.append({"kind": "text", "text": message[position:match.start()]})
        kind, body = match.groups()
        if kind == "url":
            parts.append(_url_part(body))
        else:
            section_id, _, title = body.partition(":")
            parts.append({"kind": "section", "id": section_id, "text": title or section_id})
        position = match.end()
    if position < len(message or ""):
        parts.append({"kind": "text", "text": message[position:]})
    return parts


def message_parts(rules: Sequence[Mapping]) -> List[List[dict]]:
    """Each rule's message parsed (parse_markup), in the rules' order."""
    return [parse_markup(str(rule.get("message") or "")) for rule in rules]


def top_stall_clause(raw: Mapping[str, list]) -> str:
    """'; top warp stall: Long Scoreboard (21.4 cycles per issued instruction)' or ''."""
    top = top_stall(raw)
    return f"; top warp stall: {top[0]} ({top[1]:.1f} cycles per issued instruction)" if top else ""

