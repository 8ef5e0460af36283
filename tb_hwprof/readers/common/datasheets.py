"""Datasheet peaks of NVIDIA GPUs, for traces that name the device but measure no roof (PyTorch
profiler traces: deviceProperties gives the name and SM count, no clock nor bandwidth).

Peaks are tagged "datasheet" (model.PEAK_SOURCES): what the vendor states, dense (no sparsity),
at boost clock.  Tensor = the FP16/BF16 tensor-core rate with FP32 accumulate.  AMD's table is in
readers/amd/devices.py.
"""
from __future__ import annotations

import re
from typing import Dict

from ...core.model import Peak

# name pattern (first match wins: more specific first) -> (FP64, FP32, FP16/BF16 tensor FLOP/s,
# DRAM byte/s, source)
NVIDIA = [
    (r"B200", (40e12, 80e12, 2250e12, 8.0e12,
               "NVIDIA HGX B200 data sheet, per GPU: FP64 40 TFLOPS, FP32 80 TFLOPS, FP16/BF16 tensor 2.25 PFLOPS dense, HBM3e 8 TB/s")),
    (r"H200", (34e12, 67e12, 989.5e12, 4.8e12,
               "NVIDIA H200 SXM data sheet: FP64 34 TFLOPS, FP32 67 TFLOPS, BF16 tensor 989.5 TFLOPS dense, HBM3e 4.8 TB/s")),
    (r"H800", (1e12, 67e12, 989.5e12, 3.35e12,
               "NVIDIA H800 SXM data sheet: FP64 1 TFLOPS, FP32 67 TFLOPS, BF16 tensor 989.5 TFLOPS dense, HBM3 3.35 TB/s")),
    (r"H100.*PCIe", (26e12, 51e12, 756.5e12, 2.0e12,
                     "NVIDIA H100 PCIe data sheet: FP64 26 TFLOPS, FP32 51 TFLOPS, BF16 tensor 756.5 TFLOPS dense, HBM2e 2.0 TB/s")),
    (r"H100", (34e12, 67e12, 989.5e12, 3.35e12,
               "NVIDIA H100 SXM data sheet: FP64 34 TFLOPS, FP32 67 TFLOPS, BF16 tensor 989.5 TFLOPS dense, HBM3 3.35 TB/s")),
    (r"A100.*80GB", (9.7e12, 19.5e12, 312e12, 2.039e12,
                     "NVIDIA A100 80GB SXM data sheet: FP64 9.7 TFLOPS, FP32 19.5 TFLOPS, BF16 tensor 312 TFLOPS dense, HBM2e 2039 GB/s")),
    (r"A100", (9.7e12, 19.5e12, 312e12, 1.555e12,
               "NVIDIA A100 40GB data sheet: FP64 9.7 TFLOPS, FP32 19.5 TFLOPS, BF16 tensor 312 TFLOPS dense, HBM2 1555 GB/s")),
    (r"V100.*PCIE", (7e12, 14e12, 112e12, 0.9e12,
                     "NVIDIA V100 PCIe data sheet: FP64 7 TFLOPS, FP32 14 TFLOPS, FP16 tensor 112 TFLOPS, HBM2 900 GB/s")),
    (r"V100", (7.8e12, 15.7e12, 125e12, 0.9e12,
               "NVIDIA V100 SXM2 data sheet: FP64 7.8 TFLOPS, FP32 15.7 TFLOPS, FP16 tensor 125 TFLOPS, HBM2 900 GB/s")),
    (r"2080 Ti", (0.42e12, 13.4e12, 53.8e12, 0.616e12,
                  "NVIDIA Turing architecture whitepaper, GeForce RTX 2080 Ti: FP64 0.42 TFLOPS, FP32 13.4 TFLOPS, "
                  "FP16 tensor with FP32 accumulate 53.8 TFLOPS, GDDR6 616 GB/s")),
]
NVIDIA = [(re.compile(pattern, re.I), spec) for pattern, spec in NVIDIA]


def nvidia_datasheet_peaks(name: str) -> Dict[str, Peak]:
    """Datasheet roofs of an NVIDIA GPU by its marketing name; {} for one not in the table."""
    for pattern, (fp64, fp32, tensor, dram, how) in NVIDIA:
        if name and pattern.search(name):
            return {"flop_per_s_fp64": Peak(fp64, "FLOP/s", "datasheet", how),
                    "flop_per_s_fp32": Peak(fp32, "FLOP/s", "datasheet", how),
                    "flop_per_s_tensor": Peak(tensor, "FLOP/s", "datasheet", how),
                    "bytes_per_s_dram": Peak(dram, "byte/s", "datasheet", how)}
    return {}
