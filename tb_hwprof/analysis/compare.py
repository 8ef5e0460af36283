"""Kernel-by-kernel comparison of two profiles (two kernels tables; no file format here).

Launches are matched by a normalised kernel name: the demangled name with templates and
parameters kept (they tell instantiations apart), with the `[clone .kd]`-style suffixes that
compilers and tools append dropped, so one kernel seen through two tools still matches.
Several launches of one name are aggregated: durations summed, % metrics averaged weighted
by duration (a 1 us launch must not weigh as much as a 1 ms one).
"""
from __future__ import annotations

import math
import re
from typing import Dict, List, Optional

import numpy as np
import pandas as pd

from .groups import bound_labels, dominant_label

# Metrics whose run-minus-base difference the comparison reports.
DELTA_COLUMNS = ("sm_throughput_pct", "memory_throughput_pct", "achieved_occupancy_pct",
                 "dram_throughput_pct", "l1_hit_rate_pct", "l2_hit_rate_pct")

# " [clone .kd]", " [clone .constprop.0]", ...: one or more trailing clone markers.
_CLONE_SUFFIX = re.compile(r"(?:\s*\[clone [^\[\]]*\])+\s*$")


def normalise_kernel_name(name) -> str:
    """The matching key of one kernel name: clone suffixes and surrounding whitespace dropped."""
    if not isinstance(name, str):
        return ""
    return _CLONE_SUFFIX.sub("", name).strip()


def _normalised_codes(names: pd.Series):
    """(codes, normalised names): normalise_kernel_name once per distinct name (launches repeat names)."""
    codes, uniques = pd.factorize(names, use_na_sentinel=False)
    return codes, [normalise_kernel_name(n) for n in uniques]


def kernel_keys(kernels: pd.DataFrame):
    """(codes, keys): per launch the index of its key in `keys`, in order of first appearance.  A key
    is the normalised demangled name, or the normalised `name` where that is empty.  Each name
    column is hashed once; keys are made once per distinct (demangled, name) pair."""
    d_codes, d_keys = _normalised_codes(kernels["demangled_name"])
    s_codes, s_keys = _normalised_codes(kernels["name"])
    width = max(len(s_keys), 1)
    pairs, first = pd.factorize(d_codes.astype(np.int64) * width + s_codes)
    # Different pairs may give one key: codes of the keys, in order of first appearance.
    key_codes, keys = pd.factorize(np.array([d_keys[p // width] or s_keys[p % width] for p in first.tolist()],
                                            dtype=object))
    return key_codes[pairs], list(keys)


def _none(value) -> Optional[float]:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _weighted_means(keyed: pd.DataFrame, column: str) -> pd.Series:
    """Per key: duration-weighted mean of `column`; the plain mean where no launch has a duration."""
    value, weight = keyed[column], keyed["duration_ns"]
    both = value.notna() & weight.notna()
    parts = pd.DataFrame({"key": keyed["_key"], "vw": (value * weight).where(both),
                          "w": weight.where(both), "v": value})
    g = parts.groupby("key", sort=False)
    weighted = g["vw"].sum(min_count=1) / g["w"].sum(min_count=1)
    return weighted.where(g["w"].sum() > 0, g["v"].mean())


def aggregate_by_key(kernels: pd.DataFrame) -> Dict[str, dict]:
    """Key -> {name, total_ns, bound, metric means} over that key's launches, in table order."""
    # Grouped by integer codes (in order of first appearance, as groupby(sort=False) orders keys):
    # each groupby would hash the 1M key strings again (~0.17 s each, ~4 s per comparison).
    codes, keys = kernel_keys(kernels)
    keyed = kernels.assign(_key=codes)
    g = keyed.groupby("_key", sort=False)
    frame = pd.DataFrame({"name": g["name"].first(), "total_ns": g["duration_ns"].sum(min_count=1)})
    frame["bound"] = dominant_label(keyed["_key"], bound_labels(keyed), keyed["duration_ns"])
    for column in DELTA_COLUMNS:
        frame[column] = _weighted_means(keyed, column)
    return {keys[code]: {"name": str(row["name"]), "total_ns": _none(row["total_ns"]), "bound": row["bound"],
                         "metrics": {c: _none(row[c]) for c in DELTA_COLUMNS}}
            for code, row in zip(frame.index, frame.to_dict("records"))}


def _ratio(base: Optional[float], run: Optional[float]) -> Optional[float]:
    return base / run if base is not None and run is not None and run > 0 else None


def _delta(base: Optional[float], run: Optional[float]) -> Optional[float]:
    return run - base if base is not None and run is not None else None


def _matched(key: str, b: dict, r: dict) -> dict:
    return {
        "key": key, "name": r["name"] if r["name"] else b["name"],
        "base_ns": b["total_ns"], "run_ns": r["total_ns"],
        "speedup": _ratio(b["total_ns"], r["total_ns"]),
        "base_bound": b["bound"], "run_bound": r["bound"],
        "deltas": {c: _delta(b["metrics"][c], r["metrics"][c]) for c in DELTA_COLUMNS},
    }


def _by_time(item: dict, *fields: str) -> float:
    """Sort key: the largest of the given durations, missing ones last."""
    values = [item[f] for f in fields if item[f] is not None]
    return -max(values) if values else math.inf


def _only(groups: Dict[str, dict], keys) -> List[dict]:
    items = [{"key": k, "name": groups[k]["name"], "total_ns": groups[k]["total_ns"]} for k in keys]
    return sorted(items, key=lambda i: _by_time(i, "total_ns"))


def _total(kernels: pd.DataFrame) -> Optional[float]:
    return _none(kernels["duration_ns"].sum(min_count=1))


def compare_kernels(base: pd.DataFrame, run: pd.DataFrame) -> dict:
    """Totals, matched kernels (run minus base deltas) and the kernels found on one side only."""
    b, r = aggregate_by_key(base), aggregate_by_key(run)
    matched = [_matched(k, b[k], r[k]) for k in b if k in r]
    base_ns, run_ns = _total(base), _total(run)
    return {
        "totals": {"base_ns": base_ns, "run_ns": run_ns, "speedup": _ratio(base_ns, run_ns)},
        "matched": sorted(matched, key=lambda m: _by_time(m, "base_ns", "run_ns")),
        "only_in_base": _only(b, [k for k in b if k not in r]),
        "only_in_run": _only(r, [k for k in r if k not in b]),
    }
