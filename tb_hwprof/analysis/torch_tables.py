"""The PyTorch operator-level tables of a run (pipeline step), computed from Profile.torch
(model.TorchTrace) only: op_gpu_time (per operator), op_shapes (per operator and shapes, with
FLOPs, bytes and roofline placement)."""
from __future__ import annotations

from .torch_ops import op_gpu_time
from .torch_shapes import op_shapes

TABLES = ("op_gpu_time", "op_shapes")


def torch_tables(profile, analysis) -> None:
    torch = getattr(profile, "torch", None)
    if torch is None:
        return
    analysis.summaries["op_gpu_time"] = op_gpu_time(torch)
    analysis.summaries["op_shapes"] = op_shapes(torch, profile.devices, profile.provenance.source_path)
