"""GPU busy / idle time, idle gaps and what the host did then (tb_hwprof/analysis/gpu_trace.py), computed
from the Timeline for every tracer: each AMD trace sample against its RAW file (csv / json / sqlite3
modules, a plain sweep), and the Nsight Systems OS runtime columns against SQL on OSRT_API."""
import csv
import json
import sqlite3

import pytest

import tb_hwprof
from tb_hwprof.analysis import timeline as tl
from tb_hwprof.core.model import TIMELINE_CATEGORIES

from conftest import sample
from support_nsys import GPU_TABLES, RUNTIME, query, tables_of


def _sqlite_rows(path, sql):
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return conn.execute(sql).fetchall()


def _csv_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# Each raw file as (GPU operations [(start, end)], host API calls [(start, end, name)]).
def v1_csv(path):
    return [(int(r["BeginNs"]), int(r["EndNs"])) for r in _csv_rows(path)], []


def v3_kernel_trace(path):
    return [(int(r["Start_Timestamp"]), int(r["End_Timestamp"])) for r in _csv_rows(path)], []


def v1_json(path):
    doc = json.loads(path.read_text())
    lanes = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e.get("ph") == "M"}
    ops, calls = [], []
    for e in doc["traceEvents"]:
        if e.get("ph") == "X":
            lane, span = lanes[int(e["pid"])], (int(e["args"]["BeginNs"]), int(e["args"]["EndNs"]))
            (calls.append((*span, e["name"])) if lane.startswith("CPU") else ops.append(span))
    return ops, calls


def v1_db(path):
    ops = _sqlite_rows(path, "SELECT BeginNs, EndNs FROM OPS UNION ALL SELECT BeginNs, EndNs FROM COPY")
    return ops, _sqlite_rows(path, "SELECT BeginNs, EndNs, Name FROM HIP")


def rocpd(path):
    ops = _sqlite_rows(path, 'SELECT start, "end" FROM kernels UNION ALL SELECT start, "end" FROM memory_copies')
    return ops, _sqlite_rows(path, 'SELECT start, "end", name FROM regions')


AMD_TRACES = {
    "rocprof/v1_mi250x_laplacian/results.csv": v1_csv,
    "rocprof/v1_old_rome_omp/results.csv": v1_csv,
    "rocprof/v1_rdna_wave32_llm170_EXCERPT/results.head10.csv": v1_csv,
    "rocprof/v3_docs_kernel_trace_newer.csv": v3_kernel_trace,
    "rocprof/v3_docs_kernel_trace_older.csv": v3_kernel_trace,
    "rocprof/v1_mi300a_vecadd/results.json": v1_json,
    "rocprof/v1_old_rome_omp/results.json": v1_json,
    "rocprof/v1_mi300a_vecadd/results.db": v1_db,
    "rocprof/v3_rocpd_mi300x_ck_bmm_results.db": rocpd,
}


def swept(ops, calls):
    """(span, busy ns, gaps) of one device: the span from the first to the last operation or call, the
    gaps by walking the operations in start order (one that ends before it starts is no interval: the
    RDNA excerpt holds one)."""
    ops = [(s, e) for s, e in ops if e >= s]
    lo = min([s for s, _ in ops] + [s for s, _, _ in calls])
    hi = max([e for _, e in ops] + [e for _, e, _ in calls])
    busy, gaps, reach = 0, [], lo
    for start, end in sorted(ops):
        if start > reach:
            gaps.append((reach, start))
        busy += max(end, reach) - max(start, reach)
        reach = max(reach, end)
    if hi > reach:
        gaps.append((reach, hi))
    return (lo, hi), busy, gaps


def covering_call(gap, calls):
    """(name, overlap) of the call covering most of the gap, the shortest of equals; ("", 0) for none."""
    best = ("", 0, 0)
    for start, end, name in calls:
        overlap = min(end, gap[1]) - max(start, gap[0])
        if start < gap[1] and end > gap[0] and (best[0] == "" or (overlap, start - end) > (best[1], best[2])):
            best = (name, overlap, start - end)
    return best[:2]


@pytest.mark.parametrize("rel", sorted(AMD_TRACES))
def test_amd_busy_idle_and_gaps_against_the_raw_file(rel, samples_dir):
    path = sample(samples_dir, rel)
    ops, calls = AMD_TRACES[rel](path)
    (lo, hi), busy, gaps = swept(ops, calls)
    profile = tb_hwprof.read(path)
    tables = tb_hwprof.analyse(profile).summaries
    activity = tables["gpu_activity"]
    assert len(activity) == 1  # every AMD trace sample ran on one GPU
    act = activity.iloc[0]
    assert (act["span_start_ns"], act["span_end_ns"]) == (lo, hi)
    assert (act["busy_ns"], act["idle_ns"]) == (busy, hi - lo - busy)
    assert tables["gpu_utilisation"]["busy_ns"].sum() == busy
    table = tables["gpu_idle_gaps"]
    longest = sorted(gaps, key=lambda g: (-(g[1] - g[0]), g[0]))[:tl.TOP_GAPS]
    assert list(zip(table["start_ns"], table["end_ns"])) == longest
    # The HIP / HSA call active during each gap: the API tables are host tracks of the Timeline.
    assert [covering_call(g, calls) for g in longest] == list(zip(table["cuda_api"], table["cuda_api_overlap_ns"]))
    attribution = tables["gpu_idle_attribution"].set_index("activity")
    assert attribution.loc["all idle time", "idle_overlap_ns"] == sum(e - s for s, e in gaps)
    assert attribution.loc["HIP synchronisation calls", "intervals"] == sum(
        bool(tl.SYNC_API.match(name)) for _, _, name in calls)
    # A gap begun in a synchronising call, between the first and the last operation: the table's flag
    # and the attribution's count are one rule.
    first, last = min(s for s, _ in ops), max(e for _, e in ops)
    syncs = [(s, e) for s, e, name in calls if tl.SYNC_API.match(name)]

    def in_sync(gap):
        return gap[0] >= first and gap[1] <= last and any(s <= gap[0] <= e for s, e in syncs)
    assert table["starts_in_sync"].tolist() == [in_sync(g) for g in longest]
    assert attribution.loc["gaps starting in a synchronisation call", "intervals"] == sum(map(in_sync, gaps))


def test_amd_gaps_name_real_calls(samples_dir):
    """The vecadd capture (hipMemcpy between kernels) names its blocking copies in the gaps."""
    table = tb_hwprof.analyse(tb_hwprof.read(sample(samples_dir, "rocprof/v1_mi300a_vecadd/results.json"))) \
        .summaries["gpu_idle_gaps"]
    assert "hipMemcpy" in set(table["cuda_api"]) and table["starts_in_sync"].any()


def test_a_gap_flagged_in_sync_is_one_the_attribution_counts(samples_dir):
    """ViT on an H100 (TraceLens' trace): its longest gap precedes the first GPU operation, in the
    profiler's opening cudaDeviceSynchronize.  The gap table called it "began in a sync" while the
    attribution, which counts only gaps between the first and last operation, counted none."""
    tables = tb_hwprof.analyse(tb_hwprof.read(sample(samples_dir, "torch/tracelens_h100_falconsai_vit.json.gz"))).summaries
    gaps, activity = tables["gpu_idle_gaps"], tables["gpu_activity"].iloc[0]
    attribution = tables["gpu_idle_attribution"].set_index("activity")
    leading = gaps[gaps["start_ns"] < activity["first_op_ns"]]
    assert len(leading) == 1 and leading.iloc[0]["rank"] == 1  # the longest gap: before any GPU work
    assert not gaps["starts_in_sync"].any()
    assert attribution.loc["gaps starting in a synchronisation call", "intervals"] == 0


def test_api_trace_without_gpu_operations_has_no_busy_table(samples_dir):
    profile = tb_hwprof.read(sample(samples_dir, "rocprof/v2_hip_api_trace_hiptrace.csv"))
    assert profile.timeline is not None and not set(tb_hwprof.analyse(profile).summaries)


# ------------------------------------------------------------------ Nsight Systems OS runtime calls
OSRT_EXPORTS = ["nsys/annikola_gtx1050_2024.5.1.sqlite", "nsys/gpu4_t4_2022.4.2.sqlite",
                "nsys/mordred_quadro6000_2021.2.1.sqlite", "nsys/testcuda_rtx4060ti_2026.1.1.sqlite"]
OS_READS = ("read", "pread", "pread64", "readv", "preadv", "preadv2", "fread", "fread_unlocked", "recv", "recvfrom",
            "recvmsg")


@pytest.mark.parametrize("rel", OSRT_EXPORTS)
def test_osrt_call_per_gap_and_reads_by_sql(rel, samples_dir):
    path = sample(samples_dir, rel)
    assert "OSRT_API" in tables_of(path)
    profile = tb_hwprof.read(path)
    tables = tb_hwprof.analyse(profile).summaries
    for gap in tables["gpu_idle_gaps"].itertuples():
        rows = query(path, f"""
            SELECT s.value, min(o.end, ?) - max(o.start, ?) AS ov FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId
            WHERE o.start < ? AND o.end > ? AND o.globalTid IN (SELECT DISTINCT globalTid FROM {RUNTIME})
            ORDER BY ov DESC, o.end - o.start LIMIT 1""", gap.end_ns, gap.start_ns, gap.end_ns, gap.start_ns)
        assert (gap.osrt_call, gap.osrt_overlap_ns) == (rows[0] if rows else ("", 0))
    reads = query(path, f"""SELECT count(*) FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId
                            WHERE o.end IS NOT NULL AND s.value IN ({','.join('?' * len(OS_READS))})""", *OS_READS)
    attribution = tables["gpu_idle_attribution"].set_index("activity")
    assert attribution.loc["file/socket reads (OS runtime)", "intervals"] == reads[0][0]
    # The calls are Timeline slices too (the Timeline view and the trace file show them).
    osrt = profile.timeline.slices["cat"] == TIMELINE_CATEGORIES.index("osrt")
    assert osrt.sum() == query(path, "SELECT count(*) FROM OSRT_API WHERE end IS NOT NULL")[0][0]


def test_sync_pattern_covers_cuda_and_hip():
    for name in ("cudaDeviceSynchronize", "cuStreamSynchronize", "cudaMemcpy", "hipMemcpy", "hipMemcpyDtoH",
                 "hipDeviceSynchronize", "hipEventSynchronize"):
        assert tl.SYNC_API.match(name), name
    for name in ("cudaMemcpyAsync", "hipMemcpyAsync", "hipLaunchKernel", "hipMemset"):
        assert not tl.SYNC_API.match(name), name


def _union(spans) -> int:
    """Length of the union of (start, end) spans: a plain sweep in Python."""
    total, reach_start, reach_end = 0, None, None
    for s, e in sorted(spans):
        if reach_end is None or s > reach_end:
            total += max(reach_end - reach_start, 0) if reach_end is not None else 0
            reach_start, reach_end = s, e
        else:
            reach_end = max(reach_end, e)
    return total + (max(reach_end - reach_start, 0) if reach_end is not None else 0)


@pytest.mark.parametrize("name", ["nsys/mordred_quadro6000_2021.2.1.sqlite", "nsys/gpu4_t4_2022.4.2.sqlite",
                                  "nsys/annikola_gtx1050_2024.5.1.sqlite", "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite"])
def test_busy_time_per_kind_is_the_union_of_its_rows(samples_dir, name):
    """gpu_activity's kernel / memcpy / memset time per device: the union of that table's rows in SQL."""
    path = sample(samples_dir, name)
    activity = tb_hwprof.analyse(tb_hwprof.read(path)).summaries["gpu_activity"]
    present = tables_of(path)
    checked = 0
    for table, kind in GPU_TABLES.items():
        rows = query(path, f"SELECT deviceId, start, end FROM {table} WHERE end >= start") if table in present else []
        for _, row in activity.iterrows():
            want = _union([(s, e) for d, s, e in rows if d == row["device"]])
            assert row[f"{kind}_ns"] == want, (table, row["device"])
            checked += want > 0
    assert checked >= 2  # kernels and at least one other kind, somewhere
