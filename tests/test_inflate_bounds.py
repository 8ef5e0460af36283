"""Compressed bombs (shared/repro/scripts/gzip_bomb_repro.sh): a run's kernels.json.gz replaced by 1 MB
that inflates to 1 GiB is refused by load_run and the plugin after inflating at most the size the
manifest declares (plus slack), never held whole; runs' real tables read as before."""
import gzip
import json
import resource
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

import tb_hwprof
from tb_hwprof.core.errors import InputError
from tb_hwprof.logdir import metadata, tables

from conftest import sample
from support_plugin import App

REPO = Path(__file__).resolve().parent.parent
CSV = "ncu/esmm_a10g_cli_metrics_ncu-csv.csv"  # the repro's report


def bomb(path: Path, inflated: int = 1 << 30) -> None:
    """`inflated` bytes of JSON-ish text compressed at level 9 (~1 MB per GiB), written in pieces."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as f:
        f.write(z.compress(b'{"columns": ['))
        piece = b" " * (1 << 24)
        for _ in range(inflated // len(piece)):
            f.write(z.compress(piece))
        f.write(z.compress(b"]}") + z.flush())


@pytest.fixture
def run_dir(tmp_path, samples_dir):
    done = subprocess.run([sys.executable, "-m", "tb_hwprof", "export", str(samples_dir / CSV), "--logdir",
                           str(tmp_path / "logs"), "--run", "bomb", "--quiet"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return tmp_path / "logs" / "bomb"


def assets(run_dir: Path) -> Path:
    return run_dir / "plugins" / metadata.PLUGIN_NAME


def test_the_manifest_declares_what_each_table_inflates_to(run_dir):
    manifest = json.loads((assets(run_dir) / metadata.MANIFEST).read_text())
    declared = manifest["inflated_bytes"]
    files = sorted(p.relative_to(assets(run_dir)).as_posix() for p in assets(run_dir).rglob("*.json.gz"))
    assert sorted(declared) == files
    for name, size in declared.items():
        assert size == len(gzip.decompress((assets(run_dir) / name).read_bytes()))


def test_load_run_refuses_a_bomb_after_the_declared_size(run_dir):
    bomb(assets(run_dir) / metadata.KERNELS)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(InputError, match="inflates past"):
        tb_hwprof.load_run(run_dir)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 200, f"peak grew {grown_mb:.0f} MB while refusing the bomb"


def test_the_plugin_answers_a_bomb_with_a_422(run_dir):
    bomb(assets(run_dir) / metadata.KERNELS)
    doc = App(run_dir.parent).json("/kernels", expect=422, run="bomb")
    assert "inflates past" in doc["error"] and "\n" not in doc["error"]


def test_runs_without_declared_sizes_are_bounded_by_ratio(run_dir):
    """Runs exported before sizes were declared still load; a bomb in one is refused by the ratio."""
    path = assets(run_dir) / metadata.MANIFEST
    manifest = json.loads(path.read_text())
    del manifest["inflated_bytes"]
    path.write_text(json.dumps(manifest))
    assert len(tb_hwprof.load_run(run_dir).kernels) == manifest["kernel_count"]
    bomb(assets(run_dir) / metadata.KERNELS)
    assert tables.inflate_limit(assets(run_dir) / metadata.KERNELS, None) < 1 << 30
    with pytest.raises(InputError, match="inflates past"):
        tb_hwprof.load_run(run_dir)


# -- the exporter (issue 30, item 3) ----------------------------------------------------------------
def test_the_exporter_refuses_a_trace_that_inflates_beyond_its_bound(samples_dir, tmp_path, monkeypatch, capfd):
    """A real gzip trace with the bound set just under its inflated size is refused in one line naming
    it and the variable that raises the bound; at its size it reads (the bound is what decides)."""
    from tb_hwprof.app.cli import main
    from tb_hwprof.readers.torch import kineto
    trace = sample(samples_dir, "torch/kineto_rn50_v100_jun2021.json.gz")
    size = len(gzip.decompress(trace.read_bytes()))
    monkeypatch.setenv(kineto.INFLATE_VARIABLE, str(size - 1))
    assert main(["export", str(trace), "--logdir", str(tmp_path), "--run", "r", "--quiet"]) == 1
    (line,) = capfd.readouterr().err.splitlines()
    assert line.startswith(f"tb-hwprof: error: {trace}: inflates to more than {size - 1:,} bytes")
    assert kineto.INFLATE_VARIABLE in line and not (tmp_path / "r").exists()
    monkeypatch.setenv(kineto.INFLATE_VARIABLE, str(size))
    assert main(["export", str(trace), "--logdir", str(tmp_path), "--run", "r", "--quiet"]) == 0


def test_the_default_inflate_bound_allows_real_traces_and_stops_bombs():
    """The default: 100x the compressed size, at least 1 GiB (real Kineto traces compress 10-30x)."""
    from tb_hwprof.readers.torch import kineto
    assert kineto.inflate_limit(8 << 20) == 1 << 30  # an 8 MB gzip: 1 GiB, not the 8 GB a bomb of zeros makes
    assert kineto.inflate_limit(100 << 20) == 100 * (100 << 20)
