"""The PyTorch operator-level tables of a run (pipeline step): op_gpu_time, op_shapes,
step_time_breakdown.  Computed from Profile.torch (model.TorchTrace) only."""
from __future__ import annotations

from .torch_ops import op_gpu_time

TABLES = ("op_gpu_time",)


def torch_tables(profile, analysis) -> None:
    torch = getattr(profile, "torch", None)
    if torch is None:
        return
    analysis.summaries["op_gpu_time"] = op_gpu_time(torch)
