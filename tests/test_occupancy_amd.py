"""Waves per CU and grid-limited occupancy on rocprof-compute / Omniperf workloads, recomputed
from sysinfo.csv and pmc_perf.csv with the csv module (the reader uses pandas)."""
from __future__ import annotations

import csv
import math

import pytest

import tb_hwprof

from support_occupancy import plain_waves_per_simd

WORKLOADS = ("rocprof-compute_bmm1_mi300x", "omniperf_vcopy_mi200", "omniperf_vcopy_mi300x")


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def expected_waves(folder):
    """Per dispatch (pmc_perf.csv order): (work-groups, waves per CU over the CU's wave slots)."""
    info = rows(folder / "sysinfo.csv")[0]
    slots = float(info["cu_per_gpu"]) * float(info["max_waves_per_cu"])
    out = []
    for r in rows(folder / "pmc_perf.csv"):
        items, group = float(r["Grid_Size"]), float(r["Workgroup_Size"])
        wave = float(r.get("Wave_Size") or r.get("wave_size") or info["wave_size"])
        groups = math.ceil(items / group)
        out.append((groups, groups * math.ceil(group / wave) / slots))
    return out


@pytest.fixture(scope="module")
def analysed(roc):
    cache = {}

    def get(name):
        if name not in cache:
            profile = tb_hwprof.read(roc / name)
            tb_hwprof.analyse(profile)
            cache[name] = profile
        return cache[name]
    return get


@pytest.mark.parametrize("name", WORKLOADS)
def test_waves_per_cu_from_sysinfo_and_pmc_perf(roc, analysed, name):
    kernels = analysed(name).kernels
    expected = expected_waves(roc / name)
    assert len(kernels) == len(expected)
    for (groups, waves), (_, k) in zip(expected, kernels.iterrows()):
        assert k["grid_size"] == groups
        assert k["waves_per_sm"] == pytest.approx(waves, rel=1e-12)


@pytest.mark.parametrize("name", WORKLOADS)
def test_waves_agree_with_the_waves_the_hardware_counted(roc, analysed, name):
    """SQ_WAVES (waves the sequencer launched, in pmc_perf.csv or the SQ_LEVEL_WAVES pass) equals
    waves_per_sm x CUs x wave slots: the formula counts the waves the dispatch really had."""
    folder = roc / name
    info = rows(folder / "sysinfo.csv")[0]
    slots = float(info["cu_per_gpu"]) * float(info["max_waves_per_cu"])
    pmc = rows(folder / "pmc_perf.csv")
    counted = [r.get("SQ_WAVES") for r in pmc]
    if not all(counted):
        counted = [r["SQ_WAVES"] for r in rows(folder / "SQ_LEVEL_WAVES.csv")]
    kernels = analysed(name).kernels
    assert [float(c) for c in counted] == pytest.approx(list(kernels["waves_per_sm"] * slots), rel=1e-12)


def test_bmm1_grids_below_one_wave_are_grid_limited(roc, analysed):
    """bmm1 on MI300X (304 CUs x 32 slots): the GEMM's 2048 work-groups x 4 waves fill 84% of the
    wave slots, the fills' 304 x 4 12.5%; the note says grid-limited with those figures and never
    that occupancy is a lever."""
    kernels = analysed("rocprof-compute_bmm1_mi300x").kernels
    expected = expected_waves(roc / "rocprof-compute_bmm1_mi300x")
    seen = set()
    for (groups, waves), (_, k) in zip(expected, kernels.iterrows()):
        assert waves < 1
        cap = 100 * waves
        note = k["occupancy_note"]
        assert (f"grid-limited: {groups} work-groups fill {cap:.0f}% of the GPU's wave slots ({waves:.2f} waves "
                f"per CU), so occupancy cannot exceed {cap:.0f}%") in note, note
        assert "lever" not in note and "may limit it" not in k["bound_reason"]
        assert k["achieved_occupancy_pct"] <= cap  # the cap holds
        verdict = "is what the launch allows" if k["achieved_occupancy_pct"] >= 0.9 * cap else "is below that cap"
        assert verdict in note
        if k["sm_throughput_pct"] < 60 and k["memory_throughput_pct"] < 60:
            assert k["bound"] == "small-grid" and f"{waves:.2f} waves per CU cannot fill the GPU" in k["bound_reason"]
        else:
            assert f"is grid-limited (at most {cap:.0f}%)" in k["bound_reason"]
        seen.add((groups, round(cap)))
    assert seen == {(2048, 84), (304, 12)}


@pytest.mark.parametrize("name", ("omniperf_vcopy_mi200", "omniperf_vcopy_mi300x"))
def test_grids_of_several_waves_are_not_grid_limited(roc, analysed, name):
    """vcopy's 4096 work-groups x 4 waves fill the slots 4.9x (MI200, 104 CUs) and 1.7x (MI300X)."""
    kernels = analysed(name).kernels
    for (_, waves), (_, k) in zip(expected_waves(roc / name), kernels.iterrows()):
        assert waves > 1
        assert "grid-limited" not in k["occupancy_note"] and "grid-limited" not in k["bound_reason"]
        assert k["bound"] != "small-grid"


# ------------------------------------------------------------------ theoretical waves per SIMD
# The rules written out again as a loop: plain_waves_per_simd (tests/support_occupancy.py).
CDNA = {"gfx90a", "gfx942"}


def raw_dispatches(roc, name):
    """[(workgroup size, arch VGPRs, accum VGPRs, SGPRs, LDS bytes)] in dispatch order, and the gfx target."""
    folder = roc / name
    if name == "v1_mi250x_laplacian":
        gfx = "gfx90a" if "gfx90a" in (folder / "results.sysinfo.txt").read_text() else "?"
        return gfx, [(int(r["wgr"]), int(r["arch_vgpr"]), int(r["accum_vgpr"]), int(r["sgpr"]), int(r["lds"]))
                     for r in rows(folder / "results.csv")]
    gfx = rows(folder / "sysinfo.csv")[0]["gpu_arch"]
    return gfx, [(int(r["Workgroup_Size"]), int(r["Arch_VGPR"]), int(r["Accum_VGPR"]), int(r["SGPR"]),
                  int(r["LDS_Per_Workgroup"])) for r in rows(folder / "pmc_perf.csv")]


def read_target(roc, name):
    return roc / name / "results.csv" if name == "v1_mi250x_laplacian" else roc / name


@pytest.mark.parametrize("name", ("v1_mi250x_laplacian", *WORKLOADS))
def test_theoretical_waves_per_simd_from_vgprs_sgprs_lds(roc, analysed, name):
    """Every dispatch: theoretical occupancy = waves per SIMD / 8 from its work-group size, VGPRs
    (arch + accumulation), SGPRs and LDS as the raw file states them, with the same limiter, and
    labelled as computed from the launch configuration."""
    from tb_hwprof.analysis.occupancy import LABEL
    gfx, dispatches = raw_dispatches(roc, name)
    assert gfx in CDNA
    kernels = analysed(read_target(roc, name) if name == "v1_mi250x_laplacian" else name).kernels
    assert len(kernels) == len(dispatches)
    for (workgroup, arch, accum, sgpr, lds), (_, k) in zip(dispatches, kernels.iterrows()):
        waves, limiter = plain_waves_per_simd(workgroup, arch, accum, sgpr, lds)
        assert k["theoretical_occupancy_pct"] == pytest.approx(100 * waves / 8, rel=1e-12)
        assert k["occupancy_limiter"] == limiter
        assert k["occupancy_source"] == LABEL


def test_rocpd_ck_gemm_is_limited_by_vgprs_and_lds(samples_dir):
    """rocprofv3's rocpd database (sqlite3 over the kernels view): CK's batched GEMM holds 256 arch
    + 256 accumulation VGPRs and 64 KB of LDS: one work-group per CU, one wave per SIMD (12.5%)."""
    import sqlite3
    from conftest import sample
    from tb_hwprof.analysis.occupancy import LABEL
    path = sample(samples_dir, "rocprof/v3_rocpd_mi300x_ck_bmm_results.db")
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    raw = conn.execute("SELECT workgroup_x * workgroup_y * workgroup_z, vgpr_count, accum_vgpr_count, sgpr_count, "
                       "lds_size FROM kernels ORDER BY start, id").fetchall()
    profile = tb_hwprof.read(path)
    tb_hwprof.analyse(profile)
    kernels = profile.kernels
    assert len(kernels) == len(raw)
    gemms = 0
    for (workgroup, arch, accum, sgpr, lds), (_, k) in zip(raw, kernels.iterrows()):
        waves, limiter = plain_waves_per_simd(workgroup, arch, accum, sgpr, lds)
        assert k["theoretical_occupancy_pct"] == pytest.approx(100 * waves / 8, rel=1e-12)
        assert k["occupancy_limiter"] == limiter and k["occupancy_source"] == LABEL
        gemms += limiter == "VGPRs, LDS"
    assert gemms == 150


def test_rocminfo_launch_limits(roc):
    """The GPU agent's wavefront size, work-group max size and max waves per CU as rocminfo printed them."""
    import re
    text = (roc / "v1_mi250x_laplacian" / "results.sysinfo.txt").read_text()
    gpu_agents = [a for a in re.split(r"\*+\s*\nAgent \d+", text) if re.search(r"Device Type:\s+GPU", a)]
    field = lambda agent, name: int(re.search(rf"^  {name}:\s+(\d+)", agent, re.M).group(1))
    expected = {(field(a, "Wavefront Size"), field(a, "Workgroup Max Size"), field(a, "Max Waves Per CU"))
                for a in gpu_agents}
    device = tb_hwprof.read(roc / "v1_mi250x_laplacian" / "results.csv").devices[0]
    assert expected == {(device.warp_size, device.max_threads_per_block, device.max_warps_per_sm)}
