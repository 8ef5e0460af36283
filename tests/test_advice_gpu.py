"""GPU trace advice (tb_hwprof/analysis/advice/gpu_timeline.py) on real Nsight Systems exports: each
finding's numbers recomputed here independently (plain SQL, a sweep over rows fetched one by one)."""
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
from tb_hwprof.readers.nsys_sqlite import read_nsys_sqlite

from test_nsys_sqlite import DLPROF, query, sample, tables_of
from test_nsys_sqlite import pytest_generate_tests  # noqa: F401  (parametrises nsys_sqlite)
from test_nsys_timeline import sql_gaps

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
MEMCPY, RUNTIME, KERNEL = "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL"


def found(profile, rule):
    hits = [a for a in advice.advise(profile) if a["id"] == f"gpu.{rule}"]
    assert len(hits) <= 1
    return hits[0] if hits else None


def test_every_finding_has_the_fields_and_numbers(nsys_sqlite):
    for item in advice.advise(read_nsys_sqlite(nsys_sqlite)):
        assert set(item) == {"id", "severity", "title", "evidence", "values", "suggestion"}
        assert item["severity"] in advice.SEVERITIES and item["values"]
        assert any(ch.isdigit() for ch in item["evidence"])  # no finding without its numbers


def test_pageable_copies_fire_with_the_sql_byte_count(nsys_sqlite):
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
    if count == 0:
        assert item is None
        return
    assert item is not None and "pin_memory=True" in item["suggestion"]
    v = item["values"]
    assert (v["copies"], v["bytes"], v["copy_ns"]) == (count, nbytes, ns)
    assert f"{count} copies" in item["evidence"] and f"({nbytes} bytes)" in item["evidence"]


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
    v = item["values"]
    assert (v["gaps"], v["stalled_ns"], v["active_ns"]) == (len(stalled), sum(e - s for s, e in stalled), active)
    assert v["share_pct"] == pytest.approx(100 * sum(e - s for s, e in stalled) / active)
    assert v["share_pct"] >= gpu.SYNC_STALL_PCT and item["severity"] == "high"
    assert v["top"][0]["api"] == "cudaEventSynchronize" and v["top"][0]["calls"] == 15


def test_tiny_kernels_on_a_grown_dlprof_export(tmp_path, samples_dir):
    """DLProf's 46 cuDNN launches (median 5.7 us) copied to 2,000 launches (real rows, shifted in time)."""
    from bench_nsys_export import grow
    path = tmp_path / "grown.sqlite"
    grow(sample(samples_dir, DLPROF), path, kernels=2000, nvtx=0)
    durations = [d for (d,) in query(path, f"SELECT end - start FROM {KERNEL}")]
    assert len(durations) >= gpu.TINY_MIN_LAUNCHES
    item = found(read_nsys_sqlite(path), "tiny_kernels")
    v = item["values"]
    assert (v["launches"], v["median_ns"]) == (len(durations), statistics.median(durations))
    assert v["tiny_launches"] == sum(d < gpu.TINY_KERNEL_NS for d in durations)
    (calls, total), = query(path, f"""SELECT count(*), sum(r.end - r.start) FROM {RUNTIME} r JOIN StringIds s
                                      ON s.id = r.nameId WHERE s.value LIKE 'cudaLaunchKernel%'""")
    assert (v["launch_calls"], v["launch_api_ns"]) == (calls, total)
    assert "CUDA graph" in item["suggestion"]
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
    v = item["values"]
    assert (v["idle_ns"], v["span_ns"], v["loading_idle_ns"]) == (idle, hi - lo, overlap)
    assert v["loading_share_pct"] == pytest.approx(100 * overlap / idle) and v["loading_share_pct"] > 90
    assert "num_workers" in item["suggestion"] and "prefetch_factor" in item["suggestion"]


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
    assert item["values"]["memcpy_ns"] == union(copies) and item["values"]["busy_ns"] == union(ops)
    assert item["values"]["share_pct"] == pytest.approx(100 * union(copies) / union(ops))
    path = sample(samples_dir, "nsys/mordred_quadro6000_2021.2.1.sqlite")
    ops = [r for t in (KERNEL, MEMCPY, "CUPTI_ACTIVITY_KIND_MEMSET") for r in query(path, f"SELECT start, end FROM {t}")]
    active = max(e for _, e in ops) - min(s for s, _ in ops)
    item = found(read_nsys_sqlite(path), "idle")
    assert (item["values"]["busy_ns"], item["values"]["active_ns"]) == (union(ops), active)
    assert item["values"]["idle_pct"] == pytest.approx(100 * (active - union(ops)) / active)
    assert "cudaMemcpy" in item["evidence"]  # the CPU call during the longest gaps


def test_no_gpu_advice_without_a_trace(samples_dir):
    ncu = tb_hwprof.read(sample(samples_dir, "ncu/lakshya_gtx1660s_full_2024.1.1.ncu-rep"))
    assert gpu.advise(ncu) == []
    assert gpu.advise(tb_hwprof.read(sample(samples_dir, "nsys/cardiac_rtx3060l_nocuda_2021.3.3.sqlite"))) == []


def test_advice_is_written_into_the_manifest(tmp_path, samples_dir):
    path = sample(samples_dir, DLPROF)
    run = tb_hwprof.export(path, tmp_path, "d")
    manifest = json.loads((run / "plugins" / "tb_hwprof" / "profile.json").read_text())
    expected = json.loads(json.dumps(advice.advise(read_nsys_sqlite(path))))
    assert manifest["advice"] == expected and {a["id"] for a in expected} >= {"gpu.sync_stalls", "gpu.pageable_copies"}
