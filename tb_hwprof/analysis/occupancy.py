"""Theoretical occupancy from a launch's configuration, for kernels no tool measured it for.

CUDA: the rules of NVIDIA's occupancy calculator (cuda_occupancy.h, what
cudaOccupancyMaxActiveBlocksPerMultiprocessor runs): each of four resources allows a number of
resident blocks per SM; the smallest is the occupancy and the resources at that minimum its limiter.

- warps: max warps per SM // warps per block (ceil(threads / warp size));
- registers: registers per warp (per thread x 32) rounded up to the allocation unit (256); each of
  the SM's 4 sub-partitions holds (registers per SM / 4) // that many warps; blocks = warps // warps
  per block.  A block over the per-block register file, or a thread over the per-thread maximum,
  fits none;
- shared memory: (static + dynamic + the driver's reserved 1 KB on cc >= 8.0) rounded up to the
  allocation unit (256 bytes, 128 on cc >= 8.0); blocks = shared memory per SM // that.  The SM's
  share is the carveout the driver chose where the report says it (Nsight Compute's
  launch__shared_mem_config_size), else the device's maximum (the calculator's default preference);
  a carveout below one block's need rises to the next size the architecture has;
- blocks: max resident blocks per SM.

A resource the launch does not use (no registers, no shared memory) sets no limit.  The device's
limits come from the export (model.Device); where it lacks one, from CC_LIMITS.

AMD (AMD_ARCH): waves per SIMD from VGPRs (arch + accumulation registers, unified on CDNA2/3),
SGPRs and LDS per work-group, see amd_occupancy.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Dict, List, Optional, Sequence

import numpy as np
import pandas as pd

from ..core.columnar import group_codes

LABEL = "theoretical (from launch configuration)"
# Limiter names as Nsight Compute's launch__occupancy_limit_* read (readers/nvidia/ncu_metrics.py),
# in the order they are listed when several tie.
LIMITERS = ("registers", "shared memory", "block size", "warps")
BIG = np.iinfo(np.int64).max // 4  # "no limit" (cuda_occupancy.h's INT_MAX)

# Per compute capability: (max warps per SM, max resident blocks per SM, max shared memory per SM in
# bytes).  CUDA C++ Programming Guide, "Technical Specifications per Compute Capability" (the table
# of the "Compute Capabilities" appendix); registers per SM are 64K on all of them.  Only a fallback:
# the exports' own device attributes win.
CC_LIMITS: Dict[str, tuple] = {
    "5.0": (64, 32, 64 * 1024), "5.2": (64, 32, 96 * 1024), "5.3": (64, 32, 64 * 1024),
    "6.0": (64, 32, 64 * 1024), "6.1": (64, 32, 96 * 1024), "6.2": (64, 32, 64 * 1024),
    "7.0": (64, 32, 96 * 1024), "7.2": (64, 32, 96 * 1024), "7.5": (32, 16, 64 * 1024),
    "8.0": (64, 32, 164 * 1024), "8.6": (48, 16, 100 * 1024), "8.7": (48, 16, 164 * 1024),
    "8.9": (48, 24, 100 * 1024), "9.0": (64, 32, 228 * 1024), "10.0": (64, 32, 228 * 1024),
}
# Shared memory carveouts (KB) an SM can be set to (cudaOccAlignUpShmemSizeVoltaPlus); a launch
# needing more than the preferred carveout gets the next one up.
CARVEOUTS_KB = {"7.0": (0, 8, 16, 32, 64, 96), "7.2": (0, 8, 16, 32, 64, 96), "7.5": (32, 64),
                "8.0": (0, 8, 16, 32, 64, 100, 132, 164), "8.7": (0, 8, 16, 32, 64, 100, 132, 164),
                "8.6": (0, 8, 16, 32, 64, 100), "8.9": (0, 8, 16, 32, 64, 100),
                "9.0": (0, 8, 16, 32, 64, 100, 132, 164, 196, 228), "10.0": (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)}


@dataclasses.dataclass(frozen=True)
class CudaLimits:
    """What an SM of one device holds (cuda_occupancy.h's cudaOccDeviceProp plus the per-architecture
    constants it keeps in code)."""

    compute_capability: str
    warp_size: int
    max_threads_per_block: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    registers_per_block: int
    max_registers_per_thread: int
    register_unit: int  # registers per warp are allocated in multiples of this
    sub_partitions: int
    shared_mem_per_sm: int
    shared_mem_per_block_optin: int
    shared_mem_unit: int
    reserved_shared_mem_per_block: int
    from_table: tuple = ()  # the limits the export lacked, taken from CC_LIMITS

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def cuda_limits(device) -> Optional[CudaLimits]:
    """The limits of a model.Device (NVIDIA, compute capability known); None otherwise."""
    cc = getattr(device, "compute_capability", "") or ""
    if getattr(device, "vendor", "") not in ("NVIDIA", "") or not isinstance(cc, str) or not cc:
        return None
    try:
        major, minor = (int(p) for p in cc.split(".")[:2])
    except ValueError:
        return None
    table = CC_LIMITS.get(cc)
    missing = []

    def pick(field: str, fallback):
        value = _whole(getattr(device, field, None))
        if value:
            return value
        missing.append(field)
        return fallback

    warp = pick("warp_size", 32)
    max_warps = pick("max_warps_per_sm", table[0] if table else None)
    max_blocks = pick("max_blocks_per_sm", table[1] if table else None)
    smem_sm = pick("shared_mem_per_sm", table[2] if table else None)
    if max_warps is None or max_blocks is None or smem_sm is None:
        return None
    reserved = _whole(getattr(device, "reserved_shared_mem_per_block", None))  # 0 is a stated value, not absent
    return CudaLimits(
        compute_capability=cc, warp_size=warp,
        max_threads_per_block=pick("max_threads_per_block", 1024),
        max_warps_per_sm=max_warps, max_blocks_per_sm=max_blocks,
        registers_per_sm=pick("registers_per_sm", 65536), registers_per_block=pick("registers_per_block", 65536),
        max_registers_per_thread=255 if major < 7 else 256, register_unit=256,
        sub_partitions=2 if (major, minor) == (6, 0) else 4,
        shared_mem_per_sm=smem_sm, shared_mem_per_block_optin=pick("shared_mem_per_block_optin", smem_sm),
        shared_mem_unit=256 if major < 8 else 128,
        reserved_shared_mem_per_block=reserved if reserved is not None else (1024 if major >= 8 else 0),
        from_table=tuple(f for f in missing if f in ("max_warps_per_sm", "max_blocks_per_sm", "shared_mem_per_sm")))


def _whole(value) -> Optional[int]:
    """A limit as a non-negative int; None for anything else (absent, or a damaged run's text)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return int(value)


def _round_up(x: np.ndarray, unit: int) -> np.ndarray:
    return -(-x // unit) * unit


def _carveout(need: np.ndarray, preferred: np.ndarray, limits: CudaLimits) -> np.ndarray:
    """Shared memory per SM a launch gets: the preferred carveout when one block fits in it, else
    the smallest carveout the architecture has that holds one block."""
    sizes = CARVEOUTS_KB.get(limits.compute_capability)
    out = preferred.copy()
    short = need > preferred
    if short.any():
        if sizes is None:  # Maxwell / Pascal: dedicated shared memory, no carveout
            out[short] = limits.shared_mem_per_sm
        else:
            steps = np.array([s * 1024 for s in sizes], dtype=np.int64)
            index = np.minimum(np.searchsorted(steps, need[short]), len(steps) - 1)
            out[short] = steps[index]
    return out


def cuda_occupancy(limits: CudaLimits, block_size, registers_per_thread, shared_mem_bytes,
                   shared_mem_config=None) -> Dict[str, np.ndarray]:
    """Per launch (array-likes of equal length; shared_mem_bytes = static + dynamic, without the
    driver's reserve): blocks per SM each resource allows, the active blocks, theoretical warps per
    SM, occupancy % and the limiter.  shared_mem_config: the SM's shared memory carveout per launch
    (NaN or absent: the device's maximum)."""
    threads = np.asarray(block_size, dtype=np.int64)
    regs = np.asarray(registers_per_thread, dtype=np.int64)
    smem = np.asarray(shared_mem_bytes, dtype=np.int64)
    warps_per_block = -(-threads // limits.warp_size)
    safe_warps = np.maximum(warps_per_block, 1)

    by_warps = np.where(threads > limits.max_threads_per_block, 0, limits.max_warps_per_sm // safe_warps)

    regs_per_warp = _round_up(regs * limits.warp_size, limits.register_unit)
    regs_assumed = regs_per_warp * _round_up(warps_per_block, limits.sub_partitions)  # the hardware's check
    warps_per_partition = (limits.registers_per_sm // limits.sub_partitions) // np.maximum(regs_per_warp, 1)
    by_registers = (warps_per_partition * limits.sub_partitions) // safe_warps
    by_registers = np.where((regs_assumed > limits.registers_per_block) | (regs > limits.max_registers_per_thread),
                            0, by_registers)
    by_registers = np.where(regs_per_warp == 0, BIG, by_registers)

    smem_block = _round_up(smem + limits.reserved_shared_mem_per_block, limits.shared_mem_unit)
    preferred = np.full(len(smem), limits.shared_mem_per_sm, dtype=np.int64)
    if shared_mem_config is not None:
        config = np.asarray(shared_mem_config, dtype=float)
        known = ~np.isnan(config) & (config > 0)
        preferred[known] = config[known].astype(np.int64)
    per_sm = _carveout(smem_block, preferred, limits)
    by_smem = per_sm // np.maximum(smem_block, 1)
    by_smem = np.where(smem_block > limits.shared_mem_per_block_optin + limits.reserved_shared_mem_per_block, 0, by_smem)
    by_smem = np.where(smem_block == 0, BIG, by_smem)

    by_blocks = np.full(len(threads), limits.max_blocks_per_sm, dtype=np.int64)
    stacked = np.stack([by_registers, by_smem, by_blocks, by_warps])
    active = stacked.min(axis=0)
    warps = active * warps_per_block
    at_min = stacked == active
    code = (at_min * (1 << np.arange(4))[:, None]).sum(axis=0)
    return {"blocks_by_registers": by_registers, "blocks_by_shared_mem": by_smem, "blocks_by_block_count": by_blocks,
            "blocks_by_warps": by_warps, "active_blocks": active, "warps_per_block": warps_per_block,
            "theoretical_warps": warps, "occupancy_pct": 100.0 * warps / limits.max_warps_per_sm,
            "limiter": np.asarray(LIMITER_NAMES, dtype=object)[code], "shared_mem_per_sm": per_sm}


# Limiter text of each bitmask of LIMITERS at the minimum ("registers, warps" for 0b1001).
LIMITER_NAMES = [", ".join(name for bit, name in enumerate(LIMITERS) if code >> bit & 1) for code in range(16)]


def occupancy_curves(limits: CudaLimits, block_size: int, registers_per_thread: int, shared_mem_bytes: int,
                     shared_mem_config: Optional[float] = None) -> dict:
    """Theoretical warps per SM as one input varies and the others stay at the launch's values (the
    three charts of Nsight Compute's occupancy calculator), each sweep holding the launch's own value:
    {"registers_per_thread" | "shared_mem_bytes" | "block_size": {"x": [...], "warps": [...]},
    "current": {...}, "max_warps_per_sm": n}."""
    launch = {"block_size": int(block_size), "registers_per_thread": int(registers_per_thread),
              "shared_mem_bytes": int(shared_mem_bytes)}
    sweeps = {"registers_per_thread": range(8, limits.max_registers_per_thread + 1, 8),
              "shared_mem_bytes": range(0, limits.shared_mem_per_block_optin + 1, 1024),
              "block_size": range(limits.warp_size, limits.max_threads_per_block + 1, limits.warp_size)}
    out = {}
    for field, xs in sweeps.items():
        xs = sorted(set(xs) | {launch[field]})
        values = {k: [v] * len(xs) for k, v in launch.items()}
        values[field] = xs
        config = None if shared_mem_config is None else [shared_mem_config] * len(xs)
        got = cuda_occupancy(limits, values["block_size"], values["registers_per_thread"], values["shared_mem_bytes"],
                             config)
        out[field] = {"x": [int(x) for x in xs], "warps": [int(w) for w in got["theoretical_warps"]]}
    now = cuda_occupancy(limits, [block_size], [registers_per_thread], [shared_mem_bytes],
                         None if shared_mem_config is None else [shared_mem_config])
    out["current"] = {**launch, "warps": int(now["theoretical_warps"][0]),
                      "occupancy_pct": float(now["occupancy_pct"][0]), "limiter": str(now["limiter"][0])}
    out["max_warps_per_sm"] = limits.max_warps_per_sm
    return out


def kernel_document(devices: List[dict], row: dict, raw_metrics: Optional[dict] = None) -> Optional[dict]:
    """The drawer's launch statistics and occupancy chart for one launch (a /kernel row), or None
    when its device's limits or its launch configuration are unknown (RDNA, counter-less CSVs).
    devices: the manifest's devices (Device.to_dict); raw_metrics: the launch's {name: [value, unit]}
    (Nsight Compute's launch__shared_mem_config_size, the carveout; rocprof's arch / accumulation
    VGPRs and SGPRs, when there)."""
    launch = {k: row.get(k) for k in ("grid_size", "block_size", "registers_per_thread", "shared_mem_bytes",
                                       "waves_per_sm")}
    if any(not isinstance(launch[k], (int, float)) or math.isnan(launch[k])
           for k in ("block_size", "registers_per_thread", "shared_mem_bytes")) or not launch["block_size"]:
        return None
    device = _device_of(devices, row.get("device"))
    limits = cuda_limits(device) if device is not None else None
    amd = amd_limits(device) if device is not None and limits is None else None
    if limits is None and amd is None:
        return None
    raw = raw_metrics if isinstance(raw_metrics, dict) else {}
    if limits is not None:
        curves = occupancy_curves(limits, launch["block_size"], launch["registers_per_thread"],
                                  launch["shared_mem_bytes"], _raw_value(raw, ("launch__shared_mem_config_size",)))
        shown, table = limits.to_dict(), limits.from_table
    else:
        extra = {key: _raw_value(raw, names) for key, names in AMD_RAW.items()}
        curves = amd_curves(amd, launch["block_size"], launch["registers_per_thread"], launch["shared_mem_bytes"],
                            extra["sgpr"], extra["arch_vgpr"], extra["accum_vgpr"])
        shown, table = {**amd, "max_warps_per_sm": amd["simds"] * amd["max_waves"]}, ()
    measured = row.get("occupancy_source") != LABEL and isinstance(row.get("theoretical_occupancy_pct"), (int, float))
    return {"launch": launch, "limits": shown, "curves": curves,
            "theoretical_occupancy_pct": row.get("theoretical_occupancy_pct"),
            "achieved_occupancy_pct": row.get("achieved_occupancy_pct"),
            "limiter": row.get("occupancy_limiter") or curves["current"]["limiter"],
            "source": "reported by the tool" if measured else LABEL,
            "curves_from": ("calculator rules (analysis/occupancy.py) on the device's limits"
                            + (f" (table for {', '.join(table)})" if table else "")) if amd is None else
                           f"LLVM AMDGPU occupancy rules on {amd['gfx']}'s limits (analysis/occupancy.py); "
                           "warps here are waves per CU"}


def _device_of(devices: List[dict], device_id):
    """The model.Device of a manifest's device entry with this id (else the first); None if unreadable."""
    from ..core.model import Device
    dicts = [d for d in devices if isinstance(d, dict)]
    chosen = next((d for d in dicts if device_id is not None and d.get("id") == device_id), dicts[0] if dicts else None)
    try:
        return Device.from_dict(chosen) if chosen else None
    except (TypeError, ValueError, AttributeError):  # a damaged run's device: no chart, not a failed drawer
        return None


def _raw_value(raw: dict, names) -> Optional[float]:
    """The first of `names` in a {name: [value, unit]} map as a number > 0 (None where absent)."""
    for name in names:
        value = raw.get(name)
        value = value[0] if isinstance(value, (list, tuple)) and value else value
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value)
    return None


# ------------------------------------------------------------------ AMD
# Per gfx target: SIMDs per CU, max waves per SIMD, VGPRs per SIMD lane (arch + accumulation VGPRs share
# one file of 512 on CDNA2/3) and their allocation granule, SGPRs per SIMD and granule, LDS per CU and
# its allocation granule (bytes), wave size.  AMD Instinct MI200 (CDNA2) and MI300 (CDNA3) ISA guides;
# the rules are those of LLVM's AMDGPU backend occupancy (AMDGPUBaseInfo: getNumWavesPerEUWithNumVGPRs,
# getMaxWorkGroupsPerCU, SIInstrInfo SGPR occupancy), i.e. the compiler's "Occupancy [waves/SIMD]".
AMD_ARCH: Dict[str, dict] = {
    **{gfx: dict(simds=4, max_waves=8, vgprs=512, vgpr_granule=8, unified_agprs=True, sgprs=800, sgpr_granule=16,
                 lds=64 * 1024, lds_granule=512, wave=64) for gfx in ("gfx90a", "gfx940", "gfx941", "gfx942")},
    "gfx950": dict(simds=4, max_waves=8, vgprs=512, vgpr_granule=8, unified_agprs=True, sgprs=800, sgpr_granule=16,
                   lds=160 * 1024, lds_granule=512, wave=64),
}
AMD_LIMITERS = ("VGPRs", "SGPRs", "LDS", "work-group slots", "waves")
AMD_LIMITER_NAMES = [", ".join(n for bit, n in enumerate(AMD_LIMITERS) if code >> bit & 1) for code in range(32)]


def amd_limits(device) -> Optional[dict]:
    """The AMD_ARCH entry of a device's gfx target (its LDS per CU as the export states it, if it does)."""
    arch = getattr(device, "architecture", "") or ""
    arch = arch.split(":")[0].strip().lower() if isinstance(arch, str) else ""
    if getattr(device, "vendor", "") != "AMD" or arch not in AMD_ARCH:
        return None
    out = dict(AMD_ARCH[arch], gfx=arch)
    if _whole(getattr(device, "shared_mem_per_sm", None)):
        out["lds"] = _whole(device.shared_mem_per_sm)
    return out


def amd_occupancy(limits: dict, workgroup_size, vgprs, lds_bytes, sgprs=None, arch_vgprs=None,
                  accum_vgprs=None) -> Dict[str, np.ndarray]:
    """Per dispatch: waves per SIMD (theoretical), occupancy % of the SIMD's wave slots, the limiter.
    vgprs: arch + accumulation VGPRs per lane; where arch_vgprs and accum_vgprs are both known the
    accumulation registers start at the arch count rounded up to 4 (accum_offset).  sgprs: per
    wave (NaN: not limiting)."""
    wg = np.asarray(workgroup_size, dtype=np.int64)
    lds = np.asarray(lds_bytes, dtype=np.int64)
    total = np.asarray(vgprs, dtype=float)
    if arch_vgprs is not None and accum_vgprs is not None:
        arch, accum = np.asarray(arch_vgprs, dtype=float), np.asarray(accum_vgprs, dtype=float)
        split = ~np.isnan(arch) & ~np.isnan(accum) & (accum > 0)
        total = np.where(split, -(-arch // 4) * 4 + accum, total)
    total = total.astype(np.int64)
    simds, max_waves = limits["simds"], limits["max_waves"]
    waves_per_wg = np.maximum(-(-wg // limits["wave"]), 1)
    per_simd_vgpr = limits["vgprs"] // np.maximum(_round_up(total, limits["vgpr_granule"]), 1)
    sgpr = np.full(len(wg), np.nan) if sgprs is None else np.asarray(sgprs, dtype=float)
    sgpr_alloc = _round_up(np.nan_to_num(sgpr).astype(np.int64), limits["sgpr_granule"])
    per_simd_sgpr = limits["sgprs"] // np.maximum(sgpr_alloc, 1)
    # Waves a CU holds by each resource, as work-groups (a work-group's waves spread over the SIMDs).
    by_vgpr = np.where(total > 0, per_simd_vgpr * simds // waves_per_wg, BIG)
    by_sgpr = np.where(sgpr_alloc > 0, per_simd_sgpr * simds // waves_per_wg, BIG)
    lds_alloc = _round_up(lds, limits["lds_granule"])
    by_lds = np.where(lds_alloc > 0, limits["lds"] // np.maximum(lds_alloc, 1), BIG)
    by_slots = np.where(waves_per_wg == 1, max_waves * simds, np.minimum(max_waves * simds // waves_per_wg, 16))
    by_waves = max_waves * simds // waves_per_wg
    stacked = np.stack([by_vgpr, by_sgpr, by_lds, by_slots, by_waves])
    active = stacked.min(axis=0)
    waves_per_simd = active * waves_per_wg / simds
    code = ((stacked == active) * (1 << np.arange(5))[:, None]).sum(axis=0)
    return {"active_workgroups": active, "waves_per_simd": waves_per_simd,
            "occupancy_pct": 100.0 * waves_per_simd / max_waves,
            "limiter": np.asarray(AMD_LIMITER_NAMES, dtype=object)[code]}


def amd_curves(limits: dict, workgroup_size, vgprs, lds_bytes, sgprs=None, arch_vgprs=None,
               accum_vgprs=None) -> dict:
    """occupancy_curves for an AMD dispatch: waves per CU (as "warps") against VGPRs per lane (the
    accumulation VGPRs kept, the arch ones varied), LDS per work-group and work-group size."""
    launch = {"block_size": int(workgroup_size), "registers_per_thread": int(vgprs), "shared_mem_bytes": int(lds_bytes)}
    accum = accum_vgprs if accum_vgprs is not None and arch_vgprs is not None else None
    sweeps = {"registers_per_thread": range(8, limits["vgprs"] + 1, 8),
              "shared_mem_bytes": range(0, limits["lds"] + 1, 1024),
              "block_size": range(limits["wave"], 1024 + 1, limits["wave"])}

    def run(values: dict):
        n = len(values["block_size"])
        arch = None if accum is None else [max(v - accum, 0) for v in values["registers_per_thread"]]
        got = amd_occupancy(limits, values["block_size"], values["registers_per_thread"], values["shared_mem_bytes"],
                            [sgprs if sgprs is not None else math.nan] * n, arch,
                            None if accum is None else [accum] * n)
        waves = got["active_workgroups"] * np.maximum(-(-np.asarray(values["block_size"]) // limits["wave"]), 1)
        return got, waves

    out = {}
    for field, xs in sweeps.items():
        xs = sorted(set(xs) | {launch[field]})
        values = {k: [v] * len(xs) for k, v in launch.items()}
        values[field] = xs
        out[field] = {"x": [int(x) for x in xs], "warps": [int(w) for w in run(values)[1]]}
    now, waves = run({k: [v] for k, v in launch.items()})
    out["current"] = {**launch, "warps": int(waves[0]), "occupancy_pct": float(now["occupancy_pct"][0]),
                      "limiter": str(now["limiter"][0])}
    out["max_warps_per_sm"] = limits["simds"] * limits["max_waves"]
    return out


# ------------------------------------------------------------------ the pipeline step
LAUNCH_INPUTS = ("block_size", "registers_per_thread", "shared_mem_bytes")


# Rows handled at a time: the step's temporaries stay a few MB on a 1M-launch trace (all at once
# they added ~160 MB to the export's peak).
CHUNK = 1 << 17


def theoretical_occupancy(profile, analysis=None) -> None:
    """Fill the kernels table's theoretical occupancy, limiter and waves per SM from each launch's
    configuration where the tool gave none (never over a tool's own figure), labelled in
    occupancy_source, and the occupancy note of those launches.  Computed once per distinct
    (device, block size, registers, shared memory) of each chunk of rows: a trace of 1M launches
    has a few hundred."""
    kernels = profile.kernels
    if kernels.empty or not all(c in kernels for c in LAUNCH_INPUTS):
        return
    theoretical = _floats(kernels["theoretical_occupancy_pct"])
    if not np.isnan(theoretical).any():
        return
    limiter = kernels["occupancy_limiter"].to_numpy(dtype=object).copy()
    waves = _floats(kernels["waves_per_sm"])
    filled = np.zeros(len(kernels), dtype=bool)
    for start in range(0, len(kernels), CHUNK):
        part = slice(start, min(start + CHUNK, len(kernels)))
        _fill_chunk(profile, part, theoretical, limiter, waves, filled)
    if not filled.any():
        return
    kernels["theoretical_occupancy_pct"] = theoretical
    kernels["occupancy_limiter"] = pd.Series(limiter, index=kernels.index, dtype=object)
    kernels["waves_per_sm"] = waves
    source = kernels["occupancy_source"].to_numpy(dtype=object).copy() if "occupancy_source" in kernels else \
        np.full(len(kernels), "", dtype=object)
    source[filled] = LABEL
    kernels["occupancy_source"] = pd.Series(source, index=kernels.index, dtype=object)
    _rewrite_notes(profile, filled)


def _fill_chunk(profile, part: slice, theoretical, limiter, waves, filled) -> None:
    """theoretical / limiter / waves / filled of the rows `part`, in place, where computable: the rows
    grouped once by (device, configuration), each distinct configuration computed once."""
    kernels = profile.kernels
    columns = [_floats(kernels[c].iloc[part]) for c in ("device",) + LAUNCH_INPUTS]
    inputs = columns[1:]
    todo = np.isnan(theoretical[part]) & (inputs[0] > 0)
    for column in inputs:
        todo &= ~np.isnan(column)
    if not todo.any():
        return
    local = np.flatnonzero(todo)
    rows = local + part.start
    key = [c[local] for c in columns]
    if _has_amd_device(profile):  # AMD's occupancy reads registers the kernels table does not hold
        key += [_raw_column(profile, rows, names) for names in AMD_RAW.values()]
    codes, firsts = group_codes(key)
    occupancy, ours, active, known = _configs_occupancy(profile, [c[firsts] for c in key])
    ok = known[codes]
    rows, codes, local = rows[ok], codes[ok], local[ok]
    theoretical[rows] = occupancy[codes]
    limiter[rows] = np.where(limiter[rows] == "", ours[codes], limiter[rows])  # a tool's own limiter stays
    grid = _floats(kernels["grid_size"].iloc[part])[local]
    with np.errstate(divide="ignore", invalid="ignore"):
        waves[rows] = np.where(np.isnan(waves[rows]) & (active[codes] > 0), grid / active[codes], waves[rows])
    filled[rows] = True


def _has_amd_device(profile) -> bool:
    return any(amd_limits(d) is not None for d in profile.devices)


# Raw metric names (rocprof v1 / rocprof-compute) of the AMD inputs the kernels table does not hold.
AMD_RAW = {"arch_vgpr": ("arch_vgpr", "Arch_VGPR"), "accum_vgpr": ("accum_vgpr", "Accum_VGPR"), "sgpr": ("sgpr", "SGPR")}


def _configs_occupancy(profile, configs: List[np.ndarray]):
    """Per distinct configuration (columns: device, block size, registers, shared memory, then the AMD
    raw registers where read): occupancy %, limiter, launches a wave of the whole device holds
    (active blocks / work-groups per SM / CU x SMs / CUs), and whether its device's limits are known."""
    n = len(configs[0])
    occupancy, active = np.full(n, np.nan), np.full(n, np.nan)
    ours = np.full(n, "", dtype=object)
    known = np.zeros(n, dtype=bool)
    devices = configs[0]
    for device_id in pd.unique(devices):
        which = (devices == device_id) | (np.isnan(devices) & np.isnan(device_id))
        device = profile.device(None if np.isnan(device_id) else int(device_id))
        got = _device_occupancy(device, [c[which] for c in configs[1:]]) if device is not None else None
        if got is None:
            continue
        occupancy[which], ours[which], per_sm = got
        active[which] = per_sm * float(device.sm_count or math.nan)
        known |= which
    return occupancy, ours, active, known


def _device_occupancy(device, config: List[np.ndarray]):
    """(occupancy %, limiter, active blocks / work-groups per SM / CU) of distinct configurations of
    one device (block size, registers, shared memory, and on AMD arch / accum VGPRs and SGPRs); None
    when its limits are unknown."""
    limits = cuda_limits(device)
    if limits is not None:
        out = cuda_occupancy(limits, *config[:3])
        return out["occupancy_pct"], out["limiter"], out["active_blocks"]
    amd = amd_limits(device)
    if amd is None:
        return None
    block, vgprs, lds = config[:3]
    arch, accum, sgpr = config[3:6] if len(config) >= 6 else (None, None, None)
    out = amd_occupancy(amd, block, vgprs, lds, sgpr, arch, accum)
    return out["occupancy_pct"], out["limiter"], out["active_workgroups"]


def _raw_column(profile, index: np.ndarray, names) -> np.ndarray:
    """The first of `names` among each launch's raw metrics (NaN where absent)."""
    raw = profile.raw_metrics
    out = np.full(len(index), np.nan)
    if not raw or len(raw) != len(profile.kernels):
        return out
    for j, i in enumerate(index):
        metrics = raw[i]
        for name in names:
            value = metrics.get(name)
            value = value[0] if isinstance(value, (list, tuple)) and value else value
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[j] = value
                break
    return out


def _floats(column) -> np.ndarray:
    """A float column as a writable dense array (sparse all-NaN columns included)."""
    return np.array(column.to_numpy(dtype=float, na_value=np.nan), dtype=float)


def _rewrite_notes(profile, rows: np.ndarray) -> None:
    """The occupancy note of the launches just filled, phrased once per distinct set of figures."""
    from .bottleneck import capture_of, occupancy_note
    kernels = profile.kernels
    capture = capture_of(profile)
    fields = ["achieved_occupancy_pct", "theoretical_occupancy_pct", "occupancy_limiter", "waves_per_sm", "grid_size",
              "bound"]
    notes = kernels["occupancy_note"].to_numpy(dtype=object).copy()
    phrased: Dict[tuple, str] = {}  # across chunks: the same figures are phrased once
    for start in range(0, len(kernels), CHUNK):
        local = np.flatnonzero(rows[start:start + CHUNK])
        if not len(local):
            continue
        columns = [_part(kernels[f], start, start + CHUNK)[local] for f in fields]
        codes, firsts = group_codes(columns)
        texts = np.empty(len(firsts), dtype=object)
        for j, first in enumerate(firsts):
            row = {f: column[first] for f, column in zip(fields, columns)}
            row["achieved_occupancy_pct"] = float(row["achieved_occupancy_pct"])
            key = tuple(_hashable(v) for v in row.values())
            if key not in phrased:
                phrased[key] = occupancy_note(row, row["bound"], capture)
            texts[j] = phrased[key]
        notes[local + start] = texts[codes]
    kernels["occupancy_note"] = pd.Series(notes, index=kernels.index, dtype=object)


def _part(column: pd.Series, start: int, stop: int) -> np.ndarray:
    """Rows start:stop of a column as an array; a sparse column without values (a tracer's counters)
    as NaN without slicing it (pandas densifies a sparse slice slowly)."""
    from ..core.model import is_all_nan_column
    if is_all_nan_column(column):
        return np.full(min(stop, len(column)) - start, np.nan)
    return column.iloc[start:stop].to_numpy()


def _hashable(value):
    """A dict key for one figure: NaN (never equal to itself) as None."""
    return None if isinstance(value, float) and math.isnan(value) else value
