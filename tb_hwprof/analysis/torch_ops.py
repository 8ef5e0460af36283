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
    carried = direct.copy()
    holder = np.arange(n)
    # Push each op's direct time up its chain of parents, one level per pass.
    while True:
        holder = np.where(holder >= 0, parent[np.maximum(holder, 0)], -1) if n else holder
        alive = holder >= 0
        if not alive.any():
            break
        subtree += np.bincount(holder[alive], weights=carried[alive], minlength=n)
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
    gpu = torch.gpu
    launched = gpu[gpu["op"] >= 0]
    if launched.empty:
        return pd.DataFrame({"op": pd.Series(dtype=object), "top_kernel": pd.Series(dtype=object),
                             "top_kernel_gpu_ns": pd.Series(dtype=float)})
    per = pd.DataFrame({"op": torch.ops["name"].to_numpy()[launched["op"].to_numpy()], "kernel": launched["name"].to_numpy(),
                        "ns": (launched["end_ns"] - launched["start_ns"]).to_numpy().astype(np.float64)})
    sums = per.groupby(["op", "kernel"], sort=False)["ns"].sum().reset_index()
    best = sums.sort_values("ns", ascending=False, kind="stable").drop_duplicates("op")
    return best.rename(columns={"kernel": "top_kernel", "ns": "top_kernel_gpu_ns"})
