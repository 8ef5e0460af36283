"""CPU hotspots as the plugin shows them: self / total time, spin and overhead share, TMA label.

Input is the `cpu_hotspots` summary table a CPU profiler reader writes (normalised columns
`name`, `module`, `function_full`, `source_file`, `cpu_time_s`, `spin_time_s`, `overhead_time_s`,
`total_time_s`, `effective_time_s`, the top-down `*_pct` columns; see docs/FORMAT.md). Knows no
file format. Missing figures stay NaN (never 0): a report without a Spin Time column has no
spin share, not a 0% one.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional

import numpy as np
import pandas as pd

from .topdown import BACK_END, LEVEL1, RETIRING, TOPDOWN_COLUMNS, classify_topdown

TEXT_COLUMNS = ("name", "function_full", "module", "source_file")
# Output column order (docs/http_api.md /cpu_hotspots).
COLUMNS = (*TEXT_COLUMNS, "self_time_s", "total_time_s", "self_pct", "effective_time_s", "spin_time_s",
           "overhead_time_s", "spin_pct", "overhead_pct", "is_loop", "instructions_retired", "cpi_rate",
           "start_address", *TOPDOWN_COLUMNS,
           "topdown_label", "topdown_reason")
UNITS = {**{c: "s" for c in COLUMNS if c.endswith("_time_s")},
         **{c: "%" for c in COLUMNS if c.endswith("_pct")}}


def _numbers(table: pd.DataFrame, column: str) -> pd.Series:
    """A float column of the table, all-NaN when the report has no such column."""
    if column not in table.columns:
        return pd.Series(math.nan, index=table.index, dtype="float64")
    return pd.to_numeric(table[column], errors="coerce").astype("float64")


def _texts(table: pd.DataFrame, column: str) -> pd.Series:
    if column not in table.columns:
        return pd.Series("", index=table.index, dtype=object)
    return table[column].fillna("").astype(str)


def _share(part: pd.Series, whole: pd.Series) -> pd.Series:
    """100 * part / whole where both are there and whole > 0, else NaN."""
    return (100.0 * part / whole).where(whole > 0)


def _labels(table: pd.DataFrame, frame: pd.DataFrame) -> None:
    """topdown_label / topdown_reason: the reader's where it classified, else classify here."""
    if "topdown_label" in table.columns:
        frame["topdown_label"] = _texts(table, "topdown_label").replace("", "unknown")
        frame["topdown_reason"] = _texts(table, "topdown_reason")
    else:
        classify_topdown(frame)  # no top-down columns: every row "unknown", with how to collect them


def hotspot_table(table: pd.DataFrame) -> pd.DataFrame:
    """The rows with the plugin's columns (COLUMNS), sorted by self time, largest first (NaN last)."""
    frame = pd.DataFrame({c: _texts(table, c) for c in TEXT_COLUMNS}, index=table.index)
    frame["self_time_s"] = _numbers(table, "cpu_time_s")
    frame["total_time_s"] = _numbers(table, "total_time_s")
    frame["self_pct"] = _share(frame["self_time_s"], pd.Series(frame["self_time_s"].sum(min_count=1), index=frame.index))
    frame["effective_time_s"] = _numbers(table, "effective_time_s")
    for kind in ("spin", "overhead"):
        frame[f"{kind}_time_s"] = _numbers(table, f"{kind}_time_s")
        frame[f"{kind}_pct"] = _share(frame[f"{kind}_time_s"], frame["self_time_s"])
    frame["is_loop"] = table["is_loop"].astype(bool) if "is_loop" in table.columns else False
    frame["instructions_retired"] = _numbers(table, "instructions_retired")
    frame["cpi_rate"] = _numbers(table, "cpi_rate")
    frame["start_address"] = _texts(table, "start_address")  # tells apart rows of one name (inlined loops)
    for column in TOPDOWN_COLUMNS:
        frame[column] = _numbers(table, column)
    _labels(table, frame)
    order = np.argsort(-frame["self_time_s"].fillna(-math.inf).to_numpy(), kind="stable")
    return frame.iloc[order][list(COLUMNS)].reset_index(drop=True)


def _sum(series: pd.Series) -> Optional[float]:
    total = series.sum(min_count=1)
    return None if pd.isna(total) else float(total)


def totals(frame: pd.DataFrame) -> Dict[str, Optional[float]]:
    """Summed self, spin and overhead time, and the spin / overhead share of the summed CPU time."""
    cpu, spin, over = (_sum(frame[c]) for c in ("self_time_s", "spin_time_s", "overhead_time_s"))
    share = lambda part: 100.0 * part / cpu if part is not None and cpu else None  # noqa: E731
    return {"self_time_s": cpu, "spin_time_s": spin, "overhead_time_s": over,
            "spin_pct": share(spin), "overhead_pct": share(over)}


def tma_thresholds() -> List[dict]:
    """Intel TMA thresholds the labels use (topdown.py), for the view's legend."""
    rows = [{"label": label, "column": col, "threshold_pct": limit, "parent": None}
            for col, (label, limit) in LEVEL1.items()]
    rows += [{"label": label, "column": col, "threshold_pct": limit, "parent": "back-end-bound"}
             for col, (label, limit) in BACK_END.items()]
    rows.append({"label": "retiring", "column": RETIRING[0], "threshold_pct": RETIRING[1], "parent": None})
    return rows


def has_topdown(frame: pd.DataFrame) -> bool:
    return bool(frame[[c for c in LEVEL1]].notna().any().any())
