"""summaries["op_shapes"]: one row per (operator, input dims, dtypes, concrete inputs), with its
FLOPs and bytes from the shapes (op_perf_models, TraceLens's performance models), achieved
FLOP/s and byte/s, and a roofline placement against the device's peaks.

Whose GPU time: an op instance with a cost model of its own (OpCost.repeated False: aten::addmm,
aten::_scaled_dot_product_flash_attention ...) owns the GPU work of its whole subtree (its
kernels are often launched by an inner op: _flash_attention_forward); other GPU work stays with
the op that launched it.  Each GPU ns is counted once, as TraceLens's GEMM / SDPA tables do.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np
import pandas as pd

from ..model import Device, TorchTrace
from ..columnar import first_rows, object_factorize
from .op_perf_models import op_category, op_cost

OP_SHAPES_COLUMNS = ["op", "input_dims", "input_types", "concrete_inputs", "category", "calls", "gpu_ns",
                     "flops_per_call", "bytes_per_call", "flop_per_s", "bytes_per_s", "intensity",
                     "peak_flop_per_s", "peak_bytes_per_s", "peak_source", "roof", "bound", "bound_reason"]
GROUP = ["op", "input_dims", "input_types", "concrete_inputs"]
LOW_PRECISION = ("half", "bfloat16", "float8", "float4", "qint8", "quint8")


def op_shapes(torch: TorchTrace, devices: List[Device], source: str = "<trace>") -> pd.DataFrame:
    ops = torch.ops
    if ops.empty or torch.gpu.empty:
        return pd.DataFrame(columns=OP_SHAPES_COLUMNS)
    codes, uniques = _shape_groups(ops)
    costs = [op_cost(name, dims or None, types or None, concrete or None, source) for name, dims, types, concrete in uniques]
    owner = np.array([c is not None and not c.repeated for c in costs], dtype=bool)[codes]
    anchor = _anchors(ops["parent"].to_numpy(), ops["depth"].to_numpy(), owner)
    gpu_op = torch.gpu["op"].to_numpy()
    launched = gpu_op >= 0
    holder = np.where(anchor[gpu_op[launched]] >= 0, anchor[gpu_op[launched]], gpu_op[launched])
    ns = (torch.gpu["end_ns"] - torch.gpu["start_ns"]).to_numpy()[launched].astype(np.float64)
    per_instance = np.bincount(holder, weights=ns, minlength=len(ops))
    has_time = np.bincount(holder, minlength=len(ops)) > 0
    table = pd.DataFrame({"group": codes[has_time], "gpu_ns": per_instance[has_time]})
    sums = table.groupby("group").agg(calls=("gpu_ns", "size"), gpu_ns=("gpu_ns", "sum")).reset_index()
    rows = []
    device = _main_device(torch, devices)
    for group, calls, gpu_ns in sums.itertuples(index=False):
        name, dims, types, concrete = uniques[group]
        rows.append(_row(name, dims, types, concrete, int(calls), float(gpu_ns), costs[group], device))
    out = pd.DataFrame(rows, columns=OP_SHAPES_COLUMNS)
    return out.sort_values("gpu_ns", ascending=False, kind="stable").reset_index(drop=True)


def _shape_groups(ops: pd.DataFrame):
    """(group code per op instance, [(name, dims, types, concrete)] per group): each text column
    factorised alone (hashing repeated strings), the codes combined into one integer key, hashed
    once (renumbered first only where the combinations would not fit one integer)."""
    columns = [ops["name"]] + [ops[c] for c in GROUP[1:]]
    key = np.zeros(len(ops), dtype=np.int64)
    span = 1  # key < span
    values = []
    for column in columns:
        c, u = object_factorize(column.to_numpy())
        if span * (len(u) + 1) >= 1 << 62:
            key = pd.factorize(key)[0].astype(np.int64)  # < rows
            span = int(key.max()) + 1 if key.size else 1
        key = key * (len(u) + 1) + c
        span *= len(u) + 1
        values.append((c, u))
    codes, keys = pd.factorize(key)
    uniques = [tuple(u[c[i]] for c, u in values) for i in first_rows(codes, len(keys)).tolist()]
    return codes, uniques


def _anchors(parent: np.ndarray, depth: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """Per op instance: the outermost owner among itself and its ancestors, -1 for none."""
    anchor = np.full(parent.size, -1, dtype=np.int64)
    for d in range(int(depth.max()) + 1 if depth.size else 0):
        rows = np.flatnonzero(depth == d)
        above = anchor[parent[rows]] if d else np.full(rows.size, -1)
        anchor[rows] = np.where(above >= 0, above, np.where(owner[rows], rows, -1))
    return anchor


def _main_device(torch: TorchTrace, devices: List[Device]) -> Optional[Device]:
    """The device most GPU work ran on (one rank's trace: its GPU)."""
    if not devices:
        return None
    counts = torch.gpu["device"].value_counts()
    busiest = int(counts.index[0]) if len(counts) else devices[0].id
    return next((d for d in devices if d.id == busiest), devices[0])


def _precision(types: str, category: str) -> str:
    """Which compute roof applies: tensor for low-precision GEMM / attention / convolution, else the
    vector roof of the widest float type among the inputs."""
    text = (types or "").lower()
    if category in ("GEMM", "SDPA", "CONV") and any(p in text for p in LOW_PRECISION):
        return "tensor"
    if "double" in text:
        return "fp64"
    return "fp32"


def _row(name, dims, types, concrete, calls: int, gpu_ns: float, cost, device: Optional[Device]) -> Dict:
    category = op_category(name)
    flops = cost.flops if cost is not None else None
    nbytes = cost.bytes if cost is not None else None
    seconds = gpu_ns / 1e9
    flop_per_s = flops * calls / seconds if flops is not None and seconds > 0 else np.nan
    bytes_per_s = nbytes * calls / seconds if nbytes is not None and seconds > 0 else np.nan
    intensity = flops / nbytes if flops is not None and nbytes else np.nan
    roof = _precision(types, category)
    peaks = device.peaks if device is not None else {}
    peak_flops = peaks.get(f"flop_per_s_{roof}")
    peak_bw = peaks.get("bytes_per_s_dram")
    bound, reason = _bound(intensity, flop_per_s, bytes_per_s, peak_flops, peak_bw, roof, device)
    return {"op": name, "input_dims": dims, "input_types": types, "concrete_inputs": concrete, "category": category,
            "calls": calls, "gpu_ns": gpu_ns,
            "flops_per_call": float(flops) if flops is not None else np.nan,
            "bytes_per_call": float(nbytes) if nbytes is not None else np.nan,
            "flop_per_s": flop_per_s, "bytes_per_s": bytes_per_s, "intensity": intensity,
            "peak_flop_per_s": peak_flops.value if peak_flops else np.nan,
            "peak_bytes_per_s": peak_bw.value if peak_bw else np.nan,
            "peak_source": (peak_flops or peak_bw).source if (peak_flops or peak_bw) else "",
            "roof": roof, "bound": bound, "bound_reason": reason}


def _bound(intensity, flop_per_s, bytes_per_s, peak_flops, peak_bw, roof: str, device) -> tuple:
    """compute / memory by the side of the ridge point the op's intensity falls on, with the numbers."""
    if not np.isfinite(intensity):
        return "", "no FLOP model for this op's shapes (bytes only, or neither)"
    if peak_flops is None or peak_bw is None:
        return "", f"{intensity:.1f} FLOP/byte; no peaks known for this device to place it"
    ridge = peak_flops.value / peak_bw.value
    side = "compute" if intensity >= ridge else "memory"
    achieved = (f"achieved {flop_per_s / 1e12:.2f} TFLOP/s ({100 * flop_per_s / peak_flops.value:.0f}% of the "
                f"{peak_flops.value / 1e12:.0f} TFLOP/s {roof} peak) and {bytes_per_s / 1e12:.3f} TB/s "
                f"({100 * bytes_per_s / peak_bw.value:.0f}% of {peak_bw.value / 1e12:.2f} TB/s DRAM)")
    return side, (f"{intensity:.1f} FLOP/byte is {'above' if side == 'compute' else 'below'} the ridge point "
                  f"{ridge:.1f} FLOP/byte of {device.name} ({peak_flops.source} peaks); {achieved}")
