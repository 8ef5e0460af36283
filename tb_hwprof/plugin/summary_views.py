"""The Summaries view's JSON document (docs/http_api.md: /summaries): every summary table a run
exported, the profiler's own first (nsys `cuda_api_sum` / `osrt_sum`, rocprof `api_stats` /
`kernel_stats`, VTune's summary), then the ones tb-hwprof derived, each with the view that
already shows it.  The tables themselves come from /summary (one at a time, as exported)."""
from __future__ import annotations

from ..analysis.pipeline import ANALYSIS_SUMMARIES
from ..logdir import metadata
from . import routes
from .store import HttpError, RunEntry

# Tables tb-hwprof computes from the trace (not a profiler's own output), by the view that shows them.
DERIVED = {
    "gpu_activity": "overview", "gpu_utilisation": "overview", "gpu_idle_gaps": "overview",
    "gpu_idle_attribution": "overview", "nvtx_phases": "phases", "op_gpu_time": "operators",
    "op_shapes": "roofline", "step_time_breakdown": "steps", "torch_gpu_summary": None, "ranks": "distributed",
    "op_counters": "operators", "counter_join": None,  # a trace joined with a counter report (analysis/join.py)
    "module_tree": "modules", "module_ops": "modules", "python_stacks": "stacks", "python_stack_ops": "stacks",
    "memory_by_op": "memory", "memory_peak": "memory", "memory_curve": "memory", "memory_events": "memory",
}
# tb-hwprof names its own columns by unit (trace_ns, counted_ns, sm_throughput_pct): a derived table's
# column without a declared unit takes its suffix's.
SUFFIX_UNITS = (("_ns", "ns"), ("_pct", "%"), ("_bytes", "bytes"))


def derived_units(frame) -> dict:
    """Units of a tb-hwprof table's columns: those it declares, else those its names' suffixes give."""
    units = {str(c): u for c, u in (frame.attrs.get("units") or {}).items() if u}
    for column in map(str, frame.columns):
        unit = next((u for suffix, u in SUFFIX_UNITS if column.endswith(suffix)), None)
        if unit and column not in units and frame[column].dtype.kind in "iuf":
            units[column] = unit
    return units
# A profiler's own tables that another view also draws.
TOOL_TABLES_SHOWN = {"nvtx_sum": "phases", "cpu_hotspots": "cpu"}

# Titles of the tables users meet most; others are titled from their name.
TITLES = {
    "cuda_api_sum": "CUDA API calls", "cuda_gpu_kern_sum": "CUDA kernels",
    "cuda_gpu_mem_time_sum": "Memory operations by time", "cuda_gpu_mem_size_sum": "Memory operations by size",
    "cuda_gpu_mem_kind_sum": "Memory copies by kind", "osrt_sum": "OS runtime calls", "nvtx_sum": "NVTX ranges",
    "api_stats": "HIP / HSA API calls", "hip_api_stats": "HIP API calls", "hsa_api_stats": "HSA API calls",
    "kernel_stats": "Kernels", "copy_stats": "Memory copies", "api_trace": "API calls (trace)",
    "hip_api_trace": "HIP API calls (trace)", "hsa_api_trace": "HSA API calls (trace)",
    "memory_copies": "Memory copies (trace)", "rocpd_top": "Top regions (rocpd)",
    "pmc_kernel_top": "Top kernels (rocprof-compute)", "roofline_benchmark": "Roofline benchmark",
    "vtune_summary": "VTune summary", "cpu_hotspots": "CPU hotspots",
    "gpu_activity": "GPU busy and idle", "gpu_utilisation": "GPU busy over time", "gpu_idle_gaps": "Longest GPU idle gaps",
    "gpu_idle_attribution": "What the CPU did while the GPU idled", "nvtx_phases": "NVTX phases",
    "op_gpu_time": "Operators", "op_shapes": "Operator shapes", "step_time_breakdown": "Step time breakdown",
    "torch_gpu_summary": "GPU summary (torch-tb-profiler)", "ranks": "Ranks",
    "op_counters": "Counters per operator", "counter_join": "Trace launches joined with report launches",
}


def table_title(name: str) -> str:
    return TITLES.get(name) or name.replace("_", " ").capitalize()


def table_entry(entry: RunEntry, name: str, tool: str) -> dict:
    """One listed table: its name, title, who made it, the view that already shows it, its shape."""
    frame = entry.summary(name)
    # Every table the analysis makes is tb-hwprof's, listed here or not (a new step's tables are
    # never shown as the profiler's own).
    derived = name in DERIVED or name in ANALYSIS_SUMMARIES
    return {"name": name, "title": table_title(name), "origin": "tb-hwprof" if derived else tool,
            "derived": derived, "shown_in": DERIVED.get(name) if derived else TOOL_TABLES_SHOWN.get(name),
            "rows": int(len(frame)), "columns": [str(c) for c in frame.columns],
            "units": derived_units(frame) if derived else
            {str(c): u for c, u in (frame.attrs.get("units") or {}).items() if u}}


def summaries(entry: RunEntry) -> dict:
    # not compare's index, nor the tables the kernel drawer reads
    names = [n for n in entry.summary_names() if n not in metadata.UNLISTED_SUMMARIES and n not in routes.DRAWER_TABLES]
    if not names:
        raise HttpError(404, f"run {entry.run!r} exported no summary tables")
    tool = (entry.manifest.get("provenance") or {}).get("tool", "") or "the profiler"
    listed = [table_entry(entry, name, tool) for name in names]
    listed.sort(key=lambda t: (t["derived"], t["shown_in"] is not None, t["name"]))  # the tool's own, unshown first
    return {"run": entry.run, "tool": tool, "tables": listed}
