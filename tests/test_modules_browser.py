"""Issue 33 in a real browser, on the real H200 ResNet-50 trace recorded with with_stack=True:
the Modules view (the nn.Module tree per step with host / device time, a click listing the
operators inside a module with their figures there) and the Python stacks flame graph (GPU / CPU weight,
search, zoom with a breadcrumb, a frame's operators and kernels).

Expected values come from the run's own tables (tb_hwprof.load_analysis on the exported run) and
the /modules, /stacks documents; screenshots go to test-artifacts/screenshots/.
"""
from __future__ import annotations

import pytest

import tb_hwprof
from browser_support import export_run, wait_rows
from conftest import sample

H200 = "torch/h200_resnet50_bf16_handler_stack.pt.trace.json.gz"
EXPECTED_RUNS = {"h200"}


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir):
    root = tmp_path_factory.mktemp("modules-logdir")
    export_run([sample(samples_dir, H200)], root, "h200")
    return root


@pytest.fixture(scope="module")
def tables(logdir):
    analysis = tb_hwprof.load_analysis(logdir / "h200")
    return analysis.summaries


def module_rows(frame):
    return wait_rows(frame, "modules")


def test_module_tree_shows_the_runs_times_and_filters_operators(session, tables):
    tree = tables["module_tree"]
    frame = session.open()
    session.go("#view=modules&run=h200")
    module_rows(frame)
    # All steps (the default): the root module's times are its rows summed over the steps.
    root = tree[tree["depth"] == 0].groupby("path")[["host_total_ns", "device_total_ns", "device_self_ns",
                                                     "host_self_ns", "calls", "kernels"]].sum()
    top_path = root["device_total_ns"].idxmax()
    row = frame.locator(f"table[data-role=modules] tr[data-row-id='{top_path}']")
    for col in ("host_total_ns", "device_total_ns", "host_self_ns", "device_self_ns", "kernels"):
        shown = float(row.locator(f"td[data-col={col}]").get_attribute("data-value"))
        assert shown == pytest.approx(float(root.loc[top_path, col]), rel=1e-9), col
    # Expanding the root shows its children, with their own (summed) device time.
    row.locator("button[data-role=toggle]").click()
    children = tree[tree["parent_id"] == tree.loc[tree["path"] == top_path, "path_id"].iloc[0]]
    child_paths = list(dict.fromkeys(children["path"]))
    frame.wait_for_selector(f"table[data-role=modules] tr[data-row-id='{child_paths[0]}']")
    busiest = children.groupby("path")["device_total_ns"].sum().idxmax()
    cell = frame.locator(f"table[data-role=modules] tr[data-row-id='{busiest}'] td[data-col=device_total_ns]")
    assert float(cell.get_attribute("data-value")) == pytest.approx(
        float(children.loc[children["path"] == busiest, "device_total_ns"].sum()), rel=1e-9)
    # One step: the step's own rows.
    step = int(sorted(s for s in tree["step"].unique() if s >= 0)[-1])
    frame.select_option("select[data-role=module-step]", str(step))
    one = tree[(tree["step"] == step) & (tree["path"] == top_path)]
    frame.wait_for_function("""([path, want]) => {
        const c = document.querySelector(`table[data-role=modules] tr[data-row-id='${path}'] td[data-col=device_total_ns]`);
        return c && Math.abs(Number(c.dataset.value) - want) < 1e-3;}""",
        arg=[top_path, float(one["device_total_ns"].iloc[0])], timeout=15000)
    session.shot("modules_h200_tree")
    # A click on a module's name lists the operators inside it (its submodules too) with their
    # figures in that module, per pass: summed from module_ops, and the forward pass's GPU self time
    # adds up to the module's device total over the steps (module_tree, measured on the module
    # frames, not the operators).  Backward operators are those run under the autograd nodes of its
    # forward operators: a convolution's backward under a Conv2d, a batch norm's under a BatchNorm2d.
    module_ops = tables["module_ops"]
    inside = module_ops[module_ops["path"].str.startswith(busiest + "/") | (module_ops["path"] == busiest)]
    expected = inside.groupby(["pass", "op"])[["calls", "device_ns", "device_total_ns", "host_total_ns"]].sum()
    expected.index = [f"{p}/{o}" for p, o in expected.index]
    frame.locator(f"table[data-role=modules] tr[data-row-id='{busiest}'] a[data-role=module-ops]").click()
    op_rows = wait_rows(frame, "module-operators")
    frame.wait_for_function("n => document.querySelectorAll('table[data-role=module-operators] tbody tr[data-row-id]')"
                            ".length === n", arg=min(len(expected), 200), timeout=15000)
    shown = op_rows.evaluate_all("rows => rows.map(r => r.dataset.rowId)")
    assert set(shown) == set(expected.index)
    for row_id in shown[:5]:
        row = frame.locator(f"table[data-role=module-operators] tr[data-row-id='{row_id}']")
        for col in ("calls", "device_ns", "device_total_ns", "host_total_ns"):
            value = float(row.locator(f"td[data-col={col}]").get_attribute("data-value"))
            assert value == pytest.approx(float(expected.loc[row_id, col]), rel=1e-9), (row_id, col)
    module_total = float(tree.loc[tree["path"] == busiest, "device_total_ns"].sum())
    legend = frame.locator("[data-role=module-ops-legend]")
    assert float(legend.get_attribute("data-value")) == pytest.approx(module_total, rel=1e-9)
    backward = expected[expected.index.str.startswith("backward/")]
    assert float(legend.get_attribute("data-backward")) == pytest.approx(float(backward["device_ns"].sum()), rel=1e-9)
    assert backward["device_ns"].sum() > 0 and any("backward" in op for op in backward.index)
    # The whole run's operator figures differ from the module's: the busiest operator inside it ran
    # elsewhere too (its instances over the run outnumber those inside this module).
    whole = tables["op_gpu_time"].set_index("op")
    forward = expected[expected.index.str.startswith("forward/")]
    top = forward["device_ns"].idxmax().split("/", 1)[1]
    assert int(whole.loc[top, "instances"]) > int(forward.loc[f"forward/{top}", "calls"])
    session.shot("modules_h200_module_operators")
    # Its name opens the Operators view on that operator (whole-run figures, said so there).
    frame.locator(f"table[data-role=module-operators] tr[data-row-id='forward/{top}'] a[data-role=op-link]").click()
    frame.wait_for_function("document.body.dataset.view === 'operators'", timeout=15000)
    wait_rows(frame, "operators")
    frame.wait_for_selector(f"table[data-role=operators] tr.selected[data-row-id='{top}']", timeout=15000)
    instances = frame.locator(f"table[data-role=operators] tr[data-row-id='{top}'] td[data-col=instances]")
    assert int(float(instances.get_attribute("data-value"))) == int(whole.loc[top, "instances"])


def test_flame_graph_weights_search_zoom_and_frame_detail(session, tables):
    stacks = tables["python_stacks"]
    frame = session.open()
    session.go("#view=stacks&run=h200")
    frame.wait_for_selector("svg[data-role=flame] rect[data-path]", timeout=30000)
    roots = stacks[stacks["parent_id"] < 0]
    total_gpu = float(roots["gpu_ns"].sum())
    assert float(frame.get_attribute("[data-role=flame-total]", "data-value")) == pytest.approx(total_gpu, rel=1e-9)
    # Widths are the frames' GPU weight: the widest root's share of the graph's width.
    widest = roots.loc[roots["gpu_ns"].idxmax()]
    rect = frame.locator(f"svg[data-role=flame] rect[data-path='{int(widest['path_id'])}']")
    width = float(rect.get_attribute("width"))
    full = float(frame.get_attribute("svg[data-role=flame]", "data-width"))
    assert width == pytest.approx(full * float(widest["gpu_ns"]) / total_gpu, rel=1e-3)
    # CPU weight: the total is the frames' CPU time.
    frame.click("button[data-role=flame-weight][data-weight=cpu]")
    frame.wait_for_function("want => Math.abs(Number(document.querySelector('[data-role=flame-total]').dataset.value)"
                            " - want) < 1", arg=float(roots["cpu_total_ns"].sum()), timeout=15000)
    frame.click("button[data-role=flame-weight][data-weight=gpu]")
    # Search highlights the frames whose name matches.
    term = "forward"
    frame.fill("input[data-role=flame-search]", term)
    matches = frame.locator("svg[data-role=flame] rect.match")
    matches.first.wait_for(timeout=15000)
    names = frame.eval_on_selector_all("svg[data-role=flame] rect.match", "rs => rs.map(r => r.dataset.name)")
    assert names and all(term in n.lower() for n in names)
    # Zoom: clicking the deepest frame with the most GPU time makes it the full width, with a breadcrumb.
    candidates = stacks[(stacks["gpu_ns"] > 0.05 * total_gpu) & (stacks["depth"] >= 3)]
    target = candidates.sort_values(["depth", "gpu_ns"], ascending=[False, False]).iloc[0]
    path_id = int(target["path_id"])
    frame.locator(f"svg[data-role=flame] rect[data-path='{path_id}']").click()
    frame.wait_for_function("([p, w]) => { const r = document.querySelector(`svg[data-role=flame] rect[data-path='${p}']`);"
                            " return r && Math.abs(Number(r.getAttribute('width')) - w) < 0.5; }", arg=[path_id, full],
                            timeout=15000)
    crumbs = frame.locator("[data-role=flame-crumbs] button")
    assert crumbs.count() == int(target["depth"]) + 2  # "all" + each ancestor + the frame
    # Its operators and kernels: the frame's subtree's GPU activities, by name.
    ops = tables["python_stack_ops"]
    subtree = _subtree(stacks, path_id)
    kernels = ops[(ops["kind"] == "kernel") & ops["path_id"].isin(subtree)].groupby("name")["gpu_ns"].sum()
    listed = frame.locator("table[data-role=frame-kernels] tbody tr[data-row-id]")
    listed.first.wait_for(timeout=15000)
    top = frame.locator("table[data-role=frame-kernels] tbody tr[data-row-id]").first
    assert top.get_attribute("data-row-id") == kernels.idxmax()
    assert float(top.locator("td[data-col=gpu_ns]").get_attribute("data-value")) == pytest.approx(kernels.max(), rel=1e-9)
    session.shot("stacks_h200_flame_zoomed")
    crumbs.first.click()  # back to all frames
    frame.wait_for_function("([p, w]) => { const r = document.querySelector(`svg[data-role=flame] rect[data-path='${p}']`);"
                            " return r && Math.abs(Number(r.getAttribute('width')) - w) < 0.5; }",
                            arg=[int(widest["path_id"]), width], timeout=15000)


def _subtree(stacks, path_id: int) -> set:
    parent = dict(zip(stacks["path_id"].astype(int), stacks["parent_id"].astype(int)))
    out = {path_id}
    for p in sorted(parent):  # parents first
        if parent[p] in out:
            out.add(p)
    return out
