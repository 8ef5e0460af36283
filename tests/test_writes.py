"""Writes under kill, concurrency and odd run names (issue 13): a kill at any step leaves the old run or
the new one, complete, and nothing TensorBoard lists besides; two exports of one run: one wins, the
other is refused naming the winner's pid; dead exports' leftovers go with the next export."""
import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tb_hwprof
from tb_hwprof.logdir import metadata, writer

REPO = Path(__file__).resolve().parent.parent
OLD_SAMPLE = "nsys/kmeans_rtx3080_openacc_2020.5.1.sqlite"
NEW_SAMPLE = "nsys/gpu4_t4_2022.4.2.sqlite"


def listed_runs(logdir: Path) -> set:
    """The folders TensorBoard itself would list as runs (its own walk, hidden folders included)."""
    from tensorboard.backend.event_processing import io_wrapper
    return {Path(p) for p in io_wrapper.GetLogdirSubdirectories(str(logdir))}


def source_of(run_dir: Path) -> str:
    return tb_hwprof.load_run(run_dir).provenance.source_path


def cli(*args):
    return subprocess.Popen([sys.executable, "-m", "tb_hwprof", *map(str, args)], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.fixture(scope="module")
def profiles(samples_dir):
    """(profile, analysis) of the run written first and of the one replacing it."""
    out = {}
    for name in (OLD_SAMPLE, NEW_SAMPLE):
        path = samples_dir / name
        if not path.is_file():
            pytest.skip(f"{name} not in the samples")
        profile = tb_hwprof.read(path)
        out[name] = (profile, tb_hwprof.analyse(profile))
    return out


USER_FILE = "worker0.1700000000000.pt.trace.json"  # a PyTorch run folder's trace, beside our run


def write_template(profiles, logdir: Path, mode: str) -> None:
    """Run 'r' from OLD_SAMPLE ('overwrite'), the same beside a user's trace ('beside'), nothing ('new')."""
    logdir.mkdir(parents=True)
    if mode == "beside":
        (logdir / "r").mkdir()
        (logdir / "r" / USER_FILE).write_text('{"traceEvents": []}')
    if mode != "new":
        writer.write_run(*profiles[OLD_SAMPLE], logdir, "r", beside=mode == "beside")


@pytest.fixture(scope="module")
def template(profiles, tmp_path_factory) -> Path:
    """A logdir holding run 'r' from OLD_SAMPLE (copied for each test that replaces it)."""
    logdir = tmp_path_factory.mktemp("template") / "logs"
    write_template(profiles, logdir, "overwrite")
    return logdir


def fresh_logdir(template: Path, tmp_path: Path) -> Path:
    logdir = tmp_path / "logs"
    shutil.copytree(template, logdir)
    return logdir


def overwrite_killed_at(step: int, profiles, logdir: Path, beside: bool = False) -> int:
    """In a forked child, write run 'r' from NEW_SAMPLE (over the one there) and die (os._exit: nothing
    cleans up, as after kill -9) just before its step-th rename or tree removal; the child's exit
    status: the number of such steps it made when it was not killed, 255 when it was."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        count = [0]

        def dies_before(real):
            def step_then(*args, **kwargs):
                count[0] += 1
                if count[0] == step:
                    os._exit(255)
                return real(*args, **kwargs)
            return step_then
        try:
            os.rename, os.replace, shutil.rmtree = map(dies_before, (os.rename, os.replace, shutil.rmtree))
            writer.write_run(*profiles[NEW_SAMPLE], logdir, "r", overwrite=True, beside=beside)
        finally:
            os._exit(min(count[0], 254))
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.parametrize("mode", ["overwrite", "beside", "new"])
def test_a_kill_at_any_step_leaves_one_whole_run(profiles, tmp_path, samples_dir, mode):
    """Killed before each of its renames and removals, an export leaves the run it replaces (or none,
    for a new run) or its own, complete, and never a folder TensorBoard lists besides."""
    template = tmp_path / "template"
    write_template(profiles, template, mode)
    steps = overwrite_killed_at(10 ** 6, profiles, fresh_logdir(template, tmp_path / "count"), mode == "beside")
    assert 3 <= steps < 254  # manifest, events, (hide, aside,) in, show, removals: each a kill point
    old, new = (str((samples_dir / name).resolve()) for name in (OLD_SAMPLE, NEW_SAMPLE))
    outcomes = []
    for step in range(1, steps + 1):
        logdir = fresh_logdir(template, tmp_path / str(step))
        run = logdir / "r"
        assert overwrite_killed_at(step, profiles, logdir, mode == "beside") == 255
        assert listed_runs(logdir) <= {run}, step  # never a listed leftover, even before any repair
        writer.recover_interrupted(run)  # what load_run and the plugin call
        if mode == "new" and not run.exists():
            outcomes.append(None)
            assert listed_runs(logdir) == set(), step
        else:
            assert listed_runs(logdir) == {run}, step
            outcomes.append(source_of(run))
            events = [p.name for p in run.iterdir() if "tfevents" in p.name]
            assert len(events) == 1 and not writer.pending_events(run), (step, events)
        if mode == "beside":
            assert (run / USER_FILE).read_text() == '{"traceEvents": []}'
        writer.write_run(*profiles[OLD_SAMPLE], logdir, "other")  # any next export cleans the dead one's
        assert not (logdir / metadata.WORK_AREA).exists(), (step, sorted((logdir / metadata.WORK_AREA).rglob("*")))
    before = None if mode == "new" else old
    assert set(outcomes) == {before, new}  # early kills keep the run as it was, late ones the new
    assert outcomes == sorted(outcomes, key=[before, new].index)  # never back once the new is in


def test_kill_9_of_a_running_export_leaves_the_old_run(template, tmp_path, samples_dir):
    """A real SIGKILL to the CLI as soon as its staging folder exists (mid-write)."""
    logdir = fresh_logdir(template, tmp_path)
    before = source_of(logdir / "r")
    child = cli("export", samples_dir / NEW_SAMPLE, "--logdir", logdir, "--run", "r", "--overwrite", "--quiet")
    staging = logdir / metadata.WORK_AREA / "staging"
    deadline = time.monotonic() + 60
    while not any(writer.list_dir(staging)) and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    child.send_signal(signal.SIGKILL)
    child.communicate()
    if child.returncode == 0:
        pytest.skip("the export finished before it could be killed")
    assert listed_runs(logdir) == {logdir / "r"}
    tb_hwprof.load_run(logdir / "r")
    assert source_of(logdir / "r") == before
    assert tb_hwprof.export(samples_dir / OLD_SAMPLE, logdir, "next").is_dir()
    assert not (logdir / metadata.WORK_AREA).exists()  # its staging folder went with that export


def test_an_export_of_a_run_being_exported_is_refused_with_the_pid(profiles, template, tmp_path, samples_dir):
    logdir = fresh_logdir(template, tmp_path)
    lock = writer.lock_run(logdir / "r", "r")  # as a running export holds it
    try:
        with pytest.raises(writer.RunBusy, match=f"run 'r' is being exported by pid {os.getpid()} on "):
            writer.write_run(*profiles[NEW_SAMPLE], logdir, "r", overwrite=True)
        child = cli("export", samples_dir / NEW_SAMPLE, "--logdir", logdir, "--run", "r", "--overwrite", "--quiet")
        _, err = child.communicate(timeout=120)
        assert child.returncode == 1 and err.count("\n") == 1, err
        assert f"is being exported by pid {os.getpid()} on {socket.gethostname()}" in err, err
    finally:
        lock.release()
    assert source_of(logdir / "r") == str((samples_dir / OLD_SAMPLE).resolve())
    writer.write_run(*profiles[NEW_SAMPLE], logdir, "r", overwrite=True)  # free again once released
    assert not (logdir / metadata.WORK_AREA).exists()


def test_two_exports_of_one_run_at_once_one_wins(tmp_path, samples_dir):
    logdir = tmp_path / "logs"
    children = [cli("export", samples_dir / name, "--logdir", logdir, "--run", "same", "--quiet")
                for name in (OLD_SAMPLE, NEW_SAMPLE)]
    results = [(c.wait(timeout=120), c.communicate()[1]) for c in children]
    assert sorted(rc for rc, _ in results) == [0, 1], results
    loser = next(err for rc, err in results if rc == 1)
    assert loser.count("\n") == 1 and "Traceback" not in loser and "FileNotFoundError" not in loser, loser
    assert "is being exported by pid" in loser or "run already exists" in loser, loser
    winner = children[[rc for rc, _ in results].index(0)].args[4]
    assert source_of(logdir / "same") == str(Path(winner).resolve())
    assert listed_runs(logdir) == {logdir / "same"} and not (logdir / metadata.WORK_AREA).exists()


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_only_this_hosts_dead_exports_leftovers_are_removed(profiles, tmp_path):
    logdir = tmp_path / "logs"
    staging = logdir / metadata.WORK_AREA / "staging"
    host = socket.gethostname()
    dead, alive, elsewhere = (staging / f"gone@{dead_pid()}@{host}@x1", staging / f"busy@{os.getppid()}@{host}@x2",
                              staging / f"nfs@{dead_pid()}@another-host@x3")
    for folder in (dead, alive, elsewhere):
        folder.mkdir(parents=True)
        (folder / "kernels.json.gz").write_bytes(b"x" * 1000)
    writer.write_run(*profiles[OLD_SAMPLE], logdir, "r")
    assert not dead.exists() and alive.is_dir() and elsewhere.is_dir()
    assert listed_runs(logdir) == {logdir / "r"}


def test_a_reader_repairs_only_when_no_export_holds_the_run(profiles, template, tmp_path, monkeypatch):
    """Killed with the old run aside (step 2): the run is missing until a reader puts it back; the
    reader leaves it to a running export, and gives up quietly on a logdir it cannot write."""
    logdir = fresh_logdir(template, tmp_path)
    run = logdir / "r"
    step = next(s for s in range(1, 40) if overwrite_killed_at(s, profiles, fresh_logdir(template, tmp_path / str(s)))
                == 255 and not writer.asset_dir(tmp_path / str(s) / "logs" / "r").exists())
    assert overwrite_killed_at(step, profiles, logdir) == 255
    assert not writer.asset_dir(run).exists() and listed_runs(logdir) == set()
    lock = writer.lock_run(run, "r")
    writer.recover_interrupted(run)
    assert not writer.asset_dir(run).exists()  # an export holds it: not the reader's to touch
    lock.release()

    def read_only(*_):
        raise OSError(errno.EROFS, "Read-only file system")
    with monkeypatch.context() as m:
        m.setattr(writer.RunLock, "_open", read_only)
        writer.recover_interrupted(run)  # returns quietly
    writer.recover_interrupted(run)
    tb_hwprof.load_run(run)
    assert listed_runs(logdir) == {run}


def test_replacing_a_run_keeps_the_runs_nested_in_it(profiles, tmp_path):
    logdir = tmp_path / "logs"
    writer.write_run(*profiles[OLD_SAMPLE], logdir, "series")
    writer.write_run(*profiles[OLD_SAMPLE], logdir, "series/v2")
    writer.write_run(*profiles[NEW_SAMPLE], logdir, "series", overwrite=True)
    assert source_of(logdir / "series" / "v2") == source_of(logdir / "series").replace("gpu4_t4_2022.4.2",
                                                                                    "kmeans_rtx3080_openacc_2020.5.1")
    assert listed_runs(logdir) == {logdir / "series", logdir / "series" / "v2"}


@pytest.mark.parametrize("name", ["*", "[r]", "%72", "a@1@host@x", "names with spaces", "ünï", "x" * 200])
def test_odd_run_names_lock_and_replace_only_themselves(profiles, template, tmp_path, name):
    """'%72' percent-decodes to 'r' and '*' / '[r]' match 'r' as globs: none may touch run 'r';
    a 200-character name is too long to encode in a lock file's name and is hashed."""
    logdir = fresh_logdir(template, tmp_path)
    lock = writer.lock_run(logdir / "r", "r")
    try:
        writer.write_run(*profiles[NEW_SAMPLE], logdir, name)
        writer.write_run(*profiles[NEW_SAMPLE], logdir, name, overwrite=True)
    finally:
        lock.release()
        writer.tidy_area(logdir / metadata.WORK_AREA)
    assert source_of(logdir / "r").endswith(Path(OLD_SAMPLE).name)
    assert source_of(logdir / name).endswith(Path(NEW_SAMPLE).name)
    assert listed_runs(logdir) == {logdir / "r", logdir / name} and not (logdir / metadata.WORK_AREA).exists()


NCU_SAMPLE = "ncu/kprattis_gtx1650_basic_2022.4.1.ncu-rep"


@pytest.mark.parametrize("where", ["kernel name", "raw metric text", "manifest note"])
def test_text_that_is_not_unicode_is_refused_not_written_unreadable(samples_dir, tmp_path, where):
    """A lone surrogate that a reader let through (json.dumps writes it as an escape without a word,
    orjson refuses to read it back) is refused when written, naming the file; nothing is left in the
    logdir.  A character beyond the BMP, escaped as a surrogate pair, is text and reads back."""
    pytest.importorskip("ncu_report")
    profile = tb_hwprof.read(samples_dir / NCU_SAMPLE)
    kernel_names = profile.kernels["name"].tolist()
    if where == "kernel name":
        profile.kernels["name"] = [kernel_names[0] + "\udc80"] + kernel_names[1:]
    elif where == "raw metric text":
        metric = next(m for m, (value, _) in profile.raw_metrics[0].items() if isinstance(value, str))
        profile.raw_metrics[0][metric] = ["bad\ud800", ""]
    else:
        profile.notes.append("a note \udfff")
    with pytest.raises(tb_hwprof.core.errors.HwprofError, match="not Unicode") as refused:
        writer.write_run(profile, tb_hwprof.analyse(profile), tmp_path, "r")
    assert len(str(refused.value).splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # no run, no staging area left

    profile.kernels["name"] = ["\U0001F680 " + kernel_names[0]] + kernel_names[1:]
    profile.notes[:] = [n for n in profile.notes if "\udfff" not in n]
    for launch in profile.raw_metrics:
        for metric, (value, unit) in list(launch.items()):
            if isinstance(value, str) and "\ud800" in value:
                launch[metric] = ["ok \U0001F680", unit]
    run = tb_hwprof.load_run(writer.write_run(profile, tb_hwprof.analyse(profile), tmp_path, "ok"))
    assert run.kernels["name"].iloc[0] == "\U0001F680 " + kernel_names[0]


def test_a_full_disk_at_the_lock_leaves_no_lock_file_and_names_it(tmp_path, monkeypatch, capsys, samples_dir):
    """Issue 30, item 6: a full disk while the lock file gets its pid left an empty
    .tb-hwprof/locks/<run>.lock behind, and the error said 'no space left on the logdir'."""
    import errno
    import os as os_module
    from tb_hwprof.app.cli import main
    from tb_hwprof.logdir import writer
    real_write = os_module.write

    def full(fd, data):
        if str(os_module.readlink(f"/proc/self/fd/{fd}")).endswith(".lock"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)
    monkeypatch.setattr(writer.os, "write", full)
    report = samples_dir / "ncu" / "kprattis_gtx1650_basic_2022.4.1.ncu-rep"
    assert main(["export", str(report), "--logdir", str(tmp_path), "--run", "r", "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    lock = tmp_path / ".tb-hwprof" / "locks" / "r.lock"
    assert err.startswith(f"tb-hwprof: error: no space left on {lock}")
    assert not lock.exists() and not (tmp_path / "r").exists()


def test_integers_past_64_bits_are_written_as_the_reader_reads_them(samples_dir, tmp_path):
    """A summary cell or a launch's detail holding an integer past 64 bits (orjson, which reads every
    run, parses none) is written as a float, or null past a double's range: the run reads back.  The
    fuzzing found a run written that way that its own reader refused."""
    from tb_hwprof.logdir import reader
    profile = tb_hwprof.read(samples_dir / "vtune" / "vtune_summary_tab.csv")
    table = profile.summaries["vtune_summary"]
    table["level"] = table["level"].astype(object)
    table.loc[1, "level"], table.loc[2, "level"] = 10 ** 40, 10 ** 400
    run = writer.write_run(profile, tb_hwprof.analyse(profile), tmp_path, "big")
    back = reader.load_run(run).summaries["vtune_summary"]["level"].tolist()
    assert back[1] == 1e40 and back[2] != back[2] and back[3] == table.loc[3, "level"]
