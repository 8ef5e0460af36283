"""A big Nsight Compute report read by short-lived worker processes, a stretch of launches each.

ncu_report keeps every launch it was asked for in memory until the process ends (~11 MB a launch
of the 136 MB H200 report, whatever is released or reloaded), and the code it disassembles for a
SASS lookup too (~30 MB a kernel).  Read in one process, a report costs ~5.5x its size in memory
and more with each launch.  Here each stretch of launches is read in a process of its own that
exits when done, so the memory held at once is that of the stretches being read (two at a time:
both cores work), not the report's: what a 1 GB report needs is bounded.  (It is also the only way
to read a second report right: see ncu_rep._READ_HERE.)

  1. launches: each worker reads its stretch as ncu_launches.read_launches does in one process,
     with the hotspots' SASS left for step 2;
  2. SASS: each kernel's code (mangled name) is disassembled once for the whole report, in the
     launch that reads it first (as in one process), by workers of SASS_KERNELS_PER_WORKER kernels
     at most, WORKERS at once.

The workers are forked (ForkServer): one process, `python -m tb_hwprof.readers.nvidia.ncu_workers
--serve`, imports ncu_report, loads the report and reads its first launch once, then forks a child
per request, which starts with all of that done and shared.  A fresh process paid it each time:
~0.8 s of CPU and ~190 MB of its own memory a stretch of the H200 report (1.4 s -> 0.55 s, 373 ->
~180 MB unique).  ncu_report holds no file open between calls (each read opens the report anew), so
the children share no file offset.  Where the server cannot start or dies, the requests it had not
answered go to fresh workers as before.

A fresh worker is `python -m tb_hwprof.readers.nvidia.ncu_workers`: its request comes pickled on
stdin, its answer goes pickled into the file the request names; it imports ncu_report before
anything else, and no pandas.  The server's requests come framed (an 8-byte length, then the
pickle); it answers each with a line "id exit-status" once its child has ended.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import pickle
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

# Imported first in a worker: Nsight Compute's own ncu_report copy crashes once pyarrow is loaded.
from .ncu_launches import (DamagedLaunch, Launches, import_ncu_report, instruction_text, library_call,
                           library_stderr, read_launches)
from ...core.progress import tell  # noqa: E402  (after ncu_report's module, as above)
from ...core.scratch import new_scratch_folder  # noqa: E402

WORKERS = 2  # stretch workers at once: one per core of the machines this is measured on
STRETCH_BYTES = 36 << 20  # of report file per stretch worker at most: ~200 MB of ncu_report memory at ~5.5x
# A report over STRETCH_BYTES * this is read in this many stretches, bigger ones: every stretch
# pays a worker's start (the interpreter, ncu_report, the report's index: ~0.5 s for 1 GB).  The H200
# report x8 (1 GB, 464 launches) read alone: 28 stretches 21.4 s, 16 17.6 s, 8 15.9 s (the bare loop
# 14.8 s); exported in 8: 16.5-16.9 s vs the bare loop's 15.8-16.3 s (1.04x; 1.17x in 16), tree peak
# 1,667 MB (1,266 MB in 16; the bare loop 5,067 MB).  stretch_bytes_for keeps the memory bound.
STRETCHES_OF_A_BIG_REPORT = 8
IN_PROCESS_BELOW = 48 << 20  # smaller reports are read in the exporting process (no worker start-up)
# Kernels disassembled per SASS worker at most: ~40 MB a kernel (its launch and its code).  The
# kernels are shared out among at least WORKERS workers, run WORKERS at once: a worker's second is
# mostly its start, the report's index and each kernel's first launch and disassembly (~0.08 s a
# kernel), so one worker for all 15 kernels of the H200 report kept a core idle for ~1 s.  Two at
# once: export 3.9-4.0 -> 3.2-3.4 s (2.25x -> 1.81x the bare loop), tree peak 705 -> 854 MB (0.93x
# -> 1.12x; the stretches' workers are gone by then).
SASS_KERNELS_PER_WORKER = 16
WORKER_COMMAND = [sys.executable, "-m", __name__]


class WorkerFailed(Exception):
    """A worker process ended without an answer (str: how, in words)."""


def stretches(launches: int, file_bytes: int, stretch_bytes: Optional[int] = None) -> List[Tuple[int, Optional[int]]]:
    """[(first, last)] launch ids of each worker's stretch, launches shared evenly (a report's launches
    are about equally big); the last stretch is open (None): it also reads launches the library
    gives beyond those the container declares."""
    # The fewest stretches of at most stretch_bytes each, in a multiple of WORKERS so that every round
    # keeps each core busy: 32 MB stretches of the H200 report were 5, and ran in 3 rounds, the last
    # alone (1.73 s); 4 of 34 MB run in 2.
    wanted = -(-max(file_bytes, 1) // (stretch_bytes or STRETCH_BYTES))
    count = min(max(launches, 1), -(-wanted // WORKERS) * WORKERS)
    bounds = sorted({i * launches // count for i in range(count)})
    return [(first, bounds[i + 1] if i + 1 < len(bounds) else None) for i, first in enumerate(bounds)]


def stretch_bytes_for(file_bytes: int, available: Optional[int] = None) -> int:
    """Report bytes per stretch: STRETCH_BYTES, or a big report's share of STRETCHES_OF_A_BIG_REPORT;
    never so much that the WORKERS workers at once (~5.5x their stretch each) would need more than
    about a third of the memory available (available: bytes, else MemAvailable where the system
    tells it), nor less than STRETCH_BYTES."""
    wanted = max(STRETCH_BYTES, file_bytes // STRETCHES_OF_A_BIG_REPORT)
    available = available_memory() if available is None else available
    if available:
        wanted = min(wanted, max(STRETCH_BYTES, available // (16 * WORKERS)))
    return wanted


def available_memory() -> Optional[int]:
    """MemAvailable of /proc/meminfo in bytes (None elsewhere)."""
    try:
        with open("/proc/meminfo") as f:
            return next((int(line.split()[1]) << 10 for line in f if line.startswith("MemAvailable:")), None)
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------- the parent's side

def can_start() -> bool:
    """Whether this process can start a worker: an embedding without a Python executable (sys.executable
    empty) reads in its own process, as before the workers."""
    return bool(WORKER_COMMAND and WORKER_COMMAND[0])


def _python_path() -> str:
    """The exporting process' module path, so a worker imports the same tb_hwprof and ncu_report."""
    return os.pathsep.join(p for p in sys.path if p)


def _worker_env() -> dict:
    return {**os.environ, "PYTHONPATH": _python_path()}


def run_worker(request: dict, server: Optional["ForkServer"] = None) -> dict:
    """Run `request` in a child of `server` (when there is one and it still forks), else in a fresh
    worker; its answer, or WorkerFailed when it died without one."""
    if server is not None:
        try:
            return server.answer(request)
        except ServerGone:
            pass  # a fresh worker reads it below
    with tempfile.TemporaryDirectory(prefix="tb-hwprof-ncu-", dir=server and server.folder) as tmp:
        answer = Path(tmp) / "answer.pickle"
        done = subprocess.run(WORKER_COMMAND, input=pickle.dumps({**request, "answer": str(answer)}),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_worker_env())
        return _answer(done.returncode, answer, done.stderr)


def _answer(returncode: int, answer: Path, stderr: bytes) -> dict:
    """The answer a worker left in `answer`; WorkerFailed (how it ended, its last stderr line) without one."""
    if returncode != 0 or not answer.exists():
        said = stderr.decode("utf-8", "replace").strip().splitlines()
        how = f"signal {-returncode}" if returncode < 0 else f"exit status {returncode}"
        raise WorkerFailed(f"{how}{': ' + said[-1][:200] if said else ''}")
    with open(answer, "rb") as f:
        return pickle.load(f)


class ServerGone(Exception):
    """The fork server ended (or never started) before answering a request."""


class ForkServer:
    """The parent's side of a fork server (the module's docstring) for one report: answer() sends a
    request and waits for its child's answer; requests may come from several threads."""

    def __init__(self, path: Path):
        self._lock = threading.Lock()
        self._waiting: Dict[int, list] = {}  # request id -> [Event, exit status (None: not forked, or gone)]
        self._ids = itertools.count()
        self._gone = False
        self._asked = False  # whether a request was sent
        self._refused = False  # whether it would not fork a request
        self._said = tempfile.TemporaryFile()  # the server's own stderr: why it ended, if it did
        # The children's answers: a folder named for this process, which the next export removes if
        # this one is killed (an answer is tens of MB).
        self.folder = new_scratch_folder("ncu")
        try:
            self._proc = subprocess.Popen(WORKER_COMMAND + ["--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=self._said, env=_worker_env())
            self._send({"path": str(path)})
        except OSError:
            self._gone = True
            return
        threading.Thread(target=self._listen, name="tb-hwprof-ncu-server", daemon=True).start()

    def _send(self, message: dict) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        self._proc.stdin.write(len(data).to_bytes(8, "little") + data)
        self._proc.stdin.flush()

    def _listen(self) -> None:
        for line in self._proc.stdout:
            key, status = line.split()
            with self._lock:
                slot = self._waiting.pop(int(key), None)
            if slot is not None:
                if status == b"-":  # not forked: a fresh worker reads it
                    self._refused = True
                else:
                    slot[1] = int(status)
                slot[0].set()
        with self._lock:  # the server ended: whoever still waits is told so
            self._gone = True
            for slot in self._waiting.values():
                slot[0].set()
            self._waiting.clear()

    def answer(self, request: dict) -> dict:
        """The answer of a child to `request`: WorkerFailed where it died without one, ServerGone where
        the server ended first or would not fork."""
        slot = [threading.Event(), None]
        with self._lock:
            if self._gone:
                raise ServerGone()
            key = next(self._ids)
            self._waiting[key] = slot
            self._asked = True
            answer, stderr = self.folder / f"{key}.pickle", self.folder / f"{key}.stderr"
            try:
                self._send({"id": key, "request": {**request, "answer": str(answer), "stderr": str(stderr)}})
            except OSError:  # its input closed: it ended
                self._waiting.pop(key, None)
                self._gone = True
                raise ServerGone() from None
        slot[0].wait()
        if slot[1] is None:
            raise ServerGone()
        try:
            return _answer(slot[1], answer, stderr.read_bytes() if stderr.exists() else b"")
        finally:
            for path in (answer, stderr):
                path.unlink(missing_ok=True)

    def why_not_forked(self) -> Optional[str]:
        """None where every request so far was forked; else why some were not (the server ended: its
        last stderr line; or it runs a thread)."""
        if self._refused:
            return "Nsight Compute's library runs a thread in it, forking is unsafe"
        if not self._gone:
            return None
        self._said.seek(0)
        lines = self._said.read().decode("utf-8", "replace").strip().splitlines()
        return f"the forking worker ended early: {lines[-1][:200] if lines else 'no message'}"

    def close(self) -> None:
        """End the server: its input closed (it stops its children, if any, and exits), or, where it
        was never asked anything (the check refused the report), at once."""
        proc = getattr(self, "_proc", None)
        if proc is not None:
            if not self._asked:
                proc.kill()
            with contextlib.suppress(OSError):
                proc.stdin.close()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # busy in the library: its children stop on their own
                proc.kill()
                proc.wait()
        self._said.close()
        shutil.rmtree(self.folder, ignore_errors=True)


@contextlib.contextmanager
def fork_server(path: Path):
    """A ForkServer for the report at `path`, ended on leaving.  Started before the report is checked
    (its start, ~0.45 s, runs beside the check and the hash): until a request comes it only loads the
    report, and a report the check refuses ends it unused."""
    server = ForkServer(path)
    try:
        yield server
    finally:
        server.close()


def read_in_workers(path: Path, name_ids: dict, declared: int, lines: List[str],
                    server: "ForkServer") -> Tuple[Launches, int]:
    """(the report's Launches, the ranges the library read) read by the children of `server` (fork_server:
    the report's), or fresh workers where it is gone; the library's stderr lines are added to `lines`.
    WorkerFailed names the launches a dead worker had."""
    size = path.stat().st_size
    parts = stretches(declared, size, stretch_bytes_for(size))
    requests = [{"task": "launches", "path": str(path), "first": first, "last": last,
                 "name_ids": {k: v for k, v in name_ids.items() if k >= first and (last is None or k < last)}}
                for first, last in parts]
    tell(f"{path}: {declared} launches, read by {len(parts)} worker processes ({WORKERS} at once)")
    names = [f"launches {first}-{'end' if last is None else last - 1}" for first, last in parts]
    answers = _run_all(requests, names, server, said=lambda i: f"{path}: read {names[i]} ({i + 1}/{len(parts)})")
    for answer in answers:
        lines.extend(answer["lines"])
    launches = merge([a["launches"] for a in answers])
    ranges = answers[0]["ranges"]
    fill_sass(path, launches, lines, server)
    why = server.why_not_forked()
    if why is not None:  # read all the same, by fresh workers, only slower: said, not hidden
        tell(f"{path}: {why}; fresh worker processes read the rest")
    return launches, ranges


def _run_all(requests: List[dict], what: List[str], server: Optional[ForkServer] = None, at_once: int = WORKERS,
             said: Callable[[int], str] = lambda i: "") -> List[dict]:
    """The workers' answers, in the requests' order; said(i): the progress line once answer i is in."""
    with ThreadPoolExecutor(at_once, thread_name_prefix="tb-hwprof-ncu") as pool:
        futures = [pool.submit(run_worker, r, server) for r in requests]
        answers = []
        for i, (future, name) in enumerate(zip(futures, what)):
            try:
                answers.append(future.result())
            except WorkerFailed as e:
                raise WorkerFailed(f"Nsight Compute's reader died reading {name} ({e})") from None
            line = said(i)
            if line:
                tell(line)
    return answers


def merge(parts: List[Launches]) -> Launches:
    """One Launches of the stretches' (in report order): a range's sections are those of the first
    stretch that read them."""
    whole = Launches(count=parts[0].count if parts else 0)
    keys = set()
    for part in parts:
        whole.rows += part.rows
        whole.raws += part.raws
        whole.rules += part.rules
        whole.peaks += part.peaks
        whole.positions += part.positions
        whole.hotspots += part.hotspots
        whole.damaged.update(part.damaged)
        whole.dropped.update(part.dropped)
        fresh = [r for r in part.sections if (r["section_id"], r["part"], r["metric"]) not in keys]
        whole.sections += fresh
        keys.update((r["section_id"], r["part"], r["metric"]) for r in fresh)
    return whole


def sass_plan(launches: Launches) -> Dict[str, dict]:
    """{code: {"at": (range id, action index) of its first launch with hotspots, "addresses": every
    hotspot address of that code in the report}}."""
    where = {row["launch_id"]: (row.get("mangled_name") or "", pos) for row, pos in zip(launches.rows, launches.positions)}
    plan: Dict[str, dict] = {}
    for hot in launches.hotspots:
        code, pos = where[hot["launch_id"]]
        entry = plan.setdefault(code, {"at": pos, "addresses": set()})
        entry["addresses"].add(hot["address"])
    return plan


def fill_sass(path: Path, launches: Launches, lines: List[str], server: Optional[ForkServer] = None) -> None:
    """Look up the hotspots' SASS and source lines, each kernel disassembled once, by workers of
    SASS_KERNELS_PER_WORKER kernels at most (what they hold grows with every kernel), WORKERS at once;
    a launch with an unreadable text at one of its hotspots is damaged (as in one process)."""
    plan = sass_plan(launches)
    if not plan:
        return
    codes = sorted(plan)
    count = max(-(-len(codes) // SASS_KERNELS_PER_WORKER), min(WORKERS, len(codes)))
    shares = [codes[i::count] for i in range(count)]
    requests = [{"task": "sass", "path": str(path), "codes": {c: plan[c] for c in share}} for share in shares]
    texts: Dict[Tuple[str, int], object] = {}
    tell(f"{path}: looking up the SASS of {sum(len(p['addresses']) for p in plan.values())} hottest instructions "
         f"of {len(codes)} kernels")
    for answer in _run_all(requests, [f"the SASS of {len(s)} kernels" for s in shares], server):
        lines.extend(answer["lines"])
        texts.update(answer["texts"])
    code_of = {row["launch_id"]: row.get("mangled_name") or "" for row in launches.rows}
    damaged = {}
    for hot in launches.hotspots:
        text = texts[(code_of[hot["launch_id"]], hot["address"])]
        if isinstance(text, str):
            damaged.setdefault(hot["launch_id"], text)
        else:
            hot["sass"], hot["source_file"], hot["source_line"] = text
    if damaged:
        drop_launches(launches, damaged)


def drop_launches(launches: Launches, damaged: Dict[int, str]) -> None:
    """Move the `damaged` sound launches to launches.damaged."""
    keep = [i for i, row in enumerate(launches.rows) if row["launch_id"] not in damaged]
    for field in ("rows", "raws", "rules", "peaks", "positions"):
        values = getattr(launches, field)
        setattr(launches, field, [values[i] for i in keep])
    launches.hotspots = [h for h in launches.hotspots if h["launch_id"] not in damaged]
    for launch in damaged:
        launches.dropped.pop(launch, None)
    launches.damaged.update(damaged)


# ---------------------------------------------------------------- the worker's side

def _read_stretch(ctx, ncu_report, request: dict) -> dict:
    launches = read_launches(ctx, ncu_report, request["name_ids"], request["first"], request["last"], sass=False)
    return {"launches": launches, "ranges": ctx.num_ranges()}


def _sass_texts(ctx, request: dict) -> dict:
    """{(code, address): (SASS, source file, line), or why the text is damaged}."""
    texts = {}
    for code, entry in request["codes"].items():
        range_id, action_id = entry["at"]
        action = ctx.range_by_idx(range_id).action_by_idx(action_id)
        for address in sorted(entry["addresses"]):
            try:
                with library_call():
                    texts[(code, address)] = instruction_text(action, address)
            except DamagedLaunch as e:
                texts[(code, address)] = str(e)
    return {"texts": texts}


def work(request: dict) -> dict:
    """What a fresh worker answers to `request` (the library's stderr lines under "lines")."""
    ncu_report = import_ncu_report()
    lines: List[str] = []
    with library_stderr(lines):
        ctx = ncu_report.load_report(request["path"])
        answer = _answer_with(ctx, ncu_report, request)
    return {**answer, "lines": lines}


def _answer_with(ctx, ncu_report, request: dict) -> dict:
    if ctx is None:
        return {"launches": Launches(), "ranges": 0, "texts": {}}
    if request["task"] == "launches":
        return _read_stretch(ctx, ncu_report, request)
    return _sass_texts(ctx, request)


def _write_answer(request: dict, answer: dict) -> None:
    with open(request["answer"], "wb") as f:
        pickle.dump(answer, f, protocol=pickle.HIGHEST_PROTOCOL)


def main() -> None:
    if sys.argv[1:] == ["--serve"]:
        serve()
        return
    request = pickle.loads(sys.stdin.buffer.read())
    _write_answer(request, work(request))
    os._exit(0)  # ncu_report's many launches are not torn down one by one: the process ends here


# ---------------------------------------------------------------- the fork server's side

def _read_exactly(fd: int, size: int) -> Optional[bytes]:
    """`size` bytes of `fd`, or None at its end."""
    data = b""
    while len(data) < size:
        more = os.read(fd, size - len(data))
        if not more:
            return None
        data += more
    return data


def _read_message(fd: int = 0) -> Optional[dict]:
    head = _read_exactly(fd, 8)
    body = None if head is None else _read_exactly(fd, int.from_bytes(head, "little"))
    return None if body is None else pickle.loads(body)


def _warm_up(ctx, ncu_report) -> List[str]:
    """Read the report's first launch as a stretch's worker does, once for every child: the first
    launch a process reads costs ~0.3 s more than the others (the library's own set-up), ~120 MB that
    the children then share.  The library's stderr lines meanwhile (the child that reads launch 0
    says them with its own).  Not the disassembler's set-up (a process' first SASS lookup, ~0.5 s):
    it starts a thread, and a child forked from a process with two threads can hang on a lock the
    other held."""
    lines: List[str] = []
    if ctx is not None:
        with library_stderr(lines):
            try:
                read_launches(ctx, ncu_report, {}, 0, 1, sass=False)
            except Exception:  # noqa: BLE001 (damage: the child that reads launch 0 meets it and says so)
                pass
    return lines


def _one_thread() -> bool:
    """Whether this process runs a single thread (fork is safe); unknown (no /proc) counts as one."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return threading.active_count() == 1


def serve() -> None:
    """--serve: load the report the first message names, read its first launch, then fork a child per
    request until the input ends (the parent is done, or gone: children still running are stopped)."""
    ncu_report = import_ncu_report()
    opening = _read_message()
    if opening is None:
        return
    said = os.dup(1)  # the exit statuses' own channel: whatever else writes to stdout goes to stderr
    os.dup2(2, 1)
    loaded: List[str] = []
    with library_stderr(loaded):
        ctx = ncu_report.load_report(opening["path"])
    warmed = _warm_up(ctx, ncu_report)
    children: Dict[int, int] = {}  # pid -> request id
    reading = True
    while reading:
        ready, _, _ = select.select([0], [], [], 0.005 if children else None)
        if ready:
            message = _read_message()
            if message is None:
                reading = False
            elif not _one_thread():  # the library started a thread: this request goes to a fresh worker
                _tell_parent(said, f"{message['id']} -")
            else:
                request = message["request"]
                lines = loaded + (warmed if request["task"] == "launches" and request["first"] == 0 else [])
                children[_fork_child(ctx, ncu_report, request, lines, said)] = message["id"]
        _reap(children, said)
    for pid in children:  # the parent went away without waiting for them
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for pid in children:
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)
    os._exit(0)


def _reap(children: Dict[int, int], said: int) -> None:
    """Tell the parent of each child that ended: "id exit-status"."""
    while children:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        key = children.pop(pid, None)
        if key is not None:
            _tell_parent(said, f"{key} {os.waitstatus_to_exitcode(status)}")


def _tell_parent(said: int, line: str) -> None:
    with contextlib.suppress(BrokenPipeError):  # the parent is gone: the input's end says so next
        os.write(said, (line + "\n").encode())


def _fork_child(ctx, ncu_report, request: dict, lines: List[str], said: int) -> int:
    """Fork a child that answers `request` (the library's `lines` so far before its own)."""
    pid = os.fork()
    if pid:
        return pid
    try:  # the child: nothing of the server's pipes, its stderr into the request's file
        os.close(said)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(err, 2)
        lines = list(lines)
        with library_stderr(lines):
            answer = _answer_with(ctx, ncu_report, request)
        _write_answer(request, {**answer, "lines": lines})
        os._exit(0)
    except BaseException:  # noqa: BLE001 (a child never returns into the server's loop)
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)


if __name__ == "__main__":
    main()
