"""Independent looks into the real Nsight Systems exports (plain sqlite3, no tb_hwprof code), shared by
the nsys, timeline, advice, lanes and browser tests."""
import sqlite3

DLPROF = "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite"  # the only export with NVTX ranges
CARDIAC = "nsys/cardiac_rtx3060l_nocuda_2021.3.3.sqlite"  # no CUDA tables at all
KERNEL, MEMCPY, MEMSET = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME, NVTX = "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"
GPU_TABLES = {KERNEL: "kernel", MEMCPY: "memcpy", MEMSET: "memset"}


def query(path, sql, *args):
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def tables_of(path):
    return {n for (n,) in query(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}


def sql_gaps(path):
    """Idle gaps of device 0 over the capture span, by a plain sweep over rows fetched one by one."""
    names = tables_of(path)
    ops = sorted(r for t in GPU_TABLES if t in names for r in query(path, f"SELECT start, end FROM {t}"))
    spans = [query(path, f"SELECT min(start), max(end) FROM {t}")[0] for t in list(GPU_TABLES) + [RUNTIME]
             if t in names]
    lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
    gaps, reach = [], lo
    for start, end in ops:
        if start > reach:
            gaps.append((reach, start))
        reach = max(reach, end)
    if hi > reach:
        gaps.append((reach, hi))
    return gaps, (lo, hi)
