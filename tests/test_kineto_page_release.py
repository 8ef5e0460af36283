"""A large plain trace is scanned from a read-only map of its file, whose pages the native scanner
hands back as it passes them (issue 31: the 0.7 GB trace's whole size sat on top of the columns, the
export's peak).  The columns must equal a scan of the same bytes in memory, and the pages must
really leave the process (read from /proc/self/smaps, Linux).  The trace is a real one grown for
scale: its events repeated until the file is several times the release step."""
import gzip
import hashlib
import json
import mmap
import os
import sys

import numpy as np
import pandas as pd
import pytest

from tb_hwprof.core.errors import InputError
from tb_hwprof.readers.torch import decode, kineto

from test_torch_reader import _same_events, load_json

scanner = pytest.importorskip("tb_hwprof.readers.torch._kineto_scan", reason="the C scanner is not built")

RELEASE_BYTES = 32 << 20  # _kineto_scan.c's step


@pytest.fixture(scope="module")
def grown_trace(samples_dir, tmp_path_factory):
    path = samples_dir / "torch" / "hta_v100_resnet_rank0.json.gz"
    if not path.is_file():
        pytest.skip("hta_v100_resnet_rank0.json.gz")
    doc = load_json(path)
    events = doc.pop("traceEvents")
    out = tmp_path_factory.mktemp("grown") / "grown.json"
    piece = json.dumps(events)[1:-1].encode()
    copies = -(-(4 * RELEASE_BYTES) // len(piece))
    with open(out, "wb") as f:
        f.write(b'{"schemaVersion": 1, "traceEvents": [')
        f.write(b", ".join([piece] * copies))
        f.write(b"], " + json.dumps(doc)[1:].encode())
    assert out.stat().st_size > 4 * RELEASE_BYTES
    return out


def _mapped_rss_kb(path) -> int:
    """Resident KB of this process' maps of `path` (/proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            if line[0] in "0123456789abcdef" and "-" in line.split(" ", 1)[0]:
                inside = line.rstrip().endswith(str(path))
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1])
    return total


def _scanned(path, release: bool, in_two: bool):
    with open(path, "rb") as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        if in_two:
            events = decode.scan_in_two(scanner, data, len(data) // 2, release)
        else:
            events = decode._from_native(scanner.scan(data, release))
        return events, _mapped_rss_kb(path)
    finally:
        data.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/smaps")
@pytest.mark.parametrize("in_two", [False, True], ids=["one scan", "two parts"])
def test_a_mapped_trace_is_scanned_alike_and_its_pages_handed_back(grown_trace, in_two):
    in_memory = decode._from_native(scanner.scan(grown_trace.read_bytes()))
    kept, kept_kb = _scanned(grown_trace, release=False, in_two=in_two)
    handed, handed_kb = _scanned(grown_trace, release=True, in_two=in_two)
    assert len(in_memory) > 250_000
    _same_events(in_memory, kept)
    _same_events(in_memory, handed)
    size_kb = grown_trace.stat().st_size // 1024
    assert kept_kb > 0.9 * size_kb  # without release every page read stays (the test can fail)
    # what is left: less than one release step per scanning thread, and the pages read again after
    # the scan (the metadata events, the top-level values at the end)
    assert handed_kb < (2 * RELEASE_BYTES) // 1024 + 4096


@pytest.fixture(scope="module")
def grown_gzip(grown_trace):
    out = grown_trace.parent / "grown.json.gz"
    out.write_bytes(gzip.compress(grown_trace.read_bytes(), compresslevel=1))
    return out


def test_the_reader_hands_back_only_a_file_map(grown_trace, grown_gzip, monkeypatch):
    """kineto.read passes file_map only for a map of a file: a large plain trace's own, or the
    temporary file a large gzip trace was inflated into.  A small trace's bytes (the process' own
    memory) are never handed back: handed back, an anonymous page would read as zeros."""
    seen = []
    real = kineto.decode_events
    monkeypatch.setattr(kineto, "decode_events", lambda data, file_map=False: seen.append(
        (type(data).__name__, file_map)) or real(data, file_map))
    kineto.read(grown_trace)
    kineto.read(grown_gzip)
    assert seen == [("mmap", True), ("mmap", True)]
    seen.clear()
    small = grown_trace.parent / "small.json"
    small.write_bytes(grown_trace.read_bytes()[:1 << 20].rsplit(b"}, {", 1)[0] + b"}]}")
    kineto.read(small)
    small_gz = grown_trace.parent / "small.json.gz"
    small_gz.write_bytes(gzip.compress(small.read_bytes()))
    kineto.read(small_gz)
    assert seen == [("bytes", False), ("bytes", False)]


# -- a large gzip trace: inflated into a temporary file, mapped, its pages handed back -------------
def _region_rss_kb(data) -> int:
    """Resident KB of the map holding `data` (/proc/self/smaps; the inflated trace's file is
    unlinked, an O_TMPFILE without a name to look for): found by its address."""
    view = np.frombuffer(data, dtype=np.uint8)
    address = view.ctypes.data
    del view  # a view left would keep the map from closing
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            first = line.split(" ", 1)[0]
            if "-" in first and all(c in "0123456789abcdef-" for c in first):
                lo, hi = (int(x, 16) for x in first.split("-"))
                inside = lo <= address < hi
            elif inside and line.startswith("Rss:"):
                return int(line.split()[1])
    raise AssertionError("no map holds the data")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/smaps")
def test_a_large_gzip_trace_is_read_from_a_file_it_is_inflated_into(grown_trace, grown_gzip):
    """The 0.7 GB trace gzipped peaked at 1.6 GB (its inflated bytes held whole), 0.9 GB as plain: a
    gzip trace past MAP_FROM_BYTES is inflated into a temporary file, whose map holds the very bytes
    gunzip gives and whose pages the scan hands back as a plain trace's."""
    plain = grown_trace.read_bytes()
    assert len(plain) > kineto.MAP_FROM_BYTES
    with kineto.trace_bytes(grown_gzip) as (data, mapped, own):
        assert mapped and own is None and isinstance(data, mmap.mmap)
        assert data[:] == plain
        kept = decode.decode_events(data, file_map=False)
        kept_kb = _region_rss_kb(data)
    with kineto.trace_bytes(grown_gzip) as (data, mapped, own):
        handed = decode.decode_events(data, file_map=True)
        handed_kb = _region_rss_kb(data)
    assert data.closed  # the map (and its unlinked file) gone with the block
    _same_events(kept, handed)
    assert kept_kb > 0.9 * len(plain) // 1024  # without release every page read stays (the test can fail)
    assert handed_kb < (2 * RELEASE_BYTES) // 1024 + 4096
    profile = kineto.read(grown_gzip)
    assert profile.provenance.source_sha256 == hashlib.sha256(grown_gzip.read_bytes()).hexdigest()
    assert len(profile.kernels) == len(kineto.read(grown_trace).kernels) > 0


@pytest.mark.parametrize("members", [1, 3])
@pytest.mark.parametrize("limit", [1 << 20, 1 << 30], ids=["spilled", "in memory"])
def test_inflating_in_steps_gives_what_gunzip_gives(samples_dir, tmp_path, monkeypatch, members, limit):
    """A real trace gzipped as one member or several (gzip allows members one after another), read
    through steps far smaller than the trace (so steps end mid-member, at a member's end, and with
    output left inside zlib), into memory or into a file: the bytes gunzip gives."""
    plain = gzip.decompress((samples_dir / "torch" / "tracelens_h100_falconsai_vit.json.gz").read_bytes())
    cuts = [len(plain) * i // members for i in range(members + 1)]
    path = tmp_path / "trace.json.gz"
    path.write_bytes(b"".join(gzip.compress(plain[a:b]) for a, b in zip(cuts, cuts[1:])))
    monkeypatch.setattr(kineto, "READ_STEP", 4099)
    monkeypatch.setattr(kineto, "INFLATE_STEP", 65536)
    monkeypatch.setattr(kineto, "MAP_FROM_BYTES", limit)
    assert len(plain) > 1 << 20
    with kineto.trace_bytes(path) as (data, mapped, own):
        assert mapped == (limit < len(plain))
        assert data[:] == plain


@pytest.mark.parametrize("limit", [1 << 20, 1 << 30], ids=["spilled", "in memory"])
def test_a_damaged_or_unbounded_gzip_is_refused_in_steps(samples_dir, tmp_path, monkeypatch, limit):
    """A gzip trace cut short, or one inflating past TB_HWPROF_MAX_INFLATE_BYTES, is one error naming
    the file whether it was being inflated into memory or into a file."""
    src = (samples_dir / "torch" / "tracelens_h100_falconsai_vit.json.gz").read_bytes()
    size = len(gzip.decompress(src))
    monkeypatch.setattr(kineto, "INFLATE_STEP", 65536)
    monkeypatch.setattr(kineto, "MAP_FROM_BYTES", limit)
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(src[:len(src) * 2 // 3])
    with pytest.raises(InputError, match="damaged gzip .*cut short") as err:
        kineto.read(cut)
    assert str(err.value).startswith(str(cut)) and "\n" not in str(err.value)
    whole = tmp_path / "whole.json.gz"
    whole.write_bytes(src)
    monkeypatch.setenv(kineto.INFLATE_VARIABLE, str(size - 1))
    with pytest.raises(InputError, match=f"inflates to more than {size - 1:,} bytes"):
        kineto.read(whole)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="/dev/full")
def test_no_room_to_inflate_reads_the_trace_in_memory_and_says_so(samples_dir, monkeypatch):
    """TMPDIR full (a write to /dev/full fails as a full disk does): the trace is inflated in memory
    as before the temporary file, the same bytes and the same tables, and a progress line names the
    trace, the folder and how to spare that memory."""
    from tb_hwprof.core.progress import told_to
    trace = samples_dir / "torch" / "tracelens_h100_falconsai_vit.json.gz"
    plain = gzip.decompress(trace.read_bytes())
    expected = kineto.read(trace)
    monkeypatch.setattr(kineto, "MAP_FROM_BYTES", 1 << 20)
    monkeypatch.setattr(kineto, "INFLATE_STEP", 1 << 18)
    monkeypatch.setattr(kineto.tempfile, "TemporaryFile", lambda **_: open("/dev/full", "wb", buffering=0))
    said = []
    with told_to(said.append):
        with kineto.trace_bytes(trace) as (data, mapped, own):
            assert (data, mapped, own) == (plain, False, None)
        profile = kineto.read(trace)
    assert len(said) == 2 and all(line.startswith(f"{trace}: cannot inflate the trace into ") and "TMPDIR" in line
                                  for line in said)
    pd.testing.assert_frame_equal(profile.kernels, expected.kernels)
    assert profile.provenance.source_sha256 == expected.provenance.source_sha256
