"""One launch's raw metrics out of raw_metrics.json.gz without parsing the whole document.

The file of a 100,000-launch run is ~50 MB gzipped, ~430 MB of JSON and ~1 GB once parsed
(~10 s); /kernel needs one launch.  One sequential pass (~1 s) notes, every few MB of compressed
input, a copy of the zlib decompressor state (zlib's zran.c idea, with zlib's own copy()) and
how many launch entries started before that point; a launch then costs decompressing from the
nearest checkpoint and parsing that one entry.

It relies on the byte layout tables.write_raw_metrics produces (compact json.dumps: metric_sets
first, then launches as `{"set":N,"values":[...]}`).  The marker `{"set":` cannot occur inside a
JSON string (quotes there are escaped), so it marks exactly the launch entries.  Whenever the
layout does not hold (entry count differs, unexpected entry), callers fall back to the reader.
"""
from __future__ import annotations

import bisect
import zlib
from typing import List, NamedTuple, Optional

from . import encode

BLOCK = 1 << 20  # compressed bytes per read
CHECKPOINT_EVERY = 4  # blocks between checkpoints (~32 KB of zlib state each)
MARKER = b'{"set":'
LAUNCHES = b'"launches":['


class LayoutError(ValueError):
    """The file is not laid out as this index expects: use the reader instead."""


class Checkpoint(NamedTuple):
    offset: int  # compressed offset to resume reading at
    entries: int  # launch entries that started (marker complete) before this point
    tail: bytes  # last bytes of output before this point (a marker may straddle the boundary)
    state: object  # copy of the zlib decompressor


class RawMetricsIndex:
    def __init__(self, path):
        self.path = path
        self.checkpoints: List[Checkpoint] = []
        self.count = 0
        self.metric_sets: Optional[list] = None

    def build(self) -> "RawMetricsIndex":
        d = zlib.decompressobj(wbits=31)  # gzip framing, CRC checked at the end
        head, tail, offset, block = b"", b"", 0, 0
        with open(self.path, "rb") as f:
            while not d.eof:
                data = f.read(BLOCK)
                if block % CHECKPOINT_EVERY == 0 and self.metric_sets is not None:
                    self.checkpoints.append(Checkpoint(offset, self.count, tail, d.copy()))
                if not data:
                    raise EOFError("truncated gzip stream")
                out = d.decompress(data)
                offset, block = offset + len(data), block + 1
                if self.metric_sets is None:  # still in the header: collect it
                    head += out
                    out = self._read_header(head)
                    if out is None:
                        continue
                    tail = b""
                self.count += (tail + out).count(MARKER)
                tail = (tail + out)[-(len(MARKER) - 1):]
        return self

    def _read_header(self, head: bytes) -> Optional[bytes]:
        """Parse metric_sets once `"launches":[` went by; returns the output after it."""
        at = head.find(LAUNCHES)
        if at < 0:
            if len(head) > 256 << 20:
                raise LayoutError("no launches list in the first 256 MB")
            return None
        try:
            self.metric_sets = encode.loads(head[:at] + b'"launches":[]}')["metric_sets"]
        except (ValueError, KeyError, TypeError) as e:
            raise LayoutError(f"unexpected header ({e})") from None
        # First checkpoint: the start of the launches list (the decompressor state is not at
        # that byte, so resume from the file start with the header bytes skipped instead).
        self._launch_start = at + len(LAUNCHES)
        self.checkpoints.append(Checkpoint(0, 0, b"", None))
        return head[at + len(LAUNCHES):]

    def launch(self, i: int) -> dict:
        """{metric: [value, unit]} of launch i."""
        if not 0 <= i < self.count:
            raise IndexError(i)
        entry = encode.loads(self._entry_bytes(i))
        if not isinstance(entry, dict) or set(entry) != {"set", "values"}:
            raise LayoutError("unexpected launch entry")
        names_units = self.metric_sets[entry["set"]]
        return {n: [v, u] for n, v, u in zip(names_units["names"], entry["values"], names_units["units"])}

    def _entry_bytes(self, i: int) -> bytes:
        cp = self.checkpoints[bisect.bisect_right([c.entries for c in self.checkpoints], i) - 1]
        d = cp.state.copy() if cp.state is not None else zlib.decompressobj(wbits=31)
        buf, skip = cp.tail, (self._launch_start if cp.state is None else 0)
        want = i - cp.entries + 2  # entry i and the one after it (its end)
        with open(self.path, "rb") as f:
            f.seek(cp.offset)
            while buf.count(MARKER) < want and not d.eof:
                data = f.read(BLOCK)
                if not data:
                    break
                buf += d.decompress(data)
                if skip and len(buf) >= skip:
                    buf, skip = buf[skip:], 0
        return _nth_entry(buf, i - cp.entries)


def _nth_entry(buf: bytes, k: int) -> bytes:
    """The k-th (0-based) `{"set":...}` entry in buf, without the separating comma."""
    start = -1
    for _ in range(k + 1):
        start = buf.find(MARKER, start + 1)
        if start < 0:
            raise LayoutError("launch entry not found")
    end = buf.find(MARKER, start + 1)
    if end >= 0:
        return buf[start:end].rstrip().rstrip(b",")
    last = buf[start:].rstrip()
    if not last.endswith(b"]}"):
        raise LayoutError("unterminated launch list")
    return last[:-2]  # drop the `]}` closing the launches list and the document
