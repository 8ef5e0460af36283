"""Nsight Compute's sections of a launch (tb_hwprof/analysis/ncu_sections.py) against NVIDIA's own
ncu_report on the real full-set reports: every value shown equals ncu_report's, the sections shown
are the ones the report holds (ISection), with Nsight Compute's labels; warp stalls and breakdowns
ranked as ncu_report's values rank them; rule markup parsed on the reports' real rule messages."""
from __future__ import annotations

import re

import pytest

from conftest import fresh_ncu_oracle, ncu_actions
from tb_hwprof.analysis import ncu_sections

FULL_SETS = ["ncu/aplainjane_rtx3060l_full_7k_2024.1.0.ncu-rep", "ncu/armleth_t4_full_2024.2.1.ncu-rep",
             "ncu/lakshya_gtx1660s_full_2024.1.1.ncu-rep", "ncu/montecarlo_rtx3080_full_2020.2.1.ncu-rep"]
OTHERS = ["ncu/darrenlu_rtx3050l_basic_2025.1.0.ncu-rep", "ncu/lakshya_gtx1660s_basic_2024.1.1.ncu-rep",
          "ncu/kprattis_gtx1650_basic_2022.4.1.ncu-rep", "ncu/spyinfer_a10_105launches_2023.2.0.ncu-rep",
          "ncu/lashi_rtx4090_sections_2023.1.0.ncu-rep", "ncu/montecarlo_rtx3080_full_2020.2.1.ncu-rep"]
MAX_LAUNCHES = 8  # enough launches of a many-launch report


@pytest.fixture(scope="module")
def launches(samples_dir, read_sample, ncu_report_module):
    """relative path -> [(ncu_report action, our raw metrics, our rules)] of its first launches."""
    cache = {}

    def get(relative):
        if relative not in cache:
            if not (samples_dir / relative).is_file():
                pytest.skip(f"{relative} not in the samples")
            profile = read_sample(relative)
            actions = list(ncu_actions(ncu_report_module, samples_dir / relative))[:MAX_LAUNCHES]
            cache[relative] = list(zip(actions, profile.raw_metrics, profile.rules))
        return cache[relative]
    return get


@pytest.fixture(scope="module")
def fresh_units(samples_dir):
    """relative path -> [{metric: unit}] per launch, as ncu_report gives them reading that report alone
    (in the test process it carries units over from the reports read before: conftest.fresh_ncu_oracle)."""
    cache = {}

    def get(relative):
        if relative not in cache:
            cache[relative] = [{n: unit for n, (_, unit) in metrics.items()}
                               for metrics, *_ in fresh_ncu_oracle(samples_dir / relative)[:MAX_LAUNCHES]]
        return cache[relative]
    return get


def ncu_value(action, name):
    metric = action.metric_by_name(name)
    assert metric is not None, f"{name} is shown but ncu_report has no such metric"
    if metric.kind() == metric.ValueKind_STRING:
        return metric.as_string()
    return metric.as_double()


def shown_rows(section):
    """Every {label, value, unit, metric} a section shows: its rows, bars and memory chart."""
    out = list(section["rows"])
    for fig in section["figures"]:
        out += fig.get("rows", [])
        out += [r for box in fig.get("boxes", []) for r in box["rows"]]
        out += [r for link in fig.get("links", []) for r in link["rows"]]
    return out


def report_sections(action):
    """{id: ISection} of the launch's top-level sections that have header metrics (ncu_report)."""
    return {s.identifier(): s for s in action.sections() if len(s.header_metrics()) and not s.parent_identifier()}


@pytest.mark.parametrize("relative", FULL_SETS)
def test_every_value_shown_equals_ncu_report(launches, fresh_units, relative):
    checked = 0
    for (action, raw, rules), units in zip(launches(relative), fresh_units(relative)):
        for section in ncu_sections.sections(raw, rules):
            for r in shown_rows(section):
                expected = ncu_value(action, r["metric"])
                if isinstance(expected, str):
                    assert r["value"] == expected, r["metric"]
                else:
                    assert r["value"] == pytest.approx(expected, rel=1e-12, abs=0), r["metric"]
                assert r["unit"] == units[r["metric"]], r["metric"]
                checked += 1
    assert checked > 200


@pytest.mark.parametrize("relative", FULL_SETS + OTHERS)
def test_sections_shown_are_those_the_report_holds(launches, relative):
    known = {section_id for section_id, _, _ in ncu_sections.SECTIONS}
    for action, raw, rules in launches(relative):
        ours = {s["id"]: s for s in ncu_sections.sections(raw, rules)}
        held = report_sections(action)
        # every section of the report that we know is shown, and each of its header metrics with it
        assert set(held) & known <= set(ours), relative
        for section_id in set(held) & known:
            header = {m.name(): m.label() for m in held[section_id].header_metrics()}
            rows = {r["metric"]: r["label"] for r in ours[section_id]["rows"]}
            assert set(header) <= set(rows), section_id
            if "2020" not in relative:  # Nsight Compute 2020 still said "SOL SM", "SOL DRAM", ...
                assert {m: rows[m] for m in header} == header, section_id
        # a section the report does not hold shows only from Nsight Compute's always-collected launch__* metrics
        for section_id in set(ours) - set(held):
            assert section_id in ("LaunchStats", "Occupancy"), f"{relative}: {section_id} is not in the report"


@pytest.mark.parametrize("relative", FULL_SETS)
def test_the_report_body_metrics_are_shown(launches, relative):
    """ComputeWorkloadAnalysis' pipes, WarpStateStats' stall reasons and SchedulerStats' body."""
    for action, raw, rules in launches(relative):
        ours = {s["id"]: s for s in ncu_sections.sections(raw, rules)}
        for section_id in ("ComputeWorkloadAnalysis", "WarpStateStats", "SchedulerStats"):
            section = next(s for s in action.sections() if s.identifier() == section_id)
            body = {m.name() for m in section.body_metrics()}
            assert body and body <= {r["metric"] for r in shown_rows(ours[section_id])}, section_id


def test_a_section_shows_iff_the_launch_holds_its_header(launches):
    action, raw, rules = launches("ncu/armleth_t4_full_2024.2.1.ncu-rep")[0]
    launch_only = {m: v for m, v in raw.items() if m.startswith("launch__")}
    assert [s["id"] for s in ncu_sections.sections(launch_only, rules)] == ["LaunchStats"]  # Occupancy: 4 of 8
    sol = next(s for s in action.sections() if s.identifier() == "SpeedOfLight")
    header = [m.name() for m in sol.header_metrics()]
    few = {m: raw[m] for m in header[:2]}  # Duration alone (as every report has) is no Speed Of Light
    assert ncu_sections.sections(few) == []
    most = {m: raw[m] for m in header[:8]}
    [shown] = ncu_sections.sections(most)
    assert shown["id"] == "SpeedOfLight" and {r["metric"] for r in shown["rows"]} == set(header[:8])
    assert ncu_sections.sections({}) == []


def stall_values(action, pattern):
    return {n: action.metric_by_name(n).as_double() for n in action.metric_names()
            if re.fullmatch(pattern, n) and "_not_issued" not in n}


@pytest.mark.parametrize("relative", FULL_SETS)
def test_warp_stalls_ranked_as_ncu_report_ranks_them(launches, relative):
    for action, raw, rules in launches(relative):
        ours = {s["id"]: s for s in ncu_sections.sections(raw, rules)}
        expected = stall_values(action, r"smsp__average_warps?_(?:latency_)?issue_stalled_\w+_per_issue_active\.ratio")
        [chart] = [f for f in ours["WarpStateStats"]["figures"] if f["id"] == "warp_stalls"]
        assert {r["metric"] for r in chart["rows"]} == set(expected)
        assert [r["value"] for r in chart["rows"]] == sorted(expected.values(), reverse=True)
        assert chart["top"] == chart["rows"][0]["label"]
        top = ncu_sections.top_stall(raw)
        not_selected = {n: v for n, v in expected.items() if "_stalled_selected_" not in n}
        assert top[1] == max(not_selected.values())
        if "SourceCounters" in ours:
            sampled = stall_values(action, r"smsp__pcsamp_warps_issue_stalled_\w+")
            [chart] = [f for f in ours["SourceCounters"]["figures"] if f["id"] == "sampled_stalls"]
            assert [r["value"] for r in chart["rows"]] == sorted(sampled.values(), reverse=True)


@pytest.mark.parametrize("relative", FULL_SETS)
def test_speed_of_light_breakdowns_name_the_busiest_unit(launches, relative):
    for action, raw, rules in launches(relative):
        [sol] = [s for s in ncu_sections.sections(raw, rules) if s["id"] == "SpeedOfLight"]
        charts = {f["id"]: f for f in sol["figures"]}
        for throughput, _ in ncu_sections.BREAKDOWNS:
            listed = action.metric_by_name(f"breakdown:{throughput}").as_string().split(",")
            values = {n: action.metric_by_name(n).as_double() for n in listed if action.metric_by_name(n) is not None}
            chart = charts[f"breakdown:{throughput}"]
            assert {r["metric"] for r in chart["rows"]} == set(values)
            busiest = max(values, key=values.get)
            assert chart["rows"][0]["value"] == values[busiest]
            assert chart["top"] == ncu_sections.breakdown_label(chart["rows"][0]["metric"])
            # the throughput is the maximum of its breakdown (Nsight Compute's definition)
            assert max(values.values()) == pytest.approx(action.metric_by_name(throughput).as_double(), rel=1e-6)


def rule_messages(ncu_report_module, path):
    for action in ncu_actions(ncu_report_module, path):
        ids = {s.identifier() for s in action.sections()}
        for rule in action.rule_results_as_dicts():
            yield ids, (rule.get("rule_message") or {}).get("message") or ""


@pytest.mark.parametrize("relative", FULL_SETS)
def test_rule_markup_of_the_real_messages(samples_dir, ncu_report_module, relative):
    path = samples_dir / relative
    if not path.is_file():
        pytest.skip(f"{relative} not in the samples")
    marked = 0
    for ids, message in rule_messages(ncu_report_module, path):
        parts = ncu_sections.parse_markup(message)
        kinds = [p["kind"] for p in parts]
        assert kinds.count("url") == message.count("@url:")
        assert kinds.count("section") == message.count("@section:")
        assert not any("@url:" in p["text"] or "@section:" in p["text"] for p in parts)
        for p in parts:
            if p["kind"] == "url":
                assert p["href"].startswith("https://") and p["href"] in message and p["text"]
            if p["kind"] == "section":
                assert p["id"] in ids and p["text"]  # names a section of this launch
        # the text around the markup is kept whole
        plain = re.sub(r"@(?:url|section):[^@]*@", "\0", message).split("\0")
        assert [p["text"] for p in parts if p["kind"] == "text"] == [t for t in plain if t]
        marked += len(parts) > 1
    if "2020" not in relative:
        assert marked > 0


def test_rule_markup_edge_cases():
    assert ncu_sections.parse_markup("no markup") == [{"kind": "text", "text": "no markup"}]
    assert ncu_sections.parse_markup("") == []
    [part] = ncu_sections.parse_markup("@url:click:javascript:alert(1)@")
    assert part["href"] == "" and part["text"] == "click"
    [part] = ncu_sections.parse_markup("@url:https://docs.nvidia.com/x@")
    assert part["href"] == "https://docs.nvidia.com/x"
    [part] = ncu_sections.parse_markup("@section:Occupancy:Occupancy@")
    assert part == {"kind": "section", "id": "Occupancy", "text": "Occupancy"}
    assert ncu_sections.parse_markup("a @ b @ c")[0]["text"] == "a @ b @ c"


# -- the drawer's sentences: occupancy note and the latency-bound reason ---------------------------------
NCU_REPORTS = FULL_SETS + OTHERS + ["ncu/esmm_a10g_metrics_all_2023.1.1.ncu-rep", "ncu/gene_v100_cli_flops_2020.ncu-rep",
                                    "ncu/raytracer_gtx1660s_2021.1.0.ncu-rep"]


@pytest.fixture(scope="module")
def labelled(samples_dir, ncu_report_module):
    """relative path -> [(ncu_report action, analysed kernels row)] of its first launches."""
    import tb_hwprof
    from tb_hwprof.analysis.pipeline import label_kernels

    def get(relative):
        if not (samples_dir / relative).is_file():
            pytest.skip(f"{relative} not in the samples")
        kernels = label_kernels(tb_hwprof.read(samples_dir / relative)).kernels
        actions = list(ncu_actions(ncu_report_module, samples_dir / relative))[:MAX_LAUNCHES]
        return [(a, kernels.iloc[i]) for i, a in enumerate(actions)]
    return get


def ncu_number(action, name):
    metric = action.metric_by_name(name)
    return None if metric is None else metric.as_double()


@pytest.mark.parametrize("relative", NCU_REPORTS)
def test_occupancy_note_agrees_with_nsight_compute(labelled, relative):
    for action, k in labelled(relative):
        theoretical = ncu_number(action, "sm__maximum_warps_per_active_cycle_pct")
        achieved = ncu_number(action, "sm__warps_active.avg.pct_of_peak_sustained_active")
        note = k["occupancy_note"]
        assert "n/a" not in note
        if theoretical is not None and theoretical >= 99.95:  # Nsight Compute: no block limit impacts it
            assert "not limited by any block limit" in note and "limit set by" not in note
        if theoretical is not None and achieved is None:
            assert f"{theoretical:.0f}% theoretical, achieved not measured" in note
        if theoretical is not None and achieved is not None:
            assert f"occupancy {achieved:.0f}% achieved of {theoretical:.0f}% theoretical" in note


@pytest.mark.parametrize("relative", NCU_REPORTS)
def test_a_latency_bound_reason_names_the_top_warp_stall(labelled, relative):
    pattern = re.compile(r"smsp__average_warps?_(?:latency_)?issue_stalled_(\w+?)_per_issue_active\.ratio")
    for action, k in labelled(relative):
        stalls = {m.group(1): action.metric_by_name(n).as_double() for n in action.metric_names()
                  for m in [pattern.fullmatch(n)] if m and m.group(1) != "selected" and "_not_issued" not in n}
        if k["bound"] != "latency" or not stalls:
            assert "top warp stall" not in k["bound_reason"]
            continue
        top = max(stalls, key=stalls.get)
        assert k["bound_reason"].endswith(
            f"; top warp stall: {ncu_sections.stall_label(top)} ({stalls[top]:.1f} cycles per issued instruction)")


# -- /kernel: the drawer's document --------------------------------------------------------------
@pytest.fixture(scope="module")
def kernel_app(tmp_path_factory, samples_dir):
    """The plugin's backend over a basic-set report (spyinfer, 3 sections) and a tracer's run."""
    import tb_hwprof
    from support_plugin import App
    spy, nsys = samples_dir / "ncu/spyinfer_a10_105launches_2023.2.0.ncu-rep", samples_dir / "nsys/annikola_gtx1050_2024.5.1.sqlite"
    if not spy.is_file() or not nsys.is_file():
        pytest.skip("spyinfer / annikola samples missing")
    logdir = tmp_path_factory.mktemp("kernel-doc")
    tb_hwprof.export(spy, logdir, run="spy")
    tb_hwprof.export(nsys, logdir, run="nsys")
    return App(logdir)


def test_kernel_document_of_a_basic_report(kernel_app, samples_dir, ncu_report_module):
    action = list(ncu_actions(ncu_report_module, samples_dir / "ncu/spyinfer_a10_105launches_2023.2.0.ncu-rep"))[57]
    doc = kernel_app.json("/kernel", run="spy", launch="57")
    held = report_sections(action)
    assert [s["id"] for s in doc["sections"]] == [i for i, _, _ in ncu_sections.SECTIONS if i in held]
    for section in doc["sections"]:
        for r in shown_rows(section):
            expected = ncu_value(action, r["metric"])  # text as it is (pytest 9.2's approx takes numbers only)
            assert r["value"] == (expected if isinstance(expected, str) else pytest.approx(expected, rel=1e-12))
        parent = {s.identifier(): s.parent_identifier() or s.identifier() for s in action.sections()}
        filed = [i for i, rule in enumerate(action.rule_results_as_dicts())
                 if parent.get(rule.get("section_identifier")) == section["id"]]
        assert section["rules"] == filed  # the rules the report files under the section or its charts
    assert len(doc["rule_messages"]) == len(doc["rules"])
    for rule, parts in zip(doc["rules"], doc["rule_messages"]):
        assert [p["kind"] for p in parts].count("section") == rule["message"].count("@section:")
        assert [p["kind"] for p in parts].count("url") == rule["message"].count("@url:")
        assert not any("@section:" in p["text"] or "@url:" in p["text"] for p in parts)


def test_kernel_document_of_a_tracer_run_has_no_sections(kernel_app):
    doc = kernel_app.json("/kernel", run="nsys", launch="0")
    assert doc["sections"] == [] and doc["rule_messages"] == [] and doc["raw_metrics"] == {}


# -- units: shown as Nsight Compute gives them, with what the stall figures measure ------------------
@pytest.mark.parametrize("relative", FULL_SETS)
def test_stall_charts_keep_nsight_computes_units_and_say_what_they_measure(launches, fresh_units, relative):
    """ncu gives the stall ratios the unit 'inst' and the sampled stalls 'warp', 'inst', 'branches':
    the rows keep ncu_report's unit, and the chart's note names exactly those units."""
    notes = 0
    for (action, raw, rules), theirs in zip(launches(relative), fresh_units(relative)):
        for section in ncu_sections.sections(raw, rules):
            for fig in section["figures"]:
                if fig["id"] not in ("warp_stalls", "sampled_stalls"):
                    continue
                units = {theirs[r["metric"]] for r in fig["rows"]}
                assert {r["unit"] for r in fig["rows"]} == units
                named = set(re.findall(r"'([^']+)'", fig["unit_note"]))
                assert named == units - {""}, fig["unit_note"]
                word = "cycles" if fig["id"] == "warp_stalls" else "samples"
                assert word in fig["unit_note"]
                notes += 1
    assert notes, f"{relative}: no stall chart"


# -- custom sections: the report's own section files (lashi: LoadMetrics, StoreMetrics, SharedMemAnalysis)
LASHI = "ncu/lashi_rtx4090_sections_2023.1.0.ncu-rep"


@pytest.fixture(scope="module")
def lashi_app(tmp_path_factory, samples_dir):
    import tb_hwprof
    from support_plugin import App
    if not (samples_dir / LASHI).is_file():
        pytest.skip(f"{LASHI} not in the samples")
    logdir = tmp_path_factory.mktemp("custom-sections")
    tb_hwprof.export(samples_dir / LASHI, logdir, run="lashi")
    return App(logdir)


def test_custom_sections_are_shown_with_nsight_computes_titles_labels_and_values(lashi_app, samples_dir, ncu_report_module):
    known = {section_id for section_id, _, _ in ncu_sections.SECTIONS}
    customs = 0
    fresh = fresh_ncu_oracle(samples_dir / LASHI)  # units as ncu_report gives them for this report alone
    for launch, action in enumerate(ncu_actions(ncu_report_module, samples_dir / LASHI)):
        doc = lashi_app.json("/kernel", run="lashi", launch=str(launch))
        ours = {s["id"]: s for s in doc["sections"]}
        assert len(ours) == len(doc["sections"])  # no section twice
        for section in action.sections():
            if section.identifier() in known or section.parent_identifier():
                continue
            expected = {part: [(m.name(), m.label()) for m in metrics if not m.name().startswith("regex:")]
                        for part, metrics in (("rows", section.header_metrics()), ("body", section.body_metrics()))}
            shown = ours[section.identifier()]
            assert shown["custom"] and shown["title"] == section.name() and shown["description"] == section.description()
            for part, listed in expected.items():
                assert [(r["metric"], r["label"]) for r in shown[part]] == listed, (section.identifier(), part)
                for r in shown[part]:
                    value = ncu_value(action, r["metric"])
                    assert r["value"] == (value if isinstance(value, str) else pytest.approx(value, rel=1e-12))
                    assert r["unit"] == fresh[launch][0][r["metric"]][1]
            customs += 1
    assert customs >= 3 * 5  # LoadMetrics, StoreMetrics, SharedMemAnalysis in each of the 5 launches


def test_a_report_of_known_sections_only_adds_none(kernel_app):
    doc = kernel_app.json("/kernel", run="spy", launch="0")
    assert not any(s.get("custom") for s in doc["sections"])
