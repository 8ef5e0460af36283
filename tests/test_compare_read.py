"""Compare reads only the columns it needs from a kernels file (compare_cli.read_selected_columns):
on real exported runs of each kind every compared column equals what a parse of the whole file
gives, and the other columns' values are not parsed."""
import numpy as np
import orjson
import pytest

from tb_hwprof import cli, compare_cli
from tb_hwprof.logdir import columns, metadata, reader, tables

from conftest import sample

RUNS = {"ncu": "ncu/raytracer_gtx1660s_2021.1.0.ncu-rep", "ncu_series": "ncu/armleth_t4_series/report_v2.ncu-rep",
        "nsys": "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite", "torch": "torch/tracelens_mi300x_bert_small.json.gz",
        "hta": "torch/hta_trace_diff_control.json.gz"}


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
    wanted = compare_cli._compared_columns("duration_ns")
    picked = compare_cli.read_selected_columns(raw, wanted)
    assert picked["rows"] == whole["rows"] and picked["columns"] == whole["columns"]
    for column in wanted & set(whole["columns"]):
        expected = np.asarray(columns.decode_column(whole, column), dtype=object)
        assert np.array_equal(np.asarray(columns.decode_column(picked, column), dtype=object), expected), column
    # Only the wanted columns were parsed (the selective path ran, not the whole-file fallback).
    unwanted = [c for c in whole["columns"] if c not in wanted and c not in whole.get("constant", {})]
    assert unwanted and not any(c in picked[kind] for c in unwanted for kind in ("data", "delta", "dictionary"))


def test_a_file_of_another_layout_is_read_whole():
    doc = {"columns": ["name"], "rows": 2, "data": {"name": ["a]", 'b"]']}}  # format 1: "data" only, last
    assert compare_cli.read_selected_columns(orjson.dumps(doc), {"name"}) == doc
