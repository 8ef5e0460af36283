"""Cross-rank analysis (tb_hwprof/analysis/ranks.py) on real multi-rank PyTorch traces.

Every figure is recomputed here from the raw trace with stdlib json and this file's own interval
code: the rank and world size from distributedInfo, compute / communication / overlap / idle GPU
time per device from the kernel events, the steps from the ProfilerStep#N events (extended to the
GPU work their runtime calls launched, as torch-tb-profiler's Overview does).

The one synthetic input: a copy of rank 1 of the 2-rank capture with one operator's kernels
stretched (everything after them shifted), made in tmp_path, to have a straggler with a known
cause.  The real pair itself is judged as the data says.
"""
import json
import math
import pickle
from collections import defaultdict

import numpy as np
import pytest

import tb_hwprof
from tb_hwprof.analysis import ranks
from tb_hwprof.analysis.pipeline import analyse
from tb_hwprof.readers.detect import read
from tb_hwprof.core.errors import InputError
from tb_hwprof.logdir.writer import write_run

from conftest import sample
from support_ranks import OP_CATS, RUNTIME_CATS, complete, load, span_of, stretched

PAIR = ["torch/hta_sampled_2rank_rank0.json.gz", "torch/hta_sampled_2rank_rank1.json.gz"]
# Rank-0 files of 2-, 8- and 64-rank jobs (NCCL, RCCL on MI300X, DeepEP), see PROVENANCE.md.
RANK0_FILES = ["torch/hta_a100_nccl_2rank_rank0.json.gz", "torch/tracelens_b200_eager_8rank_rank0.json.gz",
               "torch/deepseek_h800_train_ep64_rank0.json", "torch/tracelens_mi300x_resnet_ddp_rank0.json.gz"]
ALL = PAIR + RANK0_FILES
# The test's own list of communication kernels (the names in these files: NCCL / RCCL kernels,
# DeepEP's internode dispatch / combine / notify kernels).
COMM_WORDS = ("nccl", "rccl", "::ep::internode::")


# ---------------------------------------------------------------- the raw trace, read here
def union(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def length(intervals):
    return sum(e - s for s, e in union(intervals))


def expected_split(doc):
    """compute / communication / overlap / idle / span ns summed over devices, from the kernels."""
    by_device = defaultdict(lambda: ([], []))
    for e in complete(doc, ("kernel",)):
        comm = any(w in e["name"].lower() for w in COMM_WORDS)
        by_device[e["args"]["device"]][1 if comm else 0].append(span_of(e))
    out = dict.fromkeys(("compute_ns", "communication_ns", "overlap_ns", "idle_ns", "span_ns"), 0)
    for compute, comm in by_device.values():
        busy = length(compute + comm)
        span = max(e for _, e in compute + comm) - min(s for s, _ in compute + comm)
        out["compute_ns"] += length(compute)
        out["communication_ns"] += length(comm)
        out["overlap_ns"] += _intersection(union(compute), union(comm))
        out["idle_ns"] += span - busy
        out["span_ns"] += span
    return out


def _intersection(a, b):
    """|A ∩ B| of two sorted disjoint interval lists, by walking both (not via |A|+|B|-|A∪B|)."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        total += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def expected_steps(doc):
    """[(step, time ns)]: each ProfilerStep#N from max(its start, the previous step's end) to
    max(its end, the end of the last kernel / copy / set its runtime calls launched); a trailing
    step that launched under 80% of the one before it is dropped, as are trailing steps that
    launched nothing."""
    steps = sorted((span_of(e), int(e["name"].split("#")[1])) for e in complete(doc, OP_CATS)
                   if e["name"].startswith("ProfilerStep#"))
    calls = {e["args"]["correlation"]: span_of(e) for e in complete(doc, RUNTIME_CATS) if "correlation" in e.get("args", {})}
    last_device, first_device = [None] * len(steps), [None] * len(steps)
    launches = [0] * len(steps)
    outside = []  # ends of device work launched outside every step
    for e in complete(doc, ("kernel", "gpu_memcpy", "gpu_memset")):
        call = calls.get(e["args"].get("correlation"))
        for i, ((s, end), _) in enumerate(steps):
            if call and s <= call[0] and call[1] <= end:
                launches[i] += 1
                last_device[i] = max(last_device[i] or 0, span_of(e)[1])
                first_device[i] = min(first_device[i] or span_of(e)[0], span_of(e)[0])
                break
        else:
            outside.append(span_of(e)[1])
    previous_end = None
    if first_device and first_device[0] is not None:
        before = [t for t in outside if t < first_device[0]]
        previous_end = max(before) if before else None
    out = []
    for i, ((s, end), number) in enumerate(steps):
        start = s if previous_end is None else max(s, previous_end)
        stop = max(end, last_device[i]) if last_device[i] is not None else end
        out.append((number, stop - start))
        previous_end = stop
    while out and launches[len(out) - 1] == 0:
        out.pop()
    if len(out) > 1 and launches[len(out) - 2] * 0.8 > launches[len(out) - 1]:
        out.pop()
    return out


# ---------------------------------------------------------------- digests of the real files
@pytest.fixture(scope="module")
def traces(samples_dir):
    return {name: (sample(samples_dir, name), load(sample(samples_dir, name))) for name in ALL}


@pytest.fixture(scope="module")
def digests(traces):
    out = {}
    for position, (name, (path, _)) in enumerate(traces.items()):
        profile = read(path)
        out[name] = ranks.rank_digest(profile, ranks.rank_of(profile, path, position), str(path))
    return out


@pytest.mark.parametrize("name", ALL)
def test_rank_and_world_size_from_distributed_info(name, traces, digests):
    info = traces[name][1]["distributedInfo"]
    assert digests[name].rank == info["rank"]
    assert digests[name].world_size == info["world_size"]


@pytest.mark.parametrize("name", ALL)
def test_compute_communication_overlap_idle_from_the_kernels(name, traces, digests):
    expected = expected_split(traces[name][1])
    got = {k: getattr(digests[name], k) for k in expected}
    assert got == expected
    d = digests[name]
    # The bars' four parts make the span.
    assert (d.compute_ns - d.overlap_ns) + (d.communication_ns - d.overlap_ns) + d.overlap_ns + d.idle_ns == d.span_ns


def test_the_samples_do_have_communication(digests):
    """Guards the test above against passing on all-zero communication."""
    for name in ALL:
        assert digests[name].communication_ns > 0, name
    assert any(digests[name].overlap_ns > 0 for name in ALL)


@pytest.mark.parametrize("name", ALL)
def test_steps_from_profiler_step_events(name, traces, digests):
    expected = expected_steps(traces[name][1])
    assert list(zip(digests[name].steps, digests[name].step_ns)) == expected


def test_a_trace_without_steps_has_none(digests):
    d = digests["torch/tracelens_b200_eager_8rank_rank0.json.gz"]
    assert d.steps == [] and d.step_work == {}
    table = ranks.job_profile([d]).summaries["ranks"]
    assert table["steps"].iloc[0] == 0 and math.isnan(table["step_time_avg_ns"].iloc[0])


def test_kernel_totals_from_the_kernels(traces, digests):
    name = PAIR[0]
    totals = defaultdict(int)
    for e in complete(traces[name][1], ("kernel",)):
        s, end = span_of(e)
        totals[e["name"]] += end - s
    assert digests[name].kernel_ns == dict(totals)


def test_digest_is_small_and_picklable(digests):
    for d in digests.values():
        blob = pickle.dumps(d)
        assert pickle.loads(blob) == d
        assert len(blob) < 1 << 20


def test_few_operators_kept_per_step_the_rest_summed(traces, digests, monkeypatch):
    """A digest keeps its TOP_WORK operators by name; the others' time is kept, summed."""
    name = PAIR[0]
    monkeypatch.setattr(ranks, "TOP_WORK", 3)
    small = ranks.rank_digest(read(traces[name][0]), 0, name)
    full = digests[name]
    kept = set().union(*small.step_work.values()) - {ranks.OTHER_WORK}
    assert len(kept) <= 3 and ranks.OTHER_WORK in set().union(*small.step_work.values())
    for step in full.step_work:
        assert sum(small.step_work[step].values()) == sum(full.step_work[step].values())
    # The kept ones are the rank's three operators of most GPU time over the steps.
    total = defaultdict(int)
    for work in full.step_work.values():
        for op, ns in work.items():
            total[op] += ns
    assert kept == set(sorted(total, key=total.get, reverse=True)[:3])


# ---------------------------------------------------------------- rank of a file
def test_rank_from_the_file_name_then_the_position(traces):
    path = traces[PAIR[1]][0]
    profile = read(path)
    profile.torch.distributed = None  # as a trace without distributedInfo
    assert ranks.rank_of(profile, path, 7) == 1  # "..._rank1.json.gz"
    assert ranks.rank_of(profile, "/x/worker_rank-12.pt.trace.json", 7) == 12
    assert ranks.rank_of(profile, "/x/worker.pt.trace.json", 7) == 7
    assert ranks.rank_of(profile, "/x/frank3.json", 7) == 7  # not a rank inside a longer word


# ---------------------------------------------------------------- the job
def test_job_tables_of_the_real_pair(traces, digests):
    job = ranks.job_profile([digests[PAIR[1]], digests[PAIR[0]]], notes=["a skipped rank"])
    table = job.summaries["ranks"]
    assert list(table["rank"]) == [0, 1]
    for row, name in zip(table.itertuples(), PAIR):
        steps = [t for _, t in expected_steps(traces[name][1])]
        assert row.steps == len(steps)
        assert row.step_time_avg_ns == pytest.approx(sum(steps) / len(steps), abs=0.5)
        assert row.step_time_max_ns == max(steps)
        split = expected_split(traces[name][1])
        assert (row.compute_ns, row.communication_ns, row.overlap_ns, row.idle_ns) == (
            split["compute_ns"], split["communication_ns"], split["overlap_ns"], split["idle_ns"])
    # Straggler as the data says: the slower rank's average step exceeds the median (the mean of
    # two) by more than 5% and 100 µs, or there is none.
    avg = [sum(t for _, t in expected_steps(traces[n][1])) / 2 for n in PAIR]
    median = sum(avg) / 2
    expected = [a - median > 0.05 * median and a - median > 100_000 for a in avg]
    assert list(table["straggler"]) == expected
    steps = job.summaries["rank_steps"]
    assert len(steps) == sum(len(expected_steps(traces[n][1])) for n in PAIR)
    assert "a skipped rank" in job.notes
    assert job.summaries["ranks"].attrs["units"]["compute_ns"] == "ns"


def test_rank_kernels_spread(traces, digests):
    pair = [digests[n] for n in PAIR]
    table = ranks.job_profile(pair).summaries["rank_kernels"]
    assert 0 < len(table) <= ranks.TOP_KERNELS
    totals = []
    for name in PAIR:
        t = defaultdict(int)
        for e in complete(traces[name][1], ("kernel",)):
            s, end = span_of(e)
            t[e["name"]] += end - s
        totals.append(t)
    for row in table.itertuples():
        values = [t.get(row.kernel, 0) for t in totals]
        assert (row.min_ns, row.max_ns, row.median_ns) == (min(values), max(values), sum(values) / 2)
    # The first row is the kernel of most median time.
    best = max({k for t in totals for k in t}, key=lambda k: sum(t.get(k, 0) for t in totals))
    assert table["kernel"].iloc[0] == best


def test_mixed_jobs_refused(digests):
    two, eight = digests["torch/hta_a100_nccl_2rank_rank0.json.gz"], digests["torch/tracelens_b200_eager_8rank_rank0.json.gz"]
    eight = pickle.loads(pickle.dumps(eight))
    eight.rank = 1  # not a rank clash: the world size must be what refuses it
    with pytest.raises(InputError) as e:
        ranks.job_profile([two, eight])
    message = str(e.value)
    assert eight.source in message and "world size 8" in message and "\n" not in message


def test_the_same_rank_twice_refused(digests):
    d = digests[PAIR[0]]
    with pytest.raises(InputError, match="claims rank 0"):
        ranks.check_same_job([d, d])


def test_different_process_groups_refused(digests):
    d = digests["torch/hta_a100_nccl_2rank_rank0.json.gz"]
    other = pickle.loads(pickle.dumps(d))
    other.rank, other.source = 1, "/x/other_rank1.json"
    other.job_signature = other.job_signature.replace("cuda:nccl", "cuda:gloo")
    with pytest.raises(InputError, match="process group"):
        ranks.check_same_job([d, other])


def test_job_run_exports_and_loads_back(tmp_path, digests):
    job = ranks.job_profile([digests[n] for n in PAIR], notes=["rank 5 skipped: unreadable"], job="job")
    run_dir = write_run(job, analyse(job), tmp_path, "job")
    back = tb_hwprof.load_run(run_dir)
    for name in ("ranks", "rank_steps", "rank_kernels"):
        written, loaded = job.summaries[name], back.summaries[name]
        assert list(loaded.columns) == list(written.columns)
        for col in written.columns:
            assert list(loaded[col]) == pytest.approx(list(written[col])) if written[col].dtype.kind == "f" \
                else list(loaded[col]) == list(written[col]), (name, col)
    assert "rank 5 skipped: unreadable" in back.notes
    assert back.summaries["ranks"].attrs["units"]["idle_ns"] == "ns"


# ---------------------------------------------------------------- a straggler with a known cause
def test_a_stretched_operator_makes_a_straggler_and_is_named(tmp_path, traces, digests):
    """Synthetic for the straggler case only: rank 1's aten::mm kernels 4x as long, as rank 2."""
    doc = stretched(traces[PAIR[1]][1], "aten::mm", 4, rank=2)
    path = tmp_path / "synthetic_stretched_rank2.json"
    path.write_text(json.dumps(doc))
    slow = ranks.rank_digest(read(path), ranks.rank_of(read(path), path, 2), str(path))
    assert slow.rank == 2
    job = ranks.job_profile([digests[PAIR[0]], digests[PAIR[1]], slow])
    table = job.summaries["ranks"].set_index("rank")
    assert list(table["straggler"]) == [False, False, True]
    reason = table.loc[2, "straggler_reason"]
    # The numbers in the reason, recomputed: rank 2's average step vs the median rank's (rank 1's).
    avg = {r: np.mean([t for _, t in expected_steps(d)]) for r, d in
           ((0, traces[PAIR[0]][1]), (1, traces[PAIR[1]][1]), (2, doc))}
    median = float(np.median(list(avg.values())))
    assert f"average step time {avg[2] / 1e6:.3f} ms vs median rank {median / 1e6:.3f} ms" in reason
    assert "operator aten::mm:" in reason
    for step, t in expected_steps(doc):
        assert f"{step} ({t / 1e6:.3f} ms" in reason
    assert "5%" in reason and "100 µs" in reason


# ---------------------------------------------------------------- ranks without steps (Nsight Systems)
NSYS_RANKS = ["nsys/gpu4_t4_2022.4.2.sqlite", "nsys/annikola_gtx1050_2024.5.1.sqlite",
              "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite"]


def sqlite_kernels(path):
    import sqlite3
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT k.deviceId, k.start, k.end, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                            "JOIN StringIds s ON s.id = k.shortName").fetchall()


def test_nsys_ranks_have_no_steps_and_are_judged_on_busy_gpu_time(samples_dir):
    """Three real Nsight Systems captures given as the ranks of one job (no distributedInfo: ranks
    by position), checked against sqlite3: GPU time from the kernels, no steps, and the straggler
    rule on busy GPU time naming the kernel that differs most."""
    paths = [sample(samples_dir, name) for name in NSYS_RANKS]
    digests = []
    for position, path in enumerate(paths):
        profile = read(path)
        digests.append(ranks.rank_digest(profile, ranks.rank_of(profile, path, position), str(path)))
    totals = []
    for d, path in zip(digests, paths):
        rows = sqlite_kernels(path)
        by_device = defaultdict(list)
        for device, s, e, _ in rows:
            by_device[device].append((s, e))
        busy = sum(length(v) for v in by_device.values())
        span = sum(max(e for _, e in v) - min(s for s, _ in v) for v in by_device.values())
        assert (d.compute_ns, d.communication_ns, d.overlap_ns, d.idle_ns, d.span_ns) == (busy, 0, 0, span - busy, span)
        assert d.steps == [] and d.world_size is None
        t = defaultdict(int)
        for _, s, e, name in rows:
            t[name] += e - s
        totals.append(t)
    assert [d.rank for d in digests] == [0, 1, 2]
    table = ranks.job_profile(digests).summaries["ranks"]
    busy = [d.compute_ns for d in digests]
    median = sorted(busy)[1]
    expected = [b - median > 0.05 * median and b - median > 100_000 for b in busy]
    assert list(table["straggler"]) == expected and any(expected)
    for i in np.flatnonzero(expected):
        names = set().union(*totals)
        med = {n: float(np.median([t.get(n, 0) for t in totals])) for n in names}
        worst = max(sorted(names), key=lambda n: totals[i].get(n, 0) - med[n])
        reason = table["straggler_reason"].iloc[i]
        assert f"busy GPU time {busy[i] / 1e6:.3f} ms vs median rank {median / 1e6:.3f} ms" in reason
        assert f"kernel {worst}: {totals[i][worst] / 1e6:.3f} ms vs median rank {med[worst] / 1e6:.3f} ms" in reason
    assert table["steps"].tolist() == [0, 0, 0] and table["step_time_avg_ns"].isna().all()
    assert len(ranks.job_profile(digests).summaries["rank_steps"]) == 0


def test_a_rocprof_rank_from_the_kernel_trace_csv(samples_dir):
    """A rocprofv3 kernel trace as one rank: GPU time per agent from the CSV's own timestamps."""
    import csv
    path = sample(samples_dir, "rocprof/v3_docs_kernel_trace_newer.csv")
    profile = read(path)
    d = ranks.rank_digest(profile, ranks.rank_of(profile, path, 4), str(path))
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["Kind"] == "KERNEL_DISPATCH"]
    by_agent = defaultdict(list)
    for r in rows:
        by_agent[r["Agent_Id"]].append((int(r["Start_Timestamp"]), int(r["End_Timestamp"])))
    busy = sum(length(v) for v in by_agent.values())
    span = sum(max(e for _, e in v) - min(s for s, _ in v) for v in by_agent.values())
    assert d.rank == 4 and d.steps == []
    assert (d.compute_ns, d.communication_ns, d.idle_ns, d.span_ns) == (busy, 0, span - busy, span)


def test_a_rank_with_no_kernel_against_ranks_with_some(digests):
    """A median of 0 (most ranks ran no kernel) still gives a reason, not a division by zero."""
    idle = [ranks.RankDigest(rank=r, source=f"/x/idle_rank{r}.json") for r in (0, 1)]
    busy = pickle.loads(pickle.dumps(digests["torch/tracelens_b200_eager_8rank_rank0.json.gz"]))
    busy.rank, busy.world_size, busy.job_signature = 2, None, ""
    table = ranks.job_profile(idle + [busy]).summaries["ranks"]
    assert list(table["straggler"]) == [False, False, True]
    assert "the median is 0" in table["straggler_reason"].iloc[2]
