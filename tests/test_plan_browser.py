"""The Plan view (issue 34) in the browser, on the real H200 pair joined per configuration: the
ranked rows in the run's plan table's order with their savings, a row's evidence on click, the rules
without an estimate below, and the nav offering Plan only to runs with a plan table.  Expected
values come from the run's plan table (its arithmetic is checked in tests/test_plan.py)."""
from __future__ import annotations


import pytest

import tb_hwprof
from browser_support import nav_of_run, wait_rows
from conftest import export_h200_pair, export_sample, get_json

RUN, NSYS, AFTER = "h200_plan", "nsys_plan", "rn50_after"
EXPECTED_RUNS = {RUN, NSYS, AFTER}


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir):
    root = export_h200_pair(samples_dir, tmp_path_factory, tmp_path_factory.mktemp("plan-ui") / "logs", RUN)
    export_sample(samples_dir, "nsys/gpu4_t4_2022.4.2.sqlite", root, NSYS)
    export_sample(samples_dir, "torch/h200_resnet50_bf16_handler_stack.pt.trace.json.gz", root, AFTER)
    return root


def test_the_plan_lists_the_ranked_rows_with_their_savings_and_evidence(session, logdir):
    plan = tb_hwprof.load_analysis(logdir / RUN).summaries["plan"]
    ranked = plan[plan["rank"] > 0]
    session.open()
    frame = session.go(f"#view=plan&run={RUN}")
    rows = wait_rows(frame, "plan", len(ranked))
    keys = frame.eval_on_selector_all("table[data-role=plan] tbody tr[data-row-id]", "rows => rows.map(r => r.dataset.key)")
    assert keys == ranked["key"].tolist()
    savings = frame.eval_on_selector_all("table[data-role=plan] td[data-col=saving_ns]",
                                         "cells => cells.map(c => Number(c.dataset.value))")
    assert savings == pytest.approx(ranked["saving_ns"].tolist(), rel=1e-12)
    first = ranked.iloc[0]
    rows.first.click()
    evidence = frame.locator("tr.plan-evidence[data-evidence-of='1']")
    assert evidence.is_visible() and first["evidence"] in evidence.inner_text()
    unranked = frame.locator("[data-role=plan-unranked] li")
    assert unranked.count() == int((plan["rank"] == 0).sum())
    assert "not added" in frame.locator("body").inner_text()
    session.shot("plan-h200-joined")


def test_plan_is_offered_where_the_run_has_a_plan(session, logdir):
    names = tb_hwprof.load_analysis(logdir / NSYS).summaries
    session.open()
    offered = [view for view, _ in nav_of_run(session, NSYS)]
    assert ("plan" in offered) == ("plan" in names)
    assert "plan" in [view for view, _ in nav_of_run(session, RUN)]


def test_compare_shows_what_happened_to_the_baselines_plan(session, logdir):
    doc = get_json(f"{session.base}/data/plugin/tb_hwprof/compare?base={RUN}&run={AFTER}")
    rows = doc["plan_outcome"]
    assert rows
    session.open()
    frame = session.go(f"#view=compare&base={RUN}&run={AFTER}")
    table = frame.locator("[data-role=plan-outcome-table]")
    table.wait_for(timeout=30000)
    shown = table.locator("tbody tr").evaluate_all("trs => trs.map(t => [t.dataset.key, t.dataset.status])")
    assert shown == [[r["key"], r["status"]] for r in rows]
    saved = table.locator("td[data-col=saved_ns]").evaluate_all("tds => tds.map(t => Number(t.dataset.value))")
    assert saved == pytest.approx([r["saved_ns"] for r in rows], rel=1e-12)
    table.scroll_into_view_if_needed()
    session.shot("plan-compare-outcome")
