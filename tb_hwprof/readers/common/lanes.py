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

from ...model import Timeline, Track

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
    taken = {(t.pid, t.tid) for t in timeline.tracks}
    lanes_of: Dict[int, list] = {}  # track -> its lane tracks (new indices, ordered after all tracks for now)
    per_track: Dict[int, np.ndarray] = pd.Series(rows).groupby(s["track"][rows]).indices
    for track, positions in sorted(per_track.items()):
        idx = rows[positions]
        start = s["start"][idx]
        if idx.size > 1 and not (start[1:] >= start[:-1]).all():
            idx = idx[np.argsort(start, kind="stable")]
        lanes = lane_numbers(s["start"][idx], s["end"][idx]) + (0 if keep_first else 1)
        base = timeline.tracks[int(track)]
        for k in np.unique(lanes[lanes > 0]).tolist():
            timeline.tracks.append(Track(pid=base.pid, tid=_free_tid(taken, base.pid), process=base.process,
                                         thread=f"{base.thread} ({label} {k})", kind=base.kind, device=base.device,
                                         lane_of=base.tid))
            s["track"][idx[lanes == k]] = len(timeline.tracks) - 1
            lanes_of.setdefault(int(track), []).append(len(timeline.tracks) - 1)
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


def _free_tid(taken: set, pid: int) -> int:
    """The highest tid below LANE_TID_TOP that process `pid` does not use yet (now taken)."""
    tid = LANE_TID_TOP
    while (pid, tid) in taken:
        tid -= 1
    taken.add((pid, tid))
    return tid
