"""Operator level of a PyTorch trace: GPU time per operator (direct and subtree), as TraceLens's
ops_summary defines it, from the model's join (model.TorchTrace: op -> runtime call -> GPU work).

direct_gpu_ns: GPU kernels, copies and sets launched by runtime calls whose innermost enclosing
operator is this one; subtree_gpu_ns: the same counted for every enclosing operator; calls: the
instances that launched GPU work directly (TraceLens's Count).
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
import pandas as pd

from ..columnar import object_factorize
from ..model import TorchTrace

OP_GPU_TIME_COLUMNS = ["op", "calls", "instances", "direct_gpu_ns", "subtree_gpu_ns", "cpu_self_ns", "cpu_total_ns",
                       "kernels", "top_kernel", "top_kernel_gpu_ns"]


def gpu_ns_per_op_instance(torch: TorchTrace):
    """(direct, subtree, launches) per row of torch.ops: GPU ns launched by the op itself, by it and
    everything it encloses, and how many GPU activities it launched itself."""
    n = len(torch.ops)
    op = torch.gpu["op"].to_numpy()
    mine = op >= 0
    launcher, duration = op[mine], _durations(torch.gpu)[mine]
    direct = np.bincount(launcher, weights=duration, minlength=n).astype(np.float64)
    launches = np.bincount(launcher, minlength=n)
    subtree = sum_over_ancestors(torch.ops["parent"].to_numpy(), np.flatnonzero(direct), direct)
    return direct, subtree, launches


def sum_over_ancestors(parent: np.ndarray, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per node of the forest `parent` (-1 for roots): the sum of values[rows] over those of `rows`
    that are the node or lie below it.  Each row's value climbs its chain of ancestors (a trace's
    operators nest a few levels deep), and one bincount adds up what reached each node: the work
    follows the rows holding a value, not every node of the forest at every level.  (Values that are
    whole numbers, as ns are, sum exactly in any order.)"""
    weights = values[rows]
    nodes, carried = [rows], [weights]
    while rows.size:
        up = parent[rows]
        alive = up >= 0
        rows, weights = up[alive], weights[alive]
        nodes.append(rows)
        carried.append(weights)
    return np.bincount(np.concatenate(nodes), weights=np.concatenate(carried), minlength=parent.size).astype(np.float64)


def _durations(frame: pd.DataFrame) -> np.ndarray:
    """end_ns - start_ns per row, as float64 (the tables' sums)."""
    return (frame["end_ns"].to_numpy() - frame["start_ns"].to_numpy()).astype(np.float64)


def cpu_self_ns(torch: TorchTrace, duration: Optional[np.ndarray] = None) -> np.ndarray:
    """Per op instance: its wall time less that of the ops directly inside it (>= 0).
    duration: _durations(torch.ops), where the caller has it."""
    ops = torch.ops
    duration = _durations(ops) if duration is None else duration
    parent = ops["parent"].to_numpy()
    child = parent >= 0
    inner = np.bincount(parent[child], weights=duration[child], minlength=len(ops)).astype(np.float64)
    return np.maximum(duration - inner, 0.0)


def op_gpu_time(torch: TorchTrace, names: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> pd.DataFrame:
    """summaries["op_gpu_time"]: one row per operator name, by direct GPU time (then CPU time).
    names: op_names(torch), where the caller has it."""
    ops = torch.ops
    if ops.empty:
        return pd.DataFrame(columns=OP_GPU_TIME_COLUMNS)
    direct, subtree, launches = gpu_ns_per_op_instance(torch)
    codes, distinct = op_names(torch) if names is None else names
    per_name = lambda values: np.bincount(codes, weights=values, minlength=len(distinct))
    count_per_name = lambda rows: np.bincount(codes[rows], minlength=len(distinct)).astype(np.int64)
    duration = _durations(ops)
    table = pd.DataFrame({
        "op": pd.Series(distinct, dtype=object), "calls": count_per_name(launches > 0),
        "instances": count_per_name(slice(None)),
        "direct_gpu_ns": per_name(direct), "subtree_gpu_ns": per_name(subtree),
        "cpu_self_ns": per_name(cpu_self_ns(torch, duration)), "cpu_total_ns": per_name(duration),
        "kernels": count_per_name(_launching_ops(torch.gpu))})
    top = _top_kernel_per_op(torch, (codes, distinct))
    table = table.merge(top, on="op", how="left")
    table["top_kernel"] = table["top_kernel"].fillna("")
    table = table.sort_values(["direct_gpu_ns", "subtree_gpu_ns", "cpu_total_ns"], ascending=False, kind="stable")
    return table[OP_GPU_TIME_COLUMNS].reset_index(drop=True)


def op_names(torch: TorchTrace) -> Tuple[np.ndarray, np.ndarray]:
    """(code per op instance, distinct names in order of first sight) of torch.ops["name"]; the
    PyTorch tables all group operators by name, and hash the names once through this."""
    return object_factorize(torch.ops["name"].to_numpy())


def _launching_ops(gpu: pd.DataFrame) -> np.ndarray:
    """The op row of each GPU activity an op launched (one entry per activity)."""
    op = gpu["op"].to_numpy()
    return op[op >= 0]


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
