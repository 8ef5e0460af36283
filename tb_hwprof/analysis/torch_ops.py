"""Operator level of a PyTorch trace: GPU time per operator (direct and subtree), as TraceLens's
ops_summary defines it, from the model's join (model.TorchTrace: op -> runtime call -> GPU work).

direct_gpu_ns: GPU kernels, copies and sets launched by runtime calls whose innermost enclosing
operator is this one; subtree_gpu_ns: the same counted for every enclosing operator; calls: the
instances that launched GPU work directly (TraceLens's Count).
"""
from __future__ import annotations

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
    gpu = torch.gpu
    op = gpu["op"].to_numpy()
    duration = (gpu["end_ns"] - gpu["start_ns"]).to_numpy().astype(np.float64)
    mine = op >= 0
    direct = np.bincount(op[mine], weights=duration[mine], minlength=n).astype(np.float64)
    launches = np.bincount(op[mine], minlength=n)
    subtree = direct.copy()
    parent = torch.ops["parent"].to_numpy()
    depth = torch.ops["depth"].to_numpy()
    # Bottom-up, one depth level at a time: each op hands its subtree's time to its parent once.
    by_depth = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[by_depth], np.arange(int(depth.max()) + 2 if n else 1))
    for d in range(len(bounds) - 2, 0, -1):
        rows = by_depth[bounds[d]:bounds[d + 1]]
        subtree += np.bincount(parent[rows], weights=subtree[rows], minlength=n)
    return direct, subtree, launches


def cpu_self_ns(torch: TorchTrace) -> np.ndarray:
    """Per op instance: its wall time less that of the ops directly inside it (>= 0)."""
    ops = torch.ops
    duration = (ops["end_ns"] - ops["start_ns"]).to_numpy().astype(np.float64)
    parent = ops["parent"].to_numpy()
    child = parent >= 0
    inner = np.bincount(parent[child], weights=duration[child], minlength=len(ops)).astype(np.float64)
    return np.maximum(duration - inner, 0.0)


def op_gpu_time(torch: TorchTrace) -> pd.DataFrame:
    """summaries["op_gpu_time"]: one row per operator name, by direct GPU time (then CPU time)."""
    ops = torch.ops
    if ops.empty:
        return pd.DataFrame(columns=OP_GPU_TIME_COLUMNS)
    direct, subtree, launches = gpu_ns_per_op_instance(torch)
    codes, names = object_factorize(ops["name"].to_numpy())
    per_name = lambda values: np.bincount(codes, weights=values, minlength=len(names))
    table = pd.DataFrame({
        "op": pd.Series(names, dtype=object), "calls": per_name((launches > 0).astype(np.float64)).astype(np.int64),
        "instances": np.bincount(codes, minlength=len(names)).astype(np.int64),
        "direct_gpu_ns": per_name(direct), "subtree_gpu_ns": per_name(subtree), "cpu_self_ns": per_name(cpu_self_ns(torch)),
        "cpu_total_ns": per_name((ops["end_ns"] - ops["start_ns"]).to_numpy().astype(np.float64)),
        "kernels": per_name(launches.astype(np.float64)).astype(np.int64)})
    top = _top_kernel_per_op(torch)
    table = table.merge(top, on="op", how="left")
    table["top_kernel"] = table["top_kernel"].fillna("")
    table = table.sort_values(["direct_gpu_ns", "subtree_gpu_ns", "cpu_total_ns"], ascending=False, kind="stable")
    return table[OP_GPU_TIME_COLUMNS].reset_index(drop=True)


def _top_kernel_per_op(torch: TorchTrace) -> pd.DataFrame:
    """Per operator name: the kernel (GPU activity) name it spent most GPU time in, and that time."""
    gpu = torch.gpu
    launched = gpu["op"].to_numpy() >= 0
    if not launched.any():
        return pd.DataFrame({"op": pd.Series(dtype=object), "top_kernel": pd.Series(dtype=object),
                             "top_kernel_gpu_ns": pd.Series(dtype=float)})
    op_codes, op_names = object_factorize(torch.ops["name"].to_numpy()[gpu["op"].to_numpy()[launched]])
    kernel_codes, kernel_names = object_factorize(gpu["name"].to_numpy()[launched])
    ns = (gpu["end_ns"] - gpu["start_ns"]).to_numpy()[launched].astype(np.float64)
    pair, pairs = pd.factorize(op_codes * len(kernel_names) + kernel_codes)
    sums = np.bincount(pair, weights=ns)
    pair_op, pair_kernel = pairs // len(kernel_names), pairs % len(kernel_names)
    # Per op, its pair of largest time (the first such pair on ties, as a stable sort keeps it).
    order = np.lexsort((np.arange(pairs.size), -sums, pair_op))
    first = order[np.r_[True, pair_op[order][1:] != pair_op[order][:-1]]]
    return pd.DataFrame({"op": pd.Series(op_names[pair_op[first]], dtype=object),
                         "top_kernel": pd.Series(kernel_names[pair_kernel[first]], dtype=object),
                         "top_kernel_gpu_ns": sums[first]})
