"""Shared fixtures.  Real profiler files are read in place from TB_HWPROF_SAMPLES
(default ../shared/samples beside the repo); tests that need them skip with a reason
when absent, and .ci/run sets TB_HWPROF_REQUIRE_SAMPLES=1 to turn that into a failure."""
import json
import os
import socket
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def samples_path() -> Path:
    return Path(os.environ.get("TB_HWPROF_SAMPLES", REPO.parent / "shared" / "samples"))


def required(path: Path, what: str, variable: str, exists=Path.is_dir) -> Path:
    """`path`, or a skip when it is absent (a failure under TB_HWPROF_REQUIRE_SAMPLES, as in CI)."""
    if not exists(path):
        if os.environ.get("TB_HWPROF_REQUIRE_SAMPLES"):
            pytest.fail(f"{what} required but missing at {path} (set {variable})")
        pytest.skip(f"{what} not found at {path} (set {variable})")
    return path


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    return required(samples_path(), "real profiler samples", "TB_HWPROF_SAMPLES")


def ncu_actions(ncu_report, path):
    """Every launch (action) of an .ncu-rep in order, read by NVIDIA's own module: the tests' oracle."""
    ctx = ncu_report.load_report(str(path))
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            yield rng.action_by_idx(a)


# ncu_report carries state from one report to the next in a process (having read the A10 sample it
# gives other reports' metrics wrong units: "sector" for "byte", "byte" for "%"), so an oracle that
# must be NVIDIA's reading of one report alone is read in a fresh process.
FRESH_ORACLE = """
import pickle, sys
import ncu_report
ctx, out = ncu_report.load_report(sys.argv[1]), []
for r in range(ctx.num_ranges()):
    rng = ctx.range_by_idx(r)
    for a in range(rng.num_actions()):
        action = rng.action_by_idx(a)
        metrics = {}
        for name in action.metric_names():
            metric = action.metric_by_name(name)
            metrics[name] = [metric.value(), metric.unit()]
        out.append((metrics, action.name(), action.name(ncu_report.IAction.NameBase_DEMANGLED),
                    action.rule_results_as_dicts(), action.name(ncu_report.IAction.NameBase_MANGLED)))
with open(sys.argv[2], "wb") as f:
    pickle.dump(out, f)
"""


def fresh_ncu_oracle(path) -> list:
    """Per launch of an .ncu-rep, as NVIDIA's ncu_report reads it in a process of its own:
    ({metric: [value, unit]}, kernel name, demangled name, rule results, mangled name)."""
    import pickle
    import subprocess
    import sys
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "oracle.pickle"
        done = subprocess.run([sys.executable, "-c", FRESH_ORACLE, str(path), str(out)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        with open(out, "rb") as f:
            return pickle.load(f)


def repro_path() -> Path:
    """Reproducers of reliability defects (TB_HWPROF_REPRO, default ../shared/repro beside the repo)."""
    return Path(os.environ.get("TB_HWPROF_REPRO", REPO.parent / "shared" / "repro"))


def repro(name: str) -> Path:
    """One reproducer (file or folder) relative to the repro folder; the test skips when it is absent."""
    return required(repro_path() / name, f"reproducer {name}", "TB_HWPROF_REPRO", Path.exists)


def pytest_configure(config):
    config.addinivalue_line("markers", "fuzz: damaged inputs and runs (tests/fuzzing.py; TB_HWPROF_FUZZ_MUTANTS sets how many)")


def pytest_report_header(config):
    """Said once, at the start: where the real files are looked for (without them most tests skip)."""
    lines = []
    for what, path, variable in (("real profiler samples", samples_path(), "TB_HWPROF_SAMPLES"),
                                 ("reproducers", repro_path(), "TB_HWPROF_REPRO")):
        found = "found" if path.is_dir() else "NOT FOUND: the tests that read them skip"
        lines.append(f"tb-hwprof {what}: {path} ({found}; set {variable} to read them elsewhere)")
    return lines


@pytest.fixture(autouse=True)
def nothing_left_frozen():
    """No test leaves this process' objects frozen out of the garbage collector (jobs freezes them
    around a rank's fork): later tests measuring copy-on-write would measure nothing."""
    import gc
    yield
    assert gc.get_freeze_count() == 0, "a test left objects frozen (gc.freeze without gc.unfreeze)"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 (for a TensorBoard a test starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read().decode("utf-8"))


def sample(samples_dir: Path, name: str) -> Path:
    """One samples-relative file; the test skips when this sample is not there."""
    path = samples_dir / name
    if not path.is_file():
        pytest.skip(f"{name} not in the samples")
    return path


def _tool_folder(samples_dir: Path, tool: str) -> Path:
    path = samples_dir / tool
    if not path.is_dir():
        pytest.skip(f"no {tool} samples under {samples_dir}")
    return path


@pytest.fixture(scope="session")
def roc(samples_dir) -> Path:
    """<samples>/rocprof (rocprof v1/v2/v3, rocpd, rocprof-compute workloads)."""
    return _tool_folder(samples_dir, "rocprof")


@pytest.fixture(scope="session")
def vt(samples_dir) -> Path:
    """<samples>/vtune."""
    return _tool_folder(samples_dir, "vtune")


@pytest.fixture(scope="session")
def ncu_report_module():
    if os.environ.get("TB_HWPROF_REQUIRE_SAMPLES"):
        import ncu_report  # noqa: F401  (CI installs it: a missing module must fail, not skip)
    return pytest.importorskip("ncu_report", reason="NVIDIA's ncu-report is not installed (pip install 'tb-hwprof[ncu]')")


def ncu_rep_files(samples: Path):
    """Every real report of samples/ncu.  The trace + report pairs' reports (samples/pairs, xz) are
    tested in tests/test_h200_pair.py, each loaded once: NVIDIA's ncu_report keeps ~600 MB of a
    136 MB report after its context is gone, so a report in every per-file test (~20 loads in one
    process) took a test process to 14 GB."""
    return sorted((samples / "ncu").rglob("*.ncu-rep"))


H200_PAIR = "pairs/h200_resnet18_bf16"


def export_h200_pair(samples: Path, tmp_path_factory, logdir: Path, run: str) -> Path:
    """The shared H200 pair (trace + its Nsight Compute report) exported joined per configuration as
    `run` in `logdir`, in a child process (ncu_report keeps ~600 MB of the report after reading it)."""
    import subprocess
    import sys
    report = decompressed(samples / H200_PAIR / "resnet18_step3_first58.ncu-rep.xz", tmp_path_factory)
    subprocess.run([sys.executable, "-m", "tb_hwprof", "export", str(samples / H200_PAIR / "resnet18_step3.pt.trace.json.gz"),
                    str(report), "--join", "--per-config", "--logdir", str(logdir), "--run", run, "--quiet"], check=True)
    return logdir


def export_sample(samples: Path, relative: str, logdir: Path, run: str) -> None:
    """One real sample exported as `run` in `logdir`, in a child process."""
    import subprocess
    import sys
    subprocess.run([sys.executable, "-m", "tb_hwprof", "export", str(samples / relative), "--logdir", str(logdir),
                    "--run", run, "--quiet"], check=True)


_DECOMPRESSED = {}


def decompressed(path: Path, tmp_path_factory) -> Path:
    """`path`, or for a `.xz` file its content in a temporary folder (once per test process)."""
    if path.suffix != ".xz":
        return path
    if path not in _DECOMPRESSED:
        import lzma
        import shutil
        out = tmp_path_factory.mktemp("decompressed") / path.stem
        with lzma.open(path) as source, open(out, "wb") as sink:
            shutil.copyfileobj(source, sink, 1 << 20)
        _DECOMPRESSED[path] = out
    return _DECOMPRESSED[path]


@pytest.fixture
def ncu_rep(request):
    """One real .ncu-rep (parametrised over ncu_rep_files by pytest_generate_tests)."""
    return request.param


def nsys_sqlite_files(samples: Path):
    return sorted((samples / "nsys").glob("*.sqlite"))


# Argument name -> the sample files a test taking it runs on, one test per file.
PER_FILE_ARGUMENTS = {"ncu_rep": (ncu_rep_files, ".ncu-rep"), "nsys_sqlite": (nsys_sqlite_files, "nsys .sqlite")}


def pytest_generate_tests(metafunc):
    """Parametrise `ncu_rep` / `nsys_sqlite` over every such sample file (ids are file names)."""
    for argument, (files_of, what) in PER_FILE_ARGUMENTS.items():
        if argument not in metafunc.fixturenames:
            continue
        files = files_of(samples_path()) if samples_path().is_dir() else []
        if not files:
            # Unmarked None fails the test when samples are required (CI); otherwise skip.
            files = [None] if os.environ.get("TB_HWPROF_REQUIRE_SAMPLES") else [
                pytest.param(None, marks=pytest.mark.skip(reason=f"no {what} under {samples_path()}"))]
        metafunc.parametrize(argument, files, ids=lambda p: p.name if isinstance(p, Path) else "none",
                             indirect=argument == "ncu_rep")


@pytest.fixture(scope="session")
def read_sample(samples_dir):
    """tb_hwprof.read of a samples-relative path, each file read once per session."""
    import tb_hwprof

    cache = {}

    def read(relative: str):
        if relative not in cache:
            cache[relative] = tb_hwprof.read(samples_dir / relative)
        return cache[relative]
    return read


# -- browser tests (tests/browser_support.py; each browser module defines `logdir` and EXPECTED_RUNS) --
@pytest.fixture(scope="module")
def tensorboard(logdir, tmp_path_factory, request):
    """A TensorBoard serving the module's `logdir`, once its EXPECTED_RUNS are listed: its base URL."""
    import browser_support
    yield from browser_support.serve_tensorboard(logdir, tmp_path_factory, request.module.EXPECTED_RUNS)


@pytest.fixture(scope="module")
def browser():
    import browser_support
    yield from browser_support.launch_browser()


@pytest.fixture
def session(browser, tensorboard):
    """A fresh page on TensorBoard; the test fails if a dialog fired or the page threw."""
    import browser_support
    yield from browser_support.open_session(browser, tensorboard)
