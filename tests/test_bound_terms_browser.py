"""One vocabulary for "bound" in the browser (issue 32 item 1), on the real H200 pair joined per
configuration: the drawer heads each label with its method (counters, roofline) and says once,
in words, where the two disagree.  Expected texts come from the plugin's own /kernel document and
the run's kernels table (their figures are checked in tests/test_bound_terms.py)."""
from __future__ import annotations


import pytest

import tb_hwprof
from browser_support import wait_rows
from conftest import export_h200_pair, get_json

RUN = "h200_bound_ui"
EXPECTED_RUNS = {RUN}


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir):
    root = export_h200_pair(samples_dir, tmp_path_factory, tmp_path_factory.mktemp("bound-ui") / "logs", RUN)
    return root


def disagreeing_launch(logdir) -> int:
    kernels = tb_hwprof.load_run(logdir / RUN, with_details=False).kernels
    return next(i for i, (b, r) in enumerate(zip(kernels["bound"], kernels["binding_roof"]))
                if b == "compute" and r in ("dram", "l2", "l1"))


def test_the_drawer_names_each_method_and_says_where_they_disagree(session, logdir):
    launch = disagreeing_launch(logdir)
    doc = get_json(f"{session.base}/data/plugin/tb_hwprof/kernel?run={RUN}&launch={launch}")["bound"]
    session.open()
    frame = session.go(f"#view=kernels&run={RUN}&launch={launch}")
    wait_rows(frame, "kernels")
    drawer = frame.locator("aside#detail")
    note = drawer.locator("[data-role=bound-disagree]")
    note.wait_for(timeout=30000)
    assert note.inner_text() == doc["note"]
    counters = drawer.locator("dd[data-role=bound_counters] .bound-chip")
    roofline = drawer.locator("dd[data-role=bound_roofline] .bound-chip")
    assert counters.inner_text() == "compute" and roofline.inner_text() == "memory"
    # Each label is headed by its method, whose rule is the heading's tooltip.
    heads = drawer.locator("dl.facts dt abbr")
    assert heads.all_inner_texts() == ["Bound (counters)", "Bound (roofline)"]
    assert heads.nth(0).get_attribute("title") == doc["counters"]["rule"]
    assert heads.nth(1).get_attribute("title") == doc["roofline"]["rule"]
    session.shot("bound-drawer-two-methods")


def test_no_note_where_the_methods_agree(session, logdir):
    kernels = tb_hwprof.load_run(logdir / RUN, with_details=False).kernels
    launch = next(i for i, (b, r) in enumerate(zip(kernels["bound"], kernels["binding_roof"])) if b == "memory" and r == "dram")
    session.open()
    frame = session.go(f"#view=kernels&run={RUN}&launch={launch}")
    drawer = frame.locator("aside#detail")
    drawer.locator("dd[data-role=bound_roofline] .bound-chip").wait_for(timeout=30000)
    assert drawer.locator("[data-role=bound-disagree]").count() == 0


def test_operators_head_each_bound_with_its_method_and_mark_disagreement(session, logdir):
    ops = get_json(f"{session.base}/data/plugin/tb_hwprof/operators?run={RUN}")["ops"]
    noted = {o["op"]: o["bound_note"] for o in ops if o.get("bound_note")}
    assert noted, "the pair has an operator whose shape roofline and counters disagree"
    session.open()
    frame = session.go(f"#view=operators&run={RUN}")
    wait_rows(frame, "operators")
    head = lambda col: frame.locator(f"table[data-role=operators] th[data-col={col}]").inner_text()  # noqa: E731
    assert head("bound").startswith("Bound (roofline)") and head("bound_mix").startswith("Bound mix (counters)")
    chips = frame.eval_on_selector_all(
        "table[data-role=operators] tbody tr[data-row-id] td[data-col=bound_note] [data-role=bound-disagree]",
        "chips => chips.map(c => [c.closest('tr').querySelector('td[data-col=op]').getAttribute('title') "
        "|| c.closest('tr').querySelector('td[data-col=op]').textContent, c.getAttribute('title')])")
    shown = {op: note for op, note in chips if op in noted}
    assert shown == {op: noted[op] for op in shown} and shown, chips
    session.shot("bound-operators-methods")


def test_a_roofline_point_names_both_methods(session, logdir):
    launch = disagreeing_launch(logdir)
    session.open()
    frame = session.go(f"#view=roofline&run={RUN}")
    point = frame.locator(f"svg[data-role=roofline] [data-role=point][data-launch-id='{launch}']").first
    point.wait_for(timeout=30000)
    point.dispatch_event("mouseenter")
    tip = frame.locator("[data-role=tooltip]").inner_text()
    assert "bound (counters): compute" in tip and "bound (roofline): memory" in tip and "they disagree" in tip
