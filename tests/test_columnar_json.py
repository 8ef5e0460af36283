"""A kernels file read member by member, numbers into arrays (logdir/columnar_json.py), against
orjson's parse of the whole file: the same tables from real exports, the same refusals of damage."""
import json

import numpy as np
import orjson
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from tb_hwprof.logdir import columnar_json, run_checks, tables

from test_kernels_file import NSYS, PROFILES, profile  # noqa: F401 (the fixture)

_ORJSON_NUMBERS = (int, float, type(None))


def kernels_bytes(kernels: pd.DataFrame, tmp_path) -> bytes:
    tables.write_kernels_gz(tmp_path / "k.json.gz", kernels)
    return tables.read_gz_bytes(tmp_path / "k.json.gz")


@pytest.mark.parametrize("profile", PROFILES, indirect=True)
def test_the_table_equals_the_whole_parse(profile, tmp_path):
    raw = kernels_bytes(profile.kernels, tmp_path)
    whole, members = orjson.loads(raw), columnar_json.read_kernels_doc(raw)
    run_checks.check_columnar(members, len(profile.kernels))
    pd.testing.assert_frame_equal(tables.kernels_from_json(members), tables.kernels_from_json(whole), check_dtype=True)
    # The numbers were read as arrays (not the whole-file fallback), each equal to orjson's list.
    arrays = [(kind, c) for kind in ("data", "delta") for c, v in members[kind].items() if isinstance(v, np.ndarray)]
    arrays += [("dictionary", c) for c, v in members["dictionary"].items() if isinstance(v["codes"], np.ndarray)]
    assert arrays or not (whole["delta"] or whole["dictionary"])
    for kind, column in arrays:
        got = members[kind][column]["codes"] if kind == "dictionary" else members[kind][column]
        want = whole[kind][column]["codes"] if kind == "dictionary" else whole[kind][column]
        assert np.array_equal(got, np.array([np.nan if v is None else v for v in want], dtype=got.dtype),
                              equal_nan=got.dtype.kind == "f"), column


def test_a_million_trace_launches_are_arrays_of_the_writers_numbers(read_sample, tmp_path):
    """A real trace's launches repeated to 200,000: start steps, durations and name codes as arrays."""
    base = read_sample(NSYS).kernels
    rows = 200_000
    big = base.iloc[np.arange(rows) % len(base)].reset_index(drop=True)
    big["launch_id"] = np.arange(rows)
    big["start_ns"] = base["start_ns"].iloc[0] + np.arange(rows) * 1000.0 + (np.arange(rows) % 7)
    raw = kernels_bytes(big, tmp_path)
    doc = columnar_json.read_kernels_doc(raw)
    assert isinstance(doc["delta"]["start_ns"], np.ndarray) and isinstance(doc["dictionary"]["name"]["codes"], np.ndarray)
    assert np.cumsum(doc["delta"]["start_ns"]).tolist() == big["start_ns"].astype("int64").tolist()
    pd.testing.assert_frame_equal(tables.kernels_from_json(doc), tables.kernels_from_json(orjson.loads(raw)))


# -- number_array against orjson --------------------------------------------------------------
_TOKENS = st.sampled_from(["0", "1", "-1", "12", "007", "1.5", "-0.25", "1e3", "2E-2", "1e+2", "null", "", "-",
                           "+1", ".5", "5.", "1.e2", "1e", "nan", "inf", "1..2", "--1", "0x10", " 1", "9223372036854775807",
                           "9223372036854775808", "-9223372036854775809", "true", "1,", "]", "nul", "nulll", "1-2", "-e1", "1e-05", "0.0", "-0", "1e5.5"])


@settings(max_examples=1500, deadline=None)
@given(st.lists(_TOKENS, min_size=1, max_size=8))
def test_number_array_reads_only_what_orjson_reads_and_as_it_does(tokens):
    body = ",".join(tokens).encode()
    try:
        expected = orjson.loads(b"[" + body + b"]")
    except orjson.JSONDecodeError:
        expected = None
    got = columnar_json.number_array(body)
    if got is None:
        return  # orjson parses it (and says what is wrong, if anything)
    assert expected is not None and all(isinstance(v, _ORJSON_NUMBERS) and not isinstance(v, bool) for v in expected)
    assert got.size == len(expected)
    if got.dtype == np.int64:
        assert got.tolist() == expected
    else:
        assert np.array_equal(got, np.array([np.nan if v is None else v for v in expected], dtype=float), equal_nan=True)


# -- damage -----------------------------------------------------------------------------------
def _damaged_bytes(raw: bytes, edit) -> bytes:
    doc = json.loads(raw)
    edit(doc)
    return orjson.dumps(doc)


@pytest.mark.parametrize("edit", [
    lambda d: d["dictionary"]["name"]["codes"].__setitem__(0, 99),
    lambda d: d["dictionary"]["name"]["codes"].__setitem__(0, -1),
    lambda d: d["dictionary"]["name"]["codes"].__setitem__(0, 0.5),
    lambda d: d["dictionary"]["name"]["codes"].__setitem__(0, None),
    lambda d: d["dictionary"]["name"]["codes"].pop(),
    lambda d: d["delta"]["start_ns"].__setitem__(1, None),
    lambda d: d["delta"]["start_ns"].pop(),
    lambda d: d["data"]["launch_id"].__setitem__(0, None),
    lambda d: d["data"].__setitem__("name", d["data"]["launch_id"]),
], ids=["code past the values", "negative code", "fractional code", "null code", "a code short",
        "null step", "a step short", "null launch id", "name in two places"])
def test_damage_read_member_by_member_is_refused_as_the_whole_parse_refuses_it(read_sample, tmp_path, edit):
    raw = _damaged_bytes(kernels_bytes(read_sample(NSYS).kernels, tmp_path), edit)
    rows = len(read_sample(NSYS).kernels)
    for doc in (orjson.loads(raw), columnar_json.read_kernels_doc(raw)):
        with pytest.raises((ValueError, KeyError, IndexError, TypeError)):
            run_checks.check_columnar(doc, rows)
            tables.kernels_from_json(doc)
