"""Files of a run symlinked elsewhere are never served (shared/repro/scripts/symlink_escape_repro.sh):
the plugin follows no file symlink out of the run's asset folder, for any route."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tb_hwprof.logdir import metadata

from conftest import sample
from support_nsys import DLPROF
from support_plugin import P, App, body

REPO = Path(__file__).resolve().parent.parent
SECRET = b"secret outside the logdir"


def export(path, logdir, run):
    done = subprocess.run([sys.executable, "-m", "tb_hwprof", "export", str(path), "--logdir", str(logdir),
                           "--run", run, "--trace", "always", "--quiet"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def escaped(tmp_path_factory, samples_dir):
    """Runs whose files are symlinks: to a secret outside the logdir, and to another run's table."""
    trace = sample(samples_dir, DLPROF)
    root = tmp_path_factory.mktemp("confine")
    secret = root / "secret.json.gz"
    secret.write_bytes(SECRET)
    logdir = root / "logs"
    for run in ("trace_out", "kernels_other", "summary_out", "manifest_out", "intact"):
        export(trace, logdir, run)
    assets = {run: logdir / run / "plugins" / metadata.PLUGIN_NAME for run in os.listdir(logdir)}

    def link(run, name, target):
        (assets[run] / name).unlink()
        (assets[run] / name).symlink_to(target)
    link("trace_out", metadata.TIMELINE, secret)
    link("kernels_other", metadata.KERNELS, assets["intact"] / metadata.KERNELS)  # another run's table
    link("summary_out", metadata.summary_file("cuda_api_sum"), secret)
    shutil.copy(assets["manifest_out"] / metadata.MANIFEST, root / "profile.json")
    link("manifest_out", metadata.MANIFEST, root / "profile.json")
    return App(logdir)


def test_a_trace_file_symlinked_outside_is_not_served(escaped):
    response = escaped.get(P + "/trace", run="trace_out")
    assert response.status_code == 404 and SECRET not in body(response)
    assert b"resolves outside" in body(response)
    assert escaped.get(P + "/trace", run="intact").status_code == 200


def test_a_kernels_table_symlinked_to_another_run_is_not_read(escaped):
    doc = escaped.json("/kernels", expect=404, run="kernels_other")
    assert "resolves outside" in doc["error"]
    assert escaped.json("/kernels", run="intact")["run"] == "intact"


def test_a_summary_table_symlinked_outside_is_not_read(escaped):
    doc = escaped.json("/summary", expect=404, run="summary_out", name="cuda_api_sum")
    assert "resolves outside" in doc["error"]


def test_a_manifest_symlinked_outside_makes_the_run_an_error_not_a_source(escaped):
    runs = {r["run"]: r for r in escaped.json("/runs")["runs"]}
    assert "resolves outside" in (runs["manifest_out"]["error"] or "")
    assert runs["intact"]["error"] is None
