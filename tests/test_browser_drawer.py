"""The kernel drawer shows Nsight Compute's sections, in a real browser (TensorBoard + headless
Chromium; harness in tests/browser_support.py).  One TensorBoard start, one full-set report
(armleth, Nsight Compute 2024.2.1 `--set full`); every value the drawer shows is checked against
NVIDIA's own ncu_report reading the same file, both the exact value (data-value) and the text
shown (parsed back, within its display rounding).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from browser_support import SHOTS, export_run, wait_rows
from conftest import fresh_ncu_oracle, ncu_actions

RUN = "armleth"
TRACE_RUN = "kmeans"  # an Nsight Systems capture: occupancy computed from the launch configuration
CUSTOM_RUN = "lashi"  # custom section files (LoadMetrics, StoreMetrics, SharedMemAnalysis)
EXPECTED_RUNS = {RUN, TRACE_RUN, CUSTOM_RUN}
CUSTOM = "ncu/lashi_rtx4090_sections_2023.1.0.ncu-rep"
REPORT = "ncu/armleth_t4_full_2024.2.1.ncu-rep"
TRACE = "nsys/kmeans_rtx3080_openacc_2020.5.1.sqlite"
SCREENSHOT = Path(__file__).resolve().parent.parent / "docs" / "img" / "drawer-sections.png"
# The units the drawer scales (frontend/views/detail.js sectionValue) and their factors.
SCALE = {"B/s": 1, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9,
         "Hz": 1, "kHz": 1e3, "MHz": 1e6, "GHz": 1e9, "ns": 1, "µs": 1e3, "ms": 1e6, "s": 1e9}
SHOWN = re.compile(r"^(-?[\d,]*\.?\d+(?:e[-+]?\d+)?)\s*(.*)$")


@pytest.fixture(scope="module")
def report(samples_dir):
    path = samples_dir / REPORT
    if not path.is_file():
        pytest.skip(f"{REPORT} not in the samples")
    return path


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, report):
    root = tmp_path_factory.mktemp("drawer") / "logs"
    export_run([report], root, RUN)
    export_run([report.parent.parent / TRACE], root, TRACE_RUN)
    export_run([report.parent.parent / CUSTOM], root, CUSTOM_RUN)
    return root


@pytest.fixture(scope="module")
def oracle(ncu_report_module, report):
    """The first launch as ncu_report reads it: (action, {section id: ISection})."""
    action = next(ncu_actions(ncu_report_module, report))
    return action, {s.identifier(): s for s in action.sections()}


def ncu_value(action, name):
    metric = action.metric_by_name(name)
    assert metric is not None, f"the drawer shows {name}, which the report lacks"
    if metric.kind() == metric.ValueKind_STRING:  # a text metric (launch__func_cache_config)
        return metric.as_string()
    return metric.as_double()


def parse_shown(text: str) -> float:
    """'262.5 GB/s' -> 262.5e9, '3,969' -> 3969.0 (the drawer's own formats)."""
    match = SHOWN.match(text.strip())
    assert match, f"cannot read a number from {text!r}"
    return float(match.group(1).replace(",", "")) * SCALE.get(match.group(2).strip(), 1)


def assert_shows(action, metric: str, value_attr, text: str):
    expected = ncu_value(action, metric)
    if isinstance(expected, str):
        assert text.strip() == expected, metric
        return
    assert float(value_attr) == pytest.approx(expected, rel=1e-9, abs=1e-12), metric
    # 4 significant digits or 2 decimals (percentages): the display's own rounding
    assert parse_shown(text) == pytest.approx(expected, rel=1e-3, abs=0.006), f"{metric}: shown {text!r}"


def cells(scope, selector):
    """[(metric, data-value, text)] of the rows/bars under `scope` matching `selector`."""
    return scope.locator(selector).evaluate_all("""els => els.map(e => {
        const v = e.querySelector('[data-value]');
        return [e.dataset.ncuMetric, v.getAttribute('data-value'), v.textContent];
    })""")


@pytest.fixture(scope="module")
def drawer_page(browser, tensorboard):
    """The drawer of launch 0 open (one page for the module's tests)."""
    import browser_support
    gen = browser_support.open_session(browser, tensorboard)
    session = next(gen)
    session.open()
    frame = session.go(f"#view=kernels&run={RUN}")
    wait_rows(frame, "kernels", 1)
    frame.click("table[data-role=kernels] tr[data-launch-id='0']")
    drawer = frame.locator("aside#detail")
    drawer.locator("[data-role=ncu-sections] section[data-section]").first.wait_for()
    yield session, frame, drawer
    try:
        next(gen)
    except StopIteration:
        pass


def test_each_section_of_the_report_is_shown_with_its_values(drawer_page, oracle):
    session, frame, drawer = drawer_page
    action, report_sections = oracle
    shown = drawer.locator("section[data-section]").evaluate_all("els => els.map(e => e.dataset.section)")
    # every top-level section of the report that has metrics of its own, and no other
    with_metrics = {i for i, s in report_sections.items() if len(s.header_metrics()) and not s.parent_identifier()}
    assert set(shown) == with_metrics
    for section_id in shown:
        section = drawer.locator(f"section[data-section='{section_id}']")
        rows = cells(section, "table[data-role=section-rows] tr[data-ncu-metric]")
        labels = dict(section.locator("table[data-role=section-rows] tr[data-ncu-metric]").evaluate_all(
            "els => els.map(e => [e.dataset.ncuMetric, e.cells[0].textContent])"))
        header = {m.name(): m.label() for m in report_sections[section_id].header_metrics()}
        assert set(header) <= {m for m, _, _ in rows}, f"{section_id}: a header metric is not shown"
        for metric, value, text in rows:
            assert_shows(action, metric, value, text)
            if metric in header:  # Nsight Compute's own label
                assert labels[metric] == header[metric], metric


def test_bars_are_ranked_and_the_busiest_named(drawer_page, oracle):
    _, frame, drawer = drawer_page
    action, _ = oracle
    for figure_id in ("breakdown:sm__throughput.avg.pct_of_peak_sustained_elapsed",
                      "breakdown:gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "warp_stalls"):
        fig = drawer.locator(f"[data-figure='{figure_id}']")
        bars = cells(fig, ".ncu-bar-row")
        assert bars, figure_id
        for metric, value, text in bars:
            assert_shows(action, metric, value, text)
        values = [ncu_value(action, m) for m, _, _ in bars]
        assert values == sorted(values, reverse=True), figure_id
        top = fig.locator(".ncu-bar-row").first.locator(".bar-label").inner_text()
        assert fig.locator("[data-role=figure-top]").inner_text() == top
    # the breakdown lists exactly the units ncu_report's breakdown metric names
    listed = action.metric_by_name("breakdown:sm__throughput.avg.pct_of_peak_sustained_elapsed").as_string().split(",")
    present = {n for n in listed if action.metric_by_name(n) is not None}
    shown = {m for m, _, _ in cells(drawer, "[data-figure='breakdown:sm__throughput.avg.pct_of_peak_sustained_elapsed'] .ncu-bar-row")}
    assert shown == present
    # the stall reasons: every per-issue stall ratio of the report
    stalls = {n for n in action.metric_names() if re.fullmatch(r"smsp__average_warps_issue_stalled_\w+_per_issue_active\.ratio", n)
              and "_not_issued" not in n}
    assert {m for m, _, _ in cells(drawer, "[data-figure=warp_stalls] .ncu-bar-row")} == stalls


def test_memory_chart_values(drawer_page, oracle):
    _, frame, drawer = drawer_page
    action, _ = oracle
    chart = drawer.locator("[data-figure=memory_chart]")
    assert chart.locator("svg.memory-chart g[data-box]").count() == 5
    links = cells(chart, "table[data-role=memory-links] td[data-ncu-metric]")
    names = {m for m, _, _ in links}
    for needed in ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "lts__t_sectors_srcunit_tex_op_read.sum",
                   "dram__bytes_read.sum", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"):
        assert needed in names
    for metric, value, text in links + cells(chart, "table[data-role=memory-boxes] tr[data-ncu-metric]"):
        assert_shows(action, metric, value, text)
    SHOTS.mkdir(parents=True, exist_ok=True)
    chart.locator("svg").screenshot(path=str(SHOTS / "drawer-memory-chart.png"))
    chart.locator("table[data-role=memory-links]").screenshot(path=str(SHOTS / "drawer-memory-table.png"))


def test_rule_markup_is_rendered_as_links(drawer_page):
    session, frame, drawer = drawer_page
    text = frame.evaluate("document.body.innerText")
    assert "@url:" not in text and "@section:" not in text
    assert "Raw metrics" in text  # the raw list stays below the sections
    urls = drawer.locator("a.rule-link")
    assert urls.count() > 0
    for i in range(urls.count()):
        link = urls.nth(i)
        assert re.match(r"^https?://", link.get_attribute("href"))
        assert "noopener" in link.get_attribute("rel") and link.get_attribute("target") == "_blank"
    # a section link in a rule message scrolls its section into view
    link = drawer.locator(".rule-msg a.section-link[data-section-link=MemoryWorkloadAnalysis]").first
    link.click()
    frame.wait_for_function("""() => {
        const s = document.querySelector('section[data-section=MemoryWorkloadAnalysis]').getBoundingClientRect();
        const b = document.querySelector('aside#detail .drawer-body').getBoundingClientRect();
        return s.top >= b.top - 2 && s.top < b.top + 40; }""", timeout=10000)
    for section_id in ("MemoryWorkloadAnalysis", "WarpStateStats", "Occupancy"):  # for people to look at
        frame.evaluate(f"document.querySelector('section[data-section={section_id}]').scrollIntoView({{block: 'start'}})")
        session.shot(f"drawer-{section_id}")
    frame.evaluate("document.querySelector('table[data-role=rules]').scrollIntoView({block: 'start'})")
    session.shot("drawer-rules")
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    frame.evaluate("document.querySelector('section[data-section=SpeedOfLight]').scrollIntoView({block: 'start'})")
    session.page.screenshot(path=str(SCREENSHOT))


def test_occupancy_section_has_the_calculator_chart(drawer_page, oracle):
    """The occupancy calculator's chart sits in Nsight Compute's Occupancy section, this launch
    marked at Nsight Compute's theoretical warps per SM."""
    _, frame, drawer = drawer_page
    action, _ = oracle
    section = drawer.locator("section[data-section=Occupancy]")
    marks = section.locator("[data-role=occupancy-slot] svg.occupancy-chart circle.occ-now")
    assert marks.count() == 3  # registers, shared memory, block size
    theoretical = action.metric_by_name("sm__maximum_warps_avg_per_active_cycle").as_double()
    for i in range(3):
        assert float(marks.nth(i).get_attribute("data-warps")) == pytest.approx(theoretical)
    assert drawer.locator("[data-role=occupancy]").count() == 0  # not twice: the section shows the figures


def test_source_counters_list_the_top_instructions(drawer_page, oracle):
    """Source Counters' table: the instructions with most samples, ncu_report's own per-instruction
    sample count (smsp__pcsamp_sample_count), SASS text at each address shown as text."""
    _, frame, drawer = drawer_page
    action, _ = oracle
    metric = action.metric_by_name("smsp__pcsamp_sample_count")
    ids = metric.correlation_ids()
    counts = sorted(((ids.as_uint64(i), metric.as_uint64(i)) for i in range(metric.num_instances()) if metric.as_uint64(i)),
                    key=lambda pair: (-pair[1], pair[0]))[:10]
    table = drawer.locator("section[data-section=SourceCounters] table[data-role=source-hotspots]")
    shown = table.locator("tbody tr").evaluate_all("""rows => rows.map(r => [r.dataset.address,
        r.querySelector('[data-value]').getAttribute('data-value'), r.querySelector('[data-role=sass]').textContent])""")
    assert [(int(a, 16), int(float(v))) for a, v, _ in shown] == counts
    assert [sass for _, _, sass in shown] == [action.sass_by_pc(a).strip() for a, _ in counts]
    # armleth has no line information: no Source column, and the drawer says how to get one
    assert table.locator("[data-role=source]").count() == 0
    assert "-lineinfo" in drawer.locator("[data-figure=source_hotspots]").inner_text()
    frame.evaluate("document.querySelector('[data-figure=sampled_stalls]').scrollIntoView({block: 'start'})")
    drawer_page[0].page.screenshot(path=str(SCREENSHOT.parent / "drawer-source-counters.png"))


def test_stall_values_carry_nsight_computes_units(drawer_page, report):
    """The bars show ncu's own unit ('inst' for the stall ratios; 'warp', 'branches', ... for the
    samples) and each chart says once what its figures measure."""
    _, frame, drawer = drawer_page
    units = fresh_ncu_oracle(report)[0][0]  # the first launch's, read alone (conftest.fresh_ncu_oracle)
    for figure_id, word in (("warp_stalls", "cycles"), ("sampled_stalls", "samples")):
        fig = drawer.locator(f"[data-figure={figure_id}]")
        for metric, _, text in cells(fig, ".ncu-bar-row"):
            unit = units[metric][1]
            assert text.endswith(f" {unit}") if unit else not text[-1].isalpha(), (metric, text)
        note = fig.locator("[data-role=unit-note]").inner_text()
        assert word in note and "Nsight Compute" in note


def test_computed_occupancy_is_marked_in_the_kernels_table(session, logdir, samples_dir, ncu_report_module):
    """A trace's theoretical occupancy and limiter are computed (occupancy_source): the headers and
    each such cell are marked, the cell titled with the launch's occupancy_source; the ncu run's
    measured ones are not."""
    import sqlite3
    from tb_hwprof.logdir import columns, tables
    with sqlite3.connect(f"file:{samples_dir / TRACE}?mode=ro", uri=True) as db:  # the tracer gave no occupancy
        kernel_columns = [r[1] for r in db.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")]
        launches = db.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    assert not any("occupancy" in c.lower() for c in kernel_columns)
    data = columns.data_only(tables.read_json_gz(logdir / TRACE_RUN / "plugins/tb_hwprof/kernels.json.gz"))["data"]
    session.open()
    frame = session.go(f"#view=kernels&run={TRACE_RUN}")
    wait_rows(frame, "kernels", launches)
    for col in ("theoretical_occupancy_pct", "occupancy_limiter"):
        th = frame.locator(f"table[data-role=kernels] thead th[data-col={col}]")
        assert "*" in th.inner_text() and "computed from the launch configuration" in th.get_attribute("title")
        marked = frame.eval_on_selector_all(f"table[data-role=kernels] td[data-col={col}]", """tds => tds.map(td => [
            td.closest('tr').dataset.launchId, td.getAttribute('data-value'),
            td.querySelector('[data-occupancy-source]')?.getAttribute('title')])""")
        assert len(marked) == launches
        for launch, value, title in marked:
            i = data["launch_id"].index(int(launch))
            assert title == data["occupancy_source"][i] == "theoretical (from launch configuration)"
            assert str(value) == str(data[col][i]) or float(value) == pytest.approx(data[col][i])
    note = frame.locator("[data-role=occupancy-source-note]").inner_text()
    assert "every launch" in note and "Nsight Systems" in note and "not measured" in note
    # Nsight Compute measured its own: no mark
    action = next(ncu_actions(ncu_report_module, samples_dir / REPORT))
    assert action.metric_by_name("sm__maximum_warps_per_active_cycle_pct") is not None
    frame = session.go(f"#view=kernels&run={RUN}")
    wait_rows(frame, "kernels", 1)
    assert "*" not in frame.locator("table[data-role=kernels] thead th[data-col=theoretical_occupancy_pct]").inner_text()
    assert frame.locator("[data-occupancy-source]").count() == 0
    assert frame.locator("[data-role=occupancy-source-note]").count() == 0


def test_custom_sections_show_their_titles_labels_and_values(session, samples_dir, ncu_report_module):
    """lashi's own section files, as ncu_report lists them for launch 0: title, header and body
    metrics with Nsight Compute's labels, each value equal to ncu_report's."""
    action = next(ncu_actions(ncu_report_module, samples_dir / CUSTOM))
    known = {"LaunchStats", "Occupancy", "WarpStateStats"}
    listed = [sec for sec in action.sections() if sec.identifier() not in known and not sec.parent_identifier()]
    assert {sec.identifier() for sec in listed} == {"LoadMetrics", "StoreMetrics", "SharedMemAnalysis"}
    session.open()
    frame = session.go(f"#view=kernels&run={CUSTOM_RUN}")
    wait_rows(frame, "kernels")
    frame.click("table[data-role=kernels] tr[data-launch-id='0']")
    drawer = frame.locator("aside#detail")
    drawer.locator("section[data-section=LoadMetrics]").wait_for()
    for sec in listed:
        block = drawer.locator(f"section[data-section={sec.identifier()}]")
        assert block.locator("h4").inner_text() == sec.name()
        assert sec.description() in block.locator("[data-role=section-about]").inner_text()
        for role, metrics in (("section-rows", sec.header_metrics()), ("section-body", sec.body_metrics())):
            expected = [(m.name(), m.label()) for m in metrics if not m.name().startswith("regex:")]
            table = block.locator(f"table[data-role={role}]")
            labels = table.locator("tr[data-ncu-metric]").evaluate_all(
                "els => els.map(e => [e.dataset.ncuMetric, e.cells[0].textContent])")
            assert [tuple(x) for x in labels] == expected, (sec.identifier(), role)
            for metric, value, text in cells(table, "tr[data-ncu-metric]"):
                assert_shows(action, metric, value, text)
    frame.evaluate("document.querySelector('section[data-section=LoadMetrics]').scrollIntoView({block: 'start'})")
    session.shot("drawer-custom-sections")
