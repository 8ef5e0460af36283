"""The Memory view (issue 33) in the browser, on real PyTorch traces recorded with
profile_memory=True (TraceLens's H100 BERT and MI300X ViT): a curve per device whose marked peak is
the run's memory_peak row, the per-operator table and the allocation events equal to the run's
tables, the events filter, and the nav offering Memory only to runs with memory events.  Expected
values come from the run's own tables (their figures are checked against torch-tb-profiler in
tests/test_torch_memory.py)."""
from __future__ import annotations

import pytest

import tb_hwprof
from browser_support import column, export_run, nav_of_run, wait_rows

BERT, VIT, NO_MEMORY = "bert_h100_memory", "vit_mi300x_memory", "resnet_no_memory"
EXPECTED_RUNS = {BERT, VIT, NO_MEMORY}


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir):
    root = tmp_path_factory.mktemp("memory-ui") / "logs"
    export_run([samples_dir / "torch/tracelens_h100_bert_small.json.gz"], root, BERT)
    export_run([samples_dir / "torch/tracelens_mi300x_falconsai_vit.json.gz"], root, VIT)
    export_run([samples_dir / "torch/hta_a100_triton_kernel.json.gz"], root, NO_MEMORY)
    return root


def test_memory_view_shows_curves_peaks_and_tables_of_the_run(session, logdir):
    tables = tb_hwprof.load_analysis(logdir / BERT).summaries
    peaks, by_op, events = tables["memory_peak"], tables["memory_by_op"], tables["memory_events"]
    session.open()
    frame = session.go(f"#view=memory&run={BERT}")
    wait_rows(frame, "memory-by-op", len(by_op))
    charts = frame.locator("svg[data-role=memory-chart]")
    assert sorted(charts.evaluate_all("cs => cs.map(c => c.dataset.device)")) == sorted(peaks["device"])
    for peak in peaks.itertuples():
        chart = frame.locator(f"svg[data-role=memory-chart][data-device='{peak.device}']")
        assert int(chart.get_attribute("data-peak-allocated")) == peak.peak_allocated_bytes
        assert int(chart.get_attribute("data-peak-reserved")) == peak.peak_reserved_bytes
        marker = chart.locator("[data-role=memory-peak]")
        assert int(marker.get_attribute("data-at-ns")) == peak.at_ns
        assert (marker.get_attribute("data-op") or "") == peak.op
        if peak.op:
            assert peak.op in marker.locator("[data-role=memory-peak-label]").text_content()
    # The per-operator table: every row of memory_by_op, its figures as stored.
    shown = dict(zip(zip(column(frame, "memory-by-op", "op"), column(frame, "memory-by-op", "device")),
                     zip(*(map(float, column(frame, "memory-by-op", c)) for c in
                           ("self_increase_bytes", "increase_bytes", "alloc_count", "calls")))))
    expected = {(r.op, r.device): (r.self_increase_bytes, r.increase_bytes, r.alloc_count, r.calls)
                for r in by_op.itertuples()}
    assert shown == expected
    frame.locator("svg[data-role=memory-chart]").first.scroll_into_view_if_needed()
    session.shot("memory-bert-h100")
    # The allocation events: one row per allocation (first page), filtered by an operator's name.
    info = frame.locator("[data-role=table-info]").nth(1).text_content()
    assert f"of {len(events):,} allocations" in info
    op = events["op"].value_counts().index[0]
    frame.locator("input[data-role=filter]").nth(1).fill(op)
    matching = int(events["op"].astype(str).str.lower().str.contains(op.lower(), regex=False).sum())
    frame.wait_for_function("([n]) => document.querySelectorAll('table[data-role=memory-events] tbody tr[data-row-id]')"
                            ".length === Math.min(n, 200)", arg=[matching], timeout=30000)
    assert set(column(frame, "memory-events", "op")) <= set(events["op"][events["op"].str.contains(op, regex=False)])
    session.shot("memory-bert-h100-allocations")


def test_memory_view_on_rocm_names_the_gpu(session, logdir):
    peaks = tb_hwprof.load_analysis(logdir / VIT).summaries["memory_peak"]
    session.open()
    frame = session.go(f"#view=memory&run={VIT}")
    frame.locator("svg[data-role=memory-chart]").first.wait_for(timeout=30000)
    gpu = peaks[peaks["device"] == "GPU0"].iloc[0]
    stats = frame.locator("[data-role=peak-allocated]").evaluate_all("ss => ss.map(s => Number(s.dataset.value))")
    assert int(gpu.peak_allocated_bytes) in stats
    session.shot("memory-vit-mi300x")


def test_memory_is_offered_only_to_runs_with_memory_events(session, logdir):
    session.open()
    assert "memory" in [view for view, _ in nav_of_run(session, BERT)]
    assert "memory" not in [view for view, _ in nav_of_run(session, NO_MEMORY)]
