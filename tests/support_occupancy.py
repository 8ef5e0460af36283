"""The occupancy calculators' rules written out again as plain loops (NVIDIA: plain_occupancy; AMD
CDNA: plain_waves_per_simd), shared by test_occupancy.py, test_occupancy_amd.py and
test_occupancy_chart.py."""
from __future__ import annotations

import math

LIMITER_ORDER = ("registers", "shared memory", "block size", "warps")


def plain_occupancy(dev, block, regs, smem):
    """One launch, by the calculator's rules written out again as a loop: (occupancy %, limiter, active blocks)."""
    warps_per_block = -(-block // 32)
    limits = {"warps": dev["warps"] // warps_per_block, "block size": dev["blocks"]}
    if regs:
        per_warp = -(-regs * 32 // 256) * 256
        limits["registers"] = (dev["regs"] // 4 // per_warp) * 4 // warps_per_block
    reserved, unit = (1024, 128) if dev["major"] >= 8 else (0, 256)
    allocated = -(-(smem + reserved) // unit) * unit
    if allocated:
        limits["shared memory"] = dev["smem"] // allocated
    active = min(limits.values())
    limiter = ", ".join(n for n in LIMITER_ORDER if limits.get(n) == active)
    return 100.0 * active * warps_per_block / dev["warps"], limiter, active


# The rules of analysis/occupancy.py amd_occupancy written out again as a loop over the raw files:
# CDNA2/3 (gfx90a, gfx942): 4 SIMDs x 8 wave slots; 512 VGPRs per lane shared by arch and
# accumulation VGPRs (these start at the arch count rounded up to 4), allocated by 8; 800 SGPRs per
# SIMD allocated by 16; 64 KB LDS per CU allocated by 512 bytes; at most 16 multi-wave work-groups per CU.
def plain_waves_per_simd(workgroup, arch, accum, sgpr, lds, wave=64):
    waves_per_wg = math.ceil(workgroup / wave)
    vgprs = (math.ceil(arch / 4) * 4 + accum) if accum else arch
    limits = {"waves": 32 // waves_per_wg,
              "work-group slots": 32 if waves_per_wg == 1 else min(32 // waves_per_wg, 16)}
    if vgprs:
        limits["VGPRs"] = (512 // (math.ceil(vgprs / 8) * 8)) * 4 // waves_per_wg
    if sgpr:
        limits["SGPRs"] = (800 // (math.ceil(sgpr / 16) * 16)) * 4 // waves_per_wg
    if lds:
        limits["LDS"] = 65536 // (math.ceil(lds / 512) * 512)
    active = min(limits.values())
    order = ("VGPRs", "SGPRs", "LDS", "work-group slots", "waves")
    return active * waves_per_wg / 4, ", ".join(n for n in order if limits.get(n) == active)
