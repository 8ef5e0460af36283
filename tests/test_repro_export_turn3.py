"""The export reproducers of ../shared/repro/turn3/export (issue 30, item 2): each ended as "unexpected
<Exception>", the tool's words for a bug.  Now each is read (where the odd value is harmless) or refused
with one line naming the input itself (never an internal staging file), the problem and the fix."""
import json

import pytest

from tb_hwprof.app.cli import main

from conftest import repro

READ = {"rocprof_marketing_name_number.json", "torch_device_id_object.pt.trace.json",
        "torch_pid_2pow31.pt.trace.json", "torch_string_pid.pt.trace.json"}
REFUSED = {"rocprof_lone_surrogate.json": "text that is not Unicode",
           "torch_deep_nesting.pt.trace.json": "damaged trace: a value nested deeper",
           "torch_grid_int_overflow.pt.trace.json": "damaged trace: Integer value out of range",
           "torch_input_type_1e400.pt.trace.json": "damaged trace: Number out of range",
           "torch_lone_surrogate.pt.trace.json": "unpaired UTF-16 surrogate"}


@pytest.mark.parametrize("name", sorted(READ | set(REFUSED)))
def test_each_reproducer_is_read_or_refused_naming_itself(name, tmp_path, capfd):
    path = repro(f"turn3/export/{name}")
    rc = main(["export", str(path), "--logdir", str(tmp_path), "--run", "x", "--quiet"])
    err = capfd.readouterr().err.splitlines()
    if name in READ:
        assert rc == 0, err
        assert (tmp_path / "x" / "plugins" / "tb_hwprof" / "profile.json").is_file()
    else:
        assert rc == 1 and len(err) == 1, err
        assert err[0].startswith(f"tb-hwprof: error: {path}: ") and REFUSED[name] in err[0]
        assert "unexpected" not in err[0] and ".tb-hwprof" not in err[0]
        assert not (tmp_path / "x").exists()


def test_a_marketing_name_written_as_a_number_is_read_as_its_text(tmp_path):
    """The reproducer's Agent7.MarketingName is the number 1.5: it reads as the same file with "1.5"."""
    import tb_hwprof
    path = repro("turn3/export/rocprof_marketing_name_number.json")
    document = json.loads(path.read_text())
    assert document["otherData"]["Agent7.MarketingName"] == 1.5
    document["otherData"]["Agent7.MarketingName"] = "1.5"
    as_text = tmp_path / "as_text.json"
    as_text.write_text(json.dumps(document))
    number, text = tb_hwprof.read(path), tb_hwprof.read(as_text)
    assert [d.to_dict() for d in number.devices] == [d.to_dict() for d in text.devices]
    assert number.kernels.equals(text.kernels)


def test_a_pipe_or_fifo_is_refused_at_once_naming_it(samples_dir, tmp_path):
    """Issue 30, item 5: a FIFO with no writer hung forever; `export <(cat trace.json)` said 'empty
    document' (detection had consumed the pipe).  Both are one line at once, saying to pass a file."""
    import os
    import subprocess
    import sys
    from conftest import REPO, sample
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "tb_hwprof", "export", str(fifo), "--logdir", str(tmp_path / "l"),
                           "--run", "f"], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 1 and done.stderr.strip() == (
        f"tb-hwprof: error: {fifo}: is a pipe, not a file: its bytes can be read only once -- write it to a file "
        f"first (e.g. cat ... > trace.json) and pass that file")
    trace = sample(samples_dir, "torch/kineto_h100_cuda129_small.json")
    piped = subprocess.run(["bash", "-c", f'"$0" -m tb_hwprof export <(cat "$1") --logdir "$2" --run p',
                            sys.executable, str(trace), str(tmp_path / "l")], capture_output=True, text=True,
                           timeout=60, env=env)
    assert piped.returncode == 1 and ": is a pipe, not a file" in piped.stderr and len(piped.stderr.splitlines()) == 1
    assert not (tmp_path / "l").exists()


def test_text_a_reader_let_through_is_named_as_the_inputs(samples_dir, tmp_path, capfd, monkeypatch):
    """Issue 30, item 4: a lone surrogate that reaches the writer was reported on an internal staging
    file (.../.tb-hwprof/staging/x@PID@.../summary_....json.gz); it is named as the input's."""
    from conftest import sample
    from tb_hwprof.readers import detect
    original = detect.read

    def leaky(path, **options):  # a reader that lets undecodable text through
        profile = original(path, **options)
        profile.kernels.loc[0, "name"] = profile.kernels.loc[0, "name"] + "\udc80"
        return profile
    monkeypatch.setattr(detect, "read", leaky)
    trace = sample(samples_dir, "nsys/annikola_gtx1050_2024.5.1.sqlite")
    assert main(["export", str(trace), "--logdir", str(tmp_path), "--run", "x", "--quiet"]) == 1
    (line,) = capfd.readouterr().err.splitlines()
    assert line.startswith(f"tb-hwprof: error: {trace}: holds text that is not Unicode (")
    assert ".tb-hwprof" not in line and not (tmp_path / "x").exists()


def test_a_value_no_run_may_hold_fails_the_export_not_later_loads(samples_dir, tmp_path, capfd, monkeypatch):
    """A reader that lets through a value the run's own reader refuses (a negative device id, as
    rocprof's dev-id = -1 once did) fails its export, naming the input: the writer checks its manifest
    as load_run would, so no run that cannot be opened is put in place, and the run it was to replace
    stays as it was."""
    import tb_hwprof
    from conftest import sample
    from tb_hwprof.readers import detect
    trace = sample(samples_dir, "nsys/annikola_gtx1050_2024.5.1.sqlite")
    assert main(["export", str(trace), "--logdir", str(tmp_path), "--run", "x", "--quiet"]) == 0
    manifest = tmp_path / "x" / "plugins" / "tb_hwprof" / "profile.json"
    before = manifest.read_bytes()
    original = detect.read

    def leaky(path, **options):
        profile = original(path, **options)
        profile.devices[0].id = -1
        return profile
    monkeypatch.setattr(detect, "read", leaky)
    for run in ("x", "y"):
        assert main(["export", str(trace), "--logdir", str(tmp_path), "--run", run, "--quiet", "--overwrite"]) == 1
        (line,) = capfd.readouterr().err.splitlines()
        assert line.startswith(f"tb-hwprof: error: {trace}: gave a value no run may hold (manifest device id -1 ")
        assert ".tb-hwprof" not in line
    assert manifest.read_bytes() == before and not (tmp_path / "y").exists()
    assert tb_hwprof.load_run(tmp_path / "x").devices[0].id == original(trace).devices[0].id
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x"]
