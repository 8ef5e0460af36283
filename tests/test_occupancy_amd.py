"""Waves per CU and grid-limited occupancy on rocprof-compute / Omniperf workloads, recomputed
from sysinfo.csv and pmc_perf.csv with the csv module (the reader uses pandas)."""
from __future__ import annotations

import csv
import math

import pytest

import tb_hwprof

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
