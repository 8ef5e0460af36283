"""One ranked optimisation plan for the whole capture (issue 34): which changes could save the most
of the step, where, and how sure that is.

Three kinds of candidate, each from its own evidence, each saving bounded by the time it applies to:

- ncu rule: Nsight Compute's estimated speedup of a rule result, per (operator, rule): the sum over
  the operator's launches that carry the rule of duration x speedup% (the largest of the rule's
  messages on a launch).  A global speedup is ncu's estimate of the launch's whole duration; a local
  one of the part the rule looks at, whose share of the launch ncu does not give, so duration x
  speedup is its upper bound (said in `confidence`).  Launches without counters add nothing: the
  per-configuration join has already given counters (and rules) to every launch of a profiled
  configuration, and to no other.
- headroom: per operator from its input shapes (analysis/torch_shapes.py), its GPU time minus the
  time at the roof (each call's FLOPs over the compute peak or its bytes over the DRAM peak, the
  larger): what even a perfect kernel could not beat.
- idle: GPU idle time attributed to what the CPU did meanwhile (gpu_idle_attribution), and the step
  breakdown's exclusive data-loading and communication time.

Rows of different sources may cover the same time, so no total is given: each row's saving is
what it alone could save.  Rules that fired without an estimate follow the ranked rows (rank 0).
"""
from __future__ import annotations

import math
import re
from typing import Dict, List, Optional

import numpy as np
import pandas as pd

PLAN_TABLE = "plan"
PLAN_COLUMNS = ["rank", "action", "ops", "module", "saving_ns", "saving_pct", "source", "evidence", "confidence",
                "applies_ns", "launches", "key"]
# The step time a saving is a share of, and how it was found (the first the capture has).
DENOMINATORS = ("step_time_breakdown", "gpu_activity", "kernels")

# What a PyTorch user does about a rule, by Nsight Compute's rule id.
RULE_ACTIONS = {
    "AchievedOccupancy": "more warps in flight: a larger batch or a kernel tuned for this shape (torch.compile mode='max-autotune')",
    "TheoreticalOccupancy": "fewer registers or less shared memory per block: a kernel tuned for this shape (torch.compile mode='max-autotune')",
    "LaunchConfiguration": "more work per launch: a larger batch, or fuse small launches (torch.compile this region, CUDA graphs)",
    "WorkloadImbalance": "even out the work across SMs: shapes that divide evenly (multiples of 8 / 64), a larger batch",
    "MemoryCacheAccessPattern": "contiguous, aligned accesses: channels_last for convolutions, .contiguous() before the op",
    "UncoalescedGlobalAccess": "coalesced global accesses: channels_last for convolutions, .contiguous() before the op",
    "UncoalescedSharedAccess": "a kernel without shared-memory bank conflicts (a tuned or fused kernel: torch.compile)",
    "SharedMemoryConflicts": "a kernel without shared-memory bank conflicts (a tuned or fused kernel: torch.compile)",
    "IssueSlotUtilization": "keep the schedulers busy: more work per launch, fewer dependent instructions (fuse: torch.compile)",
    "HighPipeUtilization": "move work off the busiest pipeline: tensor-core precisions (bf16 / tf32) or a fused kernel",
    "FPInstructions": "fused multiply-adds and tensor cores: bf16 / tf32 (torch.backends.cuda.matmul.allow_tf32), a compiled kernel",
    "CPIStall": "hide the stall the rule names: more warps (larger batch) or fewer dependent loads (a fused kernel)",
    "ThreadDivergence": "a kernel without divergent branches for this shape (torch.compile, or a padded shape)",
    "MemoryL2Compression": "L2 compression of writes: set by the allocator, not from PyTorch's caching allocator (low priority)",
}
RULE_ACTIONS["Occupancy"] = RULE_ACTIONS["AchievedOccupancy"]  # older reports' name of the occupancy rule
# Rules about the measurement itself (sampling intervals), not about the program: not plan rows.
MEASUREMENT_RULES = {"PMSamplingData", "PCSamplingData"}
GENERIC_RULE_ACTION = "follow Nsight Compute's advice for this rule (its message, in the evidence)"
IDLE_ACTIONS = {
    "data loading": "feed the GPU faster: DataLoader(num_workers>0, pin_memory=True, persistent_workers=True)",
    "file/socket": "move reads off the training loop: prefetch in DataLoader workers",
    "CUDA synchronisation": "remove host syncs in the step (.item(), .cpu(), print of a CUDA tensor, torch.cuda.synchronize)",
}
# The same causes in a program that is not PyTorch's (an Nsight Systems or rocprof capture of C++ / CUDA).
IDLE_ACTIONS_NATIVE = {
    "data loading": "overlap data loading with GPU work: a loader thread, double-buffered pinned host buffers",
    "file/socket": "overlap reads with GPU work: read ahead on another thread",
    "CUDA synchronisation": "synchronise less: events and stream waits instead of device-wide synchronisation",
}
COMMUNICATION_ACTION = "overlap communication with compute: DDP bucket_cap_mb, gradient accumulation, no_sync"
DATALOADER_ACTION = IDLE_ACTIONS["data loading"]


def _speedup(rule: dict) -> Optional[float]:
    try:
        value = float(rule.get("estimated_speedup_pct"))
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value > 0 else None


def step_time(profile, tables: Dict[str, pd.DataFrame], kernel_ns: float = 0.0) -> tuple:
    """(ns, words): the time a saving is a share of: the steps' total, else the trace's span, else
    the profiled kernels' time (a report without a timeline; `kernel_ns` where no profile is given)."""
    steps = tables.get("step_time_breakdown")
    if steps is not None and len(steps) and "total_ns" in steps:
        n = len(steps)
        return float(steps["total_ns"].sum()), "the profiled step's time" if n == 1 else f"the {n} profiled steps' time"
    activity = tables.get("gpu_activity")
    if activity is not None and len(activity) and "span_ns" in activity:
        return float(activity["span_ns"].max()), "the capture's span"
    if profile is not None and len(profile.kernels):
        kernel_ns = float(np.nansum(profile.kernels["duration_ns"].to_numpy(dtype=float)))
    return kernel_ns, "the profiled kernels' time"


def _group_of(kernels: pd.DataFrame) -> np.ndarray:
    """Each launch's operator where the trace names one, else its kernel name."""
    names = kernels["name"].astype(str).to_numpy(dtype=object)
    if "op" not in kernels.columns:
        return names
    ops = kernels["op"].fillna("").astype(str).to_numpy(dtype=object)
    return np.where(ops != "", ops, names)


def rule_rows(profile) -> List[dict]:
    """One row per (operator, rule) over the launches whose rule results carry an estimate, and one
    unranked row per (operator, rule) that fired (a warning or optimisation) without one."""
    kernels = profile.kernels
    if not profile.rules or len(profile.rules) != len(kernels):
        return []
    groups = _group_of(kernels)
    durations = kernels["duration_ns"].to_numpy(dtype=float)
    acc: Dict[tuple, dict] = {}
    for i, rules in enumerate(profile.rules):
        if not rules or not math.isfinite(durations[i]):
            continue
        best: Dict[str, tuple] = {}  # rule id -> (speedup, type, message): its largest estimate here
        for rule in rules:
            rule_id, speedup = str(rule.get("rule") or ""), _speedup(rule)
            if not rule_id or rule_id in MEASUREMENT_RULES:
                continue
            current = best.get(rule_id)
            if current is None or (speedup or 0) > (current[0] or 0):
                best[rule_id] = (speedup, str(rule.get("speedup_type") or ""), str(rule.get("title") or ""),
                                 str(rule.get("message") or ""), str(rule.get("type") or ""))
        for rule_id, (speedup, kind, title, message, msg_type) in best.items():
            if speedup is None and msg_type not in ("2", "3"):  # an info or ok result: nothing to act on
                continue
            row = acc.setdefault((groups[i], rule_id), {"saving": 0.0, "applies": 0.0, "launches": 0, "local": 0,
                                                       "estimated": 0, "title": title, "message": message,
                                                       "top": -1.0})
            row["applies"] += durations[i]
            row["launches"] += 1
            if speedup is not None:
                row["saving"] += durations[i] * speedup / 100.0
                row["estimated"] += 1
                row["local"] += kind == "local"
                if speedup > row["top"]:  # the evidence quotes the launch with the largest estimate
                    row.update(top=speedup, title=title or row["title"], message=message)
    out = []
    for (group, rule_id), row in acc.items():
        estimated = row["estimated"] > 0
        what = f"{rule_id} ({row['title']})" if row["title"] else rule_id
        evidence = (f"Nsight Compute {what} on {row['launches']} launch{'es' if row['launches'] != 1 else ''} "
                    f"({_ms(row['applies'])})" + (f", up to {row['top']:.1f}% each" if estimated else ", no estimate")
                    + f": {_first_sentence(row['message'])}")
        confidence = ("no estimate from Nsight Compute" if not estimated else
                      "ncu estimate, local: an upper bound (the part of each launch the rule looks at)"
                      if row["local"] else "ncu estimate, global: of each launch's whole duration")
        out.append({"action": RULE_ACTIONS.get(rule_id, GENERIC_RULE_ACTION), "ops": group,
                    "saving_ns": row["saving"] if estimated else math.nan, "source": "ncu rule",
                    "evidence": evidence, "confidence": confidence, "applies_ns": row["applies"],
                    "launches": row["launches"], "key": f"ncu rule|{group}|{rule_id}"})
    return out


def headroom_rows(tables: Dict[str, pd.DataFrame]) -> List[dict]:
    """Per operator: its shapes' GPU time minus their time at the roof (FLOPs at the compute peak or
    bytes at the DRAM peak, whichever takes longer), where the shape model counts both."""
    shapes = tables.get("op_shapes")
    if shapes is None or shapes.empty:
        return []
    calls = shapes["calls"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        compute = shapes["flops_per_call"].to_numpy(dtype=float) / shapes["peak_flop_per_s"].to_numpy(dtype=float)
        memory = shapes["bytes_per_call"].to_numpy(dtype=float) / shapes["peak_bytes_per_s"].to_numpy(dtype=float)
    at_roof = np.fmax(compute, memory) * calls * 1e9
    measured = shapes["gpu_ns"].to_numpy(dtype=float)
    known = np.isfinite(at_roof) & np.isfinite(measured) & (measured > 0)
    frame = pd.DataFrame({"op": shapes["op"][known].to_numpy(), "measured": measured[known], "roof": at_roof[known],
                          "category": shapes["category"][known].to_numpy(), "bound": shapes["bound"][known].to_numpy()})
    out = []
    for op, group in frame.groupby("op", sort=False):
        measured_ns, roof_ns = float(group["measured"].sum()), float(group["roof"].sum())
        saving = max(0.0, measured_ns - roof_ns)
        if saving <= 0:
            continue
        longest = group.loc[group["measured"].idxmax()]
        out.append({"action": _headroom_action(str(longest["category"]), str(longest["bound"])), "ops": op,
                    "saving_ns": saving, "source": "headroom",
                    "evidence": (f"{_ms(measured_ns)} measured against {_ms(roof_ns)} at the roof from its shapes' FLOPs "
                                 f"and bytes ({len(group)} shape{'s' if len(group) != 1 else ''}, "
                                 f"{100 * roof_ns / measured_ns:.0f}% of the roof's speed)"),
                    "confidence": "shape model: an upper bound (no kernel reaches its roof)",
                    "applies_ns": measured_ns, "launches": math.nan, "key": f"headroom|{op}|"})
    return out


def _headroom_action(category: str, bound: str) -> str:
    if category in ("GEMM", "CONV") or bound == "compute":
        return ("tensor cores at full rate: bf16 / tf32, shapes in multiples of 8, channels_last for convolutions, "
                "a larger batch")
    return "fewer bytes: fuse it with its neighbours (torch.compile this region), keep activations in bf16"


def idle_rows(tables: Dict[str, pd.DataFrame], pytorch: bool = True) -> List[dict]:
    """The GPU's idle time per cause the CPU side shows, and the step breakdown's exclusive
    data-loading and communication time; actions in PyTorch's words where the capture shows PyTorch."""
    out = []
    actions = IDLE_ACTIONS if pytorch else IDLE_ACTIONS_NATIVE
    attribution = tables.get("gpu_idle_attribution")
    if attribution is not None and len(attribution):
        for row in attribution.to_dict("records"):
            activity, overlap = str(row.get("activity") or ""), float(row.get("idle_overlap_ns") or 0)
            # "gaps starting in a synchronisation call" measures the same stalls again: one row per cause.
            action = next((a for word, a in actions.items() if activity.startswith(word)), None)
            if action is None or not overlap > 0:
                continue
            out.append({"action": action, "ops": "", "saving_ns": overlap, "source": "idle",
                        "evidence": (f"the GPU idled {_ms(overlap)} during {activity} ({row.get('intervals', 0)} "
                                     f"interval(s), {float(row.get('idle_share_pct') or 0):.1f}% of all idle time)"),
                        "confidence": "measured idle time: an upper bound (the next work may not start earlier)",
                        "applies_ns": overlap, "launches": math.nan, "key": f"idle|{activity}|"})
    steps = tables.get("step_time_breakdown")
    if steps is not None and len(steps):
        for column, action, what in (("dataloader_ns", DATALOADER_ACTION, "the DataLoader"),
                                     ("communication_ns", COMMUNICATION_ACTION, "communication not overlapped")):
            total = float(steps[column].sum()) if column in steps else 0.0
            if total > 0:
                out.append({"action": action, "ops": "", "saving_ns": total, "source":
                            "communication" if column.startswith("comm") else "idle",
                            "evidence": f"{_ms(total)} of the steps in {what} (step breakdown, time no kernel overlaps)",
                            "confidence": "measured: an upper bound", "applies_ns": total, "launches": math.nan,
                            "key": f"steps|{column}|"})
    return out


# Advice findings whose figures bound a saving: id -> (the figure that bounds it, what it is, action).
FINDING_ROWS = {
    "torch.pageable_copies": (("host_ns", "copy_ns"), "the time pageable copies held the host (or took on the GPU)",
                        "pin the host side: DataLoader(pin_memory=True), tensor.pin_memory(), then .to(device, non_blocking=True)"),
    "torch.launch_bound": (("idle_in_steps_ns",), "the GPU's idle time in the steps while it waited for launches",
                     "launch fewer, larger kernels: torch.compile(mode='reduce-overhead') or CUDA graphs, fused optimizers"),
}
FINDING_ROWS["gpu.pageable_copies"] = FINDING_ROWS["torch.pageable_copies"]  # Nsight Systems' (its GPU time)


def finding_rows(findings) -> List[dict]:
    """Rows from the advice findings whose own figures bound a saving (pageable copies, a launch-bound
    step): the finding's text is the evidence."""
    out = []
    ids = {finding.id for finding in findings or ()}
    for finding in findings or ():
        spec = FINDING_ROWS.get(finding.id)
        if spec is None or (finding.id == "gpu.pageable_copies" and "torch.pageable_copies" in ids):
            continue  # one row per cause: the PyTorch rule's figures where both rules saw the copies
        names, what, action = spec
        figures = {name: f.value for name, f in finding.figures.items() if isinstance(f.value, (int, float))}
        if finding.id == "torch.launch_bound" and "step_ns" in figures and "gpu_idle_pct" in figures:
            figures["idle_in_steps_ns"] = figures["step_ns"] * figures["gpu_idle_pct"] / 100.0
        saving = next((float(figures[n]) for n in names if n in figures and figures[n] > 0), None)
        if saving is None:
            continue
        # The advice phrased its remedy for this capture (PyTorch's levers or CUDA / HIP calls): its first sentence.
        action = _first_sentence(finding.remedy).rstrip(".") or action
        out.append({"action": action, "ops": "", "saving_ns": saving, "source": "idle" if finding.id == "torch.launch_bound"
                    else "copies", "evidence": finding.text, "confidence": f"upper bound: {what}",
                    "applies_ns": saving, "launches": math.nan, "key": f"advice|{finding.id}|"})
    return out


def op_modules(module_ops: Optional[pd.DataFrame]) -> Dict[str, str]:
    """{operator: the nn.Module path where it spent most of its GPU time, with that path's share when
    the operator ran in several ('/ResNet_0/Conv2d_0 (12% of its time in modules)'), '(backward)'
    after it for the backward pass of that module} (module_ops, traces recorded with modules); {}
    without the table."""
    if module_ops is None or module_ops.empty:
        return {}
    frame = module_ops.assign(_time=module_ops["device_ns"].astype(float))
    if "pass" in frame.columns:  # a backward operator: the module whose forward made its autograd node
        frame["path"] = frame["path"].where(frame["pass"] != "backward", frame["path"] + " (backward)")
    # An operator without GPU time of its own (aten::convolution: its child launches) by its calls.
    untimed = frame.groupby("op")["_time"].transform("sum") <= 0
    frame["_weight"] = np.where(untimed, frame["calls"].astype(float), frame["_time"])
    total = frame.groupby("op")["_weight"].sum()
    ranked = frame.sort_values(["_weight", "calls", "path"], ascending=[False, False, True], kind="stable")
    out = {}
    for op, path, weight, timed in zip(*(ranked.drop_duplicates("op")[c] for c in ("op", "path", "_weight", "_time"))):
        share = weight / total[op] if total[op] > 0 else 1.0
        what = "time" if total[op] > 0 and not untimed[ranked.index[ranked["op"] == op][0]] else "calls"
        out[op] = path if share >= 0.999 else f"{path} ({100 * share:.0f}% of its {what} in modules)"
    return out


def plan_table(profile, tables: Dict[str, pd.DataFrame], findings=()) -> pd.DataFrame:
    """PLAN_COLUMNS: the candidates ranked by saving (rank 1 first); rules without an estimate after
    them with rank 0."""
    from .context import capture_context
    pytorch = profile.torch is not None or capture_context(profile).pytorch
    rows = rule_rows(profile) + headroom_rows(tables) + idle_rows(tables, pytorch) + finding_rows(findings)
    frame = pd.DataFrame(rows, columns=[c for c in PLAN_COLUMNS if c not in ("rank", "saving_pct", "module")])
    # Text typed as the other text columns (pandas 3's str): a run read back must equal the analysis.
    modules = frame["ops"].map(op_modules(tables.get("module_ops"))).astype(object)  # all-NaN maps to float
    frame["module"] = modules.where(modules.notna(), "").astype(frame["ops"].dtype)
    total, _ = step_time(profile, tables)
    frame["saving_pct"] = 100.0 * frame["saving_ns"] / total if total > 0 else math.nan
    ranked = frame["saving_ns"].notna()
    frame = pd.concat([frame[ranked].sort_values(["saving_ns", "key"], ascending=[False, True], kind="stable"),
                       frame[~ranked].sort_values(["applies_ns", "key"], ascending=[False, True], kind="stable")])
    frame.insert(0, "rank", np.concatenate([np.arange(1, int(ranked.sum()) + 1), np.zeros(int((~ranked).sum()), dtype=int)]))
    return frame[PLAN_COLUMNS].reset_index(drop=True)


def plan(profile, analysis) -> None:
    """Pipeline step, after the advice: summaries["plan"] where anything can be ranked (a capture
    with rule results, op shapes, a timeline or advice with a bounded saving)."""
    tables = analysis.tables(profile)
    table = plan_table(profile, tables, analysis.findings)
    if len(table):
        table.attrs["units"] = {"saving_ns": "ns", "applies_ns": "ns", "saving_pct": "%"}
        table.attrs["of"] = step_time(profile, tables)[1]
        analysis.summaries[PLAN_TABLE] = table


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms" if ns < 1e9 else f"{ns / 1e9:.3f} s"


def _first_sentence(message: str) -> str:
    """The message's first sentence, Nsight Compute's link markup as its words."""
    text = re.sub(r"@url:([^:@]*):[^@]*@", r"\1", " ".join(message.split()))
    text = re.sub(r"@section:[^:@]*:([^@]*)@", r"\1", text)
    end = text.find(". ")
    return text[:end + 1] if 0 < end < 300 else text[:300]


# ------------------------------------------------------------------ after a change: what happened
DONE, PARTLY = 0.8, 0.2  # shares of a row's expected saving that the measured saving reached


def row_time(tables: Dict[str, pd.DataFrame], key: str, ops: str) -> Optional[float]:
    """The time a plan row concerns, measured in one run's tables the same way on either side: an
    operator's GPU time (op_gpu_time, its own for a rule, with its callees' for headroom; a kernel
    name's time in the compare table where the trace names no operator), the idle time of an activity, a step breakdown column.  0 where the run has
    the table and not the operator (it no longer runs); None where the run cannot tell."""
    source, what = key.split("|")[:2]
    if source in ("ncu rule", "headroom"):
        ops_table, kernels = tables.get("op_gpu_time"), tables.get("compare_kernels")
        if ops_table is not None and len(ops_table):
            # A rule's launches are the operator's own (the innermost op of each kernel); a shape's GPU
            # time includes the operators it called (op_shapes gpu_ns), so headroom is its subtree's.
            column = "subtree_gpu_ns" if source == "headroom" else "direct_gpu_ns"
            return float(ops_table.loc[ops_table["op"] == ops, column].sum())
        if kernels is not None and len(kernels):
            return float(kernels.loc[kernels["name"] == ops, "total_ns"].sum())
        return None
    if source == "idle":
        attribution = tables.get("gpu_idle_attribution")
        if attribution is None:
            return None
        return float(attribution.loc[attribution["activity"] == what, "idle_overlap_ns"].sum())
    if source == "steps":
        steps = tables.get("step_time_breakdown")
        return float(steps[what].sum()) if steps is not None and what in steps else None
    return None


def plan_outcomes(plan: pd.DataFrame, before: Dict[str, pd.DataFrame], after: Dict[str, pd.DataFrame],
                  steps=(1, 1), limit: int = 15) -> List[dict]:
    """For each of the first `limit` ranked rows of the baseline's plan: its time before and after
    (per step where `steps` gives each side's step count), the saving measured against the one
    expected, and what happened: done (>= 80% of the expected saving), partly (>= 20%), not, or
    worse (the time grew).  Rows neither side can measure are left out."""
    out = []
    ranked = plan[plan["rank"] > 0]
    for row in (ranked if limit <= 0 else ranked.head(limit)).to_dict("records"):
        b, a = row_time(before, row["key"], row["ops"]), row_time(after, row["key"], row["ops"])
        if b is None or a is None:
            continue
        b, a = b / steps[0], a / steps[1]
        expected, saved = row["saving_ns"] / steps[0], b - a
        status = ("worse" if saved < 0 else "done" if saved >= DONE * expected else
                  "partly" if saved >= PARTLY * expected else "not")
        out.append({"rank": int(row["rank"]), "key": row["key"], "ops": row["ops"], "action": row["action"],
                    "expected_ns": expected, "before_ns": b, "after_ns": a, "saved_ns": saved, "status": status})
    return out
