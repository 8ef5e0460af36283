"""A 16-rank job export on a local Dask cluster vs the ranks exported one by one (issue 14).

A real rank file (default: HTA's hta_sampled_2rank_rank0, 1,154 kernels in 2 steps) is grown into
RANKS rank files of ~KERNELS kernels each by writing its events again and again, each copy shifted
in time and ids as benchmarks/bench_torch_export.py does (its helpers), every rank then shifted by
a little clock skew and by RANK_ID_STEP in ids, its distributedInfo naming its rank of world size
RANKS.  One rank is made a straggler: every kernel of one name (default: the heaviest compute
kernel of the source) is stretched by DELTA, and everything after it in the trace moved later by
as much, as if that kernel ran slower (synthetic for scale only; every event is a real event moved).

Then, each in a child process of its own, its process tree's memory polled (children.py TreeWatch):
  single:   `tb-hwprof export rank_i.json` for each rank (--single N: the first N and the straggler,
            the sum scaled to all ranks),
  job:      `tb-hwprof export rank_*.json --ranks --run job` on a local cluster of --workers
            single-threaded worker processes (default: the machine's cores), the cluster's start
            included; a worker exports each rank in a child process forked for it (tb_hwprof/app/jobs.py
            in_child); its progress lines timed (cluster up, last rank in),
  parallel: the single exports --workers at a time (--no-parallel skips it): what the machine gives
            that many exports at once while others use it, with no Dask in the way.
Memory compared: per worker, the worker's RSS plus its rank process' unique memory at one instant
(the child's own ru_maxrss counts the worker's pages it shares, its USS alone leaves out what the
worker holds), against a single export's RSS, both polled; and the same in PSS, where the pages
every worker shares with the others and their fork server (Python, Dask, pandas, our modules)
count as each one's share: what the machine spends per worker, the figure judged.
Targets: job wall <= 1.3 x the machine's ideal, max(sum of the single exports / workers, their CPU
time / cores); the issue's reference, the first term alone, assumes an export keeps one core busy,
where ours keeps ~1.4 (both ratios are printed); every worker's peak (PSS) <= the single exports'
highest; the straggler (and only it) found by the job's ranks table.

    python benchmarks/bench_distributed.py [--ranks 16] [--kernels 250000] [--workers N] [--keep DIR]
                                           [--single N] [--no-parallel]
"""
from __future__ import annotations

import argparse
import bisect
import collections
import os
import re
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson

from bench_torch_export import ID_STEP, SHIFTED_ARGS, _load, _shifted  # noqa: E402  (benchmarks/ is the script's folder)
from children import in_page_cache, run_child_watched  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SAMPLES = Path(os.environ.get("TB_HWPROF_SAMPLES", REPO.parent / "shared" / "samples"))
DEFAULT = SAMPLES / "torch" / "hta_sampled_2rank_rank0.json.gz"
TARGET_TIME_RATIO = 1.3
RANK_ID_STEP = 10 ** 11  # past every copy's ids (copies x ID_STEP)
RANK_SKEW_US = 37  # each rank's clock a little off the previous one's
STRAGGLER_SHARE = 0.10  # the stretched kernels add this share of a step to each step


# ------------------------------------------------------------------ growing the ranks
def heaviest_compute_kernel(events) -> str:
    """The kernel name with the most GPU time that is not a collective (stretching NCCL would be
    communication waiting, not a slower rank)."""
    time_by_name = collections.Counter()
    for e in events:
        if e.get("cat") == "kernel" and "nccl" not in str(e.get("name", "")).lower():
            time_by_name[e["name"]] += e.get("dur", 0)
    return time_by_name.most_common(1)[0][0]


def stretched(events, kernel: str, delta_us: float):
    """The events as if every `kernel` launch took delta_us longer: it lasts longer and every
    instant after its start moves later by delta_us per such launch started before it."""
    starts = sorted(e["ts"] for e in events if e.get("cat") == "kernel" and e.get("name") == kernel)

    def moved(t):
        return t + delta_us * bisect.bisect_left(starts, t)
    out = []
    for e in events:
        if not isinstance(e.get("ts"), (int, float)):
            out.append(e)
            continue
        e = dict(e)
        end = e["ts"] + e["dur"] if isinstance(e.get("dur"), (int, float)) else None
        e["ts"] = moved(e["ts"])
        if end is not None:
            e["dur"] = moved(end) - e["ts"]
        out.append(e)
    return out


def rank_event(event: dict, rank: int) -> dict:
    """An event of rank `rank`: its clock skewed, its ids past the ranks before it."""
    if isinstance(event.get("ts"), (int, float)):
        event["ts"] = event["ts"] + rank * RANK_SKEW_US
    if isinstance(event.get("id"), int):
        event["id"] = event["id"] + rank * RANK_ID_STEP
    if event.get("args"):
        event["args"] = {k: v + rank * RANK_ID_STEP if k in SHIFTED_ARGS and isinstance(v, int) else v
                         for k, v in event["args"].items()}
    return event


def span_of(events) -> float:
    """How far each copy moves on (bench_torch_export's rule): the events' span and a little more."""
    times = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    return (max(times) - min(times)) * 1.01 + 1000


def rank_header(doc: dict, rank: int, world: int) -> bytes:
    top = {**doc, "distributedInfo": {**doc.get("distributedInfo", {}), "rank": rank, "world_size": world}}
    return orjson.dumps(top)[:-1] + b', "traceEvents": ['


# Each event is serialised once with its moving numbers replaced by markers, then each copy joins the
# constant pieces with the numbers of that copy (what _shifted and rank_event would give): ~10x
# faster than a dict and an orjson call per event and copy, which made growing 16 ranks take minutes.
MARK = "@@bench-slot-{}@@"
STEP_PREFIX = "ProfilerStep#"


def event_template(event: dict):
    """(pieces, slots): the event's JSON cut at its moving numbers; slots[i] = (kind, base value)
    sits between pieces[i] and pieces[i + 1]."""
    marked, slots = dict(event), []

    def slot(kind, value):
        slots.append((kind, value))
        return MARK.format(len(slots) - 1)
    if isinstance(marked.get("ts"), (int, float)):
        marked["ts"] = slot("ts", marked["ts"])
    if isinstance(marked.get("id"), int):
        marked["id"] = slot("id", marked["id"])
    if isinstance(marked.get("name"), str) and marked["name"].startswith(STEP_PREFIX):
        marked["name"] = STEP_PREFIX + slot("step", int(marked["name"][len(STEP_PREFIX):]))
    if marked.get("args"):
        marked["args"] = {k: slot("id", v) if k in SHIFTED_ARGS and isinstance(v, int) else v
                          for k, v in marked["args"].items()}
    text = orjson.dumps(marked)
    cuts = []  # (start, end, slot) in the text's order (orjson's key order, not the marking order)
    for i, (kind, _) in enumerate(slots):
        mark = MARK.format(i).encode()
        cut = mark if kind == "step" else b'"' + mark + b'"'  # a step number sits inside the name's string
        start = text.index(cut)
        cuts.append((start, start + len(cut), slots[i]))
    cuts.sort()
    pieces, at = [], 0
    for start, end, _ in cuts:
        pieces.append(text[at:start])
        at = end
    pieces.append(text[at:])
    return pieces, [c[2] for c in cuts]


def filled(template, k: int, span: float, rank: int) -> bytes:
    pieces, slots = template
    out = [pieces[0]]
    for (kind, value), piece in zip(slots, pieces[1:]):
        if kind == "ts":
            out.append(repr(value + k * span + rank * RANK_SKEW_US).encode())
        elif kind == "id":
            out.append(str(value + k * ID_STEP + rank * RANK_ID_STEP).encode())
        else:
            out.append(str(value + k * 1000).encode())
        out.append(piece)
    return b"".join(out)


def write_rank(doc: dict, events, dst: Path, rank: int, world: int, copies: int) -> None:
    """One rank file: `copies` copies of the events (metadata once), each shifted in time and ids
    as bench_torch_export's _shifted does, then by this rank's skew and id step."""
    span = span_of(events)
    templates = [event_template(e) for e in events]
    for t, e in zip(templates[:500], events):  # the templates give what the plain way gives
        if orjson.loads(filled(t, 1, span, rank)) != rank_event(_shifted(e, 1, span), rank):
            raise SystemExit(f"bench bug: event template differs from the shifted event: {e}")
    with open(dst, "wb") as f:
        f.write(rank_header(doc, rank, world))
        for k in range(copies):
            chunk = [filled(t, k, span, rank) for t, e in zip(templates, events) if k == 0 or e.get("ph") != "M"]
            f.write((b",\n" if k else b"") + b",\n".join(chunk))
        f.write(b"]}")


def grow_ranks(src: Path, folder: Path, ranks: int, kernels_per_rank: int, straggler: int) -> dict:
    """rank_<i>.json for each rank in `folder` (kept when there); what was grown."""
    doc = _load(src)
    events = doc.pop("traceEvents")
    per_copy = sum(1 for e in events if e.get("cat") == "kernel")
    copies = max(1, round(kernels_per_rank / per_copy))
    kernel = heaviest_compute_kernel(events)
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    launches_per_step = sum(1 for e in events if e.get("name") == kernel) / max(len(steps), 1)
    step_us = sum(e["dur"] for e in steps) / max(len(steps), 1)
    delta = STRAGGLER_SHARE * step_us / max(launches_per_step, 1)
    slow = stretched(events, kernel, delta)
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        dst = folder / f"rank_{rank}.json"
        if not dst.exists():
            tmp = dst.with_suffix(".tmp")
            write_rank(doc, slow if rank == straggler else events, tmp, rank, ranks, copies)
            os.rename(tmp, dst)
    return {"copies": copies, "kernels": copies * per_copy, "kernel": kernel, "delta_us": delta}


# ------------------------------------------------------------------ measuring
EXPORT = """
import json, os, resource, sys, time
sys.path.insert(0, sys.argv[1])
os.environ["PYTHONPATH"] = sys.argv[1]  # the local cluster's worker processes import tb_hwprof too
t = time.perf_counter()
from tb_hwprof.app.cli import main
rc = main(["export", *sys.argv[3:], "--logdir", sys.argv[2], "--overwrite", "--quiet"])
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"s": time.perf_counter() - t, "rc": rc, "cpu_s": usage.ru_utime + usage.ru_stime,
                  "mb": usage.ru_maxrss / 1024}))
"""

# The job's export as EXPORT runs it, its progress lines (stderr) kept with their time: when the
# cluster was up, when the last rank was in.
JOB = """
import json, os, resource, sys, time
sys.path.insert(0, sys.argv[1])
os.environ["PYTHONPATH"] = sys.argv[1]
t = time.perf_counter()
lines = []
class Stamped:
    def write(self, text):
        lines.extend((time.perf_counter() - t, line) for line in text.splitlines() if line.strip())
        return len(text)
    def flush(self):
        pass
sys.stderr = Stamped()
from tb_hwprof.app.cli import main
rc = main(["export", *sys.argv[3:], "--logdir", sys.argv[2], "--overwrite"])
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"s": time.perf_counter() - t, "rc": rc, "cpu_s": usage.ru_utime + usage.ru_stime,
                  "mb": usage.ru_maxrss / 1024, "lines": lines}))
"""


def job_phases(lines) -> dict:
    """Seconds from the start of the job's export: the cluster up, the last rank in, the end."""
    up = next((s for s, line in lines if line.startswith("job: on a ")), 0.0)
    ranks = max((s for s, line in lines if re.match(r"^\[(\d+)/\1\] ", line)), default=up)
    return {"cluster_up_s": up, "ranks_done_s": ranks}


def parallel_singles(files, folder: Path, workers: int) -> float:
    """Wall time of the single exports run `workers` at a time (each batch waits for its slowest): what
    this machine gives `workers` exports at once, now, with no Dask in the way."""
    total = 0.0
    with ThreadPoolExecutor(workers) as pool:
        for first in range(0, len(files), workers):
            batch = files[first:first + workers]
            in_page_cache(*batch)
            started = time.perf_counter()
            done = list(pool.map(lambda f: run_child_watched(EXPORT, REPO, folder, f, "--run", f"p_{f.stem}"), batch))
            if any(d["rc"] != 0 for d in done):
                raise SystemExit(f"a single export failed: {done}")
            total += time.perf_counter() - started
    return total


NOTE = re.compile(r"^rank (\d+): .* exported on (\S+) in ([\d.]+) s \(CPU ([\d.]+) s; peak memory (\d+) MB; "
                  r"the worker's own (\d+) MB\)$")


def job_figures(job_dir: Path) -> dict:
    """Per worker: its peak memory and ranks (from the job's notes); the straggler verdicts."""
    sys.path.insert(0, str(REPO))
    from tb_hwprof.logdir.reader import load_run, read_manifest
    workers = collections.defaultdict(lambda: {"mb": 0.0, "ranks": 0, "s": 0.0, "cpu_s": 0.0, "own_mb": 0.0})
    for note in read_manifest(job_dir)["notes"]:
        m = NOTE.match(note)
        if m:
            w = workers[m.group(2)]
            w["mb"], w["ranks"] = max(w["mb"], float(m.group(5))), w["ranks"] + 1
            w["own_mb"] = max(w["own_mb"], float(m.group(6)))
            w["s"], w["cpu_s"] = w["s"] + float(m.group(3)), w["cpu_s"] + float(m.group(4))
    ranks = load_run(job_dir).summaries["ranks"]
    found = ranks[ranks["straggler"].astype(bool)]
    return {"workers": dict(workers), "stragglers": found["rank"].astype(int).tolist(),
            "reasons": found["straggler_reason"].tolist()}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--kernels", type=int, default=250_000, help="kernels per rank (about)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="local cluster workers (default: the machine's cores, as the export's default)")
    parser.add_argument("--single", type=int, default=None,
                        help="single exports measured: the first N ranks and the straggler, the sum scaled to "
                             "all ranks (default: every rank)")
    parser.add_argument("--no-parallel", action="store_true",
                        help="skip the reference run of the single exports --workers at a time")
    parser.add_argument("--keep", type=Path, help="keep the grown ranks in this folder (and reuse them)")
    return parser.parse_args()


def _single(path: Path, folder: Path, run: str) -> dict:
    in_page_cache(path)
    return run_child_watched(EXPORT, REPO, folder, path, "--run", run)


def measure_singles(files, measured, folder: Path, straggler: int, ranks: int) -> dict:
    """Each measured rank exported alone: {rank: its child's figures}; the sum scaled to all ranks."""
    singles = {r: _single(files[r], folder, f"r{r}") for r in measured}
    if any(s["rc"] != 0 for s in singles.values()):
        raise SystemExit(f"a single export failed: {singles}")
    normal = [s["s"] for r, s in singles.items() if r != straggler]
    return {"each": singles, "sum": sum(normal) / len(normal) * (ranks - 1) + singles[straggler]["s"],
            "mb": max(s["mb"] for s in singles.values()), "polled_mb": max(s["tree_mb"] for s in singles.values()),
            "polled_pss_mb": max(s["tree_pss_mb"] for s in singles.values()),
            "cpu_sum": sum(s["tree_cpu_s"] for s in singles.values()) * ranks / len(singles)}


def measure_job(files, folder: Path, workers: int) -> dict:
    in_page_cache(*files)
    job = run_child_watched(JOB, REPO, folder, *files, "--ranks", "--run", "job", "--workers", workers)
    if job["rc"] != 0:
        raise SystemExit(f"the job export failed: {job}")
    return {**job, **job_phases(job["lines"]), **job_figures(folder / "job")}


def main() -> int:
    args = parse_args()
    straggler = args.ranks // 2
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp) / "ranks"
        started = time.perf_counter()
        grown = grow_ranks(args.source, folder, args.ranks, args.kernels, straggler)
        files = [folder / f"rank_{r}.json" for r in range(args.ranks)]
        print(f"grew {args.source.name} into {args.ranks} ranks of {grown['kernels']:,} kernels "
              f"({grown['copies']} copies, {files[0].stat().st_size / 1e6:.0f} MB each) in "
              f"{time.perf_counter() - started:.0f} s; straggler rank {straggler}: {grown['kernel'][:60]}... "
              f"+{grown['delta_us'] / 1e3:.1f} ms per launch")
        os.sync()
        measured = list(range(args.ranks)) if args.single is None else sorted({*range(args.single), straggler})
        loads = [os.getloadavg()[0]]
        singles = measure_singles(files, measured, Path(tmp) / "single", straggler, args.ranks)
        loads.append(os.getloadavg()[0])
        job = measure_job(files, Path(tmp) / "job", args.workers)
        loads.append(os.getloadavg()[0])
        parallel = None
        if not args.no_parallel:
            parallel = parallel_singles([files[r] for r in measured], Path(tmp) / "parallel", args.workers)
            parallel *= args.ranks / len(measured)
            loads.append(os.getloadavg()[0])
    return report(args, singles, job, parallel, loads, straggler)


def machine_ideal(singles: dict, workers: int, cores: int) -> float:
    """The shortest wall time the job could take here: the single exports' wall times spread over the
    workers, or their CPU time spread over the cores, whichever is longer.  A single export keeps
    ~1.4 cores busy with its own threads (two-half trace scan, background writers), so on a machine
    with no more cores than workers the first alone (the issue's reference) is out of reach."""
    return max(singles["sum"] / workers, singles["cpu_sum"] / cores)


def report(args, singles: dict, job: dict, parallel, loads, straggler: int) -> int:
    each = singles["each"].values()
    ideal = singles["sum"] / args.workers
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    reachable = machine_ideal(singles, args.workers, cores)
    budget = TARGET_TIME_RATIO * reachable
    print(f"single exports ({len(each)} measured{'' if args.single is None else ', sum scaled'}): "
          f"sum {singles['sum']:.1f} s, each {min(s['s'] for s in each):.2f}-{max(s['s'] for s in each):.2f} s "
          f"(CPU {sum(s['cpu_s'] for s in each):.1f} s in all), peak {singles['mb']:.0f} MB (ru_maxrss; "
          f"{singles['polled_mb']:.0f} MB polled)")
    print(f"load average (1 min) before, between and after the steps: {', '.join(f'{x:.1f}' for x in loads)} on "
          f"{os.cpu_count()} cores (a shared machine: wall times above ~1 per core are not the export's alone)")
    print(f"job on {args.workers} workers: {job['s']:.1f} s (target <= 1.3 x the machine's ideal, max({singles['sum']:.1f} s "
          f"/ {args.workers} workers, CPU {singles['cpu_sum']:.1f} s / {cores} cores) = {budget:.1f} s; ratio "
          f"{job['s'] / reachable:.2f}; vs the wall times / workers alone, the issue's reference: "
          f"{job['s'] / ideal:.2f}): cluster up at {job['cluster_up_s']:.1f} s, last rank "
          f"in at {job['ranks_done_s']:.1f} s, then the cross-rank run and the runs into place "
          f"{job['s'] - job['ranks_done_s']:.1f} s; driver peak {job['mb']:.0f} MB")
    if parallel is not None:
        print(f"  the same single exports {args.workers} at a time: {parallel:.1f} s (ratio {parallel / ideal:.2f}: "
              f"what this machine gives {args.workers} exports at once now; the job vs that: "
              f"{job['s'] / parallel:.2f})")
    tasks_cpu = sum(w["cpu_s"] for w in job["workers"].values())
    singles_cpu = singles["cpu_sum"]
    print(f"  CPU (what the load does not change): the job's processes {job['tree_cpu_s']:.1f} s in all, its rank "
          f"tasks {tasks_cpu:.1f} s, vs the single exports' {singles_cpu:.1f} s (scaled to all ranks): "
          f"{job['tree_cpu_s'] / singles_cpu:.2f}x")
    for address, w in sorted(job["workers"].items()):
        print(f"  worker {address}: {w['ranks']} ranks, {w['s']:.1f} s of tasks (CPU {w['cpu_s']:.1f} s), "
              f"a rank's process peak {w['mb']:.0f} MB (ru_maxrss of the child forked from the worker: "
              f"counts the worker's pages it shares), the worker's own {w['own_mb']:.0f} MB")
    branches = sorted(job["family_mb"].values(), reverse=True)[:args.workers]
    shares = sorted(job["family_pss_mb"].values(), reverse=True)[:args.workers]
    worker_mb = shares[0] if shares else 0.0
    print(f"  per worker, polled (the worker's RSS + its rank process' unique memory, at one instant: the "
          f"pages the workers share from their fork server counted whole in each): "
          f"{', '.join(f'{b:.0f}' for b in branches)} MB vs a single export's {singles['polled_mb']:.0f} MB")
    print(f"  per worker, polled in PSS (the same processes, each shared page counted as the worker's share "
          f"of it: the machine's memory per worker): {', '.join(f'{b:.0f}' for b in shares)} MB vs a single "
          f"export's {singles['polled_pss_mb']:.0f} MB (PSS)")
    print(f"stragglers found: {job['stragglers']} (made: [{straggler}])")
    for reason in job["reasons"]:
        print(f"  {reason}")
    missed = []
    if job["s"] > budget:
        missed.append("time")
    if worker_mb > singles["polled_pss_mb"]:
        missed.append(f"worker memory ({worker_mb:.0f} > {singles['polled_pss_mb']:.0f} MB, PSS)")
    if job["stragglers"] != [straggler]:
        missed.append("straggler")
    if missed:
        print(f"target missed: {', '.join(missed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
