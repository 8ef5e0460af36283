"""AMD kernel, copy and API traces as a Timeline: the trace-file format the Nsight Systems exporter
writes (docs/FORMAT.md timeline.json.gz + timeline_index.npz), so the same views read both.

Built from what the rocprof readers already produced: the kernels table's start_ns / end_ns
(device, HSA queue as the stream), the `memory_copies` table and the host API traces
(`hip_api_trace`, `hsa_api_trace`, `api_trace`). Only trace formats get one (kernel traces,
results.json / results.db, rocpd): rocprof-compute replays each kernel once per counter pass, so its
timestamps are not one timeline. No launch flows: no rocprof file here pairs API calls and
dispatches by correlation id on both sides.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np
import pandas as pd

from ...core.model import SLICE_COLUMNS, TIMELINE_CATEGORIES, Device, Timeline, Track
from ..common.lanes import spread_over_lanes
from ..common.timeline_builder import GPU_PID_BASE, NameTable

CAT = {name: code for code, name in enumerate(TIMELINE_CATEGORIES)}
API_TABLES = ("hip_api_trace", "hsa_api_trace", "api_trace")  # host calls, first present of each kind
HOST_PID = 0  # rocprof's API traces name no process: one host process, one track per API table
COPY_TID = -1  # the copy engine's track on each GPU, apart from the queues (queue ids are >= 0)
TRACE_FORMATS = {"rocprof-v1-csv", "rocprofv3-kernel-trace", "rocprof-v1-json", "rocprof-v1-db",
                 "rocpd-sqlite", "rocprofv2-api-trace"}


class _Builder:
    """Tracks, names and slice columns collected part by part."""

    def __init__(self, devices: List[Device]):
        self.names, self.tracks, self.parts = NameTable(), [], []
        self.track_ids: Dict[tuple, int] = {}
        self.device_names = {d.id: d.name for d in devices}

    def track(self, key: tuple, make) -> int:
        if key not in self.track_ids:
            self.track_ids[key] = len(self.tracks)
            self.tracks.append(make())
        return self.track_ids[key]

    def gpu_track(self, device: int, stream: int) -> int:
        name = self.device_names.get(device)
        process = f"GPU {device}" + (f" ({name})" if name else "")
        thread = "Copies" if stream == COPY_TID else f"Queue {stream}"
        return self.track(("gpu", device, stream), lambda: Track(
            pid=GPU_PID_BASE + device, tid=stream, process=process, thread=thread, kind="stream", device=device))

    def host_track(self, table: str) -> int:
        return self.track(("host", table), lambda: Track(
            pid=HOST_PID, tid=len(self.tracks), process="host", thread=table.replace("_", " "), kind="thread"))

    def add(self, start, end, tracks, labels: pd.Series, cat: str, nbytes=None) -> None:
        codes, uniques = pd.factorize(labels.fillna("").astype(str))
        n = len(codes)
        self.parts.append({"start": start, "end": end, "track": tracks, "name": self.names.codes(list(uniques), codes),
                           "cat": np.full(n, CAT[cat]), "flow": np.full(n, -1),
                           "bytes": np.full(n, -1) if nbytes is None else nbytes})

    def timeline(self) -> Optional[Timeline]:
        if not self.parts:
            return None
        slices = {c: np.concatenate([np.asarray(p[c]) for p in self.parts]).astype(t) for c, t in SLICE_COLUMNS.items()}
        return Timeline(tracks=self.tracks, names=self.names.names(), slices=slices)


def _timed(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows with both timestamps (a rounded or missing one cannot be placed)."""
    start = pd.to_numeric(frame["start_ns"], errors="coerce")
    end = pd.to_numeric(frame["end_ns"], errors="coerce")
    return frame[start.notna() & end.notna()]


def _ints(series: pd.Series, default: int) -> np.ndarray:
    return pd.to_numeric(series, errors="coerce").fillna(default).astype(np.int64).to_numpy()


def _kernels(b: _Builder, kernels: pd.DataFrame, first_device: int) -> None:
    k = _timed(kernels)
    if k.empty:
        return
    devices, streams = _ints(k["device"], first_device), _ints(k["stream"], 0)
    tracks = np.array([b.gpu_track(int(d), int(s)) for d, s in zip(devices, streams)], dtype=np.int64)
    b.add(_ints(k["start_ns"], 0), _ints(k["end_ns"], 0), tracks, k["name"], "kernel")


def _copies(b: _Builder, copies: Optional[pd.DataFrame], first_device: int) -> None:
    c = _timed(copies) if copies is not None and {"start_ns", "end_ns"} <= set(copies.columns) else None
    if c is None or c.empty:
        return
    devices = _ints(c["device"], first_device) if "device" in c.columns else np.full(len(c), first_device)
    tracks = np.array([b.gpu_track(int(d), COPY_TID) for d in devices], dtype=np.int64)
    nbytes = _ints(c["size_bytes"], -1) if "size_bytes" in c.columns else None
    b.add(_ints(c["start_ns"], 0), _ints(c["end_ns"], 0), tracks, c["name"], "memcpy", nbytes)


def _api(b: _Builder, summaries: Dict[str, pd.DataFrame]) -> None:
    for table in API_TABLES:
        calls = summaries.get(table)
        if calls is None or not {"start_ns", "end_ns", "name"} <= set(calls.columns):
            continue
        calls = _timed(calls)
        if len(calls):
            b.add(_ints(calls["start_ns"], 0), _ints(calls["end_ns"], 0),
                  np.full(len(calls), b.host_track(table)), calls["name"], "cuda_api")


def amd_timeline(kernels: pd.DataFrame, summaries: Dict[str, pd.DataFrame], devices: List[Device]) -> Optional[Timeline]:
    """The run's kernels, copies and host API calls as one Timeline; None when nothing has timestamps."""
    b = _Builder(devices)
    first = devices[0].id if devices else 0
    _kernels(b, kernels, first)
    _copies(b, summaries.get("memory_copies"), first)
    _api(b, summaries)
    timeline = b.timeline()
    if timeline is not None:  # all leaves (kernels, copies, calls): what overlaps on a track gets lanes
        spread_over_lanes(timeline, np.arange(len(timeline)), "overlap")
    return timeline


def attach(profile):
    """Set profile.timeline for trace formats (see TRACE_FORMATS); returns the profile."""
    if profile.provenance.source_format in TRACE_FORMATS:
        profile.timeline = amd_timeline(profile.kernels, profile.summaries, profile.devices)
    return profile
