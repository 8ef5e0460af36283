"""JSON in and out for the plugin, with orjson (a requirement: 2-3x faster parsing of a 100k-launch
table than the json module, 10x faster encoding).

Responses are cached as gzip bytes, so a warm request costs no encoding and no compression:
TensorBoard's http_util.Respond sends them as they are (and decompresses on the fly for the
rare client that does not accept gzip).
"""
from __future__ import annotations

import gzip
from typing import Any, Optional

import orjson

# Level 1: the tables are repetitive text; level 1 compresses them almost as well, several times faster.
GZIP_LEVEL = 1


def loads(data: bytes) -> Any:
    return orjson.loads(data)


def _default(value):
    """numpy scalars (pandas hands them out) -> Python; NaN handled by the callers' cleaning."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def dumps(obj: Any) -> bytes:
    """Compact JSON; NaN and infinities become null (a missing figure, never 0)."""
    return orjson.dumps(obj, default=_default, option=orjson.OPT_SERIALIZE_NUMPY)


def gzip_bytes(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0)


def response(obj: Any) -> bytes:
    """The gzip bytes a JSON route sends."""
    return gzip_bytes(dumps(obj))


def splice_run(doc_bytes: bytes, run: str) -> bytes:
    """`{"run": R, ...doc}` from the bytes of a JSON object, without re-encoding the document."""
    body = doc_bytes.lstrip()
    if not body.startswith(b"{"):
        raise ValueError("not a JSON object")
    return b'{"run":' + dumps(run) + b"," + body[1:]


def splice_field(doc_bytes: bytes, key: str, value: Any) -> bytes:
    """`{key: value, ...doc}` from the bytes of a JSON object (see splice_run)."""
    body = doc_bytes.lstrip()
    if not body.startswith(b"{"):
        raise ValueError("not a JSON object")
    return b"{" + dumps(key) + b":" + dumps(value) + b"," + body[1:]


def check_columnar(doc: Any, expected_rows: Optional[int] = None) -> None:
    """A columnar table: every listed column present with `rows` values (and as many as the
    manifest announced, which catches a table from another export).  Format 2 kernels tables
    may hold a column in "delta", "dictionary" or "constant" instead of "data" (docs/FORMAT.md)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("columns"), list) or not doc["columns"]:
        raise ValueError("not a columnar table (no columns)")
    rows, data = doc.get("rows"), doc.get("data")
    constant, dictionary, delta = doc.get("constant", {}), doc.get("dictionary", {}), doc.get("delta", {})
    if not isinstance(rows, int) or not all(isinstance(d, dict) for d in (data, constant, dictionary, delta)):
        raise ValueError("not a columnar table (no rows / data)")
    for column in doc["columns"]:
        if (column in data) + (column in delta) + (column in constant) + (column in dictionary) != 1:
            raise ValueError(f"column {column!r} is not in exactly one of data, delta, dictionary, constant")
        if column in data or column in delta:
            _check_values(column, data[column] if column in data else delta[column], rows)
        elif column in dictionary:
            _check_dictionary(column, dictionary[column], rows)
    if isinstance(expected_rows, int) and expected_rows != rows:
        raise ValueError(f"{rows} rows but profile.json says {expected_rows} launches (files from different exports?)")


def _check_values(column: str, values: Any, rows: int) -> None:
    if not isinstance(values, list) or len(values) != rows:
        raise ValueError(f"column {column!r} does not hold {rows} values")


def _check_dictionary(column: str, entry: Any, rows: int) -> None:
    """Codes are integers indexing the values (the browser looks them up as they are)."""
    values, codes = (entry.get("values"), entry.get("codes")) if isinstance(entry, dict) else (None, None)
    if not isinstance(values, list):
        raise ValueError(f"dictionary column {column!r} has no values")
    _check_values(column, codes, rows)
    low, high = (min(codes), max(codes)) if codes else (0, -1)
    if type(low) is not int or type(high) is not int or low < 0 or high >= len(values):
        raise ValueError(f"dictionary column {column!r} has codes outside 0..{len(values) - 1}")
