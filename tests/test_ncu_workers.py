"""A big Nsight Compute report read by worker processes, a stretch of launches each (issue 31):
what they read equals what one process reads, damage is judged alike, and a worker that dies is
one line naming the file."""
import json
import pickle
import subprocess
import os
import sys
import textwrap

import pandas as pd
import pytest

from tb_hwprof.app import cli
from tb_hwprof.readers.nvidia import ncu_rep, ncu_workers

from conftest import H200_PAIR, decompressed, sample
from test_ncu_rep_damage import MULTI, break_launch_record

SMALL = "ncu/spyinfer_a10_105launches_2023.2.0.ncu-rep"  # 105 launches, 2.1 MB, sections


# Each read runs in a fresh child: ncu_report carries state from one report to the next in a process
# (see test_a_second_report_reads_as_in_a_fresh_process), and keeps every launch it read.
READ_IN_CHILD = textwrap.dedent("""
    import pickle, sys
    from tb_hwprof.readers.nvidia import ncu_rep, ncu_workers
    path, mode, stretch, kernels, out, *before = sys.argv[1:]
    ncu_workers.SASS_KERNELS_PER_WORKER = int(kernels) or ncu_workers.SASS_KERNELS_PER_WORKER
    for other in before:
        ncu_rep.read_ncu_rep(other)
    if mode == "here":
        ncu_workers.IN_PROCESS_BELOW = 1 << 62
    elif mode == "workers":
        ncu_workers.IN_PROCESS_BELOW, ncu_workers.STRETCH_BYTES = 0, int(stretch)
    profile = ncu_rep.read_ncu_rep(path)
    with open(out, "wb") as f:
        pickle.dump(profile, f)
""")


def read_in_child(path, tmp_path, mode, stretch_bytes=0, before=(), sass_kernels=0):
    """The Profile of `path` read in a fresh process: mode "here" (in that process), "workers" (by
    workers of `stretch_bytes`, SASS workers of `sass_kernels`) or "default"; `before`: reports that
    process reads first."""
    out = tmp_path / f"{mode}-{stretch_bytes}-{len(before)}.pickle"
    done = subprocess.run([sys.executable, "-c", READ_IN_CHILD, str(path), mode, str(stretch_bytes), str(sass_kernels),
                           str(out),
                           *map(str, before)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(out, "rb") as f:
        return pickle.load(f)


def assert_same_profile(a, b):
    pd.testing.assert_frame_equal(a.kernels, b.kernels)
    assert json.dumps(a.raw_metrics) == json.dumps(b.raw_metrics)  # NaN: equal as text
    assert json.dumps(a.rules) == json.dumps(b.rules)
    assert a.devices == b.devices and a.notes == b.notes and a.provenance == b.provenance
    assert sorted(a.summaries) == sorted(b.summaries)
    for name in a.summaries:
        pd.testing.assert_frame_equal(a.summaries[name], b.summaries[name])


@pytest.mark.parametrize("stretch_bytes", [150_000, 1 << 20])  # 7 and 48 launches a worker
def test_workers_read_what_one_process_reads(stretch_bytes, samples_dir, tmp_path, ncu_report_module):
    path = sample(samples_dir, SMALL)
    here, workers = (read_in_child(path, tmp_path, mode, stretch_bytes) for mode in ("here", "workers"))
    assert len(workers.kernels) == 105 and len(workers.summaries[ncu_rep.SECTIONS_TABLE])
    assert_same_profile(here, workers)


def test_h200_report_by_workers_equals_one_process_hotspots_and_all(samples_dir, tmp_path, tmp_path_factory,
                                                                    ncu_report_module):
    """The real 136 MB H200 report (source counters: SASS at each launch's hottest instructions)
    is read by workers by default; by 9 stretch workers and 4 SASS workers (its 15 kernels, 4 a
    worker) it equals what one process reads."""
    report = decompressed(samples_dir / H200_PAIR / "resnet18_step3_first58.ncu-rep.xz", tmp_path_factory)
    assert report.stat().st_size >= ncu_workers.IN_PROCESS_BELOW
    by_workers = read_in_child(report, tmp_path, "workers", 16 << 20, sass_kernels=4)
    here = read_in_child(report, tmp_path, "here")
    assert_same_profile(here, by_workers)
    hot = by_workers.summaries[ncu_rep.HOTSPOTS]
    assert len(by_workers.kernels) == 58 and len(hot) and (hot["sass"] != "").all()


def test_a_second_report_reads_as_in_a_fresh_process(samples_dir, tmp_path, ncu_report_module):
    """ncu_report 2026.3.1, having read the A10 sample, gives the GTX 1650 sample's
    breakdown:gpu__compute_memory_throughput... the unit "byte" for "%" in the same process: a
    process reads one report itself, the next ones by fresh workers."""
    first, second = sample(samples_dir, SMALL), sample(samples_dir, MULTI)
    alone = read_in_child(second, tmp_path, "default")
    after = read_in_child(second, tmp_path, "default", before=[first])
    name = "breakdown:gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
    assert alone.raw_metrics[0][name][1] == "%"
    assert_same_profile(alone, after)


def test_stretches_cover_every_launch_once():
    for launches, size, stretch in [(58, 136_078_617, 24 << 20), (105, 2_149_700, 150_000), (1, 10, 1 << 20),
                                    (1000, 1 << 30, 24 << 20)]:
        parts = ncu_workers.stretches(launches, size, stretch)
        assert parts[-1][1] is None and parts[0][0] == 0
        ids = [i for first, last in parts for i in range(first, launches if last is None else last)]
        assert ids == list(range(launches))
        # The fewest stretches of at most `stretch` bytes (by the report's bytes per launch), as even
        # as launches allow, in a multiple of the workers run at once (fewer only for fewer launches).
        sizes = [(launches if last is None else last) - first for first, last in parts]
        assert max(sizes) - min(sizes) <= 1
        assert len(parts) % ncu_workers.WORKERS == 0 or len(parts) == launches
        per_launch = size / launches
        assert (max(sizes) - 1) * per_launch <= stretch or len(parts) == launches
        fewer = len(parts) - ncu_workers.WORKERS
        assert fewer < 1 or size / fewer > stretch


def test_a_big_report_is_read_in_fewer_bigger_stretches_as_memory_allows():
    """Up to 288 MB a report is read in stretches of STRETCH_BYTES; a bigger one in
    STRETCHES_OF_A_BIG_REPORT (8: each stretch pays a worker's start), smaller again where the
    machine's memory is short."""
    small, stretch, big = ncu_workers.STRETCH_BYTES, ncu_workers.STRETCH_BYTES, ncu_workers.STRETCHES_OF_A_BIG_REPORT
    plenty, gigabyte = 20 << 30, 1 << 30
    assert ncu_workers.stretch_bytes_for(136_078_617, plenty) == stretch  # the H200 report: 4 stretches
    assert ncu_workers.stretch_bytes_for(big * small, plenty) == stretch
    assert ncu_workers.stretch_bytes_for(gigabyte, plenty) == gigabyte // big
    assert len(ncu_workers.stretches(464, gigabyte, ncu_workers.stretch_bytes_for(gigabyte, plenty))) == big
    assert ncu_workers.stretch_bytes_for(gigabyte, gigabyte) == stretch  # 1 GB free: 32 MB, the usual size
    assert ncu_workers.stretch_bytes_for(4 * gigabyte, 4 * gigabyte) == 4 * gigabyte // 32  # 2 workers: a third
    assert ncu_workers.stretch_bytes_for(8 * gigabyte, 16 * gigabyte) == 8 * gigabyte // 16
    if sys.platform.startswith("linux"):
        assert 0 < ncu_workers.available_memory() <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def test_a_worker_does_not_load_pandas():
    """ncu_report before pyarrow: Nsight Compute's own copy of the module crashes in IMetric.unit
    once pyarrow (which pandas 3 imports) is loaded; a worker loads neither."""
    code = "import sys, tb_hwprof.readers.nvidia.ncu_workers; print(sorted({'pandas', 'pyarrow', 'numpy'} & set(sys.modules)))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"


@pytest.fixture
def by_workers(monkeypatch):
    monkeypatch.setattr(ncu_workers, "IN_PROCESS_BELOW", 0)
    monkeypatch.setattr(ncu_workers, "STRETCH_BYTES", 40_000)


EXPORT_IN_CHILD = textwrap.dedent("""
    import sys
    from tb_hwprof.app import cli
    from tb_hwprof.readers.nvidia import ncu_workers
    mode, *args = sys.argv[1:]
    if mode == "here":
        ncu_workers.IN_PROCESS_BELOW = 1 << 62
    else:
        ncu_workers.IN_PROCESS_BELOW, ncu_workers.STRETCH_BYTES = 0, 40_000  # a launch or two a worker
    sys.exit(cli.main(["export", *args]))
""")


def export_in_child(mode, damaged, logdir, *flags):
    """(exit status, stderr lines, the run or None) of `tb-hwprof export` in a fresh process."""
    import tb_hwprof
    done = subprocess.run([sys.executable, "-c", EXPORT_IN_CHILD, mode, str(damaged), "--logdir", str(logdir),
                           "--run", "r", "--quiet", *flags], capture_output=True, text=True)
    return done.returncode, done.stderr.splitlines(), tb_hwprof.load_run(logdir / "r") if done.returncode == 0 else None


def test_damage_is_judged_alike_by_workers(samples_dir, tmp_path, ncu_report_module):
    """A launch whose record is broken: refused with the same line, salvaged to the same run."""
    data = bytearray(sample(samples_dir, MULTI).read_bytes())
    break_launch_record(data, 2)
    damaged = tmp_path / "damaged.ncu-rep"
    damaged.write_bytes(bytes(data))
    refused = {mode: export_in_child(mode, damaged, tmp_path / f"refused-{mode}") for mode in ("here", "workers")}
    kept = {mode: export_in_child(mode, damaged, tmp_path / f"kept-{mode}", "--salvage") for mode in ("here", "workers")}
    assert refused["here"][:2] == refused["workers"][:2]
    rc, err, _ = refused["workers"]
    assert rc == 1 and len(err) == 1 and f"{damaged}: damaged Nsight Compute report: launch 2 (" in err[0]
    assert kept["here"][0] == kept["workers"][0] == 0
    here, there = kept["here"][2], kept["workers"][2]
    assert list(there.kernels["launch_id"]) == [0, 1, 3, 4, 5]
    pd.testing.assert_frame_equal(here.kernels, there.kernels)
    assert here.notes == there.notes and json.dumps(here.raw_metrics) == json.dumps(there.raw_metrics)


def test_a_worker_that_dies_is_one_line_naming_the_file(samples_dir, tmp_path, capfd, monkeypatch, by_workers,
                                                        ncu_report_module):
    """A worker killed (as by the out-of-memory killer, or a crash in NVIDIA's library): the export
    says which launches, exits 1 and writes no run."""
    monkeypatch.setattr(ncu_workers, "WORKER_COMMAND",
                        [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    path = sample(samples_dir, MULTI)
    rc = cli.main(["export", str(path), "--logdir", str(tmp_path / "logs"), "--run", "r", "--quiet"])
    err = capfd.readouterr().err.splitlines()
    assert rc == 1 and len(err) == 1, err
    assert f"{path}: Nsight Compute's reader died reading launches 0-" in err[0]
    assert "signal 9" in err[0]
    assert not (tmp_path / "logs" / "r").exists()


PROGRESS_IN_CHILD = textwrap.dedent("""
    import sys
    from tb_hwprof.app.export import read_report
    from tb_hwprof.readers.nvidia import ncu_workers
    ncu_workers.IN_PROCESS_BELOW, ncu_workers.STRETCH_BYTES = 0, int(sys.argv[2])
    read_report(sys.argv[1], progress=lambda line: print("PROGRESS", line, flush=True))
""")


def test_reading_by_workers_says_how_far_it_got(samples_dir, ncu_report_module):
    """Long work shows progress: the export says how many workers read the report, then each stretch
    as it comes in, in order, naming the file."""
    path = sample(samples_dir, SMALL)
    done = subprocess.run([sys.executable, "-c", PROGRESS_IN_CHILD, str(path), str(2 << 20)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line.split(" ", 1)[1] for line in done.stdout.splitlines() if line.startswith("PROGRESS ")]
    assert lines[0] == f"{path}: 105 launches, read by 2 worker processes (2 at once)"
    assert lines[1:] == [f"{path}: read launches 0-51 (1/2)", f"{path}: read launches 52-end (2/2)"]


PARENT_RSS_IN_CHILD = textwrap.dedent("""
    import sys
    from tb_hwprof.readers.nvidia import ncu_rep, ncu_workers

    def rss_kb():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))

    seen, run = [], ncu_workers.run_worker
    ncu_workers.run_worker = lambda *args: seen.append(rss_kb()) or run(*args)
    # While the map is open: right after the container walk and after the hash (pages handed back
    # every 8 MB here, so that the report's 136 MB tell).
    ncu_rep.RELEASE_BYTES = 8 << 20
    mapped, check, digest = [], ncu_rep.check_container, ncu_rep.version_and_digest
    ncu_rep.check_container = lambda *args: (lambda done: mapped.append(rss_kb()) or done)(check(*args))
    ncu_rep.version_and_digest = lambda data: (lambda done: mapped.append(rss_kb()) or done)(digest(data))
    before = rss_kb()
    profile = ncu_rep.read_ncu_rep(sys.argv[1])
    print(before, seen[0], len(seen), profile.provenance.source_sha256, profile.provenance.tool_version, max(mapped))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status")
def test_the_exporting_process_holds_none_of_a_big_report_while_workers_read_it(samples_dir, tmp_path_factory,
                                                                                 ncu_report_module):
    """The report's bytes are checked, hashed and searched for the version from a map of the file,
    whose pages are handed back as they are passed and let go before the workers start: the exporting
    process does not hold the report beside their memory (it held all 136 MB of the H200 report; a
    1 GB report sat there whole)."""
    import hashlib
    report = decompressed(samples_dir / H200_PAIR / "resnet18_step3_first58.ncu-rep.xz", tmp_path_factory)
    done = subprocess.run([sys.executable, "-c", PARENT_RSS_IN_CHILD, str(report)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    before, during, workers, digest, version, reading = done.stdout.split()
    size_kb = report.stat().st_size // 1024
    assert int(workers) >= 2
    assert int(during) - int(before) < size_kb // 4
    # Nor while it reads the bytes: the map's pages are handed back behind the walk and the hash
    # (a 1 GB report's check held 1 GB: its export's process tree peaked at 1,097 MB, 1,062 since).
    assert int(reading) - int(before) < size_kb // 4, f"{(int(reading) - int(before)) // 1024} MB while reading"
    assert digest == hashlib.sha256(report.read_bytes()).hexdigest()
    assert version == "2025.3.1"  # CAPTURE.md: Nsight Compute 2025.3.1


# The fork server (ncu_workers.ForkServer): a worker command that runs the real server, changed only
# where the test says (in --serve mode; a fresh worker runs unchanged).
SERVER_WITH = textwrap.dedent("""
    import os, signal, sys, threading, time
    from tb_hwprof.readers.nvidia import ncu_workers as w
    if sys.argv[1:] == ["--serve"]:
        {change}
    w.main()
""")
SERVER_CHANGES = {
    # a child killed (the out-of-memory killer, a crash in NVIDIA's library)
    "child dies": "w._answer_with = lambda *args: os.kill(os.getpid(), signal.SIGKILL)",
    # the server gone before forking anything
    "server dies": "sys.stderr.write('out of luck\\\\n'); os._exit(3)",
    # the library started a thread in the server: forking is unsafe
    "thread": "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()",
}


def server_command(change: str):
    return [sys.executable, "-c", SERVER_WITH.replace("{change}", SERVER_CHANGES[change])]


def test_a_forked_child_that_dies_is_one_line_naming_the_file(samples_dir, tmp_path, capfd, monkeypatch, by_workers,
                                                              ncu_report_module):
    """A child of the fork server killed: the export says which launches and how (no fresh worker
    reads them instead: it would succeed here), exits 1 and writes no run."""
    monkeypatch.setattr(ncu_workers, "WORKER_COMMAND", server_command("child dies"))
    path = sample(samples_dir, MULTI)
    rc = cli.main(["export", str(path), "--logdir", str(tmp_path / "logs"), "--run", "r", "--quiet"])
    err = capfd.readouterr().err.splitlines()
    assert rc == 1 and len(err) == 1, err
    assert f"{path}: Nsight Compute's reader died reading launches 0-" in err[0] and "signal 9" in err[0]
    assert not (tmp_path / "logs" / "r").exists()


FALLBACK_IN_CHILD = textwrap.dedent("""
    import pickle, sys
    from tb_hwprof.app.export import read_report
    from tb_hwprof.readers.nvidia import ncu_workers
    ncu_workers.IN_PROCESS_BELOW, ncu_workers.STRETCH_BYTES = 0, 1 << 20
    ncu_workers.WORKER_COMMAND = sys.argv[3:]
    report = read_report(sys.argv[1], progress=lambda line: print("PROGRESS", line, flush=True))
    with open(sys.argv[2], "wb") as f:
        pickle.dump(report.profile, f)
""")


@pytest.mark.parametrize("change", ["server dies", "thread"])
def test_where_the_server_cannot_fork_fresh_workers_read_and_say_so(change, samples_dir, tmp_path, ncu_report_module):
    """The fork server gone before it forked anything, or running a thread (a child forked then can
    hang on a lock the thread held): every stretch is read by a fresh worker instead, to the same
    profile, and the progress says why."""
    path, out = sample(samples_dir, SMALL), tmp_path / "profile.pickle"
    done = subprocess.run([sys.executable, "-c", FALLBACK_IN_CHILD, str(path), str(out), *server_command(change)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    said = [line for line in done.stdout.splitlines() if "fresh worker processes read the rest" in line]
    reason = "ended early: out of luck" if change == "server dies" else "runs a thread in it, forking is unsafe"
    assert len(said) == 1 and reason in said[0] and str(path) in said[0]
    with open(out, "rb") as f:
        assert_same_profile(read_in_child(path, tmp_path, "here"), pickle.load(f))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_the_server_and_its_children_end_with_the_exporting_process(samples_dir, tmp_path, tmp_path_factory, monkeypatch,
                                                                     ncu_report_module):
    """The exporting process killed (the out-of-memory killer) while forked children read: the server
    sees its input end, stops its children and exits; nothing is left holding the report's memory.
    The folder of the children's answers it leaves is removed by the next read by workers."""
    import signal
    import tempfile
    import time
    report = decompressed(samples_dir / H200_PAIR / "resnet18_step3_first58.ncu-rep.xz", tmp_path_factory)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    reader = subprocess.Popen([sys.executable, "-c", "import sys; from tb_hwprof.readers.nvidia import ncu_rep; "
                               "ncu_rep.read_ncu_rep(sys.argv[1])", str(report)], env={**os.environ, "TMPDIR": str(scratch)})
    try:
        deadline = time.monotonic() + 120
        while not (family := descendants(reader.pid))[1:] and time.monotonic() < deadline:
            time.sleep(0.02)  # until the server has forked a child
        assert family[1:], "no forked child seen"
    finally:
        reader.send_signal(signal.SIGKILL)
        reader.wait()
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in family) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in family if alive(pid)]
    [left] = scratch.glob(f"tb-hwprof-ncu@{reader.pid}@*")
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    with ncu_workers.fork_server(report) as server:
        assert not left.exists() and server.folder.parent == scratch
    assert not list(scratch.iterdir())


def descendants(pid: int) -> list:
    """[the server, its children] under `pid` (empty until the server runs)."""
    def children(of):
        try:
            with open(f"/proc/{of}/task/{of}/children") as f:
                return [int(p) for p in f.read().split()]
        except OSError:
            return []
    servers = [p for p in children(pid) if "--serve" in cmdline(p)]
    return servers[:1] + (children(servers[0]) if servers else [])


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def alive(pid: int) -> bool:
    """Running (not gone, not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_metric_name_or_unit_is_held_once_not_once_per_launch(samples_dir, tmp_path, ncu_report_module):
    """Every launch repeats the report's metric names and units: the profile holds one object of each
    per process that read them (a copy per launch was 13 of the H200 report's 38 MB of raw metrics),
    read in the exporting process or by workers; the values are unchanged (test_workers_read_what_one_process_reads)."""
    path = sample(samples_dir, SMALL)
    stretches = len(ncu_workers.stretches(105, path.stat().st_size, 1 << 20))  # a process each
    assert stretches > 1
    for mode, readers in (("here", 1), ("workers", stretches)):
        raws = read_in_child(path, tmp_path, mode, 1 << 20).raw_metrics
        names = {name for raw in raws for name in raw}
        units = {value[1] for raw in raws for value in raw.values() if isinstance(value[1], str)}
        assert len(raws) == 105 and len(names) > 100
        assert len({id(name) for raw in raws for name in raw}) <= readers * len(names)
        assert len({id(value[1]) for raw in raws for value in raw.values() if isinstance(value[1], str)}) \
            <= readers * len(units)
