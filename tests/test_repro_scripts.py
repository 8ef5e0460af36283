"""The shell reproducers of ../shared/repro/scripts, run as they are (tb-hwprof and a real TensorBoard
from this install, curl against it): each showed a defect; each must now show it is gone.  The scripts
read ../shared/samples relative to the repository, as their README says."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tb_hwprof
from conftest import REPO, repro

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="bash, curl and /proc")


def run_script(name: str) -> str:
    script = repro(f"scripts/{name}")
    if not (REPO.parent / "shared" / "samples").is_dir():
        pytest.skip("the scripts read ../shared/samples beside the repository")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", str(script)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    return done.stdout + done.stderr


def logdir_of(output: str) -> Path:
    return Path(re.search(r"exported 1 run\(s\) to (\S+):", output).group(1))


def test_glob_characters_in_a_run_name_touch_no_other_run():
    """--run '*' beside another run's old copy and another export's staging folder: '*' is a run of
    its own; the others' folders are exactly as they were."""
    output = run_script("glob_run_name_repro.sh")
    assert "rc=0" in output, output
    logdir = logdir_of(output)
    assert (logdir / ".other.tb-hwprof-staging-inprogress").is_dir()
    kept_old = tb_hwprof.load_run(logdir / ".victim.tb-hwprof-old-999")
    star, victim = tb_hwprof.load_run(logdir / "*"), tb_hwprof.load_run(logdir / "victim")
    assert star.provenance.source_sha256 == victim.provenance.source_sha256 == kept_old.provenance.source_sha256  # one input, three runs
    assert (logdir / "*").stat().st_ino != (logdir / ".victim.tb-hwprof-old-999").stat().st_ino


def test_a_gzip_bomb_is_refused_without_inflating_it():
    """A 1.1 MB kernels.json.gz inflating to 1 GiB: TensorBoard answers 422 and stays small (it
    reached 2.24 GB before)."""
    output = run_script("gzip_bomb_repro.sh")
    code = re.search(r"^(\d{3})$", output, re.M)
    assert code and code.group(1) == "422", output  # 000 would mean TensorBoard never answered
    peak_kb = int(re.search(r"VmHWM:\s+(\d+) kB", output).group(1))
    assert peak_kb < 600_000, output


def test_a_file_symlinked_out_of_the_logdir_is_never_served():
    output = run_script("symlink_escape_repro.sh")
    assert "secret outside the logdir" not in output
    assert '"error":' in output and "outside" in output, output  # TensorBoard answered, with the reason
