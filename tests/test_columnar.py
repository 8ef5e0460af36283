"""tb_hwprof.columnar helpers against pandas' own factorize on real kernel names."""
import numpy as np
import pandas as pd

from tb_hwprof.columnar import object_codes

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
