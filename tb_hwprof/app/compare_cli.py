"""`tb-hwprof compare BASELINE RUN`: the plugin's Compare in a terminal, and a gate for CI.

Each side is an exported run folder (<logdir>/<run>, read back) or a profiler report (read and
labelled on the fly).  Prints the paired kernels (how each was paired), NVTX phases where both
runs have them, the totals with the warnings that qualify them, and what appeared or vanished;
--fail-if-slower turns it into a check that exits 1 naming what regressed.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
from pathlib import Path
from typing import List, Optional

from ..core.errors import HwprofError, InputError
from .text_tables import NAME_WIDTH, section as _section, short_name, table as _table  # noqa: F401

# numpy and pandas are imported where used: `tb-hwprof --help` (and the export, which registers
# this command too) must not pay pandas' import for a command it does not run.

COMPARE_EPILOG = """\
examples:
  tb-hwprof compare runs/baseline runs/candidate              # two exported runs
  tb-hwprof compare v1.ncu-rep v8.ncu-rep                     # two reports, read on the fly
  tb-hwprof compare v1.ncu-rep v6.ncu-rep --pair 'matrix_addition2D:matrix_addition1D'
  tb-hwprof compare runs/main runs/pr --format markdown       # a table for a pull-request comment
  tb-hwprof compare runs/main runs/pr --fail-if-slower 5      # CI: exit 1 when 5% slower
  tb-hwprof compare runs/main runs/pr --fail-if-slower 10 --metric dram_bytes

Kernels are paired by mangled, demangled or short name, then the one kernel left on each side,
then a launch configuration found once on each side; --pair adds your own (BASELINE_KERNEL:RUN_KERNEL,
each a demangled, mangled or unambiguous short name).  --fail-if-slower PCT fails when the total,
or any paired kernel taking at least --min-time-us on either side, is more than PCT% worse.
"""

DEFAULT_MIN_TIME_US = 10.0  # below this a kernel's total time is mostly launch jitter
DEFAULT_LIMIT = 30
HIGHER_IS_WORSE, HIGHER_IS_BETTER = "higher-is-worse", "higher-is-better"
# Default gate direction by column-name ending (time, bytes, resources: less is better).
_DIRECTION_BY_ENDING = (("_ns", HIGHER_IS_WORSE), ("_bytes", HIGHER_IS_WORSE), ("bytes_read", HIGHER_IS_WORSE),
                        ("bytes_write", HIGHER_IS_WORSE), ("registers_per_thread", HIGHER_IS_WORSE),
                        ("_pct", HIGHER_IS_BETTER), ("flop_per_s", HIGHER_IS_BETTER))


def add_compare_command(sub) -> None:
    import argparse
    p = sub.add_parser("compare", help="compare two runs or reports kernel by kernel (and gate CI on it)",
                       description="Compare two profiles kernel by kernel: exported run folders or report files.",
                       epilog=COMPARE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("baseline", metavar="BASELINE", help="exported run folder (<logdir>/<run>) or profiler report")
    p.add_argument("run", metavar="RUN", help="exported run folder or profiler report to compare with BASELINE")
    p.add_argument("--format", choices=("table", "json", "markdown"), default="table", help="output (default table)")
    p.add_argument("--pair", action="append", default=[], metavar="BASE_KERNEL:RUN_KERNEL",
                   help="pair these two kernels (repeatable); names as the kernels table has them")
    p.add_argument("--fail-if-slower", type=float, metavar="PCT",
                   help="exit 1 when the total or a paired kernel is more than PCT%% worse")
    p.add_argument("--min-time-us", type=float, default=DEFAULT_MIN_TIME_US, metavar="US",
                   help=f"paired kernels gated only from this total time on either side (default {DEFAULT_MIN_TIME_US:g})")
    p.add_argument("--metric", default="duration_ns", metavar="COLUMN",
                   help="kernels-table column to gate on (default duration_ns); time, bytes and registers: "
                        "higher is worse; %% and FLOP/s: higher is better")
    p.add_argument("--direction", choices=(HIGHER_IS_WORSE, HIGHER_IS_BETTER),
                   help="which way --metric gets worse (needed for columns of no known direction)")
    p.add_argument("--limit", type=int, default=DEFAULT_LIMIT, metavar="N",
                   help=f"rows per table (default {DEFAULT_LIMIT}; 0: all)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=cmd_compare)


# -- the two sides --------------------------------------------------------------------------------
@dataclasses.dataclass
class Side:
    path: str
    kernels: Optional[pd.DataFrame]  # None where the run's compare table stood in for its launches
    info: object  # compare.RunInfo
    phases: Optional[pd.DataFrame]
    operators: Optional[pd.DataFrame] = None  # op_shapes of a PyTorch run: its operators by input shapes
    kernel_set: object = None  # compare.KernelSet, built from `kernels` where not given


def read_compare_table(run_dir: Path, manifest: dict) -> Optional[pd.DataFrame]:
    """The run's per-instantiation compare table (analysis/compare.compare_table), checked; None for a
    run exported before it (or without kernels): those compare from their kernels table."""
    from ..analysis.compare import COMPARE_TABLE, check_compare_table
    from ..logdir import reader
    return reader.read_summary(run_dir, manifest, COMPARE_TABLE,
                               check=lambda frame: check_compare_table(frame, manifest.get("kernel_count")))


def _phase_table(run_dir: Path, manifest: dict) -> Optional[pd.DataFrame]:
    """The run's NVTX ranges table (only that summary is read), None without one."""
    from ..analysis.trace_views import phase_source
    from ..logdir import reader
    for name in ("nvtx_phases", "nvtx_sum"):
        frame = reader.read_summary(run_dir, manifest, name)
        if frame is not None:
            return frame if phase_source({name: frame}) else None
    return None


def load_side(path: str, metric: str = "duration_ns") -> Side:
    """An exported run (its kernels table, manifest and NVTX table) or a report read on the fly."""
    from ..analysis.compare import (RunInfo, compared_columns, devices_of, devices_that_ran, kernel_set,
                                    kernel_set_from_table, step_count)
    from ..analysis.pipeline import label_tables
    from ..analysis.trace_views import phase_source
    from ..logdir import metadata, reader
    from ..logdir.kernel_columns import read_kernel_columns
    from ..readers.detect import read
    where = Path(path)
    if where.is_dir() and (reader.asset_dir(where) / metadata.MANIFEST).is_file():
        manifest = reader.read_manifest(where)
        # The compare table has every per-key figure but a gate on another metric's launches.
        table = read_compare_table(where, manifest) if metric == "duration_ns" else None
        if table is not None:
            kernels, kset = None, kernel_set_from_table(table)
        else:
            kernels = read_kernel_columns(where, manifest, compared_columns(metric))
            kset = kernel_set(kernels)
        info = RunInfo((manifest.get("provenance") or {}).get("tool", ""),
                       devices_of(manifest.get("devices") or [], kset.device_ids),
                       step_count(reader.read_summary(where, manifest, "step_time_breakdown")))
        return Side(path, kernels, info, _phase_table(where, manifest), reader.read_summary(where, manifest, "op_shapes"), kset)
    if not where.exists():
        raise InputError(where, "no such file or folder",
                         "give an exported run folder (<logdir>/<run>) or a profiler report")
    profile = label_tables(read(where))
    info = RunInfo(profile.provenance.tool, devices_that_ran([d.to_dict() for d in profile.devices], profile.kernels),
                   _steps_of(profile))
    source = phase_source(profile.summaries)
    return Side(path, profile.kernels, info, profile.summaries[source] if source else None, _op_shapes(profile),
                kernel_set(profile.kernels))


def _steps_of(profile) -> Optional[int]:
    """A PyTorch trace's profiler steps, as its export's step time breakdown would list them."""
    if getattr(profile, "torch", None) is None:
        return None
    from ..analysis.compare import step_count
    from ..analysis.torch_steps import step_spans
    return step_count(step_spans(profile.torch))


def _op_shapes(profile) -> Optional[pd.DataFrame]:
    """A PyTorch trace's operators by input shapes (the export's op_shapes table), None for other reports."""
    if getattr(profile, "torch", None) is None:
        return None
    from ..analysis.torch_shapes import op_shapes
    return op_shapes(profile.torch, profile.devices, profile.provenance.source_path)


# -- the gate -------------------------------------------------------------------------------------
def metric_direction(column: str, stated: Optional[str]) -> str:
    if stated:
        return stated
    for ending, direction in _DIRECTION_BY_ENDING:
        if column.endswith(ending):
            return direction
    raise HwprofError(f"--metric {column}: no known direction for this column; add --direction "
                      f"{HIGHER_IS_WORSE} or --direction {HIGHER_IS_BETTER}")


def _check_metric(column: str, sides) -> None:
    import pandas as pd
    if column == "duration_ns":  # every kernels table has it (a side read from its compare table has no launches)
        return
    for side in sides:
        if column not in side.kernels.columns or not pd.api.types.is_numeric_dtype(side.kernels[column]):
            numeric = [c for c in side.kernels.columns if pd.api.types.is_numeric_dtype(side.kernels[c])]
            raise HwprofError(f"--metric {column}: not a numeric column of {side.path}'s kernels table "
                              f"(numeric columns: {', '.join(numeric)})")


def _worse_by(base: Optional[float], run: Optional[float], direction: str) -> Optional[float]:
    """How much worse run is than base, in % of base (negative: better); None where not comparable."""
    if base is None or run is None or not math.isfinite(base) or not math.isfinite(run) or base <= 0:
        return None
    change = (run - base) / base * 100
    return change if direction == HIGHER_IS_WORSE else -change


def _overall(kernels: pd.DataFrame, column: str) -> Optional[float]:
    """The run's duration-weighted mean of `column` (durations: the kernel set's total)."""
    from ..analysis.compare import _none
    both = kernels[column].notna() & kernels["duration_ns"].notna()
    weight = kernels["duration_ns"][both].sum()
    return _none((kernels[column][both] * kernels["duration_ns"][both]).sum() / weight) if weight > 0 else None


def gate(doc: dict, base_set, run_set, base: Side, run: Side, args) -> dict:
    """{metric, direction, limit_pct, regressions: [{what, base, run, worse_pct}]}: the total and every paired
    kernel taking at least --min-time-us on a side, more than --fail-if-slower % worse."""
    column, pct = args.metric, args.fail_if_slower
    _check_metric(column, (base, run))
    direction = metric_direction(column, args.direction)
    regressions = []
    # Time is gated on the comparison's basis (per step where both runs have steps): the document's figures.
    by_time = column == "duration_ns"
    b_total, r_total = ((doc["totals"]["base_ns"], doc["totals"]["run_ns"]) if by_time
                        else (_overall(base.kernels, column), _overall(run.kernels, column)))
    worse = _worse_by(b_total, r_total, direction)
    if worse is not None and worse > pct:
        regressions.append({"what": "total", "base": b_total, "run": r_total, "worse_pct": worse})
    b_values, r_values = (None, None) if by_time else (base_set.aggregate(column), run_set.aggregate(column))
    min_ns = args.min_time_us * 1e3
    for m in doc["matched"]:
        if max(m["base_ns"] or 0, m["run_ns"] or 0) < min_ns:
            continue
        b, r = (m["base_ns"], m["run_ns"]) if by_time else (b_values.get(m["key"]), r_values.get(m["run_key"]))
        worse = _worse_by(b, r, direction)
        if worse is not None and worse > pct:
            regressions.append({"what": _pair_name(m), "base": b, "run": r, "worse_pct": worse})
    return {"metric": column, "direction": direction, "limit_pct": pct, "min_time_us": args.min_time_us,
            "regressions": regressions}


# -- output ---------------------------------------------------------------------------------------
def _duration(ns: Optional[float]) -> str:
    from ..core.plain import duration_text
    return duration_text(ns)


def _times(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _calls(value) -> str:
    """A call count: whole for a whole run, to 3 significant digits per step (e.g. 53 / 3 = 17.7)."""
    return "-" if value is None else f"{value:.3g}" if value != int(value) else f"{int(value)}"


def _value(value: Optional[float], column: str) -> str:
    if column.endswith("_ns"):
        return _duration(value)
    return "-" if value is None else f"{value:.4g}"


def _pair_name(m: dict) -> str:
    return m["base_name"] if m["base_name"] == m["run_name"] else f"{m['base_name']} -> {m['run_name']}"


def _limited(items: list, limit: int):
    return (items, 0) if limit <= 0 else (items[:limit], max(0, len(items) - limit))



def render_text(doc: dict, base: Side, run: Side, gate_result: Optional[dict], limit: int, markdown: bool) -> str:
    out = [f"baseline: {base.path} ({base.info.tool}, {', '.join(base.info.devices) or '?'})",
           f"run:      {run.path} ({run.info.tool}, {', '.join(run.info.devices) or '?'})"]
    if markdown:
        out = [f"- {line}" for line in out]
    basis = doc.get("basis") or {}
    if basis:
        out.append(f"{'- ' if markdown else ''}basis: {basis['text']}")
    for w in doc["warnings"]:
        out.append(f"{'- **WARNING**' if markdown else 'WARNING:'} {w['text']}")
    t = doc["totals"]
    qualifier = "" if doc["comparable"] else " (not a result: see the warnings)"
    per_step = " per step" if basis.get("per_step") else ""
    out.append(f"\n{'**Totals' + per_step + '**' if markdown else 'totals' + per_step}: baseline {_duration(t['base_ns'])}, "
               f"run {_duration(t['run_ns'])}, speed-up {_times(t['speedup'])}{qualifier}")
    matched, more = _limited(doc["matched"], limit)
    out.append(_section(f"paired kernels ({len(doc['matched'])}{'; time and calls per step' if per_step else ''})", markdown))
    rows = [[_pair_name(m), _duration(m["base_ns"]), _duration(m["run_ns"]), _times(m["speedup"]),
             f"{_calls(m['base_launches'])} / {_calls(m['run_launches'])}", m["paired_by"]] for m in matched]
    out += _table(["kernel", "baseline", "run", "speed-up", "calls", "paired by"], rows, markdown) if rows else ["none"]
    if more:
        out.append(f"... {more} more (--limit 0 shows all)")
    out += _phases_text(doc.get("phases"), limit, markdown)
    out += _operators_text(doc.get("operators"), limit, markdown, bool(per_step))
    out += _cross_tool_text(doc.get("cross_tool"), doc["matched"], markdown)
    labels = doc.get("labels") or {}
    for title, key, side in (("vanished: only in the baseline", "only_in_base", "base"),
                             ("appeared: only in the run", "only_in_run", "run")):
        items, more = _limited(doc[key], limit)
        out.append(_section(f"{title} ({len(doc[key])})", markdown))
        rows = [[labels.get(side, {}).get(o["key"], o["name"]), _duration(o["total_ns"])] for o in items]
        out += _table(["kernel", "time"], rows, markdown) if rows else ["none"]
        if more:
            out.append(f"... {more} more")
    out += _suggested_text(doc.get("suggested_pairs") or [], markdown)
    from .plan_cli import outcome_text
    out += outcome_text(doc.get("plan_outcome") or [], markdown)
    if gate_result is not None:
        out += _gate_text(gate_result, markdown)
    return "\n".join(out) + "\n"


def _suggested_text(suggested: List[dict], markdown: bool) -> List[str]:
    """Leftovers of one launch configuration on each side: a pair only the user can confirm."""
    if not suggested:
        return []
    out = [_section(f"not paired, though of one launch configuration ({len(suggested)}): confirm with --pair", markdown)]
    rows = [[f"{s['base_name']} -> {s['run_name']}", s["launch_config"] or "",
             f"--pair '{s['base_key']}:{s['run_key']}'"] for s in suggested]
    return out + _table(["kernels", "launch configuration", "to pair them"], rows, markdown)


def _phases_text(phases: Optional[dict], limit: int, markdown: bool) -> List[str]:
    if not phases:
        return []
    items, more = _limited(phases.get("matched") or [], limit)
    out = [_section(f"NVTX phases matched by name ({len(phases.get('matched') or [])})", markdown)]
    rows = [[p["name"], _duration(p["base_ns"]), _duration(p["run_ns"]), _times(p["speedup"]),
             _duration(p.get("base_gpu_ns")), _duration(p.get("run_gpu_ns")), _times(p.get("gpu_speedup"))] for p in items]
    out += _table(["range", "baseline", "run", "speed-up", "GPU baseline", "GPU run", "GPU speed-up"], rows, markdown) \
        if rows else ["none"]
    return out + ([f"... {more} more"] if more else [])


def _operators_text(ops: Optional[dict], limit: int, markdown: bool, per_step: bool = False) -> List[str]:
    """Operators paired by name and input shapes (PyTorch runs: across vendors where kernels are not)."""
    if not ops:
        return []
    items, more = _limited(ops["matched"], limit)
    t = ops["totals"]
    out = [_section(f"operators paired by name and input shapes ({len(ops['matched'])}; "
                    f"{len(ops['only_in_base'])} only in the baseline, {len(ops['only_in_run'])} only in the run"
                    f"{'; GPU time per step' if per_step else ''})", markdown)]
    rows = [[o["op"], o["input_dims"], _duration(o["base_ns"]), _duration(o["run_ns"]), _times(o["speedup"])] for o in items]
    out += _table(["operator", "input dims", "baseline GPU", "run GPU", "speed-up"], rows, markdown) if rows else ["none"]
    if more:
        out.append(f"... {more} more (--limit 0 shows all)")
    if rows:
        out.append(f"paired operators: baseline {_duration(t['base_ns'])}, run {_duration(t['run_ns'])}, "
                   f"speed-up {_times(t['speedup'])}")
    return out


def _cross_tool_text(check: Optional[dict], matched: List[dict], markdown: bool) -> List[str]:
    if not check:
        return []
    flagged = [m for m in matched if m.get("cross_tool", {}).get("flagged")]
    out = [_section(f"cross-tool check (ncu on the {check['ncu_side']} side vs {check['trace_tool']}): "
                    f"{len(flagged)} pair(s) differ more than {check['threshold']:g}x per launch", markdown)]
    rows = [[_pair_name(m), _duration(m["cross_tool"]["ncu_ns_per_launch"]),
             _duration(m["cross_tool"]["trace_ns_per_launch"]), _times(m["cross_tool"]["ratio"])] for m in flagged]
    if rows:
        out += _table(["kernel", "ncu / launch", "trace / launch", "ratio"], rows, markdown)
        out.append(f"known causes: {check['causes']}")
    return out


def _gate_text(result: dict, markdown: bool) -> List[str]:
    direction = "higher is worse" if result["direction"] == HIGHER_IS_WORSE else "higher is better"
    head = (f"gate: {result['metric']} ({direction}), fail above {result['limit_pct']:g}% worse "
            f"(kernels from {result['min_time_us']:g} us)")
    out = [_section(head, markdown)]
    if not result["regressions"]:
        return out + ["PASSED: nothing regressed"]
    for r in result["regressions"]:
        out.append(f"{'- ' if markdown else ''}REGRESSED: {r['what']}: {_value(r['base'], result['metric'])} -> "
                   f"{_value(r['run'], result['metric'])} ({r['worse_pct']:+.1f}% worse)")
    return out


# -- the command ----------------------------------------------------------------------------------
def compare_sides(base: Side, run: Side, pairs: List[str]):
    """(document, base kernel set, run kernel set): what /compare serves, for two loaded sides."""
    from ..analysis import compare
    from ..analysis.trace_views import compare_phases
    b_set, r_set = base.kernel_set, run.kernel_set
    try:
        chosen = [compare.resolve_choice(b_set, r_set, p) for p in pairs]
    except ValueError as e:
        raise HwprofError(f"--pair: {e}") from None
    doc = compare.compare_sets(b_set, r_set, chosen, base.info, run.info, (base.operators, run.operators))
    doc["phases"] = compare_phases(base.phases, run.phases) if base.phases is not None and run.phases is not None else None
    return doc, b_set, r_set


def cmd_compare(args) -> int:
    base, run = load_side(args.baseline, args.metric), load_side(args.run, args.metric)
    doc, b_set, r_set = compare_sides(base, run, args.pair)
    from .plan_cli import plan_outcome  # each plan row of the baseline: what happened to its time
    doc["plan_outcome"] = plan_outcome(base.path, run.path, doc.get("basis") or {}, args.limit)
    result = gate(doc, b_set, r_set, base, run, args) if args.fail_if_slower is not None else None
    if args.format == "json":
        from ..logdir.tables import dumps
        text = json.dumps(json.loads(dumps({"base": base.path, "run": run.path, **doc, "gate": result})), indent=1) + "\n"
    else:
        text = render_text(doc, base, run, result, args.limit, args.format == "markdown")
    _print(text)
    return 1 if result is not None and result["regressions"] else 0


def _print(text: str) -> None:
    """Write the result; a reader that stopped early (`| head`) is no error of the comparison."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
