"""`tb-hwprof profile` and `export --join` (issue 16): the process handling.

The profilers are FAKES (tests/fake_tools: they record their argv, run the program and copy a real
sample report where the real tool would write one): these tests check the command lines, the
passes, the logs, the errors and where the files end up -- never the join's correctness (that is
tests/test_join.py and tests/test_h200_pair.py, on real files and a real H200 trace + ncu pair).
The PyTorch pass is real: the CPU build of torch profiles a tiny training script.
"""
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tb_hwprof.app import profile_cli as P
from tb_hwprof.app.cli import main

from conftest import REPO, ncu_actions, sample

FAKE_TOOLS = REPO / "tests" / "fake_tools"
REPORT = "ncu/kprattis_gtx1650_basic_2022.4.1.ncu-rep"
NSYS = "nsys/gpu4_t4_2022.4.2.sqlite"
TRAIN = """\
import sys
import torch
model = torch.nn.Linear(8, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range({iterations}):
    loss = model(torch.randn(16, 8)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    {step}
print("trained", flush=True)
sys.exit({status})
"""


def script(tmp_path, iterations=5, status=0, optimizer=True) -> Path:
    """A tiny CPU training script (the PyTorch pass runs it for real: torch must be installed)."""
    pytest.importorskip("torch", reason="the PyTorch pass needs torch (pip install torch, the CPU build will do)")
    path = tmp_path / "train.py"
    path.write_text(TRAIN.format(iterations=iterations, status=status,
                                 step="opt.step()" if optimizer else "pass"))
    return path


@pytest.fixture
def fakes(tmp_path, monkeypatch, samples_dir):
    """The fake profilers first on PATH, a copy of a real report for them to 'write', their log."""
    report = tmp_path / "sample.ncu-rep"
    shutil.copyfile(sample(samples_dir, REPORT), report)
    log = tmp_path / "fake_tool.log"
    monkeypatch.setenv("PATH", f"{FAKE_TOOLS}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_TOOL_LOG", str(log))
    monkeypatch.setenv("FAKE_REPORT", str(report))
    return {"report": report, "log": log}


def calls(log: Path):
    return [json.loads(line) for line in log.read_text().splitlines()]


def options(**kw):
    base = dict(tool="ncu", command=["python", "train.py"], steps=2, skip=1)
    return P.ProfileOptions(**{**base, **kw})


# -- the profilers' command lines ----------------------------------------------------------------
def test_ncu_command_line_states_filters_clocks_and_range():
    """By launch order (--by-order): the filters as given, over the launches in order."""
    argv = P.ncu_argv(options(kernels="gemm|conv", launch_skip=3, launch_count=20, ncu_set="roofline",
                              per_config=False), Path("/c/profile"))
    assert argv == ["ncu", "--target-processes", "all", "--replay-mode", "kernel", "--clock-control", "base",
                    "--cache-control", "all", "--set", "roofline", "--kernel-name-base", "function",
                    "--kernel-name", "regex:gemm|conv", "--launch-skip", "3", "--launch-count", "20",
                    "--profile-from-start", "off", "--export", "/c/profile", "--force-overwrite",
                    "--", "python", "train.py"]
    whole = P.ncu_argv(options(steps=0, clock_control="none", per_config=False), Path("p"))
    assert "--profile-from-start" not in whole and whole[whole.index("--clock-control") + 1] == "none"
    assert "--kernel-name" not in whole and "--launch-count" not in whole


def test_ncu_profiles_each_launch_configuration_once_by_default():
    """The default: ncu --filter-mode per-launch-config --launch-count 1 (each kernel, grid and block
    once; --launch-skip / --launch-count then count per configuration)."""
    argv = P.ncu_argv(options(), Path("/c/profile"))
    at = argv.index("--filter-mode")
    assert argv[at:at + 4] == ["--filter-mode", "per-launch-config", "--launch-count", "1"]
    two = P.ncu_argv(options(launch_skip=2, launch_count=2), Path("/c/profile"))
    at = two.index("--filter-mode")
    assert two[at:at + 6] == ["--filter-mode", "per-launch-config", "--launch-skip", "2", "--launch-count", "2"]
    args = P.options_of(type("A", (), dict(program=["--", "python", "t.py"], tool="ncu", logdir="runs", run="r",
                                           steps=1, skip_steps=1, kernels=None, launch_skip=0, launch_count=None,
                                           set="full", clock_control="base", replay_mode="kernel", duration=600,
                                           overwrite=False, by_order=True))())
    assert "--filter-mode" not in P.ncu_argv(args, Path("p"))


def test_tracer_command_lines():
    assert P.nsys_argv(options(tool="nsys", duration_s=30), Path("/c/profile")) == [
        "nsys", "profile", "--trace", "cuda,nvtx,osrt", "--sample", "none", "--capture-range", "cudaProfilerApi",
        "--capture-range-end", "stop", "--duration", "30", "--output", "/c/profile", "--force-overwrite", "true",
        "--export", "sqlite", "--", "python", "train.py"]
    assert "--capture-range" not in P.nsys_argv(options(tool="nsys", steps=0), Path("p"))
    assert P.rocprof_compute_argv(options(tool="rocprof-compute", kernels="gemm"), Path("/c/w")) == [
        "rocprof-compute", "profile", "--name", "profile", "--path", "/c/w", "--kernel", "gemm", "--", "python", "train.py"]
    assert P.rocprofv3_argv(options(tool="rocprofv3"), Path("/c/r")) == [
        "rocprofv3", "--kernel-trace", "--memory-copy-trace", "--output-format", "csv", "--output-directory", "/c/r",
        "--output-file", "profile", "--", "python", "train.py"]


def test_a_missing_profiler_is_one_line_with_how_to_install_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    logdir = tmp_path / "runs"
    for tool, hint in (("ncu", "developer.nvidia.com/nsight-compute"), ("nsys", "nsight-systems"),
                       ("rocprof-compute", "rocprofiler-compute"), ("rocprofv3", "rocprofiler-sdk")):
        assert main(["profile", tool, "--logdir", str(logdir), "--run", "r", "--", sys.executable, "x.py"]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"{tool} not found on PATH" in err and hint in err
    assert not logdir.exists()


# -- a whole profile: real PyTorch pass, fake ncu ------------------------------------------------
def test_profile_ncu_runs_both_passes_and_exports_one_joined_run(tmp_path, fakes, ncu_report_module, capsys):
    train = script(tmp_path)
    logdir = tmp_path / "runs"
    code = main(["profile", "ncu", "--logdir", str(logdir), "--run", "r", "--steps", "2", "--launch-count", "4",
                 "--by-order", "--", sys.executable, str(train)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    run = logdir / "r"
    # The profiler was called once, with the command line built for these options, inside the step range.
    (ncu_call,) = calls(fakes["log"])
    o = options(command=[sys.executable, str(train)], launch_count=4, per_config=False)
    assert ncu_call["argv"] == P.ncu_argv(o, Path(ncu_call["argv"][ncu_call["argv"].index("--export") + 1]))[1:]
    assert ncu_call["mode"] == "cuda-range" and ncu_call["steps"] == "2"
    # Files kept in the run folder: the real trace, the report, both passes' logs.
    (trace,) = list(run.glob("*.pt.trace.json.gz"))
    assert (run / "profile.ncu-rep").read_bytes() == fakes["report"].read_bytes()
    assert "trained" in (run / "logs" / "torch.log").read_text()
    assert "==NCU== fake ncu: connected" in (run / "logs" / "ncu.log").read_text()
    assert "  | trained" in captured.err  # the program's output streamed to the terminal too
    # The trace covers exactly the 2 steps after the skipped one (ProfilerStep#N ranges, stdlib json).
    events = json.load(gzip.open(trace, "rt"))["traceEvents"]
    steps = sorted({e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")})
    assert len(steps) == 2
    assert any(e.get("cat") == "cpu_op" and e["name"].startswith("aten::") for e in events)
    # One run, joined: a CPU trace has no kernels, so every report launch is listed, none guessed.
    manifest = json.loads((run / "plugins" / "tb_hwprof" / "profile.json").read_text())
    launches = sum(1 for _ in ncu_actions(ncu_report_module, fakes["report"]))
    assert any(f"0 of {launches} report launches matched" in n for n in manifest["notes"])
    assert any(f"{launches} report-only" in n for n in manifest["notes"])
    assert "counter_join" in str(manifest["files"])
    assert not list(tmp_path.glob("runs/.*staging*"))


def test_a_failing_program_leaves_the_logdir_untouched_and_names_its_log(tmp_path, fakes, capsys):
    train = script(tmp_path, status=3)
    logdir, keep = tmp_path / "runs", tmp_path / "capture"
    assert main(["profile", "ncu", "--logdir", str(logdir), "--run", "r", "--capture-dir", str(keep),
                 "--", sys.executable, str(train)]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("tb-hwprof: error: ") and "torch pass exited with status 3" in err
    assert str(keep / "logs" / "torch.log") in err and "trained" in (keep / "logs" / "torch.log").read_text()
    assert not (logdir / "r").exists()
    assert not fakes["log"].exists()  # the ncu pass never ran


def test_a_failing_profiler_is_named_with_its_log(tmp_path, fakes, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_TOOL_EXIT", "2")
    train = script(tmp_path)
    logdir = tmp_path / "runs"
    assert main(["profile", "ncu", "--logdir", str(logdir), "--run", "r", "--quiet", "--", sys.executable, str(train)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "ncu pass exited with status 2" in err and "ncu.log" in err
    assert not (logdir / "r").exists()


def test_a_program_without_the_steps_asked_is_refused(tmp_path, fakes, capsys):
    train = script(tmp_path, optimizer=False)
    assert main(["profile", "ncu", "--logdir", str(tmp_path / "runs"), "--run", "r", "--quiet",
                 "--", sys.executable, str(train)]) == 1
    err = capsys.readouterr().err
    assert "ended after 0 step(s)" in err and "--steps 0" in err
    assert not (tmp_path / "runs" / "r").exists()


def test_an_existing_run_is_refused_before_anything_runs(tmp_path, fakes, capsys):
    (tmp_path / "runs" / "r").mkdir(parents=True)
    train = script(tmp_path)
    assert main(["profile", "ncu", "--logdir", str(tmp_path / "runs"), "--run", "r", "--", sys.executable, str(train)]) == 1
    assert "already exists" in capsys.readouterr().err and not fakes["log"].exists()


def test_profile_nsys_is_one_pass_exported_as_the_run(tmp_path, fakes, monkeypatch, samples_dir, capsys):
    sqlite = tmp_path / "sample.sqlite"
    shutil.copyfile(sample(samples_dir, NSYS), sqlite)
    monkeypatch.setenv("FAKE_REPORT", str(sqlite))
    train = script(tmp_path)
    logdir = tmp_path / "runs"
    assert main(["profile", "nsys", "--logdir", str(logdir), "--run", "n", "--duration", "30",
                 "--", sys.executable, str(train)]) == 0, capsys.readouterr().err
    (call,) = calls(fakes["log"])
    assert call["tool"] == "nsys" and call["mode"] == "cuda-range"
    assert call["argv"] == P.nsys_argv(options(tool="nsys", command=[sys.executable, str(train)], duration_s=30),
                                       Path(call["argv"][call["argv"].index("--output") + 1]))[1:]
    manifest = json.loads((logdir / "n" / "plugins" / "tb_hwprof" / "profile.json").read_text())
    assert manifest["provenance"]["tool"] == "nsys" and (logdir / "n" / "logs" / "nsys.log").is_file()


# -- export --join ---------------------------------------------------------------------------------
def test_export_join_of_two_files_writes_one_run(tmp_path, samples_dir, capsys):
    trace = sample(samples_dir, "torch/hta_sampled_2rank_rank0.json.gz")
    report = sample(samples_dir, "ncu/esmm_a10g_metrics_all_2023.1.1.ncu-rep")
    logdir = tmp_path / "runs"
    # Either order: the trace is the file with a timeline.
    assert main(["export", str(report), str(trace), "--join", "--run", "j", "--logdir", str(logdir), "--quiet"]) == 0
    manifest = json.loads((logdir / "j" / "plugins" / "tb_hwprof" / "profile.json").read_text())
    assert manifest["provenance"]["tool"] == "pytorch" and any("joined with ncu report" in n for n in manifest["notes"])
    capsys.readouterr()
    assert main(["export", str(trace), str(trace), "--join", "--run", "k", "--logdir", str(logdir)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "both traces" in err and not (logdir / "k").exists()
    assert main(["export", str(trace), "--join", "--run", "k", "--logdir", str(logdir)]) == 1
    assert "two files" in capsys.readouterr().err


def test_the_bootstrap_hands_over_to_the_sitecustomize_it_hides(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nopen(os.environ['MARK'], 'w').write('ran')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(P.BOOT), str(other)]), "MARK": str(tmp_path / "mark")}
    env.pop("TB_HWPROF_PROFILE", None)
    out = subprocess.run([sys.executable, "-c", "print('program ran')"], env=env, capture_output=True, text=True,
                         check=True)
    assert (tmp_path / "mark").read_text() == "ran" and out.stdout == "program ran\n" and out.stderr == ""


def test_overwrite_replaces_the_earlier_profile_of_the_run(tmp_path, fakes, capsys):
    train = script(tmp_path)
    logdir = tmp_path / "runs"
    argv = ["profile", "ncu", "--logdir", str(logdir), "--run", "r", "--quiet", "--steps", "1"]
    assert main(argv + ["--", sys.executable, str(train)]) == 0
    (first,) = list((logdir / "r").glob("*.pt.trace.json.gz"))
    assert main(argv + ["--overwrite", "--", sys.executable, str(train)]) == 0, capsys.readouterr().err
    (second,) = list((logdir / "r").glob("*.pt.trace.json.gz"))
    assert second != first and len(calls(fakes["log"])) == 2


def test_profile_rocprof_compute_joins_the_workload_onto_the_torch_pass(tmp_path, fakes, monkeypatch, samples_dir, capsys):
    workload = tmp_path / "workload_sample"
    folder = samples_dir / "rocprof" / "rocprof-compute_bmm1_mi300x"
    if not folder.is_dir():
        pytest.skip("rocprof-compute_bmm1_mi300x not in the samples")
    shutil.copytree(folder, workload)
    monkeypatch.setenv("FAKE_REPORT", str(workload))
    train = script(tmp_path)
    logdir = tmp_path / "runs"
    assert main(["profile", "rocprof-compute", "--logdir", str(logdir), "--run", "a", "--quiet", "--kernels", "matrix",
                 "--", sys.executable, str(train)]) == 0, capsys.readouterr().err
    (call,) = calls(fakes["log"])
    assert call["argv"][:4] == ["profile", "--name", "profile", "--path"] and call["argv"][5:7] == ["--kernel", "matrix"]
    assert call["mode"] is None  # rocprof-compute has no capture range: the program runs plain
    run = logdir / "a"
    assert len(list(run.glob("*.pt.trace.json.gz"))) == 1 and (run / "workload" / "MI300" / "pmc_perf.csv").is_file()
    manifest = json.loads((run / "plugins" / "tb_hwprof" / "profile.json").read_text())
    with open(workload / "pmc_perf.csv") as f:
        dispatches = sum(1 for _ in f) - 1
    assert any(f"0 of {dispatches} report launches matched" in n and "rocprof-compute" in n for n in manifest["notes"])


def test_profile_rocprofv3_is_one_pass_exported_as_the_run(tmp_path, fakes, monkeypatch, samples_dir, capsys):
    trace = tmp_path / "kernel_trace_sample.csv"
    shutil.copyfile(sample(samples_dir, "rocprof/v3_docs_kernel_trace_newer.csv"), trace)
    monkeypatch.setenv("FAKE_REPORT", str(trace))
    train = script(tmp_path)
    logdir = tmp_path / "runs"
    assert main(["profile", "rocprofv3", "--logdir", str(logdir), "--run", "v3", "--quiet",
                 "--", sys.executable, str(train)]) == 0, capsys.readouterr().err
    (call,) = calls(fakes["log"])
    assert call["tool"] == "rocprofv3" and call["mode"] is None
    import csv
    with open(trace, newline="") as f:
        rows = sum(1 for r in csv.DictReader(f) if r.get("Kind") == "KERNEL_DISPATCH")
    manifest = json.loads((logdir / "v3" / "plugins" / "tb_hwprof" / "profile.json").read_text())
    assert manifest["kernel_count"] == rows and (logdir / "v3" / "logs" / "rocprofv3.log").is_file()


def test_export_join_of_an_nsys_capture_and_an_ncu_report(tmp_path, samples_dir, ncu_report_module, capsys):
    """Nsight Systems + Nsight Compute through the CLI: the run is the capture's; with no kernel name in
    common (sqlite3 and ncu_report say so) every launch of both is listed, none joined."""
    import sqlite3
    nsys, report = sample(samples_dir, "nsys/annikola_gtx1050_2024.5.1.sqlite"), sample(samples_dir, REPORT)
    with sqlite3.connect(f"file:{nsys}?mode=ro", uri=True) as db:
        nsys_names = [r[0] for r in db.execute("SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                               "JOIN StringIds s ON s.id = k.shortName")]
    ncu_names = [a.name() for a in ncu_actions(ncu_report_module, report)]
    assert not set(nsys_names) & set(ncu_names)
    logdir = tmp_path / "runs"
    assert main(["export", str(nsys), str(report), "--join", "--run", "n", "--logdir", str(logdir), "--quiet",
                 "--trace", "never"]) == 0, capsys.readouterr().err
    assets = logdir / "n" / "plugins" / "tb_hwprof"
    manifest = json.loads((assets / "profile.json").read_text())
    assert manifest["provenance"]["tool"] == "nsys" and not (assets / "timeline.json.gz").exists()
    assert any(f"{len(nsys_names)} trace-only, {len(ncu_names)} report-only" in n for n in manifest["notes"])


def test_the_step_window_captures_the_steps_after_the_skipped_ones():
    from tb_hwprof.profile_env import StepWindow
    events = []
    window = StepWindow(2, 3, lambda: events.append(("start", window_done())), lambda: events.append(("stop", window_done())),
                        lambda: events.append(("step", window_done())))
    window_done = lambda: window.done  # noqa: E731
    for _ in range(8):
        window.step()
    window.end()  # at exit: already stopped, nothing more
    assert events == [("start", 2), ("step", 3), ("step", 4), ("stop", 5)]
    whole = []
    everything = StepWindow(1, 0, lambda: whole.append("start"), lambda: whole.append("stop"))
    for _ in range(4):
        everything.step()
    assert whole == ["start"] and everything.state == "capturing"
    everything.end()
    assert whole == ["start", "stop"]


def test_profile_ncu_asks_ncu_for_each_configuration_once_by_default(tmp_path, fakes, capsys):
    """The fake ncu records the command line it was given: per-launch-config and one launch each,
    and the run is joined per configuration (its notes say so)."""
    train = script(tmp_path)
    logdir = tmp_path / "runs"
    assert main(["profile", "ncu", "--logdir", str(logdir), "--run", "r", "--quiet", "--steps", "1", "--",
                 sys.executable, str(train)]) == 0, capsys.readouterr().err
    (ncu_call,) = calls(fakes["log"])
    at = ncu_call["argv"].index("--filter-mode")
    assert ncu_call["argv"][at:at + 4] == ["--filter-mode", "per-launch-config", "--launch-count", "1"]
    manifest = json.loads((logdir / "r" / "plugins" / "tb_hwprof" / "profile.json").read_text())
    assert any(n.startswith("per-configuration join with ncu report") for n in manifest["notes"])
