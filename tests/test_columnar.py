"""tb_hwprof.core.columnar helpers against pandas' own factorize on real kernel names."""
import numpy as np
import pandas as pd
import pytest

from tb_hwprof.core import columnar
from tb_hwprof.core.columnar import object_codes, object_factorize

from conftest import sample
from support_nsys import DLPROF


def _same_grouping(a, b) -> bool:
    """Codes that put the same rows together (numbering may differ)."""
    return len(a) == len(b) and (pd.factorize(a)[0] == pd.factorize(b)[0]).all()


def test_object_codes_group_equal_text_held_by_different_objects(read_sample, samples_dir):
    sample(samples_dir, DLPROF)
    names = read_sample(DLPROF).kernels["name"].to_numpy()
    copies = np.array(["".join(list(n)) for n in names], dtype=object)  # equal text, new str objects
    mixed = np.concatenate([names, copies, names[::-1]])
    assert len(set(map(id, mixed))) > len(set(mixed))  # several objects per distinct text
    codes = object_codes(mixed)
    assert _same_grouping(codes, pd.factorize(mixed)[0])
    assert (codes[: len(names)] == codes[len(names): 2 * len(names)]).all()


def test_object_codes_without_pointers_hash_the_text(read_sample, samples_dir, monkeypatch):
    sample(samples_dir, DLPROF)
    names = read_sample(DLPROF).kernels["name"].to_numpy()

    def refuse(*args, **kwargs):
        raise BufferError("no pointers")
    monkeypatch.setattr(np, "frombuffer", refuse)
    assert _same_grouping(object_codes(names), pd.factorize(names)[0])


def test_object_factorize_leaves_missing_values_out(read_sample, samples_dir):
    """Missing values (None, NaN) get code -1 and are not among the distinct values, wherever they
    fall: first rows are taken over the present codes only (a missing row once overwrote the last
    distinct value's first row)."""
    sample(samples_dir, DLPROF)
    names = read_sample(DLPROF).kernels["name"].to_numpy(dtype=object).copy()
    names[::7] = None
    names[3::11] = np.nan
    codes, distinct = object_factorize(names)
    want_codes, want = pd.factorize(names)
    assert (codes == want_codes).all() and list(distinct) == list(want)


def test_time_per_value_is_groupby_sum(read_sample, samples_dir):
    """The headline bound_time_ms/* figures: pandas' groupby sum of the durations per bound label."""
    from tb_hwprof.analysis.summary import time_per_value
    for path in ("ncu/spyinfer_a10_105launches_2023.2.0.ncu-rep", DLPROF):
        sample(samples_dir, path)
        kernels = read_sample(path).kernels.copy()
        kernels.loc[kernels.index[::5], "bound"] = None  # rows without a label are left out
        want = kernels.groupby("bound")["duration_ns"].sum()
        got = time_per_value(kernels["bound"], kernels["duration_ns"])
        assert got == {label: float(total) for label, total in want.items()}


def test_kernel_set_bounds_count_missing_labels_as_unknown(read_sample, samples_dir):
    """compare's dominant bound per kernel (bincounts over codes) equals groups.dominant_label (pandas
    groupby) when some launches have no label: those count as 'unknown', never as another label."""
    from tb_hwprof.analysis import compare, groups
    path = "ncu/spyinfer_a10_105launches_2023.2.0.ncu-rep"
    sample(samples_dir, path)
    kernels = read_sample(path).kernels.copy()
    kernels.loc[kernels.index[kernels.index % 3 != 0], "bound"] = None  # most launches of most kernels
    kset = compare.kernel_set(kernels)
    keys = pd.Series([kset.keys[c] for c in kset.codes])
    want = groups.dominant_label(keys, groups.bound_labels(kernels), kernels["duration_ns"])
    assert {k: kset.groups[k]["bound"] for k in kset.keys} == want.to_dict()


@pytest.mark.parametrize("path", ["ncu/spyinfer_a10_105launches_2023.2.0.ncu-rep", DLPROF])
def test_group_codes_are_pandas_groups_missing_values_included(read_sample, samples_dir, path):
    """group_codes puts rows together exactly as pandas' groupby(dropna=False) over the same columns:
    real registers, grid sizes (whole floats), kernel names (text) and durations (fractions), with
    missing values among the numbers and the names (a missing name is one value of its own, never
    folded into another combination's code, as its -1 once was on the 105-launch report)."""
    from tb_hwprof.core.columnar import group_codes
    sample(samples_dir, path)
    kernels = read_sample(path).kernels
    names = kernels["name"].to_numpy(dtype=object).copy()
    names[::3] = None
    grid = kernels["grid_size"].to_numpy(dtype=float).copy()
    grid[1::5] = np.nan
    for columns in ([kernels["registers_per_thread"].to_numpy(dtype=float), names],
                    [grid, names, kernels["registers_per_thread"].to_numpy(dtype=float),
                     kernels["duration_ns"].to_numpy(dtype=float) / 7.0]):
        codes, firsts = group_codes(columns)
        frame = pd.DataFrame({f"c{i}": c for i, c in enumerate(columns)})
        want = frame.groupby(list(frame.columns), dropna=False, sort=False).ngroup().to_numpy()
        assert (codes == want).all()
        assert (firsts == pd.Series(want).drop_duplicates().index.to_numpy()).all()


def test_text_mask_asks_per_text_and_answers_per_row():
    """text_mask: the per-row answer of a name test asked once per distinct text, however many
    str objects hold it; a missing value (NaN, None, not a str) passes no test."""
    same_text = ["aten::" + n for n in ("item", "item")]  # two str objects, one text
    assert same_text[0] is not same_text[1]
    asked = []

    def is_item(name):
        asked.append(name)
        return name == "aten::item"

    values = pd.Series([same_text[0], "aten::mm", None, same_text[1], "aten::mm", same_text[0]], dtype="string")
    assert columnar.text_mask(values, is_item).tolist() == [True, False, False, True, False, True]
    assert sorted(asked) == ["aten::item", "aten::mm"]
    mixed = np.array([same_text[1], float("nan"), 3, "aten::item"], dtype=object)
    assert columnar.text_mask(mixed, is_item).tolist() == [True, False, False, True]
    assert columnar.text_mask(np.array([], dtype=object), is_item).tolist() == []


def _texts_variants(values):
    """A real text column, and the same with every third row a new object of equal text and every
    seventh a missing value (None or NaN)."""
    copies = np.array([v if i % 3 else "".join(["", v]) for i, v in enumerate(values)], dtype=object)
    missing = copies.copy()
    missing[::7] = None
    missing[3::14] = np.nan
    return [values, copies, missing]


def _factorize_by_dict(values):
    """Plain Python: each text's code in order of first sight, -1 for a missing value; the first
    object holding each text."""
    code_of, first = {}, []
    codes = []
    for v in values:
        if not isinstance(v, str):
            codes.append(-1)
            continue
        if v not in code_of:
            code_of[v] = len(first)
            first.append(v)
        codes.append(code_of[v])
    return codes, first


@pytest.mark.parametrize("table, column", [("ops", "name"), ("ops", "input_dims"), ("gpu", "name"), ("gpu", "kind")])
def test_object_factorize_equals_a_dict_on_real_columns(samples_dir, table, column):
    """object_factorize on a real trace's text columns, with equal texts in distinct objects and
    missing values: the codes a dict gives, the very first object of each text kept; and
    first_sight_rows equal to first_rows when scanning in many blocks."""
    import tb_hwprof
    path = sample(samples_dir, "torch/kineto_rn50_v100_jun2021.json.gz")
    values = getattr(tb_hwprof.read(path).torch, table)[column].to_numpy(object)
    for texts in _texts_variants(values):
        want_codes, want_first = _factorize_by_dict(texts)
        codes, distinct = object_factorize(texts)
        assert codes.dtype == np.int64 and codes.tolist() == want_codes
        assert len(distinct) == len(want_first) and all(a is b for a, b in zip(distinct, want_first))
        n_codes = int(codes.max()) + 1
        assert np.array_equal(columnar.first_sight_rows(codes, n_codes, block=100), columnar.first_rows(codes, n_codes))
    assert object_factorize(np.array([], dtype=object))[0].size == 0


def test_factorize_ints_equals_pandas_across_chunks(monkeypatch, samples_dir):
    """factorize_ints hashes HASH_ROWS rows at a time against the values found so far: the codes and
    distinct values pd.factorize gives, on a real trace's correlation ids and stream column (few and
    many distinct values, new ones first seen in later chunks), and past FEW_DISTINCT (whole column)."""
    import sqlite3
    conn = sqlite3.connect(f"file:{sample(samples_dir, DLPROF)}?mode=ro", uri=True)
    rows = conn.execute("SELECT correlationId, streamId, deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY rowid").fetchall()
    monkeypatch.setattr(columnar, "HASH_ROWS", 7)
    for i in range(3):
        column = np.array([r[i] for r in rows] * 3, dtype=np.int64)
        column[::5] = column[::-5]  # values first seen late
        for few in (1 << 16, 10):
            monkeypatch.setattr(columnar, "FEW_DISTINCT", few)
            codes, uniques = columnar.factorize_ints(column)
            want_codes, want_uniques = pd.factorize(column)
            assert codes.dtype == np.int64 and codes.tolist() == want_codes.tolist()
            assert np.asarray(uniques).tolist() == np.asarray(want_uniques).tolist()
