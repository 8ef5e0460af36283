"""Format detection through the reader registry: every real sample is claimed by the module that reads
its format, and bytes that are no report (a bare '\\r', a gzip of JSON, binary noise, truncations of
real files) end in the one-line InputError, never another exception."""
import gzip
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tb_hwprof import readers
from tb_hwprof.readers.detect import detect, sniff
from tb_hwprof.core.errors import InputError

# A sample's folder and suffix -> the format its module must claim (independent of the registry's order).
EXPECTED = [("ncu", ".ncu-rep", "ncu-rep"), ("nsys", ".sqlite", "nsys-sqlite"), ("vtune", ".csv", "vtune-csv"),
            ("nsys", ".csv", "nsys-stats-csv"), ("ncu", ".csv", "ncu-csv"), ("torch", ".json.gz", "pytorch-trace"),
            ("torch", ".json", "pytorch-trace")]


def test_every_format_is_read_by_exactly_one_registered_module():
    names = [fmt for module in readers.reader_modules() for fmt in module.FORMATS]
    assert len(names) == len(set(names))
    for module in readers.reader_modules():
        assert callable(module.sniff) and callable(module.read), module.__name__


@pytest.mark.parametrize("folder, suffix, fmt", EXPECTED)
def test_real_samples_are_claimed_by_their_module(samples_dir, folder, suffix, fmt):
    files = sorted(p for p in (samples_dir / folder).rglob(f"*{suffix}") if p.is_file())
    assert files, f"no {suffix} sample under {folder}"
    for path in files:
        got, module = detect(path)
        assert got == fmt, path
        assert fmt in module.FORMATS


def test_workload_folders_and_their_main_table_are_one_format(roc):
    for folder in sorted(p for p in roc.iterdir() if (p / "pmc_perf.csv").is_file() and (p / "sysinfo.csv").is_file()):
        assert sniff(folder) == "rocprof-compute"
        assert sniff(folder / "pmc_perf.csv") == "rocprof-compute"


def _refused_as_unrecognised(path, looks_like):
    with pytest.raises(InputError) as caught:
        sniff(path)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message
    assert f"unrecognised report format (looks like {looks_like})" in message


def test_bare_carriage_return_is_unrecognised_text(tmp_path):
    path = tmp_path / "x.csv"
    path.write_bytes(b"Kernel,Time\rnot\r\"quoted\rfield")
    _refused_as_unrecognised(path, "text")


def test_gzipped_json_is_unrecognised_gzip(tmp_path, samples_dir):
    """A gzip of JSON that is no PyTorch trace (no Kineto key nor category) is not claimed."""
    path = tmp_path / "trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": []}).encode()))
    _refused_as_unrecognised(path, "gzip-compressed data")


def test_binary_noise_is_unrecognised_random_bytes(tmp_path):
    path = tmp_path / "noise.bin"
    path.write_bytes(bytes(range(256)) * 16)
    _refused_as_unrecognised(path, "random bytes")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=st.sampled_from([b"", b"\r", b"\x1f\x8b\x08", b"{", b"SQLite format 3\x00", b"NVIDIA Tegra Profiler Report",
                               b"ID,Process ID,Process Name", b"\xef\xbb\xbfFunction,CPU Time", b"KernelName,gpu-id"]),
       body=st.binary(max_size=2048))
def test_detection_of_arbitrary_bytes_raises_only_input_errors(tmp_path, prefix, body):
    path = tmp_path / "fuzzed"
    path.write_bytes(prefix + body)
    try:
        fmt, module = detect(path)
    except InputError as e:
        assert "\n" not in str(e)
        return
    assert fmt in module.FORMATS


def test_truncations_of_real_samples_detect_or_refuse_cleanly(tmp_path, samples_dir):
    """Every real sample cut at a few points: detection claims it or refuses it, nothing else."""
    files = [p for p in sorted(samples_dir.rglob("*")) if p.is_file() and p.stat().st_size < 50 << 20
             and "PROVENANCE" not in p.name]
    assert files
    for i, path in enumerate(files):
        data = path.read_bytes()
        for cut in (1, 17, len(data) // 2):
            part = tmp_path / f"{i}_{cut}{''.join(path.suffixes)[-12:]}"
            part.write_bytes(data[:cut])
            try:
                detect(part)
            except InputError:
                pass
            os.remove(part)
