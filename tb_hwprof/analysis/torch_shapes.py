"""summaries["op_shapes"]: one row per (operator, input dims, dtypes, concrete inputs), with its
FLOPs and bytes from the shapes (op_perf_models, TraceLens's performance models), achieved
FLOP/s and byte/s, and a roofline placement against the device's peaks.

Whose GPU time: an op instance with a cost model of its own (OpCost.repeated False: aten::addmm,
aten::_scaled_dot_product_flash_attention ...) owns the GPU work of its whole subtree (its
kernels are often launched by an inner op: _flash_attention_forward); other GPU work stays with
the op that launched it.  Each GPU ns is counted once, as TraceLens's GEMM / SDPA tables do.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

from ..core.model import Device, TorchTrace
from ..core.columnar import combined_codes, factorize_ints, first_sight_rows, object_factorize, object_pointers
from .op_perf_models import op_category, op_cost
from .torch_ops import launch_runs

OP_SHAPES_COLUMNS = ["op", "input_dims", "input_types", "concrete_inputs", "category", "calls", "gpu_ns",
                     "flops_per_call", "bytes_per_call", "flop_per_s", "bytes_per_s", "intensity",
                     "peak_flop_per_s", "peak_bytes_per_s", "peak_source", "roof", "bound", "bound_reason"]
GROUP = ["op", "input_dims", "input_types", "concrete_inputs"]
LOW_PRECISION = ("half", "bfloat16", "float8", "float4", "qint8", "quint8")


def op_shapes(torch: TorchTrace, devices: List[Device], source: str = "<trace>",
              names: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> pd.DataFrame:
    """summaries["op_shapes"] (OP_SHAPES_COLUMNS), by GPU time.  names: torch_ops.op_names(torch),
    where the caller has it."""
    ops = torch.ops
    if ops.empty or torch.gpu.empty:
        return pd.DataFrame(columns=OP_SHAPES_COLUMNS)
    codes, uniques = _shape_groups(ops, names)
    costs = [op_cost(name, dims or None, types or None, concrete or None, source) for name, dims, types, concrete in uniques]
    owns_subtree = np.array([c is not None and not c.repeated for c in costs], dtype=bool)
    launcher, ns, _ = launch_runs(torch.gpu)
    holder = _holders(ops["parent"].to_numpy(), codes, owns_subtree, launcher)
    # Per group: its instances holding GPU time, and that time (groups in code order, as a groupby).
    holding = np.zeros(len(ops), dtype=bool)
    holding[holder] = True
    calls = np.bincount(codes[holding], minlength=len(uniques))
    gpu_ns = np.bincount(codes[holder], weights=ns, minlength=len(uniques))
    rows = []
    device = _main_device(torch, devices)
    for group in np.flatnonzero(calls).tolist():
        name, dims, types, concrete = uniques[group]
        rows.append(_row(name, dims, types, concrete, int(calls[group]), float(gpu_ns[group]), costs[group], device))
    out = pd.DataFrame(rows, columns=OP_SHAPES_COLUMNS)
    return out.sort_values("gpu_ns", ascending=False, kind="stable").reset_index(drop=True)


def _shape_groups(ops: pd.DataFrame, names: Optional[Tuple[np.ndarray, np.ndarray]] = None):
    """(group code per op instance, [(name, dims, types, concrete)] per group), groups numbered in
    order of first sight.  Rows are grouped by the str objects they hold first (readers share one
    object per distinct text: no hashing of a million texts), then those few combinations by value.
    names: torch_ops.op_names(torch), where the caller has it (codes by value serve as well)."""
    columns = [ops[c].to_numpy() for c in ["name"] + GROUP[1:]]
    name_codes = _first_sight_codes(names[0]) if names is not None else _object_identity_codes(columns[0])
    combination, first = _combinations([name_codes] + [_object_identity_codes(c) for c in columns[1:]], len(ops))
    group_of_combination, uniques = _value_groups([column[first] for column in columns])
    return group_of_combination[combination], uniques


def _combinations(codes: List[Optional[np.ndarray]], n_rows: int):
    """(code per row, first row of each code) of the distinct combinations of the rows' codes (each
    column numbered 0.. in order of first sight; None: one value throughout), in order of first
    sight.  A single varying column is its own answer (no hashing)."""
    varying = [c for c in codes if c is not None and c.size and c.max() > 0]
    if len(varying) > 1:
        return combined_codes(varying)
    combination = varying[0] if varying else np.zeros(n_rows, dtype=np.int64)
    n_codes = int(combination.max()) + 1 if combination.size else 0
    return combination, first_sight_rows(combination, n_codes)


def _first_sight_codes(codes: np.ndarray) -> np.ndarray:
    """codes renumbered 0.. in order of first sight where they are not already (a missing
    value's -1 becomes a code like the others)."""
    return codes if not codes.size or codes.min() >= 0 else factorize_ints(codes)[0]


def _object_identity_codes(column: np.ndarray) -> Optional[np.ndarray]:
    """Codes 0.. per row in order of first sight, equal for rows holding the same object (by value
    where numpy will not expose the objects); None when every row holds the same one."""
    pointers = object_pointers(column)  # the objects' addresses
    if pointers is None:
        return pd.factorize(column, use_na_sentinel=False)[0]
    if pointers.size == 0 or (pointers == pointers[0]).all():
        return None
    return factorize_ints(pointers)[0]


def _value_groups(columns: List[np.ndarray]):
    """(group code per row, [tuple of the row's values] per group) of the rows' value tuples, in
    order of first sight: each text column factorised alone, the codes combined by
    columnar.combined_codes (a missing value's -1 shifted to a code of its own, so it cannot stand
    for another column's value)."""
    values = [object_factorize(column) for column in columns]
    codes, first = combined_codes(c + 1 for c, _ in values)
    uniques = [tuple(u[c[i]] for c, u in values) for i in first.tolist()]
    return codes, uniques


def _holders(parent: np.ndarray, group: np.ndarray, owns_subtree: np.ndarray, launcher: np.ndarray) -> np.ndarray:
    """Per run of GPU activities (its launching op in `launcher`): the op instance its time counts
    for, the outermost among the op and its ancestors whose group owns its subtree, else the op
    itself.  Each run climbs its op's chain of ancestors (a few levels), an owner met higher up
    replacing one met below."""
    holder = launcher.copy()
    at, node = np.arange(launcher.size), launcher
    while node.size:
        owner = owns_subtree[group[node]]
        holder[at[owner]] = node[owner]
        up = parent[node]
        alive = up >= 0
        at, node = at[alive], up[alive]
    return holder


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


# Input type words -> the tensor-core source precision whose roof a report may carry (Nsight
# Compute 2025.3 on Hopper: flop_per_s_tensor_bf16 ...), checked in this order.
TENSOR_SOURCES = (("float8", "fp8"), ("bfloat16", "bf16"), ("half", "fp16"))


def _tensor_roof(types: str, peaks) -> str:
    """tensor_<source precision> where the device has that roof (a counter report's), else tensor."""
    text = (types or "").lower()
    for word, source in TENSOR_SOURCES:
        if word in text and f"flop_per_s_tensor_{source}" in peaks:
            return f"tensor_{source}"
    return "tensor"


def _row(name, dims, types, concrete, calls: int, gpu_ns: float, cost, device: Optional[Device]) -> Dict:
    category = op_category(name)
    flops = cost.flops if cost is not None else None
    nbytes = cost.bytes if cost is not None else None
    seconds = gpu_ns / 1e9
    flop_per_s = flops * calls / seconds if flops is not None and seconds > 0 else np.nan
    bytes_per_s = nbytes * calls / seconds if nbytes is not None and seconds > 0 else np.nan
    intensity = flops / nbytes if flops is not None and nbytes else np.nan
    peaks = device.peaks if device is not None else {}
    roof = _precision(types, category)
    if roof == "tensor":
        roof = _tensor_roof(types, peaks)
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
