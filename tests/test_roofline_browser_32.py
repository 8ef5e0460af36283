"""The Roofline's encodings, roof labels and clicks in a real browser (issue 32 item 2), on real runs:

- one encoding per legend: colour says the bound label (kernels and operators alike), shape says the
  operator category, so no colour means two things on one chart;
- every roof label sits on its own roof (its y is its line's y at its x), and roofs whose lines
  coincide (the H200's FP32 = Tensor FP64 and Tensor FP16 = Tensor BF16, the MI300X datasheet's
  FP16 = FP32 = FP64) are one line with one label naming them all;
- a click picks the point under the cursor even where a later-drawn point covers its centre.

Expected values come from GET /roofline (the run's own tables) and the <svg>'s own scale attributes
(data-x-min ... data-plot-bottom, frontend/views/roofline.js), never from the drawn labels.
Fixtures: tests/browser_support.py, tests/conftest.py.
"""
from __future__ import annotations

import math
import subprocess
import sys

import pytest

from browser_support import export_run, get_json
from conftest import decompressed, sample

H200 = "h200"  # the trace + report pair joined per configuration: kernel and operator points
PAIR = "pairs/h200_resnet18_bf16"
SMALL_RUNS = {"mi300x": "rocprof/omniperf_vcopy_mi300x", "mi200": "rocprof/omniperf_vcopy_mi200",
              "lakshya": "ncu/lakshya_gtx1660s_full_2024.1.1.ncu-rep", "armleth": "ncu/armleth_t4_full_2024.2.1.ncu-rep",
              "esmm": "ncu/esmm_a10g_rooflineset_2023.1.1.ncu-rep"}
EXPECTED_RUNS = {H200} | set(SMALL_RUNS)
COINCIDE_PX = 2  # roofs drawn closer than this (SVG units) are one line (as frontend/views/roofline.js draws them)
SCALE = ("x-min", "x-max", "y-min", "y-max", "plot-left", "plot-right", "plot-top", "plot-bottom")


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir):
    root = tmp_path_factory.mktemp("roofline32") / "logs"
    for run, relative in SMALL_RUNS.items():  # (rocprof-compute's output is a folder)
        path = samples_dir / relative
        export_run([path if path.is_dir() else sample(samples_dir, relative)], root, run)
    report = samples_dir / PAIR / "resnet18_step3_first58.ncu-rep.xz"
    if not report.exists():
        pytest.fail(f"the H200 pair is missing at {report}")
    # In a child process: ncu_report keeps ~600 MB of this report after reading it.
    subprocess.run([sys.executable, "-m", "tb_hwprof", "export", str(samples_dir / PAIR / "resnet18_step3.pt.trace.json.gz"),
                    str(decompressed(report, tmp_path_factory)), "--join", "--per-config", "--logdir", str(root),
                    "--run", H200, "--quiet"], check=True)
    return root


def roofline_doc(session, run):
    return get_json(f"{session.base}/data/plugin/tb_hwprof/roofline?run={run}")


def open_placed(session, run):
    """The frame and the svg of `run`'s Roofline once its labels are placed; the svg's scale."""
    session.open()
    frame = session.go(f"#view=roofline&run={run}")
    frame.wait_for_selector("svg[data-role=roofline][data-labels-placed]", timeout=30000)
    svg = frame.locator("svg[data-role=roofline]")
    return frame, svg, {k: float(svg.get_attribute(f"data-{k}")) for k in SCALE}


def scale_of(box):
    """(X, Y, X^-1): value -> SVG units along each log axis, and back for x."""
    def X(v):
        return box["plot-left"] + (math.log10(v) - box["x-min"]) / (box["x-max"] - box["x-min"]) * (box["plot-right"] - box["plot-left"])

    def Y(v):
        return box["plot-bottom"] - (math.log10(v) - box["y-min"]) / (box["y-max"] - box["y-min"]) * (box["plot-bottom"] - box["plot-top"])

    def x_value(x):
        return 10 ** (box["x-min"] + (x - box["plot-left"]) / (box["plot-right"] - box["plot-left"]) * (box["x-max"] - box["x-min"]))
    return X, Y, x_value


def drawable(doc, level="dram"):
    kernels = [p for p in doc["points"] if (p.get(f"ai_{level}") or 0) > 0 and (p.get("flop_per_s") or 0) > 0]
    ops = [p for p in doc["op_points"] if (p.get("intensity") or 0) > 0 and (p.get("flop_per_s") or 0) > 0]
    return kernels, ops


# The point marks in drawing order (later = on top); old and new markup alike (class "point").
MARKS = """svg => [...svg.querySelectorAll('.point')].map((e) => ({
  x: Number(e.dataset.cx ?? e.getAttribute('cx')), y: Number(e.dataset.cy ?? e.getAttribute('cy')),
  r: Number(e.dataset.r ?? e.getAttribute('r')), launch: e.dataset.launchId ?? null, op: e.dataset.op ?? null,
  bound: e.dataset.bound ?? null, category: e.dataset.category ?? null, shape: e.dataset.shape ?? e.tagName,
  fill: getComputedStyle(e).fill}))"""


# -- 1. one encoding per legend -----------------------------------------------------------------
def test_colour_means_the_bound_label_and_shape_the_operator_category(session):
    doc = roofline_doc(session, H200)
    kernels, ops = drawable(doc)
    assert kernels and ops  # the joined pair draws both kinds of point on one chart
    frame, svg, _ = open_placed(session, H200)
    marks = svg.evaluate(MARKS)
    assert len(marks) == len(kernels) + len(ops)
    # One colour per bound label, one bound label per colour, over kernel and operator points together.
    bounds_of_colour, colours_of_bound = {}, {}
    for m in marks:
        bounds_of_colour.setdefault(m["fill"], set()).add(m["bound"] or "unknown")
        colours_of_bound.setdefault(m["bound"] or "unknown", set()).add(m["fill"])
    assert all(len(b) == 1 for b in bounds_of_colour.values()), f"a colour means several bound labels: {bounds_of_colour}"
    assert all(len(c) == 1 for c in colours_of_bound.values()), colours_of_bound
    # One shape per category, distinct between categories and from the kernels' circles.
    shapes = {}
    for m in marks:
        shapes.setdefault(m["category"] or "kernel", set()).add(m["shape"])
    assert all(len(s) == 1 for s in shapes.values()), shapes
    assert len({next(iter(s)) for s in shapes.values()}) == len(shapes), shapes
    assert {m["category"] for m in marks if m["op"]} == {p["category"] for p in ops}
    # The legends say which encoding is which; the category legend's shapes carry no bound colour.
    bound_legend = frame.locator("[data-role=bound-legend]")
    category_legend = frame.locator("[data-role=category-legend]")
    assert "colour" in bound_legend.inner_text().lower() and "shape" in category_legend.inner_text().lower()
    legend_colours = {li.get_attribute("data-bound"): li.locator(".legend-mark").evaluate("e => getComputedStyle(e).fill")
                      for li in bound_legend.locator("li[data-bound]").all()}
    assert {b: {c} for b, c in legend_colours.items()} == colours_of_bound
    shape_fills = category_legend.locator("li .legend-mark").evaluate_all("es => es.map((e) => getComputedStyle(e).fill)")
    assert shape_fills and not set(shape_fills) & set(bounds_of_colour), "a category swatch reuses a bound colour"
    assert sorted(category_legend.locator("li[data-category]").evaluate_all("ls => ls.map((l) => l.dataset.category)")) == sorted(shapes.keys() - {"kernel"})
    session.shot("roofline32-encodings-h200")


# -- 2. roof labels ------------------------------------------------------------------------------
def roof_name(key):
    """'flop_per_s_tensor_bf16' -> 'Tensor BF16'; 'bytes_per_s_l2' -> 'L2' (the precision or level, spelled out)."""
    words = key.split("_per_s_", 1)[1].split("_")
    return " ".join(w.capitalize() if w == "tensor" else w.upper() for w in words)


def expected_groups(doc, Y):
    """{device id: [[roof keys]]}: roofs of one kind whose lines lie within COINCIDE_PX of each other."""
    out = {}
    for device in doc["devices"]:
        for kind in ("flop_per_s_", "bytes_per_s_"):
            roofs = sorted(((k, r["value"]) for k, r in device["roofs"].items() if k.startswith(kind) and r["value"] > 0),
                           key=lambda kv: -kv[1])
            groups = []
            for key, value in roofs:
                near = [g for g in groups if abs(Y(g[0][1]) - Y(value)) < COINCIDE_PX]
                (near[0].append((key, value)) if near else groups.append([(key, value)]))
            out.setdefault(device["id"], []).extend(sorted(k for k, _ in g) for g in groups)
    return out


LABELS = """svg => [...svg.querySelectorAll('text.roof-label')].map((t) => ({
  roof: t.dataset.roof, roofs: (t.dataset.roofs || t.dataset.roof).split(' ').sort(), text: t.textContent,
  x: Number(t.getAttribute('x')), y: Number(t.getAttribute('y')), shown: getComputedStyle(t).display !== 'none',
  rotated: t.hasAttribute('transform'), bottom: t.getBoundingClientRect().bottom, left: t.getBoundingClientRect().left,
  right: t.getBoundingClientRect().right}))"""
LINES = """svg => { const m = svg.getScreenCTM(); return [...svg.querySelectorAll('line.roof')].map((l) => ({
  roofs: (l.dataset.roofs || l.dataset.roof).split(' ').sort(), x1: Number(l.getAttribute('x1')), x2: Number(l.getAttribute('x2')),
  y1: Number(l.getAttribute('y1')), y2: Number(l.getAttribute('y2')), scale: m.d, top: m.f, left: m.e})); }"""


@pytest.mark.parametrize("run", [H200, "mi300x", "mi200", "lakshya", "armleth", "esmm"])
def test_each_roof_label_sits_on_its_own_line_and_coinciding_roofs_share_one(session, run):
    doc = roofline_doc(session, run)
    frame, svg, box = open_placed(session, run)
    X, Y, x_value = scale_of(box)
    groups = expected_groups(doc, Y)
    want = sorted(g for gs in groups.values() for g in gs)
    lines, labels = svg.evaluate(LINES), svg.evaluate(LABELS)
    # One line and one shown label per group of coinciding roofs, the label naming each roof.
    assert sorted(line["roofs"] for line in lines) == want
    assert sorted(label["roofs"] for label in labels if label["shown"]) == want, labels
    value = {k: r["value"] for d in doc["devices"] for k, r in d["roofs"].items()}
    for label in labels:
        assert all(roof_name(k) in label["text"] for k in label["roofs"]), label
        [line] = [line for line in lines if line["roofs"] == label["roofs"]]
        top = max(value[k] for k in label["roofs"])
        if label["roofs"][0].startswith("flop_per_s_"):
            on_line = Y(top)  # a compute roof: flat
            assert line["x1"] - 1 <= label["x"] <= line["x2"] + 1, label
        else:
            on_line = Y(x_value(label["x"]) * top)  # a memory roof: FLOP/s = intensity x bandwidth
        assert label["y"] == pytest.approx(on_line, abs=0.5), f"{label['text']!r} is not on its roof"
        if label["shown"] and not label["rotated"]:
            # Drawn just above its own line: nothing (no other line) between the text and its roof.
            line_y = line["top"] + on_line * line["scale"]
            assert line_y - 8 <= label["bottom"] <= line_y + 1, label
    if run in (H200, "mi300x"):
        assert any(len(g) > 1 for g in want), "this device has coinciding roofs"
        session.shot(f"roofline32-labels-{run}")


# -- 3. clicking a covered point -----------------------------------------------------------------
def covered(marks):
    """Indexes of the marks whose centre lies inside a later-drawn (so higher) mark."""
    return [i for i, a in enumerate(marks)
            if any(math.hypot(a["x"] - b["x"], a["y"] - b["y"]) <= b["r"] for b in marks[i + 1:])]


def click_at(svg, x, y):
    """Click the svg at SVG user units (x, y)."""
    at = svg.evaluate("""(svg, [x, y]) => { const m = svg.getScreenCTM(), r = svg.getBoundingClientRect();
      return [m.a * x + m.e - r.left, m.d * y + m.f - r.top]; }""", [x, y])
    svg.click(position={"x": at[0], "y": at[1]})


def opened_launch(frame, launch):
    """The launch whose drawer the click opened: directly, or by picking `launch` from the list of
    points under the cursor when one shows."""
    picker = frame.locator("[data-role=point-list]")
    frame.wait_for_function("""() => { const list = document.querySelector('[data-role=point-list]'),
      drawer = document.querySelector('aside#detail');
      return (list && !list.hidden) || (drawer && !drawer.hidden && drawer.dataset.launchId); }""", timeout=15000)
    if picker.count() and picker.is_visible():
        item = picker.locator(f"button[data-launch-id='{launch}']")
        assert item.count() == 1, f"the list under the cursor does not offer launch {launch}: {picker.inner_text()}"
        assert picker.locator("button[data-launch-id], button[data-op]").count() >= 2  # a list only for several
        item.click()
        assert picker.is_hidden()
        frame.locator(f"aside#detail[data-launch-id='{launch}']").wait_for(timeout=15000)
    return frame.locator("aside#detail").get_attribute("data-launch-id")


def test_a_click_on_a_covered_point_opens_that_point(session):
    doc = roofline_doc(session, H200)
    names = {str(p["launch_id"]): p["name"] for p in doc["points"]}
    frame, svg, _ = open_placed(session, H200)
    marks = svg.evaluate(MARKS)
    hidden = covered(marks)
    kernels = [m for m in marks if m["launch"] is not None]
    hidden_kernels = [i for i in hidden if marks[i]["launch"] is not None]
    print(f"\n{len(hidden)} of {len(marks)} points had their centre covered by a later-drawn point "
          f"({len(hidden_kernels)} of {len(kernels)} kernel points)")
    assert hidden_kernels, "the H200 pair has covered kernel points"
    # The most deeply buried kernel point: the most later-drawn points over its centre.
    target = max(hidden_kernels, key=lambda i: sum(math.hypot(marks[i]["x"] - b["x"], marks[i]["y"] - b["y"]) <= b["r"]
                                                   for b in marks[i + 1:]))
    mark = marks[target]
    click_at(svg, mark["x"], mark["y"])
    if frame.locator("[data-role=point-list]").is_visible():
        items = frame.locator("[data-role=point-list] button[data-launch-id]")
        shown = {b.get_attribute("data-launch-id"): b.locator(".point-name").inner_text() for b in items.all()}
        assert shown[mark["launch"]] == names[mark["launch"]]  # names as text
        session.shot("roofline32-point-list-h200")
    assert opened_launch(frame, mark["launch"]) == mark["launch"]


def test_a_click_beside_a_small_point_picks_it(session):
    frame, svg, _ = open_placed(session, H200)
    marks = svg.evaluate(MARKS)
    alone = [m for m in marks if m["launch"] is not None and all(
        math.hypot(m["x"] - o["x"], m["y"] - o["y"]) > m["r"] + o["r"] + 12 for o in marks if o is not m)]
    assert alone, "the H200 pair has an isolated kernel point"
    mark = min(alone, key=lambda m: m["r"])
    click_at(svg, mark["x"] + mark["r"] + 2, mark["y"])  # just outside its mark, on the plot's background
    assert opened_launch(frame, mark["launch"]) == mark["launch"]
