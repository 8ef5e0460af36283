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

import orjson  # a requirement: encodes numpy columns without a Python object per value

from ..core.errors import HwprofError
from ..core.model import KERNEL_COLUMNS, all_nan_column, normalise_kernels
from . import columns

# Level 1: JSON of counters compresses ~as well at 1 as at 6, several times faster.
GZIP_LEVEL = 1


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def clean(value: Any) -> Any:
    """JSON-safe and readable back: NaN/inf -> None, numpy scalars -> Python, an integer past 64 bits
    -> a float (orjson, which reads every run, parses no integer past 64 bits; one past a double's
    range -> None)."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, int) and not isinstance(value, bool) and not INT64_MIN <= value <= INT64_MAX:
        try:
            return clean(float(value))
        except OverflowError:
            return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return clean(value.item())
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


def frame_to_json(frame: pd.DataFrame, units: Dict[str, str], with_dtypes: bool = False) -> dict:
    """Columnar JSON of any table: {"columns", "units", "rows", "data"} (+ "dtypes" to restore them).
    Numeric columns come out JSON-safe already (NaN and inf as None; int64 and bool as they are):
    `clean_table_json` then visits only the others (a 120k-row module tree spent 1.8 s in clean)."""
    data = {}
    for col in frame.columns:
        series = frame[col]
        if series.dtype.kind == "f":
            values = series.to_numpy(dtype=float)
            data[col] = values.tolist()
            for i in np.flatnonzero(~np.isfinite(values)).tolist():
                data[col][i] = None
        else:
            data[col] = series.tolist()
    doc = {"columns": list(frame.columns), "units": {c: u for c, u in units.items() if c in frame.columns},
           "rows": len(frame), "data": data}
    if with_dtypes:
        doc["dtypes"] = {c: str(frame[c].dtype) for c in frame.columns}
    return doc


def clean_table_json(doc: dict, frame: pd.DataFrame) -> dict:
    """clean(doc) of frame_to_json(frame), visiting only the columns whose values may need it (text,
    object and unsigned columns; float, int64 and bool ones are JSON-safe from frame_to_json)."""
    safe = {str(c) for c in frame.columns if frame[c].dtype.kind in "fb" or frame[c].dtype == np.int64}
    return {key: ({col: (values if str(col) in safe else clean(values)) for col, values in value.items()}
                  if key == "data" else clean(value)) for key, value in doc.items()}


def frame_from_json(doc: dict) -> pd.DataFrame:
    """Inverse of frame_to_json: numeric dtypes restored where recorded (null -> NaN), text columns
    as pandas infers them (object, or str on pandas 3), units in .attrs."""
    frame = pd.DataFrame({c: doc["data"][c] for c in doc["columns"]}, columns=doc["columns"])
    for col, dtype in doc.get("dtypes", {}).items():
        if dtype in ("int64", "float64", "bool"):
            frame[col] = frame[col].astype("float64" if dtype == "float64" else dtype)
    frame.attrs["units"] = dict(doc.get("units", {}))
    return frame


def kernels_from_json(doc: dict) -> pd.DataFrame:
    """The kernels table of a kernels.json.gz document (format 1 or 2), typed by KERNEL_COLUMNS:
    the same frame whichever way each column was written; the columns "sparse" lists (a tracer's
    counters) come back as the reader made them, all-NaN sparse columns holding no values (a
    1M-launch run would otherwise carry ~300 MB of NaN)."""
    # copy=False: each column keeps its own new array (stacking 53 columns of 1M rows: ~0.7 s)
    nothing = _all_nan(doc)
    frame = pd.DataFrame({c: nothing if _is_all_nan(doc, c) else _kernel_column(doc, c) for c in doc["columns"]},
                         columns=doc["columns"], copy=False)
    # Constant and dictionary columns are typed as written; "data" ones may hold nulls to normalise.
    return normalise_kernels(frame, copy=False, only=set(doc["data"]))


SPEC_DTYPES = {"int": np.int64, "float": np.float64, "str": object}


def _is_all_nan(doc: dict, column: str) -> bool:
    """Whether `column` was written as a sparse all-NaN column ("sparse" lists it; its constant is null)."""
    spec = KERNEL_COLUMNS.get(column)
    constant = doc.get(columns.CONSTANT, {})
    return column in doc.get("sparse", ()) and spec is not None and spec[1] == "float" \
        and column in constant and constant[column] is None \
        and not any(column in doc.get(kind, {}) for kind in (columns.DATA, columns.DICTIONARY, columns.DELTA))


def _all_nan(doc: dict) -> pd.Series:
    """One all-NaN sparse column of the document's length, shared by every such column."""
    return pd.Series(all_nan_column(int(doc["rows"])), copy=False)


def _kernel_column(doc: dict, column: str):
    spec = KERNEL_COLUMNS.get(column)
    if spec is None:  # a column the model does not know: left for pandas to type, as format 1 did
        return columns.decode_column(doc, column)
    dtype = SPEC_DTYPES[spec[1]]
    return pd.Series(columns.decode_column(doc, column, dtype), dtype=dtype, copy=False)


COLUMN_CHUNK = 1 << 16  # rows encoded at a time: a column of long kernel names never is one 200 MB string


def _json(value: Any) -> bytes:
    return orjson.dumps(value)  # NaN and infinities -> null


def _plain_scalar(value):
    """numpy scalars (pandas hands them out) -> Python."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def dumps(obj: Any) -> bytes:
    """Compact JSON of any document of ours (the plugin's responses, `compare --format json`):
    numpy values as numbers, NaN and infinities as null (a missing figure, never 0)."""
    return orjson.dumps(obj, default=_plain_scalar, option=orjson.OPT_SERIALIZE_NUMPY)


def _array_json(values: np.ndarray):
    """One column as JSON array text, in pieces: numbers straight from numpy with orjson (NaN/inf
    -> null), anything else via tolist."""
    numeric = values.dtype.kind in "fiub"
    yield b"["
    for first in range(0, len(values), COLUMN_CHUNK):
        part = values[first:first + COLUMN_CHUNK]
        text = orjson.dumps(np.ascontiguousarray(part), option=orjson.OPT_SERIALIZE_NUMPY) if numeric \
            else _json(part.tolist())
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


def write_columnar_gz(path: Path, frame: pd.DataFrame, units: Dict[str, str], whole_floats=()) -> None:
    try:
        _write_columnar_gz(path, frame, units, whole_floats)
    except orjson.JSONEncodeError as e:  # a str with a lone surrogate (the staging folder is dropped)
        raise unwritable_text(path, e) from None


def _write_columnar_gz(path: Path, frame: pd.DataFrame, units: Dict[str, str], whole_floats) -> None:
    """frame as a columnar document of format 2 (docs/FORMAT.md, kernels.json.gz), gzipped, one column
    at a time: a million-row table never becomes one Python object per cell.  "data" comes first so
    the gzip thread starts while later columns are encoded; whole_floats names the float columns
    that may be written as integers (columns.encode_column)."""
    head = {"columns": [str(c) for c in frame.columns], "units": {c: u for c, u in units.items() if c in frame.columns},
            "rows": len(frame)}
    constants, dictionaries, deltas, data_columns = {}, [], [], 0
    with GzipStream(path) as f:
        f.write(_json(head)[:-1] + b',"data":{')
        for col in frame.columns:
            column = columns.encode_column(frame[col], whole_floats=col in whole_floats)
            if column.kind == columns.CONSTANT:
                constants[str(col)] = column.payload
            elif column.kind == columns.DICTIONARY:
                dictionaries.append((str(col), column.payload))
            elif column.kind == columns.DELTA:
                deltas.append((str(col), column.payload))
            else:
                _write_member(f, data_columns > 0, str(col), column.payload)
                data_columns += 1
        f.write(b'},"delta":{')
        for i, (col, steps) in enumerate(deltas):
            _write_member(f, i > 0, col, steps)
        f.write(b'},"dictionary":{')
        for i, (col, (strings, codes)) in enumerate(dictionaries):
            _write_member(f, i > 0, col, codes, prefix=b'{"values":' + _json(strings) + b',"codes":', suffix=b"}")
        sparse = [str(c) for c in frame.columns if isinstance(frame[c].dtype, pd.SparseDtype) and str(c) in constants]
        f.write(b'},"constant":' + _json(constants) + b',"sparse":' + _json(sparse) + b"}")


def _write_member(f: "GzipStream", after_another: bool, key: str, values: np.ndarray,
                  prefix: bytes = b"", suffix: bytes = b"") -> None:
    """`"key":prefix[values]suffix`, one member of the JSON object being written."""
    f.write((b"," if after_another else b"") + _json(key) + b":" + prefix)
    for piece in _array_json(values):
        f.write(piece)
    f.write(suffix)


FLOAT_COLUMNS = frozenset(c for c, spec in KERNEL_COLUMNS.items() if spec[1] == "float")


def write_kernels_gz(path: Path, kernels: pd.DataFrame) -> None:
    """kernels.json.gz, format 2.  Whole-number float columns are written as integers (or steps):
    the reader types every known column from KERNEL_COLUMNS, so they come back float64."""
    units = {c: KERNEL_COLUMNS[c][0] for c in kernels.columns if c in KERNEL_COLUMNS}
    write_columnar_gz(path, kernels, units, whole_floats=FLOAT_COLUMNS)


def write_json_gz(path: Path, doc: Any, fast: bool = False) -> None:
    """doc as gzipped JSON, NaN and infinities as null.  fast: encoded by orjson (~6x faster on a
    details file; UTF-8 text where json.dumps writes \\u escapes, the same values parsed), falling
    back to json.dumps for what orjson refuses (integers past 64 bits)."""
    # One encode and one write: many small writes through gzip cost more than the encoding.
    data = _orjson_or_none(path, doc) if fast else None
    if data is None:
        # fast: orjson refused an integer past 64 bits, which it would not read back either (clean makes it
        # a float); the callers of the other path pass a cleaned document.
        text = json_text(clean(doc) if fast else doc)
        check_unicode(text, path)
        data = text.encode("utf-8")
    with gzip.open(path, "wb", compresslevel=GZIP_LEVEL) as f:
        f.write(data)


def _orjson_or_none(path: Path, doc: Any) -> Optional[bytes]:
    try:
        return orjson.dumps(doc)
    except orjson.JSONEncodeError as e:
        if "surrogates" in str(e):
            raise unwritable_text(path, e) from None
        return None  # e.g. an integer past 64 bits: json.dumps writes it


def check_unicode(text: str, path: Path) -> None:
    """`text` (ASCII JSON from json.dumps) holds no lone surrogate: json.dumps escapes one as
    '\\udc80' without complaint, and the run could not be read back (orjson refuses it).  Only text
    with an escaped surrogate at all (non-BMP characters, rare) is parsed again to tell."""
    if "\\ud" not in text:
        return
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise unwritable_text(path, e) from None


class LetThrough(HwprofError):
    """A value a reader let through that the writer cannot put in a run: the exporter names the input,
    saying what the input did (`did`) and the value's problem (`cause`)."""
    did = "gave a value it cannot write"

    def __init__(self, message: str, cause: str):
        super().__init__(message)
        self.cause = cause


class UnwritableText(LetThrough):
    """Text that is not Unicode (a lone surrogate)."""
    did = "holds text that is not Unicode"


class UnsoundRun(LetThrough):
    """A manifest the run's own reader would refuse (run_checks): a value no run may hold (a negative
    device id).  The run is not put in place."""
    did = "gave a value no run may hold"


def unwritable_text(path: Path, error: Exception) -> HwprofError:
    return UnwritableText(f"{path}: cannot write text that is not Unicode ({error}) -- the input holds "
                          f"undecodable text a reader let through: report it with the input file", str(error))


def json_text(doc: Any) -> str:
    """Compact JSON of `doc`, NaN and infinities as null (JSON has neither).  Most documents hold
    none, so the recursive clean runs only when the strict encoder finds one."""
    try:
        return json.dumps(doc, allow_nan=False, separators=(",", ":"))
    except ValueError:  # "Out of range float values are not JSON compliant"
        return json.dumps(clean(doc), allow_nan=False, separators=(",", ":"))


# Inflating a run's .json.gz is bounded: by the size the manifest declares for it (metadata
# "inflated_bytes", written at export) plus slack, else (runs exported before sizes were declared)
# by a ratio no table of ours reaches (the 1M-kernel table inflates ~75x) with a floor.  A 1 MB
# file that inflates to 1 GiB is refused after at most that bound, not held whole.
INFLATE_SLACK_BYTES = 1 << 20
UNDECLARED_MAX_RATIO, UNDECLARED_MIN_BYTES = 200, 256 << 20
INFLATE_PIECE = 1 << 20


def inflate_limit(path: Path, declared: Optional[int]) -> int:
    if isinstance(declared, int) and declared >= 0:
        return declared + INFLATE_SLACK_BYTES
    return max(UNDECLARED_MIN_BYTES, UNDECLARED_MAX_RATIO * Path(path).stat().st_size)


def read_gz_bytes(path: Path, declared: Optional[int] = None) -> bytes:
    """The inflated bytes of a .gz file, ValueError past inflate_limit (a compressed bomb)."""
    limit = inflate_limit(path, declared)
    z = zlib.decompressobj(31)  # the gzip container
    out, size = [], 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(INFLATE_PIECE), b""):
            data = z.decompress(block, limit + 1 - size)
            while data:
                out.append(data)
                size += len(data)
                if size > limit:
                    raise ValueError(f"inflates past {limit:,} bytes, more than its run declares: not read")
                data = z.decompress(z.unconsumed_tail, limit + 1 - size) if z.unconsumed_tail else b""
    if not z.eof:
        raise EOFError("compressed file ended before the end-of-stream marker was reached")
    return b"".join(out)


def inflated_size(path: Path) -> int:
    """Uncompressed size of a .gz file this process just wrote (its trailer's ISIZE: < 4 GiB)."""
    with open(path, "rb") as f:
        f.seek(-4, 2)
        return int.from_bytes(f.read(4), "little")


def read_json_gz(path: Path, declared: Optional[int] = None) -> Any:
    # orjson parses a 1M-kernel table in ~0.3 s (the json module ~0.6 s); it raises a ValueError.
    return orjson.loads(read_gz_bytes(path, declared))


def details_doc(first_launch: int, raw_metrics: List[Dict[str, list]], rules: List[list]) -> dict:
    """One details file: launches first_launch.. with their raw metrics and rule results.

    Launches of one report mostly share a metric set, so names and units are written once per
    set and each launch is a value list.  NaN and infinities among the values are written as null
    (write_json_gz)."""
    sets: Dict[tuple, int] = {}
    set_docs, launches = [], []
    for raw, launch_rules in zip(raw_metrics, rules):
        pairs = raw.values()
        key = (tuple(raw), tuple([pair[1] for pair in pairs]))  # (names, units): two tuples, not one per metric
        if key not in sets:
            sets[key] = len(set_docs)
            set_docs.append({"names": list(key[0]), "units": list(key[1])})
        launches.append({"set": sets[key], "values": [pair[0] for pair in pairs], "rules": clean(launch_rules)})
    return {"first_launch": first_launch, "metric_sets": set_docs, "launches": launches}


def expand_launch(doc: dict, entry: dict) -> Dict[str, list]:
    """{metric: [value, unit]} of one launch entry of a details file."""
    metric_set = doc["metric_sets"][entry["set"]]
    return {n: [v, u] for n, v, u in zip(metric_set["names"], entry["values"], metric_set["units"])}

