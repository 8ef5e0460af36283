"""`tb-hwprof profile` never loses a capture and never touches what it did not write (issue 27).

Each test runs one case of ../shared/repro/turn3/profile/repro_profile.sh in process, with that
reproducer's own fakes read in place: `nsys` / `ncu` shell scripts that run the program and then
write $FAKE_REPORT where the real tool writes its report, and a fake `torch` module that logs
cudaProfilerStart/Stop (the capture range) to $FAKE_CUDA_LOG.  The reports are real samples; a
damaged one is a real export cut short, as a full disk or a killed nsys leaves it.
"""
import hashlib
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tb_hwprof.app import profile_cli as P
from tb_hwprof.app.cli import main

from conftest import repro, sample

GOOD = "nsys/annikola_gtx1050_2024.5.1.sqlite"
OTHER = "nsys/kmeans_rtx3080_openacc_2020.5.1.sqlite"  # another program's capture, on another GPU
TRACE = "torch/kineto_h100_cuda129_small.json"


@pytest.fixture
def fakes(tmp_path, monkeypatch, samples_dir):
    """The reproducer's fake profilers first on PATH and its fake torch on PYTHONPATH; a good and a
    damaged (cut short) Nsight Systems export for them to write; temporary folders under tmp_path."""
    folder = repro("turn3/profile")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("nsys", "ncu"):  # copied to set the exec bit the read-only share may lack for us
        shutil.copyfile(folder / tool, bin_dir / tool)
        (bin_dir / tool).chmod(0o755)
    good = sample(samples_dir, GOOD)
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(good.read_bytes()[:300_000])
    cuda_log = tmp_path / "cuda.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYTHONPATH", str(folder / "faketorch"))
    monkeypatch.setenv("FAKE_CUDA_LOG", str(cuda_log))
    monkeypatch.setenv("FAKE_TRACE", str(sample(samples_dir, TRACE)))
    monkeypatch.delenv("FAKE_NO_REPORT", raising=False)
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    monkeypatch.chdir(tmp_path)
    return {"folder": folder, "good": good, "bad": bad, "cuda_log": cuda_log, "tmp": temporary, "root": tmp_path}


def profile(fakes, monkeypatch, capsys, report, run, *flags, steps=5):
    """(exit status, stderr lines) of `tb-hwprof profile nsys` over the reproducer's train.py."""
    monkeypatch.setenv("FAKE_REPORT", str(report))
    rc = main(["profile", "nsys", "--logdir", "L", "--run", run, "--quiet", *flags, "--",
               sys.executable, str(fakes["folder"] / "train.py"), str(steps)])
    return rc, capsys.readouterr().err.strip().splitlines()


def kept_and_retry(line: str):
    """(capture folder, retry argv) the one-line error names."""
    match = re.search(r"the capture is kept in (.+) -- retry the export alone with: (.+)$", line)
    assert match, line
    return Path(match.group(1)), shlex.split(match.group(2))


def tree_hashes(folder: Path):
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_failed_export_keeps_the_capture_and_says_how_to_retry(fakes, monkeypatch, capsys):
    """Case A: the capture succeeded, its export failed: the report the profiler wrote is still there,
    in the folder the error names, and the command it gives exports it once the file is sound."""
    rc, err = profile(fakes, monkeypatch, capsys, fakes["bad"], "a")
    assert rc == 1 and len(err) == 1
    assert "truncated SQLite file" in err[0]
    folder, argv = kept_and_retry(err[0])
    captured = folder / "profile.sqlite"
    assert captured.read_bytes() == fakes["bad"].read_bytes()
    assert (folder / "logs" / "nsys.log").is_file()
    assert not Path("L/a").exists()
    assert argv[:3] == ["tb-hwprof", "export", str(captured)] and argv[3:] == ["--logdir", "L", "--run", "a"]
    shutil.copyfile(fakes["good"], captured)  # say the user copies a sound export over it
    assert main(argv[1:] + ["--quiet"]) == 0
    assert json.loads(Path("L/a/plugins/tb_hwprof/profile.json").read_text())["kernel_count"] > 0


def test_a_failed_export_keeps_the_capture_dir_whole(fakes, monkeypatch, capsys):
    """Case B: with --capture-dir the folder still holds the report and the logs."""
    rc, err = profile(fakes, monkeypatch, capsys, fakes["bad"], "b", "--capture-dir", "cap")
    assert rc == 1 and len(err) == 1
    folder, _ = kept_and_retry(err[0])
    assert folder == Path("cap")
    assert (folder / "profile.sqlite").read_bytes() == fakes["bad"].read_bytes()
    assert (folder / "logs" / "nsys.log").is_file()


def test_the_users_own_files_in_the_capture_dir_are_never_touched(fakes, monkeypatch, capsys):
    """Case C: --capture-dir pointing at a project folder with a logs/ of its own: neither a failed
    nor a good profile moves, overwrites or deletes the user's files."""
    own = Path("proj/logs/train.log")
    own.parent.mkdir(parents=True)
    own.write_text("precious\n")
    Path("proj/logs/nsys.log").write_text("the user's, not ours\n")
    before = tree_hashes(Path("proj"))
    rc, err = profile(fakes, monkeypatch, capsys, fakes["bad"], "c", "--capture-dir", "proj")
    assert rc == 1
    folder, _ = kept_and_retry(err[0])
    assert folder.parent == Path("proj") and folder.name.startswith(P.CAPTURE_PREFIX)
    rc, err = profile(fakes, monkeypatch, capsys, fakes["good"], "c2", "--capture-dir", "proj")
    assert rc == 0, err
    after = tree_hashes(Path("proj"))
    assert {k: v for k, v in after.items() if k in before} == before
    assert Path("L/c2/profile.sqlite").read_bytes() == fakes["good"].read_bytes()


def test_a_failed_overwrite_leaves_the_old_run_whole(fakes, monkeypatch, capsys):
    """Case D: --overwrite replaces the run only once the new export is complete."""
    rc, err = profile(fakes, monkeypatch, capsys, fakes["good"], "d")
    assert rc == 0, err
    before = tree_hashes(Path("L/d"))
    rc, err = profile(fakes, monkeypatch, capsys, fakes["bad"], "d", "--overwrite")
    assert rc == 1 and len(err) == 1 and "--overwrite" in err[0]
    assert tree_hashes(Path("L/d")) == before
    folder, _ = kept_and_retry(err[0])
    assert (folder / "profile.sqlite").read_bytes() == fakes["bad"].read_bytes()


def test_a_reused_capture_dir_captures_afresh(fakes, monkeypatch, capsys):
    """Cases E and F: a capture folder that an earlier run left its claim and 'no step seen' marker
    in: the next profile still captures its own steps (cudaProfilerStart/Stop called)."""
    rc, err = profile(fakes, monkeypatch, capsys, fakes["good"], "e", "--capture-dir", "cap2", steps=0)
    assert rc == 1 and "the program ended after 0 step(s)" in err[0]
    assert (Path("cap2") / "no-step-seen").exists()
    (Path("cap2") / ".claim-nsys").write_text("")  # as a capture that claimed its steps leaves it
    for run in ("e", "f"):
        fakes["cuda_log"].unlink(missing_ok=True)
        rc, err = profile(fakes, monkeypatch, capsys, fakes["good"], run, "--capture-dir", "cap2")
        assert rc == 0, err
        calls = [line.split()[0] for line in fakes["cuda_log"].read_text().splitlines()]
        assert calls == ["cudaProfilerStart", "cudaProfilerStop"]


def test_a_stale_report_is_never_exported_as_the_new_capture(fakes, monkeypatch, capsys, samples_dir):
    """Case G: the profiler writes nothing; another program's profile.sqlite left in the capture
    folder is not taken for this capture."""
    Path("cap3").mkdir()
    shutil.copyfile(sample(samples_dir, OTHER), "cap3/profile.sqlite")
    monkeypatch.setenv("FAKE_NO_REPORT", "1")
    rc, err = profile(fakes, monkeypatch, capsys, fakes["good"], "g", "--capture-dir", "cap3")
    assert rc == 1 and len(err) == 1 and "the pass wrote 0 Nsight Systems exports" in err[0]
    assert not Path("L/g").exists()
    assert Path("cap3/profile.sqlite").read_bytes() == sample(samples_dir, OTHER).read_bytes()


def test_an_interrupted_export_keeps_the_capture(fakes, monkeypatch, capsys):
    """Ctrl-C during the export: nothing moved, nothing removed, the capture folder named."""
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(P, "export_captured", interrupted)
    monkeypatch.setenv("FAKE_REPORT", str(fakes["good"]))
    rc = main(["profile", "nsys", "--logdir", "L", "--run", "i", "--quiet", "--capture-dir", "capi", "--",
               sys.executable, str(fakes["folder"] / "train.py"), "5"])
    err = capsys.readouterr().err
    assert rc == 130
    assert "tb-hwprof: interrupted: the capture is kept in capi" in err
    assert Path("capi/profile.sqlite").read_bytes() == fakes["good"].read_bytes()
    assert not Path("L/i").exists()


def test_a_disk_full_while_moving_the_capture_says_where_the_files_are(fakes, monkeypatch, capsys):
    """The export succeeded; moving the files into the run fails (no space): one line naming the run
    and the capture folder, which still holds what did not move."""
    import errno

    def no_space(source, target):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(P.shutil, "move", no_space)
    rc, err = profile(fakes, monkeypatch, capsys, fakes["good"], "full", "--capture-dir", "capf")
    assert rc == 1 and len(err) == 1
    assert err[0] == ("tb-hwprof: error: L/full: the run is written but moving the captured files into it failed "
                      "(No space left on device); what was not moved is still in capf")
    assert Path("capf/profile.sqlite").read_bytes() == fakes["good"].read_bytes()
    assert Path("L/full/plugins/tb_hwprof/profile.json").is_file()


def test_a_good_capture_moves_into_the_run_which_names_it_there(fakes, monkeypatch, capsys):
    """The run holds the captured files and its provenance names them where they now lie; the
    temporary capture folder is gone."""
    rc, err = profile(fakes, monkeypatch, capsys, fakes["good"], "ok")
    assert rc == 0, err
    manifest = json.loads(Path("L/ok/plugins/tb_hwprof/profile.json").read_text())
    assert manifest["provenance"]["source_path"] == str(Path("L/ok/profile.sqlite").resolve())
    assert Path("L/ok/profile.sqlite").read_bytes() == fakes["good"].read_bytes()
    assert (Path("L/ok/logs") / "nsys.log").is_file()
    assert list(fakes["tmp"].iterdir()) == []


NCU_LINES = ['==PROF== Connected to process 1234',
             '==PROF== Profiling "elementwise_kernel" - 0: 0%....50%....100% - 38 passes',
             'step 3 loss 6.9',
             '==PROF== Profiling "nvjet_sm90_tst_192x192..." - 1 (2/4): 0%....50%....100% - 38 passes',  # 2025.3
             '==PROF== Profiling "Kernel" - 2: 0%....50%....']  # cut short: not done


def test_ncu_progress_counts_the_kernels_ncu_says_it_profiled():
    lines = []
    progress = P.NcuProgress(asked=4, progress=lines.append)
    for line in NCU_LINES:
        progress.line(line)
    assert [line.split(",")[0] for line in lines] == ["ncu: 1/4 kernels profiled", "ncu: 2/4 kernels profiled"]
    assert lines[-1].endswith("left")


def test_the_ncu_pass_is_announced_with_its_kernels_and_time(fakes, monkeypatch, capsys, samples_dir):
    """Before the ncu pass: how many kernels the trace pass saw and how many ncu profiles (per
    configuration by default, in launch order with --by-order), with the time that takes at the
    measured rate (--set full: ~2.4 s a kernel)."""
    import tb_hwprof
    kernels = tb_hwprof.read(sample(samples_dir, TRACE)).kernels
    configurations = kernels.groupby(["name", "grid", "block"], dropna=False).size()
    monkeypatch.setenv("FAKE_REPORT", str(fakes["good"]))  # what it 'writes' does not matter here
    for flags, asked, how in (([], int(configurations.clip(upper=3).sum()),
                               "each configuration 3 time(s), --filter-mode per-launch-config"),
                              (["--by-order"], min(3, len(kernels)), "--launch-count 3")):
        main(["profile", "ncu", "--logdir", "L", "--run", "n", "--launch-count", "3", *flags, "--", sys.executable,
              str(fakes["folder"] / "train.py"), "5"])
        err = capsys.readouterr().err
        (line,) = [line for line in err.splitlines() if line.startswith("ncu pass: ")]
        assert line.startswith(f"ncu pass: the trace pass saw {len(kernels)} kernel launches ({len(configurations)} "
                               f"distinct kernel, grid and block)")
        assert f"ncu profiles {asked} of them ({how}): about {asked * 2.4:.0f} s at ~2.4 s a kernel (--set full" in line


def test_the_cli_loads_ncu_report_before_pandas_for_a_report(samples_dir, tmp_path, ncu_report_module):
    """Nsight Compute 2025.3's own copy of ncu_report crashes once pyarrow (pandas 3) was loaded
    before it (seen on an H200): the CLI imports ncu_report first when a given file is a report or
    the command is `profile ncu`, and not for other inputs."""
    import subprocess
    probe = ("import sys; from tb_hwprof.app.cli import build_parser, load_ncu_report_first; "
             "load_ncu_report_first(build_parser().parse_args(sys.argv[1:])); "
             "print('ncu_report' in sys.modules, 'pandas' in sys.modules)")
    report = sample(samples_dir, "ncu/kprattis_gtx1650_basic_2022.4.1.ncu-rep")
    for argv, loaded in ((["export", str(report), "--logdir", str(tmp_path)], "True"),
                         (["profile", "ncu", "--run", "r", "--", "python", "x.py"], "True"),
                         (["export", str(sample(samples_dir, GOOD)), "--logdir", str(tmp_path)], "False")):
        out = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, check=True).stdout
        assert out.split() == [loaded, "False"], argv


def test_a_bundled_ncu_report_loaded_after_pyarrow_is_refused_with_the_fix(tmp_path):
    """The reader refuses Nsight Compute's single-file copy (extras/python/ncu_report.py) when pyarrow
    came first, with one line naming it and PyPI's package; here a module file of that name and an
    empty pyarrow module object stand in for them (the crash itself needs both, seen on an H200)."""
    import subprocess
    (tmp_path / "ncu_report.py").write_text("")
    probe = ("import sys, types; from tb_hwprof.readers.nvidia.ncu_rep import import_ncu_report\n"
             "sys.modules.setdefault('pyarrow', types.ModuleType('pyarrow'))\n"
             "try:\n    import_ncu_report()\nexcept Exception as e:\n    print(type(e).__name__, e)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True).stdout
    assert out.startswith(f"MissingDependency {tmp_path / 'ncu_report.py'}: Nsight Compute's own copy of ncu_report "
                          f"crashes once pyarrow is loaded")
    assert "pip install 'tb-hwprof[ncu]'" in out
