"""AMD GPU facts the rocprof readers share: kernel-name clean-up, rocminfo parsing, datasheet peaks.

rocprof reports a device per GCD (an MI250X is two devices of 110 CUs each), so the datasheet
figures here are per device as rocprof sees it, scaled from AMD's per-package numbers.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional

from ...core.model import Device, Peak

# Suffixes the tools append to kernel symbols: " [clone .kd]" (v1), " (.kd)" (v2), ".kd" (code-object symbol).
_SUFFIX = re.compile(r"(?:\s*\[clone [^\[\]]*\])+\s*$|\s*\(\.kd\)\s*$|\.kd\s*$")


def strip_suffix(full: str) -> str:
    """The kernel name without the `[clone .kd]`-style suffix (the full name otherwise unchanged)."""
    return _SUFFIX.sub("", full or "").strip()


def _strip_params(name: str) -> str:
    """Drop a trailing balanced "(...)" parameter list."""
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0:
            return name[:i].rstrip() if i > 0 else name
    return name


def _strip_return_type(name: str) -> str:
    """Drop a leading return type ("void ..."): the last space outside <> and () starts the name."""
    depth, cut = 0, -1
    for i, ch in enumerate(name):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == " " and depth == 0:
            cut = i
    return name[cut + 1:] if cut >= 0 else name


def display_name(full: str) -> str:
    """Function name as a table shows it: suffix, return type and parameter list dropped, templates kept."""
    base = strip_suffix(full)
    short = _strip_return_type(_strip_params(base))
    return short or base


# ---------------------------------------------------------------- datasheet peaks (per device as rocprof sees it)

# name pattern -> (CUs, clock MHz, FP64 vector, FP32 vector, FP16 matrix FLOP/s, HBM bytes/s, source).
# FP32 is the non-packed vector rate (what rocprof-compute's VALU roof counts); matrix FP16 is dense.
DATASHEET = [
    (re.compile(r"MI300X", re.I), (304, 2100, 81.7e12, 163.4e12, 1307.4e12, 5.3e12,
     "AMD Instinct MI300X data sheet: 304 CUs, 2100 MHz, FP64 vector 81.7 TFLOPS, FP32 vector 163.4 TFLOPS, "
     "FP16 matrix 1307.4 TFLOPS (dense), HBM3 5.3 TB/s")),
    (re.compile(r"MI300A", re.I), (228, 2100, 61.3e12, 122.6e12, 980.6e12, 5.3e12,
     "AMD Instinct MI300A data sheet: 228 CUs, 2100 MHz, FP64 vector 61.3 TFLOPS, FP32 vector 122.6 TFLOPS, "
     "FP16 matrix 980.6 TFLOPS (dense), HBM3 5.3 TB/s")),
    (re.compile(r"MI250X", re.I), (110, 1700, 23.95e12, 23.95e12, 191.5e12, 1.6384e12,
     "AMD Instinct MI250X data sheet per GCD (package / 2): 110 CUs, 1700 MHz, FP64 vector 23.95 TFLOPS, "
     "FP32 vector 23.95 TFLOPS, FP16 matrix 191.5 TFLOPS, HBM2e 1.64 TB/s")),
    (re.compile(r"MI2[05]0|MI210", re.I), (104, 1700, 22.6e12, 22.6e12, 181.0e12, 1.6384e12,
     "AMD Instinct MI210 data sheet (= one MI250 GCD): 104 CUs, 1700 MHz, FP64 vector 22.6 TFLOPS, "
     "FP32 vector 22.6 TFLOPS, FP16 matrix 181.0 TFLOPS, HBM2e 1.64 TB/s")),
]


def datasheet_peaks(name: str, cus: Optional[int] = None) -> Dict[str, Peak]:
    """Datasheet roofs for a marketing name ('MI250X/MI250' with 104 CUs is an MI250 GCD)."""
    if not name:
        return {}
    matches = [spec for pattern, spec in DATASHEET if pattern.search(name)]
    # A name such as "MI250X/MI250" names two parts: the CU count picks one.
    exact = [spec for spec in matches if cus is None or spec[0] == cus]
    if not matches:
        return {}
    _n_cu, _mhz, fp64, fp32, fp16x, hbm, how = (exact or matches)[0]
    return {
        "flop_per_s_fp64": Peak(fp64, "FLOP/s", "datasheet", how),
        "flop_per_s_fp32": Peak(fp32, "FLOP/s", "datasheet", how),
        "flop_per_s_tensor": Peak(fp16x, "FLOP/s", "datasheet", how + " (FP16 MFMA roof)"),
        "bytes_per_s_dram": Peak(hbm, "byte/s", "datasheet", how),
    }


# ---------------------------------------------------------------- rocminfo (results.sysinfo.txt, JSON otherData)

_AGENT = re.compile(r"^\*+\s*$\s*^Agent (\d+)\s*$", re.M)
_FIELD = re.compile(r"^\s{2}([A-Za-z][A-Za-z0-9 .()/-]*?):\s+(.*?)\s*$", re.M)


def rocminfo_agents(text: str) -> List[Dict[str, str]]:
    """Top-level fields of each HSA agent in a rocminfo dump (ANSI colour codes removed)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    starts = [m.start() for m in _AGENT.finditer(text)] + [len(text)]
    agents = []
    for a, b in zip(starts, starts[1:]):
        agents.append({k.strip(): v for k, v in _FIELD.findall(text[a:b])})
    return agents


def _text(value) -> str:
    """A rocminfo field as text: a JSON number there (a name written as 300) is read as its text."""
    return "" if value is None else str(value).strip()


def gpu_devices_from_rocminfo(agents: List[Dict[str, str]]) -> Dict[int, Device]:
    """GPU agents keyed by their HSA node id (what rocprof v1 writes as gpu-id)."""
    out = {}
    for agent in agents:
        if _text(agent.get("Device Type")) != "GPU":
            continue
        node = _int(agent.get("Node"))
        if node is None:
            continue
        name = _text(agent.get("Marketing Name"))
        cus = _int(agent.get("Compute Unit"))
        out[node] = Device(id=node, name=name, vendor="AMD", architecture=_text(agent.get("Name")),
                           sm_count=cus, clock_mhz=_float(agent.get("Max Clock Freq. (MHz)")),
                           peaks=datasheet_peaks(name, cus), warp_size=_int(agent.get("Wavefront Size")),
                           max_threads_per_block=_int(agent.get("Workgroup Max Size")),
                           max_warps_per_sm=_int(agent.get("Max Waves Per CU")))
    return out


def _int(text) -> Optional[int]:
    m = re.match(r"\s*(\d+)", str(text or ""))
    return int(m.group(1)) if m else None


def _float(text) -> Optional[float]:
    m = re.match(r"\s*([0-9.]+)", str(text or ""))
    return float(m.group(1)) if m else None
