"""Every track of a timeline nests (trace viewers drop a slice that starts inside another and ends
after it): overlapping slices go to lane tracks.  Checked on the real traces (the rocpd MI300X
capture has kernels of one queue running at once) and on NVTX start/end ranges made from a real
export's ranges; the trace files are parsed back and checked track by track."""
import gzip
import json
import shutil
import sqlite3
import time
from collections import Counter, defaultdict

import numpy as np
import pandas as pd
import pytest

import tb_hwprof
from tb_hwprof.readers.amd import timeline as amd_timeline
from tb_hwprof.readers.common.lanes import LANE_TID_TOP, lane_numbers, spread_over_lanes
from tb_hwprof.logdir import metadata
from tb_hwprof.core.model import SLICE_COLUMNS, TIMELINE_CATEGORIES, Timeline, Track

from conftest import sample
from support_nsys import DLPROF, query

ROCPD = "rocprof/v3_rocpd_mi300x_ck_bmm_results.db"
TRACES = ["nsys/annikola_gtx1050_2024.5.1.sqlite", "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite",
          "nsys/gpu4_t4_2022.4.2.sqlite", "nsys/kmeans_rtx3080_openacc_2020.5.1.sqlite",
          "nsys/mordred_quadro6000_2021.2.1.sqlite", "nsys/testcuda_rtx4060ti_2026.1.1.sqlite",
          "rocprof/v1_mi250x_laplacian/results.csv", "rocprof/v1_mi300a_vecadd/results.json",
          "rocprof/v2_hip_api_trace_hiptrace.csv", ROCPD]


def crossings(intervals) -> int:
    """How many intervals start inside an earlier one and end after it (0: they all nest)."""
    count, open_ends = 0, []
    for start, end in sorted(intervals, key=lambda i: (i[0], -i[1])):
        while open_ends and open_ends[-1] <= start:
            open_ends.pop()
        if open_ends and end > open_ends[-1]:
            count += 1
            continue
        open_ends.append(end)
    return count


def per_track(timeline):
    s = timeline.slices
    out = defaultdict(list)
    for t, a, b in zip(s["track"].tolist(), s["start"].tolist(), s["end"].tolist()):
        out[t].append((a, b))
    return out


def trace_tracks(run_dir):
    """(pid, tid) -> [(start, end)] in ns of the complete events of an exported trace file."""
    raw = gzip.decompress((run_dir / "plugins" / metadata.PLUGIN_NAME / metadata.TIMELINE).read_bytes())
    out = defaultdict(list)
    for e in json.loads(raw)["traceEvents"]:
        if e["ph"] == "X":
            start = round(e["ts"] * 1000)
            out[(e["pid"], e["tid"])].append((start, start + round(e["dur"] * 1000)))
    return out


def test_lane_numbers_against_counting():
    """Lanes never hold two overlapping intervals, and there are as many as the most intervals open at
    one instant (greedy by start is optimal); nothing overlapping: all lane 0."""
    rng = np.random.default_rng(11)
    for n, width in ((300, 40), (300, 3), (50, 500), (1, 5)):
        start = np.sort(rng.integers(0, 1000, n))
        end = start + rng.integers(0, width, n)
        lanes = lane_numbers(start, end)
        for lane in np.unique(lanes):
            mine = np.flatnonzero(lanes == lane)
            assert crossings([(a, b) for a, b in zip(start[mine], end[mine])]) == 0
            assert (start[mine][1:] >= end[mine][:-1]).all()
        depth = max(((start <= t) & (end > t)).sum() for t in np.unique(start))
        assert lanes.max() + 1 == max(depth, 1)
    disjoint = np.arange(0, 100, 10)
    assert not lane_numbers(disjoint, disjoint + 10).any()


@pytest.mark.parametrize("name", TRACES)
def test_every_track_nests_in_the_model_and_the_trace_file(name, samples_dir, tmp_path):
    path = sample(samples_dir, name)
    profile = tb_hwprof.read(path)
    assert profile.timeline is not None
    for track, intervals in per_track(profile.timeline).items():
        assert crossings(intervals) == 0, profile.timeline.tracks[track]
    run = tb_hwprof.export(path, tmp_path, "r")
    written = trace_tracks(run)
    assert sum(len(v) for v in written.values()) == len(profile.timeline)
    for key, intervals in written.items():
        assert crossings(intervals) == 0, key


def test_overlapping_kernels_of_an_amd_queue_get_a_lane(samples_dir):
    path = sample(samples_dir, ROCPD)
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        rows = conn.execute('SELECT start, "end" FROM kernels ORDER BY start, id').fetchall()
    assert crossings(rows) > 0  # the capture itself: kernels of one queue that ran at once
    timeline = tb_hwprof.read(path).timeline
    s = timeline.slices
    kernels = s["cat"] == TIMELINE_CATEGORIES.index("kernel")
    assert Counter(zip(s["start"][kernels].tolist(), s["end"][kernels].tolist())) == Counter(map(tuple, rows))
    lanes = [i for i, t in enumerate(timeline.tracks) if "(overlap" in t.thread]
    assert lanes, [t.thread for t in timeline.tracks]
    for i in lanes:
        lane = timeline.tracks[i]
        base = next(t for t in timeline.tracks if t.thread == lane.thread.split(" (overlap")[0] and t.pid == lane.pid)
        assert lane.kind == base.kind == "stream" and lane.device == base.device
        assert base.tid < lane.tid <= LANE_TID_TOP  # unsigned 32-bit, as trace viewers read tids
        assert sum((t.pid, t.tid) == (lane.pid, lane.tid) for t in timeline.tracks) == 1
        at = timeline.tracks.index(base)  # listed right after its track (and its earlier lanes)
        assert at < i and all(t.thread.startswith(base.thread + " (") for t in timeline.tracks[at + 1:i])
        moved = np.flatnonzero(s["track"] == i)
        kept = per_track(timeline)[timeline.tracks.index(base)]
        assert moved.size  # each moved kernel ran while one that kept the queue's track ran
        assert all(any(a < d and c < b for c, d in kept) for a, b in zip(s["start"][moved], s["end"][moved]))


def _start_end_ranges(src, dst):
    """The real export with its push/pop ranges turned into start/end ranges, each stretched to the
    start of the range after the next one: ranges that cross each other and the API calls."""
    shutil.copyfile(src, dst)
    conn = sqlite3.connect(dst)
    ranges = conn.execute("SELECT rowid, start FROM NVTX_EVENTS WHERE eventType = 59 AND end IS NOT NULL "
                          "ORDER BY start, rowid").fetchall()
    for (rowid, _), (_, later) in zip(ranges, ranges[2:]):
        conn.execute("UPDATE NVTX_EVENTS SET end = max(end, ?) WHERE rowid = ?", (later, rowid))
    conn.execute("UPDATE NVTX_EVENTS SET eventType = 60 WHERE eventType = 59")
    conn.commit()
    conn.close()


def test_nvtx_start_end_ranges_get_lanes_of_their_thread(samples_dir, tmp_path):
    path = tmp_path / "startend.sqlite"
    _start_end_ranges(sample(samples_dir, DLPROF), path)
    ranges = query(path, "SELECT start, end, globalTid FROM NVTX_EVENTS WHERE eventType = 60 AND end IS NOT NULL")
    assert crossings([(a, b) for a, b, _ in ranges]) > 0
    timeline = tb_hwprof.read(path).timeline
    for track, intervals in per_track(timeline).items():
        assert crossings(intervals) == 0, timeline.tracks[track]
    s = timeline.slices
    nvtx = np.flatnonzero(s["cat"] == TIMELINE_CATEGORIES.index("nvtx"))
    assert Counter(zip(s["start"][nvtx].tolist(), s["end"][nvtx].tolist())) == Counter((a, b) for a, b, _ in ranges)
    threads = {((g >> 24) & 0xFFFFFF, g & 0xFFFFFF) for _, _, g in ranges}
    names = {(t.pid, t.tid): t.thread for t in timeline.tracks}
    for i in nvtx.tolist():  # on a lane of the thread that started it: same process, its thread's name
        track = timeline.tracks[s["track"][i]]
        assert track.tid <= LANE_TID_TOP and "(NVTX start/end " in track.thread
        assert any(track.pid == pid and track.thread.startswith(names[(pid, tid)] + " (") for pid, tid in threads)
    assert len({(t.pid, t.tid) for t in timeline.tracks}) == len(timeline.tracks)
    # As many lanes as start/end ranges open at once, and the thread's own track keeps its API calls.
    open_at_once = max(sum(a <= t < b for a, b, _ in ranges) for t, _, _ in ranges)
    assert len({s["track"][i] for i in nvtx.tolist()}) == open_at_once
    api = s["cat"] == TIMELINE_CATEGORIES.index("cuda_api")
    assert all("NVTX" not in timeline.tracks[t].thread for t in np.unique(s["track"][api]).tolist())
    written = trace_tracks(tb_hwprof.export(path, tmp_path / "logs", "r"))
    for key, intervals in written.items():
        assert crossings(intervals) == 0, key


# -- lane tracks as before the linear rewrite (issue 13): the reference the current code must match --
def _reference_spread_over_lanes(timeline, rows, label, keep_first=True):
    """spread_over_lanes as it was: a mask per lane and a rescan of the taken tids per lane track
    (quadratic when thousands of slices overlap), kept to check the rewrite changes no result."""
    s = timeline.slices
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size == 0:
        return 0
    taken = {(t.pid, t.tid) for t in timeline.tracks}
    lanes_of = {}
    per_track = pd.Series(rows).groupby(s["track"][rows]).indices
    for track, positions in sorted(per_track.items()):
        idx = rows[positions]
        start = s["start"][idx]
        if idx.size > 1 and not (start[1:] >= start[:-1]).all():
            idx = idx[np.argsort(start, kind="stable")]
        lanes = lane_numbers(s["start"][idx], s["end"][idx]) + (0 if keep_first else 1)
        base = timeline.tracks[int(track)]
        for k in np.unique(lanes[lanes > 0]).tolist():
            tid = LANE_TID_TOP
            while (base.pid, tid) in taken:
                tid -= 1
            taken.add((base.pid, tid))
            timeline.tracks.append(Track(pid=base.pid, tid=tid, process=base.process,
                                         thread=f"{base.thread} ({label} {k})", kind=base.kind, device=base.device,
                                         lane_of=base.tid))
            s["track"][idx[lanes == k]] = len(timeline.tracks) - 1
            lanes_of.setdefault(int(track), []).append(len(timeline.tracks) - 1)
    added = sum(len(v) for v in lanes_of.values())
    if added:
        first_lane = len(timeline.tracks) - added
        order = [j for i in range(first_lane) for j in [i, *lanes_of.get(i, [])]]
        position = np.empty(len(order), np.int32)
        position[order] = np.arange(len(order), dtype=np.int32)
        timeline.tracks[:] = [timeline.tracks[j] for j in order]
        s["track"] = position[s["track"]].astype(s["track"].dtype, copy=False)
    return added


def _copy(timeline):
    return Timeline(tracks=list(timeline.tracks), names=list(timeline.names),
                    slices={c: a.copy() for c, a in timeline.slices.items()})


def assert_same_lanes(timeline, rows, label, keep_first=True):
    """spread_over_lanes and the reference on copies of one timeline: same count, tracks and slices."""
    mine, theirs = _copy(timeline), _copy(timeline)
    added = spread_over_lanes(mine, rows, label, keep_first)
    assert added == _reference_spread_over_lanes(theirs, rows, label, keep_first)
    assert mine.tracks == theirs.tracks
    for c in SLICE_COLUMNS:
        np.testing.assert_array_equal(mine.slices[c], theirs.slices[c], err_msg=c)
    return added


AMD_TRACES = ["rocprof/v1_mi250x_laplacian/results.csv", "rocprof/v1_mi300a_vecadd/results.json",
              "rocprof/v1_mi300a_vecadd/results.db", "rocprof/v1_old_rome_omp/results.csv",
              "rocprof/v1_old_rome_omp/results.json", "rocprof/v1_rdna_wave32_llm170_EXCERPT/results.head10.csv",
              "rocprof/v2_hip_api_trace_hiptrace.csv", "rocprof/v3_docs_kernel_trace_newer.csv",
              "rocprof/v3_docs_kernel_trace_older.csv", ROCPD]


@pytest.mark.parametrize("name", AMD_TRACES)
def test_lanes_match_the_reference_on_the_amd_traces(name, samples_dir, monkeypatch):
    """Every AMD trace's timeline, just before its lanes are made, gets the reference's lanes."""
    seen = []

    def check_then_spread(timeline, rows, label, keep_first=True):
        seen.append(assert_same_lanes(timeline, rows, label, keep_first))
        return spread_over_lanes(timeline, rows, label, keep_first)
    monkeypatch.setattr(amd_timeline, "spread_over_lanes", check_then_spread)
    assert tb_hwprof.read(sample(samples_dir, name)).timeline is not None
    assert len(seen) == 1
    if name == ROCPD:
        assert seen[0] > 0  # the sample whose queues overlap really gets lanes


def _many_overlaps(n_slices: int, rng) -> Timeline:
    """Three processes' tracks, slices that overlap by the thousand (many identical ones, as a
    duplicated row makes), and tids near LANE_TID_TOP already in use that lane tids must skip."""
    tracks = [Track(pid=p, tid=t, process=f"p{p}", thread=f"t{t}", kind="stream", device=p)
              for p, t in ((1, 0), (1, 5), (2, 0), (2, LANE_TID_TOP), (2, LANE_TID_TOP - 2), (3, 7))]
    start = np.sort(rng.integers(0, 50_000, n_slices))
    start[: n_slices // 3] = 1000  # a third all at once
    end = start + rng.integers(0, 20_000, n_slices)
    end[: n_slices // 3] = 9000
    slices = {"start": start, "end": end, "track": rng.integers(0, len(tracks), n_slices).astype(np.int32),
              "name": np.zeros(n_slices, np.int32), "cat": np.zeros(n_slices, np.int8),
              "flow": np.full(n_slices, -1), "bytes": np.full(n_slices, -1)}
    return Timeline(tracks=tracks, names=["k"], slices=slices)


@pytest.mark.parametrize("keep_first", [True, False])
def test_lanes_match_the_reference_when_thousands_overlap(keep_first):
    rng = np.random.default_rng(13)
    timeline = _many_overlaps(3000, rng)
    every = np.arange(len(timeline))
    assert assert_same_lanes(timeline, every, "overlap", keep_first) > 900
    some = np.sort(rng.choice(every, 1000, replace=False))  # a subset, as nsys spreads NVTX rows only
    assert assert_same_lanes(timeline, some, "NVTX", keep_first) > 0


def test_twenty_thousand_overlapping_slices_spread_in_linear_time():
    """20,000 slices at one instant: 20,000 lanes, each slice alone on one (seconds before, minutes
    for the quadratic reference, so it is not run here)."""
    n = 20_000
    timeline = Timeline(tracks=[Track(pid=1, tid=0, process="GPU", thread="Queue 0", kind="stream", device=0)],
                        names=["k"], slices={"start": np.full(n, 5), "end": np.full(n, 10),
                                             "track": np.zeros(n, np.int32), "name": np.zeros(n, np.int32),
                                             "cat": np.zeros(n, np.int8), "flow": np.full(n, -1),
                                             "bytes": np.full(n, -1)})
    began = time.perf_counter()
    assert spread_over_lanes(timeline, np.arange(n), "overlap") == n - 1
    assert time.perf_counter() - began < 5
    assert sorted(timeline.slices["track"].tolist()) == list(range(n))
    assert len({(t.pid, t.tid) for t in timeline.tracks}) == n
