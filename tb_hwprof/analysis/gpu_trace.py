"""GPU busy and idle time of a trace, from its Timeline alone (every tracer: Nsight Systems,
rocprof, rocpd ...): one pipeline step, `gpu_trace_tables`.

- gpu_activity: per device, the union of its operations (kernels, copies, sets) over the capture
  span (first to last GPU operation or API call);
- gpu_utilisation: busy % per time bin; gpu_idle_gaps: the longest gaps and what the CPU did then
  (the API call, NVTX range and OS runtime call covering most of each gap);
- gpu_idle_attribution: idle time overlapping data loading, file/socket reads, synchronisation;
- the GPU time projected onto the tracer's NVTX ranges (nvtx_phases' kernels / gpu_time_ns /
  gpu_span_ns, filled in place: they are columns of that table): kernels whose launching call
  (its launch flow) started inside a range on the range's thread, nsys' nvtx_gpu_proj_sum rule.

Numpy over the slice columns, no Python object per slice; loops run over devices and gaps only.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

from ..core import columnar
from ..core.model import GPU_CATEGORIES, TIMELINE_CATEGORIES, Timeline, units_of
from . import timeline as tl
from .context import capture_context
from .summary import gpu_activity, interval_union_ns, merge

CAT = {name: code for code, name in enumerate(TIMELINE_CATEGORIES)}
# The capture runs from the first to the last GPU operation or API call (not NVTX / OS calls,
# which start before the program touches the GPU).
CAPTURE_CATEGORIES = GPU_CATEGORIES + ("cuda_api",)
TABLES = ("gpu_activity", "gpu_utilisation", "gpu_idle_gaps", "gpu_idle_attribution")
PROJECTION_COLUMNS = ("kernels", "gpu_time_ns", "gpu_span_ns")
EMPTY: tl.Intervals = (np.zeros(0, np.int64), np.zeros(0, np.int64))


def gpu_trace_tables(profile, analysis) -> None:
    """The pipeline step: TABLES into analysis.summaries, the NVTX projection into the profile's
    nvtx_phases.  Nothing for a profile without a timeline or without GPU operations."""
    timeline = profile.timeline
    if timeline is None:
        return
    tables = trace_tables(timeline, capture_context(profile).gpu_api or "CUDA")
    for df in tables.values():
        df.attrs["units"] = units_of(df)
    analysis.summaries.update(tables)
    label_phases(profile)


def label_phases(profile) -> None:
    """The GPU time projected onto the profile's NVTX ranges, as columns of its nvtx_phases table
    (in place, like the kernels' labels: tb_hwprof.read may fill them without the whole analysis)."""
    if profile.timeline is not None:
        project_onto_phases(profile.timeline, profile.summaries.get("nvtx_phases"))


def of_category(timeline: Timeline, *cats: str) -> np.ndarray:
    """Indices of the slices of these categories."""
    return np.flatnonzero(np.isin(timeline.slices["cat"], [CAT[c] for c in cats]))


def capture_span(timeline: Timeline) -> Optional[Tuple[int, int]]:
    s = timeline.slices
    mask = np.zeros(s["cat"].size, dtype=bool)
    for name in CAPTURE_CATEGORIES:
        mask |= s["cat"] == CAT[name]
    if not mask.any():
        return None
    # Reductions under the mask: no gathered copy of 2M starts and ends.
    return (int(np.min(s["start"], where=mask, initial=np.iinfo(np.int64).max)),
            int(np.max(s["end"], where=mask, initial=np.iinfo(np.int64).min)))


def trace_tables(timeline: Timeline, api: str = "CUDA") -> Dict[str, pd.DataFrame]:
    """TABLES of a timeline ({} without GPU operations); api names the synchronisation calls' row."""
    s = timeline.slices
    ops = of_category(timeline, *GPU_CATEGORIES)
    span = capture_span(timeline)
    if ops.size == 0 or span is None:
        return {}
    ops = ops[s["end"][ops] >= s["start"][ops]]  # an end before the start (rocprof v1 clock glitches) is no interval
    ops = ops[np.argsort(s["start"][ops], kind="stable")]  # sorted once: each merge below skips its sort
    start, end, cat = s["start"][ops], s["end"][ops], s["cat"][ops]
    device = _track_devices(timeline)[s["track"][ops]]
    del ops
    islands_of = {dev: merge(*_on_device(device, dev, start, end)) for dev in columnar.distinct(device).tolist()}
    activity = gpu_activity(device, cat, TIMELINE_CATEGORIES, start, end, span, islands_of)
    context = GapContext(timeline, api)
    gaps_rows, util_rows, attr_rows = [], [], []
    for dev, islands in islands_of.items():
        gaps = tl.idle_gaps(islands, span)
        util = tl.utilisation(islands, span)
        util.insert(0, "device", dev)
        util_rows.append(util)
        gaps_rows.append(context.gap_table(dev, gaps, islands))
        attr_rows.append(context.attribution(dev, gaps, span, islands))
    return {"gpu_activity": activity, "gpu_idle_gaps": pd.concat(gaps_rows, ignore_index=True),
            "gpu_utilisation": pd.concat(util_rows, ignore_index=True),
            "gpu_idle_attribution": pd.concat(attr_rows, ignore_index=True)}


def _track_devices(timeline: Timeline) -> np.ndarray:
    """Per track: its GPU (-1 for CPU threads)."""
    return np.array([-1 if t.device is None else t.device for t in timeline.tracks], dtype=np.int64)


def _on_device(device: np.ndarray, dev: int, *columns: np.ndarray) -> List[np.ndarray]:
    """The columns' rows on device `dev`: the columns themselves when every row is (one GPU, the
    common case: no copies of a million starts and ends)."""
    on = device == dev
    return list(columns) if on.all() else [c[on] for c in columns]


def _named(timeline: Timeline, idx: np.ndarray, pattern) -> tl.Intervals:
    """(start, end) of the slices `idx` whose name matches `pattern`."""
    hit = np.array([bool(pattern.search(n)) for n in timeline.names], dtype=bool)
    if hit.size == 0:
        return EMPTY
    idx = idx[hit[timeline.slices["name"][idx]]]
    return timeline.slices["start"][idx], timeline.slices["end"][idx]


class GapContext:
    """What the CPU did during the GPU's idle gaps: the slices of each kind, looked up once."""

    def __init__(self, timeline: Timeline, api: str):
        self.timeline = timeline
        self.api_calls = of_category(timeline, "cuda_api")
        self.ranges = of_category(timeline, "nvtx")
        self.os_calls = of_category(timeline, "osrt")
        self.ops = of_category(timeline, "cpu_op")  # framework operators (PyTorch traces)
        self.sync = _named(timeline, self.api_calls, tl.SYNC_API)
        self.activities = {"data loading (NVTX ranges)": _named(timeline, self.ranges, tl.DATA_LOADING_NVTX),
                           "file/socket reads (OS runtime)": _named(timeline, self.os_calls, tl.OS_READS),
                           f"{api} synchronisation calls": self.sync}

    def _api_threads_os_calls(self) -> np.ndarray:
        """The OS runtime calls of the threads that called the GPU API (a loader's reads elsewhere
        do not explain what the launching thread waited for)."""
        s = self.timeline.slices
        keys = self.timeline.thread_keys()
        if self.os_calls.size == 0 or self.api_calls.size == 0:
            return self.os_calls[:0]
        api_threads = np.unique(keys[s["track"][self.api_calls]])
        return self.os_calls[np.isin(keys[s["track"][self.os_calls]], api_threads)]

    def _covering(self, gaps: tl.Intervals, idx: np.ndarray) -> List[tuple]:
        """Per gap: (name, thread, overlap ns) of the slice of `idx` covering most of it."""
        s, t = self.timeline.slices, self.timeline
        best, amount = tl.best_overlap(gaps, s["start"][idx], s["end"][idx])
        out = []
        for b, a in zip(best.tolist(), amount.tolist()):
            if b < 0:
                out.append(("", "", 0))
                continue
            i = idx[b]
            track = t.tracks[int(s["track"][i])]
            out.append((t.names[s["name"][i]], f"{track.thread} [{track.process}]", a))
        return out

    def gap_table(self, dev: int, gaps: tl.Intervals, islands: tl.Intervals) -> pd.DataFrame:
        top = tl.longest(gaps)
        nvtx = self._covering(top, self.ranges)
        api = self._covering(top, self.api_calls)
        osrt = self._covering(top, self._api_threads_os_calls())
        table = pd.DataFrame({
            "device": np.full(top[0].size, dev, np.int64), "rank": np.arange(1, top[0].size + 1, dtype=np.int64),
            "start_ns": top[0], "end_ns": top[1], "duration_ns": top[1] - top[0],
            "nvtx_range": [n for n, _, _ in nvtx], "nvtx_thread": [t for _, t, _ in nvtx],
            "nvtx_overlap_ns": np.array([o for _, _, o in nvtx], np.int64),
            "cuda_api": [n for n, _, _ in api], "cuda_api_thread": [t for _, t, _ in api],
            "cuda_api_overlap_ns": np.array([o for _, _, o in api], np.int64),
            "osrt_call": [n for n, _, _ in osrt], "osrt_overlap_ns": np.array([o for _, _, o in osrt], np.int64),
            "starts_in_sync": self.starts_in_sync(top, islands)})
        if self.ops.size:  # only traces that record operators: the op the CPU was in (e.g. a DataLoader's __next__)
            ops = self._covering(top, self.ops)
            at = table.columns.get_loc("nvtx_overlap_ns") + 1
            for offset, (column, values) in enumerate((("cpu_op", [n for n, _, _ in ops]),
                                                       ("cpu_op_thread", [t for _, t, _ in ops]),
                                                       ("cpu_op_overlap_ns", np.array([o for _, _, o in ops], np.int64)))):
                table.insert(at + offset, column, values)
        return table

    def starts_in_sync(self, gaps: tl.Intervals, islands: tl.Intervals) -> np.ndarray:
        """Per gap: did it begin inside a synchronising call, the CPU holding back the next launch.
        Only gaps between the device's first and last operation (the gap table's flag and the
        attribution's count, one rule): before the first and after the last, the program starts and
        ends, often in a synchronisation, as a matter of course."""
        interior = (gaps[0] >= islands[0][0]) & (gaps[1] <= islands[1][-1])
        return tl.starts_inside(gaps[0], self.sync) & interior

    def attribution(self, dev: int, gaps: tl.Intervals, span, islands: tl.Intervals) -> pd.DataFrame:
        idle = int((gaps[1] - gaps[0]).sum())
        rows = [{"activity": "all idle time", "intervals": int(gaps[0].size), "cpu_ns": None, "idle_overlap_ns": idle}]
        for label, (s, e) in self.activities.items():
            clipped = tl.clip((s, e), span)
            rows.append({"activity": label, "intervals": int(s.size), "cpu_ns": interval_union_ns(*clipped),
                         "idle_overlap_ns": tl.overlap_ns(clipped, gaps) if s.size else 0})
        in_sync = self.starts_in_sync(gaps, islands)
        rows.append({"activity": "gaps starting in a synchronisation call", "intervals": int(in_sync.sum()),
                     "cpu_ns": None, "idle_overlap_ns": int((gaps[1] - gaps[0])[in_sync].sum())})
        out = pd.DataFrame(rows)
        out.insert(0, "device", dev)
        out["idle_ns"] = idle
        out["idle_share_pct"] = [tl.gap_share(idle, v) for v in out["idle_overlap_ns"]]
        out["cpu_ns"] = out["cpu_ns"].astype("float64")
        out["idle_share_pct"] = out["idle_share_pct"].astype("float64")
        return out


# ---------------------------------------------------------------- NVTX projection

def launches(timeline: Timeline) -> Tuple[np.ndarray, np.ndarray]:
    """(kernel slices, the API call slice that launched each), paired by their launch flow."""
    s = timeline.slices
    kernels = np.flatnonzero((s["cat"] == CAT["kernel"]) & (s["flow"] >= 0))
    calls = np.flatnonzero((s["cat"] == CAT["cuda_api"]) & (s["flow"] >= 0))
    if kernels.size == 0 or calls.size == 0:
        return kernels[:0], calls[:0]
    top = int(s["flow"].max()) + 1
    if top <= 8 * max(s["flow"].size, 1 << 20):  # dense ids (nsys): a slot per id
        call_of_flow = np.full(top, -1, np.int64)
        call_of_flow[s["flow"][calls]] = calls
        launcher = call_of_flow[s["flow"][kernels]]
        found = launcher >= 0
        return kernels[found], launcher[found]
    # Sparse ids (PyTorch's correlation ids reach 10^8): a join, not an array as long as the largest.
    launcher = columnar.launching_call(s["flow"][calls], s["flow"][kernels])
    found = launcher >= 0
    return kernels[found], calls[launcher[found]]


def projected(timeline: Timeline, ranges: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per range slice: (kernels, their summed GPU time, their span) launched inside it on its thread."""
    s = timeline.slices
    kernels, calls = launches(timeline)
    thread = timeline.thread_keys()
    return tl.project_ranges(s["start"][ranges], s["end"][ranges], thread[s["track"][ranges]], s["start"][calls],
                             thread[s["track"][calls]], s["start"][kernels], s["end"][kernels])


def project_onto_phases(timeline: Timeline, phases: Optional[pd.DataFrame]) -> None:
    """PROJECTION_COLUMNS of the tracer's range table (its rows: timeline.range_rows), in place,
    before its "name" column."""
    if phases is None or timeline.range_rows is None:
        return
    ranges, rows = timeline.range_rows
    per_row = lambda v: np.rint(np.bincount(rows, weights=v, minlength=len(phases))).astype("int64")  # noqa: E731
    for column, values in zip(PROJECTION_COLUMNS, projected(timeline, ranges)):
        if column in phases:
            phases[column] = per_row(values)
        else:
            phases.insert(phases.columns.get_loc("name"), column, per_row(values))
    phases.attrs["units"] = units_of(phases)
