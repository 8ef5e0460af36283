"""One vocabulary for "bound" (issue 32 item 1), on the real H200 pair joined per configuration:
every label travels with its method (counters: Nsight Compute's speed-of-light rule; roofline: the
roof that binds at the intensity), and where the two name opposite sides one note says so.

The expected sides, ridge points and disagreements are computed here from the run's kernels table
and the device's roofs as the exporter wrote them, independently of analysis/bound_terms.py."""
from __future__ import annotations

import re

import pytest

import tb_hwprof
from conftest import export_h200_pair
from support_plugin import App

RUN = "h200_bound"
MEMORY_ROOFS = {"dram": "DRAM", "l2": "L2", "l1": "L1"}


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir):
    root = export_h200_pair(samples_dir, tmp_path_factory, tmp_path_factory.mktemp("bound") / "logs", RUN)
    return root


@pytest.fixture(scope="module")
def app(logdir):
    return App(logdir)


def expected_side(binding_roof) -> str:
    return "memory" if binding_roof in MEMORY_ROOFS else "compute" if binding_roof == "compute" else ""


def test_every_roofline_point_carries_both_methods_with_the_ridge_of_its_own_roofs(app, logdir):
    doc = app.json("/roofline", run=RUN)
    bandwidth = {k[len("bytes_per_s_"):]: r["value"] for d in doc["devices"] for k, r in d["roofs"].items()
                 if k.startswith("bytes_per_s_")}
    kernels = tb_hwprof.load_run(logdir / RUN, with_details=False).kernels.set_index("launch_id")
    checked = 0
    for p in doc["points"]:
        row = kernels.loc[p["launch_id"]]
        assert p["roofline_bound"] == expected_side(row["binding_roof"])
        if row["binding_roof"] in MEMORY_ROOFS:
            # The ridge point of the point's compute roof and its binding memory roof, from the device.
            ridge = row["peak_flop_per_s"] / bandwidth[row["binding_roof"]]
            shown = re.search(r"ridge point at ([0-9.e+-]+) FLOP/byte", p["roofline_reason"])
            assert shown and float(shown.group(1)) == pytest.approx(ridge, rel=5e-3), p["roofline_reason"]
            assert f"the {MEMORY_ROOFS[row['binding_roof']]} roof binds" in p["roofline_reason"]
            checked += 1
    assert checked >= 10


def test_a_note_appears_exactly_where_the_methods_name_opposite_sides(app, logdir):
    doc = app.json("/roofline", run=RUN)
    kernels = tb_hwprof.load_run(logdir / RUN, with_details=False).kernels.set_index("launch_id")
    opposite = {p["launch_id"] for p in doc["points"]
                if {kernels.loc[p["launch_id"], "bound"], expected_side(kernels.loc[p["launch_id"], "binding_roof"])}
                == {"compute", "memory"}}
    noted = {p["launch_id"] for p in doc["points"] if p["bound_note"]}
    assert opposite, "the pair has kernels on which the two methods disagree (the issue's case)"
    assert noted == opposite
    for p in doc["points"]:
        if p["bound_note"]:
            assert p["bound_reason"] in p["bound_note"] and p["roofline_reason"] in p["bound_note"]


def test_the_drawer_document_names_each_method_and_its_rule(app, logdir):
    kernels = tb_hwprof.load_run(logdir / RUN, with_details=False).kernels
    i = next(i for i, (b, r) in enumerate(zip(kernels["bound"], kernels["binding_roof"]))
             if b == "compute" and expected_side(r) == "memory")
    doc = app.json("/kernel", run=RUN, launch=i)
    assert doc["bound"]["counters"]["label"] == "compute"
    assert doc["bound"]["counters"]["reason"] == kernels["bound_reason"].iloc[i]
    assert "speed-of-light" in doc["bound"]["counters"]["rule"]
    assert doc["bound"]["roofline"]["label"] == "memory"
    assert "ridge point" in doc["bound"]["roofline"]["rule"]
    assert doc["bound"]["note"].startswith("The methods disagree.")


def test_operators_say_where_the_shape_roofline_and_the_counters_disagree(app):
    doc = app.json("/operators", run=RUN)
    rows = [o for o in doc["ops"] if o.get("bound") and o.get("bound_mix")]
    assert rows
    for o in rows:
        # The counters' answer is the label with the largest share of the op's counted time.
        shares = [(float(part.rsplit(" ", 1)[1].rstrip("%")), part.rsplit(" ", 1)[0]) for part in o["bound_mix"].split(", ")]
        dominant = max(shares, key=lambda s: s[0])[1]
        opposite = {dominant, o["bound"]} == {"compute", "memory"}
        assert bool(o.get("bound_note")) == opposite, o
