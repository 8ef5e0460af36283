"""Timeline index helpers shared by the tests and benchmarks/bench_remote.py."""
import json
from pathlib import Path

import numpy as np

from tb_hwprof.logdir import trace


def as_v2_index(path: Path) -> None:
    """Rewrite a v3 index as tb-hwprof 0.1's v2 writer laid it out (INDEX_COLUMNS and meta only)."""
    index = trace.read_index(path)
    meta = {k: v for k, v in index["meta"].items() if k in ("categories", "names", "tracks")}
    blob = np.frombuffer(json.dumps({**meta, "version": 2}).encode(), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **{c: index[c] for c in trace.INDEX_COLUMNS}, meta=blob)
