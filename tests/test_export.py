"""Export to a TensorBoard run: CLI, bad inputs, atomic writes, reading back, TensorBoard's own loader."""
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import tb_hwprof
from tb_hwprof.logdir import metadata, tables, writer

REPO = Path(__file__).resolve().parent.parent


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "tb_hwprof", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or REPO, env={**os.environ, "PYTHONPATH": str(REPO)})


def tree(path: Path) -> dict:
    """Every file under path with its bytes: 'untouched' means exactly this is unchanged."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()} \
        if path.exists() else {}


@pytest.fixture
def armleth(samples_dir):
    return samples_dir / "ncu" / "armleth_t4_full_2024.2.1.ncu-rep"


@pytest.fixture
def logdir_with_run(tmp_path, armleth, ncu_report_module):
    logdir = tmp_path / "runs"
    assert cli("export", armleth, "--logdir", logdir, "--run", "baseline").returncode == 0
    return logdir


def bad_inputs(samples: Path, tmp: Path):
    real = (samples / "ncu" / "armleth_t4_full_2024.2.1.ncu-rep").read_bytes()
    cases = {
        "empty.ncu-rep": b"",
        "truncated_head.ncu-rep": real[:100],
        "truncated_half.ncu-rep": real[: len(real) // 2],
        "truncated_tail.ncu-rep": real[:-1],
        "random.ncu-rep": os.urandom(4096),
        "text.ncu-rep": b"this is a text file, not a report\n",
        "not_ncu.csv": b"step,loss,lr\n1,2.31,0.001\n2,2.05,0.001\n",  # a CSV of no profiler
    }
    for name, data in cases.items():
        (tmp / name).write_bytes(data)
        yield tmp / name


def test_bad_inputs_one_line_error_and_logdir_untouched(tmp_path, samples_dir, logdir_with_run):
    before = tree(logdir_with_run)
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for bad in bad_inputs(samples_dir, inputs):
        for run in ("baseline", "fresh"):
            result = cli("export", bad, "--logdir", logdir_with_run, "--run", run, "--overwrite")
            lines = result.stderr.strip().splitlines()
            assert result.returncode != 0, bad.name
            assert len(lines) == 1 and str(bad) in lines[0] and "Traceback" not in result.stderr, (bad.name, result.stderr)
            assert tree(logdir_with_run) == before, bad.name
        result = cli("export", bad, "--logdir", tmp_path / "new_logdir")
        assert result.returncode != 0 and not (tmp_path / "new_logdir").exists()


def test_bad_file_among_good_ones_writes_nothing(tmp_path, samples_dir, armleth, ncu_report_module):
    bad = tmp_path / "bad.ncu-rep"
    bad.write_bytes(armleth.read_bytes()[:5000])
    logdir = tmp_path / "runs"
    result = cli("export", armleth, bad, "--logdir", logdir)
    assert result.returncode == 1 and str(bad) in result.stderr
    assert not logdir.exists()


def test_existing_run_needs_overwrite(logdir_with_run, armleth, samples_dir):
    before = tree(logdir_with_run)
    result = cli("export", armleth, "--logdir", logdir_with_run, "--run", "baseline")
    assert result.returncode == 1 and "--overwrite" in result.stderr
    assert tree(logdir_with_run) == before
    other = samples_dir / "ncu" / "armleth_t4_series" / "report_v2.ncu-rep"
    assert cli("export", other, "--logdir", logdir_with_run, "--run", "baseline", "--overwrite").returncode == 0
    assert tb_hwprof.load_run(logdir_with_run / "baseline").provenance.source_path == str(other.resolve())
    assert [p.name for p in logdir_with_run.iterdir()] == ["baseline"]  # no staging or old folders left


def test_failure_mid_write_keeps_previous_run(logdir_with_run, samples_dir, monkeypatch, ncu_report_module):
    before = tree(logdir_with_run)
    profile = tb_hwprof.read(samples_dir / "ncu" / "armleth_t4_series" / "report_v2.ncu-rep")

    def disk_full(*_):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tables, "details_doc", disk_full)
    with pytest.raises(OSError):
        writer.write_run(profile, tb_hwprof.analyse(profile), logdir_with_run, "baseline", overwrite=True)
    assert tree(logdir_with_run) == before
    assert [p.name for p in logdir_with_run.iterdir()] == ["baseline"]


def test_interrupted_swap_is_repaired(logdir_with_run, armleth, ncu_report_module):
    """A kill between 'old run renamed aside' and 'new run renamed in' loses nothing."""
    run = logdir_with_run / "baseline"
    before = tree(run)
    run.rename(logdir_with_run / f".baseline{writer.OLD_TAG}12345")
    profile = tb_hwprof.load_run(run.parent / f".baseline{writer.OLD_TAG}12345")  # still readable aside
    assert len(profile.kernels) == 1
    writer.recover_interrupted(run)
    assert tree(run) == before


@pytest.mark.parametrize("name", ["../escape", "/abs", "a/../b", ".hidden", ""])
def test_bad_run_names_rejected(tmp_path, armleth, name, ncu_report_module):
    result = cli("export", armleth, "--logdir", tmp_path / "runs", "--run", name)
    assert result.returncode != 0 and not (tmp_path / "escape").exists()
    assert not (tmp_path / "runs").exists()


def test_load_run_round_trip(tmp_path, ncu_rep, ncu_report_module):
    profile = tb_hwprof.read(ncu_rep)
    run_dir = writer.write_run(profile, tb_hwprof.analyse(profile), tmp_path, "r")
    back = tb_hwprof.load_run(run_dir)
    pd.testing.assert_frame_equal(back.kernels, profile.kernels, check_dtype=True)
    assert back.rules == tables.clean(profile.rules)
    assert back.raw_metrics == tables.clean(profile.raw_metrics)
    assert back.provenance == profile.provenance
    assert [d.to_dict() for d in back.devices] == [d.to_dict() for d in profile.devices]


def test_newer_format_is_refused(logdir_with_run):
    manifest = logdir_with_run / "baseline" / "plugins" / "tb_hwprof" / "profile.json"
    text = manifest.read_text()
    assert f'"format_version": {metadata.FORMAT_VERSION}' in text
    manifest.write_text(text.replace(f'"format_version": {metadata.FORMAT_VERSION}', '"format_version": 99'))
    with pytest.raises(tb_hwprof.core.errors.FormatVersionError, match="upgrade tb-hwprof"):
        tb_hwprof.load_run(logdir_with_run / "baseline")


def test_tensorboard_reads_scalars_and_manifest(tmp_path, samples_dir, ncu_report_module):
    """TensorBoard's own event loader sees our scalars (values from ncu_report) and the tagged manifest."""
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.util import tensor_util

    report = samples_dir / "ncu" / "spyinfer_a10_105launches_2023.2.0.ncu-rep"
    assert cli("export", report, "--logdir", tmp_path, "--run", "spy", "--step", "7").returncode == 0
    acc = event_accumulator.EventAccumulator(str(tmp_path / "spy"), size_guidance={"tensors": 0})
    acc.Reload()
    tags = acc.Tags()["tensors"]
    scalars = {t: float(tensor_util.make_ndarray(acc.Tensors(t)[0].tensor_proto)) for t in tags
               if acc.SummaryMetadata(t).data_class == summary_pb2.DATA_CLASS_SCALAR}
    assert all(e.step == 7 for t in tags for e in acc.Tensors(t))

    ctx = ncu_report_module.load_report(str(report))
    rng = ctx.range_by_idx(0)
    launches = [rng.action_by_idx(i) for i in range(rng.num_actions())]
    durations = [a.metric_by_name("gpu__time_duration.sum").value() for a in launches]
    sm = [a.metric_by_name("sm__throughput.avg.pct_of_peak_sustained_elapsed").value() for a in launches]
    assert scalars["tb_hwprof/kernel_launches"] == len(launches) == 105
    assert scalars["tb_hwprof/total_kernel_time_ms"] == pytest.approx(sum(durations) / 1e6, rel=1e-6)
    weighted = sum(d * s for d, s in zip(durations, sm)) / sum(durations)
    assert scalars["tb_hwprof/sm_throughput_pct_time_weighted"] == pytest.approx(weighted, rel=1e-6)
    meta = acc.SummaryMetadata(metadata.MANIFEST_TAG)
    assert meta.plugin_data.plugin_name == "tb_hwprof"
    assert meta.data_class == summary_pb2.DATA_CLASS_BLOB_SEQUENCE


def test_help_has_examples():
    result = cli("export", "--help")
    assert result.returncode == 0 and "--overwrite" in result.stdout and "tb-hwprof export report.ncu-rep" in result.stdout


def test_missing_ncu_report_module_says_how_to_install(tmp_path, armleth):
    """Without the optional extra, one line names the pip command."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "ncu_report.py").write_text("raise ImportError('not installed')\n")
    env = {**os.environ, "PYTHONPATH": f"{shim}{os.pathsep}{REPO}"}
    result = subprocess.run([sys.executable, "-m", "tb_hwprof", "export", str(armleth), "--logdir", str(tmp_path / "r")],
                            capture_output=True, text=True, env=env)
    assert result.returncode == 1
    assert "pip install 'tb-hwprof[ncu]'" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_nsys_report_containers_say_how_to_export(samples_dir, tmp_path):
    """.nsys-rep / .qdrep need the nsys CLI: one line with the command, nothing written."""
    containers = sorted((samples_dir / "nsys").glob("*.nsys-rep")) + sorted((samples_dir / "nsys").glob("*.qdrep"))
    assert containers
    for path in containers:
        result = cli("export", path, "--logdir", tmp_path / "runs")
        assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1
        assert str(path) in result.stderr and "nsys export --type sqlite" in result.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("pattern", ["*", "?ictim", "[v]ictim", "*.tb-hwprof-old-*"])
def test_glob_characters_in_a_run_name_touch_no_other_run(tmp_path, samples_dir, pattern):
    """../shared/repro/scripts/glob_run_name_repro.sh: leftovers were found by a glob built from the run
    name, so --run '*' put another run's renamed-aside copy in place as its own and deleted another
    export's staging folder.  Now only the run's own leftovers, compared as text, are touched."""
    trace = samples_dir / "nsys" / "kmeans_rtx3080_openacc_2020.5.1.sqlite"
    logdir = tmp_path / "runs"
    assert cli("export", trace, "--logdir", logdir, "--run", "victim", "--quiet").returncode == 0
    aside = logdir / f".victim{writer.OLD_TAG}999"  # as an interrupted --overwrite of 'victim' leaves it
    aside.mkdir()
    (aside / "marker").write_text("victim's old run")
    staging = logdir / f".other{writer.STAGING_TAG}inprogress"  # a running export of 'other'
    staging.mkdir()
    before = tree(logdir)
    done = cli("export", trace, "--logdir", logdir, "--run", pattern, "--quiet")
    assert done.returncode == 0, done.stderr
    after = tree(logdir)
    assert {k: v for k, v in after.items() if not k.startswith(pattern + os.sep)} == before
    assert staging.is_dir() and (aside / "marker").read_text() == "victim's old run"
    assert tb_hwprof.load_run(logdir / pattern).provenance.source_sha256 == \
        tb_hwprof.load_run(logdir / "victim").provenance.source_sha256
    assert not (logdir / pattern / "marker").exists()


def test_run_folders_take_the_umask_not_mkdtemps_0700(samples_dir, tmp_path):
    """A TensorBoard running as another user reads the run: its folder has the mode mkdir would give."""
    import os
    import stat

    import tb_hwprof
    path = next(iter(sorted((samples_dir / "torch").glob("tracelens_h100_bert_small.json.gz"))), None)
    if path is None:
        pytest.skip("no PyTorch trace sample")
    previous = os.umask(0o022)
    try:
        run_dir = tb_hwprof.export(path, tmp_path / "logs", "r")
        probe = tmp_path / "probe"
        probe.mkdir()
    finally:
        os.umask(previous)
    assert stat.S_IMODE(run_dir.stat().st_mode) == stat.S_IMODE(probe.stat().st_mode) == 0o755


def test_disk_full_is_one_line_naming_the_path(samples_dir, tmp_path, monkeypatch, capsys):
    """A full disk while writing: "no space left on <path>", exit 1, and the logdir as it was."""
    import errno

    from tb_hwprof.app import cli
    from tb_hwprof.logdir import writer
    path = samples_dir / "torch" / "tracelens_h100_bert_small.json.gz"
    if not path.is_file():
        pytest.skip("no PyTorch trace sample")
    logdir = tmp_path / "logs"

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(logdir / "r"))
    monkeypatch.setattr(writer, "_write_events", full)
    assert cli.main(["export", str(path), "--logdir", str(logdir), "--run", "r", "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"no space left on {logdir / 'r'}" in err
    assert not (logdir / "r").exists() and not [p for p in logdir.iterdir()] if logdir.exists() else True
