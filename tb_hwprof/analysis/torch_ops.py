"""Operator level of a PyTorch trace: GPU time per operator (direct and subtree), as TraceLens's
ops_summary defines it, from the model's join (model.TorchTrace: op -> runtime call -> GPU work).

direct_gpu_ns: GPU kernels, copies and sets launched by runtime calls whose innermost enclosing
operator is this one; subtree_gpu_ns: the same counted for every enclosing operator; calls: the
instances that launched GPU work directly (TraceLens's Count).
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np
import pandas as pd

from ..core.columnar import object_factorize
from ..core.model import TorchTrace

OP_GPU_TIME_COLUMNS = ["op", "calls", "instances", "direct_gpu_ns", "subtree_gpu_ns", "cpu_self_ns", "cpu_total_ns",
                       "kernels", "top_kernel", "top_kernel_gpu_ns"]


def op_gpu_time(torch: TorchTrace, names: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> pd.DataFrame:
    """summaries["op_gpu_time"]: one row per operator name, by direct GPU time (then CPU time).
    names: op_names(torch), where the caller has it."""
    ops = torch.ops
    if ops.empty:
        return pd.DataFrame(columns=OP_GPU_TIME_COLUMNS)
    codes, distinct = op_names(torch) if names is None else names
    per_name = lambda values: np.bincount(codes, weights=values, minlength=len(distinct))
    gpu = gpu_ns_per_name(torch, codes, len(distinct))
    duration = _durations(ops)
    table = pd.DataFrame({
        "op": pd.Series(distinct, dtype=object), "calls": gpu["calls"],
        "instances": np.bincount(codes, minlength=len(distinct)).astype(np.int64),
        "direct_gpu_ns": gpu["direct"], "subtree_gpu_ns": gpu["subtree"],
        "cpu_self_ns": per_name(cpu_self_ns(torch, duration)), "cpu_total_ns": per_name(duration),
        "kernels": gpu["kernels"]})
    top = _top_kernel_per_op(torch, (codes, distinct))
    table = table.merge(top, on="op", how="left")
    table["top_kernel"] = table["top_kernel"].fillna("")
    table = table.sort_values(["direct_gpu_ns", "subtree_gpu_ns", "cpu_total_ns"], ascending=False, kind="stable")
    return table[OP_GPU_TIME_COLUMNS].reset_index(drop=True)


def gpu_ns_per_name(torch: TorchTrace, codes: np.ndarray, n_names: int) -> Dict[str, np.ndarray]:
    """Per operator name (codes: one per row of torch.ops, 0..n_names-1): direct (GPU ns its
    instances launched themselves), subtree (by them and everything they enclose), calls (instances
    that launched GPU work), kernels (GPU activities they launched).  Worked from the GPU rows up
    their ops' ancestors, never over every operator: a trace's operators are mostly CPU-only."""
    op, ns, activities = launch_runs(torch.gpu)
    name_of = codes[op]
    per_name = lambda rows, values=None: np.bincount(rows, weights=values, minlength=n_names)
    launching = np.zeros(len(torch.ops), dtype=bool)
    launching[op] = True
    nodes, carried = climb_ancestors(torch.ops["parent"].to_numpy(), op, ns)
    return {"direct": per_name(name_of, ns).astype(np.float64),
            "subtree": per_name(codes[nodes], carried).astype(np.float64),
            "calls": per_name(codes[launching]).astype(np.int64),
            "kernels": per_name(name_of, activities).astype(np.int64)}


def launch_runs(gpu: pd.DataFrame) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(op, gpu_ns, activities) per run of consecutive gpu rows launched by one op (rows of no op
    left out): the op's row, the run's GPU ns (float64) and its number of rows.  An op's kernels
    are neighbours in the GPU rows' order, so runs are fewer than rows; an op may have several."""
    op = gpu["op"].to_numpy()
    mine = op >= 0
    launcher, duration = op[mine], _durations(gpu)[mine]
    if launcher.size == 0:
        return launcher, duration, launcher
    first = np.flatnonzero(np.concatenate([[True], launcher[1:] != launcher[:-1]]))
    return launcher[first], np.add.reduceat(duration, first), np.diff(np.append(first, launcher.size))


def climb_ancestors(parent: np.ndarray, rows: np.ndarray, values: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(nodes, values): each row of `rows` and each of its ancestors in the forest `parent` (-1 for
    roots), with the row's value; a bincount over them sums, per node, the values of the rows at or
    below it.  (A trace's operators nest a few levels deep: a handful of gathers.  Values that are
    whole numbers, as ns are, sum exactly in any order.)"""
    nodes, carried = [rows], [values]
    while rows.size:
        up = parent[rows]
        alive = up >= 0
        rows, values = up[alive], values[alive]
        nodes.append(rows)
        carried.append(values)
    return np.concatenate(nodes), np.concatenate(carried)


def _durations(frame: pd.DataFrame) -> np.ndarray:
    """end_ns - start_ns per row (in the columns' type: exact ns), as float64 (the tables' sums)."""
    return (frame["end_ns"].to_numpy() - frame["start_ns"].to_numpy()).astype(np.float64)


def cpu_self_ns(torch: TorchTrace, duration: Optional[np.ndarray] = None) -> np.ndarray:
    """Per op instance: its wall time less that of the ops directly inside it (>= 0).
    duration: _durations(torch.ops), where the caller has it."""
    ops = torch.ops
    duration = _durations(ops) if duration is None else duration
    # Each op's time handed to its parent's slot (+1: slot 0 takes the roots'), in one bincount.
    self_ns = np.bincount(ops["parent"].to_numpy() + 1, weights=duration, minlength=len(ops) + 1)[1:]
    np.subtract(duration, self_ns, out=self_ns)
    return np.maximum(self_ns, 0.0, out=self_ns)


def op_names(torch: TorchTrace) -> Tuple[np.ndarray, np.ndarray]:
    """(code per op instance, distinct names in order of first sight) of torch.ops["name"]; the
    PyTorch tables all group operators by name, and hash the names once through this."""
    return object_factorize(torch.ops["name"].to_numpy())


def _top_kernel_per_op(torch: TorchTrace, names: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> pd.DataFrame:
    """Per operator name: the kernel (GPU activity) name it spent most GPU time in, and that time.
    names: op_names(torch), where the caller has it."""
    gpu = torch.gpu
    launched = gpu["op"].to_numpy() >= 0
    if not launched.any():
        return pd.DataFrame({"op": pd.Series(dtype=object), "top_kernel": pd.Series(dtype=object),
                             "top_kernel_gpu_ns": pd.Series(dtype=float)})
    name_codes, op_names_ = op_names(torch) if names is None else names
    op_codes = name_codes[gpu["op"].to_numpy()[launched]]
    kernel_codes, kernel_names = object_factorize(gpu["name"].to_numpy()[launched])
    ns = _durations(gpu)[launched]
    pair, pairs = pd.factorize(op_codes * len(kernel_names) + kernel_codes)
    sums = np.bincount(pair, weights=ns)
    pair_op, pair_kernel = pairs // len(kernel_names), pairs % len(kernel_names)
    # Per op, its pair of largest time (the first such pair on ties, as a stable sort keeps it).
    order = np.lexsort((np.arange(pairs.size), -sums, pair_op))
    first = order[np.r_[True, pair_op[order][1:] != pair_op[order][:-1]]]
    return pd.DataFrame({"op": pd.Series(op_names_[pair_op[first]], dtype=object),
                         "top_kernel": pd.Series(kernel_names[pair_kernel[first]], dtype=object),
                         "top_kernel_gpu_ns": sums[first]})
