"""JSON encodings of the kernels table, raw metrics and rules (NaN is written as null)."""
from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any, List

import pandas as pd

from ..model import KERNEL_COLUMNS, normalise_kernels


def clean(value: Any) -> Any:
    """JSON-safe: NaN/inf -> None, numpy scalars -> Python."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return clean(value.item())
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


def kernels_to_json(kernels: pd.DataFrame) -> dict:
    data = {}
    for col in kernels.columns:
        series = kernels[col]
        if series.dtype.kind == "f":
            data[col] = [None if v != v else v for v in series.tolist()]
        else:
            data[col] = series.tolist()
    units = {c: KERNEL_COLUMNS[c][0] for c in kernels.columns if c in KERNEL_COLUMNS}
    return {"columns": list(kernels.columns), "units": units, "rows": len(kernels), "data": data}


def kernels_from_json(doc: dict) -> pd.DataFrame:
    return normalise_kernels(pd.DataFrame({c: doc["data"][c] for c in doc["columns"]}))


def write_json_gz(path: Path, doc: Any) -> None:
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=6) as f:
        json.dump(doc, f, allow_nan=False, separators=(",", ":"))


def read_json_gz(path: Path) -> Any:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def write_jsonl_gz(path: Path, rows: List[Any]) -> None:
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=6) as f:
        for row in rows:
            f.write(json.dumps(clean(row), allow_nan=False, separators=(",", ":")))
            f.write("\n")


def read_jsonl_gz(path: Path) -> List[Any]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
