"""Kernel-by-kernel comparison of two profiles (two kernels tables; no file format here).

A kernel is one instantiation: launches are grouped by their normalised demangled name (templates
and parameters kept: they tell instantiations apart; the `[clone .kd]`-style suffixes compilers
and tools append dropped), or by `name` where a tool has no demangled name.  Several launches of
one kernel are aggregated: durations summed, % metrics averaged weighted by duration (a 1 us
launch must not weigh as much as a 1 ms one).

Kernels are then paired across the two runs, each stage only over what the earlier ones left:
the user's explicit choices, the mangled name, the demangled name, the short name (only where it
names one kernel on each side: instantiations are never collapsed), then the one kernel each side
has left.  Every pair records how it was paired: an optimisation series renames kernels.  Kernels of
different names are never paired by their launch configuration alone (a workspace-init kernel
"sped up 43.90x" into an unrelated one of the same grid): a configuration (grid, block, registers,
shared memory) found once on each side among the leftovers is a suggested pair, for the user to
confirm with --pair.

Where both runs have profiler steps (PyTorch's ProfilerStep#N), times and launch counts are compared
per step (each run's divided by its steps): a 3-step capture against a 1-step one is no 3x slow-down.
The document says its basis, and warns where the step counts or the programs differ.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from ..core.model import KERNEL_COLUMNS, is_all_nan_column, is_count
from ..core import columnar

# Metrics whose run-minus-base difference the comparison reports.
DELTA_COLUMNS = ("sm_throughput_pct", "memory_throughput_pct", "achieved_occupancy_pct",
                 "dram_throughput_pct", "l1_hit_rate_pct", "l2_hit_rate_pct")

# How a pair was made, in the order the stages run.
PAIRED_BY = ("user", "mangled", "demangled", "short", "only-one-left")
NAME_STAGES = ("mangled", "demangled", "short")
LAUNCH_CONFIG = ("grid", "block", "registers_per_thread", "shared_mem_bytes")

# Tools that time kernels as the application runs them, and the one that replays them.
TRACING_TOOLS = ("nsys", "pytorch")
REPLAYING_TOOL = "ncu"
# A paired kernel whose per-launch times differ more than this between ncu and a tracer is flagged.
CROSS_TOOL_RATIO_LIMIT = 1.5
CROSS_TOOL_CAUSES = ("Nsight Compute locks clocks to base by default (--clock-control base) and replays each "
                     "kernel with flushed caches (--cache-control all); Nsight Systems and the PyTorch profiler "
                     "measure at application clocks with warm caches")
# Paired kernels covering less than this share of either run's GPU time: the totals mostly compare unpaired work.
PAIRED_SHARE_WARNING = 0.5
# Operators of one name and input shapes on both sides covering less than this share of either PyTorch
# run's operator GPU time: the runs are different programs (_program_warnings).
OPERATOR_SHARE_WARNING = 0.5

# " [clone .kd]", " [clone .constprop.0]", ...: one or more trailing clone markers.
_CLONE_SUFFIX = re.compile(r"(?:\s*\[clone [^\[\]]*\])+\s*$")


def normalise_kernel_name(name) -> str:
    """The matching key of one kernel name: clone suffixes and surrounding whitespace dropped."""
    if not isinstance(name, str):
        return ""
    return _CLONE_SUFFIX.sub("", name).strip()


def _strip_groups(text: str, opening: str, closing: str) -> str:
    """`text` without its balanced opening...closing groups (templates, parameter lists)."""
    out, depth = [], 0
    for ch in text:
        if ch == opening:
            depth += 1
        elif ch == closing and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    return "".join(out)


@functools.lru_cache(maxsize=4096)
def short_name(name: str) -> str:
    """The bare function name: 'void ns::k<4, T>(int)' -> 'k'; 'matrix_addition2D' stays."""
    bare = _strip_groups(_strip_groups(normalise_kernel_name(name), "(", ")"), "<", ">").strip()
    return bare.split()[-1].split("::")[-1] if bare else ""


def template_arguments(short: str, full: str) -> str:
    """'<...>' right after `short` in the full name (the instantiation's arguments), else ''."""
    at = full.find(short + "<") if short else -1
    if at < 0:
        return ""
    start = at + len(short)
    depth = 0
    for i in range(start, len(full)):
        depth += {"<": 1, ">": -1}.get(full[i], 0)
        if depth == 0:
            return full[start:i + 1]
    return ""


def _normalised_codes(names: pd.Series):
    """(codes, normalised names): normalise_kernel_name once per distinct name (launches repeat names;
    grouped by the str objects they share, not by hashing a million long names)."""
    codes, uniques = columnar.object_factorize(names.to_numpy(dtype=object))
    return codes, [normalise_kernel_name(n) for n in uniques]


def kernel_keys(kernels: pd.DataFrame):
    """(codes, keys): per launch the index of its key in `keys`, in order of first appearance.  A key
    is the normalised demangled name, or the normalised `name` where that is empty.  Each name
    column is hashed once; keys are made once per distinct (demangled, name) pair."""
    d_codes, d_keys = _normalised_codes(kernels["demangled_name"])
    if all(d_keys):  # every launch has a demangled name: `name` never decides a key
        key_codes, keys = pd.factorize(np.array(d_keys, dtype=object))
        return key_codes[d_codes], list(keys)
    s_codes, s_keys = _normalised_codes(kernels["name"])
    width = max(len(s_keys), 1)
    pairs, first = pd.factorize(d_codes.astype(np.int64) * width + s_codes)
    # Different pairs may give one key: codes of the keys, in order of first appearance.
    key_codes, keys = pd.factorize(np.array([d_keys[p // width] or s_keys[p % width] for p in first.tolist()],
                                            dtype=object))
    return key_codes[pairs], list(keys)


def _none(value) -> Optional[float]:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _per_key_sum(codes: np.ndarray, n: int, values: np.ndarray) -> np.ndarray:
    return np.bincount(codes, weights=values, minlength=n)


def weighted_means(codes: np.ndarray, n: int, values: np.ndarray, durations: np.ndarray) -> np.ndarray:
    """Per key: duration-weighted mean of `values`; the plain mean where no launch has a duration
    (NaN where no launch has the value).  bincount over the key codes: one pass per column."""
    has = ~np.isnan(values)
    if not has.any():  # a tracer's counters: the column is all missing
        return np.full(n, np.nan)
    both = has & ~np.isnan(durations)
    weight = _per_key_sum(codes, n, np.where(both, durations, 0.0))
    weighted = _per_key_sum(codes, n, np.where(both, values * durations, 0.0))
    count = _per_key_sum(codes, n, has.astype(np.float64))
    plain = _per_key_sum(codes, n, np.where(has, values, 0.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(weight > 0, weighted / weight, np.where(count > 0, plain / count, np.nan))


def _floats(kernels: pd.DataFrame, column: str) -> np.ndarray:
    return kernels[column].to_numpy(dtype=np.float64, na_value=np.nan)


def _per_key_totals(codes: np.ndarray, n: int, durations: np.ndarray) -> np.ndarray:
    """Per key: summed durations, NaN where no launch has one."""
    timed = ~np.isnan(durations)
    totals = _per_key_sum(codes, n, np.where(timed, durations, 0.0))
    return np.where(_per_key_sum(codes, n, timed.astype(np.float64)) > 0, totals, np.nan)


def _dominant_bounds(codes: np.ndarray, n: int, bound: pd.Series, durations: np.ndarray) -> List[str]:
    """Per key, the bound label covering most time (launch count breaks ties, then the label's name),
    as groups.dominant_label decides it; '' and missing labels count as 'unknown'."""
    raw_codes, raw = columnar.object_factorize(bound.to_numpy(dtype=object))
    raw_codes = np.where(raw_codes < 0, len(raw), raw_codes)  # a missing label: the "unknown" appended below
    label_codes, labels = pd.factorize(np.array([b if isinstance(b, str) and b else "unknown" for b in raw]
                                                + ["unknown"], dtype=object))
    row_labels = label_codes[raw_codes] if raw_codes.size else raw_codes
    width = max(len(labels), 1)
    combo = codes.astype(np.int64) * width + row_labels
    time = np.bincount(combo, weights=np.nan_to_num(durations, nan=0.0), minlength=n * width)
    count = np.bincount(combo, minlength=n * width)
    present = np.flatnonzero(count)
    rank = {label: i for i, label in enumerate(sorted(labels))}
    label_rank = np.array([rank[label] for label in labels], dtype=np.int64)
    order = np.lexsort((label_rank[present % width], -count[present], -time[present], present // width))
    best = ["unknown"] * n
    for i in order[::-1].tolist():  # the first of each key in `order` is written last
        best[int(present[i] // width)] = labels[present[i] % width]
    return best


class KernelSet:
    """One run's kernels grouped by instantiation: per key (in order of first appearance) its names
    and figures (groups), the run's total time and the devices its kernels ran on.  Built from the
    launches (kernel_set: kernels and codes, the index of each launch's key, kept) or from the
    per-instantiation table an export writes (kernel_set_from_table: no launches; what pairing and
    the pair detail need per key was computed at export: configs, representative launches)."""

    def __init__(self, keys: List[str], groups: Dict[str, dict], total_ns: Optional[float], device_ids: set,
                 kernels: Optional[pd.DataFrame] = None, codes: Optional[np.ndarray] = None,
                 configs: Optional[Dict[str, Optional[str]]] = None, representatives: Optional[Dict[str, int]] = None):
        self.keys, self.groups, self.total_ns, self.device_ids = keys, groups, total_ns, device_ids
        self.kernels, self.codes = kernels, codes
        self.configs, self.representatives = configs, representatives
        self.index = {k: i for i, k in enumerate(self.keys)}
        self.first = columnar.first_rows(codes, len(keys)) if codes is not None else None

    def launches_of(self, key: str) -> np.ndarray:
        """Row positions of `key`'s launches."""
        return np.flatnonzero(self.codes == self.index[key])

    def aggregate(self, column: str) -> Dict[str, Optional[float]]:
        """Per key: `column` summed for durations, else its duration-weighted mean (duration_ns and
        DELTA_COLUMNS from the groups: a set built from the table has no launches)."""
        if column == "duration_ns":
            return {k: g["total_ns"] for k, g in self.groups.items()}
        if column in DELTA_COLUMNS:
            return {k: g["metrics"][column] for k, g in self.groups.items()}
        durations = _floats(self.kernels, "duration_ns")
        values = weighted_means(self.codes, len(self.keys), _floats(self.kernels, column), durations)
        return {k: _none(v) for k, v in zip(self.keys, values.tolist())}


def _labels(names: List[str], demangled: List[str], keys: List[str]) -> List[str]:
    """What the user reads for each kernel: the short name, plus the template arguments where the
    kernel is one instantiation of several; the whole key where that still does not tell them apart."""
    labels = []
    for name, full, key in zip(names, demangled, keys):
        short = name if name and "(" not in name else short_name(key)
        labels.append(short + template_arguments(short, full or key) if short else key)
    seen: Dict[str, int] = {}
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
    return [label if seen[label] == 1 else key for label, key in zip(labels, keys)]


def kernel_set(kernels: pd.DataFrame) -> KernelSet:
    """The run's kernels grouped by key, with totals, bound label and DELTA_COLUMNS means per key."""
    # Per-key figures by bincount over integer key codes (in order of first appearance): a
    # groupby per column would cost ~4x as much on a 1M-launch run.
    codes, keys = kernel_keys(kernels)
    n = len(keys)
    first = columnar.first_rows(codes, n)
    durations = _floats(kernels, "duration_ns")
    totals = _per_key_totals(codes, n, durations).tolist()
    launches = np.bincount(codes, minlength=n).tolist()
    bounds = _dominant_bounds(codes, n, kernels["bound"], durations)
    # A tracer's counters (sparse, no stored value) are not densified: their means are all NaN.
    means = {c: (np.full(n, np.nan) if is_all_nan_column(kernels[c])
                 else weighted_means(codes, n, _floats(kernels, c), durations)).tolist() for c in DELTA_COLUMNS}
    text = lambda column: [v if isinstance(v, str) else "" for v in kernels[column].to_numpy(dtype=object)[first]]  # noqa: E731
    names, demangled, mangled = text("name"), text("demangled_name"), text("mangled_name")
    labels = _labels(names, [normalise_kernel_name(d) for d in demangled], keys)
    groups = {}
    for i, key in enumerate(keys):
        groups[key] = {"name": names[i], "label": labels[i], "mangled": normalise_kernel_name(mangled[i]),
                       "demangled": normalise_kernel_name(demangled[i]), "short": short_name(names[i] or key),
                       "launches": int(launches[i]), "total_ns": _none(totals[i]), "bound": bounds[i],
                       "metrics": {c: _none(means[c][i]) for c in DELTA_COLUMNS}}
    return KernelSet(keys, groups, _run_total(totals), _device_ids(kernels), kernels, codes)


def _run_total(key_totals: List[float]) -> Optional[float]:
    """The run's time: its keys' totals summed exactly (math.fsum), so a set built from the launches
    and one built from the export's per-key table give the same figure; None where nothing is timed."""
    timed = [t for t in key_totals if t == t]
    return math.fsum(timed) if timed else None


def _device_ids(kernels: pd.DataFrame) -> set:
    ids = _floats(kernels, "device") if "device" in kernels.columns else np.array([])
    return set(np.unique(ids[~np.isnan(ids)]).astype(int).tolist())


# -- the per-instantiation table an export writes -----------------------------------------------
# Summary table COMPARE_TABLE: one row per key of kernel_set (in its order) with everything compare
# reads per key, computed once at export, so comparing two 1M-launch runs reads a few thousand rows
# instead of a million launches (docs/FORMAT.md).  Runs exported before it compare from the launches.
COMPARE_TABLE = "compare_kernels"
TABLE_TEXT = ("key", "name", "label", "mangled", "demangled", "short", "bound", "devices")
TABLE_COUNTS = ("launches", "launch")  # launch: the representative launch (representative_launch)
TABLE_FIGURES = ("total_ns",) + DELTA_COLUMNS
TABLE_COLUMNS = TABLE_TEXT + TABLE_COUNTS + TABLE_FIGURES + ("launch_config",)


def compare_table(kernels: pd.DataFrame) -> pd.DataFrame:
    """The kernels table grouped as kernel_set groups it: one row per key with its names, figures,
    representative launch, launch configuration (None unless all its launches share one) and the
    device ids it ran on ("0,1")."""
    kset = kernel_set(kernels)
    configs = launch_configs(kset, kset.keys)
    groups = [kset.groups[k] for k in kset.keys]
    frame = pd.DataFrame({
        # Text as pandas infers it (its str dtype on pandas 3), as a summary table read back has it.
        **{c: pd.Series(list(kset.keys) if c == "key" else [g[c] for g in groups]) for c in TABLE_TEXT if c != "devices"},
        "devices": pd.Series(_devices_per_key(kset)),
        "launches": np.array([g["launches"] for g in groups], dtype=np.int64),
        "launch": _representatives(kset),
        "total_ns": np.array([np.nan if g["total_ns"] is None else g["total_ns"] for g in groups], dtype=np.float64),
        **{c: np.array([np.nan if g["metrics"][c] is None else g["metrics"][c] for g in groups], dtype=np.float64)
           for c in DELTA_COLUMNS},
        "launch_config": pd.Series([configs[k] for k in kset.keys]),
    }, columns=list(TABLE_COLUMNS))
    frame.attrs["units"] = {c: KERNEL_COLUMNS[c][0] for c in DELTA_COLUMNS} | {"total_ns": "ns"}
    return frame


def _representatives(kset: KernelSet) -> np.ndarray:
    """Per key, representative_launch's row, for all keys at once: its longest launch (the first of
    equal ones), its first launch where none has a finite duration.  No sort: each key's longest
    duration by one pass, then the first row holding it."""
    durations = _floats(kset.kernels, "duration_ns")
    n = len(kset.keys)
    timed = np.where(np.isnan(durations), -np.inf, durations)
    longest = np.full(n, -np.inf)
    np.maximum.at(longest, kset.codes, timed)
    holders = np.flatnonzero(timed == longest[kset.codes])
    first_longest = np.empty(n, dtype=np.int64)
    first_longest[kset.codes[holders[::-1]]] = holders[::-1]  # the last write per key is its first holder
    return np.where(np.isfinite(longest), first_longest, kset.first)


def _devices_per_key(kset: KernelSet) -> List[str]:
    """Per key, the device ids its launches ran on, as "0,1" ("" where the table does not say)."""
    out: List[List[int]] = [[] for _ in kset.keys]
    if "device" in kset.kernels.columns:
        ids = _floats(kset.kernels, "device")
        known = ~np.isnan(ids)
        device_codes, devices = columnar.factorize_ints(ids[known].astype(np.int64))
        devices, rank = np.unique(devices, return_inverse=True)  # in device order: each key's ids come out sorted
        width = max(len(devices), 1)
        combos = kset.codes[known].astype(np.int64) * width + rank[device_codes]
        for combo in np.flatnonzero(np.bincount(combos, minlength=len(kset.keys) * width)).tolist():
            out[combo // width].append(int(devices[combo % width]))
    return [",".join(map(str, ids)) for ids in out]


def kernel_set_from_table(table: pd.DataFrame) -> KernelSet:
    """The KernelSet of a compare_table read back (checked by check_compare_table)."""
    text = {c: [v if isinstance(v, str) else "" for v in table[c].tolist()] for c in TABLE_TEXT}
    figures = {c: [_none(v) for v in table[c].to_numpy(dtype=np.float64).tolist()] for c in TABLE_FIGURES}
    launches = table["launches"].to_numpy(dtype=np.int64).tolist()
    keys = text["key"]
    groups = {key: {"name": text["name"][i], "label": text["label"][i], "mangled": text["mangled"][i],
                    "demangled": text["demangled"][i], "short": text["short"][i], "launches": launches[i],
                    "total_ns": figures["total_ns"][i], "bound": text["bound"][i],
                    "metrics": {c: figures[c][i] for c in DELTA_COLUMNS}}
              for i, key in enumerate(keys)}
    configs = {k: v if isinstance(v, str) else None for k, v in zip(keys, table["launch_config"].tolist())}
    devices = {int(d) for ids in text["devices"] for d in ids.split(",") if d}
    total = _run_total([np.nan if t is None else t for t in figures["total_ns"]])
    return KernelSet(keys, groups, total, devices, configs=configs,
                     representatives=dict(zip(keys, table["launch"].to_numpy(dtype=np.int64).tolist())))


# -- pairing ---------------------------------------------------------------------------------
def _config_text(kernels: pd.DataFrame, row: int) -> Optional[str]:
    """One launch's configuration as text; None where the table lacks any of its parts."""
    parts = []
    for column in LAUNCH_CONFIG:
        value = kernels[column].to_numpy()[row]
        value = value.item() if hasattr(value, "item") else value
        if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
            return None
        parts.append(f"{column}={value:g}" if isinstance(value, float) else f"{column}={value}")
    return ", ".join(parts)


def launch_configs(kset: KernelSet, keys: Sequence[str]) -> Dict[str, Optional[str]]:
    """Per key: its launch configuration when all its launches share one, else None.  Only the
    launches of `keys` are looked at (what the name stages left)."""
    if kset.configs is not None:  # computed at export for every key (the same per key: see compare_table)
        return {k: kset.configs[k] for k in keys}
    out: Dict[str, Optional[str]] = {k: None for k in keys}
    if any(c not in kset.kernels.columns for c in LAUNCH_CONFIG):
        return out
    wanted = np.zeros(len(kset.keys), dtype=bool)
    wanted[[kset.index[k] for k in keys]] = True
    rows = np.flatnonzero(wanted[kset.codes])
    key_codes = kset.codes[rows]
    columns = itertools.chain([key_codes], (kset.kernels[c].to_numpy()[rows] for c in LAUNCH_CONFIG))  # one at a time
    _, firsts = columnar.group_codes(columns)
    per_key = np.bincount(key_codes[firsts], minlength=len(kset.keys))  # distinct configurations per key
    for key in keys:
        if per_key[kset.index[key]] == 1:
            out[key] = _config_text(kset.kernels, int(kset.first[kset.index[key]]))
    return out


def _pair_by_value(left_b: List[str], left_r: List[str], value_b: Dict[str, str], value_r: Dict[str, str]):
    """(base key, run key) pairs whose non-empty value names exactly one kernel on each side."""
    def index(keys, values):
        found: Dict[str, List[str]] = {}
        for k in keys:
            if values.get(k):
                found.setdefault(values[k], []).append(k)
        return found
    b, r = index(left_b, value_b), index(left_r, value_r)
    return [(keys[0], r[v][0]) for v, keys in b.items() if len(keys) == 1 and len(r.get(v, ())) == 1]


@dataclasses.dataclass
class Pairing:
    pairs: List[Tuple[str, str, str]]  # (base key, run key, how)
    only_in_base: List[str]
    only_in_run: List[str]
    configs: Dict[str, Dict[str, Optional[str]]]  # "base"/"run" -> key -> launch configuration looked at
    suggested: List[Tuple[str, str]] = dataclasses.field(default_factory=list)  # leftovers of one configuration


def pair_kernels(base: KernelSet, run: KernelSet, chosen: Iterable[Tuple[str, str]] = (),
                 automatic: bool = True) -> Pairing:
    """Pair the two runs' kernels (see the module docstring); `chosen` are the user's (base key, run key).
    automatic=False: the user's pairs only (two vendors' kernels: a name or launch configuration in
    common would be chance)."""
    left_b, left_r = list(base.keys), list(run.keys)
    pairs: List[Tuple[str, str, str]] = []

    def take(found, how):
        for b, r in found:
            pairs.append((b, r, how))
            left_b.remove(b)
            left_r.remove(r)

    take([(b, r) for b, r in chosen if b in left_b and r in left_r], "user")
    if not automatic:
        return Pairing(pairs, left_b, left_r, {"base": {}, "run": {}})
    for stage in NAME_STAGES:
        take(_pair_by_value(left_b, left_r, {k: base.groups[k][stage] for k in left_b},
                            {k: run.groups[k][stage] for k in left_r}), stage)
    if len(left_b) == 1 and len(left_r) == 1:
        take([(left_b[0], left_r[0])], "only-one-left")
    configs, suggested = {"base": {}, "run": {}}, []
    if left_b and left_r:
        configs = {"base": launch_configs(base, left_b), "run": launch_configs(run, left_r)}
        suggested = _pair_by_value(left_b, left_r, configs["base"], configs["run"])
    return Pairing(pairs, left_b, left_r, configs, suggested)


def resolve_kernel(kset: KernelSet, text: str) -> Optional[str]:
    """The key `text` names on this side: a key, mangled name, label, or a short name naming one kernel."""
    if text in kset.groups:
        return text
    for field in ("mangled", "label", "short"):
        found = [k for k, g in kset.groups.items() if g[field] == text]
        if len(found) == 1:
            return found[0]
    return None


def resolve_choice(base: KernelSet, run: KernelSet, text: str) -> Tuple[str, str]:
    """'<base kernel>:<run kernel>' as the user wrote it -> (base key, run key).  Names contain ':'
    (C++ namespaces), so every split is tried and exactly one must name a kernel on each side."""
    found = {(resolve_kernel(base, text[:i]), resolve_kernel(run, text[i + 1:]))
             for i, ch in enumerate(text) if ch == ":"}
    found = {(b, r) for b, r in found if b is not None and r is not None}
    if len(found) != 1:
        why = "names no kernel of the baseline and one of the run" if not found else "can be split several ways"
        raise ValueError(f"pair {text!r} {why}: give it as BASELINE_KERNEL:RUN_KERNEL (each a kernel's "
                         f"demangled name, mangled name, or short name where it names one kernel)")
    return found.pop()


# -- the comparison document -------------------------------------------------------------------
def _ratio(base: Optional[float], run: Optional[float]) -> Optional[float]:
    return base / run if base is not None and run is not None and run > 0 else None


def _delta(base: Optional[float], run: Optional[float]) -> Optional[float]:
    return run - base if base is not None and run is not None else None


def _per_launch(total: Optional[float], launches: int) -> Optional[float]:
    return total / launches if total is not None and launches else None


def _paired(b_key: str, r_key: str, how: str, b: dict, r: dict) -> dict:
    return {
        "key": b_key, "run_key": r_key, "paired_by": how,
        "name": r["name"] if r["name"] else b["name"],
        "base_name": b["label"], "run_name": r["label"],
        "base_launches": b["launches"], "run_launches": r["launches"],
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


def _labels_of(groups: Dict[str, dict], keys) -> Dict[str, str]:
    """{key: label} where the label is not the tool's name (instantiations of one template, renamed ones)."""
    return {k: groups[k]["label"] for k in keys if groups[k]["label"] != groups[k]["name"]}


@dataclasses.dataclass
class RunInfo:
    """What the warnings need to know about a run besides its kernels: its tool, the GPUs it ran on
    and its profiler steps (step_count; None for a run without any)."""
    tool: str = ""
    devices: Tuple[str, ...] = ()
    steps: Optional[int] = None


# -- the basis: per step where both runs have profiler steps ------------------------------------------
def step_count(breakdown: Optional[pd.DataFrame]) -> Optional[int]:
    """A PyTorch run's profiler steps: the rows of its step_time_breakdown with a ProfilerStep number
    (the steps the Steps view lists; -1 is the whole capture of a trace without ProfilerStep#N).
    None where the run has none."""
    if breakdown is None or "step" not in breakdown.columns:
        return None
    count = int((pd.to_numeric(breakdown["step"], errors="coerce") >= 0).sum())
    return count or None


def _steps_text(n: int) -> str:
    return f"{n} step{'' if n == 1 else 's'}"


def comparison_basis(base: RunInfo, run: RunInfo) -> dict:
    """{per_step, steps: [baseline, run], text}: per step where both runs have profiler steps (a 3-step
    capture against a 1-step one would otherwise read as a 3x slow-down), else whole runs."""
    steps = [base.steps, run.steps]
    if base.steps and run.steps:
        text = f"per step: baseline {_steps_text(base.steps)}, run {_steps_text(run.steps)}"
    elif base.steps or run.steps:
        side, n = ("baseline", base.steps) if base.steps else ("run", run.steps)
        text = f"whole runs: only the {side} has profiler steps ({_steps_text(n)})"
    else:
        text = "whole runs: neither has profiler steps"
    return {"per_step": bool(base.steps and run.steps), "steps": steps, "text": text}


def _per_step_groups(groups: Dict[str, dict], steps: Optional[int]) -> Dict[str, dict]:
    """The kernel groups with their time and launches divided by `steps` (unchanged where None)."""
    if not steps:
        return groups
    return {k: {**g, "total_ns": None if g["total_ns"] is None else g["total_ns"] / steps,
                "launches": g["launches"] / steps} for k, g in groups.items()}


def _share(paired: List[dict], field: str, total: Optional[float]) -> Optional[float]:
    part = sum(p[field] for p in paired if p[field] is not None)
    return part / total if total else None


_VENDORS = (("NVIDIA", re.compile(r"nvidia|geforce|quadro|tesla|titan|\b[ahbvtpkl]\d{2,3}\b|rtx|gtx", re.I)),
            ("AMD", re.compile(r"\bamd\b|instinct|radeon|\bmi\d{2,3}|gfx\d", re.I)),
            ("Intel", re.compile(r"intel|\barc\b|data center gpu max|ponte vecchio", re.I)))


def gpu_vendors(names) -> set:
    """The GPU vendors device names belong to ("NVIDIA", "AMD", "Intel"); names it cannot tell add none."""
    return {vendor for n in names for vendor, pattern in _VENDORS if pattern.search(str(n))}


def different_vendors(base: "RunInfo", run: "RunInfo") -> bool:
    b, r = gpu_vendors(base.devices), gpu_vendors(run.devices)
    return bool(b and r and b.isdisjoint(r))


def _gpu_models(names) -> set:
    """GPU names as models: drivers renamed 'GeForce GTX 1660 SUPER' to 'NVIDIA GeForce GTX 1660 SUPER'."""
    return {re.sub(r"^(nvidia|amd)\s+", "", n.strip(), flags=re.IGNORECASE).lower() for n in names}


def comparison_warnings(paired: List[dict], totals: dict, base: RunInfo, run: RunInfo,
                        kernel_counts: Tuple[int, int] = (1, 1), operators: Optional[dict] = None) -> List[dict]:
    """Why the totals may not compare like with like: {id, text, decisive}; a decisive one means the
    speed-up is not a result (different programs, GPUs or tools).  kernel_counts: each side's kernels;
    operators: pair_operators of two PyTorch runs (None for others)."""
    out = []
    by_name = [p for p in paired if p["paired_by"] in NAME_STAGES + ("user",)]
    empty = [side for side, count in zip(("baseline", "run"), kernel_counts) if not count]
    if empty:
        out.append({"id": "no-kernels", "decisive": True,
                    "text": f"the {' and the '.join(empty)} hold{'s' if len(empty) == 1 else ''} no GPU kernels "
                            f"(a CPU profile?): there is nothing to compare"})
    elif different_vendors(base, run):
        out.append({"id": "different-vendors", "decisive": True,
                    "text": f"GPUs of different vendors ({' vs '.join('/'.join(sorted(gpu_vendors(i.devices))) for i in (base, run))}): "
                            f"kernels are not paired across vendors (their kernels, names and launch configurations "
                            f"differ by design; pair one by hand if you know it does the same work); PyTorch runs "
                            f"pair their operators by name and input shapes instead"})
    elif not paired:
        out.append({"id": "no-common-kernel", "decisive": True,
                    "text": "no kernel in common: the totals compare different programs"})
    elif not by_name:
        hows = sorted({p["paired_by"] for p in paired})
        out.append({"id": "inferred-pairs-only", "decisive": False,
                    "text": f"no kernel name in common: {len(paired)} pair(s) inferred ({', '.join(hows)}); "
                            f"check they do the same work"})
    if base.devices and run.devices and _gpu_models(base.devices) != _gpu_models(run.devices):
        out.append({"id": "different-devices", "decisive": True,
                    "text": f"different GPUs: the baseline ran on {', '.join(sorted(set(base.devices)))}, the run on "
                            f"{', '.join(sorted(set(run.devices)))}: the totals compare the hardware too"})
    if base.tool and run.tool and base.tool != run.tool:
        out.append({"id": "different-tools", "decisive": True,
                    "text": f"different tools: the baseline is from {base.tool}, the run from {run.tool}: they time "
                            f"kernels differently"})
    shares = (_share(paired, "base_ns", totals["base_ns"]), _share(paired, "run_ns", totals["run_ns"]))
    if paired and any(s is not None and s < PAIRED_SHARE_WARNING for s in shares):
        text = " and ".join(f"{s:.0%} of the {side}'s" for s, side in zip(shares, ("baseline", "run")) if s is not None)
        out.append({"id": "paired-share", "decisive": False,
                    "text": f"the paired kernels are only {text} GPU time: the totals mostly compare unpaired kernels"})
    return out + _step_warnings(base, run) + _program_warnings(operators)


def _step_warnings(base: RunInfo, run: RunInfo) -> List[dict]:
    """Step counts that differ (compared per step, which assumes every step does the same work), or
    steps on one side only (whole runs compared: the other capture may hold any number of iterations)."""
    if base.steps and run.steps and base.steps != run.steps:
        return [{"id": "different-steps", "decisive": False,
                 "text": f"different step counts (baseline {_steps_text(base.steps)}, run {_steps_text(run.steps)}): every "
                         f"figure is per step (each run's kernel time and calls divided by its steps), which "
                         f"assumes each step does the same work"}]
    if bool(base.steps) != bool(run.steps):
        side, other, n = ("baseline", "run", base.steps) if base.steps else ("run", "baseline", run.steps)
        return [{"id": "steps-one-side", "decisive": False,
                 "text": f"only the {side} has profiler steps ({_steps_text(n)}): whole runs are compared, and the "
                         f"{other}'s capture may hold more or fewer iterations"}]
    return []


def _program_warnings(operators: Optional[dict]) -> List[dict]:
    """Different programs, told by what both runs hold: PyTorch runs' operators.  The rule: operators
    of one name, input dims and input types on both sides (pair_operators) make up less than
    OPERATOR_SHARE_WARNING of either run's operator GPU time; the speed-up then compares different
    models (or batch / input sizes), not one program made faster.  Runs without operator shapes (ncu,
    nsys, ...) have the kernel-based warnings above (no-common-kernel, paired-share) instead."""
    t = (operators or {}).get("totals") or {}
    shares = (t.get("base_share"), t.get("run_share"))
    if any(s is None for s in shares) or min(shares) >= OPERATOR_SHARE_WARNING:
        return []
    return [{"id": "different-programs", "decisive": True,
             "text": f"different programs: operators of the same name and input shapes make up only "
                     f"{shares[0]:.0%} of the baseline's and {shares[1]:.0%} of the run's operator GPU time "
                     f"(a different model, batch or input size): the speed-up compares different work"}]


def cross_tool_check(paired: List[dict], base: RunInfo, run: RunInfo) -> Optional[dict]:
    """When one side is Nsight Compute and the other a tracer: per pair both per-launch times and their
    ratio (ncu / tracer); pairs beyond CROSS_TOOL_RATIO_LIMIT either way are flagged, with the causes."""
    tools = (base.tool, run.tool)
    if REPLAYING_TOOL not in tools or not set(tools) & set(TRACING_TOOLS):
        return None
    ncu_side = "base" if base.tool == REPLAYING_TOOL else "run"
    trace_side = "run" if ncu_side == "base" else "base"
    flagged = 0
    for p in paired:
        ncu = _per_launch(p[f"{ncu_side}_ns"], p[f"{ncu_side}_launches"])
        traced = _per_launch(p[f"{trace_side}_ns"], p[f"{trace_side}_launches"])
        ratio = _ratio(ncu, traced)
        flag = ratio is not None and max(ratio, 1 / ratio if ratio else math.inf) > CROSS_TOOL_RATIO_LIMIT
        flagged += flag
        p["cross_tool"] = {"ncu_ns_per_launch": ncu, "trace_ns_per_launch": traced, "ratio": ratio, "flagged": flag}
    return {"ncu_side": ncu_side, "trace_tool": tools[0] if trace_side == "base" else tools[1],
            "threshold": CROSS_TOOL_RATIO_LIMIT, "flagged": flagged, "causes": CROSS_TOOL_CAUSES}


def compare_sets(base: KernelSet, run: KernelSet, chosen: Iterable[Tuple[str, str]] = (),
                 base_info: RunInfo = RunInfo(), run_info: RunInfo = RunInfo(),
                 shapes: Optional[Tuple[pd.DataFrame, pd.DataFrame]] = None) -> dict:
    """compare_kernels over kernel sets already built (the plugin keeps them per run).  Per step where
    both runs have steps (comparison_basis): times and launches divided by each run's steps.
    shapes: both runs' op_shapes tables (PyTorch runs), paired as `operators` on the same basis."""
    basis = comparison_basis(base_info, run_info)
    b_steps, r_steps = (base_info.steps, run_info.steps) if basis["per_step"] else (None, None)
    b_groups, r_groups = _per_step_groups(base.groups, b_steps), _per_step_groups(run.groups, r_steps)
    pairing = pair_kernels(base, run, chosen, automatic=not different_vendors(base_info, run_info))
    paired = [_paired(b, r, how, b_groups[b], r_groups[r]) for b, r, how in pairing.pairs]
    base_ns, run_ns = _divided(base.total_ns, b_steps), _divided(run.total_ns, r_steps)
    totals = {"base_ns": base_ns, "run_ns": run_ns, "speedup": _ratio(base_ns, run_ns)}
    basis["whole_ns"] = [base.total_ns, run.total_ns]  # the whole runs' kernel time, per step or not
    operators = pair_operators(*shapes, steps=(b_steps, r_steps)) if shapes and all(s is not None for s in shapes) else None
    warnings = comparison_warnings(paired, totals, base_info, run_info, (len(base.keys), len(run.keys)), operators)
    warnings.sort(key=lambda w: not w["decisive"])  # what makes the speed-up no result, first
    return {
        "basis": basis,
        "totals": totals,
        "warnings": warnings,
        # False: a decisive warning says the speed-up is no result (different programs, GPUs or tools).
        "comparable": not any(w["decisive"] for w in warnings),
        "matched": sorted(paired, key=lambda m: _by_time(m, "base_ns", "run_ns")),
        "only_in_base": _only(b_groups, pairing.only_in_base),
        "only_in_run": _only(r_groups, pairing.only_in_run),
        "labels": {"base": _labels_of(base.groups, pairing.only_in_base), "run": _labels_of(run.groups, pairing.only_in_run)},
        # Not paired: different names, one launch configuration (docs/http_api.md /compare).
        "suggested_pairs": [{"base_key": b, "run_key": r, "base_name": base.groups[b]["label"],
                             "run_name": run.groups[r]["label"], "launch_config": pairing.configs["base"][b]}
                            for b, r in pairing.suggested],
        "cross_tool": cross_tool_check(paired, base_info, run_info),
        "operators": operators,
    }


def _divided(value: Optional[float], steps: Optional[int]) -> Optional[float]:
    return value / steps if value is not None and steps else value


def compare_kernels(base: pd.DataFrame, run: pd.DataFrame, chosen: Iterable[Tuple[str, str]] = (),
                    base_info: RunInfo = RunInfo(), run_info: RunInfo = RunInfo()) -> dict:
    """Totals with the warnings that qualify them, paired kernels (run minus base deltas, how each
    was paired) and the kernels left on one side only."""
    return compare_sets(kernel_set(base), kernel_set(run), chosen, base_info, run_info)


# -- one pair in detail ------------------------------------------------------------------------
def representative_launch(kset: KernelSet, key: str) -> int:
    """The row of `key`'s longest launch (its first where none has a duration): the launch whose
    raw metrics stand for the kernel."""
    if kset.representatives is not None:
        return kset.representatives[key]
    rows = kset.launches_of(key)
    durations = kset.kernels["duration_ns"].to_numpy()[rows]
    return int(rows[np.nanargmax(durations)]) if np.isfinite(durations).any() else int(rows[0])


def _number(value) -> Optional[float]:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    return None if math.isnan(value) else float(value)


def _changed_row(name: str, unit: str, base, run, source: str) -> Optional[dict]:
    """One row of a pair's detail: both values and, for numbers, absolute and relative difference."""
    b, r = _number(base), _number(run)
    if b is not None and r is not None:
        diff = r - b if math.isfinite(b) and math.isfinite(r) else None
        relative = diff / abs(b) if diff is not None and b != 0 else None
        if relative:
            order = (0, -abs(relative))
        else:  # from zero (no relative change to rank by), or unchanged
            order = (1, 0.0) if diff or (diff is None and b != r) else (2, 0.0)
        return {"name": name, "unit": unit, "source": source, "base": b, "run": r, "diff": diff,
                "relative": relative, "_order": order}
    if isinstance(base, str) and isinstance(run, str) and (base or run):
        return {"name": name, "unit": unit, "source": source, "base": base, "run": run, "diff": None,
                "relative": None, "_order": (1, 0.0) if base != run else (2, 0.0)}
    return None


_NOT_COMPARED = ("launch_id", "range_id", "device", "context", "stream", "start_ns", "end_ns", "correlation_id",
                 "name", "demangled_name", "mangled_name")


def pair_detail(base: KernelSet, run: KernelSet, base_key: str, run_key: str, base_row: pd.Series,
                run_row: pd.Series, base_raw: Optional[dict] = None, run_raw: Optional[dict] = None) -> dict:
    """Every kernel-table column and every raw metric the two kernels' representative launches share:
    baseline, run, difference and relative difference, largest relative change first; then values
    that moved from zero (no relative change) and changed text (bound, grid...); unchanged ones last.
    base_row / run_row: those launches' whole rows of the kernels tables (representative_launch);
    base_raw / run_raw: their {metric: [value, unit]} (tools without raw metrics: None)."""
    units = {column: spec[0] for column, spec in KERNEL_COLUMNS.items()}
    rows = []
    for column in base_row.index:
        if column in run_row.index and column not in _NOT_COMPARED and not column.startswith("_"):
            row = _changed_row(column, units.get(column, ""), base_row[column], run_row[column], "table")
            if row:
                rows.append(row)
    for metric, pair in (base_raw or {}).items():
        other = (run_raw or {}).get(metric)
        if other is not None:
            row = _changed_row(metric, pair[1] if len(pair) > 1 else "", pair[0], other[0], "raw")
            if row:
                rows.append(row)
    rows.sort(key=lambda x: x["_order"])
    for row in rows:
        del row["_order"]
    return {"base": _detail_side(base, base_key, base_row), "run": _detail_side(run, run_key, run_row), "rows": rows}


def _detail_side(kset: KernelSet, key: str, row: pd.Series) -> dict:
    group = kset.groups[key]
    return {"key": key, "label": group["label"], "launch": representative_launch(kset, key),
            "launches": group["launches"], "total_ns": group["total_ns"], "bound": _text(row.get("bound")),
            "bound_reason": _text(row.get("bound_reason")), "dominant_bound": group["bound"],
            "roofline": {c: _number(row.get(c)) for c in ("ai_dram", "flop_per_s", "attainable_flop_per_s")}}


def devices_that_ran(devices: List[dict], kernels: pd.DataFrame) -> Tuple[str, ...]:
    """Names of the devices ({id, name} dicts) the kernels ran on; all of them when the table does not
    say (a PyTorch trace lists every GPU of the node: 8 identical names would hide the one that ran)."""
    return devices_of(devices, _device_ids(kernels))


def devices_of(devices: List[dict], ran: set) -> Tuple[str, ...]:
    """Names of the devices whose ids are in `ran` (all of them where none is)."""
    used = [d for d in devices if d.get("id") in ran] or devices
    return tuple(str(d.get("name", "")) for d in used)


def _text(value) -> str:
    return value if isinstance(value, str) else ""


# -- a series of runs (issue 12: v1 -> v2 -> ... exported together) ----------------------------------
# What the Series view plots per step for each kernel it follows: the kernel's time (all its launches)
# and its duration-weighted means; `bound` is its dominant bound label.
SERIES_METRICS = ("duration_ns", "achieved_occupancy_pct", "sm_throughput_pct", "memory_throughput_pct",
                  "l1_hit_rate_pct", "l2_hit_rate_pct")


def _series_point(kset: KernelSet, key: str, how: Optional[str]) -> dict:
    group = kset.groups[key]
    values = {"duration_ns": group["total_ns"], **{c: group["metrics"][c] for c in SERIES_METRICS[1:]}}
    return {"key": key, "label": group["label"], "paired_by": how, "launches": group["launches"],
            "bound": group["bound"], **values}


def series_chains(sets: Sequence[KernelSet]) -> List[dict]:
    """Kernels followed across a series' steps by pairing each step with the next (pair_kernels
    v1 -> v2 -> ...), so a kernel renamed midway stays one line where a stage pairs the two names.
    One chain per kernel: `points` holds one entry per step (None where the kernel is absent: before
    it appears, after it is left unpaired); chains longest in time first."""
    chains: List[dict] = []
    open_chains: Dict[str, dict] = {}  # key in the previous step -> its chain
    for step, kset in enumerate(sets):
        following: Dict[str, dict] = {}
        pairs = pair_kernels(sets[step - 1], kset).pairs if step else []
        for b_key, r_key, how in pairs:
            chain = open_chains[b_key]
            chain["points"][step] = _series_point(kset, r_key, how)
            following[r_key] = chain
        for key in kset.keys:
            if key not in following:  # a kernel this step starts (or the first step's)
                chain = {"points": [None] * len(sets)}
                chain["points"][step] = _series_point(kset, key, None)
                chains.append(chain)
                following[key] = chain
        open_chains = following
    for chain in chains:
        present = [p for p in chain["points"] if p is not None]
        chain["label"] = present[-1]["label"]
        chain["labels"] = list(dict.fromkeys(p["label"] for p in present))  # every name it had, in order
        chain["total_ns"] = sum(p["duration_ns"] or 0.0 for p in present)
    return sorted(chains, key=lambda c: -c["total_ns"])


# -- operators of two PyTorch runs (issue 12 item 5: the same model on two vendors) -------------------
OPERATOR_KEY = ("op", "input_dims", "input_types")


def _operator_rows(shapes: pd.DataFrame) -> Dict[Tuple[str, str, str], dict]:
    """{(op, input dims, input types): {category, calls, gpu_ns}} of an op_shapes table, summed over
    its concrete inputs (scalars passed by value split a shape there, not across vendors)."""
    rows: Dict[Tuple[str, str, str], dict] = {}
    columns = [shapes[c].tolist() if c in shapes.columns else [""] * len(shapes) for c in OPERATOR_KEY]
    categories = shapes["category"].tolist() if "category" in shapes.columns else [""] * len(shapes)
    calls = pd.to_numeric(shapes.get("calls", pd.Series(np.nan, index=shapes.index)), errors="coerce").tolist()
    gpu = pd.to_numeric(shapes.get("gpu_ns", pd.Series(np.nan, index=shapes.index)), errors="coerce").tolist()
    for op, dims, types, category, n, ns in zip(*columns, categories, calls, gpu):
        row = rows.setdefault((_text(op), _text(dims), _text(types)), {"category": _text(category), "calls": 0, "gpu_ns": 0.0})
        row["calls"] += 0 if n != n else int(n)
        row["gpu_ns"] += 0.0 if ns != ns else float(ns)
    return rows


def _per_step_operators(rows: Dict[Tuple[str, str, str], dict], steps: Optional[int]) -> Dict[Tuple[str, str, str], dict]:
    if not steps:
        return rows
    return {k: {**v, "calls": v["calls"] / steps, "gpu_ns": v["gpu_ns"] / steps} for k, v in rows.items()}


def _operator(key: Tuple[str, str, str], **fields) -> dict:
    return {"op": key[0], "input_dims": key[1], "input_types": key[2], **fields}


def pair_operators(base_shapes: pd.DataFrame, run_shapes: pd.DataFrame,
                   steps: Tuple[Optional[int], Optional[int]] = (None, None)) -> dict:
    """Two PyTorch runs' operators paired by (name, input dims, input types) from their op_shapes
    tables: where kernels cannot be paired (another vendor's libraries launch other kernels) the
    operator that launched them still can.  Per pair both GPU times and their ratio (baseline / run);
    calls and times divided by each side's `steps` where given (compare_sets' basis)."""
    b, r = _per_step_operators(_operator_rows(base_shapes), steps[0]), _per_step_operators(_operator_rows(run_shapes), steps[1])
    matched = [_operator(k, category=b[k]["category"] or r[k]["category"], base_calls=b[k]["calls"],
                         run_calls=r[k]["calls"], base_ns=b[k]["gpu_ns"], run_ns=r[k]["gpu_ns"],
                         speedup=_ratio(b[k]["gpu_ns"], r[k]["gpu_ns"])) for k in b if k in r]
    only = lambda side, other: [_operator(k, calls=v["calls"], total_ns=v["gpu_ns"])  # noqa: E731
                                for k, v in side.items() if k not in other]
    base_ns, run_ns = sum(m["base_ns"] for m in matched), sum(m["run_ns"] for m in matched)
    return {
        "key": list(OPERATOR_KEY),
        "matched": sorted(matched, key=lambda m: _by_time(m, "base_ns", "run_ns")),
        "only_in_base": sorted(only(b, r), key=lambda o: _by_time(o, "total_ns")),
        "only_in_run": sorted(only(r, b), key=lambda o: _by_time(o, "total_ns")),
        "totals": {"base_ns": base_ns, "run_ns": run_ns, "speedup": _ratio(base_ns, run_ns),
                   "base_share": _ratio(base_ns, sum(v["gpu_ns"] for v in b.values()) or None),
                   "run_share": _ratio(run_ns, sum(v["gpu_ns"] for v in r.values()) or None)},
    }


# -- the compare table read back (summary_compare_kernels.json.gz): is it what compare_table wrote? ---
def check_compare_table(frame, kernel_count: Any) -> None:
    """ValueError unless `frame` is what compare_table writes for a run of
    `kernel_count` launches: its columns, unique keys, text where text goes, counts that add up to
    the run's launches (a table from another export does not), representative launches inside it."""
    import numpy as np
    from pandas.api.types import is_numeric_dtype
    missing = [c for c in TABLE_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"compare table lacks {', '.join(missing)}")
    for column in TABLE_TEXT:
        if not all(isinstance(v, str) for v in frame[column].tolist()):
            raise ValueError(f"compare table column {column!r} is not all text")
    if not all(isinstance(v, str) or v is None or v != v for v in frame["launch_config"].tolist()):
        raise ValueError("compare table column 'launch_config' is not text or null")
    if frame["key"].duplicated().any() or (frame["key"] == "").any():
        raise ValueError("compare table keys are not unique names")
    for column in TABLE_COUNTS + TABLE_FIGURES:
        if not is_numeric_dtype(frame[column]) or frame[column].dtype == bool:
            raise ValueError(f"compare table column {column!r} is not numbers")
    counts = {c: frame[c].to_numpy(dtype=np.float64) for c in TABLE_COUNTS}
    if not all(np.all((v >= 0) & (v == np.floor(v))) for v in counts.values()):
        raise ValueError("compare table launches are not counts")
    if not is_count(kernel_count) or counts["launches"].sum() != kernel_count or \
            np.any(counts["launch"] >= kernel_count) or np.any(counts["launches"] < 1):
        raise ValueError(f"compare table does not hold profile.json's {kernel_count!r} launches "
                         f"(files from different exports?)")


def compared_columns(metric: str = "duration_ns") -> set:
    """The kernels-table columns compare reads (a gate on `metric` reads that one too)."""
    return {"name", "demangled_name", "mangled_name", "device", "duration_ns", "bound", metric,
            *DELTA_COLUMNS, *LAUNCH_CONFIG}
