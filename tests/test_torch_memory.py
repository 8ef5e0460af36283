"""The Memory tables (tb_hwprof/analysis/torch_memory.py, issue 33) against torch-tb-profiler 0.4.3
itself on the shared traces recorded with profile_memory=True, the reader's memory table (both
decoders), the curve's decimation, and the memory advice against thresholds computed here.

The oracle runs as its RunProfileData does on one worker file (from_json on the trace's JSON), then
its MemorySnapshot: get_memory_statistics (the Memory view's per-operator table) and get_peak_memory.
ROCm traces write their GPU as Device Type 6 (HIP), which 0.4.3 drops from its statistics: the
oracle reads a copy with 6 spelled 1 (CUDA), what we compute on purpose (docs/FORMAT.md)."""
from __future__ import annotations

import gzip
import json
import logging

import numpy as np
import pandas as pd
import pytest

import tb_hwprof
from tb_hwprof.analysis import torch_memory
from tb_hwprof.analysis.advice import torch as torch_advice
from tb_hwprof.analysis.pipeline import analyse
from tb_hwprof.readers.torch import decode

from conftest import sample

pytest.importorskip("torch_tb_profiler", reason="torch-tb-profiler (the oracle) is not installed")
from torch_tb_profiler.profiler.data import RunProfileData  # noqa: E402
from torch_tb_profiler.profiler.trace import DeviceType  # noqa: E402

TRACES = ["torch/tracelens_h100_bert_small.json.gz", "torch/tracelens_h100_falconsai_vit.json.gz",
          "torch/tracelens_mi300x_bert_small.json.gz", "torch/tracelens_mi300x_falconsai_vit.json.gz",
          "torch/kineto_rn50_v100_jun2021.json.gz", "torch/kineto_rn50_v100_workers4_jun2021.json.gz"]
WITH_TOTALS = TRACES[:4]  # PyTorch >= 1.10: addresses and allocator totals
HIP = 6


def load(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def runs(samples_dir):
    """Per trace: (its JSON, our profile, our analysis, the oracle's RunProfileData)."""
    cache = {}

    def run(relative):
        if relative not in cache:
            path = sample(samples_dir, relative)
            doc = load(path)
            profile = tb_hwprof.read(path)
            oracle_doc = load(path)
            for e in oracle_doc["traceEvents"]:
                if e.get("name") == "[memory]" and (e.get("args") or {}).get("Device Type") == HIP:
                    e["args"]["Device Type"] = int(DeviceType.CUDA)
            logging.disable(logging.WARNING)
            try:
                oracle = RunProfileData.from_json("worker0", None, oracle_doc)
            finally:
                logging.disable(logging.NOTSET)
            cache[relative] = (doc, profile, analyse(profile), oracle)
        return cache[relative]
    return run


def memory_json_events(doc):
    return [e for e in doc["traceEvents"] if e.get("ph") in ("i", "I") and e.get("name") == "[memory]"]


# ---------------------------------------------------------------- against torch-tb-profiler
@pytest.mark.parametrize("relative", TRACES)
def test_memory_by_op_equals_torch_tb_profiler_on_every_row(runs, relative):
    _, _, analysis, oracle = runs(relative)
    stats = oracle.memory_snapshot.get_memory_statistics(oracle.tid2tree)
    theirs = {(device, op): list(values) for device, ops in stats.items() for op, values in ops.items()}
    table = analysis.summaries["memory_by_op"]
    ours = {(r.device, r.op): [r.self_increase_bytes, r.self_alloc_bytes, r.self_alloc_count, r.increase_bytes,
                               r.alloc_bytes, r.alloc_count, r.calls] for r in table.itertuples()}
    assert len(theirs) >= 10
    assert ours == theirs


@pytest.mark.parametrize("relative", TRACES)
def test_each_devices_peak_equals_torch_tb_profiler(runs, relative):
    _, _, analysis, oracle = runs(relative)
    theirs = {("CPU" if kind == DeviceType.CPU else f"GPU{ident}"): int(peak)
              for (kind, ident), peak in oracle.memory_snapshot.get_peak_memory().items()}
    peaks = analysis.summaries.get("memory_peak")
    ours = {} if peaks is None else dict(zip(peaks["device"], peaks["peak_allocated_bytes"].astype(int)))
    assert ours == theirs
    assert bool(theirs) == (relative in WITH_TOTALS)  # 2021 traces carry no totals: no peak on either side


# ---------------------------------------------------------------- independent checks
@pytest.mark.parametrize("relative", WITH_TOTALS)
def test_peaks_and_curves_keep_the_exact_maxima(runs, relative):
    doc, _, analysis, _ = runs(relative)
    events = [e["args"] for e in memory_json_events(doc)]
    peaks, curve = analysis.summaries["memory_peak"], analysis.summaries["memory_curve"]
    for row in peaks.itertuples():
        mine = [a for a in events if row.device == ("CPU" if a["Device Type"] == 0 else f"GPU{a['Device Id']}")]
        assert row.peak_allocated_bytes == max(a["Total Allocated"] for a in mine)
        assert row.peak_reserved_bytes == max(a["Total Reserved"] for a in mine)
        drawn = curve[curve["device"] == row.device]
        assert drawn["allocated_bytes"].max() == row.peak_allocated_bytes
        assert drawn["reserved_bytes"].max() == row.peak_reserved_bytes
        assert row.at_ns in set(drawn["ts_ns"])


def test_decimated_curve_keeps_every_bins_extremes():
    rng = np.random.default_rng(7)
    n = 50_000
    memory = pd.DataFrame({"ts_ns": np.sort(rng.integers(0, 10**9, n)), "pid": 1, "tid": 1, "device_type": 1,
                           "device_id": 0, "bytes": 1, "addr": 1, "total_allocated": rng.integers(0, 10**9, n),
                           "total_reserved": rng.integers(0, 10**9, n)})
    curve = torch_memory.memory_curve(memory, np.full(n, "GPU0", dtype=object), bins=100)
    assert len(curve) <= 5 * 100
    assert curve["allocated_bytes"].max() == memory["total_allocated"].max()
    assert curve["allocated_bytes"].min() == memory["total_allocated"].min()
    assert curve["reserved_bytes"].max() == memory["total_reserved"].max()
    assert curve["ts_ns"].is_monotonic_increasing


@pytest.mark.parametrize("relative", TRACES)
def test_reader_memory_table_matches_the_json_in_both_decoders(samples_dir, runs, relative):
    doc, profile, _, _ = runs(relative)
    events = sorted(memory_json_events(doc), key=lambda e: e["ts"])  # stable: ties in file order
    memory = profile.torch.memory
    assert len(memory) == len(events)
    assert memory["bytes"].tolist() == [e["args"].get("Bytes", 0) for e in events]
    assert memory["addr"].tolist() == [e["args"].get("Addr", -1) for e in events]
    assert memory["total_allocated"].tolist() == [e["args"].get("Total Allocated", -1) for e in events]
    assert memory["device_type"].tolist() == [e["args"]["Device Type"] for e in events]
    data = gzip.open(sample(samples_dir, relative)).read()
    native, python = decode.decode_events(data), decode.decode_events_python(data)
    for column in decode.INSTANT_COLUMNS:
        assert np.array_equal(native.instants[column], python.instants[column]), column


def test_allocation_events_pair_each_free_with_its_allocation(runs):
    doc, _, analysis, _ = runs(TRACES[0])
    events = analysis.summaries["memory_events"]
    by_addr = {}
    for e in sorted(memory_json_events(doc), key=lambda e: e["ts"]):
        by_addr.setdefault(e["args"]["Addr"], []).append(e["args"]["Bytes"])
    allocations = sum(1 for sizes in by_addr.values() for b in sizes if b > 0)
    assert int((events["alloc_ns"] >= 0).sum()) == allocations
    paired = events[(events["alloc_ns"] >= 0) & (events["free_ns"] >= 0)]
    assert (paired["lifetime_ns"] == paired["free_ns"] - paired["alloc_ns"]).all()
    assert (paired["lifetime_ns"] >= 0).all()


# ---------------------------------------------------------------- advice
def gpu_figures(doc):
    """Per GPU from the JSON: (peak reserved, peak allocated, reserved at the allocated peak, capacity)."""
    capacity = {p["id"]: p["totalGlobalMem"] for p in doc.get("deviceProperties") or []}
    out = {}
    for e in memory_json_events(doc):
        a = e["args"]
        if a.get("Device Type") in (1, HIP) and "Total Allocated" in a:
            peak = out.setdefault(a["Device Id"], [0, -1, 0, capacity.get(a["Device Id"])])
            peak[0] = max(peak[0], a["Total Reserved"])
            if a["Total Allocated"] > peak[1]:
                peak[1], peak[2] = a["Total Allocated"], a["Total Reserved"]
    return out


def rule_ids(analysis):
    return {f.id for f in analysis.findings}


@pytest.mark.parametrize("relative", WITH_TOTALS)
def test_memory_advice_fires_only_above_its_thresholds(runs, relative):
    doc, profile, analysis, _ = runs(relative)
    figures = gpu_figures(doc)
    near_capacity = any(max(r, a) >= torch_advice.MEMORY_CAPACITY_PCT / 100 * c for r, a, _, c in figures.values())
    gap = any(at - a >= torch_advice.FRAGMENTATION_MIN_BYTES and (at - a) >= torch_advice.FRAGMENTATION_GAP_PCT / 100 * at
              for _, a, at, _ in figures.values())
    fired = rule_ids(analysis)
    assert ("torch.memory_capacity" in fired) == near_capacity
    assert ("torch.memory_fragmentation" in fired) == gap
    assert ("torch.allocator_churn" in fired) == (churn_per_step(doc, profile) >= torch_advice.CHURN_PER_STEP)


def churn_per_step(doc, profile):
    """The most frequent size among GPU allocations freed within 1 ms, per profiled step."""
    live, counts = {}, {}
    for e in sorted(memory_json_events(doc), key=lambda e: e["ts"]):
        a = e["args"]
        if a.get("Device Type") not in (1, HIP):
            continue
        if a["Bytes"] > 0:
            live[a["Addr"]] = (e["ts"], a["Bytes"])
        elif a["Addr"] in live:
            ts, size = live.pop(a["Addr"])
            if (e["ts"] - ts) * 1000 < 1_000_000:
                counts[size] = counts.get(size, 0) + 1
    return max(counts.values(), default=0) / max(len(profile.torch.steps), 1)


def test_memory_advice_with_lowered_thresholds_names_its_figures(runs, monkeypatch):
    doc, profile, analysis, _ = runs(TRACES[0])
    [(reserved, allocated, at_peak, capacity)] = gpu_figures(doc).values()
    monkeypatch.setattr(torch_advice, "MEMORY_CAPACITY_PCT", 0.1)
    monkeypatch.setattr(torch_advice, "FRAGMENTATION_GAP_PCT", 10.0)
    monkeypatch.setattr(torch_advice, "FRAGMENTATION_MIN_BYTES", 1 << 20)
    monkeypatch.setattr(torch_advice, "CHURN_PER_STEP", 10)
    tables = analysis.tables(profile)
    capacity_finding = torch_advice.memory_capacity(tables)
    assert capacity_finding.figures["share_pct"].value == pytest.approx(100 * max(reserved, allocated) / capacity)
    assert "threshold 0%" in capacity_finding.text
    gap = torch_advice.memory_fragmentation(tables)
    assert gap.figures["gap_bytes"].value == at_peak - allocated
    churn = torch_advice.allocator_churn(tables, torch_advice.steps_of(profile.torch))
    assert churn.figures["per_step"].value == pytest.approx(churn_per_step(doc, profile))
    assert "threshold 10 per step" in churn.text
