"""The real H200 pair joined per configuration (samples/pairs/h200_resnet18_bf16), in a real browser:
the kernel drawer says which report launch a trace launch's counters are from, and the Roofline draws
the tensor-core roofs per source precision with no point above them (issues 27 and 29).  Expected
figures come from the run's own tables as the exporter wrote them from the two files (checked against
ncu_report in tests/test_h200_pair.py)."""
from __future__ import annotations


import pytest

import tb_hwprof
from browser_support import SHOTS, wait_rows
from conftest import export_h200_pair

RUN = "h200_per_config"
EXPECTED_RUNS = {RUN}


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir):
    return export_h200_pair(samples_dir, tmp_path_factory, tmp_path_factory.mktemp("h200") / "logs", RUN)


def test_the_drawer_says_where_a_launchs_counters_come_from(session, logdir):
    kernels = tb_hwprof.load_run(logdir / RUN, with_details=False).kernels
    joined = kernels[kernels["counter_launch_id"] >= 0]
    row = joined.iloc[-1]  # a later launch: its counters come from an earlier launch of its configuration
    session.open()
    frame = session.go(f"#view=kernels&run={RUN}&launch={int(row['launch_id'])}")
    wait_rows(frame, "kernels")
    source = frame.locator("aside#detail [data-role=counter_source]")
    source.wait_for(timeout=30000)
    assert source.inner_text() == row["counter_source"]
    assert "per-configuration join (same kernel, grid and block)" in source.inner_text()
    session.shot("h200-drawer-counter-source")


def test_the_roofline_draws_tensor_roofs_per_precision(session, logdir):
    doc_roofs = tb_hwprof.load_run(logdir / RUN, with_details=False).devices
    peaks = {k: p.value for d in doc_roofs for k, p in d.peaks.items()}
    assert "flop_per_s_tensor_bf16" in peaks
    session.open()
    frame = session.go(f"#view=roofline&run={RUN}")
    svg = frame.locator("svg[data-role=roofline]")
    svg.wait_for(timeout=30000)
    text = svg.evaluate("el => el.textContent")
    assert "Tensor BF16" in text
    assert "above the device's highest roof" not in frame.locator("body").inner_text()
    session.shot("h200-roofline-tensor-roofs")
    assert (SHOTS / "h200-roofline-tensor-roofs.png").is_file()
