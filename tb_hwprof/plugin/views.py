"""The JSON documents of docs/http_api.md, built from a loaded run (the analyses do the work)."""
from __future__ import annotations

import math
from typing import Optional

from ..analysis import compare, groups
from ..model import Profile, Provenance, normalise_kernels
from .store import HttpError, RunEntry

RUN_FIELDS = ("tool", "tool_version", "source_path", "source_format", "export_time")


def run_info(run: str, manifest: Optional[dict], error: Optional[str]) -> dict:
    """One /runs row: provenance, devices and size from the manifest, or the run's error."""
    info = {"run": run, "error": error}
    if manifest is not None:
        prov = manifest.get("provenance") or {}
        info.update({k: prov.get(k, "") for k in RUN_FIELDS})
        info["devices"] = [{"id": d.get("id"), "name": d.get("name", ""), "architecture": d.get("architecture", "")}
                           for d in manifest.get("devices") or []]
        info["kernel_count"] = manifest.get("kernel_count")
        files = manifest.get("files") or {}
        info["summaries"] = sorted(k[len("summary_"):] for k in files if k.startswith("summary_"))
    return info


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


def roofline(entry: RunEntry) -> dict:
    manifest = entry.manifest
    roof_data = manifest.get("roofline") or {}
    devices = [{"id": d.get("id"), "name": d.get("name", ""), "roofs": _roofs(d, manifest),
                "ridge_points": (roof_data.get(str(d.get("id"))) or {}).get("ridge_points") or {}}
               for d in manifest.get("devices") or []]
    return {"run": entry.run, "devices": devices, "points": groups.roofline_points(entry.kernels())}


def _launch_index(value: Optional[str], rows: int) -> int:
    try:
        launch = int(value)
    except (TypeError, ValueError):
        raise HttpError(400, f"launch must be an integer, got {value!r}") from None
    if not 0 <= launch < rows:
        raise HttpError(404, f"launch {launch} out of range: the run has {rows} launches")
    return launch


def _plain(value):
    """A table cell as JSON wants it: NaN -> None, numpy -> Python."""
    if hasattr(value, "item"):
        value = value.item()
    return None if isinstance(value, float) and math.isnan(value) else value


def kernel(entry: RunEntry, launch_param: Optional[str]) -> dict:
    kernels = entry.kernels()
    launch = _launch_index(launch_param, len(kernels))
    row = {col: _plain(v) for col, v in kernels.iloc[launch].items()}
    return {"run": entry.run, "launch": launch, "row": row,
            "raw_metrics": entry.raw_metrics(launch), "rules": entry.rules(launch)}


def compare_runs(base: RunEntry, run: RunEntry) -> dict:
    return {"base": base.run, "run": run.run, **compare.compare_kernels(base.kernels(), run.kernels())}


def cpu_hotspots(entry: RunEntry) -> dict:
    """/cpu_hotspots: the run's CPU functions (analysis/cpu_hotspots.py) and its CPU advice."""
    from ..analysis import cpu_hotspots as hot
    from ..analysis.advice import cpu as cpu_advice
    from ..logdir import tables
    if "cpu_hotspots" not in entry.summary_names():
        raise HttpError(404, f"run {entry.run!r} has no CPU hotspots (export a VTune hotspots or "
                             f"uarch-exploration CSV report)")
    table = entry.summary("cpu_hotspots")
    frame = hot.hotspot_table(table)
    doc = tables.clean(tables.frame_to_json(frame, hot.UNITS))
    profile = Profile(Provenance(**_provenance(entry.manifest)), [], normalise_kernels([]),
                      summaries={"cpu_hotspots": table})
    return {"run": entry.run, **doc, "totals": hot.totals(frame),
            "topdown": {"available": hot.has_topdown(frame), "thresholds": hot.tma_thresholds()},
            "advice": tables.clean(cpu_advice.advise(profile))}


def _provenance(manifest: dict) -> dict:
    prov = manifest.get("provenance") or {}
    return {k: str(prov.get(k, "")) for k in ("tool", "tool_version", "source_path", "source_sha256",
                                                "source_format", "export_time")}
