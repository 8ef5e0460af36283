"""The benchmarks' like-for-like baselines (issue 31) read what the export reads: the Nsight Compute
loop with SASS looks up the SASS of exactly the instructions the run's Source Counters show, and the
Nsight Systems fetch of the same columns fetches every row the reader builds the run from.  Were the
export to read more (more hotspots, another table), a baseline that stayed behind would flatter it."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import sample

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import bench_ncu_export  # noqa: E402
import bench_nsys_export  # noqa: E402

# In a process of its own: ncu_report carries state from one report to the next in a process.
LOOKUPS = textwrap.dedent("""
    import json, sys
    import ncu_report
    sys.path.insert(0, sys.argv[1])
    import bench_ncu_export as bench
    ctx, first, out, launch = ncu_report.load_report(sys.argv[2]), {}, [], 0
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            out += [[launch, address] for address in bench.hotspot_sass(ncu_report, action, action.metric_names(), first)]
            launch += 1
    print(json.dumps(out))
""")


@pytest.mark.parametrize("relative", ["ncu/armleth_t4_full_2024.2.1.ncu-rep", "ncu/lakshya_gtx1660s_full_2024.1.1.ncu-rep",
                                      "ncu/spyinfer_a10_105launches_2023.2.0.ncu-rep"])
def test_ncu_baseline_with_sass_looks_up_the_instructions_the_run_shows(relative, samples_dir, read_sample,
                                                                       ncu_report_module):
    path = sample(samples_dir, relative)
    done = subprocess.run([sys.executable, "-c", LOOKUPS, str(BENCHMARKS), str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    looked_up = sorted(map(tuple, json.loads(done.stdout)))
    table = read_sample(relative).summaries.get("ncu_source_hotspots")
    shown = [] if table is None else sorted(zip(table["launch_id"].astype(int), table["address"].astype(int)))
    assert looked_up == shown
    if "full" in relative:  # the full-set samples have source counters: the baseline's SASS work is real
        assert len(shown) >= 10


def test_nsys_fetch_of_the_same_columns_fetches_the_rows_the_run_is_built_from(nsys_sqlite, read_sample, samples_dir):
    """Every nsys export version we hold: the queries run, and fetch each kernel the run has, each
    CUDA API call its timeline has, each closed NVTX range its phases come from and each OS runtime
    call on its threads."""
    queries = bench_nsys_export.same_columns_sql(nsys_sqlite)
    profile = read_sample(nsys_sqlite.relative_to(samples_dir))
    conn = sqlite3.connect(f"file:{nsys_sqlite}?mode=ro", uri=True)
    try:
        rows = {table: len(conn.execute(query).fetchall()) for table, query in queries.items()}
    finally:
        conn.close()
    assert rows.get(bench_nsys_export.KERNEL, 0) == len(profile.kernels)
    from tb_hwprof.core.model import TIMELINE_CATEGORIES
    cats = profile.timeline.slices["cat"] if profile.timeline is not None else None
    if bench_nsys_export.RUNTIME in rows and cats is not None:
        assert rows[bench_nsys_export.RUNTIME] >= (cats == TIMELINE_CATEGORIES.index("cuda_api")).sum() > 0
    if bench_nsys_export.NVTX in rows and cats is not None:
        assert rows[bench_nsys_export.NVTX] == (cats == TIMELINE_CATEGORIES.index("nvtx")).sum()
    if "OSRT_API" in rows and cats is not None:
        assert rows["OSRT_API"] == (cats == TIMELINE_CATEGORIES.index("osrt")).sum() > 0
