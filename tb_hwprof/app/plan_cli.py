"""`tb-hwprof plan RUN`: the run's ranked optimisation plan (analysis/plan.py) in the terminal, as
markdown or as JSON: from an exported run's plan table, or computed from a report on the fly."""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from ..core.errors import InputError

PLAN_EPILOG = """\
examples:
  tb-hwprof plan runs/baseline                 # an exported run (its plan table)
  tb-hwprof plan trace.pt.trace.json.gz        # a report, analysed on the fly
  tb-hwprof plan runs/baseline --format markdown --limit 10

Each row is one change and the step time it could save, by its own evidence: an Nsight Compute rule's
estimated speedup over the operator's launches (ncu rule), the operator's distance from its roofs
(headroom), or GPU idle time by cause (idle, communication).  Rows may cover the same time, so there is
no total.  After the change, `tb-hwprof compare BEFORE AFTER` shows what happened to each row's time.
"""


def add_plan_command(sub) -> None:
    p = sub.add_parser("plan", help="a run's ranked optimisation plan: which changes could save the most time",
                       description="Rank candidate optimisations of a run by the step time each could save.",
                       epilog=PLAN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", metavar="RUN", help="exported run folder (<logdir>/<run>) or profiler report")
    p.add_argument("--format", choices=("table", "json", "markdown"), default="table", help="output (default table)")
    p.add_argument("--limit", type=int, default=15, metavar="N", help="ranked rows shown (default 15; 0: all)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=cmd_plan)


def load_plan(path: str) -> tuple:
    """(plan table, what its percentages are of) of an exported run or a report read on the fly."""
    import pandas as pd

    from ..analysis.plan import PLAN_TABLE, step_time
    from ..logdir import metadata, reader
    where = Path(path)
    if where.is_dir() and (reader.asset_dir(where) / metadata.MANIFEST).is_file():
        manifest = reader.read_manifest(where)
        table = reader.read_summary(where, manifest, PLAN_TABLE)
        tables = {name: reader.read_summary(where, manifest, name) for name in ("step_time_breakdown", "gpu_activity")}
        kernel_ns = 1e6 * float((manifest.get("summary") or {}).get("total_kernel_time_ms") or 0)
        _, of = step_time(None, {k: v for k, v in tables.items() if v is not None}, kernel_ns)
        return (table if table is not None else pd.DataFrame()), of
    if not where.exists():
        raise InputError(where, "no such file or folder", "give an exported run folder (<logdir>/<run>) or a profiler report")
    from ..analysis.pipeline import analyse
    from ..readers.detect import read
    profile = read(where)
    analysis = analyse(profile)
    table = analysis.summaries.get(PLAN_TABLE)
    return (table if table is not None else pd.DataFrame()), step_time(profile, analysis.tables(profile))[1]


def render_plan(table, of: str, path: str, limit: int, markdown: bool) -> str:
    """The plan as the terminal (or markdown) shows it: ranked rows, their evidence, the unranked rules."""
    from ..core.plain import duration_text
    from .text_tables import table as _table
    if table.empty:
        return (f"{path}: nothing to rank: the run has no Nsight Compute rule results, no operator shapes and no "
                "timeline (export a PyTorch trace, a joined trace + report, or an ncu report with --set full)")
    ranked, unranked = table[table["rank"] > 0], table[table["rank"] == 0]
    shown = ranked if limit <= 0 else ranked.head(limit)
    out = [f"{'## ' if markdown else ''}Plan for {path}: {len(ranked)} ranked change(s), savings as % of {of}",
           "Rows may cover the same time: each saving is what that change alone could save, so they are not added."]
    rows = [[str(int(r["rank"])), duration_text(r["saving_ns"]), f"{r['saving_pct']:.2f}%", r["source"],
             r["ops"] or "(whole step)", r["action"]] for r in shown.to_dict("records")]
    out += [""] + _table(["#", "saving", "share", "source", "where", "what to try"], rows, markdown)
    out.append(f"\n{'### ' if markdown else ''}Evidence")
    out += [f"{'- ' if markdown else ''}#{int(r['rank'])} {f'(module {m}) ' if (m := r.get('module')) else ''}"
            f"{r['evidence']} [{r['confidence']}]" for r in shown.to_dict("records")]
    if len(ranked) > len(shown):
        out.append(f"... {len(ranked) - len(shown)} more ranked row(s) (--limit 0 shows all)")
    if len(unranked):
        out.append(f"\n{'### ' if markdown else ''}Rules without an estimated speedup ({len(unranked)})")
        out += [f"{'- ' if markdown else ''}{r['ops']}: {r['evidence']}" for r in unranked.head(limit or len(unranked)).to_dict("records")]
    out.append(f"\ncheck a change: tb-hwprof compare {path} <run after the change>")
    return "\n".join(out)


def cmd_plan(args) -> int:
    from ..core.plain import records
    table, of = load_plan(args.run)
    if args.format == "json":
        rows = records(table) if len(table) else []
        print(json.dumps({"run": args.run, "of": of, "rows": rows}, allow_nan=False,
                         default=lambda v: None if isinstance(v, float) and math.isnan(v) else str(v)))
    else:
        print(render_plan(table, of, args.run, args.limit, args.format == "markdown"))
    return 0


# -- compare: what happened to the baseline's plan ------------------------------------------------
OUTCOME_TABLES = ("plan", "op_gpu_time", "compare_kernels", "gpu_idle_attribution", "step_time_breakdown")


def run_tables(path: str) -> dict:
    """The tables a plan outcome reads, of an exported run folder ({} for a report file: it has no
    plan until exported)."""
    from ..logdir import metadata, reader
    where = Path(path)
    if not (where.is_dir() and (reader.asset_dir(where) / metadata.MANIFEST).is_file()):
        return {}
    manifest = reader.read_manifest(where)
    tables = {name: reader.read_summary(where, manifest, name) for name in OUTCOME_TABLES}
    return {name: table for name, table in tables.items() if table is not None}


def plan_outcome(base_path: str, run_path: str, basis: dict, limit: int) -> list:
    """plan_outcomes of the baseline's plan rows in the run, per step where the comparison is."""
    from ..analysis.plan import plan_outcomes
    before, after = run_tables(base_path), run_tables(run_path)
    if "plan" not in before or not after:
        return []
    steps = tuple(basis.get("steps") or (1, 1)) if basis.get("per_step") else (1, 1)
    return plan_outcomes(before["plan"], before, after, steps, limit)


def outcome_text(rows: list, markdown: bool) -> list:
    """The compare output's section: each plan row of the baseline, expected and measured saving."""
    from ..core.plain import duration_text
    from .text_tables import section as _section, table as _table
    if not rows:
        return []
    out = [_section(f"the baseline's plan: what happened ({len(rows)} ranked rows)", markdown)]
    out += _table(["#", "where", "expected", "before", "after", "saved", "status"],
                  [[str(r["rank"]), r["ops"] or "(whole step)", duration_text(r["expected_ns"]), duration_text(r["before_ns"]),
                    duration_text(r["after_ns"]), duration_text(r["saved_ns"]), r["status"]] for r in rows], markdown)
    return out
