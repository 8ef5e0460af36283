"""JSON encodings of the kernels table, summary tables, raw metrics and rules (NaN is written as null)."""
from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any, Dict, List

import pandas as pd

from ..model import KERNEL_COLUMNS, normalise_kernels

# Level 1: JSON of counters compresses ~as well at 1 as at 6, several times faster.
GZIP_LEVEL = 1


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


def frame_to_json(frame: pd.DataFrame, units: Dict[str, str], with_dtypes: bool = False) -> dict:
    """Columnar JSON of any table: {"columns", "units", "rows", "data"} (+ "dtypes" to restore them)."""
    data = {}
    for col in frame.columns:
        series = frame[col]
        if series.dtype.kind == "f":
            data[col] = [None if v != v else v for v in series.tolist()]
        else:
            data[col] = series.tolist()
    doc = {"columns": list(frame.columns), "units": {c: u for c, u in units.items() if c in frame.columns},
           "rows": len(frame), "data": data}
    if with_dtypes:
        doc["dtypes"] = {c: str(frame[c].dtype) for c in frame.columns}
    return doc


def frame_from_json(doc: dict) -> pd.DataFrame:
    """Inverse of frame_to_json: numeric dtypes restored where recorded (null -> NaN), text columns
    as pandas infers them (object, or str on pandas 3), units in .attrs."""
    frame = pd.DataFrame({c: doc["data"][c] for c in doc["columns"]}, columns=doc["columns"])
    for col, dtype in doc.get("dtypes", {}).items():
        if dtype in ("int64", "float64", "bool"):
            frame[col] = frame[col].astype("float64" if dtype == "float64" else dtype)
    frame.attrs["units"] = dict(doc.get("units", {}))
    return frame


def kernels_to_json(kernels: pd.DataFrame) -> dict:
    units = {c: KERNEL_COLUMNS[c][0] for c in kernels.columns if c in KERNEL_COLUMNS}
    return frame_to_json(kernels, units)


def kernels_from_json(doc: dict) -> pd.DataFrame:
    return normalise_kernels(pd.DataFrame({c: doc["data"][c] for c in doc["columns"]}))


def write_json_gz(path: Path, doc: Any) -> None:
    # One encode and one write: many small writes through gzip cost more than the encoding.
    with gzip.open(path, "wb", compresslevel=GZIP_LEVEL) as f:
        f.write(json.dumps(doc, allow_nan=False, separators=(",", ":")).encode("utf-8"))


def read_json_gz(path: Path) -> Any:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def details_doc(first_launch: int, raw_metrics: List[Dict[str, list]], rules: List[list]) -> dict:
    """One details file: launches first_launch.. with their raw metrics and rule results.

    Launches of one report mostly share a metric set, so names and units are written once per
    set and each launch is a value list.  Values must already be JSON-safe (readers give None
    for NaN); the encoder's allow_nan=False enforces it."""
    sets: Dict[tuple, int] = {}
    set_docs, launches = [], []
    for raw, launch_rules in zip(raw_metrics, rules):
        key = tuple((name, unit) for name, (_, unit) in raw.items())
        if key not in sets:
            sets[key] = len(set_docs)
            set_docs.append({"names": [k[0] for k in key], "units": [k[1] for k in key]})
        launches.append({"set": sets[key], "values": [v for v, _ in raw.values()], "rules": clean(launch_rules)})
    return {"first_launch": first_launch, "metric_sets": set_docs, "launches": launches}


def expand_launch(doc: dict, entry: dict) -> Dict[str, list]:
    """{metric: [value, unit]} of one launch entry of a details file."""
    metric_set = doc["metric_sets"][entry["set"]]
    return {n: [v, u] for n, v, u in zip(metric_set["names"], entry["values"], metric_set["units"])}

