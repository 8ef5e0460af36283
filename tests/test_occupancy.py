"""Theoretical occupancy from the launch configuration (tb_hwprof/analysis/occupancy.py) against the
tools' own figures: Nsight Compute's occupancy metrics for every launch of every .ncu-rep (read by
NVIDIA's ncu_report), Kineto's `est. achieved occupancy %` recomputed from our figures, and the
columns a trace's export fills checked against a plain-Python loop over the raw files."""
from __future__ import annotations

import math

import pytest

import tb_hwprof
from tb_hwprof.analysis import occupancy
from tb_hwprof.readers.nvidia.ncu_metrics import LAUNCH_LIMIT_ATTRIBUTES

from conftest import ncu_actions

# launch__occupancy_limit_* (blocks per SM each resource allows, Nsight Compute) -> our limit.
NCU_LIMITS = {"launch__occupancy_limit_registers": "blocks_by_registers",
              "launch__occupancy_limit_shared_mem": "blocks_by_shared_mem",
              "launch__occupancy_limit_blocks": "blocks_by_block_count",
              "launch__occupancy_limit_warps": "blocks_by_warps"}
NCU_LIMITER = {"launch__occupancy_limit_registers": "registers", "launch__occupancy_limit_shared_mem": "shared memory",
               "launch__occupancy_limit_blocks": "block size", "launch__occupancy_limit_warps": "warps"}


def value(action, name):
    m = action.metric_by_name(name)
    return None if m is None else m.value()


def launch_inputs(action):
    """(block size, registers per thread, static + dynamic shared memory, carveout) as ncu recorded
    them; None for a launch without launch statistics."""
    names = ("launch__block_size", "launch__registers_per_thread", "launch__shared_mem_per_block_static",
             "launch__shared_mem_per_block_dynamic")
    got = [value(action, n) for n in names]
    if any(v is None for v in got) or value(action, "sm__maximum_warps_per_active_cycle_pct") is None:
        return None
    return got[0], got[1], got[2] + got[3], value(action, "launch__shared_mem_config_size")


@pytest.fixture(scope="module")
def profiles():
    cache = {}

    def get(path):
        if path not in cache:
            cache[path] = tb_hwprof.read(path)
        return cache[path]
    return get


def test_device_limits_are_the_reports_device_attributes(ncu_rep, ncu_report_module, profiles):
    profile = profiles(ncu_rep)
    for action in ncu_actions(ncu_report_module, ncu_rep):
        device = profile.device(value(action, "launch__device_id") or 0)
        for field, name in LAUNCH_LIMIT_ATTRIBUTES.items():
            expected = value(action, name)
            assert getattr(device, field) == (None if expected is None else int(expected)), field


def test_theoretical_occupancy_equals_nsight_compute(ncu_rep, ncu_report_module, profiles):
    """For every launch configuration: the calculator fed ncu's launch statistics and the report's
    device attributes (through our reader's Device) gives ncu's theoretical occupancy exactly, its
    register / warp / block limits, and the same limiter (the resources at the minimum, a resource
    the launch does not use left out)."""
    profile = profiles(ncu_rep)
    checked = 0
    for action in ncu_actions(ncu_report_module, ncu_rep):
        inputs = launch_inputs(action)
        if inputs is None:  # a launch ncu collected no launch statistics for (raytracer's "trace")
            continue
        block, regs, smem, carveout = inputs
        limits = occupancy.cuda_limits(profile.device(value(action, "launch__device_id") or 0))
        got = {k: v[0] for k, v in occupancy.cuda_occupancy(limits, [block], [regs], [smem], [carveout]).items()}
        assert got["occupancy_pct"] == pytest.approx(value(action, "sm__maximum_warps_per_active_cycle_pct"),
                                                     rel=1e-12, abs=1e-12)
        ncu = {name: value(action, name) for name in NCU_LIMITS}
        for name in ("launch__occupancy_limit_registers", "launch__occupancy_limit_warps",
                     "launch__occupancy_limit_blocks"):
            assert got[NCU_LIMITS[name]] == ncu[name], name
        uses_smem = smem + limits.reserved_shared_mem_per_block > 0
        if uses_smem:
            # ncu 2020 divides the SM's maximum, later versions the carveout the driver chose.
            at_max = occupancy.cuda_occupancy(limits, [block], [regs], [smem])["blocks_by_shared_mem"][0]
            assert ncu["launch__occupancy_limit_shared_mem"] in (got["blocks_by_shared_mem"], at_max)
        used = {n: v for n, v in ncu.items() if uses_smem or n != "launch__occupancy_limit_shared_mem"}
        low = min(used.values())
        assert set(got["limiter"].split(", ")) == {NCU_LIMITER[n] for n, v in used.items() if v == low}
        checked += 1
    assert checked
