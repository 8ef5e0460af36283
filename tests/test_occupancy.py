"""Theoretical occupancy from the launch configuration (tb_hwprof/analysis/occupancy.py) against the
tools' own figures: Nsight Compute's occupancy metrics for every launch of every .ncu-rep (read by
NVIDIA's ncu_report), Kineto's `est. achieved occupancy %` recomputed from our figures, and the
columns a trace's export fills checked against a plain-Python loop over the raw files."""
from __future__ import annotations


import numpy as np
import pytest

import tb_hwprof
from tb_hwprof.analysis import occupancy
from tb_hwprof.readers.nvidia.ncu_metrics import LAUNCH_LIMIT_ATTRIBUTES

from conftest import ncu_actions
from support_occupancy import plain_occupancy

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


# ------------------------------------------------------------------ Kineto's estimate
def kineto_trace(path):
    import gzip
    import json
    with (gzip.open if path.suffix == ".gz" else open)(path, "rt") as f:
        return json.load(f)


def kineto_estimated(trace):
    """Kernel events carrying Kineto's estimate and the launch inputs it came from."""
    need = ("est. achieved occupancy %", "registers per thread", "shared memory", "blocks per SM", "block")
    return [e for e in trace.get("traceEvents", [])
            if str(e.get("cat", "")).lower() == "kernel" and all(k in e.get("args", {}) for k in need)]


def kineto_formula(active_blocks, blocks_per_sm, block_size, shared_mem, props, limits):
    """Kineto's `est. achieved occupancy %` (libkineto ChromeTraceLogger / kernelOccupancy): the
    calculator's active blocks capped by the grid's blocks per SM, x threads per block / max threads
    per SM, in float32, then (int)(0.5 + occupancy * 100.0) in double.  Kineto runs the calculator
    with the default per-block shared memory limit (FUNC_SHMEM_LIMIT_DEFAULT): a kernel that opted in
    to more than sharedMemPerBlock gets 0 there."""
    reserved, unit = limits.reserved_shared_mem_per_block, limits.shared_mem_unit
    if -(-(shared_mem + reserved) // unit) * unit > props["sharedMemPerBlock"] + reserved:
        return 0
    blocks = min(np.float32(active_blocks), np.float32(blocks_per_sm))
    occupancy_f32 = np.float32(np.float32(blocks) * np.float32(block_size)) / np.float32(props["maxThreadsPerMultiprocessor"])
    return int(0.5 + float(occupancy_f32) * 100.0)


KINETO_WITH_ESTIMATES = ("deepseek_h800_train_ep64_rank0.json", "hta_a100_nccl_2rank_rank0.json.gz",
                         "hta_trace_diff_test.json.gz", "kineto_rn50_v100_jun2021.json.gz",
                         "param_resnet_rtx2080ti.json.gz", "tracelens_b200_eager_8rank_rank0.json.gz",
                         "tracelens_h100_falconsai_vit.json.gz")


def rows_by_launch(kernels):
    """(correlation id, device) -> our rows of it, earliest first."""
    out = {}
    for i in np.argsort(kernels["start_ns"].to_numpy(dtype=float), kind="stable"):
        key = (int(kernels["correlation_id"].iat[i]), int(kernels["device"].iat[i]))
        out.setdefault(key, []).append(int(i))
    return out


@pytest.mark.parametrize("name", KINETO_WITH_ESTIMATES)
def test_kineto_estimate_recomputed_from_our_theoretical_occupancy(samples_dir, name):
    """Every kernel of the trace: our theoretical occupancy (the step the export runs, limits from
    the trace's deviceProperties) is at least Kineto's estimate, and Kineto's estimate recomputed
    from our active blocks per SM equals the one in the file."""
    from conftest import sample
    path = sample(samples_dir, f"torch/{name}")
    trace = kineto_trace(path)
    props = {p["id"]: p for p in trace["deviceProperties"]}
    events = kineto_estimated(trace)
    assert events
    profile = tb_hwprof.read(path)
    occupancy.theoretical_occupancy(profile)
    kernels = profile.kernels
    rows = rows_by_launch(kernels)
    theoretical = kernels["theoretical_occupancy_pct"].to_numpy(dtype=float)
    for e in sorted(events, key=lambda e: e["ts"]):
        a = e["args"]
        row = rows[(a["correlation"], a["device"])].pop(0)  # a few ids repeat: then in time order
        device = profile.device(a["device"])
        limits = occupancy.cuda_limits(device)
        block = a["block"][0] * a["block"][1] * a["block"][2]
        assert kernels["occupancy_source"].iat[row] == occupancy.LABEL
        assert theoretical[row] >= a["est. achieved occupancy %"] - 0.5
        warps_per_block = -(-block // limits.warp_size)
        active = round(theoretical[row] / 100 * limits.max_warps_per_sm / warps_per_block)
        estimate = kineto_formula(active, a["blocks per SM"], block, a["shared memory"],
                                  props.get(a["device"], props.get(0)), limits)
        assert estimate == a["est. achieved occupancy %"], (e["name"][:60], a)


# ------------------------------------------------------------------ Nsight Systems traces
def plain_device_limits(conn):
    """deviceId -> the SM limits as the export states them (stdlib sqlite3)."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    out = {}
    if "TARGET_INFO_GPU" in tables and "maxWarpsPerSm" in {r[1] for r in conn.execute("PRAGMA table_info(TARGET_INFO_GPU)")}:
        for r in conn.execute("SELECT id, computeMajor, maxWarpsPerSm, maxBlocksPerSm, maxRegistersPerSm, "
                              "maxShmemPerSm, smCount FROM TARGET_INFO_GPU"):
            out[r[0]] = dict(zip(("major", "warps", "blocks", "regs", "smem", "sms"), r[1:]))
    elif "TARGET_INFO_CUDA_GPU" in tables:
        for r in conn.execute("SELECT deviceId, computeCapabilityMajor, maxWarpsPerMultiprocessor, "
                              "maxBlocksPerMultiprocessor, maxRegistersPerMultiprocessor, "
                              "maxSharedMemoryPerMultiprocessor, numMultiprocessors FROM TARGET_INFO_CUDA_GPU"):
            out[r[0]] = dict(zip(("major", "warps", "blocks", "regs", "smem", "sms"), r[1:]))
    return out


def test_nsys_occupancy_columns_equal_a_plain_loop(nsys_sqlite):
    """Every kernel with a launch configuration gets theoretical occupancy, limiter and waves per SM,
    labelled as computed from it, equal to the rules applied row by row to the raw KERNEL table."""
    import sqlite3
    conn = sqlite3.connect(f"file:{nsys_sqlite}?mode=ro", uri=True)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    profile = tb_hwprof.read(nsys_sqlite)
    tb_hwprof.analyse(profile)
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
        assert profile.kernels.empty
        return
    devices = plain_device_limits(conn)
    raw = conn.execute("SELECT correlationId, deviceId, gridX * gridY * gridZ, blockX * blockY * blockZ, "
                       "registersPerThread, staticSharedMemory + dynamicSharedMemory FROM CUPTI_ACTIVITY_KIND_KERNEL "
                       "ORDER BY start").fetchall()
    kernels = profile.kernels
    rows = rows_by_launch(kernels)
    assert len(raw) == len(kernels)
    for correlation, device, grid, block, regs, smem in raw:
        k = kernels.iloc[rows[(correlation, device)].pop(0)]
        pct, limiter, active = plain_occupancy(devices[device], block, regs, smem)
        assert k["theoretical_occupancy_pct"] == pytest.approx(pct, rel=1e-12)
        assert k["occupancy_limiter"] == limiter
        assert k["waves_per_sm"] == pytest.approx(grid / (active * devices[device]["sms"]), rel=1e-12)
        assert k["occupancy_source"] == occupancy.LABEL
        assert f"{pct:.0f}% theoretical" in k["occupancy_note"] and limiter in k["occupancy_note"]


def test_kernel_document_of_a_damaged_device_falls_back_or_is_none():
    """A run's device limits that are not numbers (a damaged profile.json) fall back to the
    compute-capability table; a device that cannot be read at all gives no document, never an error."""
    row = {"device": 0, "block_size": 256.0, "registers_per_thread": 32.0, "shared_mem_bytes": 0.0, "grid_size": 80.0}
    damaged = {"id": 0, "vendor": "NVIDIA", "compute_capability": "7.5", "max_warps_per_sm": "many",
               "max_blocks_per_sm": True, "shared_mem_per_sm": -1}
    doc = occupancy.kernel_document([damaged], row)
    assert doc["limits"]["max_warps_per_sm"] == occupancy.CC_LIMITS["7.5"][0]
    assert set(doc["limits"]["from_table"]) == {"max_warps_per_sm", "max_blocks_per_sm", "shared_mem_per_sm"}
    assert occupancy.kernel_document([{"id": 0, "compute_capability": 7.5}], row) is None
    assert occupancy.kernel_document([{"id": 0, "peaks": "x", "compute_capability": "7.5"}], row) is None


def test_nsys_executed_carveout_gives_the_same_occupancy(nsys_sqlite):
    """The export computes against the SM's maximum shared memory (the calculator's default); the
    carveout each launch ran with (KERNEL.sharedMemoryExecuted) gives the same theoretical occupancy
    on every sample launch: the driver picked carveouts that cost no occupancy."""
    import sqlite3
    conn = sqlite3.connect(f"file:{nsys_sqlite}?mode=ro", uri=True)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
        pytest.skip("no kernels in this export")
    if "sharedMemoryExecuted" not in {r[1] for r in conn.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")}:
        pytest.skip("this export has no sharedMemoryExecuted")
    rows = conn.execute("SELECT blockX * blockY * blockZ, registersPerThread, staticSharedMemory + dynamicSharedMemory, "
                        "sharedMemoryExecuted FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
    limits = occupancy.cuda_limits(tb_hwprof.read(nsys_sqlite).devices[0])
    block, regs, smem, executed = (list(c) for c in zip(*rows))
    default = occupancy.cuda_occupancy(limits, block, regs, smem)["occupancy_pct"]
    ran = occupancy.cuda_occupancy(limits, block, regs, smem, executed)["occupancy_pct"]
    assert list(default) == list(ran)
