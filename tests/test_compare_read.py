"""Compare reads only what it needs of a written run: the per-instantiation compare table the export
writes (analysis/compare.compare_table), or, for a run exported before it, only the compared columns
of its kernels file (kernel_columns.read_selected_columns).  On real exported runs of each kind both
give what the whole kernels table gives."""
import json
import shutil

import numpy as np
import orjson
import pytest

import tb_hwprof
from tb_hwprof.app import cli, compare_cli
from tb_hwprof.analysis import compare
from tb_hwprof.core.errors import InputError
from tb_hwprof.logdir import columns, kernel_columns, metadata, reader, tables
from tb_hwprof.plugin import encode, store, views

from conftest import sample

RUNS = {"ncu": "ncu/raytracer_gtx1660s_2021.1.0.ncu-rep", "ncu_series": "ncu/armleth_t4_series/report_v2.ncu-rep",
        "nsys": "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite", "torch": "torch/tracelens_mi300x_bert_small.json.gz",
        "hta": "torch/hta_trace_diff_control.json.gz", "hta_test": "torch/hta_trace_diff_test.json.gz",
        "rocprof": "rocprof/v3_docs_kernel_trace_newer.csv", "rocpd": "rocprof/v3_rocpd_mi300x_ck_bmm_results.db"}


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir):
    root = tmp_path_factory.mktemp("compare_read")
    for run, relative in RUNS.items():
        assert cli.main(["export", str(sample(samples_dir, relative)), "--logdir", str(root), "--run", run, "--quiet"]) == 0
    return root


@pytest.mark.parametrize("run", sorted(RUNS))
def test_selected_columns_equal_the_whole_files(logdir, run):
    raw = tables.read_gz_bytes(reader.asset_dir(logdir / run) / metadata.KERNELS)
    whole = orjson.loads(raw)
    wanted = compare.compared_columns("duration_ns")
    picked = kernel_columns.read_selected_columns(raw, wanted)
    assert picked["rows"] == whole["rows"] and picked["columns"] == whole["columns"]
    for column in wanted & set(whole["columns"]):
        expected = np.asarray(columns.decode_column(whole, column), dtype=object)
        assert np.array_equal(np.asarray(columns.decode_column(picked, column), dtype=object), expected), column
    # Only the wanted columns were parsed (the selective path ran, not the whole-file fallback).
    unwanted = [c for c in whole["columns"] if c not in wanted and c not in whole.get("constant", {})]
    assert unwanted and not any(c in picked[kind] for c in unwanted for kind in ("data", "delta", "dictionary"))


def test_a_file_of_another_layout_is_read_whole():
    doc = {"columns": ["name"], "rows": 2, "data": {"name": ["a]", 'b"]']}}  # format 1: "data" only, last
    assert kernel_columns.read_selected_columns(orjson.dumps(doc), {"name"}) == doc


# -- the compare table ---------------------------------------------------------------------------
def _full_set(run_dir):
    """The kernel set of the run's whole kernels table, as tb_hwprof.load_run reads it back."""
    return compare.kernel_set(tb_hwprof.load_run(run_dir, with_details=False).kernels)


def _plain(doc) -> dict:
    return json.loads(encode.dumps(doc))


@pytest.mark.parametrize("run", sorted(RUNS))
def test_compare_table_equals_the_launches(logdir, run):
    """Every per-key figure, the launch configuration pairing reads and the representative launch the
    pair detail shows equal what the whole kernels table gives."""
    manifest = reader.read_manifest(logdir / run)
    table = compare_cli.read_compare_table(logdir / run, manifest)
    assert table is not None and int(table["launches"].sum()) == manifest["kernel_count"]
    full, fast = _full_set(logdir / run), compare.kernel_set_from_table(table)
    assert fast.keys == full.keys and fast.groups == full.groups
    assert fast.total_ns == full.total_ns and fast.device_ids == full.device_ids
    assert full.device_ids, run
    full.configs = None  # computed from the launches, all keys at once
    assert compare.launch_configs(fast, fast.keys) == compare.launch_configs(full, full.keys)
    for key in full.keys:
        assert compare.representative_launch(fast, key) == compare.representative_launch(full, key), key


def test_the_run_total_is_the_sum_of_the_launches(logdir, samples_dir):
    """The total compare reports is the sum of all launches' durations (sqlite3 over the nsys export)."""
    import sqlite3
    with sqlite3.connect(sample(samples_dir, RUNS["nsys"])) as db:
        total, = db.execute("SELECT SUM(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    table = compare_cli.read_compare_table(logdir / "nsys", reader.read_manifest(logdir / "nsys"))
    assert compare.kernel_set_from_table(table).total_ns == float(total)


PAIRS = [("ncu", "ncu_series"), ("hta", "hta_test"), ("nsys", "torch"), ("ncu", "nsys"), ("rocprof", "rocpd"),
         ("torch", "rocpd"), ("ncu_series", "ncu")]


@pytest.mark.parametrize("base, run", PAIRS)
def test_cli_compare_from_the_tables_equals_the_launches(logdir, base, run, capsys):
    """`tb-hwprof compare --format json` of two written runs equals the comparison of their whole kernels
    tables (compare.compare_kernels over load_run's tables), gate included."""
    assert cli.main(["compare", str(logdir / base), str(logdir / run), "--format", "json",
                     "--fail-if-slower", "0"]) in (0, 1)
    printed = json.loads(capsys.readouterr().out)
    sides = [compare_cli.load_side(str(logdir / r)) for r in (base, run)]
    assert all(side.kernels is None for side in sides)  # the tables stood in for the launches
    expected = compare.compare_sets(_full_set(logdir / base), _full_set(logdir / run), (), sides[0].info, sides[1].info,
                                    (sides[0].operators, sides[1].operators))
    assert {k: printed[k] for k in expected} == _plain(expected)


def _as_exported_before(run_dir, folder):
    """A copy of the run as an export before the compare table wrote it: no table, not listed."""
    copy = folder / run_dir.name
    shutil.copytree(run_dir, copy)
    assets = reader.asset_dir(copy)
    manifest = json.loads((assets / metadata.MANIFEST).read_text())
    name = manifest["files"].pop(metadata.summary_key(compare.COMPARE_TABLE))
    manifest["inflated_bytes"].pop(name)
    (assets / name).unlink()
    (assets / metadata.MANIFEST).write_text(json.dumps(manifest))
    return copy


def test_runs_exported_before_the_table_still_compare(logdir, tmp_path, capsys):
    """CLI and plugin: runs without the table compare from their kernels tables, to the same document."""
    old = tmp_path / "old"
    for run in ("ncu", "ncu_series"):
        _as_exported_before(logdir / run, old)
    outputs = []
    for folder in (logdir, old):
        assert cli.main(["compare", str(folder / "ncu"), str(folder / "ncu_series"), "--format", "json"]) == 0
        outputs.append(json.loads(capsys.readouterr().out))
    assert compare_cli.load_side(str(old / "ncu")).kernels is not None
    assert {k: v for k, v in outputs[1].items() if k not in ("base", "run")} == \
        {k: v for k, v in outputs[0].items() if k not in ("base", "run")}
    docs = []
    for folder in (logdir, old):
        runs = store.RunStore(str(folder))
        docs.append(views.compare_runs(*(runs.entry(r, runs.run_dir(r)) for r in ("ncu", "ncu_series"))))
    assert _plain(docs[0]) == _plain(docs[1])


def test_pair_detail_from_the_table_equals_the_launches(logdir, tmp_path):
    """/compare_pair: the representative launches and their rows are those of the whole tables."""
    old = tmp_path / "old"
    for run in ("hta", "hta_test"):
        _as_exported_before(logdir / run, old)
    details = []
    for folder in (logdir, old):
        runs = store.RunStore(str(folder))
        base, run = (runs.entry(r, runs.run_dir(r)) for r in ("hta", "hta_test"))
        doc = views.compare_runs(base, run)
        pair = max(doc["matched"], key=lambda m: m["base_ns"] or 0)
        details.append(_plain(views.compare_pair(base, run, pair["key"], pair["run_key"])))
    assert details[0] == details[1] and details[0]["rows"]


def _damage_table(run_dir, change):
    assets = reader.asset_dir(run_dir)
    manifest = json.loads((assets / metadata.MANIFEST).read_text())
    path = assets / manifest["files"][metadata.summary_key(compare.COMPARE_TABLE)]
    doc = tables.read_json_gz(path)
    change(doc)
    tables.write_json_gz(path, doc)
    manifest["inflated_bytes"][path.name] = tables.inflated_size(path)
    (assets / metadata.MANIFEST).write_text(json.dumps(manifest))
    return path


DAMAGE = {"launches": lambda doc: doc["data"]["launches"].__setitem__(0, doc["data"]["launches"][0] + 1),
          "text key": lambda doc: doc["data"]["key"].__setitem__(0, 7),
          "duplicate key": lambda doc: doc["data"]["key"].__setitem__(-1, doc["data"]["key"][0]),
          "no column": lambda doc: (doc["columns"].remove("launch_config"), doc["data"].pop("launch_config")),
          "launch outside": lambda doc: doc["data"]["launch"].__setitem__(0, 10 ** 9)}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_compare_table_is_refused(logdir, tmp_path, damage, capsys):
    """A compare table that is not what the export wrote is one error naming the file, never a figure."""
    damaged = tmp_path / "d"
    for run in ("ncu", "ncu_series"):
        shutil.copytree(logdir / run, damaged / run)
    path = _damage_table(damaged / "ncu", DAMAGE[damage])
    with pytest.raises(InputError) as caught:
        compare_cli.load_side(str(damaged / "ncu"))
    assert path.name in str(caught.value) and "\n" not in str(caught.value)
    assert cli.main(["compare", str(damaged / "ncu"), str(damaged / "ncu_series")]) != 0
    assert path.name in capsys.readouterr().err
    runs = store.RunStore(str(damaged))
    with pytest.raises(Exception) as served:
        views.compare_runs(*(runs.entry(r, runs.run_dir(r)) for r in ("ncu", "ncu_series")))
    assert path.name in str(served.value)



def test_the_compare_table_is_not_listed_as_a_summary(logdir):
    """The compare table indexes the run for compare: the Summaries view does not list it."""
    assert compare.COMPARE_TABLE in metadata.UNLISTED_SUMMARIES
    manifest = reader.read_manifest(logdir / "nsys")
    listed = dict(metadata.listed_summary_names(manifest["files"]))
    assert compare.COMPARE_TABLE in dict(metadata.summary_names(manifest["files"])) and compare.COMPARE_TABLE not in listed
    runs = store.RunStore(str(logdir))
    names = [t["name"] for t in views.summary_views.summaries(runs.entry("nsys", runs.run_dir("nsys")))["tables"]]
    assert sorted(names) == sorted(listed)
