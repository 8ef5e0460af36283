"""Advice from the kernels table: launches far slower than launches doing the same work.

  kernels.outlier_launch  a launch takes more than OUTLIER_RATIO x the median of its siblings
                          (launches of the same work), and what it takes beyond that median is at
                          least MATERIAL_SHARE_PCT of all kernel time

Siblings share the kernel name, grid and block, and every work count the report has for them:
FLOPs, L1 bytes (what the threads asked for) and instruction / wave counts (WORK_COUNTERS).  DRAM
and L2 bytes are left out on purpose: a cold first call reads more from DRAM for the same work,
which is exactly the launch this rule is for.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np
import pandas as pd

from ..context import CaptureContext
from ...core.columnar import object_codes
from ...core.findings import Finding, finding, time_text
from ...core.plain import plain

# A launch an order of magnitude slower than identical launches is not noise (run-to-run spread
# of one kernel is a few %): it paid a one-time cost (code load, JIT, first touch, clocks ramping).
OUTLIER_RATIO = 10.0
# Fewer siblings give no steady state to compare with (one other launch could be the odd one).
MIN_SIBLINGS = 2
# A launch is an outlier only by more than the coarsest timestamps we read can tell: PyTorch traces
# of 2021 have whole-µs durations (a 0 µs median and a 1 µs launch are one tick apart, not 10x).
MIN_EXCESS_NS = 2_000
# The outliers' excess over their siblings' median, as a share of all kernel time: below 5% the
# headline figures barely move with or without them.
MATERIAL_SHARE_PCT = 5.0
HIGH_SHARE_PCT = 25.0  # from a quarter of kernel time, the headlines mostly measure the outliers
# Model columns and raw counters that measure a launch's work (equal for the same work).
WORK_COLUMNS = ("flops", "flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor", "l1_bytes")
WORK_COUNTERS = ("SQ_INSTS", "SQ_WAVES", "smsp__inst_executed.sum", "sm__inst_executed.sum", "inst_executed")
TOP = 3  # outliers named in the text

REMEDY = ("Measure the steady state: run the kernel once untimed before measuring (or leave its first launches "
          "out of the profile); if the one-time cost matters in production (code-object load, JIT compile, "
          "first touch of memory), pay it at start-up, outside the critical path")


def sibling_groups(kernels: pd.DataFrame, raw_metrics: List[Dict[str, list]]) -> np.ndarray:
    """A group number per launch: launches of one group have the same name, grid, block and work."""
    groups = np.zeros(len(kernels), dtype=np.int64)
    keys = [kernels[c] for c in ("name", "grid_size", "block_size") + WORK_COLUMNS if c in kernels]
    keys += [counter_values(raw_metrics, name, len(kernels)) for name in present_counters(raw_metrics)]
    for key in keys:
        if isinstance(key, pd.Series) and isinstance(key.dtype, pd.SparseDtype) and not key.array.sp_values.size:
            continue  # a column the report does not have (all missing, stored sparse): no key
        codes, uniques = pd.factorize(np.asarray(key), use_na_sentinel=False)
        if len(uniques) > 1:
            groups = groups * len(uniques) + codes
            if groups.max() > 2 ** 40:  # renumbered before the next key could overflow int64
                groups = pd.factorize(groups)[0]
    return groups


def present_counters(raw_metrics: List[Dict[str, list]]) -> List[str]:
    return [name for name in WORK_COUNTERS if any(name in launch for launch in raw_metrics)]


def counter_values(raw_metrics: List[Dict[str, list]], name: str, n: int) -> np.ndarray:
    values = [str((launch.get(name) or [None])[0]) for launch in raw_metrics]
    return np.asarray(values + ["None"] * (n - len(values)), dtype=object)


def median_of_siblings(durations: np.ndarray, groups: np.ndarray, ratio: float) -> tuple:
    """Per launch: the median duration of the other launches of its group, and how many they are
    (launches without a duration neither have nor count as siblings); NaN and 0 in groups that
    cannot hold a launch `ratio` x slower than its siblings."""
    n = len(durations)
    medians, counts = np.full(n, np.nan), np.zeros(n, dtype=np.int64)
    timed = np.flatnonzero(~np.isnan(durations))
    timed = timed[np.isin(groups[timed], spread_groups(durations[timed], groups[timed], ratio))]
    order = timed[np.lexsort((durations[timed], groups[timed]))]  # by group, then duration
    bounds = np.flatnonzero(np.diff(groups[order])) + 1
    for members in np.split(order, bounds):
        if len(members) > MIN_SIBLINGS:
            medians[members] = _median_without_each(durations[members])
            counts[members] = len(members) - 1
    return medians, counts


def spread_groups(durations: np.ndarray, groups: np.ndarray, ratio: float) -> np.ndarray:
    """Groups whose slowest launch exceeds `ratio` x their fastest: only they can hold an outlier
    (a median of siblings is never below the group's fastest), so only they are sorted."""
    by_group = pd.Series(durations).groupby(groups)
    spread = by_group.max() > ratio * by_group.min()
    return spread.index[spread.to_numpy()].to_numpy()


def _median_without_each(sorted_values: np.ndarray) -> np.ndarray:
    """Element p of the result: the median of sorted_values without its element p."""
    m = len(sorted_values)
    positions = np.arange(m)

    def without(k):  # element k of the array with position p removed
        return sorted_values[k + (k >= positions)]
    n = m - 1
    if n % 2:
        return without(np.full(m, n // 2))
    return (without(np.full(m, n // 2 - 1)) + without(np.full(m, n // 2))) / 2


def outliers(kernels: pd.DataFrame, raw_metrics: List[Dict[str, list]], ratio: float = OUTLIER_RATIO) -> pd.DataFrame:
    """Launches slower than `ratio` x their siblings' median: launch_id, name, duration_ns,
    sibling_median_ns, siblings, ratio."""
    rows = launches_of_spread_names(kernels, ratio)
    if rows.size < len(kernels):
        kernels = kernels.iloc[rows]
        raw_metrics = [raw_metrics[i] for i in rows] if raw_metrics else raw_metrics
    durations = kernels["duration_ns"].to_numpy(dtype=float)
    medians, counts = median_of_siblings(durations, sibling_groups(kernels, raw_metrics), ratio)
    with np.errstate(invalid="ignore"):
        slow = np.flatnonzero((counts >= MIN_SIBLINGS) & (durations > ratio * medians) & (medians > 0)
                              & (durations - medians >= MIN_EXCESS_NS))
    return pd.DataFrame({"launch_id": kernels["launch_id"].to_numpy()[slow], "name": kernels["name"].to_numpy()[slow],
                         "duration_ns": durations[slow], "sibling_median_ns": medians[slow],
                         "siblings": counts[slow], "ratio": durations[slow] / medians[slow]}, index=rows[slow])


def launches_of_spread_names(kernels: pd.DataFrame, ratio: float) -> np.ndarray:
    """Positions of the launches whose kernel name's slowest launch exceeds `ratio` x its fastest: only
    they can be outliers or their siblings (siblings share the name, and a median of siblings is
    never below the name's fastest), so the sibling keys are built for them alone (a 1M-launch
    trace whose kernels run steadily: none)."""
    durations = pd.Series(kernels["duration_ns"].to_numpy(dtype=float))
    by_name = durations.groupby(object_codes(kernels["name"].to_numpy()))
    spread = by_name.transform("max") > ratio * by_name.transform("min")
    return np.flatnonzero(spread.to_numpy())


def outlier_finding(kernels: pd.DataFrame, raw_metrics: List[Dict[str, list]],
                    ratio: float = OUTLIER_RATIO) -> Optional[Finding]:
    """The finding on `kernels`' outlier launches, or None when there are none or they are not material."""
    if kernels.empty or "duration_ns" not in kernels or kernels["duration_ns"].isna().all():
        return None
    slow = outliers(kernels, raw_metrics, ratio)
    total = float(kernels["duration_ns"].sum())
    excess = float((slow["duration_ns"] - slow["sibling_median_ns"]).sum())
    share = 100 * excess / total if total > 0 else 0.0
    if slow.empty or share < MATERIAL_SHARE_PCT:
        return None
    keep = np.ones(len(kernels), dtype=bool)
    keep[slow.index] = False  # slow's index: positions in kernels
    without = kernels[keep]
    means = kernels.groupby("name")["duration_ns"].mean()
    means_without = without.groupby("name")["duration_ns"].mean()
    records = [{**{k: plain(v) for k, v in row.items()}, "kernel_mean_ns": float(means[row["name"]]),
                "kernel_mean_without_ns": float(means_without.get(row["name"], np.nan))}
               for row in slow.sort_values("duration_ns", ascending=False).to_dict("records")]
    total_without = float(without["duration_ns"].sum())
    return finding(
        "kernels.outlier_launch", "high" if share >= HIGH_SHARE_PCT else "medium",
        _title(records), _text(records, total, total_without, share, ratio), REMEDY,
        {"outliers": (records, ""), "total_kernel_ns": (total, "ns"), "total_kernel_without_ns": (total_without, "ns"),
         "excess_share_pct": (share, "%"), "ratio_threshold": (ratio, "x"),
         "material_share_pct": (MATERIAL_SHARE_PCT, "%")})


def _title(records: List[dict]) -> str:
    if len(records) == 1:
        r = records[0]
        return f"One launch of {r['name']} took {_times(r['ratio'])} the time of the same work"
    return f"{len(records)} launches took over {_times(min(r['ratio'] for r in records))} the time of the same work"


def _times(ratio: float) -> str:
    return f"{ratio:.0f}x" if ratio >= 10 else f"{ratio:.1f}x"


def _text(records: List[dict], total: float, total_without: float, share: float, ratio: float) -> str:
    named = "; ".join(
        f"launch {r['launch_id']} of {r['name']} took {time_text(r['duration_ns'])}, {_times(r['ratio'])} the median "
        f"{time_text(r['sibling_median_ns'])} of its {r['siblings']} siblings (its mean "
        f"{time_text(r['kernel_mean_ns'])} with it, "
        f"{time_text(r['kernel_mean_without_ns'])} without)" for r in records[:TOP])
    more = f"; and {len(records) - TOP} more" if len(records) > TOP else ""
    return (f"{named}{more}. Siblings run the same name, grid, block and counted work, so the difference is a "
            f"one-time cost (first call, warm-up), not the kernel's steady state. Total kernel time is "
            f"{time_text(total)} "
            f"with {'it' if len(records) == 1 else 'them'} and {time_text(total_without)} without: the excess over the "
            f"siblings is {share:.1f}% of kernel time (fires above {ratio:g}x the siblings' median when that excess "
            f"is >= {MATERIAL_SHARE_PCT:g}%).")


def advise(profile, summaries: Dict[str, pd.DataFrame], context: CaptureContext) -> List[Finding]:
    found = outlier_finding(profile.kernels, profile.raw_metrics)
    return [found] if found else []
