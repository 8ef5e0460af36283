"""The CLI's exports run with numpy's huge-page advice off (cli.no_huge_page_advice: on machines
whose transparent huge pages are given on request, each advised page fault compacts and zeroes 2 MB
in the kernel, ~0.4 s of a 4M-event PyTorch export), whether numpy was imported before or not, and
never against a setting in the user's environment.  Each case runs in a fresh interpreter: numpy
reads its variable once, at import."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import sample

REPO = Path(__file__).resolve().parent.parent

EXPORT_THEN_SAY = """
import sys
if sys.argv[1] == "numpy first":
    import numpy
from tb_hwprof.app.cli import main
rc = main(["export", sys.argv[2], "--logdir", sys.argv[3], "--run", "r", "--quiet"])
import os, numpy
print(rc, numpy._core.multiarray._get_madvise_hugepage(), os.environ.get("NUMPY_MADVISE_HUGEPAGE", "-"))
"""


def export_then_say(trace: Path, logdir: Path, order: str, env=None) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    done = subprocess.run([sys.executable, "-c", EXPORT_THEN_SAY, order, str(trace), str(logdir)],
                          capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={**environ, "PYTHONPATH": str(REPO), **(env or {})})
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[-1].split()  # after the export's own lines


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="numpy advises huge pages on Linux only")
@pytest.mark.parametrize("order", ["numpy first", "numpy by the export"])
def test_an_export_runs_without_numpys_huge_page_advice(samples_dir, tmp_path, order):
    trace = sample(samples_dir, "torch/tracelens_h100_bert_small.json.gz")
    # Off, and not left in the environment of the processes the export (or its caller) starts.
    assert export_then_say(trace, tmp_path / "a", order) == ["0", "False", "-"]
    # The user's own setting stands.
    assert export_then_say(trace, tmp_path / "b", order, {"NUMPY_MADVISE_HUGEPAGE": "1"}) == ["0", "True", "1"]


def test_numpys_default_is_what_the_setting_changes():
    """Without the CLI, numpy on Linux advises huge pages (else the test above proves nothing)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("Linux only")
    environ = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    done = subprocess.run([sys.executable, "-c", "import numpy; print(numpy._core.multiarray._get_madvise_hugepage())"],
                          capture_output=True, text=True, timeout=60, env=environ)
    assert done.stdout.split() == ["True"], done.stderr
