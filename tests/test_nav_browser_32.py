"""Issue 32 items 5 and 9: no empty tabs.  The nav offers Series only on the steps of an optimisation
series (never on a job's ranks), Roofline only where the run draws points under a roof, Bottlenecks
only where launches have durations, and an Nsight Compute run's Overview shows no card it cannot fill.

Real exports in one TensorBoard (tests/browser_support.py): the shipped sample_logs series (copied),
Nsight Compute reports (--set full, the default set, CLI metrics without durations), an Nsight
Systems trace, a PyTorch trace with operator shapes, and a two-rank PyTorch job exported over an
earlier series of the same files (the series' event file is still in the job's folder).  Expected
sets come from the files on disk and the runs' own tables (tb_hwprof.load_run / load_analysis),
never from the page.
"""
from __future__ import annotations

import json
import shutil
import urllib.error

import pytest

import tb_hwprof
from browser_support import REPO, export_run, nav_of_run, open_roofline
from conftest import get_json, sample
from tb_hwprof.analysis.roofline import ABOVE_ROOFS
from tb_hwprof.app import cli
from tb_hwprof.logdir import metadata

SERIES = "armleth_t4_series"  # the shipped sample (sample_logs/), copied into the logdir
SOURCES = {"ncu_full": "ncu/lakshya_gtx1660s_full_2024.1.1.ncu-rep",  # --set full: roofline section
           "ncu_basic": "ncu/darrenlu_rtx3050l_basic_2025.1.0.ncu-rep",  # default set: no FLOP counters
           "ncu_cli": "ncu/gene_v100_cli_flops_2020.ncu-rep",  # --metrics only: no launch durations
           "nsys": "nsys/gpu4_t4_2022.4.2.sqlite",
           "torch": "torch/tracelens_h100_bert_small.json.gz"}
RANKS = ["torch/hta_sampled_2rank_rank0.json.gz", "torch/hta_sampled_2rank_rank1.json.gz"]
NCU_RUNS = ("ncu_full", "ncu_basic", "ncu_cli")
SERIES_STEPS = sorted(f"{SERIES}/{p.name}" for p in (REPO / "sample_logs" / SERIES).iterdir() if p.is_dir())
# The job's runs, and the earlier series' runs it left in its folder.
JOB_RUNS = {"job", "job/rank_0", "job/rank_1", *(f"job/{rel.rsplit('/', 1)[1][: -len('.gz')]}" for rel in RANKS)}
EXPECTED_RUNS = set(SOURCES) | set(SERIES_STEPS) | JOB_RUNS


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir):
    root = tmp_path_factory.mktemp("nav_32") / "logs"
    shutil.copytree(REPO / "sample_logs" / SERIES, root / SERIES)
    for run, rel in SOURCES.items():
        export_run([sample(samples_dir, rel)], root, run)
    # The two ranks exported as a series first, then as a job over it: the folder keeps the series'
    # event file, and its runs are a job's (job/rank_N beside the job's own run), not steps.
    ranks = [str(sample(samples_dir, rel)) for rel in RANKS]
    assert cli.main(["export", *ranks, "--logdir", str(root), "--run", "job", "--series", "--quiet"]) == 0
    assert cli.main(["export", *ranks, "--logdir", str(root), "--run", "job", "--scheduler", "none",
                     "--overwrite", "--quiet"]) == 0
    assert list((root / "job").glob("*" + metadata.SERIES_EVENTS_SUFFIX))
    return root


def runs_doc(session) -> dict:
    return {r["run"]: r for r in get_json(f"{session.base}/data/plugin/tb_hwprof/runs")["runs"]}


def manifest_of(logdir, run) -> dict:
    return json.loads((logdir / run / "plugins/tb_hwprof" / metadata.MANIFEST).read_text())


def is_series_step(logdir, run) -> bool:
    """From the disk: the run's folder holds a series' event file and is not a job's run (a job's
    folder holds its ranks' runs beside its own, which lists the ranks table)."""
    group = (logdir / run).parent
    if group == logdir or not list(group.glob("events.out.tfevents.*" + metadata.SERIES_EVENTS_SUFFIX)):
        return False
    own = group / "plugins/tb_hwprof" / metadata.MANIFEST
    return not (own.is_file() and "summary_ranks" in json.loads(own.read_text())["files"])


def drawable_points(logdir, run) -> int:
    """Points a roofline places, from the run's tables: launches with FLOP/s and an intensity (not
    above every roof), and operator shapes with both."""
    kernels = tb_hwprof.load_run(logdir / run, with_details=False).kernels
    intensity = kernels[["ai_dram", "ai_l2", "ai_l1"]].gt(0).any(axis=1)
    placed = kernels[(kernels["flop_per_s"] > 0) & intensity & (kernels["binding_roof"] != ABOVE_ROOFS)]
    shapes = tb_hwprof.load_analysis(logdir / run).summaries.get("op_shapes")
    ops = 0 if shapes is None else int(((shapes["intensity"] > 0) & (shapes["flop_per_s"] > 0)).sum())
    return len(placed) + ops


def has_roof(logdir, run) -> bool:
    return any((dev.get("roofs") or {}) for dev in (manifest_of(logdir, run).get("roofline") or {}).values())


def visible_nav(frame) -> list:
    return frame.eval_on_selector_all("nav.views button", "bs => bs.filter(b => !b.hidden).map(b => b.dataset.view)")


# -- Series: offered only on a series' steps, and the route agrees --------------------------------
def test_series_is_offered_only_on_the_steps_of_a_series(session, logdir):
    session.open()
    rows = runs_doc(session)
    assert set(rows) == EXPECTED_RUNS
    steps = {run for run in rows if is_series_step(logdir, run)}
    assert steps == set(SERIES_STEPS)  # the sample's steps; the job's ranks are none, nor the lone runs
    for run, row in rows.items():
        offered = [name for name, _ in nav_of_run(session, run)]
        assert ("series" in offered) == (run in steps), run
        # The nav and the route answer the same question.
        try:
            get_json(f"{session.base}/data/plugin/tb_hwprof/series?run={run}")
            answered = True
        except urllib.error.HTTPError as e:
            assert e.code == 404 and "not a step of a series" in json.loads(e.read())["error"]
            answered = False
        assert answered == ("series" in row["views"]) == (run in steps), run
    nav_of_run(session, "job/rank_0")
    session.shot("nav32-job-rank-no-series")


def test_series_of_a_run_that_is_no_step_says_how_to_make_one(session, logdir):
    """A link to the Series of a lone run or a job's rank explains, on that run: no jump to another
    run's series, no HTTP error."""
    session.open()
    for run in ("ncu_full", "job/rank_1"):
        frame = session.go(f"#view=series&run={run}")
        note = frame.locator("[data-role=not-a-step]")
        note.wait_for()
        text = note.inner_text()
        assert "tb-hwprof export" in text and "--run" in text, text
        assert frame.locator("#run-picker").input_value() == run
        assert frame.locator(".error").count() == 0 and frame.locator("[data-role=series-charts]").count() == 0
        # The logdir's series are offered as links, each to its first step (nothing opens by itself).
        link = frame.locator(f"[data-role=series-links] a[data-group='{SERIES}']")
        assert link.count() == 1
    session.shot("nav32-series-not-a-step")
    link.click()
    frame.locator("[data-role=series-charts] svg").first.wait_for()
    assert frame.locator("#run-picker").input_value() == SERIES_STEPS[0]


# -- Roofline and Bottlenecks: offered where they draw something -----------------------------------
def test_roofline_is_offered_only_where_it_draws_points_under_a_roof(session, logdir):
    session.open()
    rows = runs_doc(session)
    for run in sorted(set(SOURCES) | {SERIES_STEPS[0], "job/rank_0"}):
        points = drawable_points(logdir, run)
        expected = points > 0 and has_roof(logdir, run)
        offered = [name for name, _ in nav_of_run(session, run)]
        assert ("roofline" in offered) == expected, (run, points)
        assert ("roofline" in rows[run]["views"]) == expected
        if expected:  # every point drawn (open_roofline waits for them)
            open_roofline(session, run, points)
    frame = session.go("#view=runs&run=nsys")
    frame.wait_for_function("() => document.querySelector('nav.views button[data-view=roofline]').hidden")
    session.shot("nav32-nsys-no-roofline")


def test_bottlenecks_is_offered_only_where_launches_have_durations(session, logdir):
    session.open()
    for run in sorted(set(SOURCES) | {SERIES_STEPS[0], "job"}):
        kernels = tb_hwprof.load_run(logdir / run, with_details=False).kernels
        timed = bool(kernels["duration_ns"].notna().any()) if len(kernels) else False
        assert ("bottlenecks" in [name for name, _ in nav_of_run(session, run)]) == timed, run
    assert not tb_hwprof.load_run(logdir / "ncu_cli", with_details=False).kernels["duration_ns"].notna().any()


# -- Overview of Nsight Compute runs: no card it cannot fill ----------------------------------------
def headline_cards(frame) -> dict:
    frame.locator("[data-role=headline]").wait_for()
    return {c["role"]: c for c in frame.eval_on_selector_all("[data-role=headline] .stat", """cards => cards.map(c => {
        const v = c.querySelector('.stat-value');
        return {role: v.dataset.role, value: v.textContent, raw: v.dataset.value ?? null,
                note: (c.querySelector('.stat-note') || {}).textContent || ''};
    })""")}


def test_overview_of_ncu_runs_shows_no_empty_card(session, logdir):
    """No timeline in an Nsight Compute report: no GPU busy / idle / copies card.  A figure the report
    could have had but lacks (launch durations, from --metrics without gpu__time_duration) says what
    to capture.  The counters' time-weighted figures are shown where the run has them."""
    session.open()
    for run in NCU_RUNS:
        headline = manifest_of(logdir, run)["summary"]
        kernels = tb_hwprof.load_run(logdir / run, with_details=False).kernels
        frame = session.go(f"#view=overview&run={run}")
        cards = headline_cards(frame)
        assert all(c["value"] != "—" for c in cards.values()), (run, cards)
        assert not {"gpu-busy", "gpu-idle", "memcpy-share"} & set(cards), run
        assert float(cards["kernel-launches"]["raw"]) == len(kernels)
        if kernels["duration_ns"].notna().any():
            assert float(cards["kernel-time"]["raw"]) == pytest.approx(kernels["duration_ns"].sum() / 1e6)
        else:
            assert cards["kernel-time"]["raw"] is None and "gpu__time_duration" in cards["kernel-time"]["note"]
        for key, role in (("sm_throughput_pct_time_weighted", "sm-throughput"),
                          ("memory_throughput_pct_time_weighted", "memory-throughput"),
                          ("achieved_occupancy_pct_time_weighted", "achieved-occupancy")):
            assert (role in cards) == (key in headline), (run, role)
            if key in headline:
                assert float(cards[role]["raw"]) == pytest.approx(headline[key])
        session.shot({"ncu_full": "nav32-overview-ncu", "ncu_cli": "nav32-overview-ncu-no-durations"}.get(run, f"nav32-overview-{run}"))
    # A trace keeps its timeline cards.
    cards = headline_cards(session.go("#view=overview&run=nsys"))
    assert {"gpu-busy", "gpu-idle", "memcpy-share", "kernel-launches", "kernel-time"} <= set(cards)
    assert all(c["value"] != "—" for c in cards.values())
