"""What program and what tool a capture shows, so advice names remedies that fit them.

`capture_context(profile)` answers, from the capture's distinct names (cheap: the trace step and
the advice each ask it): which GPU API the program used (CUDA on NVIDIA tools, HIP on AMD ones),
whether the capture shows PyTorch, and which tool recorded it.
Remedy texts are templates filled from `CaptureContext.words` ("{memcpy_async}" -> cudaMemcpyAsync
or hipMemcpyAsync), so one sentence serves both APIs.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Dict, Iterable

import pandas as pd

# PyTorch leaves these in what a capture records: ATen op names in NVTX ranges (emit_nvtx,
# DLProf) and in kernel names (at::native::...), torch module paths in DLProf's NVTX payloads,
# the names PyTorch gives its threads (pt_main_thread, pt_autograd_N), DataLoader ranges, and
# libtorch / libc10 in a CPU profile's modules.  cuDNN / cuBLAS kernels alone are not PyTorch
# (any framework, or plain CUDA code, calls them).
PYTORCH_MARKERS = re.compile(r"aten::|at::native::|\btorch[./]|\bpt_main_thread\b|\bpt_autograd_\d|"
                             r"\bDataLoader\b|\blibtorch\w*\.so|\blibc10\w*\.so")
PYTORCH_TOOLS = ("pytorch", "kineto", "torch")  # a PyTorch profiler trace is PyTorch by definition
AMD_TOOLS = ("rocprof", "omniperf")  # rocprof, rocprofv2/v3, rocprof-compute: prefixes

_API_WORDS = {
    "CUDA": {"api": "CUDA", "malloc_host": "cudaMallocHost", "host_register": "cudaHostRegister",
             "memcpy": "cudaMemcpy", "memcpy_async": "cudaMemcpyAsync", "graphs": "CUDA graphs",
             "device_sync": "cudaDeviceSynchronize", "stream_sync": "cudaStreamSynchronize",
             "stream_wait_event": "cudaStreamWaitEvent", "kernel_tool": "Nsight Compute (ncu)"},
    "HIP": {"api": "HIP", "malloc_host": "hipHostMalloc", "host_register": "hipHostRegister",
            "memcpy": "hipMemcpy", "memcpy_async": "hipMemcpyAsync", "graphs": "HIP graphs",
            "device_sync": "hipDeviceSynchronize", "stream_sync": "hipStreamSynchronize",
            "stream_wait_event": "hipStreamWaitEvent", "kernel_tool": "rocprof-compute"},
}


@dataclasses.dataclass(frozen=True)
class CaptureContext:
    tool: str  # provenance.tool: "nsys", "ncu", "rocprofv3", "vtune", ...
    gpu_api: str  # "CUDA", "HIP", or "" (a CPU profile)
    pytorch: bool  # the capture shows PyTorch (see PYTORCH_MARKERS)

    @property
    def words(self) -> Dict[str, str]:
        """API names for remedy templates (CUDA's where the capture shows no GPU API)."""
        return _API_WORDS.get(self.gpu_api, _API_WORDS["CUDA"])

    def phrase(self, template: str) -> str:
        """`template` with {memcpy_async}, {graphs}, ... in this capture's API."""
        return template.format(**self.words)


def capture_context(profile) -> CaptureContext:
    tool = (profile.provenance.tool or "").lower()
    return CaptureContext(tool=tool, gpu_api=gpu_api(profile, tool),
                          pytorch=tool in PYTORCH_TOOLS or shows_pytorch(captured_names(profile)))


def gpu_api(profile, tool: str) -> str:
    vendors = {(d.vendor or "").lower() for d in profile.devices}
    if tool.startswith(AMD_TOOLS) or "amd" in vendors:
        return "HIP"
    if tool in ("ncu", "nsys") or "nvidia" in vendors:
        return "CUDA"
    return ""


def shows_pytorch(names: Iterable[str]) -> bool:
    """Whether any of the names carries a PyTorch marker (one regex pass over them all)."""
    return PYTORCH_MARKERS.search("\n".join(names)) is not None


def captured_names(profile) -> Iterable[str]:
    """The distinct names a capture recorded: timeline slice / thread / process names (tracers),
    kernel names (counter profilers: a trace's kernels are among its slice names already), and
    function / module names of a CPU profile."""
    timeline = profile.timeline
    if timeline is not None:
        yield from timeline.names
        for track in timeline.tracks:
            yield track.thread
            yield track.process
    elif len(profile.kernels):
        yield from (str(n) for n in pd.unique(profile.kernels["name"]))
    hotspots = profile.summaries.get("cpu_hotspots")
    if hotspots is not None:
        for column in ("name", "module"):
            if column in hotspots:
                yield from (str(n) for n in pd.unique(hotspots[column]))
