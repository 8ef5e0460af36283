"""A job exported on a real Dask cluster (issue 14): a `dask scheduler` and two `dask worker`
processes on 127.0.0.1 (distributed's own console-script modules), `tb-hwprof export --scheduler`
as a subprocess on HTA's real 2-rank capture; the ranks must have run on those workers (each
rank's worker address, recorded by the task in the job's notes, is one the scheduler lists), and
every process is shut down at the end."""
import gzip
import json
import os
import signal
import subprocess
import sys

import pytest

from tb_hwprof.app import jobs
from tb_hwprof.logdir.reader import read_manifest

from conftest import REPO, free_port, sample

distributed = pytest.importorskip("distributed")

RANKS = ["torch/hta_sampled_2rank_rank0.json.gz", "torch/hta_sampled_2rank_rank1.json.gz"]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
START_TIMEOUT_S, EXPORT_TIMEOUT_S = 90, 180


def start(args, log):
    return subprocess.Popen([sys.executable, "-m", *args], stdout=log, stderr=subprocess.STDOUT, env=ENV,
                            start_new_session=True)  # its own group: teardown ends it and anything it started


def stop(process) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=20)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(scheduler address, the workers' addresses as the scheduler lists them); torn down after."""
    logs = tmp_path_factory.mktemp("dask")
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    processes = [start(["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port),
                        "--no-dashboard"], open(logs / "scheduler.log", "w"))]
    try:
        for i in range(2):
            processes.append(start(["distributed.cli.dask_worker", address, "--nthreads", "1", "--no-nanny",
                                    "--no-dashboard", "--host", "127.0.0.1", "--name", f"w{i}"],
                                   open(logs / f"worker{i}.log", "w")))
        with distributed.Client(address, timeout=START_TIMEOUT_S) as client:
            client.wait_for_workers(2, timeout=START_TIMEOUT_S)
            workers = set(client.scheduler_info()["workers"])
        yield address, workers
    finally:
        for process in reversed(processes):
            stop(process)
        assert all(p.poll() is not None for p in processes)  # nothing leaked


def export(args, env=None):
    return subprocess.run([sys.executable, "-m", "tb_hwprof", "export", *map(str, args)], capture_output=True,
                          text=True, env=env or ENV, timeout=EXPORT_TIMEOUT_S, cwd=REPO)


def workers_in_notes(job_dir) -> set:
    notes = read_manifest(job_dir)["notes"]
    return {n.split(" exported on ")[1].split(" in ")[0] for n in notes if " exported on " in n}


def raw_info(path) -> dict:
    with gzip.open(path) as f:
        return json.load(f)["distributedInfo"]


def test_export_through_scheduler_runs_the_ranks_on_its_workers(cluster, samples_dir, tmp_path):
    address, workers = cluster
    files = [sample(samples_dir, name) for name in RANKS]
    done = export([*files, "--logdir", tmp_path, "--run", "job", "--scheduler", address])
    assert done.returncode == 0, done.stderr
    ran_on = workers_in_notes(tmp_path / "job")
    assert ran_on and ran_on <= workers and jobs.IN_PROCESS_WORKER not in ran_on
    for path in files:  # progress per rank on the terminal, naming the worker
        rank = raw_info(path)["rank"]
        assert any(line.startswith("[") and f"rank {rank}: {path} exported on tcp://127.0.0.1:" in line
                   for line in done.stderr.splitlines()), done.stderr
        assert (tmp_path / "job" / f"rank_{rank}" / "plugins" / "tb_hwprof" / "profile.json").is_file()


def test_the_scheduler_comes_from_the_environment_too(cluster, samples_dir, tmp_path):
    address, workers = cluster
    files = [sample(samples_dir, name) for name in RANKS]
    done = export([*files, "--logdir", tmp_path, "--run", "job", "--ranks"], env={**ENV, jobs.SCHEDULER_ENV: address})
    assert done.returncode == 0, done.stderr
    assert workers_in_notes(tmp_path / "job") <= workers


def test_an_unreachable_scheduler_is_one_line(samples_dir, tmp_path, monkeypatch):
    from tb_hwprof.core.errors import HwprofError
    monkeypatch.setattr(jobs, "CONNECT_TIMEOUT", "2s")
    address = f"tcp://127.0.0.1:{free_port()}"
    with pytest.raises(HwprofError, match=f"^cannot reach the Dask scheduler at {address} .* or --scheduler none$"):
        jobs.export_job([sample(samples_dir, name) for name in RANKS], tmp_path / "logs", "job", scheduler=address)
    assert not (tmp_path / "logs" / "job").exists()


def test_a_local_cluster_exports_each_rank_on_a_worker_process(samples_dir, tmp_path, monkeypatch):
    """The default: a local cluster started for the job (its workers forked from a fork server,
    jobs.WORKER_START), each rank exported on one of its worker processes, not in this process;
    each rank's run counts the kernels its raw trace has."""
    monkeypatch.delenv(jobs.SCHEDULER_ENV, raising=False)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    files = [sample(samples_dir, name) for name in RANKS]
    jobs.export_job(files, tmp_path, "job", workers=2)
    ran_on = workers_in_notes(tmp_path / "job")
    assert ran_on and all(w.startswith("tcp://127.0.0.1:") for w in ran_on)
    for path in files:
        with gzip.open(path) as f:
            raw = json.load(f)
        kernels = sum(1 for e in raw["traceEvents"] if e.get("cat") == "kernel")
        assert read_manifest(tmp_path / "job" / f"rank_{raw['distributedInfo']['rank']}")["kernel_count"] == kernels


UNGUARDED_SCRIPT = """
import sys
from tb_hwprof.app.jobs import export_job
export_job(sys.argv[1:3], sys.argv[3], "job", workers=1)
"""


def test_a_script_without_a_main_guard_gets_the_fix_not_a_worker_traceback(samples_dir, tmp_path):
    """A script calling export_job at its top level: the local cluster's worker imports it again (as
    multiprocessing does), and that import's call must neither start a job of its own nor leave the
    parent with Dask's "Nanny failed to start": the script fails with one line saying how to mend it,
    and nothing is written."""
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED_SCRIPT)
    logdir = tmp_path / "logs"
    env = {key: value for key, value in ENV.items() if key != jobs.SCHEDULER_ENV}
    done = subprocess.run([sys.executable, str(script), *(sample(samples_dir, name) for name in RANKS), str(logdir)],
                          capture_output=True, text=True, env=env, timeout=EXPORT_TIMEOUT_S, cwd=tmp_path)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("tb_hwprof.core.errors.HwprofError: the local Dask cluster's workers did not start"), last
    assert 'under `if __name__ == "__main__":`' in last and 'scheduler="none"' in last
    # The worker's import of the script stopped at once with the same fix, before any lock or staging.
    assert "export_job called while a worker process imported the main script" in done.stderr
    assert "RunBusy" not in done.stderr
    assert not logdir.exists()


def test_importing_the_main_script_is_false_in_an_ordinary_call():
    assert not jobs.importing_the_main_script()
