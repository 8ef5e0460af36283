"""sample_logs/ must be what the current code exports from the real reports (re-run
scripts/make_sample_logs.py after a format or reader change)."""
from pathlib import Path

import pandas as pd
import pytest

import tb_hwprof
from tb_hwprof.logdir import metadata, trace

REPO = Path(__file__).resolve().parent.parent
RUN_DIRS = sorted(p.parent.parent.parent for p in (REPO / "sample_logs").rglob(f"plugins/{metadata.PLUGIN_NAME}/profile.json"))


def test_sample_logs_hold_the_armleth_series():
    names = {str(p.relative_to(REPO / "sample_logs")) for p in RUN_DIRS}
    assert {f"armleth_t4_series/report_v{i}" for i in (1, 2)} <= names
    assert sum(n.startswith("armleth_t4_series/") for n in names) == 10


def test_the_shipped_series_opens_in_the_series_view_and_draws_lines():
    """The README's example series (`armleth_t4_series`): each run at its own step, the group's
    series event file holding every step's figure, and /series answering for any of its runs (it
    said 404 when sample_logs lacked the group's file)."""
    from support_plugin import App
    from support_series import scalar_points
    group = REPO / "sample_logs" / "armleth_t4_series"
    runs = sorted(p.relative_to(REPO / "sample_logs").as_posix() for p in RUN_DIRS if p.parent == group)
    doc = App(REPO / "sample_logs").json("/series", run=runs[-1])
    assert doc["group"] == "armleth_t4_series" and sorted(s["run"] for s in doc["steps"]) == runs
    assert [s["step"] for s in doc["steps"]] == list(range(len(runs)))
    lines = scalar_points(group)
    assert [step for step, _ in lines] == list(range(len(runs)))
    for step in doc["steps"]:  # the series file holds each run's own figure at the run's step
        assert scalar_points(REPO / "sample_logs" / step["run"]) == [lines[step["step"]]]


@pytest.mark.parametrize("run_dir", RUN_DIRS, ids=lambda p: str(p.relative_to(REPO / "sample_logs")))
def test_sample_run_matches_a_fresh_export(run_dir, samples_dir, ncu_report_module):
    stored = tb_hwprof.load_run(run_dir)
    assert list(run_dir.glob("events.out.tfevents.*")), "TensorBoard lists only folders with an event file"
    source = samples_dir / stored.provenance.source_path.removeprefix("shared/samples/")
    fresh = tb_hwprof.read(source)
    tb_hwprof.analyse(fresh)  # as the export does: the analysis fills kernel columns (theoretical occupancy)
    assert stored.provenance.source_sha256 == fresh.provenance.source_sha256
    pd.testing.assert_frame_equal(stored.kernels, fresh.kernels)  # a tracer's all-NaN counters sparse in both
    assert [d.to_dict() for d in stored.devices] == [d.to_dict() for d in fresh.devices]  # peaks and their sources
    # CPU-only runs (VTune) hold their data in summary tables: those must match too.
    assert sorted(stored.summaries) == sorted(fresh.summaries)
    for name, table in fresh.summaries.items():
        pd.testing.assert_frame_equal(stored.summaries[name], table, check_dtype=False, obj=f"summary {name}")
    # Traces: the stored timeline index holds the fresh timeline's slices.
    index = run_dir / "plugins" / metadata.PLUGIN_NAME / metadata.TIMELINE_INDEX
    assert index.is_file() == (fresh.timeline is not None)
    if fresh.timeline is not None:
        stored_index = trace.read_index(index)
        assert stored_index["start"].tolist() == sorted(fresh.timeline.slices["start"].tolist())
        assert stored_index["meta"]["names"] == fresh.timeline.names


@pytest.mark.parametrize("run_dir", RUN_DIRS, ids=lambda p: str(p.relative_to(REPO / "sample_logs")))
def test_sample_run_holds_the_current_analysis(run_dir, samples_dir, ncu_report_module):
    """The advice and the analysis' tables a sample run shows are what the current pipeline computes."""
    source = samples_dir / tb_hwprof.load_run(run_dir, with_details=False).provenance.source_path.removeprefix(
        "shared/samples/")
    fresh = tb_hwprof.analyse(tb_hwprof.read(source))
    stored = tb_hwprof.load_analysis(run_dir)
    assert [(f.id, f.title, f.text) for f in stored.findings] == [(f.id, f.title, f.text) for f in fresh.findings]
    assert sorted(stored.summaries) == sorted(fresh.summaries)
    for name, table in fresh.summaries.items():
        pd.testing.assert_frame_equal(stored.summaries[name], table, check_dtype=False, obj=f"summary {name}")
