"""What `pip install .` installs (the README's install), not the source tree: a wheel built from a copy
of this checkout must hold every module and frontend file, and export a real sample of each vendor's
tools on its own.  The other tests run an editable install, which reads the source tree, so a package
setup.py's discovery leaves out (a folder without __init__.py: readers/nvidia, amd and intel once
were) passes them all while every user's install lacks it."""
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import REPO, sample

BUILD_TIMEOUT_S, EXPORT_TIMEOUT_S = 600, 180
# What setup.py reads: the package, the frontend it installs as tb_hwprof.frontend, the README.
BUILD_INPUTS = ("setup.py", "README.md", "tb_hwprof", "frontend")
NOT_SOURCE = shutil.ignore_patterns("__pycache__", "*.so", "*.pyc", "*.egg-info")


def source_files() -> set:
    """The files a wheel must hold, by their path in it: the package's sources (Python, the C of its
    accelerators, profile_boot's bootstrap) and the frontend's files under tb_hwprof/frontend."""
    def files(root: Path):
        return {p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".so", ".pyc")}
    package = {p.relative_to(REPO).as_posix() for p in files(REPO / "tb_hwprof")}
    frontend = {"tb_hwprof/frontend/" + p.relative_to(REPO / "frontend").as_posix() for p in files(REPO / "frontend")}
    return package | frontend


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """(the wheel's member names, the folder it is unpacked in), built by pip from a copy of the
    checkout (building in place would write build/ into the repository under the other tests)."""
    root = tmp_path_factory.mktemp("install")
    tree = root / "tree"
    tree.mkdir()
    for name in BUILD_INPUTS:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, tree / name, ignore=NOT_SOURCE)
        else:
            shutil.copy2(source, tree / name)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(root / "dist"), str(tree)], capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    (built,) = (root / "dist").glob("tb_hwprof-*.whl")
    site = root / "site"
    with zipfile.ZipFile(built) as z:
        names = set(z.namelist())
        z.extractall(site)
    return names, site


def test_the_wheel_holds_every_source_file(wheel):
    names, _ = wheel
    missing = sorted(source_files() - names)
    assert not missing, f"left out of the wheel (a package folder without __init__.py?): {missing}"


def test_the_wheel_holds_the_accelerators_built_here(wheel):
    """The C readers the source tree has built (CI requires them) are built into the wheel too."""
    names, _ = wheel
    built_here = {p.relative_to(REPO).as_posix().split(".")[0] for p in (REPO / "tb_hwprof").rglob("_*.so")}
    in_wheel = {n.split(".")[0] for n in names if n.endswith(".so")}
    assert built_here <= in_wheel, sorted(built_here - in_wheel)


# One real sample per tool family, as `tb-hwprof export` takes them.
SAMPLES = {
    "nsys-sqlite": "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite",
    "ncu-rep": "ncu/darrenlu_rtx3050l_basic_2025.1.0.ncu-rep",
    "ncu-csv": "ncu/esmm_a10g_cli_metrics_ncu-csv.csv",
    "rocprof": "rocprof/v1_mi250x_laplacian/results.csv",
    "rocprof-compute": "rocprof/omniperf_vcopy_mi200",
    "vtune": "vtune/vtune_summary_tab.csv",
    "kineto": "torch/hta_sampled_2rank_rank0.json.gz",
}

EXPORT_FROM = """
import sys
sys.path.insert(0, sys.argv[1])
import tb_hwprof
assert tb_hwprof.__file__.startswith(sys.argv[1]), tb_hwprof.__file__  # the wheel's copy, not the checkout
from tb_hwprof.app.cli import main
sys.exit(main(["export", sys.argv[2], "--logdir", sys.argv[3], "--run", "run"]))
"""


@pytest.mark.parametrize("tool", sorted(SAMPLES))
def test_the_installed_package_exports_each_tools_sample(wheel, samples_dir, tool, tmp_path):
    if tool == "ncu-rep":
        pytest.importorskip("ncu_report")
    _, site = wheel
    path = samples_dir / SAMPLES[tool]
    if not path.exists():
        sample(samples_dir, SAMPLES[tool])  # skips, naming it
    done = subprocess.run([sys.executable, "-c", EXPORT_FROM, str(site), str(path), str(tmp_path / "logs")],
                          capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "logs" / "run" / "plugins" / "tb_hwprof" / "profile.json").is_file()


FRONTEND_FROM = """
import sys
sys.path.insert(0, sys.argv[1])
from tb_hwprof.plugin import static
print(static.frontend_dir())
print(static.find("views/kernels.js"))
"""


def test_the_installed_plugin_finds_its_frontend_in_the_package(wheel, tmp_path):
    """The plugin serves the frontend from tb_hwprof.frontend as installed (in a checkout it falls back
    to <repo>/frontend, which an install does not have)."""
    _, site = wheel
    done = subprocess.run([sys.executable, "-c", FRONTEND_FROM, str(site)], capture_output=True, text=True,
                          timeout=EXPORT_TIMEOUT_S, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    folder, found = done.stdout.strip().splitlines()
    assert Path(folder) == (site / "tb_hwprof" / "frontend").resolve()
    assert found.startswith(f"('{folder}/views/kernels.js'")
