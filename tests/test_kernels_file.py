"""kernels.json.gz format 2 (constant, dictionary and delta columns) against format 1, on real
profiles, and runs without details files (tracers)."""
import gzip
import json
import tracemalloc

import numpy as np
import pandas as pd
import pytest

import tb_hwprof
from tb_hwprof.logdir import columns, metadata, reader, tables, writer
from tb_hwprof.core.model import KERNEL_COLUMNS, normalise_kernels

from conftest import sample
from support_plugin import App

# Real profiles of every kind of reader: counters (ncu, rocprof-compute), traces (nsys, rocprof), CPU (VTune).
PROFILES = [
    "ncu/spyinfer_a10_105launches_2023.2.0.ncu-rep",
    "ncu/aplainjane_rtx3060l_full_7k_2024.1.0.ncu-rep",
    "ncu/lakshya_gtx1660s_full_2024.1.1.ncu-rep",
    "ncu/esmm_a10g_cli_metrics_ncu-csv.csv",
    "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite",
    "nsys/gpu4_t4_2022.4.2.sqlite",
    "nsys/annikola_gtx1050_2024.5.1.sqlite",
    "nsys/testcuda_rtx4060ti_2026.1.1.sqlite",
    "rocprof/rocprof-compute_bmm1_mi300x",
    "rocprof/v3_rocpd_mi300x_ck_bmm_results.db",
    "rocprof/v1_mi250x_laplacian/results.csv",
    "rocprof/v3_docs_kernel_trace_newer.csv",
    "vtune/amplxe2018_advanced_hotspots_loops.csv",
]
NSYS = "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite"


@pytest.fixture
def profile(request, read_sample):
    if request.param.endswith(".ncu-rep"):
        request.getfixturevalue("ncu_report_module")
    return read_sample(request.param)


def write_format_1(path, kernels: pd.DataFrame) -> None:
    """kernels.json.gz as format 1 wrote it: every column value by value in "data"."""
    units = {c: KERNEL_COLUMNS[c][0] for c in kernels.columns if c in KERNEL_COLUMNS}
    tables.write_json_gz(path, tables.clean(tables.frame_to_json(kernels, units)))


def dense(kernels: pd.DataFrame) -> pd.DataFrame:
    """The table as it reads back: normalised, sparse columns (all-NaN counters) made dense."""
    return normalise_kernels(kernels.astype(
        {c: "float64" for c in kernels.columns if isinstance(kernels[c].dtype, pd.SparseDtype)}))


def read_kernels_file(path) -> pd.DataFrame:
    return tables.kernels_from_json(tables.read_json_gz(path))


@pytest.mark.parametrize("profile", PROFILES, indirect=True)
def test_format_2_reads_back_the_table_format_1_gives(profile, tmp_path):
    write_format_1(tmp_path / "v1.json.gz", profile.kernels)
    tables.write_kernels_gz(tmp_path / "v2.json.gz", profile.kernels)
    v1, v2 = read_kernels_file(tmp_path / "v1.json.gz"), read_kernels_file(tmp_path / "v2.json.gz")
    pd.testing.assert_frame_equal(dense(v2), v1, check_dtype=True)  # dtypes, NaN where NaN, every string
    pd.testing.assert_frame_equal(v1, dense(profile.kernels), check_dtype=True)
    # Format 2 gives back the profile's own table: its sparse all-NaN columns sparse, the others dense.
    pd.testing.assert_frame_equal(v2, normalise_kernels(profile.kernels), check_dtype=True)
    doc = tables.read_json_gz(tmp_path / "v2.json.gz")
    assert sorted([*doc["data"], *doc["delta"], *doc["constant"], *doc["dictionary"]]) == sorted(doc["columns"])
    assert columns.data_only(doc)["data"] == tables.read_json_gz(tmp_path / "v1.json.gz")["data"]


def test_trace_columns_are_constants_and_dictionaries(read_sample, tmp_path):
    """A tracer's counter columns are all null: each is one constant; names are dictionaries."""
    kernels = read_sample(NSYS).kernels
    tables.write_kernels_gz(tmp_path / "k.json.gz", kernels)
    doc = tables.read_json_gz(tmp_path / "k.json.gz")
    assert doc["constant"]["achieved_occupancy_pct"] is None and doc["constant"]["occupancy_limiter"] == ""
    names = doc["dictionary"]["name"]
    assert names["values"] == list(dict.fromkeys(kernels["name"]))  # distinct names, in order of appearance
    assert [names["values"][c] for c in names["codes"]] == kernels["name"].tolist()
    assert {"launch_id", "duration_ns"} <= set(doc["data"])  # 46 launch ids, durations: as they are
    assert {"start_ns", "end_ns"} <= set(doc["delta"])  # 10-digit timestamps, small steps
    assert doc["data"]["duration_ns"] == kernels["duration_ns"].astype("int64").tolist()  # whole numbers
    steps = doc["delta"]["start_ns"]
    assert steps[0] == kernels["start_ns"][0] and np.cumsum(steps).tolist() == kernels["start_ns"].tolist()
    text = gzip.decompress((tmp_path / "k.json.gz").read_bytes())
    assert b'"start_ns":[' + str(int(kernels["start_ns"][0])).encode() + b"," in text  # no ".0"


def test_constant_text_reads_back_as_one_shared_object(samples_dir, tmp_path):
    """A trace's constant labels (bound "unknown", its reason) come back as one str referenced by
    every row, as the exporting process held them: a copy per row (np.full's way with text) made a
    1M-launch trace's table ~380 MB bigger in the plugin's memory."""
    from tb_hwprof.core.columnar import object_pointers
    profile = tb_hwprof.read(sample(samples_dir, NSYS))  # its own copy: the labels are filled in place
    tb_hwprof.analysis.pipeline.analyse(profile)  # the labels, as the export writes them
    tables.write_kernels_gz(tmp_path / "k.json.gz", profile.kernels)
    doc = json.loads(gzip.decompress((tmp_path / "k.json.gz").read_bytes()))
    text = {c: v for c, v in doc["constant"].items() if isinstance(v, str) and v}
    assert {"bound", "bound_reason", "occupancy_source"} <= set(text)
    back = read_kernels_file(tmp_path / "k.json.gz")
    for column, value in text.items():
        values = back[column].to_numpy()
        assert values.dtype == object and (values == value).all(), column
        assert np.unique(object_pointers(values)).size == 1, f"{column}: a str per row"


def test_sparse_all_null_columns_are_not_densified(read_sample, tmp_path):
    """The model may keep all-NaN counters sparse: written as constants without a dense copy."""
    base = dense(read_sample(NSYS).kernels)
    rows = 200_000
    table = normalise_kernels(base.iloc[np.arange(rows) % len(base)].reset_index(drop=True))
    table["launch_id"] = np.arange(rows)
    sparse = table.copy()
    all_null = [c for c in table.columns if table[c].dtype == "float64" and table[c].isna().all()]
    assert len(all_null) > 25
    for c in all_null + ["duration_ns"]:  # duration_ns has values: densified on its own
        sparse[c] = pd.arrays.SparseArray(table[c].to_numpy(), fill_value=np.nan)
    tables.write_kernels_gz(tmp_path / "dense.json.gz", table)
    tracemalloc.start()
    tables.write_kernels_gz(tmp_path / "sparse.json.gz", sparse)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    as_dense, as_sparse = (tables.read_json_gz(tmp_path / f"{k}.json.gz") for k in ("dense", "sparse"))
    assert as_dense.pop("sparse") == [] and sorted(as_sparse.pop("sparse")) == sorted(all_null)
    assert as_sparse == as_dense  # the same columns, constants and values
    one_column = rows * 8
    # Densified, the ~30 all-null columns would be ~30 columns' worth at once; the encoder holds one
    # column plus the gzip thread's queue of encoded pieces, whose length depends on thread timing
    # (6-9 columns' worth seen): 15 tells the two apart without flaking.
    assert peak < 15 * one_column, f"{peak / one_column:.1f} dense columns' worth at once"
    pd.testing.assert_frame_equal(read_kernels_file(tmp_path / "dense.json.gz"), table)
    back = read_kernels_file(tmp_path / "sparse.json.gz")  # the all-null ones sparse again, holding nothing
    assert [c for c in back.columns if isinstance(back[c].dtype, pd.SparseDtype)] == all_null
    assert all(back[c].array.sp_values.size == 0 for c in all_null)
    pd.testing.assert_frame_equal(dense(back), table)


def encoded(values, **kw):
    return columns.encode_column(pd.Series(values), **kw)


def test_column_rules():
    a, b = "x" * 50, "".join(["x"] * 50)  # equal text, two objects
    assert a is not b
    assert encoded([a, b, a, b]) == ("constant", a)
    kind, (strings, codes) = encoded(["k1", "k2", "k1", "k1", "k2", "k1"])
    assert kind == "dictionary" and strings == ["k1", "k2"] and codes.tolist() == [0, 1, 0, 0, 1, 0]
    assert encoded(["a", "b", "c", "a"]).kind == "data"  # 3 distinct in 4 rows: more than half
    assert encoded(["only"]).kind == "data"  # one row: nothing repeats
    assert encoded([np.nan, np.nan]) == ("constant", None)
    assert encoded([0.0, -0.0]).kind == "data"  # bit for bit: -0.0 is not 0.0
    assert encoded([1.0, 2.0], whole_floats=True).payload.dtype == np.int64
    assert encoded([1.0, 2.5], whole_floats=True).payload.dtype == np.float64
    assert encoded([1.0, np.nan], whole_floats=True).payload.dtype == np.float64
    assert encoded([-0.0, 1.0], whole_floats=True).payload.dtype == np.float64
    assert encoded([1.0, 2.0]).payload.dtype == np.float64  # only where the reader restores floats
    ids = np.arange(10_000)
    kind, steps = encoded(ids)
    assert kind == "delta" and steps.dtype == np.uint8 and steps.tolist() == [0] + [1] * 9999
    assert encoded(np.arange(100_000)[::-1]).payload.tolist() == [99_999] + [-1] * 99_999  # "-1": 2 characters
    assert encoded(np.arange(1000)).kind == "data"  # 3 digits vs 1: too little to save
    assert encoded(ids.astype(float) * 10**9 + 5e12, whole_floats=True).kind == "delta"
    assert encoded(ids.astype(float) * 10**9 + 5e12).kind == "data"  # not whole_floats: the reader keeps ints
    jumpy = np.random.default_rng(0).integers(0, 10**6, 1000)
    assert encoded(jumpy).kind == "data"  # steps as long as the values
    assert encoded(ids + 2**52).kind == "data"  # beyond what a JavaScript double sums exactly
    assert encoded(["a", 1, "a", 1]).kind == "data"  # not a string column
    occupancy = np.tile([46.875, np.nan, 50.0, -0.0, 0.0], 200)  # one figure per launch configuration
    kind, (values, codes) = encoded(occupancy)
    assert kind == "dictionary" and values == [46.875, None, 50.0, 0.0, 0.0] and codes.dtype == np.uint8
    back = np.asarray(values, dtype=float)[codes]  # None -> NaN, as the readers take it
    assert np.array_equal(back.view(np.uint64), np.where(np.isnan(occupancy), back, occupancy).view(np.uint64))
    assert encoded(np.random.default_rng(1).random(10_000)).kind == "data"  # measured figures: all distinct
    few_at_first = np.concatenate([np.full(5000, 0.5), np.random.default_rng(2).random(10_000)])
    assert encoded(few_at_first).kind == "data"  # more than half distinct in all
    assert encoded([None, None, "a", "a"]).kind == "data"


def test_filled_occupancy_figures_are_dictionaries_that_read_back(read_sample, tmp_path):
    """A tracer's theoretical occupancy and waves per SM (computed once per launch configuration)
    are written as their distinct figures plus codes, and read back bit for bit."""
    profile = read_sample(NSYS)
    tb_hwprof.analyse(profile)
    kernels = profile.kernels
    tables.write_kernels_gz(tmp_path / "k.json.gz", kernels)
    doc = tables.read_json_gz(tmp_path / "k.json.gz")
    for column in ("theoretical_occupancy_pct", "waves_per_sm"):
        figures = kernels[column].to_numpy(dtype=float)
        assert column in doc["dictionary"] and len(doc["dictionary"][column]["values"]) == len(set(figures.tolist()))
        back = columns.decode_column(doc, column, dtype=float)
        assert np.array_equal(back, figures, equal_nan=True)
    pd.testing.assert_frame_equal(read_kernels_file(tmp_path / "k.json.gz"), normalise_kernels(kernels), check_dtype=True)


def test_dictionary_of_a_mostly_distinct_object_column(tmp_path):
    """Strings that are separate objects (no shared names) still make a dictionary by text."""
    names = [f"kernel_{i % 3}" for i in range(1000)]  # 1000 objects, 3 texts
    kind, (strings, codes) = encoded(names)
    assert kind == "dictionary" and strings == ["kernel_0", "kernel_1", "kernel_2"]
    assert [strings[c] for c in codes] == names


def test_damaged_format_2_tables_are_refused(tmp_path, read_sample):
    """Codes out of range, a column in two places or none: an error naming the file, never a wrong table."""
    from tb_hwprof.plugin import encode
    tables.write_kernels_gz(tmp_path / "k.json.gz", read_sample(NSYS).kernels)
    good = tables.read_json_gz(tmp_path / "k.json.gz")
    encode.check_columnar(good, len(read_sample(NSYS).kernels))

    def damaged(edit):
        doc = json.loads(json.dumps(good))
        edit(doc)
        return doc
    bad = [damaged(lambda d: d["dictionary"]["name"]["codes"].__setitem__(0, 99)),
           damaged(lambda d: d["dictionary"]["name"]["codes"].__setitem__(0, -1)),
           damaged(lambda d: d["dictionary"]["name"]["codes"].pop()),
           damaged(lambda d: d["data"].__setitem__("name", d["data"]["launch_id"])),
           damaged(lambda d: d["constant"].pop("bound")),
           damaged(lambda d: d["delta"]["start_ns"].pop()),
           damaged(lambda d: d["delta"].__setitem__("bound", d["delta"]["start_ns"]))]
    for doc in bad:
        with pytest.raises(ValueError):
            encode.check_columnar(doc)
        with pytest.raises((ValueError, KeyError, IndexError)):
            tables.kernels_from_json(doc)


# -- runs without details files --------------------------------------------------------------
def test_trace_export_writes_no_details(tmp_path, read_sample):
    profile = read_sample(NSYS)
    run_dir = writer.write_run(profile, tb_hwprof.analyse(profile), tmp_path, "trace")
    assets = reader.asset_dir(run_dir)
    manifest = reader.read_manifest(run_dir)
    assert manifest["format_version"] == metadata.FORMAT_VERSION == 2
    assert manifest["files"]["details"] is None and manifest["files"]["details_chunk"] is None
    assert not (assets / metadata.DETAILS_DIR).exists()
    n = len(profile.kernels)
    assert reader.read_details(run_dir, 5) == ({}, [])
    assert reader.read_all_details(run_dir, n) == ([{}] * n, [[]] * n)
    back = tb_hwprof.load_run(run_dir)
    assert back.raw_metrics == profile.raw_metrics == [] and back.rules == profile.rules == []
    pd.testing.assert_frame_equal(back.kernels, profile.kernels)  # sparse counters included


def test_counter_export_still_writes_details(tmp_path, read_sample, ncu_report_module):
    profile = read_sample("ncu/spyinfer_a10_105launches_2023.2.0.ncu-rep")
    run_dir = writer.write_run(profile, tb_hwprof.analyse(profile), tmp_path, "ncu")
    assert reader.read_manifest(run_dir)["files"]["details"] == metadata.DETAILS_DIR
    assert (reader.asset_dir(run_dir) / metadata.details_file(0)).is_file()


def test_plugin_on_a_run_without_details(tmp_path, read_sample):
    profile = read_sample(NSYS)
    writer.write_run(profile, tb_hwprof.analyse(profile), tmp_path, "trace")
    app = App(tmp_path)
    [row] = app.json("/runs")["runs"]
    assert row["run"] == "trace" and row["error"] is None
    doc = app.json("/kernel", run="trace", launch="3")
    assert doc["raw_metrics"] == {} and doc["rules"] == []
    assert doc["row"]["name"] == profile.kernels["name"][3] and doc["row"]["achieved_occupancy_pct"] is None
    kernels = app.json("/kernels", run="trace")
    assert kernels["dictionary"] and kernels["constant"]
    assert columns.data_only(kernels)["data"]["name"] == profile.kernels["name"].tolist()


def test_plugin_gives_format_1_tables_the_format_2_shape(tmp_path, read_sample):
    """A format 1 run (every column in "data"): /kernels adds empty delta, dictionary and constant."""
    profile = read_sample(NSYS)
    run_dir = writer.write_run(profile, tb_hwprof.analyse(profile), tmp_path, "old")
    write_format_1(reader.asset_dir(run_dir) / metadata.KERNELS, profile.kernels)
    doc = App(tmp_path).json("/kernels", run="old")
    assert doc["dictionary"] == doc["constant"] == doc["delta"] == {}
    assert doc["data"]["name"] == profile.kernels["name"].tolist()


def test_string_columns_encode_alike_when_numpy_hides_object_pointers(read_sample, tmp_path, monkeypatch):
    """Names are grouped by the objects an array points to where numpy exposes the pointers;
    where a numpy will not, by their text: the same file either way."""
    kernels = read_sample(NSYS).kernels
    tables.write_kernels_gz(tmp_path / "pointers.json.gz", kernels)
    from tb_hwprof.core import columnar
    for module in (columns, columnar):  # the constant check and the dictionary codes both group by pointers
        monkeypatch.setattr(module, "object_pointers", lambda values: None)
    tables.write_kernels_gz(tmp_path / "text.json.gz", kernels)
    by_pointer, by_text = (tables.read_json_gz(tmp_path / f"{k}.json.gz") for k in ("pointers", "text"))
    assert by_pointer == by_text and {"name", "grid", "block"} <= set(by_text["dictionary"])
