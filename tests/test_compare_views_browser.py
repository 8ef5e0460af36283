"""The Series view and the Roofline's labels and overlay in a real browser (TensorBoard + headless
Chromium, tests/browser_support.py).  Expected values come from NVIDIA's ncu_report."""
import pytest

from browser_support import export_run, get_json, log_pos
from conftest import sample
from support_series import CHAIN, ORACLE, oracle_step
from tb_hwprof.app import cli

SERIES_RUNS = [f"tuning/{name.rsplit('/', 1)[1][: -len('.ncu-rep')]}" for name in CHAIN]
# ncu runs: a roofline set (FP16/FP32/FP64/Tensor roofs), a full set (the overlay); rocprof-compute
# (measured DRAM, L2, L1 roofs); a PyTorch trace (datasheet roofs, operator points).
ROOFLINE_RUNS = {"esmm": "ncu/esmm_a10g_rooflineset_2023.1.1.ncu-rep", "lakshya": "ncu/lakshya_gtx1660s_full_2024.1.1.ncu-rep",
                 "bmm1": "rocprof/rocprof-compute_bmm1_mi300x", "bert": "torch/tracelens_h100_bert_small.json.gz"}
EXPECTED_RUNS = set(SERIES_RUNS) | set(ROOFLINE_RUNS)


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir):
    root = tmp_path_factory.mktemp("compare_views_browser") / "logs"
    files = [str(sample(samples_dir, name)) for name in CHAIN]
    assert cli.main(["export", *files, "--logdir", str(root), "--run", "tuning", "--quiet"]) == 0
    for run, relative in ROOFLINE_RUNS.items():  # (rocprof-compute's output is a folder)
        export_run([samples_dir / relative if (samples_dir / relative).is_dir() else sample(samples_dir, relative)], root, run)
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
        assert [float(c) for p in line for c in p.split(",")] == pytest.approx(  # flat: pytest 9.2 takes no tuples
            [float(points.nth(i).get_attribute(axis)) for i in range(points.count()) for axis in ("cx", "cy")])
    row = frame.locator("table[data-role=series-steps] tbody tr[data-chain='0']")
    assert all(name in row.inner_text() for name in ("matrix_addition2D", "matrix_addition1D", "matrix_addition1D_stripped"))
    assert row.locator("td[data-step]").count() == len(CHAIN)
    session.shot("series")


# -- Roofline: labels that do not overlap, the overlay of a second run -----------------------------
BOXES = """svg => {
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const shown = (e) => getComputedStyle(e).display !== "none";
  return {
    labels: [...svg.querySelectorAll("text.roof-label")].map((e) => ({roof: e.dataset.roof, shown: shown(e), box: box(e)})),
    ticks: [...svg.querySelectorAll("text.tick")].map(box),
    titles: [...svg.querySelectorAll("text.axis-label")].map(box),
    points: [...svg.querySelectorAll("[data-role=point]")].map(box),
    roofs: [...svg.querySelectorAll("line.roof")].map((l) => l.dataset.roof),
  };
}"""


def intersect(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def roofline_boxes(session, run, overlay=None):
    session.open()
    frame = session.go(f"#view=roofline&run={run}" + (f"&overlay={overlay}" if overlay else ""))
    frame.wait_for_selector("svg[data-role=roofline][data-labels-placed]")
    return frame, frame.locator("svg[data-role=roofline]").evaluate(BOXES)


@pytest.mark.parametrize("run, roofs", [
    ("esmm", {"flop_per_s_fp16", "flop_per_s_fp32", "flop_per_s_fp64", "flop_per_s_tensor", "bytes_per_s_dram"}),
    ("bmm1", {"bytes_per_s_dram", "bytes_per_s_l2", "bytes_per_s_l1", "flop_per_s_fp32", "flop_per_s_fp64"}),
    ("bert", {"flop_per_s_fp32", "flop_per_s_fp64", "flop_per_s_tensor"}),  # H100 datasheet roofs
])
def test_roofline_labels_do_not_overlap(session, run, roofs):
    frame, found = roofline_boxes(session, run)
    assert roofs <= set(found["roofs"])
    labels = found["labels"]
    # Every roof keeps its label.
    assert sorted(label["roof"] for label in labels if label["shown"]) == sorted(found["roofs"]), labels
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            assert not intersect(a["box"], b["box"]), (a, b)
    for title in found["titles"]:
        assert not any(intersect(title, tick) for tick in found["ticks"]), title
    # The plot takes the page's width (the viewport is 1500 px).
    assert frame.locator("svg[data-role=roofline]").bounding_box()["width"] > 1200
    session.shot(f"roofline-labels-{run}")


def test_roofline_overlay_of_a_second_run(session):
    base = get_json(f"{session.base}/data/plugin/tb_hwprof/roofline?run=lakshya")
    other = get_json(f"{session.base}/data/plugin/tb_hwprof/roofline?run=esmm")
    frame, found = roofline_boxes(session, "lakshya", overlay="esmm")
    svg = frame.locator("svg[data-role=roofline]")
    box = {k: float(svg.get_attribute(f"data-{k}")) for k in
           ("x-min", "x-max", "y-min", "y-max", "plot-left", "plot-right", "plot-top", "plot-bottom")}
    level = svg.get_attribute("data-level")
    want = [p for p in other["points"] if (p.get(f"ai_{level}") or 0) > 0 and (p.get("flop_per_s") or 0) > 0]
    rings = frame.locator("circle.overlay-point")
    assert want and rings.count() == len(want)
    assert frame.locator("circle.point[data-launch-id]").count() == len(
        [p for p in base["points"] if (p.get(f"ai_{level}") or 0) > 0 and (p.get("flop_per_s") or 0) > 0])
    by_launch = {str(p["launch_id"]): p for p in want}
    for i in range(rings.count()):
        ring = rings.nth(i)
        p = by_launch[ring.get_attribute("data-overlay-launch")]
        assert float(ring.get_attribute("cx")) == pytest.approx(
            log_pos(p[f"ai_{level}"], box["x-min"], box["x-max"], box["plot-left"], box["plot-right"]), abs=0.01)
        assert float(ring.get_attribute("cy")) == pytest.approx(
            log_pos(p["flop_per_s"], box["y-min"], box["y-max"], box["plot-bottom"], box["plot-top"]), abs=0.01)
    assert frame.locator("[data-role=overlay-picker]").input_value() == "esmm"
    session.shot("roofline-overlay")
