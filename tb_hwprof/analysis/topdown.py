"""Top-down (Intel TMA) bottleneck label per CPU function; knows no file format.

Input columns are % of pipeline slots: retiring_pct, front_end_bound_pct, bad_speculation_pct,
back_end_bound_pct and, one level down, memory_bound_pct and core_bound_pct. A category is
flagged when it passes Intel's TMA threshold (the `thresh` of each node in the TMA model as
pmu-tools' toplev ships it for recent Intel cores): Front-End Bound > 15%, Bad Speculation > 15%,
Back-End Bound > 20%, and under Back-End, Memory Bound > 20% and Core Bound > 10% (each only
when Back-End Bound itself is flagged); Retiring > 70% marks code that already keeps the pipeline
busy. The label is the flagged category with the largest share, drilled into Back-End's children.
"""
from __future__ import annotations

import math
from typing import Dict, Tuple

import pandas as pd

LEVEL1 = {  # column -> (label, threshold %)
    "front_end_bound_pct": ("front-end-bound", 15.0),
    "bad_speculation_pct": ("bad-speculation", 15.0),
    "back_end_bound_pct": ("back-end-bound", 20.0),
}
BACK_END = {"memory_bound_pct": ("memory-bound", 20.0), "core_bound_pct": ("core-bound", 10.0)}
RETIRING = ("retiring_pct", 70.0)
LABELS = ("front-end-bound", "bad-speculation", "back-end-bound", "memory-bound", "core-bound",
          "retiring", "balanced", "unknown")
TOPDOWN_COLUMNS = ("retiring_pct", "front_end_bound_pct", "bad_speculation_pct", "back_end_bound_pct",
                   "memory_bound_pct", "core_bound_pct")


def _v(row: Dict, col: str) -> float:
    v = row.get(col, math.nan)
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _flagged(row: Dict, nodes: Dict[str, Tuple[str, float]]) -> Dict[str, float]:
    return {label: _v(row, col) for col, (label, limit) in nodes.items() if _v(row, col) > limit}


def topdown_label(row: Dict) -> Tuple[str, str]:
    """(label, one sentence with the numbers) for one function's top-down percentages."""
    level1 = {col: _v(row, col) for col in LEVEL1}
    if all(math.isnan(v) for v in level1.values()):
        return "unknown", "no top-down metrics (collect with `vtune -collect uarch-exploration`)"
    flagged = _flagged(row, LEVEL1)
    shares = ", ".join(f"{LEVEL1[c][0].replace('-', ' ')} {v:.0f}%" for c, v in level1.items() if not math.isnan(v))
    retiring = _v(row, RETIRING[0])
    if not flagged:
        if retiring > RETIRING[1]:
            return "retiring", (f"retiring {retiring:.0f}% of slots (> {RETIRING[1]:.0f}%): the pipeline is busy "
                                f"with useful work; fewer or wider (vector) instructions are the lever")
        return "balanced", f"no top-down category over its TMA threshold ({shares})"
    label = max(flagged, key=flagged.get)
    if label == "back-end-bound":
        children = _flagged(row, BACK_END)
        if children:
            child = max(children, key=children.get)
            return child, (f"{child.replace('-', ' ')}: {children[child]:.0f}% of pipeline slots (threshold "
                           f"{dict(BACK_END.values())[child]:.0f}%) within back-end bound {flagged[label]:.0f}%; "
                           f"{shares}")
    limit = dict(LEVEL1.values())[label]
    return label, f"{label.replace('-', ' ')}: {flagged[label]:.0f}% of pipeline slots (> {limit:.0f}%); {shares}"


def label_topdown_tables(summaries) -> None:
    """Label every summary table that holds top-down columns with values (VTune hotspots and
    uarch reports) in place, the labels right after the last top-down column, as the table's
    own derived columns (a table labelled already is left as it is)."""
    for table in summaries.values():
        present = [c for c in TOPDOWN_COLUMNS if c in table.columns]
        if not present or "topdown_label" in table.columns or not table[present].notna().any().any():
            continue
        labelled = classify_topdown(table[present].copy())
        at = max(table.columns.get_loc(c) for c in present) + 1
        table.insert(at, "topdown_label", labelled["topdown_label"].to_numpy())
        table.insert(at + 1, "topdown_reason", labelled["topdown_reason"].to_numpy())


def classify_topdown(frame: pd.DataFrame) -> pd.DataFrame:
    """Add topdown_label and topdown_reason columns in place (rows without metrics: 'unknown')."""
    if frame.empty:
        frame["topdown_label"], frame["topdown_reason"] = [], []
        return frame
    results = [topdown_label(row) for row in frame.to_dict("records")]
    frame["topdown_label"] = [r[0] for r in results]
    frame["topdown_reason"] = [r[1] for r in results]
    return frame
