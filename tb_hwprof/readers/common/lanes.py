"""Slices that overlap on one track, spread over lane tracks so that every track's slices nest.

Trace viewers draw a thread or stream as a stack of nested slices: Perfetto drops a complete
event that starts inside another and ends after it, chrome://tracing misdraws it.  Real traces
hold such slices: kernels of one AMD queue that run at once (rocpd MI300X sample), API calls of
several threads written to one host table, NVTX start/end ranges (not nested by definition).
Their tracks keep what fits and lane tracks "<thread> (<label> k)" of the same process take the
rest: the first lane free at a slice's start, so as few lanes as the deepest overlap needs.
Tool-agnostic: it sees a Timeline only.
"""
from __future__ import annotations

import heapq
from typing import Dict

import numpy as np
import pandas as pd

from ...core.model import Timeline, Track

# Lane tracks take tids counted down from here, skipping the process' tids in use: trace viewers read
# tids as unsigned 32-bit numbers (Perfetto turns a larger one into the pid), and OS thread ids
# (< 2^22) and stream / queue ids stay far below.
LANE_TID_TOP = (1 << 32) - 1


def lane_numbers(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per interval (given in start order), a lane 0, 1, ... such that the intervals of one lane never
    overlap (touching ones may share): the lowest lane free at its start.  No loop when nothing
    overlaps (a stream's kernels)."""
    lanes = np.zeros(start.size, np.int64)
    if start.size < 2 or (start[1:] >= np.maximum.accumulate(end)[:-1]).all():
        return lanes
    busy: list = []  # (end, lane) of the lanes in use
    free: list = []  # lanes whose last interval has ended
    for i, (s, e) in enumerate(zip(start.tolist(), end.tolist())):
        while busy and busy[0][0] <= s:
            heapq.heappush(free, heapq.heappop(busy)[1])
        lane = heapq.heappop(free) if free else len(busy)
        lanes[i] = lane
        heapq.heappush(busy, (e, lane))
    return lanes


def spread_over_lanes(timeline: Timeline, rows: np.ndarray, label: str, keep_first: bool = True) -> int:
    """Move the slices `rows` (indices) that overlap others of `rows` on their track to lane tracks, in
    place; with keep_first=False every one of them leaves its track (lanes from 1: slices that are
    not nested by definition, beside a track of nested ones).  Returns how many lane tracks it added.
    The slices of one lane never overlap, so each lane nests trivially."""
    s = timeline.slices
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size == 0:
        return 0
    tids = _LaneTids(timeline.tracks)
    lanes_of: Dict[int, list] = {}  # track -> its lane tracks (new indices, ordered after all tracks for now)
    per_track: Dict[int, np.ndarray] = pd.Series(rows).groupby(s["track"][rows]).indices
    for track, positions in sorted(per_track.items()):
        idx = rows[positions]
        start = s["start"][idx]
        if idx.size > 1 and not (start[1:] >= start[:-1]).all():
            idx = idx[np.argsort(start, kind="stable")]
        lanes = lane_numbers(s["start"][idx], s["end"][idx]) + (0 if keep_first else 1)
        numbers = np.unique(lanes[lanes > 0])
        if not numbers.size:
            continue
        base, first = timeline.tracks[int(track)], len(timeline.tracks)
        timeline.tracks.extend(Track(pid=base.pid, tid=tids.next(base.pid), process=base.process,
                                     thread=f"{base.thread} ({label} {k})", kind=base.kind, device=base.device,
                                     lane_of=base.tid) for k in numbers.tolist())
        # All moved slices at once (one mask per lane is quadratic when thousands of slices overlap).
        moved = lanes > 0
        s["track"][idx[moved]] = first + np.searchsorted(numbers, lanes[moved])
        lanes_of[int(track)] = list(range(first, len(timeline.tracks)))
    added = sum(len(v) for v in lanes_of.values())
    if added:
        _lanes_after_their_track(timeline, lanes_of)
    return added


def _lanes_after_their_track(timeline: Timeline, lanes_of: Dict[int, list]) -> None:
    """Reorder the tracks so each one's lanes follow it (viewers list tracks in order)."""
    first_lane = len(timeline.tracks) - sum(len(v) for v in lanes_of.values())
    order = [j for i in range(first_lane) for j in [i, *lanes_of.get(i, [])]]
    position = np.empty(len(order), np.int32)
    position[order] = np.arange(len(order), dtype=np.int32)
    timeline.tracks[:] = [timeline.tracks[j] for j in order]
    s = timeline.slices
    s["track"] = position[s["track"]].astype(s["track"].dtype, copy=False)


class _LaneTids:
    """Tids for lane tracks: per process the highest below LANE_TID_TOP not in use yet.  A cursor per
    process walks down once, so thousands of lanes cost linear time, not a rescan per lane."""

    def __init__(self, tracks):
        self.taken = {(t.pid, t.tid) for t in tracks}
        self.cursor: Dict[int, int] = {}

    def next(self, pid: int) -> int:
        tid = self.cursor.get(pid, LANE_TID_TOP)
        while (pid, tid) in self.taken:
            tid -= 1
        self.taken.add((pid, tid))
        self.cursor[pid] = tid - 1
        return tid
