"""A big Nsight Compute report read by short-lived worker processes, a stretch of launches each.

ncu_report keeps every launch it was asked for in memory until the process ends (~11 MB a launch
of the 136 MB H200 report, whatever is released or reloaded), and the code it disassembles for a
SASS lookup too (~30 MB a kernel).  Read in one process, a report costs ~5.5x its size in memory
and more with each launch.  Here each stretch of launches is read in a process of its own that
exits when done, so the memory held at once is that of the stretches being read (two at a time:
both cores work), not the report's: what a 1 GB report needs is bounded.  (It is also the only way
to read a second report right: see ncu_rep._READ_HERE.)

  1. launches: each worker reads its stretch as ncu_launches.read_launches does in one process,
     with the hotspots' SASS left for step 2;
  2. SASS: each kernel's code (mangled name) is disassembled once for the whole report, in the
     launch that reads it first (as in one process), by workers of SASS_KERNELS_PER_WORKER kernels
     at most, WORKERS at once.

A worker is `python -m tb_hwprof.readers.nvidia.ncu_workers`: its request comes pickled on stdin,
its answer goes pickled into the file the request names; it imports ncu_report before anything
else, and no pandas.
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

# Imported first in a worker: Nsight Compute's own ncu_report copy crashes once pyarrow is loaded.
from .ncu_launches import (DamagedLaunch, Launches, import_ncu_report, instruction_text, library_call,
                           library_stderr, read_launches)
from ...core.progress import tell  # noqa: E402  (after ncu_report's module, as above)

WORKERS = 2  # stretch workers at once: one per core of the machines this is measured on
STRETCH_BYTES = 36 << 20  # of report file per stretch worker at most: ~200 MB of ncu_report memory at ~5.5x
# A report over STRETCH_BYTES * this is read in this many stretches, bigger ones: every stretch
# pays a worker's start (the interpreter, ncu_report, the report's index: ~0.5 s for 1 GB).  The H200
# report x8 (1 GB, 464 launches) read alone: 28 stretches 21.4 s, 16 17.6 s, 8 15.9 s (the bare loop
# 14.8 s); exported in 8: 16.5-16.9 s vs the bare loop's 15.8-16.3 s (1.04x; 1.17x in 16), tree peak
# 1,667 MB (1,266 MB in 16; the bare loop 5,067 MB).  stretch_bytes_for keeps the memory bound.
STRETCHES_OF_A_BIG_REPORT = 8
IN_PROCESS_BELOW = 48 << 20  # smaller reports are read in the exporting process (no worker start-up)
# Kernels disassembled per SASS worker at most: ~40 MB a kernel (its launch and its code).  The
# kernels are shared out among at least WORKERS workers, run WORKERS at once: a worker's second is
# mostly its start, the report's index and each kernel's first launch and disassembly (~0.08 s a
# kernel), so one worker for all 15 kernels of the H200 report kept a core idle for ~1 s.  Two at
# once: export 3.9-4.0 -> 3.2-3.4 s (2.25x -> 1.81x the bare loop), tree peak 705 -> 854 MB (0.93x
# -> 1.12x; the stretches' workers are gone by then).
SASS_KERNELS_PER_WORKER = 16
WORKER_COMMAND = [sys.executable, "-m", __name__]


class WorkerFailed(Exception):
    """A worker process ended without an answer (str: how, in words)."""


def stretches(launches: int, file_bytes: int, stretch_bytes: Optional[int] = None) -> List[Tuple[int, Optional[int]]]:
    """[(first, last)] launch ids of each worker's stretch, launches shared evenly (a report's launches
    are about equally big); the last stretch is open (None): it also reads launches the library
    gives beyond those the container declares."""
    # The fewest stretches of at most stretch_bytes each, in a multiple of WORKERS so that every round
    # keeps each core busy: 32 MB stretches of the H200 report were 5, and ran in 3 rounds, the last
    # alone (1.73 s); 4 of 34 MB run in 2.
    wanted = -(-max(file_bytes, 1) // (stretch_bytes or STRETCH_BYTES))
    count = min(max(launches, 1), -(-wanted // WORKERS) * WORKERS)
    bounds = sorted({i * launches // count for i in range(count)})
    return [(first, bounds[i + 1] if i + 1 < len(bounds) else None) for i, first in enumerate(bounds)]


def stretch_bytes_for(file_bytes: int, available: Optional[int] = None) -> int:
    """Report bytes per stretch: STRETCH_BYTES, or a big report's share of STRETCHES_OF_A_BIG_REPORT;
    never so much that the WORKERS workers at once (~5.5x their stretch each) would need more than
    about a third of the memory available (available: bytes, else MemAvailable where the system
    tells it), nor less than STRETCH_BYTES."""
    wanted = max(STRETCH_BYTES, file_bytes // STRETCHES_OF_A_BIG_REPORT)
    available = available_memory() if available is None else available
    if available:
        wanted = min(wanted, max(STRETCH_BYTES, available // (16 * WORKERS)))
    return wanted


def available_memory() -> Optional[int]:
    """MemAvailable of /proc/meminfo in bytes (None elsewhere)."""
    try:
        with open("/proc/meminfo") as f:
            return next((int(line.split()[1]) << 10 for line in f if line.startswith("MemAvailable:")), None)
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------- the parent's side

def can_start() -> bool:
    """Whether this process can start a worker: an embedding without a Python executable (sys.executable
    empty) reads in its own process, as before the workers."""
    return bool(WORKER_COMMAND and WORKER_COMMAND[0])


def _python_path() -> str:
    """The exporting process' module path, so a worker imports the same tb_hwprof and ncu_report."""
    return os.pathsep.join(p for p in sys.path if p)


def run_worker(request: dict) -> dict:
    """Run one worker on `request` and give its answer; WorkerFailed when it died without one."""
    with tempfile.TemporaryDirectory(prefix="tb-hwprof-ncu-") as tmp:
        answer = Path(tmp) / "answer.pickle"
        env = {**os.environ, "PYTHONPATH": _python_path()}
        done = subprocess.run(WORKER_COMMAND, input=pickle.dumps({**request, "answer": str(answer)}),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        if done.returncode != 0 or not answer.exists():
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            how = f"signal {-done.returncode}" if done.returncode < 0 else f"exit status {done.returncode}"
            raise WorkerFailed(f"{how}{': ' + said[-1][:200] if said else ''}")
        with open(answer, "rb") as f:
            return pickle.load(f)


def read_in_workers(path: Path, name_ids: dict, declared: int, lines: List[str]) -> Tuple[Launches, int]:
    """(the report's Launches, the ranges the library read) read by worker processes; the library's
    stderr lines are added to `lines`.  WorkerFailed names the launches a dead worker had."""
    size = path.stat().st_size
    parts = stretches(declared, size, stretch_bytes_for(size))
    requests = [{"task": "launches", "path": str(path), "first": first, "last": last,
                 "name_ids": {k: v for k, v in name_ids.items() if k >= first and (last is None or k < last)}}
                for first, last in parts]
    tell(f"{path}: {declared} launches, read by {len(parts)} worker processes ({WORKERS} at once)")
    names = [f"launches {first}-{'end' if last is None else last - 1}" for first, last in parts]
    answers = _run_all(requests, names, said=lambda i: f"{path}: read {names[i]} ({i + 1}/{len(parts)})")
    for answer in answers:
        lines.extend(answer["lines"])
    launches = merge([a["launches"] for a in answers])
    ranges = answers[0]["ranges"]
    fill_sass(path, launches, lines)
    return launches, ranges


def _run_all(requests: List[dict], what: List[str], at_once: int = WORKERS,
             said: Callable[[int], str] = lambda i: "") -> List[dict]:
    """The workers' answers, in the requests' order; said(i): the progress line once answer i is in."""
    with ThreadPoolExecutor(at_once, thread_name_prefix="tb-hwprof-ncu") as pool:
        futures = [pool.submit(run_worker, r) for r in requests]
        answers = []
        for i, (future, name) in enumerate(zip(futures, what)):
            try:
                answers.append(future.result())
            except WorkerFailed as e:
                raise WorkerFailed(f"Nsight Compute's reader died reading {name} ({e})") from None
            line = said(i)
            if line:
                tell(line)
    return answers


def merge(parts: List[Launches]) -> Launches:
    """One Launches of the stretches' (in report order): a range's sections are those of the first
    stretch that read them."""
    whole = Launches(count=parts[0].count if parts else 0)
    keys = set()
    for part in parts:
        whole.rows += part.rows
        whole.raws += part.raws
        whole.rules += part.rules
        whole.peaks += part.peaks
        whole.positions += part.positions
        whole.hotspots += part.hotspots
        whole.damaged.update(part.damaged)
        whole.dropped.update(part.dropped)
        fresh = [r for r in part.sections if (r["section_id"], r["part"], r["metric"]) not in keys]
        whole.sections += fresh
        keys.update((r["section_id"], r["part"], r["metric"]) for r in fresh)
    return whole


def sass_plan(launches: Launches) -> Dict[str, dict]:
    """{code: {"at": (range id, action index) of its first launch with hotspots, "addresses": every
    hotspot address of that code in the report}}."""
    where = {row["launch_id"]: (row.get("mangled_name") or "", pos) for row, pos in zip(launches.rows, launches.positions)}
    plan: Dict[str, dict] = {}
    for hot in launches.hotspots:
        code, pos = where[hot["launch_id"]]
        entry = plan.setdefault(code, {"at": pos, "addresses": set()})
        entry["addresses"].add(hot["address"])
    return plan


def fill_sass(path: Path, launches: Launches, lines: List[str]) -> None:
    """Look up the hotspots' SASS and source lines, each kernel disassembled once, by workers of
    SASS_KERNELS_PER_WORKER kernels at most (what they hold grows with every kernel), WORKERS at once;
    a launch with an unreadable text at one of its hotspots is damaged (as in one process)."""
    plan = sass_plan(launches)
    if not plan:
        return
    codes = sorted(plan)
    count = max(-(-len(codes) // SASS_KERNELS_PER_WORKER), min(WORKERS, len(codes)))
    shares = [codes[i::count] for i in range(count)]
    requests = [{"task": "sass", "path": str(path), "codes": {c: plan[c] for c in share}} for share in shares]
    texts: Dict[Tuple[str, int], object] = {}
    tell(f"{path}: looking up the SASS of {sum(len(p['addresses']) for p in plan.values())} hottest instructions "
         f"of {len(codes)} kernels")
    for answer in _run_all(requests, [f"the SASS of {len(s)} kernels" for s in shares]):
        lines.extend(answer["lines"])
        texts.update(answer["texts"])
    code_of = {row["launch_id"]: row.get("mangled_name") or "" for row in launches.rows}
    damaged = {}
    for hot in launches.hotspots:
        text = texts[(code_of[hot["launch_id"]], hot["address"])]
        if isinstance(text, str):
            damaged.setdefault(hot["launch_id"], text)
        else:
            hot["sass"], hot["source_file"], hot["source_line"] = text
    if damaged:
        drop_launches(launches, damaged)


def drop_launches(launches: Launches, damaged: Dict[int, str]) -> None:
    """Move the `damaged` sound launches to launches.damaged."""
    keep = [i for i, row in enumerate(launches.rows) if row["launch_id"] not in damaged]
    for field in ("rows", "raws", "rules", "peaks", "positions"):
        values = getattr(launches, field)
        setattr(launches, field, [values[i] for i in keep])
    launches.hotspots = [h for h in launches.hotspots if h["launch_id"] not in damaged]
    for launch in damaged:
        launches.dropped.pop(launch, None)
    launches.damaged.update(damaged)


# ---------------------------------------------------------------- the worker's side

def _read_stretch(ctx, ncu_report, request: dict) -> dict:
    launches = read_launches(ctx, ncu_report, request["name_ids"], request["first"], request["last"], sass=False)
    return {"launches": launches, "ranges": ctx.num_ranges()}


def _sass_texts(ctx, request: dict) -> dict:
    """{(code, address): (SASS, source file, line), or why the text is damaged}."""
    texts = {}
    for code, entry in request["codes"].items():
        range_id, action_id = entry["at"]
        action = ctx.range_by_idx(range_id).action_by_idx(action_id)
        for address in sorted(entry["addresses"]):
            try:
                with library_call():
                    texts[(code, address)] = instruction_text(action, address)
            except DamagedLaunch as e:
                texts[(code, address)] = str(e)
    return {"texts": texts}


def work(request: dict) -> dict:
    """What a worker answers to `request` (the library's stderr lines under "lines")."""
    ncu_report = import_ncu_report()
    lines: List[str] = []
    with library_stderr(lines):
        ctx = ncu_report.load_report(request["path"])
        if ctx is None:
            answer = {"launches": Launches(), "ranges": 0, "texts": {}}
        elif request["task"] == "launches":
            answer = _read_stretch(ctx, ncu_report, request)
        else:
            answer = _sass_texts(ctx, request)
    return {**answer, "lines": lines}


def main() -> None:
    request = pickle.loads(sys.stdin.buffer.read())
    answer = work(request)
    with open(request["answer"], "wb") as f:
        pickle.dump(answer, f, protocol=pickle.HIGHEST_PROTOCOL)
    os._exit(0)  # ncu_report's many launches are not torn down one by one: the process ends here


if __name__ == "__main__":
    main()
