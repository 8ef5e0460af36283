"""A large plain trace is scanned from a read-only map of its file, whose pages the native scanner
hands back as it passes them (issue 31: the 0.7 GB trace's whole size sat on top of the columns, the
export's peak).  The columns must equal a scan of the same bytes in memory, and the pages must
really leave the process (read from /proc/self/smaps, Linux).  The trace is a real one grown for
scale: its events repeated until the file is several times the release step."""
import json
import mmap
import sys

import pytest

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


def test_the_reader_hands_back_only_a_file_map(grown_trace, monkeypatch):
    """kineto.read passes file_map only for the map it made of a plain file: a gzipped trace's
    inflated bytes (the process' own memory) are never handed back."""
    seen = []
    real = kineto.decode_events
    monkeypatch.setattr(kineto, "decode_events", lambda data, file_map=False: seen.append(
        (type(data).__name__, file_map)) or real(data, file_map))
    kineto.read(grown_trace)
    assert seen == [("mmap", True)]
    seen.clear()
    small = grown_trace.parent / "small.json"
    small.write_bytes(grown_trace.read_bytes()[:1 << 20].rsplit(b"}, {", 1)[0] + b"}]}")
    kineto.read(small)
    assert seen == [("bytes", False)]
