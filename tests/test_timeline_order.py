"""The timeline index's ordering, nesting depths and decimation, checked against the plain
computations they replace (a lexsort of every slice, a count per slice, a sort per bin) on real
traces: Nsight Systems exports, PyTorch traces (µs timestamps: many slices start on the same ns,
the tie-breaking case) and a rocprof trace."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tb_hwprof.analysis.trace_views import decimate
from tb_hwprof.logdir.trace import event_order, nesting_depths

TRACES = ("nsys/mordred_quadro6000_2021.2.1.sqlite", "nsys/gpu4_t4_2022.4.2.sqlite",
          "torch/hta_v100_resnet_rank0.json.gz", "torch/kineto_rn50_v100_jun2021.json.gz",
          "torch/tracelens_mi300x_bert_small.json.gz")


@pytest.fixture(scope="module", params=TRACES)
def timeline(request, read_sample, samples_dir):
    if not (samples_dir / request.param).is_file():
        pytest.skip(f"{request.param} not in the samples")
    got = read_sample(request.param).timeline
    assert got is not None and got.slices["start"].size > 500
    return got


def reference_order(timeline, keep):
    """By start, longer first on ties, then slice order: one lexsort of the kept slices."""
    s = timeline.slices
    idx = np.flatnonzero(keep)
    return idx[np.lexsort((-s["end"][idx], s["start"][idx]))]


def test_event_order_is_the_lexsort(timeline):
    s = timeline.slices
    everything = np.ones(s["start"].size, dtype=bool)
    assert np.array_equal(event_order(timeline, everything), reference_order(timeline, everything))
    window = (s["end"] >= np.percentile(s["start"], 30)) & (s["start"] <= np.percentile(s["start"], 60))
    assert np.array_equal(event_order(timeline, window), reference_order(timeline, window))


def test_event_order_breaks_ties_longest_first(timeline):
    """Starts rounded to 1/200 of the capture: most slices tie, each run of ties must come longest
    first, then in slice order."""
    s = timeline.slices
    grain = max(1, int(s["end"].max() - s["start"].min()) // 200)
    coarse = dataclasses.replace(timeline, slices=dict(s, start=s["start"] // grain * grain))
    everything = np.ones(s["start"].size, dtype=bool)
    starts = coarse.slices["start"][reference_order(coarse, everything)]
    assert (starts[1:] == starts[:-1]).sum() > starts.size // 4  # ties to break
    assert np.array_equal(event_order(coarse, everything), reference_order(coarse, everything))


def reference_depths(start, end, track):
    """Per slice (in event order): its position in its track less the slices of its track ended by
    its start (end <= start; a zero-length slice starting there counts as ended), at least 0."""
    depth = np.zeros(start.size, dtype=np.int64)
    for t in np.unique(track):
        idx = np.flatnonzero(track == t)
        for k, i in enumerate(idx):
            depth[i] = max(0, k - int(np.count_nonzero(end[idx] <= start[i])))
    return depth


def test_nesting_depths_count_the_open_slices(timeline):
    s = timeline.slices
    order = event_order(timeline, np.ones(s["start"].size, dtype=bool))[:3000]  # the O(n^2) reference: a prefix
    start, end, track = s["start"][order], s["end"][order], s["track"][order]
    assert np.array_equal(nesting_depths(start, end, track), reference_depths(start, end, track))


def reference_decimate(start, end, track, depth, weight, idx, wstart, wend, max_events):
    """Per (lane, time bin): the longest slice (first of equal ones) and its bin's summed weight, by a
    lexsort of the rows, then the longest slices if over budget, then by start (longer first)."""
    idx = np.arange(start.size) if idx is None else idx
    lanes = track[idx].astype(np.int64) * 64 + np.minimum(depth[idx], 63)
    distinct, lane = np.unique(lanes, return_inverse=True)
    bins = max(1, max_events // max(1, distinct.size))
    width = max(1, wend - wstart)
    b = np.clip((np.maximum(start[idx], wstart).astype(np.int64) - wstart) * bins // width, 0, bins - 1)
    key = lane * bins + b
    order = np.lexsort((start[idx] - end[idx], key))
    first = np.flatnonzero(np.concatenate(([True], key[order][1:] != key[order][:-1])))
    picked = idx[order[first]]
    counts = np.add.reduceat(weight[idx][order], first)
    if picked.size > max_events:
        keep = np.argsort(-(end[picked] - start[picked]), kind="stable")[:max_events]
        picked, counts = picked[keep], counts[keep]
    resort = np.lexsort((-end[picked], start[picked]))
    return picked[resort], counts[resort]


@pytest.mark.parametrize("budget", [50, 2000, 20000])
def test_decimate_keeps_each_bins_longest_slice(timeline, budget):
    s = timeline.slices
    order = event_order(timeline, np.ones(s["start"].size, dtype=bool))
    start, end, track = s["start"][order], s["end"][order], s["track"][order]
    depth = nesting_depths(start, end, track)
    lo, hi = int(start.min()), int(end.max())
    ones = np.ones(start.size, dtype=np.int64)
    for got, want in zip(decimate(start, end, track, depth, None, None, lo, hi, budget),
                         reference_decimate(start, end, track, depth, ones, None, lo, hi, budget)):
        assert np.array_equal(got, want) and got.dtype == want.dtype
    weight = np.random.default_rng(budget).integers(1, 9, start.size)
    a, b = int(np.percentile(start, 20)), int(np.percentile(start, 45))
    idx = np.flatnonzero((end >= a) & (start <= b))
    for got, want in zip(decimate(start, end, track, depth, weight, idx, a, b + 1, budget),
                         reference_decimate(start, end, track, depth, weight, idx, a, b + 1, budget)):
        assert np.array_equal(got, want) and got.dtype == want.dtype
