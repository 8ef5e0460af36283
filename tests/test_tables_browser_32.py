"""Issue 32 items 6 and 10: wide tables at a 1440 px wide window, in a real browser, on real runs.

- the decisive columns (Kernels' Bound, joined Operators' counters, op-shape GPU time and FLOPs) are
  in sight without scrolling the table, on an AMD run (rocprof-compute) and a joined run (the H200
  pair, trace + Nsight Compute report joined per configuration);
- the name column stays in sight when the table is scrolled fully right;
- the "Columns" chooser hides a column, the choice survives a reload, the name column cannot be hidden;
- the Runs table lists a node's GPUs once per model with a count (the 8-GPU B200 trace).

Which columns hold values, and the devices, come from the plugin's own JSON (GET /data/plugin/tb_hwprof/...).
"""
from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest

from browser_support import export_run, wait_rows
from conftest import decompressed, get_json, sample

JOINED, AMD, B200 = "h200_joined", "amd_bmm1_mi300x", "b200_8gpu"
EXPECTED_RUNS = {JOINED, AMD, B200}
PAIR = "pairs/h200_resnet18_bf16"
WIDTH = 1440
# Joined Operators: the hardware counters (and the bound they give) that say why an operator is slow.
COUNTERS = ("sm_throughput_pct", "memory_throughput_pct", "achieved_occupancy_pct", "l1_hit_rate_pct", "l2_hit_rate_pct",
            "bound_mix")


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir):
    root = tmp_path_factory.mktemp("tables32") / "logs"
    report = decompressed(samples_dir / PAIR / "resnet18_step3_first58.ncu-rep.xz", tmp_path_factory)
    # In a child process: ncu_report keeps ~600 MB of this report after reading it.
    subprocess.run([sys.executable, "-m", "tb_hwprof", "export", str(samples_dir / PAIR / "resnet18_step3.pt.trace.json.gz"),
                    str(report), "--join", "--per-config", "--logdir", str(root), "--run", JOINED, "--quiet"], check=True)
    export_run([samples_dir / "rocprof/rocprof-compute_bmm1_mi300x"], root, AMD)  # a folder
    export_run([sample(samples_dir, "torch/tracelens_b200_eager_8rank_rank0.json.gz")], root, B200)
    return root


@pytest.fixture
def wide(session):
    """The session at a 1440 px wide window (the issue's screen)."""
    session.page.set_viewport_size({"width": WIDTH, "height": 900})
    session.open()
    return session


# The table's scroll container (its nearest ancestor that scrolls sideways), the part of it in sight
# (clipped by the plugin frame's window), and the rectangles of the given columns' header and cells.
GEOMETRY = """([role, cols, rows]) => {
  const table = document.querySelector(`table[data-role="${role}"]`);
  let box = table.parentElement;
  while (box && !["auto", "scroll"].includes(getComputedStyle(box).overflowX)) box = box.parentElement;
  if (!box) return {box: null};
  const r = box.getBoundingClientRect();
  const left = Math.max(r.left + box.clientLeft, 0), right = Math.min(r.left + box.clientLeft + box.clientWidth, innerWidth);
  const rect = (el) => { const b = el.getBoundingClientRect(); return [b.left, b.right]; };
  const cells = {};
  for (const col of cols) {
    const els = [table.querySelector(`thead th[data-col="${col}"]`),
      ...[...table.querySelectorAll(`tbody tr[data-row-id] td[data-col="${col}"]`)].slice(0, rows)];
    cells[col] = els.filter(Boolean).map(rect);
  }
  return {box: true, left, right, scrollLeft: box.scrollLeft, overflows: box.scrollWidth > box.clientWidth,
    pageOverflows: document.scrollingElement.scrollWidth > innerWidth, cells};
}"""


def geometry(frame, role, cols, rows=5):
    return frame.evaluate(GEOMETRY, [role, list(cols), rows])


def out_of_sight(geo):
    """{column: [left, right] of each header / cell not wholly inside the visible part of the scroll box}."""
    outside = {}
    for col, rects in geo["cells"].items():
        bad = [r for r in rects if r[0] < geo["left"] - 0.5 or r[1] > geo["right"] + 0.5]
        if bad or not rects:
            outside[col] = bad or "not shown"
    return outside


def assert_in_sight(frame, role, cols):
    geo = geometry(frame, role, cols)
    assert geo["box"], f"table {role} is in no sideways-scrolling container"
    assert not geo["pageOverflows"], "the page scrolls sideways: the table should scroll inside its container"
    assert geo["scrollLeft"] == 0
    assert not out_of_sight(geo), (f"{role}: columns out of sight at {WIDTH} px without scrolling "
                                   f"(visible {geo['left']:.0f}..{geo['right']:.0f}): {out_of_sight(geo)}")


def with_values(rows, keys):
    return [k for k in keys if any(r.get(k) is not None for r in rows)]


def headers(frame, role):
    return frame.eval_on_selector_all(f"table[data-role={role}] thead th", "ths => ths.map(t => t.dataset.col)")


# -- 1. the decisive columns in sight at 1440 px ------------------------------------------------------
@pytest.mark.parametrize("run", [AMD, JOINED])
def test_kernels_bound_is_in_sight_at_1440(wide, run):
    frame = wide.go(f"#view=kernels&run={run}")
    wait_rows(frame, "kernels")
    assert_in_sight(frame, "kernels", ["name", "duration_ns", "bound"])
    wide.shot(f"tables32-kernels-{run}-1440")
    frame = wide.go(f"#view=kernels&run={run}&group=1")
    wait_rows(frame, "kernel-groups")
    assert_in_sight(frame, "kernel-groups", ["name", "total_ns", "bound"])


def test_joined_operators_counters_and_shape_figures_in_sight_at_1440(wide):
    doc = get_json(f"{wide.base}/data/plugin/tb_hwprof/operators?run={JOINED}")
    assert doc["has_counters"] and doc["has_shapes"]
    counters = with_values(doc["ops"], COUNTERS)
    assert counters, "the joined run has no counter column"
    frame = wide.go(f"#view=operators&run={JOINED}")
    wait_rows(frame, "operators")
    assert_in_sight(frame, "operators", ["op", "direct_gpu_ns", *counters])
    # The opened operator's shapes: GPU time and FLOPs in sight.
    wait_rows(frame, "op-shapes")
    assert_in_sight(frame, "op-shapes", ["gpu_ns", "flops_per_call"])
    wide.shot("tables32-operators-joined-1440")
    frame.locator("table[data-role=op-shapes]").scroll_into_view_if_needed()
    wide.shot("tables32-op-shapes-joined-1440")


# -- 2. the name column stays when the table is scrolled fully right ----------------------------------
@pytest.mark.parametrize("run, view, role, name", [(AMD, "kernels", "kernels", "name"),
                                                   (JOINED, "operators", "operators", "op")])
def test_the_name_column_stays_in_sight_scrolled_right(wide, run, view, role, name):
    frame = wide.go(f"#view={view}&run={run}")
    wait_rows(frame, role)
    assert geometry(frame, role, [name])["overflows"], f"{role} is not wider than {WIDTH} px: nothing to check"
    frame.evaluate("""role => { const t = document.querySelector(`table[data-role="${role}"]`);
      let box = t.parentElement;
      while (!["auto", "scroll"].includes(getComputedStyle(box).overflowX)) box = box.parentElement;
      box.scrollLeft = box.scrollWidth; }""", role)
    frame.wait_for_timeout(100)
    geo = geometry(frame, role, [name], rows=20)
    assert geo["scrollLeft"] > 0
    assert not out_of_sight(geo), f"{role}: name cells scrolled away: {out_of_sight(geo)}"
    wide.shot(f"tables32-{view}-{run}-scrolled-right")


# -- 3. the column chooser ---------------------------------------------------------------------------
def test_the_column_chooser_hides_a_column_across_a_reload(wide):
    frame = wide.go(f"#view=kernels&run={AMD}")
    wait_rows(frame, "kernels")
    shown = headers(frame, "kernels")
    target = shown[-1]
    assert target != "name"
    wrap = frame.locator("table[data-role=kernels]").locator("xpath=ancestor::div[contains(@class,'table-wrap')]")
    button = wrap.locator("button[data-role=columns-button]")
    button.click(timeout=5000)
    panel = wrap.locator("[data-role=columns-panel]")
    assert panel.is_visible()
    # The name column cannot be hidden: no checkbox, or a disabled one.
    name_box = panel.locator("input[type=checkbox][data-col=name]")
    assert name_box.count() == 0 or name_box.is_disabled()
    assert panel.locator("input[type=checkbox]:not([disabled])").count() == len(shown) - 1
    wide.shot("tables32-column-chooser-open")
    panel.locator(f"input[type=checkbox][data-col={target}]").uncheck()
    frame.wait_for_function("c => !document.querySelector(`table[data-role=kernels] thead th[data-col=\"${c}\"]`)", arg=target)
    assert headers(frame, "kernels") == [c for c in shown if c != target]
    assert frame.locator(f"table[data-role=kernels] td[data-col={target}]").count() == 0
    # Kept per table across a reload.
    wide.page.reload()
    wide.frame()
    frame = wide.go(f"#view=kernels&run={AMD}")
    wait_rows(frame, "kernels")
    assert headers(frame, "kernels") == [c for c in shown if c != target]
    frame.locator("table[data-role=kernels]").locator(
        "xpath=ancestor::div[contains(@class,'table-wrap')]").locator("button[data-role=columns-button]").click()
    assert not frame.locator(f"[data-role=columns-panel] input[data-col={target}]").is_checked()
    wide.shot("tables32-column-chooser-after-reload")
    # Another table (the other role) is not affected.
    frame = wide.go(f"#view=kernels&run={AMD}&group=1")
    wait_rows(frame, "kernel-groups")
    groups = headers(frame, "kernel-groups")
    assert "name" in groups and "bound" in groups


# -- 4. the Runs table's GPU cell --------------------------------------------------------------------
def test_runs_table_lists_each_gpu_model_once_with_its_count(wide):
    [row] = [r for r in get_json(f"{wide.base}/data/plugin/tb_hwprof/runs")["runs"] if r["run"] == B200]
    models = Counter(d["name"] for d in row["devices"])
    assert sum(models.values()) > 1, "the run lists one GPU: nothing to check"
    frame = wide.go(f"#view=runs&run={B200}")
    frame.locator(f"table[data-role=runs] tr[data-run={B200}]").wait_for()
    cell = frame.evaluate("""run => {
      const table = document.querySelector('table[data-role=runs]');
      const index = [...table.tHead.rows[0].cells].findIndex((th) => th.textContent.startsWith('Device'));
      const td = table.querySelector(`tr[data-run="${run}"]`).cells[index];
      return {text: td.textContent, title: td.getAttribute('title') || '', clipped: td.scrollWidth > td.clientWidth};
    }""", B200)
    for name, count in models.items():
        assert cell["text"].count(name) == 1, f"{name} shown {cell['text'].count(name)} times: {cell['text']!r}"
        if count > 1:
            assert f"{count}× {name}" in cell["text"], cell["text"]
        assert name in cell["title"]
    assert not cell["clipped"], cell
    wide.shot("tables32-runs-gpus")
