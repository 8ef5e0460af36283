"""The Series view and the Roofline's labels and overlay in a real browser (TensorBoard + headless
Chromium, tests/browser_support.py).  Expected values come from NVIDIA's ncu_report."""
import pytest

from browser_support import export_run
from conftest import sample
from test_series import CHAIN, ORACLE, oracle_step
from tb_hwprof import cli

SERIES_RUNS = [f"tuning/{name.rsplit('/', 1)[1][: -len('.ncu-rep')]}" for name in CHAIN]
EXPECTED_RUNS = set(SERIES_RUNS)


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir):
    root = tmp_path_factory.mktemp("compare_views_browser") / "logs"
    files = [str(sample(samples_dir, name)) for name in CHAIN]
    assert cli.main(["export", *files, "--logdir", str(root), "--run", "tuning", "--quiet"]) == 0
    return root


def test_series_draws_a_line_per_metric_with_a_point_per_step(session, samples_dir, ncu_report_module):
    expected = [oracle_step(ncu_report_module, sample(samples_dir, name)) for name in CHAIN]
    session.open()
    frame = session.go(f"#view=series&run={SERIES_RUNS[1]}")
    frame.locator("[data-role=series-charts] svg").first.wait_for()
    charts = frame.locator("[data-role=series-charts] svg[data-metric]")
    assert sorted(charts.nth(i).get_attribute("data-metric") for i in range(charts.count())) == sorted(ORACLE)
    for metric in ORACLE:
        chart = frame.locator(f"svg[data-metric={metric}]")
        assert chart.locator("polyline[data-chain]").count() == 1  # one kernel, renamed twice: one line
        points = chart.locator("circle[data-chain='0']")
        assert [int(points.nth(i).get_attribute("data-step")) for i in range(points.count())] == list(range(len(CHAIN)))
        values = [float(points.nth(i).get_attribute("data-value")) for i in range(points.count())]
        assert values == pytest.approx([e[metric] for e in expected], rel=1e-6), metric
        # The line passes through its points.
        line = chart.locator("polyline").get_attribute("points").split()
        assert [tuple(map(float, p.split(","))) for p in line] == pytest.approx(
            [(float(points.nth(i).get_attribute("cx")), float(points.nth(i).get_attribute("cy"))) for i in range(points.count())])
    row = frame.locator("table[data-role=series-steps] tbody tr[data-chain='0']")
    assert all(name in row.inner_text() for name in ("matrix_addition2D", "matrix_addition1D", "matrix_addition1D_stripped"))
    assert row.locator("td[data-step]").count() == len(CHAIN)
    session.shot("series")
