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

from ..logdir.tables import dumps  # noqa: F401  (the one JSON encoding: numpy values, NaN as null)

# Level 1: the tables are repetitive text; level 1 compresses them almost as well, several times faster.
GZIP_LEVEL = 1


def loads(data: bytes) -> Any:
    return orjson.loads(data)


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
    """A columnar table as the readers check it (logdir.run_checks: one rule for load_run and the plugin)."""
    from ..logdir.run_checks import check_columnar as check
    check(doc, expected_rows)
