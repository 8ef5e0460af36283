"""op_shapes against TraceLens's own GEMM.csv / SDPA_fwd.csv for the four traces it reported on:
every reference row has its row here, with the same instance count, GPU time, FLOPs and bytes."""
import csv
import json

import pytest

import tb_hwprof
from tb_hwprof.core.columnar import object_factorize
from tb_hwprof.analysis.torch_shapes import op_shapes

TRACES = ["tracelens_h100_bert_small", "tracelens_h100_falconsai_vit", "tracelens_mi300x_bert_small",
          "tracelens_mi300x_falconsai_vit"]


def _compact(python_literal: str) -> str:
    """TraceLens prints Input Dims as a Python literal ("[[512], [141, 512], []]"); ours is compact JSON."""
    return json.dumps(json.loads(python_literal), separators=(",", ":"))


@pytest.mark.parametrize("trace", TRACES)
def test_op_shapes_equal_tracelens_gemm_and_sdpa_tables(samples_dir, trace):
    folder = samples_dir / "torch" / "tracelens_reference" / trace
    if not folder.is_dir():
        pytest.skip(trace)
    profile = tb_hwprof.read(samples_dir / "torch" / f"{trace}.json.gz")
    shapes = op_shapes(profile.torch, profile.devices)
    matched = 0
    for table in ("GEMM.csv", "SDPA_fwd.csv"):
        with open(folder / table, newline="", encoding="utf-8") as f:
            for ref in csv.DictReader(f):
                row = shapes[(shapes["op"] == ref["name"]) & (shapes["input_dims"] == _compact(ref["Input Dims_first"]))]
                assert len(row) == 1, (table, ref["name"], ref["Input Dims_first"])
                row = row.iloc[0]
                assert row["calls"] == int(ref["name_count"])
                # TraceLens's kernel times are float µs differences (~1 ns of rounding per kernel).
                assert row["gpu_ns"] == pytest.approx(float(ref["Kernel Time (µs)_sum"]) * 1000, abs=2 * int(row["calls"]))
                assert row["flops_per_call"] == pytest.approx(float(ref["GFLOPS_first"]) * 1e9, rel=1e-9)
                assert row["bytes_per_call"] / 2**20 == pytest.approx(float(ref["Data Moved (MB)_first"]), rel=1e-9)
                matched += 1
    assert matched >= 5


def test_op_shapes_count_each_gpu_ns_once(samples_dir):
    """Ops inside a modelled op hand it their GPU time: the table sums to the GPU time operators launched."""
    profile = tb_hwprof.read(samples_dir / "torch" / "tracelens_h100_falconsai_vit.json.gz")
    shapes = op_shapes(profile.torch, profile.devices)
    gpu = profile.torch.gpu
    launched = gpu[gpu["op"] >= 0]
    assert shapes["gpu_ns"].sum() == pytest.approx(float((launched["end_ns"] - launched["start_ns"]).sum()))


def test_bound_label_follows_the_ridge_point(samples_dir):
    profile = tb_hwprof.read(samples_dir / "torch" / "tracelens_mi300x_falconsai_vit.json.gz")
    shapes = op_shapes(profile.torch, profile.devices)
    peaks = profile.devices[0].peaks
    for row in shapes[shapes["bound"] != ""].itertuples():
        ridge = peaks[f"flop_per_s_{row.roof}"].value / peaks["bytes_per_s_dram"].value
        assert row.bound == ("compute" if row.flops_per_call / row.bytes_per_call >= ridge else "memory")
        assert f"{ridge:.1f}" in row.bound_reason


@pytest.mark.parametrize("distinct", [None, 70_000])
def test_shape_groups_are_the_distinct_name_and_shape_tuples_in_order_of_first_sight(samples_dir, distinct):
    """_shape_groups against a dict over the rows' (name, dims, types, concrete) tuples, on a real
    trace's operators; and with 70,000 distinct values per column (the combinations overflow one
    integer key: the key is renumbered on the way) from those operators made unique."""
    import numpy as np
    import pandas as pd
    from tb_hwprof.analysis.torch_shapes import GROUP, _shape_groups
    path = samples_dir / "torch" / "hta_v100_resnet_rank0.json.gz"
    if not path.is_file():
        pytest.skip("hta_v100_resnet_rank0.json.gz")
    ops = tb_hwprof.read(path).torch.ops[GROUP[1:] + ["name"]]
    if distinct is not None:
        ops = pd.concat([ops] * (distinct // len(ops) + 1), ignore_index=True).iloc[:distinct]
        ops = ops.assign(**{c: ops[c] + pd.Series(np.arange(len(ops)) % 65_000, dtype=str) for c in GROUP[1:] + ["name"]})
    tuples = list(zip(*(ops[c].tolist() for c in ["name"] + GROUP[1:])))
    first_seen = {}
    want = [first_seen.setdefault(t, len(first_seen)) for t in tuples]
    codes, uniques = _shape_groups(ops)
    assert codes.tolist() == want
    assert uniques == list(first_seen)
    # The op names' codes handed in (as torch_tables does) change nothing.
    named_codes, named_uniques = _shape_groups(ops, object_factorize(ops["name"].to_numpy()))
    assert named_codes.tolist() == want
    assert named_uniques == list(first_seen)


