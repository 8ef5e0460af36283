"""The PyTorch operator-level tables of a run (pipeline step), computed from Profile.torch
(model.TorchTrace) only: op_gpu_time (per operator), op_shapes (per operator and shapes, with
FLOPs, bytes and roofline placement), step_time_breakdown and torch_gpu_summary (torch-tb-profiler's
Overview: per ProfilerStep#N, and GPU utilisation / SM efficiency / occupancy per device)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .torch_ops import op_gpu_time, op_names
from .torch_shapes import op_shapes
from .torch_steps import gpu_summary, step_spans, step_time_breakdown

TABLES = ("op_gpu_time", "op_shapes", "step_time_breakdown", "torch_gpu_summary")
GPU_SUMMARY_COLUMNS = ["device", "span_start_ns", "span_end_ns", "gpu_utilization_pct", "est_sm_efficiency_pct",
                       "est_achieved_occupancy_pct", "kernel_ns", "tensor_core_kernel_pct", "communication_kernel_pct"]


def torch_tables(profile, analysis) -> None:
    torch = getattr(profile, "torch", None)
    if torch is None:
        return
    names = op_names(torch)  # the tables all group operators by name: the names hashed once
    analysis.summaries["op_gpu_time"] = op_gpu_time(torch, names)
    analysis.summaries["op_shapes"] = op_shapes(torch, profile.devices, profile.provenance.source_path, names)
    if len(torch.steps):
        spans = step_spans(torch)  # both tables' steps (launches counted once)
        analysis.summaries["step_time_breakdown"] = step_time_breakdown(torch, spans, names)
        summary = gpu_summary_table(torch, spans)
        if len(summary):
            analysis.summaries["torch_gpu_summary"] = summary


def gpu_summary_table(torch, spans=None) -> pd.DataFrame:
    """gpu_summary as one row per device, fractions as percentages (None -> NaN)."""
    summary = gpu_summary(torch, spans)
    pct = lambda v: np.nan if v is None else 100.0 * v
    rows = [{"device": device, "span_start_ns": summary["span_start_ns"], "span_end_ns": summary["span_end_ns"],
             "gpu_utilization_pct": pct(d["gpu_utilization"]), "est_sm_efficiency_pct": pct(d["est_sm_efficiency"]),
             "est_achieved_occupancy_pct": np.nan if d["est_achieved_occupancy_pct"] is None else d["est_achieved_occupancy_pct"],
             "kernel_ns": d["kernel_ns"], "tensor_core_kernel_pct": pct(d["tensor_core_kernel_share"]),
             "communication_kernel_pct": pct(d["communication_kernel_share"])}
            for device, d in summary["devices"].items()]
    return pd.DataFrame(rows, columns=GPU_SUMMARY_COLUMNS)
