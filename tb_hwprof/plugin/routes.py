"""The plugin's views and HTTP routes, listed once.

VIEWS is the nav of the tab: the frontend builds it from /runs (which lists, per run, the views
that run has data for, as XProf's /run_tools does) and loads the view `name` from
frontend/views/<name>.js; it keeps no list of its own.  ROUTES are what the entry point serves;
service.Service answers each with its method of the same name.

Imported by the entry point (hwprof_plugin.py): nothing heavy, so the rules below read the
manifest (a dict) only, never a table.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

from ..logdir import metadata

ManifestTest = Callable[[dict], bool]
# What a 500 says when the installed package no longer has what a route serves with.
RESTART = "the installed tb-hwprof changed while TensorBoard ran (reinstalled or removed?) -- restart TensorBoard"


def _always(manifest: dict) -> bool:
    return True


def _has_kernels(manifest: dict) -> bool:
    return (manifest.get("kernel_count") or 0) > 0


def _has_summary(*names: str) -> ManifestTest:
    """Runs whose manifest lists one of these summary tables."""
    def test(manifest: dict) -> bool:
        return any(name in names for name, _ in metadata.summary_names(manifest.get("files")))
    return test


# Reader tables the kernel drawer reads per launch (Nsight Compute's top instructions by stall
# samples, its sections' metric lists): not summaries of the run, so not in the Summaries view.
DRAWER_TABLES = ("ncu_source_hotspots", "ncu_report_sections")


def _has_any_summary(manifest: dict) -> bool:
    """Runs that exported a tool's own summary tables (shown as they are in the Summaries view)."""
    return any(name not in DRAWER_TABLES for name, _ in metadata.listed_summary_names(manifest.get("files")))


def _has_file(key: str) -> ManifestTest:
    return lambda manifest: bool((manifest.get("files") or {}).get(key))


def _is_trace(manifest: dict) -> bool:
    """A GPU trace (Nsight Systems, rocprof, the PyTorch profiler): its busy / idle table."""
    return _has_summary("gpu_activity")(manifest)


def _has_roof(manifest: dict) -> bool:
    return any((device or {}).get("roofs") for device in (manifest.get("roofline") or {}).values())


def _has_roofline(manifest: dict) -> bool:
    """Runs with points to place under a roof: a PyTorch trace's operator shapes (FLOPs from the
    shapes), or kernels a counter profiler counted the FLOPs of (Nsight Compute's roofline section,
    rocprof-compute): any run with kernels but a trace, whose launches say when they ran, not what
    they computed.  A run whose counted kernels did no floating-point work (copies) still lists it:
    the manifest cannot tell."""
    devices = [device or {} for device in (manifest.get("roofline") or {}).values()]
    if any("points" in device for device in devices):  # exports since the count was written: exact
        kernel_points = any(device.get("points") for device in devices)
        return kernel_points or (_has_summary("op_shapes")(manifest) and _has_roof(manifest))
    points = _has_summary("op_shapes")(manifest) or (_has_kernels(manifest) and not _is_trace(manifest))
    return points and _has_roof(manifest)


def _has_timed_kernels(manifest: dict) -> bool:
    """Runs whose launches have durations (the headline's total kernel time): Bottlenecks splits
    that time by bound.  A manifest without a headline (an old export) cannot tell: listed."""
    summary = manifest.get("summary")
    return _has_kernels(manifest) and (not isinstance(summary, dict) or "total_kernel_time_ms" in summary)


def is_job(manifest: dict) -> bool:
    """A distributed job's cross-rank run (app/jobs.py): its folder holds its ranks' runs, <job>/rank_N."""
    return _has_summary("ranks")(manifest)


def _has_overview(manifest: dict) -> bool:
    """Headline figures, advice (an empty list counts: it says no rule fired) or a GPU trace."""
    return bool(manifest.get("summary")) or manifest.get("advice") is not None or _has_summary("gpu_activity")(manifest)


@dataclasses.dataclass(frozen=True)
class View:
    name: str  # the state's `view`, and frontend/views/<name>.js
    title: str  # the nav label
    route: Optional[str]  # the route that fills it (its JSON document)
    has: ManifestTest  # which runs have data for it (from the manifest)
    per_run: bool = True  # False: about all runs (Runs, Compare), in the nav whatever run is picked
    # True: only for a step of an optimisation series, which the logdir's layout decides, not the
    # manifest (service.Service.is_series_group: the one test /runs and /series both ask)
    series_step: bool = False


# The summary tables that hold NVTX ranges (SQLite exports; `nsys stats` output), for Phases.
PHASE_TABLES = ("nvtx_phases", "nvtx_sum")

# In nav order.
VIEWS = (
    View("runs", "Runs", "/runs", _always, per_run=False),
    View("operators", "Operators", "/operators", _has_summary("op_gpu_time")),
    View("steps", "Steps", "/steps", _has_summary("step_time_breakdown")),
    # Traces recorded with with_modules=True / with_stack=True (issue 33).
    View("modules", "Modules", "/modules", _has_summary("module_tree")),
    View("stacks", "Python stacks", "/stacks", _has_summary("python_stacks")),
    # Traces recorded with profile_memory=True (issue 33).
    View("memory", "Memory", "/memory", _has_summary("memory_by_op")),
    View("kernels", "Kernels", "/kernels", _has_kernels),
    View("roofline", "Roofline", "/roofline", _has_roofline),
    View("bottlenecks", "Bottlenecks", "/bottlenecks", _has_timed_kernels),
    View("compare", "Compare", "/compare", _always, per_run=False),
    # About the series the picked run is a step of (its group's runs): offered on its steps only.
    View("series", "Series", "/series", _always, series_step=True),
    View("cpu", "CPU hotspots", "/cpu_hotspots", _has_summary("cpu_hotspots")),
    # Before Overview: a job's cross-rank run (no kernels) opens on it.
    View("distributed", "Distributed", "/distributed", _has_summary("ranks")),
    View("overview", "Overview", "/overview", _has_overview),
    # The ranked changes (analysis/plan.py): where the run has anything to rank.
    View("plan", "Plan", "/plan", _has_summary("plan")),
    View("timeline", "Timeline", "/timeline", _has_file("timeline_index")),
    View("phases", "Phases", "/phases", _has_summary(*PHASE_TABLES)),
    View("summaries", "Summaries", "/summaries", _has_any_summary),
)

# Routes that serve one run's JSON document, built by views.<name>(entry) and kept until the
# run's files change.
RUN_DOCUMENTS = ("/kernel_groups", "/roofline", "/bottlenecks", "/cpu_hotspots", "/overview", "/phases",
                 "/operators", "/steps", "/summaries", "/distributed", "/plan", "/memory",
                 "/modules", "/stacks")
# Routes with a handler of their own in service.Service (the method named after the route).
HANDLED = ("/runs", "/kernels", "/kernel", "/compare", "/compare_pair", "/series", "/summary", "/timeline", "/trace",
           "/static/*")
ROUTES = RUN_DOCUMENTS + HANDLED


def route_name(route: str) -> str:
    """'/cpu_hotspots' -> 'cpu_hotspots', '/static/*' -> 'static': its handler's name."""
    return route.strip("/").split("/")[0]


def run_views(manifest: dict, series_step: bool = False) -> list:
    """Names of the per-run views `manifest`'s run has data for, in nav order (series_step: the run
    is a step of an optimisation series)."""
    return [v.name for v in VIEWS if v.per_run and v.has(manifest) and (series_step or not v.series_step)]


def nav() -> list:
    """Every view as /runs lists it: {name, title, route, per_run}."""
    return [{"name": v.name, "title": v.title, "route": v.route, "per_run": v.per_run} for v in VIEWS]
