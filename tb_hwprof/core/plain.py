"""Table cells as JSON wants them, and durations as people read them: for every view and report of ours: numpy scalars as Python ones;
NaN, infinities, None and pandas' NA as null (a missing figure, never 0)."""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

import pandas as pd


def plain(value: Any) -> Any:
    if value is None or value is pd.NA:
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


def records(frame: Optional[pd.DataFrame], fields=None) -> List[Dict[str, Any]]:
    """The rows of `frame` as dicts of plain values (only `fields` where given, in that order, those
    the frame has); [] for no table."""
    if frame is None or frame.empty:
        return []
    cols = [c for c in (fields or frame.columns) if c in frame.columns]
    return [{c: plain(v) for c, v in zip(cols, row)} for row in frame[cols].itertuples(index=False, name=None)]


def columns(frame: Optional[pd.DataFrame], fields=None) -> Dict[str, list]:
    """The columns of `frame` as lists of plain values (as `records`); {} for no table."""
    if frame is None:
        return {}
    cols = [c for c in (fields or frame.columns) if c in frame.columns]
    return {c: [plain(v) for v in frame[c].tolist()] for c in cols}


def duration_text(ns: Optional[float]) -> str:
    """A duration in the largest unit it reaches, 4 significant digits ("2.083 ms", not "2082944 ns");
    "-" for none."""
    if ns is None or ns != ns:
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.4g} {unit}"
    return f"{ns:.4g} ns"
