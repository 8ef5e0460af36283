"""The plugin's PyTorch views in a real browser: Operators (GPU time per operator, its shapes and
kernels, the kernel drawer), Steps (stacked bars per ProfilerStep), the op-level Roofline, and
Overview / Timeline / Compare on PyTorch runs.

Same machinery as tests/test_browser.py (conftest's tensorboard / browser / session fixtures): real
samples exported into a temporary logdir, a real TensorBoard, headless Chromium.  Expected values
come from elsewhere than our export: TraceLens's own reports of the same traces
(samples/torch/tracelens_reference) and the trace JSON read with the json module here.
Screenshots go to test-artifacts/screenshots/.
"""
from __future__ import annotations

import collections
import csv
import gzip
import json
import urllib.error
from pathlib import Path

import pytest

from browser_support import export_run, log_pos, nav_of_run, wait_rows, wait_window
from conftest import get_json, sample

BERT = "torch/tracelens_h100_bert_small.json.gz"
RESNET = "torch/hta_v100_resnet_rank0.json.gz"  # 5 ProfilerStep ranges, V100
RN50_LOADER_BOUND = "torch/kineto_rn50_v100_jun2021.json.gz"  # torch-tb-profiler's sample: DataLoader-bound steps
BERT_REFERENCE = "torch/tracelens_reference/tracelens_h100_bert_small"
XSS_OP = "aten::gelu<img src=x onerror=alert(1)>&</script>"
EXPECTED_RUNS = {"bert", "resnet", "bert_old", "bert_xss", "rn50"}

OP_CATEGORIES = {"cpu_op", "operator"}
RUNTIME_CATEGORIES = {"cuda_runtime", "cuda_driver", "runtime"}
GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
# The tables other exports may not have (runs exported before tb-hwprof wrote them).
NEWER_TABLES = ("summary_op_shapes", "summary_step_time_breakdown")


# -- the trace, read with the json module (independent of tb_hwprof's reader) -------------------
def load_trace(path: Path) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def complete_events(trace: dict):
    return [e for e in trace["traceEvents"] if e.get("ph") == "X"]


def category(event) -> str:
    return str(event.get("cat", "")).lower()


def innermost_enclosing(ops, start, end):
    """The latest-starting op (shortest on a tie) whose span holds [start, end]; None if none."""
    inside = [o for o in ops if o["ts"] <= start and end <= o["ts"] + o["dur"]]
    return max(inside, key=lambda o: (o["ts"], -o["dur"]), default=None)


def direct_gpu_time(trace: dict):
    """{op name: (µs, GPU activities)}: kernels, copies and sets launched (by correlation id) by
    runtime calls whose innermost enclosing operator on their thread has that name."""
    events = complete_events(trace)
    gpu = collections.defaultdict(lambda: [0.0, 0])
    for e in events:
        if category(e) in GPU_CATEGORIES:
            gpu[e["args"]["correlation"]][0] += e["dur"]
            gpu[e["args"]["correlation"]][1] += 1
    ops_of_thread = collections.defaultdict(list)
    for e in events:
        if category(e) in OP_CATEGORIES:
            ops_of_thread[(e["pid"], e["tid"])].append(e)
    per_op = collections.defaultdict(lambda: [0.0, 0])
    for e in events:
        correlation = (e.get("args") or {}).get("correlation")
        if category(e) not in RUNTIME_CATEGORIES or correlation not in gpu:
            continue
        op = innermost_enclosing(ops_of_thread[(e["pid"], e["tid"])], e["ts"], e["ts"] + e["dur"])
        if op is not None:
            per_op[op["name"]][0] += gpu[correlation][0]
            per_op[op["name"]][1] += gpu[correlation][1]
    return {name: tuple(v) for name, v in per_op.items()}


def profiler_steps(trace: dict) -> list:
    return sorted(int(e["name"].split("#")[1]) for e in complete_events(trace)
                  if category(e) == "user_annotation" and e["name"].startswith("ProfilerStep#"))


def reference_rows(samples_dir: Path, name: str) -> list:
    with open(sample(samples_dir, f"{BERT_REFERENCE}/{name}"), newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


# -- the logdir -----------------------------------------------------------------------------
def strip_newer_tables(run_dir: Path) -> None:
    """The run as an export made before op_shapes / step_time_breakdown existed."""
    assets = run_dir / "plugins" / "tb_hwprof"
    manifest = json.loads((assets / "profile.json").read_text())
    for key in NEWER_TABLES:
        name = manifest["files"].pop(key, None)
        if name:
            (assets / name).unlink()
            manifest.get("inflated_bytes", {}).pop(name, None)
    (assets / "profile.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))


def renamed_op_copy(source: Path, target: Path, old: str, new: str) -> None:
    trace = load_trace(source)
    for e in trace["traceEvents"]:
        if e.get("name") == old:
            e["name"] = new
    with gzip.open(target, "wt") as f:
        json.dump(trace, f)


@pytest.fixture(scope="module")
def sources(samples_dir, tmp_path_factory):
    bert, resnet = sample(samples_dir, BERT), sample(samples_dir, RESNET)
    xss = tmp_path_factory.mktemp("torch-sources") / "bert_xss.json.gz"
    renamed_op_copy(bert, xss, "aten::gelu", XSS_OP)
    return {"bert": bert, "resnet": resnet, "bert_old": bert, "bert_xss": xss, "rn50": sample(samples_dir, RN50_LOADER_BOUND)}


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, sources):
    root = tmp_path_factory.mktemp("browser_torch") / "logs"
    for run, path in sources.items():
        export_run([path], root, run)
    strip_newer_tables(root / "bert_old")
    return root


@pytest.fixture(scope="module")
def traces(sources):
    return {run: load_trace(path) for run, path in sources.items() if run in ("bert", "resnet")}


def manifest_of(logdir: Path, run: str) -> dict:
    return json.loads((logdir / run / "plugins" / "tb_hwprof" / "profile.json").read_text())


def needs_table(logdir: Path, run: str, table: str) -> None:
    if f"summary_{table}" not in manifest_of(logdir, run)["files"]:
        pytest.skip(f"this tree's export writes no {table} table yet")


@pytest.fixture
def console_errors(session):
    """Messages the page logged as errors (any frame), checked empty by each test that takes it."""
    errors = []
    session.page.on("console", lambda m: errors.append(f"{m.location.get('url', '')}: {m.text}") if m.type == "error" else None)
    yield errors
    assert not errors, f"console errors: {errors}"


# -- helpers over the page --------------------------------------------------------------------
def open_view(session, view: str, run: str, extra: str = ""):
    session.open()
    return session.go(f"#view={view}&run={run}{extra}")


def table_rows(frame, role: str, key: str) -> dict:
    """{row's data-<key>: {column: data-value}} of the table's shown page."""
    frame.locator(f"table[data-role={role}] tbody tr[data-row-id]").first.wait_for()
    return frame.eval_on_selector_all(f"table[data-role={role}] tbody tr[data-row-id]", """(rows, key) =>
        Object.fromEntries(rows.map(r => [r.getAttribute('data-' + key), Object.fromEntries(
            [...r.querySelectorAll('td[data-col]')].map(td => [td.dataset.col, td.getAttribute('data-value')]))]))""", key)


def num(value) -> float:
    return float(value) if value is not None else float("nan")


# -- Operators --------------------------------------------------------------------------------
def test_operators_equal_tracelens_ops_summary(session, samples_dir, console_errors):
    """Every operator TraceLens lists for the trace, with its direct kernel time and its count of
    launching calls; no other operator has GPU time of its own."""
    frame = open_view(session, "operators", "bert")
    shown = table_rows(frame, "operators", "op")
    reference = reference_rows(samples_dir, "ops_summary.csv")
    for row in reference:
        cells = shown[row["name"]]
        # TraceLens sums float32 microseconds: within 1 ns per call.
        assert num(cells["direct_gpu_ns"]) == pytest.approx(float(row["total_direct_kernel_time_sum"]) * 1e3, abs=int(row["Count"]))
        assert int(cells["calls"]) == int(row["Count"])
    with_gpu_time = {op for op, cells in shown.items() if num(cells["direct_gpu_ns"]) > 0}
    assert with_gpu_time == {row["name"] for row in reference}
    # The table opens sorted by GPU time: TraceLens's first row first.
    first = frame.locator("table[data-role=operators] tbody tr[data-row-id]").first
    assert first.get_attribute("data-op") == reference[0]["name"]
    session.shot("torch-operators-bert")


def test_operator_opens_its_kernels_and_a_kernel_opens_the_drawer(session, samples_dir, console_errors):
    """aten::addmm's kernels grouped by name equal TraceLens's kernel_summary rows of that op; a
    kernel row opens the drawer on that kernel's longest launch under the op."""
    top = "aten::addmm"
    frame = open_view(session, "operators", "bert")
    frame.locator(f"table[data-role=operators] tr[data-op='{top}']").click()
    assert frame.locator("[data-role=op-detail] [data-role=op-name]").inner_text() == top
    shown = table_rows(frame, "op-kernels", "name")
    reference = {r["Kernel name"]: r for r in reference_rows(samples_dir, "kernel_summary.csv") if r["Parent cpu_op"] == top}
    assert set(shown) == set(reference)
    for name, cells in shown.items():
        assert int(cells["count"]) == int(reference[name]["Kernel duration (µs)_count"])
        assert num(cells["total_ns"]) == pytest.approx(float(reference[name]["Kernel duration (µs)_sum"]) * 1e3, rel=1e-6)
    longest = max(reference.values(), key=lambda r: float(r["Kernel duration (µs)_sum"]))
    row = frame.locator("table[data-role=op-kernels] tbody tr[data-row-id]").first  # most time first
    assert row.get_attribute("data-name") == longest["Kernel name"]
    row.click()
    drawer = frame.locator("#detail")
    drawer.locator("[data-role=detail-name]").wait_for()
    assert drawer.get_attribute("data-launch-id") == row.get_attribute("data-launch-id")
    assert drawer.locator("[data-role=detail-name]").inner_text() == longest["Kernel name"]
    duration = drawer.locator("tr[data-col=duration_ns] td[data-value]").get_attribute("data-value")
    assert num(duration) == pytest.approx(float(longest["Kernel duration (µs)_max"]) * 1e3, rel=1e-6)
    assert frame.locator("table[data-role=op-kernels] tr.selected").get_attribute("data-name") == longest["Kernel name"]
    session.shot("torch-operator-kernels-drawer")


def test_operators_equal_the_trace_json(session, traces, console_errors):
    """ResNet-50 on a V100 (HTA's sample): GPU time and GPU activities per operator as computed here
    from the trace's JSON (runtime calls inside the op, their GPU work by correlation id)."""
    expected = direct_gpu_time(traces["resnet"])
    frame = open_view(session, "operators", "resnet")
    shown = table_rows(frame, "operators", "op")  # the first page: the 20 operators with most GPU time
    ranked = sorted(expected, key=lambda op: -expected[op][0])
    assert list(shown)[:5] == ranked[:5]
    for op, cells in shown.items():
        us, activities = expected.get(op, (0.0, 0))
        assert num(cells["direct_gpu_ns"]) == pytest.approx(us * 1e3, rel=1e-6, abs=activities + 1)
        assert int(cells["kernels"]) == activities


def test_operator_shapes_match_tracelens_gemm(session, samples_dir, logdir, console_errors):
    """aten::addmm's shapes: one row per shape TraceLens's GEMM report lists, with its calls, kernel
    time and FLOPs per call."""
    needs_table(logdir, "bert", "op_shapes")
    frame = open_view(session, "operators", "bert", "&op=aten::addmm")
    frame.locator("table[data-role=op-shapes] tbody tr[data-row-id]").first.wait_for()
    cells = frame.eval_on_selector_all("table[data-role=op-shapes] tbody tr[data-row-id]", """rows => rows.map(r =>
        Object.fromEntries([...r.querySelectorAll('td[data-col]')].map(td => [td.dataset.col, td.getAttribute('data-value')])))""")
    shown = sorted((int(c["calls"]), round(num(c["gpu_ns"])), num(c["flops_per_call"])) for c in cells)
    gemm = [r for r in reference_rows(samples_dir, "GEMM.csv") if r["name"] == "aten::addmm"]
    expected = sorted((int(r["name_count"]), round(float(r["Kernel Time (µs)_sum"]) * 1e3), float(r["GFLOPS_first"]) * 1e9)
                      for r in gemm)
    assert [s[0] for s in shown] == [e[0] for e in expected]
    assert [s[1] for s in shown] == pytest.approx([e[1] for e in expected], abs=1)
    assert [s[2] for s in shown] == pytest.approx([e[2] for e in expected], rel=1e-9)
    assert frame.locator("table[data-role=operators] th[data-col=flop_per_s]").count() == 1
    session.shot("torch-operator-shapes")


def test_run_exported_before_op_shapes_and_steps(session, tensorboard, console_errors):
    """Without op_shapes the Operators view lists the operators and says how to get FLOPs; without
    step_time_breakdown the nav offers no Steps and the route answers 404 with the reason."""
    session.open()
    offered = [name for name, _ in nav_of_run(session, "bert_old")]
    assert "operators" in offered and "steps" not in offered
    frame = session.go("#view=operators&run=bert_old")
    frame.locator("[data-role=no-shapes]").wait_for()
    assert "re-export" in frame.locator("[data-role=no-shapes]").inner_text()
    assert frame.locator("table[data-role=operators] th[data-col=flops]").count() == 0
    assert frame.locator("table[data-role=operators] tr[data-op='aten::addmm']").count() == 1
    with pytest.raises(urllib.error.HTTPError) as answer:
        get_json(f"{tensorboard}/data/plugin/tb_hwprof/steps?run=bert_old")
    assert answer.value.code == 404 and "no step time breakdown" in json.loads(answer.value.read())["error"]


def test_a_link_to_an_operator_opens_its_page(session, console_errors):
    """An operator past the first page (a link, or a Roofline point) opens on its page, selected."""
    ops = [r["op"] for r in get_json(f"{session.base}/data/plugin/tb_hwprof/operators?run=bert")["ops"]]
    assert len(ops) > 20
    frame = open_view(session, "operators", "bert", f"&op={ops[-1]}")
    selected = frame.locator("table[data-role=operators] tr.selected")
    selected.wait_for()
    assert selected.get_attribute("data-op") == ops[-1]
    assert frame.locator("[data-role=page-no]").first.inner_text().strip() == f"page {(len(ops) - 1) // 20 + 1} / {(len(ops) + 19) // 20}"
    assert frame.locator("[data-role=op-name]").inner_text() == ops[-1]


def test_operator_names_are_text(session, console_errors):
    frame = open_view(session, "operators", "bert_xss")
    frame.fill("input[data-role=filter]", "onerror")
    row = wait_rows(frame, "operators", 1)
    assert row.get_attribute("data-op") == XSS_OP
    assert row.locator("td[data-col=op]").inner_text().strip() == XSS_OP
    row.click()
    assert frame.locator("[data-role=op-name]").inner_text() == XSS_OP
    assert frame.locator("img").count() == 0 and session.page.locator("img[src=x]").count() == 0
    assert not session.dialogs


# -- Steps ------------------------------------------------------------------------------------
def test_steps_draw_one_bar_group_per_profiler_step(session, logdir, traces, console_errors):
    needs_table(logdir, "resnet", "step_time_breakdown")
    frame = open_view(session, "steps", "resnet")
    svg = frame.locator("svg[data-role=steps-chart]")
    svg.wait_for()
    bars = frame.locator("svg[data-role=steps-chart] g[data-role=step-bar]")
    steps = [int(b) for b in bars.evaluate_all("gs => gs.map(g => g.dataset.step)")]
    assert steps == profiler_steps(traces["resnet"]) and len(steps) == 5
    # Each bar is its step's segments stacked: values sum to its total, heights to its share of the axis.
    top, plot = float(svg.get_attribute("data-y-max")), float(svg.get_attribute("data-plot-bottom")) - float(svg.get_attribute("data-plot-top"))
    totals = []
    for i in range(len(steps)):
        bar = bars.nth(i)
        parts = bar.locator("rect").evaluate_all("rs => rs.map(r => [Number(r.dataset.value), Number(r.getAttribute('height'))])")
        total = float(bar.get_attribute("data-total"))
        assert sum(v for v, _ in parts) == pytest.approx(total)
        assert sum(hgt for _, hgt in parts) == pytest.approx(total / top * plot, abs=0.01)
        totals.append(total)
    average = frame.locator("svg[data-role=steps-chart] g[data-role=average-bar]")
    assert float(average.get_attribute("data-total")) == pytest.approx(sum(totals) / len(totals))
    assert frame.locator("table[data-role=step-breakdown] tbody tr").count() == len(steps)
    session.shot("torch-steps-resnet")


# -- Roofline ---------------------------------------------------------------------------------
def test_roofline_places_op_shapes_against_datasheet_roofs(session, logdir, console_errors):
    needs_table(logdir, "bert", "op_shapes")
    frame = open_view(session, "roofline", "bert")
    svg = frame.locator("svg[data-role=roofline]")
    svg.wait_for()
    points = frame.locator("svg[data-role=roofline] [data-role=point].op-point")
    points.first.wait_for()
    box = {k: float(svg.get_attribute(f"data-{k}")) for k in
           ("x-min", "x-max", "y-min", "y-max", "plot-left", "plot-right", "plot-top", "plot-bottom")}
    for p in points.evaluate_all("cs => cs.map(c => [c.dataset.ai, c.dataset.flops, c.dataset.cx, c.dataset.cy])"):
        ai, flops, cx, cy = map(float, p)
        assert cx == pytest.approx(log_pos(ai, box["x-min"], box["x-max"], box["plot-left"], box["plot-right"]), abs=0.01)
        assert cy == pytest.approx(log_pos(flops, box["y-min"], box["y-max"], box["plot-bottom"], box["plot-top"]), abs=0.01)
    peaks = manifest_of(logdir, "bert")["devices"][0]["peaks"]
    roofs = frame.locator("svg[data-role=roofline] line.roof").evaluate_all("ls => ls.map(l => [l.dataset.roof, l.dataset.source])")
    assert roofs and all(source == peaks[key]["source"] == "datasheet" for key, source in roofs)
    assert "(datasheet)" in frame.locator("svg[data-role=roofline] .roof-labels").text_content()
    gemm = frame.locator("svg[data-role=roofline] [data-role=point].op-point[data-category=GEMM]")
    assert gemm.count() >= 1
    session.shot("torch-roofline-bert")
    op = gemm.first.get_attribute("data-op")
    gemm.first.click()
    frame.locator("[data-role=op-detail] [data-role=op-name]").wait_for()
    assert frame.locator("[data-role=op-name]").inner_text() == op
    assert frame.locator("nav.views button.active").get_attribute("data-view") == "operators"


# -- Overview, Timeline, Compare on PyTorch runs ----------------------------------------------
def test_overview_timeline_and_compare_of_torch_runs(session, traces, console_errors):
    kernels = {run: [e for e in complete_events(t) if category(e) == "kernel"] for run, t in traces.items()}
    frame = open_view(session, "overview", "bert")
    launches = frame.locator("[data-role=kernel-launches]")
    launches.wait_for()
    assert int(launches.get_attribute("data-value")) == len(kernels["bert"])
    # Timeline: every complete event of the trace's operator, Python, runtime, GPU and annotation kinds.
    frame = session.go("#view=timeline&run=bert")
    wait_window(frame, "c.dataset.returned !== undefined")
    drawn = {"cpu_op", "python_function", "kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver",
             "user_annotation", "gpu_user_annotation"}
    expected = sum(1 for e in complete_events(traces["bert"]) if category(e) in drawn)
    assert int(frame.locator("canvas[data-role=timeline]").get_attribute("data-returned")) == expected
    legend = frame.locator("[data-role=timeline-legend]")
    shown = legend.locator(".legend-item:not([hidden])").evaluate_all("items => items.map(i => i.dataset.cat)")
    assert {"cpu_op", "python", "kernel", "memcpy", "cuda_api"} <= set(shown)
    assert "PyTorch operator" in legend.inner_text() and "Python function" in legend.inner_text()
    session.shot("torch-timeline-bert")
    # Compare: both runs have profiler steps, so each total is its kernels' summed durations per step
    # (the steps counted here from the traces' ProfilerStep#N ranges).
    frame = session.go("#view=compare&base=bert&run=resnet")
    frame.locator("[data-role=totals]").wait_for()
    steps = {run: len({e["name"] for e in complete_events(t) if str(e.get("name", "")).startswith("ProfilerStep#")})
             for run, t in traces.items()}
    assert steps["bert"] > 0 and steps["resnet"] > 0
    basis = get_json(f"{session.base}/data/plugin/tb_hwprof/compare?base=bert&run=resnet")["basis"]
    assert basis["per_step"] and basis["steps"] == [steps["bert"], steps["resnet"]]
    for role, run in (("base_ns", "bert"), ("run_ns", "resnet")):
        total = float(frame.locator(f"[data-role=totals] [data-role={role}]").get_attribute("data-value"))
        assert total == pytest.approx(sum(e["dur"] for e in kernels[run]) * 1e3 / steps[run], rel=1e-6)


def test_nav_of_a_torch_run(session, logdir, traces, console_errors):
    """Operators first for a PyTorch run; the views its manifest has data for, in the server's order.
    The Roofline's roofs are those of the GPUs the kernels ran on, not every GPU the trace lists."""
    session.open()
    offered = [name for name, _ in nav_of_run(session, "bert")]
    assert offered[:2] == ["runs", "operators"]
    assert {"kernels", "roofline", "overview", "timeline", "compare"} <= set(offered)
    assert ("steps" in offered) == ("summary_step_time_breakdown" in manifest_of(logdir, "bert")["files"])
    assert get_json(f"{session.base}/data/plugin/tb_hwprof/operators?run=bert")["ops"][0]["op"] == "aten::addmm"
    ran_on = {e["args"]["device"] for e in complete_events(traces["resnet"]) if category(e) == "kernel"}
    roofline = get_json(f"{session.base}/data/plugin/tb_hwprof/roofline?run=resnet")
    assert [d["id"] for d in roofline["devices"]] == sorted(ran_on) and len(manifest_of(logdir, "resnet")["devices"]) == 8


def test_screenshots_for_the_readme(session, logdir, console_errors):
    """Operators (an operator opened: its shapes and kernels) and Steps, as the README shows them:
    the plugin's page only, test-artifacts/screenshots/readme-*.png (docs/img/ holds them quantised)."""
    session.page.set_viewport_size({"width": 1400, "height": 1800})
    frame = open_view(session, "operators", "bert", "&op=aten::addmm")
    frame.locator("table[data-role=op-kernels] tbody tr[data-row-id]").first.wait_for()
    plugin_shot(frame, "readme-operators")
    needs_table(logdir, "rn50", "step_time_breakdown")
    frame = session.go("#view=steps&run=rn50")
    frame.locator("svg[data-role=steps-chart]").wait_for()
    plugin_shot(frame, "readme-steps")


def plugin_shot(frame, name: str) -> None:
    from browser_support import SHOTS
    SHOTS.mkdir(parents=True, exist_ok=True)
    frame.locator("main#view").screenshot(path=str(SHOTS / f"{name}.png"))
