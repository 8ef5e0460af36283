"""Labels that say what a value is and where it came from (issue 32 item 7), in the browser, on real
runs: the H200 pair joined per configuration and an Nsight Systems export.

- the kernel drawer heads the rule results with the tool that wrote them (Nsight Compute: only its
  reports carry rules), not the run's tool ("Rules of the PyTorch profiler"), and shows no rules
  heading at all on a launch that has no report behind it;
- tb-hwprof's own tables of a joined run (counter_join, op_counters) are listed as derived by
  tb-hwprof, not "from pytorch", and their times carry units;
- a column's header shows its scaled unit once: "total (µs)", not "total_ns (µs)".
Expected values come from the plugin's own JSON (/kernel, /summaries) and the run's tables."""
from __future__ import annotations


import pytest

import tb_hwprof
from browser_support import wait_rows
from conftest import export_h200_pair, export_sample, get_json

JOINED, NSYS = "h200_labels", "nsys_labels"
EXPECTED_RUNS = {JOINED, NSYS}


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir):
    root = export_h200_pair(samples_dir, tmp_path_factory, tmp_path_factory.mktemp("labels") / "logs", JOINED)
    export_sample(samples_dir, "nsys/annikola_gtx1050_2024.5.1.sqlite", root, NSYS)
    return root


def open_drawer(session, launch: int):
    session.open()
    frame = session.go(f"#view=kernels&run={JOINED}&launch={launch}")
    wait_rows(frame, "kernels")
    drawer = frame.locator("aside#detail")
    drawer.locator("[data-role=detail-name]").wait_for(timeout=30000)
    return drawer


def test_rules_are_headed_by_the_tool_that_wrote_them(session, logdir):
    kernels = tb_hwprof.load_run(logdir / JOINED, with_details=False).kernels
    launch = int(kernels.index[kernels["counter_launch_id"] >= 0][0])
    rules = get_json(f"{session.base}/data/plugin/tb_hwprof/kernel?run={JOINED}&launch={launch}")["rules"]
    assert rules, "a joined launch carries the report's rule results"
    drawer = open_drawer(session, launch)
    heading = drawer.locator("[data-role=rules-section] h4")
    assert heading.inner_text() == f"Nsight Compute rules ({len(rules)})"
    assert drawer.locator("table[data-role=rules] tbody tr").count() == len(rules)
    session.shot("labels-drawer-rules-nsight-compute")


def test_a_launch_without_a_report_has_no_rules_heading(session, logdir):
    kernels = tb_hwprof.load_run(logdir / JOINED, with_details=False).kernels
    launch = int(kernels.index[kernels["counter_launch_id"] < 0][0])
    drawer = open_drawer(session, launch)
    headings = drawer.locator("h4").all_inner_texts()
    assert headings, "the drawer drew its sections"
    assert not [t for t in headings if "rules" in t.lower()], headings


def open_summary(session, run: str, table: str):
    session.open()
    frame = session.go(f"#view=summaries&run={run}")
    item = frame.locator(f"ul[data-role=summary-index] li[data-table={table}]")
    item.wait_for(timeout=30000)
    section = frame.locator(f"details.summary-table[data-table={table}]")
    if section.get_attribute("open") is None:
        section.locator("summary").click()
    wait_rows(frame, f"summary-{table}")
    return frame, item


def test_tb_hwprofs_own_tables_of_a_joined_run_say_so_and_carry_units(session, logdir):
    listing = {t["name"]: t for t in get_json(f"{session.base}/data/plugin/tb_hwprof/summaries?run={JOINED}")["tables"]}
    for name in ("counter_join", "op_counters"):
        assert listing[name]["derived"] and listing[name]["origin"] == "tb-hwprof"
    frame, item = open_summary(session, JOINED, "counter_join")
    assert "derived by tb-hwprof" in item.inner_text() and "from pytorch" not in item.inner_text()
    for column, label in (("trace_ns", "trace"), ("counter_ns", "counter")):
        header = frame.locator(f"table[data-role=summary-counter_join] th[data-col={column}]").inner_text()
        assert header.startswith(f"{label} (") and "_ns" not in header, header
    session.shot("labels-summaries-counter-join")


def test_a_header_names_its_scaled_unit_once(session, logdir):
    frame, _ = open_summary(session, NSYS, "cuda_gpu_kern_sum")
    table = tb_hwprof.load_run(logdir / NSYS, with_details=False).summaries["cuda_gpu_kern_sum"]
    ns_columns = [c for c, u in table.attrs["units"].items() if u == "ns"]
    assert "total_ns" in ns_columns
    for column in ns_columns:
        header = frame.locator(f"table[data-role=summary-cuda_gpu_kern_sum] th[data-col={column}]").inner_text()
        assert header.startswith(column[:-3] + " (") and "_ns" not in header, header
    session.shot("labels-summaries-nsys-units")


def test_a_tiny_value_in_a_scaled_column_reads_in_its_own_unit(session, logdir):
    """A column is scaled by its median (GB/s here); a value a hundred times smaller reads in its
    own unit ("4.31 MB/s"), not as "0.00431" or "4.31e-6" of the column's."""
    ops = get_json(f"{session.base}/data/plugin/tb_hwprof/operators?run={JOINED}")["ops"]
    rates = sorted(o["bytes_per_s"] for o in ops if o.get("bytes_per_s"))
    median = rates[len(rates) // 2]
    column_factor = max(f for f in (1, 1e3, 1e6, 1e9, 1e12) if median >= f)
    tiny = [(o["op"], o["bytes_per_s"]) for o in ops if o.get("bytes_per_s") and o["bytes_per_s"] < column_factor / 100]
    assert tiny, "the joined run has an operator far below its column's scale"
    op, rate = tiny[0]
    own = max(f for f in (1, 1e3, 1e6, 1e9, 1e12) if rate >= f)
    expected = f"{float(f'{rate / own:.3g}'):g} {dict([(1, 'B/s'), (1e3, 'KB/s'), (1e6, 'MB/s'), (1e9, 'GB/s'), (1e12, 'TB/s')])[own]}"
    session.open()
    frame = session.go(f"#view=operators&run={JOINED}&q={op}")
    wait_rows(frame, "operators")
    cells = frame.eval_on_selector_all(
        "table[data-role=operators] tbody tr[data-row-id] td[data-col=bytes_per_s]",
        "(cells, v) => cells.filter(c => Number(c.dataset.value) === v).map(c => c.textContent)", rate)
    assert cells and cells[0] == expected, (cells, expected)
