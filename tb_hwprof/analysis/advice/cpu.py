"""Advice for CPU results (a `cpu_hotspots` summary table, e.g. VTune hotspots / uarch-exploration).

Rules, each firing only on numbers the report holds and above a named share of CPU time (the text
states it):
  cpu.spin       Spin Time is a large share of all CPU time (threads busy-waiting)
  cpu.gil        CPU time in the Python interpreter's GIL hand-off functions
  cpu.memory     functions labelled memory- / back-end-bound by Intel TMA hold much CPU time
  cpu.frontend   functions labelled front-end-bound by Intel TMA hold much CPU time
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional

import pandas as pd

from ..context import CaptureContext
from ..cpu_hotspots import hotspot_table
from ...core.findings import Finding, finding

# Spin Time share of all CPU time above which busy-waiting is worth fixing. VTune calls too much
# spin "lost opportunity for productive work" without publishing a cut-off; a tenth of the CPU
# time is where the fix (fewer barriers, balanced work) pays more than it costs to look.
SPIN_SHARE_PCT = 10.0
# GIL hand-off share of CPU time. Sampling counts on-CPU time only, and a thread blocked on the GIL
# sleeps in a condition variable, so what shows up is the churn of take/drop around every switch
# interval (5 ms): already 5% of CPU time there means several threads fight for the interpreter.
GIL_SHARE_PCT = 5.0
# Share of CPU time in functions carrying one TMA label before the label is a run-level lever:
# below a tenth, fixing every such function cannot save more than 10%.
TMA_TIME_SHARE_PCT = 10.0
TOP = 3  # functions named in the evidence

# CPython's GIL hand-off: take_gil/drop_gil (ceval_gil.c) and the public calls that wrap them.
# PyEval_EvalFrame* is the interpreter running Python code, not waiting for the GIL: left out.
_GIL_FUNCTIONS = re.compile(r"^(?:take_gil|drop_gil|PyEval_(?:RestoreThread|SaveThread|AcquireThread|ReleaseThread|"
                            r"AcquireLock|ReleaseLock)|PyGILState_(?:Ensure|Release))$")
# The condition wait take_gil blocks in counts only when the report attributes it to libpython.
_COND_WAIT = re.compile(r"^_*pthread_cond_(?:timed)?wait")
_LIBPYTHON = re.compile(r"(?:^|/)(?:lib)?python\d", re.I)


def _finding(rule: str, severity: str, title: str, text: str, figures: Dict[str, tuple], remedy: str) -> Finding:
    return finding(f"cpu.{rule}", severity, title, text, remedy, figures)


def _top(rows: pd.DataFrame, column: str) -> List[dict]:
    """The TOP rows by `column`: name, module and that figure."""
    best = rows.sort_values(column, ascending=False, kind="stable").head(TOP)
    return [{"name": n, "module": m, column: float(v)} for n, m, v in zip(best["name"], best["module"], best[column])]


def _named(top: List[dict], column: str) -> str:
    return ", ".join(f"{t['name']} ({t['module'] or '?'}) {t[column]:.2f} s" for t in top)


def spin_advice(frame: pd.DataFrame, cpu_s: float) -> Optional[Finding]:
    spin_s = frame["spin_time_s"].sum(min_count=1)
    if pd.isna(spin_s) or not cpu_s or 100.0 * spin_s / cpu_s <= SPIN_SHARE_PCT:
        return None
    share = 100.0 * spin_s / cpu_s
    top = _top(frame[frame["spin_time_s"] > 0], "spin_time_s")
    openmp = any(re.search(r"iomp|gomp|omp", t["module"] or "", re.I) for t in top)
    hint = ("OpenMP threads wait at barriers: balance the work (schedule(dynamic) or guided), merge parallel "
            "regions to drop barriers, use nowait where safe, and if threads spin while serial code runs set "
            "OMP_WAIT_POLICY=passive (or KMP_BLOCKTIME=0)" if openmp else
            "threads busy-wait on locks or barriers: shorten critical sections, balance the work per thread, or "
            "let waiting threads block instead of spin")
    return _finding("spin", "high" if share > 2 * SPIN_SHARE_PCT else "medium",
                    f"{share:.0f}% of CPU time is spent spinning",
                    f"Spin Time {spin_s:.2f} s of {cpu_s:.2f} s CPU time ({share:.1f}%, threshold "
                    f"{SPIN_SHARE_PCT:.0f}%); most in {_named(top, 'spin_time_s')}",
                    {"spin_time_s": (float(spin_s), "s"), "cpu_time_s": (cpu_s, "s"), "spin_pct": (share, "%"),
                     "top": (top, "")}, hint)


def gil_rows(frame: pd.DataFrame) -> pd.Series:
    """Rows of the GIL hand-off: its functions anywhere, the condition wait only inside libpython."""
    names, modules = frame["name"].astype(str), frame["module"].astype(str)
    cond = names.str.match(_COND_WAIT) & modules.str.contains(_LIBPYTHON)
    return names.str.match(_GIL_FUNCTIONS) | cond


# Remedies for GIL churn: (PyTorch's, any Python program's).
GIL_REMEDIES = (
    "Python threads take turns on one interpreter: if the GPU idles meanwhile (see an nsys run of the same step), "
    "load and augment data in worker processes instead of threads (torch DataLoader(num_workers>0, "
    "pin_memory=True, persistent_workers=True)) and keep Python work off the training thread",
    "Python threads take turns on one interpreter: move CPU-heavy work to processes instead of threads "
    "(multiprocessing, concurrent.futures.ProcessPoolExecutor), or into native code that releases the GIL "
    "(NumPy vectorised operations, Cython nogil, ctypes calls); keep the hot thread's Python work small")


def gil_advice(frame: pd.DataFrame, cpu_s: float, context: CaptureContext) -> Optional[Finding]:
    rows = frame[gil_rows(frame)]
    gil_s = rows["self_time_s"].sum(min_count=1)
    if rows.empty or pd.isna(gil_s) or not cpu_s or 100.0 * gil_s / cpu_s <= GIL_SHARE_PCT:
        return None
    share = 100.0 * gil_s / cpu_s
    top = _top(rows, "self_time_s")
    return _finding("gil", "high", f"{share:.0f}% of CPU time is the Python GIL changing hands",
                    f"{gil_s:.2f} s of {cpu_s:.2f} s CPU time ({share:.1f}%, threshold {GIL_SHARE_PCT:.0f}%) in the "
                    f"interpreter's GIL functions: {_named(top, 'self_time_s')}",
                    {"gil_time_s": (float(gil_s), "s"), "cpu_time_s": (cpu_s, "s"), "gil_pct": (share, "%"),
                     "top": (top, "")},
                    GIL_REMEDIES[0] if context.pytorch else GIL_REMEDIES[1])


_TMA_HINTS = {
    "memory": (("memory-bound", "back-end-bound"),
               "functions wait on the memory hierarchy: block (tile) loops so the working set fits in L1/L2, walk "
               "arrays in storage order (structure of arrays), reuse data while it is cached, and keep threads' "
               "data on their own NUMA node"),
    "frontend": (("front-end-bound",),
                 "the pipeline starves for instructions: use profile-guided optimisation and link-time optimisation "
                 "to lay out hot code, cut code size (less inlining or unrolling in cold paths), avoid indirect "
                 "calls in hot loops, and try huge pages for code when iTLB misses dominate"),
}


def tma_advice(frame: pd.DataFrame, cpu_s: float, kind: str) -> Optional[Finding]:
    labels, hint = _TMA_HINTS[kind]
    rows = frame[frame["topdown_label"].isin(labels)]
    part = rows["self_time_s"].sum(min_count=1)
    if rows.empty or pd.isna(part) or not cpu_s or 100.0 * part / cpu_s <= TMA_TIME_SHARE_PCT:
        return None
    share = 100.0 * part / cpu_s
    top = _top(rows, "self_time_s")
    what = " or ".join(labels)
    return _finding(kind, "high" if share > 50 else "medium",
                    f"{share:.0f}% of CPU time is in {what} code (Intel TMA)",
                    f"{part:.2f} s of {cpu_s:.2f} s CPU time ({share:.1f}%, threshold {TMA_TIME_SHARE_PCT:.0f}%) in "
                    f"functions labelled {what}: {_named(top, 'self_time_s')}",
                    {"time_s": (float(part), "s"), "cpu_time_s": (cpu_s, "s"), "pct": (share, "%"), "top": (top, "")},
                    hint)


def advise(profile, summaries: Dict[str, pd.DataFrame], context: CaptureContext) -> List[Finding]:
    """CPU findings where `summaries` hold a `cpu_hotspots` table; [] otherwise."""
    table = summaries.get("cpu_hotspots")
    if table is None or table.empty:
        return []
    frame = hotspot_table(table)
    cpu = frame["self_time_s"].sum(min_count=1)
    cpu_s = None if pd.isna(cpu) else float(cpu)
    found = [spin_advice(frame, cpu_s), gil_advice(frame, cpu_s, context),
             tma_advice(frame, cpu_s, "memory"), tma_advice(frame, cpu_s, "frontend")]
    return [f for f in found if f]
