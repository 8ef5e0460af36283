"""The JSON documents of docs/http_api.md, built from a loaded run (the analyses do the work)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import List, Optional, Tuple

from ..analysis import bound_terms, compare, groups, ncu_sections, occupancy
from ..core.findings import Finding
from ..core.plain import plain, records
from ..logdir import metadata
from . import distributed_views, routes, summary_views, torch_views
from .store import HttpError, RunEntry, read_asset

RUN_FIELDS = ("tool", "tool_version", "source_path", "source_format", "export_time")


def run_info(run: str, manifest: Optional[dict], error: Optional[str], series_step: bool = False) -> dict:
    """One /runs row: provenance, devices and size from the manifest, or the run's error; its views
    (series_step: the run is a step of an optimisation series, which the service finds)."""
    info = {"run": run, "error": error}
    if manifest is not None:
        prov = manifest.get("provenance") or {}
        info.update({k: prov.get(k, "") for k in RUN_FIELDS})
        info["devices"] = [{"id": d.get("id"), "name": d.get("name", ""), "architecture": d.get("architecture", "")}
                           for d in manifest.get("devices") or []]
        info["kernel_count"] = manifest.get("kernel_count")
        info["summaries"] = [name for name, _ in metadata.summary_names(manifest.get("files"))]
        info["views"] = routes.run_views(manifest, series_step)
    return info


# Units of the figures of runs exported before findings carried them (evidence / suggestion / values),
# by the name endings those rules used.
_LEGACY_UNITS = (("_ns", "ns"), ("_pct", "%"), ("bytes", "bytes"), ("_s", "s"))


def _legacy_unit(name: str) -> str:
    return next((unit for ending, unit in _LEGACY_UNITS if name.endswith(ending)), "")


def stored_advice(manifest: dict, id_prefix: str = "") -> Optional[list]:
    """The findings the export stored in the manifest (those whose id starts with `id_prefix`), as
    Finding.to_dict writes them whatever the run's age; None for a run exported before advice was
    stored (the plugin never computes advice: re-exporting the run does)."""
    advice = manifest.get("advice")
    if not isinstance(advice, list):
        return None
    out = []
    for item in advice:
        found = Finding.from_dict(item).to_dict()
        if "figures" not in item:
            for name, figure in found["figures"].items():
                figure["unit"] = _legacy_unit(name)
        if found["id"].startswith(id_prefix):
            out.append(found)
    return out


def kernel_groups(entry: RunEntry) -> dict:
    return {"run": entry.run, "groups": groups.kernel_groups(entry.kernels())}


def bottlenecks(entry: RunEntry) -> dict:
    return {"run": entry.run, **groups.bottleneck_summary(entry.kernels())}


def _roofs(device: dict, manifest: dict) -> dict:
    """{peak key: {value, source, how}} for the roofs the manifest placed kernels against."""
    placed = ((manifest.get("roofline") or {}).get(str(device.get("id"))) or {}).get("roofs") or {}
    peaks = device.get("peaks") or {}
    out = {}
    for key, value in placed.items():
        peak = peaks.get(key) or {}
        out[key] = {"value": value, "source": peak.get("source", ""), "how": peak.get("how", "")}
    return out


def _devices_that_ran(entry: RunEntry) -> list:
    """The manifest's devices, less those no kernel ran on when the kernels name theirs (a PyTorch
    trace lists every GPU of the node: 8 identical roof sets would hide the one that ran)."""
    devices = entry.manifest.get("devices") or []
    kernels = entry.kernels()
    ran = set(kernels["device"].dropna().astype(int)) if "device" in kernels.columns else set()
    used = [d for d in devices if d.get("id") in ran]
    return used or devices


def roofline(entry: RunEntry) -> dict:
    """/roofline: the devices' roofs, the kernels that can be placed and, for PyTorch runs with an
    op_shapes table, one point per op shape (op_points)."""
    manifest = entry.manifest
    roof_data = manifest.get("roofline") or {}
    devices = [{"id": d.get("id"), "name": d.get("name", ""), "roofs": _roofs(d, manifest),
                "ridge_points": (roof_data.get(str(d.get("id"))) or {}).get("ridge_points") or {}}
               for d in _devices_that_ran(entry)]
    highest = max((r["value"] for d in devices for k, r in d["roofs"].items() if k.startswith("flop_per_s_")),
                  default=None)
    op_points, op_above = torch_views.op_points(entry, highest)
    above = [{"kind": "kernel", "name": p["name"], "launch_id": p["launch_id"], "flop_per_s": p["flop_per_s"]}
             for p in groups.roofline_points(entry.kernels(), above_roofs=True)]
    above += [{"kind": "operator", "name": p.get("op", ""), "flop_per_s": p["flop_per_s"]} for p in op_above]
    # Points above the device's highest compute roof are an error in the data (a FLOP count or a
    # time that is wrong): listed with that roof, never drawn as if they were measured.
    return {"run": entry.run, "devices": devices, "points": groups.roofline_points(entry.kernels()),
            "op_points": op_points, "op_shapes": torch_views.op_shape_count(entry),
            "above_roofs": {"highest_roof_flop_per_s": highest, "points": above}}


def operators(entry: RunEntry) -> dict:
    return torch_views.with_module_paths(entry, torch_views.operators(entry))  # module paths: the Modules view's filter


def steps(entry: RunEntry) -> dict:
    return torch_views.steps(entry)


def plan(entry: RunEntry) -> dict:
    """/plan: the run's plan table (analysis/plan.py), ranked rows first, and what its shares are of."""
    from ..analysis.plan import PLAN_TABLE, step_time
    tables = {name: entry.summary(name) for name in ("step_time_breakdown", "gpu_activity") if name in entry.summary_names()}
    kernel_ns = 1e6 * float((entry.manifest.get("summary") or {}).get("total_kernel_time_ms") or 0)
    if PLAN_TABLE not in entry.summary_names():
        raise HttpError(404, f"run {entry.run!r} has no plan: nothing to rank (export a PyTorch trace, a trace joined "
                             "with an Nsight Compute report, or a report with rule results: ncu --set full)")
    return {"run": entry.run, "of": step_time(None, tables, kernel_ns)[1], "rows": records(entry.summary(PLAN_TABLE))}


def memory(entry: RunEntry) -> dict:
    return torch_views.memory(entry)


def summaries(entry: RunEntry) -> dict:
    return summary_views.summaries(entry)


def distributed(entry: RunEntry) -> dict:
    return distributed_views.distributed(entry)


def _launch_index(value: Optional[str], rows: int) -> int:
    try:
        launch = int(value)
    except (TypeError, ValueError):
        raise HttpError(400, f"launch must be an integer, got {value!r}") from None
    if not 0 <= launch < rows:
        raise HttpError(404, f"launch {launch} out of range: the run has {rows} launches")
    return launch


def kernel(entry: RunEntry, launch_param: Optional[str]) -> dict:
    kernels = entry.kernels()
    launch = _launch_index(launch_param, len(kernels))
    row = {col: plain(v) for col, v in kernels.iloc[launch].items()}
    raw, rules = entry.raw_metrics(launch), entry.rules(launch)
    # sections: Nsight Compute's grouping of the raw metrics; rule_messages: each rule's message
    # parsed for its links (the rules themselves as the details file holds them)
    # occupancy: the occupancy calculator's document for the launch (analysis/occupancy.py; None
    # where the device's limits or the launch configuration are unknown)
    # bound: the counters' and the roofline's labels with their rules (analysis/bound_terms.py)
    return {"run": entry.run, "launch": launch, "row": row, "bound": bound_terms.kernel_bound(row),
            "raw_metrics": raw, "rules": rules,
            "rule_messages": ncu_sections.message_parts(rules),
            "sections": ncu_sections.sections(raw, rules, launch_hotspots(entry, row.get("launch_id")),
                                              _summary_records(entry, "ncu_report_sections")),
            "occupancy": occupancy.kernel_document(entry.manifest.get("devices") or [], row, raw)}


def _summary_records(entry: RunEntry, name: str, launch_id=None) -> list:
    """A reader summary's rows as plain dicts (those of one launch_id when given); [] without it."""
    if name not in entry.summary_names():
        return []
    table = entry.summary(name)
    if launch_id is not None:
        table = table[table["launch_id"] == launch_id]
    return [{k: plain(v) for k, v in r.items()} for r in table.to_dict("records")]


def launch_hotspots(entry: RunEntry, launch_id) -> list:
    """The launch's rows of the reader's ncu_source_hotspots summary ([] for runs without one)."""
    return [] if launch_id is None else _summary_records(entry, "ncu_source_hotspots", launch_id)


# -- compare (docs/http_api.md /compare, /compare_pair) -------------------------------------------
def kernel_set(entry: RunEntry) -> "compare.KernelSet":
    """The run's kernels grouped for comparison, built once per run: from the compare table the export
    wrote (a few thousand rows where the kernels table has a million launches), or, for a run exported
    before it, from only the columns compare reads (logdir/kernel_columns.py)."""
    from ..logdir import metadata
    from ..logdir.kernel_columns import read_kernel_columns

    def from_table():
        table = entry.summary(compare.COMPARE_TABLE)
        path = entry.asset(Path(entry.summary_files()[compare.COMPARE_TABLE]).name)
        read_asset(path, "compare table", lambda: compare.check_compare_table(table, entry.manifest.get("kernel_count")))
        return compare.kernel_set_from_table(table)

    def build():
        if compare.COMPARE_TABLE in entry.summary_names():
            return from_table()
        path = entry.asset(metadata.KERNELS)  # 404 where it resolves outside the run
        kernels = read_asset(path, "kernels table", lambda: read_kernel_columns(entry.run_dir, entry.manifest, compare.compared_columns()))
        return compare.kernel_set(kernels)
    return entry.memo("compare_kernel_set", build)


def compare_info(entry: RunEntry) -> "compare.RunInfo":
    """The run's tool, the GPUs its kernels ran on and its profiler steps (its step time breakdown),
    for the comparison's basis and warnings."""
    tool = (entry.manifest.get("provenance") or {}).get("tool", "")
    breakdown = entry.summary("step_time_breakdown") if "step_time_breakdown" in entry.summary_names() else None
    return compare.RunInfo(tool=tool, devices=compare.devices_of(entry.manifest.get("devices") or [],
                                                                 kernel_set(entry).device_ids),
                           steps=compare.step_count(breakdown))


def pair_choices(base: RunEntry, run: RunEntry, values) -> list:
    """The user's `pair=<base kernel>:<run kernel>` parameters as (base key, run key); 400 with the
    reason for one that names no kernel on a side."""
    try:
        return [compare.resolve_choice(kernel_set(base), kernel_set(run), v) for v in values or ()]
    except ValueError as e:
        raise HttpError(400, str(e)) from None


def compare_runs(base: RunEntry, run: RunEntry, choices=()) -> dict:
    """/compare: its basis (per step or whole runs), totals and their warnings, paired kernels (how
    each was paired), the rest, NVTX phases, operators of PyTorch runs."""
    doc = compare.compare_sets(kernel_set(base), kernel_set(run), choices, compare_info(base), compare_info(run),
                               _compare_shapes(base, run))
    return {"base": base.run, "run": run.run, **doc, "phases": _compare_phases(base, run),
            "plan_outcome": _plan_outcome(base, run, doc.get("basis") or {})}


def _plan_outcome(base: RunEntry, run: RunEntry, basis: dict) -> list:
    """Each ranked row of the baseline's plan: its time before and after, and what happened
    (analysis/plan.py plan_outcomes); [] where the baseline has no plan."""
    from ..analysis.plan import PLAN_TABLE, plan_outcomes

    def tables(entry: RunEntry) -> dict:
        names = (PLAN_TABLE, "op_gpu_time", compare.COMPARE_TABLE, "gpu_idle_attribution", "step_time_breakdown")
        return {name: entry.summary(name) for name in names if name in entry.summary_names()}
    before = tables(base)
    if PLAN_TABLE not in before:
        return []
    steps = tuple(basis.get("steps") or (1, 1)) if basis.get("per_step") else (1, 1)
    return plan_outcomes(before[PLAN_TABLE], before, tables(run), steps)


def _compare_shapes(base: RunEntry, run: RunEntry):
    """Both runs' op_shapes tables (compare pairs their operators) when both are PyTorch traces with
    one; None otherwise."""
    if not all("op_shapes" in entry.summary_names() for entry in (base, run)):
        return None
    return base.summary("op_shapes"), run.summary("op_shapes")


def _known_key(entry: RunEntry, key: Optional[str], role: str) -> str:
    if not key or key not in kernel_set(entry).groups:
        raise HttpError(404, f"run {entry.run!r} has no kernel {key!r} ({role}: a key from /compare)")
    return key


def compare_pair(base: RunEntry, run: RunEntry, base_key: Optional[str], run_key: Optional[str]) -> dict:
    """/compare_pair: one pair in detail (compare.pair_detail), raw metrics from the details files."""
    b_set, r_set = kernel_set(base), kernel_set(run)
    b_key, r_key = _known_key(base, base_key, "base_key"), _known_key(run, run_key, "run_key")
    b_launch, r_launch = compare.representative_launch(b_set, b_key), compare.representative_launch(r_set, r_key)
    detail = compare.pair_detail(b_set, r_set, b_key, r_key, base.kernels().iloc[b_launch], run.kernels().iloc[r_launch],
                                 base.raw_metrics(b_launch), run.raw_metrics(r_launch))
    return {"base_run": base.run, "run_run": run.run, **detail}


# -- series (docs/http_api.md /series) ---------------------------------------------------------------
def series(entry: RunEntry, steps: List[Tuple[int, RunEntry]]) -> dict:
    """/series: the series `entry` is a step of, given as its runs with their steps (service.series
    finds them), in step order, and the kernels followed across them (compare.series_chains:
    pairing step by step), with SERIES_METRICS per step."""
    steps = sorted(steps, key=lambda point: (point[0], point[1].run))
    sets = [kernel_set(member) for _, member in steps]
    return {"run": entry.run, "group": entry.run.rpartition("/")[0],
            "steps": [{"step": step, "run": member.run} for step, member in steps],
            "metrics": list(compare.SERIES_METRICS), "chains": compare.series_chains(sets)}


def cpu_hotspots(entry: RunEntry) -> dict:
    """/cpu_hotspots: the run's CPU functions (analysis/cpu_hotspots.py) and its stored CPU advice."""
    from ..analysis import cpu_hotspots as hot
    from ..logdir import tables
    if "cpu_hotspots" not in entry.summary_names():
        raise HttpError(404, f"run {entry.run!r} has no CPU hotspots (export a VTune hotspots or "
                             f"uarch-exploration CSV report)")
    frame = hot.hotspot_table(entry.summary("cpu_hotspots"))
    doc = tables.clean(tables.frame_to_json(frame, hot.UNITS))
    return {"run": entry.run, **doc, "totals": hot.totals(frame),
            "topdown": {"available": hot.has_topdown(frame), "thresholds": hot.tma_thresholds()},
            "advice": stored_advice(entry.manifest, "cpu.")}


# -- traces: overview, phases, timeline (docs/http_api.md) ---------------------------------------
def _summaries(entry: RunEntry, names) -> dict:
    return {n: entry.summary(n) for n in names if n in entry.summary_names()}


def overview(entry: RunEntry) -> dict:
    """/overview: headline figures, GPU busy/idle, the longest idle gaps and the stored advice."""
    from ..analysis import trace_views
    manifest = entry.manifest
    tables = _summaries(entry, ("gpu_activity", "gpu_utilisation", "gpu_idle_gaps", "gpu_idle_attribution"))
    names = {d.get("id"): d.get("name", "") for d in manifest.get("devices") or []}
    doc = trace_views.overview(tables, manifest.get("summary"), [], manifest.get("notes"), manifest.get("timeline"), names)
    # "advice": null (not []) for a run exported before advice was stored, so the view can say so.
    return {"run": entry.run, **doc, "advice": stored_advice(manifest)}


def _phase_source(entry: RunEntry) -> Optional[str]:
    """The run's table of NVTX ranges (trace_views.phase_source), None without one."""
    from ..analysis import trace_views
    return trace_views.phase_source(_summaries(entry, routes.PHASE_TABLES))


def phases(entry: RunEntry) -> dict:
    """/phases: the NVTX ranges table, columnar."""
    from ..analysis import trace_views
    from ..logdir import tables as logdir_tables
    source = _phase_source(entry)
    if source is None:
        raise HttpError(404, f"run {entry.run!r} has no NVTX ranges (capture with `nsys profile -t cuda,nvtx` "
                             f"and annotate phases with NVTX, e.g. torch.cuda.nvtx.range)")
    table = entry.summary(source)
    frame = trace_views.phases_table(table)
    units = {c: u for c, u in table.attrs.get("units", {}).items() if c in frame.columns}
    return {"run": entry.run, "source": source, **logdir_tables.clean(logdir_tables.frame_to_json(frame, units))}


def _compare_phases(base: RunEntry, run: RunEntry):
    from ..analysis import trace_views
    sides = []
    for entry in (base, run):
        source = _phase_source(entry)
        if source is None:
            return None
        sides.append(entry.summary(source))
    return trace_views.compare_phases(*sides)


def _int_arg(args, name: str, default=None):
    value = args.get(name)
    if value in (None, ""):
        return default
    try:
        return int(value)
    except ValueError:
        raise HttpError(400, f"{name} must be an integer (ns), got {value!r}") from None


NS_LIMIT = 1 << 62  # window bounds are int64 ns; beyond this the window's own arithmetic would overflow


def timeline_args(args):
    """(start, end, max_events) of a /timeline request: 400 with the reason for bounds that are not
    int64 ns, or a start after the end (never silently changed)."""
    from ..analysis.trace_views import DEFAULT_MAX_EVENTS, MAX_EVENTS
    max_events = _int_arg(args, "max_events", DEFAULT_MAX_EVENTS)
    if max_events < 1:
        raise HttpError(400, f"max_events must be at least 1, got {max_events}")
    start, end = _int_arg(args, "start"), _int_arg(args, "end")
    for name, value in (("start", start), ("end", end)):
        if value is not None and not -NS_LIMIT < value < NS_LIMIT:
            raise HttpError(400, f"{name} {value} is out of range (ns, |value| < 2**62)")
    if start is not None and end is not None and start > end:
        raise HttpError(400, f"start {start} is after end {end}")
    return start, end, min(max_events, MAX_EVENTS)


def _timeline_file(entry: RunEntry, key: str) -> Path:
    if not _has_timeline_file(entry, key):
        raise HttpError(404, f"run {entry.run!r} has no timeline (export a trace: Nsight Systems, rocprof; "
                             f"{metadata.TIMELINE} is written for traces only)")
    return entry.asset(Path(str(entry.manifest["files"][key])).name)  # 404 if it resolves outside the run


def _has_timeline_file(entry: RunEntry, key: str) -> bool:
    name = (entry.manifest.get("files") or {}).get(key)
    return bool(name) and entry.has_asset(Path(str(name)).name)  # fetched first from a remote logdir


def timeline_index(entry: RunEntry):
    """(the run's TimelineIndex, its file), loaded once per run and signature: a v3 index is read
    by ranges, window by window; an older one whole."""
    from ..analysis.trace_views import TimelineIndex
    from ..logdir import trace

    def open_index(path):
        ranged = trace.open_ranged(path)
        if ranged is not None:
            return TimelineIndex(ranged=ranged)
        columns = (*trace.VIEW_COLUMNS, "flow")  # flows: the Timeline joins a selected call to its kernel
        return TimelineIndex(trace.read_index(path, columns))

    def load():
        path = _timeline_file(entry, "timeline_index")
        return read_asset(path, "timeline index", lambda: open_index(path)), path
    return entry.memo("timeline_index", load)


def timeline(entry: RunEntry, start, end, max_events) -> dict:
    """/timeline: the slices of a window, decimated to max_events (a window's chunks are read now:
    damage there is a one-line 422 too)."""
    index, path = timeline_index(entry)
    return {"run": entry.run, **read_asset(path, "timeline index", lambda: index.window(start, end, max_events))}


def trace_file(entry: RunEntry) -> Optional[Path]:
    """The run's timeline.json.gz when it was written (at export or by `tb-hwprof trace`), else None."""
    return _timeline_file(entry, "timeline") if _has_timeline_file(entry, "timeline") else None


def trace_stream(entry: RunEntry):
    """The run's trace rendered from its index as gzip bytes, piece by piece (nothing is written).
    The index is read here, before the response starts, so a bad one is still a one-line 422."""
    from ..logdir import trace
    path = _timeline_file(entry, "timeline_index")  # 404 for runs with no timeline
    pieces = read_asset(path, "timeline index", lambda: trace.index_trace(trace.read_index(path)))
    return trace.gzip_pieces(pieces)


def trace_filename(run: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", run).strip("._") + ".trace.json.gz"


# -- the module tree and the Python stacks (issue 33) --------------------------------------------
def modules(entry: RunEntry) -> dict:
    return torch_views.modules(entry)


def stacks(entry: RunEntry) -> dict:
    return torch_views.stacks(entry)
