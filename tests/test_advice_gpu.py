"""GPU trace advice (tb_hwprof/analysis/advice/gpu_timeline.py) on real Nsight Systems exports: each
finding's numbers recomputed here independently (plain SQL, a sweep over rows fetched one by one),
each rule both ways (fires where material, silent under its named threshold), and remedies that
fit the program (PyTorch only where the capture shows it) and the API (CUDA / HIP)."""
import json
import shutil
import sqlite3
import statistics
import sys
from pathlib import Path

import pytest

import tb_hwprof
from tb_hwprof.analysis import advice
from tb_hwprof.analysis.advice import gpu_timeline as gpu
from tb_hwprof.analysis.context import capture_context
from tb_hwprof.core.findings import Finding
from tb_hwprof.readers.nvidia.nsys_sqlite import read_nsys_sqlite

from conftest import sample
from support_nsys import DLPROF, query, sql_gaps, tables_of

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
MEMCPY, RUNTIME, KERNEL = "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL"


def findings_of(profile):
    return tb_hwprof.analyse(profile).findings


def found(profile, rule):
    hits = [a for a in findings_of(profile) if a.id == f"gpu.{rule}"]
    assert len(hits) <= 1
    return hits[0] if hits else None


def shows_pytorch_by_sql(path) -> bool:
    """PyTorch's marks in an export, looked up in SQL: ATen op names or torch module paths in NVTX
    text or the string table, PyTorch's thread names."""
    names = tables_of(path)
    like = "(v LIKE '%aten::%' OR v LIKE '%/torch/%' OR v LIKE '%pt\\_main\\_thread%' ESCAPE '\\')"
    hits = query(path, f"SELECT count(*) FROM (SELECT value AS v FROM StringIds) WHERE {like}")[0][0]
    if "NVTX_EVENTS" in names:
        hits += query(path, f"SELECT count(*) FROM (SELECT text AS v FROM NVTX_EVENTS) WHERE {like}")[0][0]
    return hits > 0


def busy_ns_by_sql(path) -> int:
    names = tables_of(path)
    return union([r for t in (KERNEL, MEMCPY, "CUPTI_ACTIVITY_KIND_MEMSET") if t in names
                  for r in query(path, f"SELECT start, end FROM {t}")])


PYTORCH_WORDS = ("torch", "DataLoader", "pin_memory", ".item()")


def test_every_finding_has_the_fields_figures_and_threshold(nsys_sqlite):
    for item in findings_of(read_nsys_sqlite(nsys_sqlite)):
        assert isinstance(item, Finding) and item.id.startswith("gpu.")
        assert item.severity in advice.SEVERITIES and item.figures and item.title and item.remedy
        assert any(ch.isdigit() for ch in item.text) and "threshold" in item.text  # its numbers and its bar
        units = {name: f.unit for name, f in item.figures.items()}
        assert set(units.values()) <= {"ns", "%", "bytes", "count", ""}
        assert all(u == "ns" for n, u in units.items() if n.endswith("_ns"))
        assert all(u == "%" for n, u in units.items() if n.endswith("_pct"))


def test_remedies_fit_the_program(nsys_sqlite):
    """PyTorch's levers only where the export shows PyTorch (by SQL); CUDA calls otherwise."""
    profile = read_nsys_sqlite(nsys_sqlite)
    pytorch = shows_pytorch_by_sql(nsys_sqlite)
    assert capture_context(profile).pytorch == pytorch
    assert capture_context(profile).gpu_api == "CUDA"
    for item in findings_of(profile):
        if not pytorch:
            assert not any(w in item.remedy for w in PYTORCH_WORDS), (item.id, item.remedy)
            assert "hip" not in item.remedy.lower()


def test_the_pytorch_sample_is_seen_as_pytorch(samples_dir):
    path = sample(samples_dir, DLPROF)
    assert shows_pytorch_by_sql(path)  # DLProf's NVTX payloads name torch/nn/modules/*.py
    item = found(read_nsys_sqlite(path), "sync_stalls")
    assert ".item()" in item.remedy and "torch.cuda.synchronize()" in item.remedy


def test_pageable_copies_fire_only_when_material(nsys_sqlite):
    """Fires with the SQL byte count where pageable host-to-device copies take at least
    PAGEABLE_SHARE_PCT of GPU busy time (dlprof 7.2%, annikola 4.0%), silent under it (mordred's 45
    copies: 0.5%) and where there are none."""
    names = tables_of(nsys_sqlite)
    profile = read_nsys_sqlite(nsys_sqlite)
    item = found(profile, "pageable_copies")
    if MEMCPY not in names:
        assert item is None
        return
    pageable = 0 if "ENUM_CUDA_MEM_KIND" not in names else \
        query(nsys_sqlite, "SELECT id FROM ENUM_CUDA_MEM_KIND WHERE label = 'Pageable'")[0][0]
    htod = 1 if "ENUM_CUDA_MEMCPY_OPER" not in names else \
        query(nsys_sqlite, "SELECT id FROM ENUM_CUDA_MEMCPY_OPER WHERE label = 'Host-to-Device'")[0][0]
    (count, nbytes, ns), = query(nsys_sqlite, f"""SELECT count(*), coalesce(sum(bytes), 0), coalesce(sum(end - start), 0)
                                                 FROM {MEMCPY} WHERE copyKind = ? AND srcKind = ?""", htod, pageable)
    busy = busy_ns_by_sql(nsys_sqlite)
    if count == 0 or 100 * ns / busy < gpu.PAGEABLE_SHARE_PCT:
        assert item is None
        return
    assert (item.figure("copies"), item.figure("bytes"), item.figure("copy_ns")) == (count, nbytes, ns)
    assert item.figure("busy_ns") == busy and item.figure("share_of_busy_pct") == pytest.approx(100 * ns / busy)
    assert item.figures["bytes"].unit == "bytes" and item.figures["copies"].unit == "count"
    assert f"{count} {'copy' if count == 1 else 'copies'} moved" in item.text and f"({nbytes} bytes)" in item.text
    assert f"threshold {gpu.PAGEABLE_SHARE_PCT:.0f}%" in item.text
    if shows_pytorch_by_sql(nsys_sqlite):
        assert "pin_memory=True" in item.remedy
    else:
        assert "cudaMallocHost" in item.remedy and "cudaMemcpyAsync" in item.remedy and "pin_memory" not in item.remedy


def test_pageable_copies_under_the_threshold_are_silent(samples_dir):
    """mordred's 45 pageable host-to-device copies run 45.7 us of 8.68 ms GPU busy time: not material."""
    path = sample(samples_dir, "nsys/mordred_quadro6000_2021.2.1.sqlite")
    (ns,), = query(path, f"SELECT sum(end - start) FROM {MEMCPY} WHERE copyKind = 1 AND srcKind = 0")
    assert 0 < 100 * ns / busy_ns_by_sql(path) < gpu.PAGEABLE_SHARE_PCT
    assert found(read_nsys_sqlite(path), "pageable_copies") is None


def test_amd_captures_get_hip_remedies(samples_dir):
    """The remedy templates in a rocprof capture's API: hipHostMalloc, not cudaMallocHost."""
    profile = tb_hwprof.read(sample(samples_dir, "rocprof/v3_rocpd_mi300x_ck_bmm_results.db"))
    context = capture_context(profile)
    assert (context.gpu_api, context.pytorch) == ("HIP", False)
    for rule in gpu.REMEDIES:
        text = gpu.remedy(rule, context)
        assert "cuda" not in text.lower() and not any(w in text for w in PYTORCH_WORDS)
    assert "hipHostMalloc" in gpu.remedy("pageable_copies", context)
    assert "HIP graphs" in gpu.remedy("tiny_kernels", context)


def test_sync_stalls_on_the_dlprof_export_by_hand(samples_dir):
    path = sample(samples_dir, DLPROF)
    gaps, _ = sql_gaps(path)
    ops = query(path, "SELECT min(s), max(e) FROM (SELECT min(start) s, max(end) e FROM CUPTI_ACTIVITY_KIND_KERNEL "
                      "UNION ALL SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_MEMCPY "
                      "UNION ALL SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_MEMSET)")[0]
    syncs = query(path, f"""SELECT r.start, r.end FROM {RUNTIME} r JOIN StringIds s ON s.id = r.nameId
                            WHERE s.value LIKE '%Synchronize%' OR s.value LIKE 'cudaMemcpy\\_v%' ESCAPE '\\'""")
    interior = [(s, e) for s, e in gaps if s >= ops[0] and e <= ops[1]]
    stalled = [(s, e) for s, e in interior if any(a <= s <= b for a, b in syncs)]
    active = ops[1] - ops[0]
    item = found(read_nsys_sqlite(path), "sync_stalls")
    assert (item.figure("gaps"), item.figure("stalled_ns"), item.figure("active_ns")) == (
        len(stalled), sum(e - s for s, e in stalled), active)
    assert item.figure("share_pct") == pytest.approx(100 * sum(e - s for s, e in stalled) / active)
    assert item.figure("share_pct") >= gpu.SYNC_STALL_PCT and item.severity == "high"
    assert item.figure("top")[0]["api"] == "cudaEventSynchronize" and item.figure("top")[0]["calls"] == 15


def test_sync_stalls_silent_where_the_stalls_are_not_material(samples_dir):
    """annikola's GPU runs two copies and a sort with no idle gap starting in a synchronising call
    over SYNC_STALL_PCT of its active window (recomputed by the sweep)."""
    path = sample(samples_dir, "nsys/annikola_gtx1050_2024.5.1.sqlite")
    gaps, _ = sql_gaps(path)
    ops = [r for t in (KERNEL, MEMCPY) for r in query(path, f"SELECT start, end FROM {t}")]
    lo, hi = min(s for s, _ in ops), max(e for _, e in ops)
    syncs = query(path, f"""SELECT r.start, r.end FROM {RUNTIME} r JOIN StringIds s ON s.id = r.nameId
                            WHERE s.value LIKE '%Synchronize%' OR s.value LIKE 'cudaMemcpy\\_v%' ESCAPE '\\'""")
    stalled = sum(e - s for s, e in gaps if s >= lo and e <= hi and any(a <= s <= b for a, b in syncs))
    assert 100 * stalled / (hi - lo) < gpu.SYNC_STALL_PCT
    assert found(read_nsys_sqlite(path), "sync_stalls") is None


def test_tiny_kernels_on_a_grown_dlprof_export(tmp_path, samples_dir):
    """DLProf's 46 cuDNN launches (median 5.7 us) copied to 2,000 launches (real rows, shifted in time)."""
    from bench_nsys_export import grow
    path = tmp_path / "grown.sqlite"
    grow(sample(samples_dir, DLPROF), path, kernels=2000, nvtx=0)
    durations = [d for (d,) in query(path, f"SELECT end - start FROM {KERNEL}")]
    assert len(durations) >= gpu.TINY_MIN_LAUNCHES
    item = found(read_nsys_sqlite(path), "tiny_kernels")
    tiny = [d for d in durations if d < gpu.TINY_KERNEL_NS]
    assert (item.figure("launches"), item.figure("median_ns")) == (len(durations), statistics.median(durations))
    assert item.figure("tiny_launches") == len(tiny)
    assert item.figure("tiny_share_pct") == pytest.approx(100 * sum(tiny) / sum(durations))
    assert item.figure("tiny_share_pct") >= gpu.TINY_TIME_SHARE_PCT
    (calls, total), = query(path, f"""SELECT count(*), sum(r.end - r.start) FROM {RUNTIME} r JOIN StringIds s
                                      ON s.id = r.nameId WHERE s.value LIKE 'cudaLaunchKernel%'""")
    assert (item.figure("launch_calls"), item.figure("launch_api_ns")) == (calls, total)
    assert "CUDA graph" in item.remedy and "torch.compile" in item.remedy  # DLProf's capture is PyTorch
    # The real 46 launches alone are too few to matter.
    assert found(read_nsys_sqlite(sample(samples_dir, DLPROF)), "tiny_kernels") is None


def test_data_loading_fires_on_a_loader_range_over_real_idle_time(tmp_path, samples_dir):
    """A DataLoader NVTX range inserted on the main thread over the capture's longest idle gap."""
    src = sample(samples_dir, DLPROF)
    assert found(read_nsys_sqlite(src), "data_loading") is None  # no loader ranges in the capture itself
    path = tmp_path / "loader.sqlite"
    shutil.copyfile(src, path)
    gaps, (lo, hi) = sql_gaps(path)
    start, end = max(gaps, key=lambda g: g[1] - g[0])
    (tid,), = query(path, f"SELECT globalTid FROM {RUNTIME} LIMIT 1")
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES (?, ?, 59, ?, ?, 0)",
                 (start - 1000, end - 500, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", tid))
    conn.commit()
    conn.close()
    idle = sum(e - s for s, e in gaps)
    overlap = sum(max(0, min(e, end - 500) - max(s, start - 1000)) for s, e in gaps)
    item = found(read_nsys_sqlite(path), "data_loading")
    assert (item.figure("idle_ns"), item.figure("span_ns"), item.figure("loading_idle_ns")) == (idle, hi - lo, overlap)
    share = item.figure("loading_share_pct")
    assert share == pytest.approx(100 * overlap / idle) and share > 90
    assert "num_workers" in item.remedy and "prefetch_factor" in item.remedy


def union(intervals):
    total, reach = 0, None
    for s, e in sorted(intervals):
        if reach is None or s > reach:
            total, reach = total + e - s, e
        elif e > reach:
            total, reach = total + e - reach, e
    return total


def test_copy_share_and_idle_by_a_sweep(samples_dir):
    path = sample(samples_dir, "nsys/gpu4_t4_2022.4.2.sqlite")
    copies = query(path, f"SELECT start, end FROM {MEMCPY}")
    ops = copies + query(path, f"SELECT start, end FROM {KERNEL}")
    item = found(read_nsys_sqlite(path), "copy_share")
    assert item.figure("memcpy_ns") == union(copies) and item.figure("busy_ns") == union(ops)
    assert item.figure("share_pct") == pytest.approx(100 * union(copies) / union(ops))
    assert "cudaMemcpyAsync" in item.remedy and "tensor" not in item.remedy  # plain CUDA program
    path = sample(samples_dir, "nsys/mordred_quadro6000_2021.2.1.sqlite")
    ops = [r for t in (KERNEL, MEMCPY, "CUPTI_ACTIVITY_KIND_MEMSET") for r in query(path, f"SELECT start, end FROM {t}")]
    active = max(e for _, e in ops) - min(s for s, _ in ops)
    item = found(read_nsys_sqlite(path), "idle")
    assert (item.figure("busy_ns"), item.figure("active_ns")) == (union(ops), active)
    assert item.figure("idle_pct") == pytest.approx(100 * (active - union(ops)) / active)
    assert "cudaMemcpy" in item.text  # the CPU call during the longest gaps


def test_copy_share_and_idle_silent_under_their_thresholds(samples_dir):
    """DLProf's copies are 7% of its GPU busy time (under MEMCPY_SHARE_PCT); gpu4's GPU idles under
    ACTIVE_IDLE_PCT of its active window: both recomputed by the sweep."""
    path = sample(samples_dir, DLPROF)
    copies = query(path, f"SELECT start, end FROM {MEMCPY}")
    ops = copies + query(path, f"SELECT start, end FROM {KERNEL}")
    assert 100 * union(copies) / union(ops) < gpu.MEMCPY_SHARE_PCT
    assert found(read_nsys_sqlite(path), "copy_share") is None
    path = sample(samples_dir, "nsys/gpu4_t4_2022.4.2.sqlite")
    ops = query(path, f"SELECT start, end FROM {MEMCPY}") + query(path, f"SELECT start, end FROM {KERNEL}")
    active = max(e for _, e in ops) - min(s for s, _ in ops)
    assert 100 * (active - union(ops)) / active < gpu.ACTIVE_IDLE_PCT
    assert found(read_nsys_sqlite(path), "idle") is None


def test_no_gpu_advice_without_a_trace(samples_dir):
    ncu = tb_hwprof.read(sample(samples_dir, "ncu/lakshya_gtx1660s_full_2024.1.1.ncu-rep"))
    assert [f for f in findings_of(ncu) if f.id.startswith("gpu.")] == []
    nocuda = tb_hwprof.read(sample(samples_dir, "nsys/cardiac_rtx3060l_nocuda_2021.3.3.sqlite"))
    assert findings_of(nocuda) == []


def test_advice_is_written_into_the_manifest(tmp_path, samples_dir):
    path = sample(samples_dir, DLPROF)
    run = tb_hwprof.export(path, tmp_path, "d")
    manifest = json.loads((run / "plugins" / "tb_hwprof" / "profile.json").read_text())
    expected = json.loads(json.dumps([f.to_dict() for f in findings_of(read_nsys_sqlite(path))]))
    assert manifest["advice"] == expected and {a["id"] for a in expected} >= {"gpu.sync_stalls", "gpu.pageable_copies"}
    assert set(manifest["advice"][0]) == {"id", "severity", "title", "text", "remedy", "figures"}


def test_api_call_totals_of_hip_traces_by_csv(samples_dir):
    """The launch-cost and sync-call figures read HIP's call totals as they read CUDA's: rocprof's
    HIP API trace (calls counted and timed here from the CSV rows) and rocpd's api_stats."""
    import csv
    path = sample(samples_dir, "rocprof/v2_hip_api_trace_hiptrace.csv")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    calls, total = {}, {}
    for r in rows:
        name = r["Function"]
        calls[name] = calls.get(name, 0) + 1
        total[name] = total.get(name, 0) + int(r["End_Timestamp"]) - int(r["Start_Timestamp"])
    api = gpu.api_calls(tb_hwprof.read(path).summaries)
    assert dict(zip(api["api"], api["num_calls"])) == calls
    assert dict(zip(api["api"], api["total_ns"])) == total
    assert set(api["api"][api["api"].str.match(gpu.SYNC_API)]) == {"hipStreamSynchronize", "hipDeviceSynchronize"}
    db = sample(samples_dir, "rocprof/v3_rocpd_mi300x_ck_bmm_results.db")
    rocpd = gpu.api_calls(tb_hwprof.read(db).summaries)
    launch = rocpd[rocpd["api"].str.match(gpu.LAUNCH_API)]
    assert [(a, c, t) for a, c, t in zip(launch["api"], launch["num_calls"], launch["total_ns"])] == query(
        db, "SELECT name, count(*), sum(end - start) FROM regions WHERE name LIKE 'hip%Launch%' GROUP BY name")


@pytest.mark.parametrize("name", ["rocprof/v3_rocpd_mi300x_ck_bmm_results.db", "rocprof/v1_mi300a_vecadd/results.json"])
def test_amd_trace_findings_speak_hip(samples_dir, name):
    """The AMD traces' findings (gpu.idle on the rocpd capture, gpu.copy_share on the MI300A one)
    name HIP calls, never CUDA's or PyTorch's."""
    findings = findings_of(tb_hwprof.read(sample(samples_dir, name)))
    assert findings
    for item in findings:
        assert "cuda" not in item.remedy.lower() and not any(w in item.remedy for w in PYTORCH_WORDS)
        assert "HIP" in item.remedy or "hip" in item.remedy
def test_times_in_findings_read_in_ms_and_from_a_second_in_s():
    """Every domain's texts share one time format: 3 significant digits; a time of a second or more in
    s (the kernels' and GPU timeline's own helper once wrote 1,234 ms as '1.23e+03 ms')."""
    from tb_hwprof.core.findings import time_text
    assert [time_text(ns) for ns in (5e6, 999.4e6, 1_234_000_000, 61e9)] == ["5 ms", "999 ms", "1.23 s", "61 s"]
