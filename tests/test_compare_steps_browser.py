"""The Compare view across runs that differ (issue 32 items 3 and 4) in a real browser (TensorBoard +
headless Chromium, tests/browser_support.py): per-step totals and the warnings above them, the
suggested pairs under the kernel table, the speed-up among the first columns, and a pair detail whose
ncu values of thousands of characters stay within the view.

Expected figures come from the runs' own tables (tb_hwprof.load_run / load_analysis) and the
plugin's JSON, never from the page."""
from urllib.parse import urlencode

import pytest

import tb_hwprof
from browser_support import export_run
from conftest import get_json, sample

R50 = "torch/h200_resnet50_bf16_handler_stack.pt.trace.json.gz"
R18 = "pairs/h200_resnet18_bf16/resnet18_step3.pt.trace.json.gz"
LAKSHYA = "ncu/lakshya_gtx1660s_full_2024.1.1.ncu-rep"  # full set: group:memory__first_level_cache_table
RUNS = {"r50": R50, "r18": R18, "lakshya": LAKSHYA, "lakshya_again": LAKSHYA}
EXPECTED_RUNS = set(RUNS)
WIDTH = 1440  # the screen width
LONG_METRIC = "group:memory__first_level_cache_table"


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir):
    root = tmp_path_factory.mktemp("compare_steps_browser") / "logs"
    for run, relative in RUNS.items():
        export_run([sample(samples_dir, relative)], root, run)
    return root


def steps_and_time(run_dir):
    table = tb_hwprof.load_analysis(run_dir).summaries["step_time_breakdown"]
    return int((table["step"] >= 0).sum()), float(tb_hwprof.load_run(run_dir).kernels["duration_ns"].sum())


def open_compare(session, base, run):
    session.page.set_viewport_size({"width": WIDTH, "height": 900})
    session.open()
    frame = session.go(f"#view=compare&base={base}&run={run}")
    frame.locator("[data-role=totals]").wait_for()
    return frame


def test_per_step_totals_under_a_warning_banner(session, logdir):
    b_steps, b_total = steps_and_time(logdir / "r50")
    r_steps, r_total = steps_and_time(logdir / "r18")
    frame = open_compare(session, "r50", "r18")
    basis = frame.locator("[data-role=basis]")
    assert basis.inner_text().strip() == (f"Compared per step: baseline {b_steps} steps, run {r_steps} step "
                                          f"(each run's kernel time and calls divided by its steps)")
    assert float(frame.locator("[data-role=base_ns]").get_attribute("data-value")) == pytest.approx(b_total / b_steps)
    assert float(frame.locator("[data-role=run_ns]").get_attribute("data-value")) == pytest.approx(r_total / r_steps)
    speedup = frame.locator("[data-role=speedup]")
    assert float(speedup.get_attribute("data-value")) == pytest.approx((b_total / b_steps) / (r_total / r_steps))
    # The banner: both warnings, styled as warnings (a coloured box), above the totals; no green speed-up.
    banner = frame.locator("[data-role=warnings]")
    assert "(baseline 3 steps, run 1 step)" in banner.locator("[data-id=different-steps]").inner_text()
    assert banner.locator("[data-id=different-programs]").count() == 1
    for warning in ("different-steps", "different-programs"):
        background = banner.locator(f"[data-id={warning}]").evaluate("e => getComputedStyle(e).backgroundColor")
        assert background not in ("rgba(0, 0, 0, 0)", "rgb(255, 255, 255)"), warning
    stat = frame.locator(".stat.speedup")
    assert "faster" not in stat.get_attribute("class")
    assert stat.evaluate("e => getComputedStyle(e.querySelector('.stat-value')).color") != "rgb(43, 138, 62)"  # --good
    # Calls per step in the kernel table.
    doc = get_json(f"{session.base}/data/plugin/tb_hwprof/compare?base=r50&run=r18")
    first = doc["matched"][0]
    cell = frame.locator(f"table[data-role=matched] tbody tr[data-key='{first['key']}'] td[data-col=launches]").first
    assert float(cell.get_attribute("data-base")) == pytest.approx(first["base_launches"])
    session.shot("compare-per-step-warnings")


def test_suggested_pairs_are_listed_and_pair_on_a_click(session):
    doc = get_json(f"{session.base}/data/plugin/tb_hwprof/compare?base=r50&run=r18")
    suggested = doc["suggested_pairs"]
    assert suggested, "the runs have leftovers of one launch configuration"
    frame = open_compare(session, "r50", "r18")
    section = frame.locator("[data-role=suggested-pairs]")
    section.wait_for()
    assert "same launch configuration, different names: not paired" in section.inner_text().lower()
    rows = section.locator("tbody tr")
    assert rows.count() == len(suggested)
    first = suggested[0]
    assert f"--pair '{first['base_key']}:{first['run_key']}'" in rows.first.locator("[data-role=pair-command]").inner_text()
    assert first["launch_config"] in rows.first.inner_text()
    section.scroll_into_view_if_needed()
    session.shot("compare-suggested-pairs")
    rows.first.locator("button[data-role=suggested-pair-add]").click()
    row = frame.locator(f"table[data-role=matched] tbody tr[data-key='{first['base_key']}']")
    row.wait_for()
    assert row.locator("td[data-col=paired_by]").inner_text().strip() == "user"
    assert row.get_attribute("data-run-key") == first["run_key"]


def test_speedup_is_among_the_first_columns_and_on_screen(session):
    frame = open_compare(session, "r50", "r18")
    table = frame.locator("table[data-role=matched]")
    table.wait_for()
    headers = [t.strip() for t in table.locator("thead th").all_inner_texts()]
    assert headers.index("Speedup") <= 1, headers
    box = table.locator("tbody tr").first.locator("td[data-col=speedup]").bounding_box()
    assert box and box["x"] + box["width"] <= WIDTH


def test_pair_detail_of_long_ncu_values_stays_within_the_view(session):
    """lakshya's full-set report against itself: `group:memory__first_level_cache_table` holds a list of
    thousands of characters; shown cut, whole in its tooltip, the table no wider than the view."""
    frame = open_compare(session, "lakshya", "lakshya_again")
    frame.locator("table[data-role=matched] tbody tr").first.click()
    row = frame.locator(f"table[data-role=pair-metrics] tr[data-metric='{LONG_METRIC}']")
    row.wait_for()
    doc = get_json(f"{session.base}/data/plugin/tb_hwprof/compare?base=lakshya&run=lakshya_again")
    m = doc["matched"][0]
    query = urlencode({"base": "lakshya", "run": "lakshya_again", "base_key": m["key"], "run_key": m["run_key"]})
    detail = get_json(f"{session.base}/data/plugin/tb_hwprof/compare_pair?{query}")
    [expected] = [r for r in detail["rows"] if r["name"] == LONG_METRIC]
    assert len(expected["base"]) > 1000
    cells = row.locator("td.str")
    assert cells.count() == 2
    for i, value in enumerate((expected["base"], expected["run"])):
        assert cells.nth(i).get_attribute("title") == value
        assert len(cells.nth(i).inner_text().strip()) <= 121
    sizes = frame.evaluate("""() => ({table: document.querySelector('table[data-role=pair-metrics]').scrollWidth,
        page: document.documentElement.scrollWidth, view: window.innerWidth})""")
    assert sizes["table"] <= sizes["view"] and sizes["page"] <= sizes["view"], sizes
    row.scroll_into_view_if_needed()
    session.shot("compare-pair-long-values")
