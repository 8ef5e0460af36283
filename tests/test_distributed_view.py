"""The Distributed view: GET /distributed built from a job run's tables, and the page drawing it in
a real browser (one TensorBoard for the module).

The job is the real 2-rank capture (hta_sampled_2rank_rank0/1), exported in-process: each rank as
its own run through the normal export (job/rank_N), the job's run from analysis/ranks.py's
job_profile written by the writer.  Expected values come from the written tables (loaded back with
tb_hwprof.load_run), never from the backend's document.  Synthetic touches: for escaping only,
rank 0's digest gets an extra kernel named like markup, which must show as text; for a straggler,
a second job adds a copy of rank 1 with one operator's kernels stretched (tests/support_ranks.py).
"""
from __future__ import annotations

import json

import pytest

import tb_hwprof
from tb_hwprof.analysis import ranks
from tb_hwprof.analysis.pipeline import analyse
from tb_hwprof.app.export import export_reports
from tb_hwprof.readers.detect import read
from tb_hwprof.logdir.writer import write_run

from conftest import sample
from support_plugin import App
from support_ranks import load, stretched

PAIR = ["torch/hta_sampled_2rank_rank0.json.gz", "torch/hta_sampled_2rank_rank1.json.gz"]
EXPECTED_RUNS = {"job", "job/rank_0", "job/rank_1", "slowjob"}
XSS = "<img src=x onerror=alert(1)>kernel"
PARTS = ("compute_ns", "communication_ns", "overlap_ns", "other_ns")


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir):
    root = tmp_path_factory.mktemp("distributed") / "logs"
    paths = [sample(samples_dir, name) for name in PAIR]
    export_reports(paths, root, ["job/rank_0", "job/rank_1"])
    digests = []
    for position, path in enumerate(paths):
        profile = read(path)
        rank = ranks.rank_of(profile, path, position)
        digests.append(ranks.rank_digest(profile, rank, str(path), run=f"job/rank_{rank}"))
    digests[0].kernel_ns[XSS] = 10 ** 12  # synthetic, for escaping only: the top kernel
    job = ranks.job_profile(digests, notes=["rank 7 skipped: <b>not a trace</b>"], job="job")
    write_run(job, analyse(job), root, "job", beside=True)  # the folder holds the ranks' runs
    # A job with a straggler: the real pair plus rank 1 with aten::mm stretched 4x as rank 2
    # (synthetic, support_ranks.stretched), whose own run is not exported (its name shows as text).
    slow_path = root.parent / "synthetic_stretched_rank2.json"
    slow_path.write_text(json.dumps(stretched(load(paths[1]), "aten::mm", 4, rank=2)))
    slow = ranks.rank_digest(read(slow_path), 2, str(slow_path), run="slowjob/rank_2")
    job = ranks.job_profile(digests[:2] + [slow], job="slowjob")
    write_run(job, analyse(job), root, "slowjob")
    return root


@pytest.fixture(scope="module")
def tables(logdir):
    return tb_hwprof.load_run(logdir / "job").summaries


@pytest.fixture(scope="module")
def doc(logdir):
    return App(logdir).json("/distributed", run="job")


def bar_parts(row):
    """The four bar parts of a ranks row (they add up to the span)."""
    return {"compute_ns": row["compute_ns"] - row["overlap_ns"],
            "communication_ns": row["communication_ns"] - row["overlap_ns"],
            "overlap_ns": row["overlap_ns"], "other_ns": row["idle_ns"]}


# ---------------------------------------------------------------- backend
def test_ranks_equal_the_table(doc, tables):
    table = tables["ranks"]
    assert [r["rank"] for r in doc["ranks"]] == list(table["rank"])
    for got, (_, row) in zip(doc["ranks"], table.iterrows()):
        for col in ("compute_ns", "communication_ns", "overlap_ns", "idle_ns", "span_ns", "steps", "straggler",
                    "straggler_reason", "run"):
            assert got[col] == row[col], col
        assert got["step_time_avg_ns"] == pytest.approx(row["step_time_avg_ns"])
        assert got["bars"] == bar_parts(row)
        assert sum(got["bars"].values()) == row["span_ns"]
    assert doc["world_size"] == int(table["world_size"].iloc[0])
    assert doc["stragglers"] == [{"rank": int(r["rank"]), "run": r["run"], "reason": r["straggler_reason"]}
                                 for _, r in table.iterrows() if r["straggler"]]


def test_step_grid_equals_the_rank_steps_table(doc, tables):
    steps = tables["rank_steps"]
    grid = doc["step_times"]
    assert grid["steps"] == sorted(set(steps["step"]))
    for row in steps.itertuples():
        i, j = grid["ranks"].index(row.rank), grid["steps"].index(row.step)
        assert grid["ns"][i][j] == row.step_time_ns
        assert grid["median_ns"][j] == row.step_median_ns
    assert (grid["min_ns"], grid["max_ns"]) == (steps["step_time_ns"].min(), steps["step_time_ns"].max())


def test_kernels_equal_the_rank_kernels_table(doc, tables):
    table = tables["rank_kernels"]
    assert [k["kernel"] for k in doc["kernels"]] == list(table["kernel"])
    assert doc["kernels"][0]["kernel"] == XSS
    for got, (_, row) in zip(doc["kernels"], table.iterrows()):
        assert (got["min_ns"], got["median_ns"], got["max_ns"]) == (row["min_ns"], row["median_ns"], row["max_ns"])


def test_notes_and_thresholds(doc):
    assert "rank 7 skipped: <b>not a trace</b>" in doc["notes"]
    assert doc["thresholds"] == {"share_pct": 100 * ranks.STRAGGLER_SHARE, "min_ns": ranks.STRAGGLER_MIN_NS}


def test_a_rank_run_is_not_a_job(logdir):
    app = App(logdir)
    app.json("/distributed", expect=404, run="job/rank_0")
    runs = {r["run"]: r for r in app.json("/runs")["runs"]}
    assert runs["job"]["views"][0] == "distributed" and "distributed" not in runs["job/rank_0"]["views"]


# ---------------------------------------------------------------- browser
def test_the_view_draws_bars_and_heat_map_and_opens_a_rank(session, tables):
    frame = session.open()
    frame = session.go("#view=distributed&run=job")
    frame.wait_for_selector("[data-role=rank-bar]", timeout=30000)
    table = tables["ranks"]
    for _, row in table.iterrows():
        bar = frame.locator(f"[data-role=rank-bar][data-rank='{int(row['rank'])}']")
        values = {p: int(bar.locator(f"[data-part={p}]").get_attribute("data-value")) for p in PARTS}
        assert values == bar_parts(row)
        # Widths are proportional to the values (the widest bar fills the track).
        widths = {p: float(bar.locator(f"[data-part={p}]").evaluate("e => e.getBoundingClientRect().width")) for p in PARTS}
        if widths["compute_ns"] > 20 and widths["other_ns"] > 20:
            assert widths["compute_ns"] / widths["other_ns"] == pytest.approx(values["compute_ns"] / values["other_ns"], rel=0.05)
    # The per-rank numbers, and the overlap as a share of communication.
    for _, row in table.iterrows():
        tr = frame.locator(f"table[data-role=ranks-table] tr[data-rank='{int(row['rank'])}']")
        for col in ("compute_ns", "communication_ns", "overlap_ns", "idle_ns", "steps"):
            assert float(tr.locator(f"td[data-col={col}]").get_attribute("data-value")) == row[col]
        share = float(tr.locator("td[data-col=overlap_pct]").get_attribute("data-value"))
        assert share == pytest.approx(100 * row["overlap_ns"] / row["communication_ns"])
    steps = tables["rank_steps"]
    cells = frame.locator("table[data-role=step-heatmap] td.heat-cell")
    assert cells.count() == len(steps)
    for row in steps.itertuples():
        cell = frame.locator(f"table[data-role=step-heatmap] tr[data-rank='{row.rank}'] td[data-step='{row.step}']")
        assert int(cell.get_attribute("data-value")) == row.step_time_ns
    # Colour scale legend with its ends, and the value on hover.
    assert int(frame.locator("[data-role=heat-max]").get_attribute("data-value")) == steps["step_time_ns"].max()
    assert int(frame.locator("[data-role=heat-min]").get_attribute("data-value")) == steps["step_time_ns"].min()
    first = next(steps.itertuples())
    cell = frame.locator(f"table[data-role=step-heatmap] tr[data-rank='{first.rank}'] td[data-step='{first.step}']")
    cell.hover()
    readout = frame.locator("[data-role=heat-readout]")
    assert f"rank {first.rank}, step {first.step}: {float(f'{first.step_time_ns / 1e6:.3g}'):g} ms" in readout.text_content()
    # Straggler findings as the table says; markup in names and notes shows as text.
    if table["straggler"].any():
        assert frame.locator("[data-role=stragglers] li").count() == int(table["straggler"].sum())
    else:
        frame.wait_for_selector("[data-role=no-straggler]")
    assert frame.locator("[data-role=rank-kernels] td.kernel-name").first.text_content() == XSS
    assert frame.locator("[data-role=rank-kernels] img").count() == 0
    assert frame.locator("[data-role=job-notes] b").count() == 0
    session.shot("distributed")
    # A rank's link opens that rank's own run.
    frame.locator("[data-role=rank-bars] a.rank-link[data-rank='1']").click()
    frame.wait_for_function("() => document.querySelector('.run-name') && "
                            "document.querySelector('.run-name').textContent === 'job/rank_1'", timeout=30000)
    assert "run=job%2Frank_1" in frame.evaluate("() => location.hash")


def test_a_job_without_steps(tmp_path, samples_dir):
    """Ranks from Nsight Systems captures (no steps): bars, no step grid, the rank_steps table empty."""
    paths = [sample(samples_dir, name) for name in ("nsys/gpu4_t4_2022.4.2.sqlite", "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite")]
    digests = [ranks.rank_digest(read(p), i, str(p)) for i, p in enumerate(paths)]
    job = ranks.job_profile(digests, job="nsys_job")
    write_run(job, analyse(job), tmp_path, "nsys_job")
    table = tb_hwprof.load_run(tmp_path / "nsys_job").summaries["ranks"]
    doc = App(tmp_path).json("/distributed", run="nsys_job")
    assert doc["step_times"]["steps"] == [] and doc["world_size"] is None
    assert [r["run"] for r in doc["ranks"]] == ["nsys_job/rank_0", "nsys_job/rank_1"]
    for got, (_, row) in zip(doc["ranks"], table.iterrows()):
        assert got["bars"] == bar_parts(row) and got["step_time_avg_ns"] is None


def test_straggler_findings_with_their_numbers(session, logdir):
    table = tb_hwprof.load_run(logdir / "slowjob").summaries["ranks"]
    [reason] = table.loc[table["straggler"], "straggler_reason"]
    frame = session.open()
    frame = session.go("#view=distributed&run=slowjob")
    frame.wait_for_selector("[data-role=stragglers] li[data-rank='2']", timeout=30000)
    assert frame.locator("[data-role=stragglers] li").count() == 1
    assert frame.locator("[data-role=stragglers] li [data-role=reason]").text_content() == reason
    assert int(frame.locator("[data-role=straggler-count]").get_attribute("data-value")) == 1
    # Ranks 0 and 1 link to their runs; rank 2's run is not in the logdir: plain text saying so.
    assert frame.locator("[data-role=rank-bars] a.rank-link").count() == 2
    missing = frame.locator("[data-role=rank-bars] span[data-rank='2']").first
    assert "not in this logdir" in missing.get_attribute("title")
    session.shot("distributed_straggler")
