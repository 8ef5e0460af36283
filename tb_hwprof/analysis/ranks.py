"""Cross-rank analysis of a distributed job: one small digest per rank, then the job's tables.

Model-level only (Profile objects, never file formats).  The job export reads each rank on its
own worker, keeps only `rank_digest(profile, rank, source)` (a few KB, picklable), checks the ranks
belong together (`check_same_job`) and makes the job's run from the digests (`job_profile`), whose
summary tables are documented in docs/FORMAT.md ("Distributed jobs"):

- ranks: one row per rank: steps, step time average / max, compute, communication, overlap and
  idle GPU time, and the straggler verdict with its reason.
- rank_steps: one row per rank and step: the step's time.
- rank_kernels: the top kernels' total time per rank, spread as min / median / max over the ranks.

GPU time per device (as Holistic Trace Analysis' temporal breakdown and comm-comp overlap):
compute = |union of the non-communication kernels|, communication = |union of the communication
kernels|, overlap = |compute union ∩ communication union|, idle = device span (first kernel start
to last kernel end) - |union of all kernels|.  So (compute - overlap) + (communication - overlap)
+ overlap + idle = span.  A rank with several devices sums them.
"""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence

import numpy as np
import pandas as pd

from ..core.errors import InputError
from .summary import merge

# Communication kernels, by a lower-cased piece of their name: NCCL and RCCL collectives
# (ncclKernel_*, ncclDevKernel_*), gloo, and DeepEP's expert-parallel all-to-all kernels
# (deepseek's trace: dpsk::ep::internode::dispatch / combine / notify_dispatch).
COMMUNICATION_PATTERNS = ("nccl", "rccl", "gloo", "::ep::internode::", "::ep::intranode::", "deep_ep::")

# A straggler is a rank whose average step time exceeds the median rank's by more than BOTH
# STRAGGLER_SHARE (relative) and STRAGGLER_MIN_NS (absolute: tiny steps jitter by more than 5%).
STRAGGLER_SHARE = 0.05
STRAGGLER_MIN_NS = 100_000  # 100 µs
# Slow steps a straggler's reason names (the most over their median first).
SLOW_STEPS_NAMED = 5
# Rows of rank_kernels: the kernels with the most median time over the ranks.
TOP_KERNELS = 20
# "rank3", "rank_3", "rank-3" in a file name, not inside a longer word ("frank3").
RANK_IN_NAME = re.compile(r"(?<![a-z])rank[_-]?(\d+)", re.IGNORECASE)
# Operators (or kernels) per step a digest keeps by name: the rank's TOP_WORK by GPU time; the rest
# are summed as OTHER_WORK (a digest stays small whatever the trace).
TOP_WORK = 200
OTHER_WORK = "(other operators)"
FIX_MIXED = "export the ranks of one job together (same world size and process groups), one file per rank"

RANKS_COLUMNS = ["rank", "run", "source", "world_size", "steps", "step_time_avg_ns", "step_time_max_ns",
                 "compute_ns", "communication_ns", "overlap_ns", "idle_ns", "span_ns", "straggler",
                 "straggler_reason"]
RANK_STEPS_COLUMNS = ["rank", "step", "step_time_ns", "step_median_ns"]
RANK_KERNELS_COLUMNS = ["kernel", "ranks", "min_ns", "median_ns", "max_ns", "min_rank", "max_rank", "spread_pct"]


def is_communication_kernel(name: str) -> bool:
    lowered = str(name).lower()
    return any(piece in lowered for piece in COMMUNICATION_PATTERNS)


# ---------------------------------------------------------------- rank of a file
def rank_of(profile, path, position: int) -> int:
    """The rank a file holds: its trace's distributedInfo.rank, else `rank_N` / `rank-N` / `rankN`
    in the file name, else `position` (the order the files were given in)."""
    info = _distributed_info(profile)
    rank = info.get("rank")
    if isinstance(rank, int) and not isinstance(rank, bool) or isinstance(rank, str) and rank.isdigit():
        return int(rank)
    found = RANK_IN_NAME.search(Path(str(path)).name)
    if found:
        return int(found.group(1))
    return int(position)


def _distributed_info(profile) -> dict:
    torch = getattr(profile, "torch", None)
    info = getattr(torch, "distributed", None) if torch is not None else None
    return info if isinstance(info, dict) else {}


def _job_signature(info: dict) -> str:
    """What ranks of one job share: backend and the default process group's config (per-rank
    sub-groups and their numbering differ from rank to rank, so they are left out)."""
    groups = info.get("pg_config") or []
    default = [g for g in groups if isinstance(g, dict) and g.get("pg_desc") == "default_pg"]
    shared = [{k: g.get(k) for k in ("pg_name", "backend_config", "pg_size", "ranks")} for g in default]
    return json.dumps({"backend": info.get("backend"), "default_pg": shared}, sort_keys=True)


# ---------------------------------------------------------------- one rank's digest
@dataclasses.dataclass
class RankDigest:
    """What the job needs from one rank (small and picklable: built where the rank was read)."""

    rank: int
    source: str
    run: str = ""  # the rank's own run (job/rank_N); "" when not exported as a run
    tool: str = ""
    world_size: Optional[int] = None  # distributedInfo.world_size; None when the trace does not say
    job_signature: str = ""  # backend + default process group (see _job_signature); "" when unknown
    steps: List[int] = dataclasses.field(default_factory=list)  # ProfilerStep numbers, in order
    step_ns: List[int] = dataclasses.field(default_factory=list)  # each step's time
    compute_ns: int = 0
    communication_ns: int = 0
    overlap_ns: int = 0
    idle_ns: int = 0
    span_ns: int = 0
    kernel_ns: Dict[str, int] = dataclasses.field(default_factory=dict)  # kernel name -> total GPU time
    # step -> {operator (PyTorch) or kernel name -> GPU time of its kernels started in that step}
    step_work: Dict[int, Dict[str, int]] = dataclasses.field(default_factory=dict)
    work_kind: str = "kernel"  # what step_work's keys name: "operator" or "kernel"


def rank_digest(profile, rank: int, source: str, run: str = "") -> RankDigest:
    """The digest of one rank's Profile (PyTorch trace, Nsight Systems or rocprof capture)."""
    info = _distributed_info(profile)
    kernels, names = _kernel_frame(profile)
    busy = gpu_time_split(kernels)
    steps, step_ns, step_work, work_kind = _steps(profile, kernels)
    totals = _sums_by_code(kernels["name_code"].to_numpy(), kernels["duration"].to_numpy(np.int64), len(names))
    return RankDigest(
        rank=int(rank), source=str(source), run=run, tool=profile.provenance.tool,
        world_size=int(info["world_size"]) if isinstance(info.get("world_size"), int) else None,
        job_signature=_job_signature(info) if info else "",
        steps=steps, step_ns=step_ns, **busy,
        kernel_ns={str(name): int(ns) for name, ns in zip(names, totals)},
        step_work=step_work, work_kind=work_kind)


def _kernel_frame(profile):
    """(frame, names): name, device, start, end, duration (int64 ns) of every kernel with a time; op
    (row of profile.torch.ops, -1) for PyTorch traces; name_code, the kernel's name as its row in
    `names` (the distinct names in order of first appearance; -1 for no name): the digest groups
    by these integers, not by the name strings (a third of its time at 60k kernels)."""
    torch = getattr(profile, "torch", None)
    if torch is not None:
        gpu = torch.gpu[torch.gpu["kind"] == "kernel"]
        frame = pd.DataFrame({"name": gpu["name"].to_numpy(object), "device": gpu["device"].to_numpy(np.int64),
                              "start": gpu["start_ns"].to_numpy(np.int64), "end": gpu["end_ns"].to_numpy(np.int64),
                              "op": gpu["op"].to_numpy(np.int64)})
    else:
        k = profile.kernels
        timed = k["start_ns"].notna() & k["end_ns"].notna()
        k = k[timed]
        frame = pd.DataFrame({"name": k["name"].to_numpy(object),
                              "device": k["device"].fillna(-1).to_numpy(np.int64),
                              "start": k["start_ns"].to_numpy(np.int64), "end": k["end_ns"].to_numpy(np.int64),
                              "op": np.full(len(k), -1, np.int64)})
    frame["duration"] = frame["end"] - frame["start"]
    codes, names = pd.factorize(frame["name"].astype(object))
    frame["name_code"] = codes
    # is_communication_kernel once per distinct name
    per_name = np.fromiter((is_communication_kernel(n) for n in names), bool, len(names))
    frame["communication"] = np.append(per_name, False)[codes] if len(frame) else np.zeros(0, bool)
    return frame, np.asarray(names, dtype=object)


def _sums_by_code(codes: np.ndarray, values: np.ndarray, count: int) -> np.ndarray:
    """values summed per code 0..count-1 (int64, exact); rows of code -1 (no name) left out, as a
    pandas groupby leaves out its missing keys."""
    sums = np.zeros(count, np.int64)
    named = codes >= 0
    np.add.at(sums, codes[named], values[named])
    return sums


def gpu_time_split(kernels: pd.DataFrame) -> Dict[str, int]:
    """compute_ns, communication_ns, overlap_ns, idle_ns, span_ns summed over the devices
    (interval unions per device; see the module docstring)."""
    out = dict.fromkeys(("compute_ns", "communication_ns", "overlap_ns", "idle_ns", "span_ns"), 0)
    for _, on_device in kernels.groupby("device", sort=True):
        start, end = on_device["start"].to_numpy(np.int64), on_device["end"].to_numpy(np.int64)
        comm = on_device["communication"].to_numpy(bool)
        compute_len = _union_length(start[~comm], end[~comm])
        comm_len = _union_length(start[comm], end[comm])
        busy = _union_length(start, end)
        span = int(end.max() - start.min())
        out["compute_ns"] += compute_len
        out["communication_ns"] += comm_len
        out["overlap_ns"] += compute_len + comm_len - busy  # |A ∩ B| = |A| + |B| - |A ∪ B|
        out["idle_ns"] += span - busy
        out["span_ns"] += span
    return out


def _union_length(start: np.ndarray, end: np.ndarray) -> int:
    s, e = merge(start, end)
    return int((e - s).sum())


def _steps(profile, kernels: pd.DataFrame):
    """(step numbers, step times, per-step work, work kind): the steps torch-tb-profiler's Overview
    reports (analysis/torch_steps.step_spans: ProfilerStep#N extended to their GPU work); each
    kernel counts in the step its start falls in.  No steps (not PyTorch, or no ProfilerStep#N): empty."""
    torch = getattr(profile, "torch", None)
    if torch is None or len(torch.steps) == 0:
        return [], [], {}, "kernel"
    from .torch_steps import step_spans
    spans = step_spans(torch)
    number = spans["step"].to_numpy(np.int64)
    start, end = spans["start_ns"].to_numpy(np.int64), spans["end_ns"].to_numpy(np.int64)
    work_code, work_names = _top_names(_work_names(torch, kernels), kernels["duration"].to_numpy(np.int64))
    at = np.searchsorted(start, kernels["start"].to_numpy(np.int64), side="right") - 1
    inside = (at >= 0) & (kernels["start"].to_numpy(np.int64) < end[np.maximum(at, 0)])
    frame = pd.DataFrame({"step": number[at[inside]], "work": work_code[inside],
                          "duration": kernels["duration"].to_numpy(np.int64)[inside]})
    frame = frame[frame["work"] >= 0]  # no name: left out, as a groupby leaves out its missing keys
    step_work: Dict[int, Dict[str, int]] = {int(s): {} for s in number}
    for (step, work), ns in frame.groupby(["step", "work"], sort=False)["duration"].sum().items():
        step_work[int(step)][str(work_names[work])] = int(ns)
    return [int(s) for s in number], [int(x) for x in end - start], step_work, "operator"


def _top_names(names: np.ndarray, duration: np.ndarray):
    """(code per row, names by code): the rows' names, those outside the TOP_WORK of most total time
    replaced by OTHER_WORK (ties broken in the names' sorted order); code -1: no name."""
    codes, uniques = pd.factorize(pd.Series(names, dtype=object))
    uniques = np.asarray(uniques, dtype=object)
    if len(uniques) <= TOP_WORK:
        return codes, uniques
    totals = pd.Series(_sums_by_code(codes, duration, len(uniques)), index=uniques).sort_index()
    kept = pd.Index(uniques).isin(totals.nlargest(TOP_WORK).index)
    merged = np.append(uniques[kept], OTHER_WORK)  # kept names, then OTHER_WORK
    new_code = np.where(kept, np.cumsum(kept) - 1, len(merged) - 1)
    return np.where(codes >= 0, new_code[codes], -1), merged


def _work_names(torch, kernels: pd.DataFrame) -> np.ndarray:
    """Per kernel: the operator that launched it, or its own name when no operator did."""
    op = kernels["op"].to_numpy(np.int64)
    op_names = torch.ops["name"].to_numpy(object)
    names = kernels["name"].to_numpy(object).copy()
    has_op = (op >= 0) & (op < op_names.size)
    names[has_op] = op_names[op[has_op]]
    return names


# ---------------------------------------------------------------- one job
def check_same_job(digests: Sequence[RankDigest]) -> None:
    """Refuse ranks that are not of one job: an InputError naming the odd rank's file and why
    (a different world size or process group config than the first rank's; a rank claimed twice)."""
    if not digests:
        return
    first = digests[0]
    seen: Dict[int, RankDigest] = {}
    for d in digests:
        if d.rank in seen:
            raise InputError(d.source, f"claims rank {d.rank}, as does {seen[d.rank].source}",
                             "give each rank's file once (the rank comes from distributedInfo, else the file name)")
        seen[d.rank] = d
        if d.world_size != first.world_size:
            raise InputError(d.source, f"is not of the same job as {first.source}: world size "
                             f"{_known(d.world_size)} here, {_known(first.world_size)} there", FIX_MIXED)
        if d.job_signature != first.job_signature:
            raise InputError(d.source, f"is not of the same job as {first.source}: different process group "
                             f"config ({d.job_signature or 'none'} vs {first.job_signature or 'none'})", FIX_MIXED)
        if d.world_size is not None and not 0 <= d.rank < d.world_size:
            raise InputError(d.source, f"rank {d.rank} is outside the world size {d.world_size}", FIX_MIXED)


def _known(value) -> str:
    return "unknown (no distributedInfo)" if value is None else str(value)


def job_profile(digests: Sequence[RankDigest], notes: Iterable[str] = (), job: str = ""):
    """The job's cross-rank run: a Profile with no kernels whose summaries are ranks, rank_steps and
    rank_kernels (checked to be one job first).  notes: lines for the run's notes (e.g. ranks
    the export skipped)."""
    from ..core.model import Profile, Provenance, empty_kernels
    check_same_job(digests)
    digests = sorted(digests, key=lambda d: d.rank)
    verdicts = stragglers(digests)
    summaries = {"ranks": _ranks_table(digests, verdicts), "rank_steps": _rank_steps_table(digests),
                 "rank_kernels": _rank_kernels_table(digests)}
    world = digests[0].world_size if digests else None
    lines = [f"{len(digests)} ranks" + (f" of world size {world}" if world else "")
             + (f" of job {job}" if job else "") + ": " + ", ".join(f"rank {d.rank} from {d.source}" for d in digests)]
    lines += [f"straggler rank {rank}: {reason}" for rank, reason in verdicts.items() if reason]
    provenance = Provenance(tool="tb-hwprof-job", tool_version="", source_path="; ".join(d.source for d in digests),
                            source_sha256="", source_format="job")
    return Profile(provenance=provenance, devices=[], kernels=empty_kernels(0), notes=lines + list(notes),
                   summaries=summaries)


def _with_units(frame: pd.DataFrame) -> pd.DataFrame:
    from ..core.model import units_of
    frame.attrs["units"] = units_of(frame)
    return frame


def _ranks_table(digests: Sequence[RankDigest], verdicts: Dict[int, str]) -> pd.DataFrame:
    rows = []
    for d in digests:
        steps = np.asarray(d.step_ns, np.int64)
        rows.append({"rank": d.rank, "run": d.run, "source": d.source,
                     "world_size": np.nan if d.world_size is None else d.world_size,
                     "steps": len(d.steps),
                     "step_time_avg_ns": float(steps.mean()) if steps.size else np.nan,
                     "step_time_max_ns": float(steps.max()) if steps.size else np.nan,
                     "compute_ns": d.compute_ns, "communication_ns": d.communication_ns,
                     "overlap_ns": d.overlap_ns, "idle_ns": d.idle_ns, "span_ns": d.span_ns,
                     "straggler": bool(verdicts.get(d.rank)), "straggler_reason": verdicts.get(d.rank, "")})
    return _with_units(pd.DataFrame(rows, columns=RANKS_COLUMNS))


def _rank_steps_table(digests: Sequence[RankDigest]) -> pd.DataFrame:
    rows = [(d.rank, s, t) for d in digests for s, t in zip(d.steps, d.step_ns)]
    frame = pd.DataFrame(rows, columns=RANK_STEPS_COLUMNS[:3]).astype(np.int64)
    frame["step_median_ns"] = frame.groupby("step")["step_time_ns"].transform("median").astype(np.float64)
    return _with_units(frame[RANK_STEPS_COLUMNS])


def _rank_kernels_table(digests: Sequence[RankDigest]) -> pd.DataFrame:
    """The TOP_KERNELS kernels by median time over the ranks (a rank without the kernel counts 0)."""
    names = sorted({name for d in digests for name in d.kernel_ns})
    if not names or not digests:
        return _with_units(pd.DataFrame(columns=RANK_KERNELS_COLUMNS))
    ranks = np.array([d.rank for d in digests])
    times = np.array([[d.kernel_ns.get(n, 0) for d in digests] for n in names], np.int64)  # kernel x rank
    median = np.median(times, axis=1)
    top = np.argsort(-median, kind="stable")[:TOP_KERNELS]
    lo, hi = times[top].argmin(axis=1), times[top].argmax(axis=1)
    frame = pd.DataFrame({
        "kernel": [names[i] for i in top], "ranks": (times[top] > 0).sum(axis=1),
        "min_ns": times[top].min(axis=1), "median_ns": median[top], "max_ns": times[top].max(axis=1),
        "min_rank": ranks[lo], "max_rank": ranks[hi],
        "spread_pct": np.where(median[top] > 0, 100.0 * (times[top].max(axis=1) - times[top].min(axis=1))
                               / np.where(median[top] > 0, median[top], 1), np.nan)})
    return _with_units(frame[RANK_KERNELS_COLUMNS])


# ---------------------------------------------------------------- stragglers
def stragglers(digests: Sequence[RankDigest]) -> Dict[int, str]:
    """rank -> the reason it is a straggler ("" when it is not).  The measure is the average step
    time when every rank has steps, else the busy GPU time (compute + communication - overlap)."""
    if len(digests) < 2:
        return {d.rank: "" for d in digests}
    by_steps = all(d.step_ns for d in digests)
    measure = np.array([np.mean(d.step_ns) if by_steps else d.compute_ns + d.communication_ns - d.overlap_ns
                        for d in digests], np.float64)
    median = float(np.median(measure))
    what = "average step time" if by_steps else "busy GPU time"
    out = {}
    for d, value in zip(digests, measure):
        excess = value - median
        if excess > STRAGGLER_SHARE * median and excess > STRAGGLER_MIN_NS:
            out[d.rank] = (f"{what} {_ms(value)} vs median rank {_ms(median)} "
                           f"(+{_share(excess, median)}, over the {100 * STRAGGLER_SHARE:.0f}% and "
                           f"{STRAGGLER_MIN_NS / 1e3:.0f} µs thresholds)" + _explain(d, digests, by_steps))
        else:
            out[d.rank] = ""
    return out


def _explain(slow: RankDigest, digests: Sequence[RankDigest], by_steps: bool) -> str:
    """Which steps are slow, and the operator or kernel whose time differs most from the median rank."""
    parts = []
    if by_steps:
        slow_steps = []  # (excess, text) of each step slower than that step's median over the ranks
        step_median = _step_medians(digests)
        for step, ns in zip(slow.steps, slow.step_ns):
            med = step_median[step]
            if ns - med > STRAGGLER_SHARE * med and ns - med > STRAGGLER_MIN_NS:
                slow_steps.append((ns - med, f"{step} ({_ms(ns)} vs {_ms(med)})"))
        if slow_steps:
            named = [text for _, text in sorted(slow_steps, key=lambda x: -x[0])[:SLOW_STEPS_NAMED]]
            more = len(slow_steps) - len(named)
            parts.append(("slow steps " if not more else f"{len(slow_steps)} slow steps, the slowest ")
                         + ", ".join(named))
        per_rank = [_average_work(d) for d in digests]
        kind = slow.work_kind
    else:
        per_rank = [{k: float(v) for k, v in d.kernel_ns.items()} for d in digests]
        kind = "kernel"
    mine = per_rank[[d.rank for d in digests].index(slow.rank)]
    names = set().union(*per_rank) - {OTHER_WORK}
    if names:
        median = {n: float(np.median([w.get(n, 0.0) for w in per_rank])) for n in names}
        worst = max(sorted(names), key=lambda n: mine.get(n, 0.0) - median[n])
        gap = mine.get(worst, 0.0) - median[worst]
        if gap > 0:
            per = " per step" if by_steps else ""
            parts.append(f"{kind} {worst}: {_ms(mine.get(worst, 0.0))}{per} vs median rank {_ms(median[worst])} "
                         f"(+{_ms(gap)})")
    return ("; " + "; ".join(parts)) if parts else ""


def _step_medians(digests: Sequence[RankDigest]) -> Dict[int, float]:
    """step -> its median time over the ranks that have it (as rank_steps' step_median_ns)."""
    times: Dict[int, List[int]] = {}
    for d in digests:
        for step, ns in zip(d.steps, d.step_ns):
            times.setdefault(step, []).append(ns)
    return {step: float(np.median(values)) for step, values in times.items()}


def _average_work(d: RankDigest) -> Dict[str, float]:
    """Operator (or kernel) -> GPU time per step, averaged over the rank's steps."""
    total: Dict[str, float] = {}
    for work in d.step_work.values():
        for name, ns in work.items():
            total[name] = total.get(name, 0.0) + ns
    n = max(len(d.steps), 1)
    return {name: ns / n for name, ns in total.items()}


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole > 0 else f"{_ms(part)}; the median is 0"


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"
