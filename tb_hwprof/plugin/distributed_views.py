"""The Distributed view's JSON document (docs/http_api.md: /distributed): a job run's cross-rank
summaries (ranks, rank_steps, rank_kernels; analysis/ranks.py makes them), shaped for drawing:
per-rank stacked bars, the rank x step time grid, the straggler findings, the kernels' spread."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import pandas as pd

from ..analysis import ranks as rank_analysis
from ..core.plain import plain, records
from .store import HttpError, RunEntry

RANK_FIELDS = ("rank", "run", "source", "world_size", "steps", "step_time_avg_ns", "step_time_max_ns",
               "compute_ns", "communication_ns", "overlap_ns", "idle_ns", "span_ns", "straggler", "straggler_reason")
KERNEL_FIELDS = tuple(rank_analysis.RANK_KERNELS_COLUMNS)


def distributed(entry: RunEntry) -> dict:
    if "ranks" not in entry.summary_names():
        raise HttpError(404, f"run {entry.run!r} is not a multi-rank job (no ranks table)")
    names = entry.summary_names()
    ranks = [_rank_row(row, entry.run) for row in _records(entry.summary("ranks"), RANK_FIELDS)]
    steps = entry.summary("rank_steps") if "rank_steps" in names else pd.DataFrame()
    kernels = entry.summary("rank_kernels") if "rank_kernels" in names else pd.DataFrame()
    world = next((r["world_size"] for r in ranks if r["world_size"] is not None), None)
    return {
        "run": entry.run,
        "world_size": world,
        "thresholds": {"share_pct": 100 * rank_analysis.STRAGGLER_SHARE, "min_ns": rank_analysis.STRAGGLER_MIN_NS},
        "ranks": ranks,
        "step_times": step_grid(steps, [r["rank"] for r in ranks]),
        "stragglers": [{"rank": r["rank"], "run": r["run"], "reason": r["straggler_reason"]}
                       for r in ranks if r["straggler"]],
        "kernels": _records(kernels, KERNEL_FIELDS),
        "notes": [str(n) for n in (entry.manifest.get("notes") or [])],
    }


def _rank_row(row: dict, job: str) -> dict:
    """A ranks row with its run (job/rank_N when the table names none) and its four bar parts, which
    add up to the span: compute alone, communication alone, both at once, neither."""
    row["rank"] = int(row["rank"])
    row["run"] = row["run"] or f"{job}/rank_{row['rank']}"
    row["straggler"] = bool(row["straggler"])
    row["straggler_reason"] = row["straggler_reason"] or ""
    parts = (row["compute_ns"], row["communication_ns"], row["overlap_ns"], row["idle_ns"])
    if any(v is None for v in parts):
        row["bars"] = None
    else:
        compute, comm, overlap, idle = parts
        row["bars"] = {"compute_ns": compute - overlap, "communication_ns": comm - overlap,
                       "overlap_ns": overlap, "other_ns": idle}
    return row


def step_grid(steps: pd.DataFrame, rank_order: List[int]) -> dict:
    """rank x step times for the heat map: ranks (rows, the ranks table's order), steps (columns,
    ascending), ns[i][j] (null where rank i has no step j), each step's median over the ranks, and
    the smallest and largest time (the colour scale's ends)."""
    if steps.empty:
        return {"ranks": rank_order, "steps": [], "ns": [[] for _ in rank_order], "median_ns": [],
                "min_ns": None, "max_ns": None}
    grid = steps.pivot_table(index="rank", columns="step", values="step_time_ns", aggfunc="first")
    grid = grid.reindex(index=rank_order, columns=sorted(grid.columns))
    median = steps.groupby("step")["step_time_ns"].median().reindex(grid.columns)
    values = steps["step_time_ns"]
    return {"ranks": rank_order, "steps": [int(s) for s in grid.columns],
            "ns": [[_value(v) for v in row] for row in grid.to_numpy()],
            "median_ns": [_value(v) for v in median.to_numpy()],
            "min_ns": _value(values.min()), "max_ns": _value(values.max())}


def _records(frame: pd.DataFrame, fields) -> List[Dict[str, Any]]:
    return [{f: _whole(v) for f, v in row.items()} for row in records(frame, fields)]


def _value(v) -> Optional[Any]:
    return _whole(plain(v))


def _whole(v):
    """Integral floats as ints (ranks and steps of a column that also holds NaN read 3, not 3.0)."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 2 ** 53:
        return int(v)
    return v
