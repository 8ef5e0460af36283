"""JSON encodings of the kernels table, summary tables, raw metrics and rules (NaN is written as null)."""
from __future__ import annotations

import gzip
import json
import math
import queue
import threading
import zlib
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
import pandas as pd

try:  # optional: encodes numpy columns without a Python object per value
    import orjson
except ImportError:  # pragma: no cover - depends on the environment
    orjson = None

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


COLUMN_CHUNK = 1 << 16  # rows encoded at a time: a column of long kernel names never is one 200 MB string


def _column_json(series: pd.Series):
    """One column as JSON array text, in pieces: numbers straight from numpy (NaN/inf -> null),
    others via tolist (orjson writes a float NaN as null too)."""
    numeric = series.dtype.kind in "fiub"
    values = series.to_numpy()
    yield b"["
    for first in range(0, len(values), COLUMN_CHUNK):
        part = values[first:first + COLUMN_CHUNK]
        text = orjson.dumps(np.ascontiguousarray(part), option=orjson.OPT_SERIALIZE_NUMPY) if numeric \
            else orjson.dumps(part.tolist())
        yield (b"," if first else b"") + text[1:-1]
    yield b"]"


class GzipStream:
    """Bytes written through one zlib stream into a .gz file, compressed on a second thread (zlib
    releases the GIL) while the caller encodes the next piece; the queue is bounded, so at most a
    few pieces wait in memory."""

    def __init__(self, path: Path, level: int = GZIP_LEVEL):
        self.f = open(path, "wb")
        self.z = zlib.compressobj(level, zlib.DEFLATED, 31)  # wbits 31: the gzip container
        self.queue: "queue.Queue" = queue.Queue(maxsize=4)
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._drain, name="tb-hwprof-gzip", daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while True:
            data = self.queue.get()
            if data is None:
                return
            try:
                if self.error is None:
                    self.f.write(self.z.compress(data))
            except BaseException as e:  # noqa: BLE001 - raised again by write() / close()
                self.error = e

    def write(self, data: bytes) -> None:
        if self.error is not None:
            raise self.error
        self.queue.put(data)

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join()
        try:
            if self.error is None:
                self.f.write(self.z.flush())
        finally:
            self.f.close()
        if self.error is not None:
            raise self.error

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def write_columnar_gz(path: Path, frame: pd.DataFrame, units: Dict[str, str]) -> None:
    """frame_to_json(frame, units) gzipped, encoded one column at a time: a million-row table never
    becomes one Python object per cell (1M kernels: ~1.8 GB and 7 s as lists, ~0.1 GB and 1 s this way)."""
    if orjson is None:
        return write_json_gz(path, frame_to_json(frame, units))
    head = {"columns": [str(c) for c in frame.columns], "units": {c: u for c, u in units.items() if c in frame.columns},
            "rows": len(frame)}
    with GzipStream(path) as f:
        f.write(orjson.dumps(head)[:-1] + b',"data":{')
        for i, col in enumerate(frame.columns):
            f.write((b"," if i else b"") + orjson.dumps(str(col)) + b":")
            for piece in _column_json(frame[col]):
                f.write(piece)
        f.write(b"}}")


def write_kernels_gz(path: Path, kernels: pd.DataFrame) -> None:
    units = {c: KERNEL_COLUMNS[c][0] for c in kernels.columns if c in KERNEL_COLUMNS}
    write_columnar_gz(path, kernels, units)


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


def write_empty_details_gz(path: Path, first_launch: int, count: int) -> None:
    """details_doc(first_launch, [{}] * count, [[]] * count) written without building it (1M launches
    of a trace: 1000 files in ~0.2 s instead of ~5 s)."""
    entries = b",".join([b'{"set":0,"values":[],"rules":[]}'] * count)
    data = b'{"first_launch":%d,"metric_sets":[{"names":[],"units":[]}],"launches":[%s]}' % (first_launch, entries)
    with gzip.open(path, "wb", compresslevel=GZIP_LEVEL) as f:
        f.write(data)


def expand_launch(doc: dict, entry: dict) -> Dict[str, list]:
    """{metric: [value, unit]} of one launch entry of a details file."""
    metric_set = doc["metric_sets"][entry["set"]]
    return {n: [v, u] for n, v, u in zip(metric_set["names"], entry["values"], metric_set["units"])}

