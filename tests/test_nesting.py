"""core/nesting.py: the native stack (_nesting.c) and the numpy binary lifting give the
same parents and enclosing intervals, on random intervals that overlap every way and on the
operators and runtime calls of real PyTorch traces."""
import numpy as np
import pytest

import tb_hwprof
from tb_hwprof.core import nesting
from tb_hwprof.core.nesting import Intervals

native = pytest.mark.skipif(nesting._nesting is None, reason="core/_nesting.c not built")


@native
@pytest.mark.parametrize("tolerance", [0, 50])
def test_native_equals_numpy_on_random_overlapping_intervals(tolerance):
    rng = np.random.default_rng(11)
    n = 20_000
    start = np.sort(rng.integers(0, 100_000, n))
    end = start + rng.integers(0, 300, n)  # zero-length, nested, crossing and tied intervals
    group = rng.integers(-3, 3, n)
    iv = Intervals(start, end, group)
    assert (iv.parents(tolerance) == iv._parents_numpy(tolerance)).all()
    qs = rng.integers(-100, 100_500, 5000)
    qe = qs + rng.integers(0, 100, 5000)
    qg = rng.integers(-4, 4, 5000)  # some groups no interval has
    got = iv.enclosing(qs, qe, qg, tolerance)
    assert (got == iv._enclosing_numpy(qs, qe, qg, tolerance)).all()
    assert 0.3 < (got >= 0).mean() < 1


@native
@pytest.mark.parametrize("name", ["hta_v100_resnet_rank0.json.gz", "tracelens_b200_eager_8rank_rank0.json.gz"])
def test_native_equals_numpy_on_real_operators(samples_dir, name):
    path = samples_dir / "torch" / name
    if not path.is_file():
        pytest.skip(name)
    t = tb_hwprof.read(path).torch
    group = (t.ops["pid"].to_numpy() << 32) ^ (t.ops["tid"].to_numpy() & 0xFFFFFFFF)
    iv = Intervals(t.ops["start_ns"].to_numpy(), t.ops["end_ns"].to_numpy(), group)
    assert (iv.parents(500) == iv._parents_numpy(500)).all()
    r = t.runtime
    r_group = (r["pid"].to_numpy() << 32) ^ (r["tid"].to_numpy() & 0xFFFFFFFF)
    args = (r["start_ns"].to_numpy(), r["end_ns"].to_numpy(), r_group, 500)
    assert (iv.enclosing(*args) == iv._enclosing_numpy(*args)).all()
