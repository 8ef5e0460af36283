"""bound_reason / occupancy_note against what the tools themselves say: Nsight Compute's own rule
text on grids of less than one wave, and the remedy a tracer's launches get (never Nsight
Compute's section names on a run Nsight Compute did not make)."""
from __future__ import annotations

import re

import pytest

import tb_hwprof
from tb_hwprof.core.errors import HwprofError

# Nsight Compute's SOLBottleneck rule on a small grid: "... resulting in only 0.8 full waves across all SMs."
NCU_FULL_WAVES = re.compile(r"too small to fill the available resources.*?only ([0-9.]+) full waves")


def analysed(path):
    profile = tb_hwprof.read(path)
    tb_hwprof.analyse(profile)
    return profile


def test_grid_limited_wording_agrees_with_nsight_computes_rules(ncu_rep):
    """Where ncu says the grid is too small, the note says grid-limited with ncu's waves; where
    the note says grid-limited, ncu's waves are below one and no ncu rule calls the grid full."""
    profile = analysed(ncu_rep)
    for i, k in profile.kernels.iterrows():
        messages = [r.get("message") or "" for r in profile.rules[i]] if profile.rules else []
        too_small = [m.group(1) for m in map(NCU_FULL_WAVES.search, messages) if m]
        grid_limited = "grid-limited" in k["occupancy_note"]
        assert grid_limited == (k["waves_per_sm"] < 1), (ncu_rep.name, i)
        if too_small:
            assert grid_limited, (ncu_rep.name, i, too_small)
            assert f"{float(too_small[0]):.1f}" == f"{k['waves_per_sm']:.1f}"
        if grid_limited:
            assert f"{k['waves_per_sm']:.2f} waves per SM" in k["occupancy_note"]
            assert "lever" not in k["occupancy_note"]


@pytest.mark.parametrize("relative, remedy", [
    ("nsys/gpu4_t4_2022.4.2.sqlite", "(`ncu --set full -k <kernel> <app>`)"),
    ("rocprof/v3_rocpd_mi300x_ck_bmm_results.db", "rocprof-compute on an Instinct GPU (`rocprof-compute profile"),
    ("rocprof/v1_mi250x_laplacian/results.csv", "rocprof-compute on an Instinct GPU (`rocprof-compute profile"),
])
def test_a_trace_says_not_measured_and_which_tool_measures(samples_dir, relative, remedy):
    path = samples_dir / relative
    if not path.exists():
        pytest.skip(f"{relative} not in the samples")
    profile = analysed(path)
    kernels = profile.kernels
    assert profile.timeline is not None and len(kernels)
    assert kernels["sm_throughput_pct"].isna().all() and set(kernels["bound"]) == {"unknown"}
    for reason in set(kernels["bound_reason"]):
        assert reason.startswith("not measured (trace): ") and remedy in reason
        assert "SpeedOfLight" not in reason


def test_only_nsight_compute_runs_are_told_about_its_sections(samples_dir):
    """Every rocprof and nsys sample: no reason or note names an Nsight Compute section."""
    paths = sorted(p for tool in ("rocprof", "nsys") for p in (samples_dir / tool).rglob("*")
                   if p.is_file() and not p.name.startswith("PROVENANCE"))
    checked = 0
    for path in paths:
        try:
            profile = analysed(path)
        except HwprofError:
            continue  # inputs tb-hwprof refuses (stats files, .nsys-rep without nsys, ...)
        for column in ("bound_reason", "occupancy_note"):
            assert not any("SpeedOfLight" in text for text in profile.kernels[column]), (path, column)
        checked += len(profile.kernels) > 0
    assert checked >= 10
