"""The Nsight Systems timeline: the Chrome trace file parsed back and checked against independent SQL
over every real export, the --time-range / --nvtx-range windows, and the GPU idle-time summaries."""
import gzip
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

import tb_hwprof
from tb_hwprof.analysis import timeline as tl
from tb_hwprof.core.columnar import launching_call
from tb_hwprof.logdir import metadata, trace
from tb_hwprof.readers.nvidia.nsys_sqlite import read_nsys_sqlite

from conftest import sample
from support_nsys import DLPROF, GPU_TABLES, KERNEL, MEMCPY, MEMSET, NVTX, RUNTIME, query, sql_gaps, tables_of

REPO = Path(__file__).resolve().parent.parent


def export(path, logdir, *extra, run="r"):
    done = subprocess.run([sys.executable, "-m", "tb_hwprof", "export", str(path), "--logdir", str(logdir),
                           "--run", run, *extra], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return logdir / run / "plugins" / "tb_hwprof", done.stdout


def load_trace(assets):
    raw = gzip.decompress((assets / metadata.TIMELINE).read_bytes())
    doc = json.loads(raw)  # strict JSON: NaN or a trailing comma would fail here
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    return doc


def tracks_of(events):
    """(pid, tid) -> (process name, thread name) from the metadata events."""
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    return {(e["pid"], e["tid"]): (procs[e["pid"]], e["args"]["name"])
            for e in events if e["ph"] == "M" and e["name"] == "thread_name"}


def ns(us: float) -> int:
    return int(round(us * 1000))


def thread_of(gtid: int):
    return (gtid >> 24) & 0xFFFFFF, gtid & 0xFFFFFF


# ------------------------------------------------------------------ every export
def test_trace_is_well_formed_and_holds_every_gpu_op_once_on_its_stream(tmp_path, nsys_sqlite):
    names = tables_of(nsys_sqlite)
    assets, _ = export(nsys_sqlite, tmp_path)
    if not any(t in names for t in (KERNEL, MEMCPY, MEMSET, RUNTIME)):
        assert not (assets / metadata.TIMELINE).exists()
        return
    doc = load_trace(assets)
    events = doc["traceEvents"]
    assert doc["displayTimeUnit"] == "ns"
    assert all(isinstance(e.get("name"), str) and e["name"] for e in events)  # torch-tb-profiler needs it
    assert not {"Iteration Start", "Record Window End"} & {e["name"] for e in events}
    assert {e["ph"] for e in events} <= {"M", "X", "s", "f"}
    tracks = tracks_of(events)
    gpu = Counter()
    for e in events:
        if e["ph"] == "X" and e["cat"] in GPU_TABLES.values():
            process, thread = tracks[(e["pid"], e["tid"])]
            device = int(re.match(r"GPU (\d+)", process).group(1))
            stream = int(re.match(r"Stream (\d+)", thread).group(1))
            gpu[(e["cat"], ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), device, stream)] += 1
    expected = Counter()
    for table, cat in GPU_TABLES.items():
        if table in names:
            for start, end, device, stream in query(nsys_sqlite, f"SELECT start, end, deviceId, streamId FROM {table}"):
                expected[(cat, start, end, device, stream)] += 1
    assert gpu == expected  # µs with ns decimals: every op once, on its device's stream track


def test_api_calls_and_threads_and_flows(tmp_path, nsys_sqlite):
    names = tables_of(nsys_sqlite)
    if RUNTIME not in names:
        pytest.skip("no CUDA API calls in this export")
    events = load_trace(export(nsys_sqlite, tmp_path)[0])["traceEvents"]
    tracks = tracks_of(events)
    calls = Counter((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["pid"], e["tid"])
                    for e in events if e["ph"] == "X" and e["cat"] == "cuda_api")
    rows = query(nsys_sqlite, f"SELECT start, end, globalTid FROM {RUNTIME}")
    assert calls == Counter((s, e, *thread_of(g)) for s, e, g in rows)
    # Thread names are nsys' own (ThreadNames), on the thread's own track.
    for gtid, name in query(nsys_sqlite, f"""SELECT DISTINCT r.globalTid, s.value FROM {RUNTIME} r
                                             JOIN ThreadNames t ON t.globalTid = r.globalTid
                                             JOIN StringIds s ON s.id = t.nameId"""):
        assert tracks[thread_of(gtid)][1] == name
    # Flows: one "s" on the launching call, one "f" on the GPU op, paired by correlation id in SQL.
    by_id = defaultdict(list)
    for e in events:
        if e["ph"] in "sf":
            by_id[e["id"]].append(e)
    assert all(sorted(x["ph"] for x in pair) == ["f", "s"] for pair in by_id.values())
    assert all(next(x for x in pair if x["ph"] == "f").get("bp") == "e" for pair in by_id.values())
    got = {(ns(next(x for x in p if x["ph"] == "s")["ts"]), ns(next(x for x in p if x["ph"] == "f")["ts"]))
           for p in by_id.values()}
    expected = set()
    for table in GPU_TABLES:
        if table in names:
            expected |= set(query(nsys_sqlite, f"""
                SELECT r.start, min(g.start) FROM {RUNTIME} r JOIN {table} g ON g.correlationId = r.correlationId
                 AND (r.globalTid >> 24) = (g.globalPid >> 24) GROUP BY r.rowid"""))
    assert got == expected and len(by_id) == len(expected)


def test_index_holds_the_trace_slices_sorted(tmp_path, nsys_sqlite):
    if RUNTIME not in tables_of(nsys_sqlite):
        pytest.skip("no CUDA trace")
    assets, _ = export(nsys_sqlite, tmp_path)
    index = trace.read_index(assets / metadata.TIMELINE_INDEX)
    xs = [e for e in load_trace(assets)["traceEvents"] if e["ph"] == "X"]
    assert index["start"].size == len(xs)
    assert (np.diff(index["start"]) >= 0).all()
    assert sorted(ns(e["ts"]) for e in xs) == index["start"].tolist()
    manifest = json.loads((assets / metadata.MANIFEST).read_text())
    assert manifest["files"]["timeline"] == metadata.TIMELINE
    assert manifest["timeline"]["kept_events"] == len(xs) and manifest["timeline"]["dropped_events"] == 0


# ------------------------------------------------------------------ windows
def overlapping(path, lo, hi):
    """Slices of the export overlapping [lo, hi], counted in SQL per category."""
    names = tables_of(path)
    out = {}
    for table, cat in {**GPU_TABLES, RUNTIME: "cuda_api", NVTX: "nvtx"}.items():
        if table in names:
            closed = " AND eventType IN (59, 60) AND end IS NOT NULL" if table == NVTX else ""
            out[cat] = query(path, f"SELECT count(*) FROM {table} WHERE end >= ? AND start <= ?{closed}", lo, hi)[0][0]
            total = query(path, f"SELECT count(*) FROM {table} WHERE 1{closed}")[0][0]
            out[cat + "_total"] = total
    return out


def test_time_range_keeps_and_drops_what_sql_counts(tmp_path, samples_dir):
    path = sample(samples_dir, DLPROF)
    ((lo,),) = query(path, f"SELECT start FROM {KERNEL} ORDER BY start LIMIT 1 OFFSET 10")
    ((hi,),) = query(path, f"SELECT end FROM {KERNEL} ORDER BY start LIMIT 1 OFFSET 30")
    assets, stdout = export(path, tmp_path, "--time-range", f"{lo}:{hi}")
    expected = overlapping(path, lo, hi)
    info = json.loads((assets / metadata.MANIFEST).read_text())["timeline"]
    for cat in ("kernel", "memcpy", "memset", "cuda_api", "nvtx"):
        assert info["kept"][cat] == expected[cat]
        assert info["dropped"][cat] == expected[cat + "_total"] - expected[cat]
    kept = sum(expected[c] for c in ("kernel", "memcpy", "memset", "cuda_api", "nvtx"))
    assert info["kept_events"] == kept and info["window"] == {"start_ns": lo, "end_ns": hi,
                                                              "label": f"--time-range {lo}:{hi}"}
    assert f"kept {kept} events, dropped {info['dropped_events']}" in stdout
    events = load_trace(assets)["traceEvents"]
    kernels = [e for e in events if e["ph"] == "X" and e["cat"] == "kernel"]
    assert sorted(ns(e["ts"]) for e in kernels) == [s for (s,) in query(
        path, f"SELECT start FROM {KERNEL} WHERE end >= ? AND start <= ? ORDER BY start", lo, hi)]
    # Flows only where both ends are kept: every "s" still has its "f".
    phases = Counter(e["id"] for e in events if e["ph"] in "sf")
    assert set(phases.values()) <= {2} and info["kept"]["flow"] == len(phases)


def test_nvtx_range_window_first_and_all(tmp_path, samples_dir):
    path = sample(samples_dir, DLPROF)
    name = "aten::conv2d, seq = 0"
    ((lo, hi),) = query(path, f"SELECT start, end FROM {NVTX} WHERE text = ?", name)
    assets, _ = export(path, tmp_path, "--nvtx-range", name)
    info = json.loads((assets / metadata.MANIFEST).read_text())["timeline"]
    assert (info["window"]["start_ns"], info["window"]["end_ns"]) == (lo, hi)
    assert info["kept"]["kernel"] == overlapping(path, lo, hi)["kernel"] == 24  # 23 cuDNN + the bias add
    # All ranges of a repeated name: from the first one's start to the last one's end.
    repeated = query(path, f"SELECT text, min(start), max(end), count(*) FROM {NVTX} WHERE eventType = 59 "
                           f"GROUP BY text HAVING count(*) > 1 ORDER BY text LIMIT 1")
    if repeated:
        text, lo, hi, _ = repeated[0]
        assets, _ = export(path, tmp_path, "--nvtx-range", text, "--nvtx-instances", "all", run="all")
        window = json.loads((assets / metadata.MANIFEST).read_text())["timeline"]["window"]
        assert (window["start_ns"], window["end_ns"]) == (lo, hi)


def test_unknown_nvtx_range_is_a_one_line_error_and_writes_nothing(tmp_path, samples_dir):
    path = sample(samples_dir, DLPROF)
    done = subprocess.run([sys.executable, "-m", "tb_hwprof", "export", str(path), "--logdir", str(tmp_path / "l"),
                           "--nvtx-range", "no such range"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("tb-hwprof: error: no NVTX range named 'no such range'")
    assert "(ranges: " in lines[-1] and "..." in lines[-1] and not (tmp_path / "l").exists()


def test_bad_time_range_is_refused():
    for text in ("5", "a:b", "10:5"):
        with pytest.raises(tb_hwprof.core.errors.HwprofError, match="--time-range"):
            tl.parse_time_range(text)
    assert tl.parse_time_range("5:") == (5, None) and tl.parse_time_range(":7") == (None, 7)


# ------------------------------------------------------------------ idle time
def test_idle_gaps_by_hand():
    islands = tl.merge([10, 15, 40, 60], [20, 30, 50, 60])
    assert [x.tolist() for x in islands] == [[10, 40, 60], [30, 50, 60]]
    gaps = tl.idle_gaps(islands, (0, 100))
    assert [x.tolist() for x in gaps] == [[0, 30, 50, 60], [10, 40, 60, 100]]
    assert tl.overlap_ns(gaps, (np.array([5, 45]), np.array([35, 70]))) == 5 + 5 + 10 + 10
    util = tl.utilisation(islands, (0, 100), bins=4)
    assert util["busy_ns"].tolist() == [15, 15, 0, 0] and util["busy_pct"].tolist() == [60.0, 60.0, 0.0, 0.0]
    assert tl.starts_inside([5, 15, 31, 60], (np.array([10, 60]), np.array([30, 70]))).tolist() == \
        [False, True, False, True]
    top = tl.longest(gaps, 2)
    assert [x.tolist() for x in top] == [[60, 0], [100, 10]]  # longest first, then the earlier of equals
    best, amount = tl.best_overlap((np.array([30, 50, 200]), np.array([40, 60, 210])),
                                   np.array([0, 30, 29, 52]), np.array([100, 40, 45, 60]))
    # The innermost of the equally covering ranges; the most covering one; nothing.
    assert best.tolist() == [1, 0, -1] and amount.tolist() == [10, 10, 0]


def test_longest_gaps_equal_a_full_sort_with_ties():
    """Only the gaps at least as long as the top-th are sorted: the same as sorting all of them, with
    many equal durations around the cut."""
    rng = np.random.default_rng(5)
    for n, top in ((1000, 20), (21, 20), (20, 20), (3, 20), (500, 1)):
        s = np.sort(rng.integers(0, 10**6, n))
        e = s + rng.integers(0, 4, n)  # durations 0-3: ties everywhere
        want = sorted(zip(s.tolist(), e.tolist()), key=lambda g: (-(g[1] - g[0]), g[0]))[:top]
        got = tl.longest((s, e), top)
        assert list(zip(got[0].tolist(), got[1].tolist())) == want


def test_overlap_equals_the_length_of_the_intersection_unit_by_unit():
    """union(a) ∩ union(b) measured from prefix sums equals counting covered instants one by one,
    with overlapping, touching, nested and empty sets, either one the larger."""
    rng = np.random.default_rng(3)
    for n_a, n_b in ((40, 3), (3, 40), (25, 25), (0, 5), (5, 0)):
        a_s, b_s = rng.integers(0, 300, n_a), rng.integers(0, 300, n_b)
        a, b = (a_s, a_s + rng.integers(0, 30, n_a)), (b_s, b_s + rng.integers(0, 30, n_b))
        covered = [np.zeros(340, bool), np.zeros(340, bool)]
        for cover, (s, e) in zip(covered, (a, b)):
            for lo, hi in zip(s.tolist(), e.tolist()):
                cover[lo:hi] = True
        assert tl.overlap_ns(a, b) == int((covered[0] & covered[1]).sum()) == tl.overlap_ns(b, a)


def test_idle_gaps_and_utilisation_against_a_sweep(nsys_sqlite):
    if KERNEL not in tables_of(nsys_sqlite):
        pytest.skip("no GPU work")
    profile = read_nsys_sqlite(nsys_sqlite)
    tables = tb_hwprof.analyse(profile).summaries
    gaps, (lo, hi) = sql_gaps(nsys_sqlite)
    table = tables["gpu_idle_gaps"]
    longest = sorted(gaps, key=lambda g: (-(g[1] - g[0]), g[0]))[:tl.TOP_GAPS]
    assert list(zip(table["start_ns"], table["end_ns"])) == longest
    attribution = tables["gpu_idle_attribution"].set_index("activity")
    idle = sum(e - s for s, e in gaps)
    assert attribution.loc["all idle time", "idle_overlap_ns"] == idle
    assert idle == tables["gpu_activity"].loc[0, "idle_ns"]
    util = tables["gpu_utilisation"]
    assert util["bin_start_ns"].iloc[0] == lo and util["bin_end_ns"].iloc[-1] == hi
    assert util["busy_ns"].sum() == tables["gpu_activity"].loc[0, "busy_ns"]


def test_gap_context_names_the_cpu_activity_by_hand(samples_dir):
    path = sample(samples_dir, DLPROF)
    gaps = tb_hwprof.analyse(read_nsys_sqlite(path)).summaries["gpu_idle_gaps"]
    for row in gaps.itertuples():
        overlaps = query(path, f"""
            SELECT s.value, min(r.end, ?) - max(r.start, ?) AS ov FROM {RUNTIME} r JOIN StringIds s ON s.id = r.nameId
            WHERE r.start < ? AND r.end > ? ORDER BY ov DESC, r.end - r.start LIMIT 1""",
                         row.end_ns, row.start_ns, row.end_ns, row.start_ns)
        if overlaps:
            assert re.sub(r"_v\d+$", "", overlaps[0][0]) == row.cuda_api and overlaps[0][1] == row.cuda_api_overlap_ns
        ranges = query(path, f"""SELECT text, min(end, ?) - max(start, ?) AS ov FROM {NVTX}
                                 WHERE start < ? AND end > ? AND eventType IN (59, 60)
                                 ORDER BY ov DESC, end - start LIMIT 1""",
                       row.end_ns, row.start_ns, row.end_ns, row.start_ns)
        if ranges:
            assert (row.nvtx_range, row.nvtx_overlap_ns) == ranges[0]
    # starts_in_sync: the gap began inside a synchronising call (checked by SQL over the call names).
    for row in gaps.itertuples():
        inside = query(path, f"""SELECT count(*) FROM {RUNTIME} r JOIN StringIds s ON s.id = r.nameId
                                 WHERE r.start <= ? AND r.end >= ? AND (s.value LIKE '%Synchronize%'
                                   OR s.value LIKE 'cudaMemcpy\\_v%' ESCAPE '\\')""",
                       row.start_ns, row.start_ns)[0][0]
        assert bool(row.starts_in_sync) == (inside > 0)


def test_launching_call_sorted_and_hashed_lookups_agree_with_a_dict():
    """The launch lookup searches calls already in key order and hashes the others: both give, per
    operation, the first call row holding its key (-1 for a negative or unmatched key)."""
    rng = np.random.default_rng(7)
    rising = np.sort(rng.choice(10_000, 3_000, replace=False)).astype(np.int64)
    rising[::50] = -1  # calls without a correlation id
    for call_key in (rising, rng.permutation(rising), np.repeat(rising[:500], 2)):
        first = {}
        for row, key in enumerate(call_key.tolist()):
            if key >= 0:
                first.setdefault(key, row)
        for op_key in (rng.integers(-2, 10_000, 5_000), rng.integers(-2, 10_000, 20)):  # many ops / few
            want = [first.get(k, -1) if k >= 0 else -1 for k in op_key.tolist()]
            assert launching_call(call_key, op_key).tolist() == want
