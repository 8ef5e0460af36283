"""The Compare view's pair detail and pairing by hand in a real browser (TensorBoard + headless
Chromium, tests/browser_support.py).  Expected values come from NVIDIA's ncu_report."""
import pytest

from browser_support import export_run
from conftest import sample
from support_compare import V1, V2, V8, ncu_launches, tracelens_ops

EXPECTED_RUNS = {"v1", "v2", "v8", "lakshya", "raytracer", "h100", "mi300x"}
BERT = {"h100": "torch/tracelens_h100_bert_small.json.gz", "mi300x": "torch/tracelens_mi300x_bert_small.json.gz"}
RAYTRACER = "ncu/raytracer_gtx1660s_2021.1.0.ncu-rep"  # build_meshes, build_lights, trace


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir, ncu_report_module):
    root = tmp_path_factory.mktemp("compare_browser") / "logs"
    for run, relative in (("v1", V1), ("v2", V2), ("v8", V8), ("lakshya", "ncu/lakshya_gtx1660s_full_2024.1.1.ncu-rep"),
                          ("raytracer", RAYTRACER)):
        export_run([sample(samples_dir, relative)], root, run)
    for run, relative in BERT.items():
        export_run([sample(samples_dir, relative)], root, run)
    return root


def test_a_pair_in_detail_with_a_filter(session, samples_dir, ncu_report_module):
    [(_, _, b_raw)] = ncu_launches(ncu_report_module, samples_dir / V1)
    [(_, _, r_raw)] = ncu_launches(ncu_report_module, samples_dir / V2)
    session.open()
    frame = session.go("#view=compare&base=v1&run=v2")
    frame.locator("table[data-role=matched] tbody tr").first.click()
    rows = frame.locator("table[data-role=pair-metrics] tbody tr")
    rows.first.wait_for()
    frame.fill("[data-role=pair-filter]", "dram__bytes_read.sum")
    frame.wait_for_function("() => document.querySelector('[data-role=pair-count]').textContent.includes(' of ')")
    row = frame.locator("table[data-role=pair-metrics] tr[data-metric='dram__bytes_read.sum']")
    cells = row.locator("td.numeric")
    assert float(cells.nth(0).get_attribute("data-value")) == pytest.approx(b_raw["dram__bytes_read.sum"])
    assert float(cells.nth(1).get_attribute("data-value")) == pytest.approx(r_raw["dram__bytes_read.sum"])
    assert all(rows.nth(i).is_hidden() or "dram__bytes_read.sum" in rows.nth(i).get_attribute("data-metric")
               for i in range(rows.count()))
    assert frame.locator("[data-role=pair-roofline] circle").count() == 2
    # Under the roofs of the T4 both ran on (one set: the same GPU model), the DRAM roof rising to the compute roof.
    assert frame.locator("[data-role=pair-roofline] g.pair-roofs").count() == 1
    assert frame.locator("[data-role=pair-roofline] g.pair-roofs line").count() == 2
    session.shot("compare-pair-detail")


def test_pairing_by_hand(session, samples_dir, ncu_report_module):
    """naive_gemm (lakshya) against three raytracer kernels: nothing pairs by itself; the picker pairs
    naive_gemm with `build_lights`, and the pair says it was the user's."""
    lights_ns = sum(ns for name, ns, _ in ncu_launches(ncu_report_module, samples_dir / RAYTRACER) if name == "build_lights")
    session.open()
    frame = session.go("#view=compare&base=lakshya&run=raytracer")
    frame.locator("[data-role=pair-picker]").wait_for()
    assert frame.locator("table[data-role=matched]").count() == 0
    frame.select_option("[data-role=pair-run]", label="build_lights")
    frame.click("[data-role=pair-add]")
    row = frame.locator("table[data-role=matched] tbody tr")
    row.first.wait_for()
    assert row.count() == 1 and row.locator("td[data-col=paired_by]").inner_text().strip() == "user"
    assert float(row.locator("td[data-col=run_ns]").get_attribute("data-value")) == pytest.approx(lights_ns)
    assert "build_lights" in row.locator("td").first.inner_text()
    session.shot("compare-paired-by-hand")

    # Swapped at once (the pair made since the view was drawn), and swapped back.
    frame.click("button[title='swap baseline and run']")
    frame.wait_for_function("() => document.querySelector('[data-role=base-picker]').value === 'raytracer'")
    frame.locator("table[data-role=matched] tbody tr td[data-col=paired_by]").first.wait_for()
    frame.click("button[title='swap baseline and run']")
    frame.wait_for_function("() => document.querySelector('[data-role=base-picker]').value === 'lakshya'")

    # The pair is in the state: a reload of the page (TensorBoard re-creates the iframe) keeps it.
    session.page.reload()
    frame = session.frame()
    row = frame.locator("table[data-role=matched] tbody tr")
    row.first.wait_for()
    assert row.count() == 1 and row.locator("td[data-col=paired_by]").inner_text().strip() == "user"
    assert float(row.locator("td[data-col=run_ns]").get_attribute("data-value")) == pytest.approx(lights_ns)

    # Swapping baseline and run keeps the pair, turned round; forgetting it leaves nothing paired.
    frame.click("button[title='swap baseline and run']")
    frame.wait_for_function("() => document.querySelector('[data-role=base-picker]').value === 'raytracer'")
    row = frame.locator("table[data-role=matched] tbody tr")
    row.first.wait_for()
    assert float(row.locator("td[data-col=base_ns]").get_attribute("data-value")) == pytest.approx(lights_ns)
    frame.click("[data-role=pair-clear]")
    frame.wait_for_function("() => !document.querySelector('table[data-role=matched]') && !!document.querySelector('[data-role=pair-picker]')")
    assert "pairs=" not in frame.evaluate("() => location.hash")


def test_operators_paired_across_vendors(session, samples_dir):
    """BERT on an H100 and an MI300X: no kernel pairs (the warning says why), operators paired by
    shape with TraceLens's own per-op times on each side."""
    base = tracelens_ops(samples_dir, "tracelens_h100_bert_small")
    run = tracelens_ops(samples_dir, "tracelens_mi300x_bert_small")
    session.open()
    frame = session.go("#view=compare&base=h100&run=mi300x")
    rows = frame.locator("table[data-role=operators] tbody tr")
    rows.first.wait_for()
    assert frame.locator("table[data-role=matched]").count() == 0
    assert frame.get_by_text("Kernels are not paired across vendors (see the warning)").count() == 1
    assert "not paired across vendors" in frame.locator("[data-role=warnings] [data-id=different-vendors]").inner_text()
    checked = 0
    for i in range(rows.count()):
        cells = rows.nth(i).locator("td")
        key = (cells.nth(0).inner_text(), cells.nth(1).inner_text(), cells.nth(2).inner_text())
        if key in base and key in run:
            assert float(cells.nth(4).get_attribute("data-value")) == pytest.approx(base[key], rel=1e-4, abs=2.0)
            assert float(cells.nth(5).get_attribute("data-value")) == pytest.approx(run[key], rel=1e-4, abs=2.0)
            checked += 1
    assert checked >= len(set(base) & set(run)) - 1
    session.shot("compare-operators-across-vendors")
