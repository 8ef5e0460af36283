"""Source counters (issue 17): per launch the instructions with most sampled warp stalls
(readers/nvidia/ncu_rep.py -> summary ncu_source_hotspots -> /kernel's Source Counters section),
against NVIDIA's own ncu_report walking the same launch: its per-instruction sample count
(smsp__pcsamp_sample_count, a metric our reader does not sum), the reasons' own instance values,
the SASS text and source line at each address."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ncu_actions
from tb_hwprof.analysis import ncu_sections

WITH_SAMPLES = ["ncu/aplainjane_rtx3060l_full_7k_2024.1.0.ncu-rep", "ncu/armleth_t4_full_2024.2.1.ncu-rep",
                "ncu/lakshya_gtx1660s_full_2024.1.1.ncu-rep"]
WITHOUT_SAMPLES = ["ncu/spyinfer_a10_105launches_2023.2.0.ncu-rep", "ncu/lashi_rtx4090_sections_2023.1.0.ncu-rep",
                   "ncu/darrenlu_rtx3050l_basic_2025.1.0.ncu-rep"]
TOP = 10
PREFIX = "smsp__pcsamp_warps_issue_stalled_"


def instances(metric) -> dict:
    """{correlation id (instruction address): value} of a per-instruction metric."""
    ids = metric.correlation_ids()
    return {ids.as_uint64(i): metric.as_uint64(i) for i in range(metric.num_instances())}


def oracle_top(action) -> list:
    """[(address, samples)] of ncu_report's own per-instruction sample count, most first."""
    metric = action.metric_by_name("smsp__pcsamp_sample_count")
    if metric is None:
        return []
    counts = {a: n for a, n in instances(metric).items() if n}
    return sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))[:TOP]


def reason_samples(action, reason: str, address: int) -> int:
    return instances(action.metric_by_name(PREFIX + reason)).get(address, 0)


def all_reasons(action) -> list:
    return [n[len(PREFIX):] for n in action.metric_names() if n.startswith(PREFIX) and not n.endswith("_not_issued")]


def ours(profile, launch_id: int) -> list:
    table = profile.summaries.get("ncu_source_hotspots")
    if table is None:
        return []
    return table[table["launch_id"] == launch_id].sort_values("rank").to_dict("records")


@pytest.mark.parametrize("relative", WITH_SAMPLES)
def test_top_instructions_equal_ncu_reports_samples_per_address(relative, samples_dir, read_sample, ncu_report_module):
    if not (samples_dir / relative).is_file():
        pytest.skip(f"{relative} not in the samples")
    profile = read_sample(relative)
    checked = 0
    for launch_id, action in enumerate(ncu_actions(ncu_report_module, samples_dir / relative)):
        expected, rows = oracle_top(action), ours(profile, launch_id)
        assert [(r["address"], r["samples"]) for r in rows] == expected, f"launch {launch_id}"
        reasons = all_reasons(action)
        for r in rows:
            assert r["sass"] == action.sass_by_pc(r["address"]).strip() and r["sass"]
            at_address = {reason: reason_samples(action, reason, r["address"]) for reason in reasons}
            assert sum(at_address.values()) == r["samples"]  # the reasons add up to ncu's own count
            assert r["stall_1_samples"] == max(at_address.values())
            for k in (1, 2, 3):
                if r[f"stall_{k}"]:
                    assert r[f"stall_{k}_samples"] == at_address[r[f"stall_{k}"]] > 0
            assert [r[f"stall_{k}_samples"] for k in (1, 2, 3)] == sorted(at_address.values(), reverse=True)[:3] + \
                [0] * max(0, 3 - len(at_address))
            checked += 1
    assert checked, f"{relative}: no launch with samples"


def test_source_lines_where_the_report_has_line_info(samples_dir, read_sample, ncu_report_module):
    """aplainjane was compiled with line info: each instruction names its .cu file and line, as
    ncu_report's ISourceInfo gives them; armleth was not: no line."""
    for relative, has_lines in ((WITH_SAMPLES[0], True), (WITH_SAMPLES[1], False)):
        if not (samples_dir / relative).is_file():
            pytest.skip(f"{relative} not in the samples")
        profile = read_sample(relative)
        for launch_id, action in enumerate(ncu_actions(ncu_report_module, samples_dir / relative)):
            for r in ours(profile, launch_id):
                info = action.source_info(r["address"])
                if has_lines:
                    assert (r["source_file"], r["source_line"]) == (info.file_name(), info.line())
                    assert r["source_file"].endswith(".cu") and r["source_line"] > 0
                else:
                    assert info is None and (r["source_file"], r["source_line"]) == ("", 0)


@pytest.mark.parametrize("relative", WITHOUT_SAMPLES)
def test_a_report_without_stall_sampling_has_no_table(relative, samples_dir, read_sample, ncu_report_module):
    if not (samples_dir / relative).is_file():
        pytest.skip(f"{relative} not in the samples")
    assert not any(a.metric_by_name("smsp__pcsamp_sample_count") for a in ncu_actions(ncu_report_module, samples_dir / relative))
    assert "ncu_source_hotspots" not in read_sample(relative).summaries


# -- through the logdir and /kernel -----------------------------------------------------------------
@pytest.fixture(scope="module")
def kernel_app(tmp_path_factory, samples_dir):
    from support_plugin import App
    import tb_hwprof
    relative = WITH_SAMPLES[0]
    if not (samples_dir / relative).is_file():
        pytest.skip(f"{relative} not in the samples")
    logdir = tmp_path_factory.mktemp("hotspots")
    tb_hwprof.export(samples_dir / relative, logdir, "plain")
    return App(logdir), logdir / "plain"


def test_the_table_is_written_and_read_back(kernel_app, read_sample):
    import tb_hwprof
    written = tb_hwprof.load_run(kernel_app[1]).summaries["ncu_source_hotspots"]
    read = read_sample(WITH_SAMPLES[0]).summaries["ncu_source_hotspots"]
    assert written.to_dict("records") == read.to_dict("records")


def test_kernel_document_has_the_launchs_instructions(kernel_app, samples_dir, ncu_report_module):
    app = kernel_app[0]
    actions = list(ncu_actions(ncu_report_module, samples_dir / WITH_SAMPLES[0]))
    for launch, action in enumerate(actions):
        doc = app.json("/kernel", run="plain", launch=str(launch))
        source = [s for s in doc["sections"] if s["id"] == "SourceCounters"]
        figures = [f for s in source for f in s["figures"] if f["kind"] == "hotspots"]
        expected = oracle_top(action)
        if not expected:
            assert not figures
            continue
        (fig,) = figures
        assert [(r["address"], r["samples"]) for r in fig["rows"]] == expected
        assert fig["has_line_info"]
        for r in fig["rows"]:
            info = action.source_info(r["address"])
            assert (r["source_file"], r["source_line"]) == (info.file_name(), info.line())
            assert r["sass"] == action.sass_by_pc(r["address"]).strip()
            for st in r["stalls"]:
                assert st["samples"] == reason_samples(action, st["reason"], r["address"])
                assert st["label"] == ncu_sections.stall_label(st["reason"])


def test_stall_labels_are_nsight_computes():
    assert ncu_sections.stall_label("long_scoreboard") == "Long Scoreboard"
    assert ncu_sections.stall_label("lg_throttle") == "LG Throttle"
    assert ncu_sections.stall_label("no_instructions") == "No Instruction"
    assert ncu_sections.source_hotspots([]) is None


def test_a_made_up_row_is_shown_as_given():
    """The section keeps the rows' order by rank, null line for 0, and the reasons in their order."""
    rows = [{"rank": 2, "address": 16, "sass": "FADD R1, R2, R3", "source_file": "", "source_line": 0, "samples": 3,
             "stall_1": "wait", "stall_1_samples": 3, "stall_2": "", "stall_2_samples": 0},
            {"rank": 1, "address": 32, "sass": "<b>x</b>", "source_file": "a.cu", "source_line": 7, "samples": 5,
             "stall_1": "mio_throttle", "stall_1_samples": 5}]
    fig = ncu_sections.source_hotspots(rows)
    assert [r["address"] for r in fig["rows"]] == [32, 16]
    assert fig["rows"][1]["source_line"] is None and fig["has_line_info"]
    assert fig["rows"][0]["stalls"] == [{"reason": "mio_throttle", "label": "MIO Throttle", "samples": 5}]
    assert fig["rows"][0]["sass"] == "<b>x</b>"  # text as read: the drawer builds text nodes
