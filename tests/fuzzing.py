"""Fuzzing helpers (issue 13): run one export, or one read of a written run, in a forked child with a
time limit and classify what happened; deterministic mutations of real samples and of written runs.

Outcome kinds: "exported" / "loaded" (detail: the run folder), "error" (a HwprofError: its message),
"crash" (any other exception, or the child killed by a signal: type, message and traceback tail),
"hang" (no answer within the limit: the seconds waited).  A child is forked (not spawned) so the
already-imported tb_hwprof costs nothing per mutant, and it can be killed when it hangs."""
from __future__ import annotations

import csv
import dataclasses
import gzip
import io
import json
import multiprocessing
import os
import random
import resource
import shutil
import sqlite3
import time
import traceback
import zlib
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

from conftest import repro_path, required

# Per-input limit of CPU seconds: a hang is reported, not waited out.  Mutants of the small seeds
# export in well under a second, so theirs is shorter (a hang costs the whole limit).
TIME_LIMIT_S = float(os.environ.get("TB_HWPROF_FUZZ_TIMEOUT", "30"))
MUTANT_TIME_LIMIT_S = min(TIME_LIMIT_S, 15.0)
WALL_FACTOR = 4
# Mutants per reader format (the README's `pytest tests` runs the default; CI's fuzz step runs more).
MUTANTS = int(os.environ.get("TB_HWPROF_FUZZ_MUTANTS", "6"))
# Hypothesis examples per reader format (each a stack of 1-3 mutations).
EXAMPLES = int(os.environ.get("TB_HWPROF_FUZZ_EXAMPLES", str(max(2, MUTANTS // 2))))
# A mutant that inflates into a memory bomb fails its own child, not the shared machine.
CHILD_MEMORY_BYTES = 6 << 30
TRACEBACK_TAIL = 4000


@dataclasses.dataclass(frozen=True)
class Outcome:
    kind: str  # exported / loaded / error / crash / hang
    detail: str  # run folder, error message, "Type: message", or seconds waited
    error_type: str = ""
    traceback: str = ""

    def __str__(self) -> str:
        text = f"{self.kind} {self.error_type}: {self.detail}" if self.error_type else f"{self.kind}: {self.detail}"
        return f"{text}\n{self.traceback}" if self.traceback else text


def require_repro() -> Path:
    """The repro folder, or a skip (a failure under TB_HWPROF_REQUIRE_SAMPLES) when it is absent."""
    return required(repro_path(), "reproducers", "TB_HWPROF_REPRO")


# -- running one input in a child ------------------------------------------------------------------
def _classify(work: Callable[[], str], done_kind: str) -> Tuple[str, str, str, str]:
    from tb_hwprof.core.errors import HwprofError
    try:
        return done_kind, str(work()), "", ""
    except HwprofError as e:
        return "error", str(e), type(e).__name__, ""
    except BaseException as e:  # the harness records every other exception as the crash it is
        return "crash", str(e)[:500], type(e).__name__, traceback.format_exc()[-TRACEBACK_TAIL:]


def _address_space_bytes() -> int:
    """This process's virtual memory size now (/proc/self/statm, in pages)."""
    return int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _child(connection, work: Callable[[], str], done_kind: str) -> None:
    # The cap bounds what the child adds to what it inherited: a test process that has read big reports
    # can map more than CHILD_MEMORY_BYTES already, and under an absolute cap the child could not even
    # start a thread (ThreadPoolExecutor waited forever: a "hang" at 0 s of CPU).
    limit = _address_space_bytes() + CHILD_MEMORY_BYTES
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    connection.send(_classify(work, done_kind))
    connection.close()


def _cpu_seconds(pid: int) -> float:
    """CPU time a process has used (user + system, from /proc: fields 14 and 15 of its stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:  # it has just exited
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _answer_or_hang(receive, child, limit_s: float) -> Outcome:
    """Wait for the child's answer.  A hang is limit_s of the child's own CPU time (so 8 engineers on 2
    cores do not make a slow export look hung), or WALL_FACTOR times that on the clock (a child stuck
    waiting uses no CPU)."""
    started = time.monotonic()
    while not receive.poll(0.2):
        cpu, wall = _cpu_seconds(child.pid), time.monotonic() - started
        if cpu > limit_s or wall > limit_s * WALL_FACTOR:
            return Outcome("hang", f"{cpu:.1f} s of CPU, {wall:.1f} s on the clock")
    return Outcome(*receive.recv())


def in_child(work: Callable[[], str], done_kind: str, limit_s: float = TIME_LIMIT_S) -> Outcome:
    """work() run in a forked child: its Outcome, "hang" when it has not answered within limit_s."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(send, work, done_kind), daemon=True)
    child.start()
    send.close()
    try:
        return _answer_or_hang(receive, child, limit_s)
    except EOFError:  # the child died without answering (a signal, e.g. a segfault in a C reader)
        child.join()
        return Outcome("crash", f"child died with exit code {child.exitcode}", "ChildDied")
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receive.close()


class UnreadableRun(Exception):
    """A run just written that the logdir reader refuses: a bug of ours, not damage in the input."""


class DamageReadAsData(Exception):
    """An export whose tables hold what no profiler writes (a negative duration): damage read as data."""


# Lengths of time: never negative in what a profiler writes.
LENGTH_COLUMNS = {"duration_ns", "total_ns", "avg_ns", "min_ns", "max_ns", "med_ns", "stddev_ns", "gpu_time_ns",
                  "gpu_span_ns"}


def impossible_values(profile) -> List[str]:
    """What no profiler writes, in a Profile's kernels and summary tables: negative lengths of time,
    rows that end before they start."""
    import pandas as pd
    found = []
    for name, table in {"kernels": profile.kernels, **profile.summaries}.items():
        for column in sorted(LENGTH_COLUMNS & set(table.columns)):
            values = pd.to_numeric(table[column], errors="coerce")
            if (values < 0).any():
                found.append(f"{name}.{column} is negative (min {values.min():g})")
        if {"start_ns", "end_ns"} <= set(table.columns):
            start, end = (pd.to_numeric(table[c], errors="coerce") for c in ("start_ns", "end_ns"))
            if (end < start).any():
                found.append(f"{name} has rows that end before they start")
    return found


def _export_and_load(path: Path, logdir: Path) -> str:
    import tb_hwprof
    from tb_hwprof.core.errors import HwprofError
    run_dir = tb_hwprof.export(path, logdir, "r")
    try:
        check_run(run_dir)
    except HwprofError as e:
        raise UnreadableRun(f"the run written from {path.name} does not read back: {e}") from e
    impossible = impossible_values(tb_hwprof.load_run(run_dir))
    if impossible:
        raise DamageReadAsData(f"{path.name} exported with {'; '.join(impossible)}")
    return str(run_dir)


def export_outcome(path: Path, logdir: Path, limit_s: float = TIME_LIMIT_S) -> Outcome:
    """tb_hwprof.export of `path` into `logdir` as run "r" and, when it exported, check_run of the run
    it wrote (a written run that does not read back is a crash of ours, reported as such) and a look
    for values no profiler writes (DamageReadAsData)."""
    return in_child(lambda: _export_and_load(path, logdir), "exported", limit_s)


def check_run(run_dir) -> str:
    """Everything that reads a written run: load_run, load_analysis and, for a trace, its rendering."""
    import tb_hwprof
    from tb_hwprof.logdir import run_trace
    tb_hwprof.load_run(run_dir)
    tb_hwprof.load_analysis(run_dir)
    if any(Path(run_dir).glob("plugins/tb_hwprof/timeline_index*")):
        run_trace.render(Path(run_dir), out=Path(run_dir).parent / "rendered.json.gz")
    return str(run_dir)


def load_outcome(run_dir: Path, limit_s: float = TIME_LIMIT_S) -> Outcome:
    return in_child(lambda: check_run(run_dir), "loaded", limit_s)


# What breaks a terminal line: line ends (str.splitlines' set) and other control characters (an escape
# sequence from a damaged file's bytes would be run by the user's terminal).
LINE_BREAKING = frozenset([chr(c) for c in range(32) if c != 9] + ["\x7f", "\x85", "\u2028", "\u2029"])


def problems_with(outcome: Outcome, path: Path, done_kind: str = "exported") -> List[str]:
    """What is wrong with an outcome: anything but success or a one-line error naming the input."""
    if outcome.kind == done_kind:
        return []
    if outcome.kind != "error":
        return [str(outcome)]
    found = []
    if any(c in LINE_BREAKING for c in outcome.detail.strip()):
        found.append(f"error message is not one plain line: {outcome.detail!r}")
    if path.name not in outcome.detail:
        found.append(f"error message does not name {path.name}: {outcome.detail!r}")
    return found


# -- mutations of bytes ------------------------------------------------------------------------------
# Each mutation takes the input's bytes and a seeded Random and returns (mutated bytes, description).
def bit_flips(data: bytes, rng: random.Random):
    out = bytearray(data)
    offsets = sorted(rng.randrange(len(out)) for _ in range(rng.randint(1, 8)))
    for offset in offsets:
        out[offset] ^= 1 << rng.randrange(8)
    return bytes(out), f"bit flips at {offsets}"


def truncation(data: bytes, rng: random.Random):
    keep = rng.randrange(len(data))
    return data[:keep], f"truncated to {keep} of {len(data)} bytes"


def _span(data: bytes, rng: random.Random, most: int = 4096) -> Tuple[int, int]:
    start = rng.randrange(len(data))
    return start, min(len(data), start + rng.randint(1, most))


def chunk_duplication(data: bytes, rng: random.Random):
    start, end = _span(data, rng)
    return data[:end] + data[start:end] + data[end:], f"chunk [{start},{end}) duplicated"


def chunk_deletion(data: bytes, rng: random.Random):
    start, end = _span(data, rng)
    return data[:start] + data[end:], f"chunk [{start},{end}) deleted"


def word_overwrite(data: bytes, rng: random.Random):
    """A 32-bit field set to an extreme (a count or offset in a binary format)."""
    offset = rng.randrange(max(1, len(data) - 4))
    value = rng.choice([0, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFF])
    return data[:offset] + value.to_bytes(4, "little") + data[offset + 4:], f"u32 {value:#x} at {offset}"


BYTE_MUTATIONS = [bit_flips, truncation, chunk_duplication, chunk_deletion, word_overwrite]


# -- mutations of CSV text ---------------------------------------------------------------------------
def _csv_rows(data: bytes) -> Tuple[List[List[str]], str]:
    text = data.decode("utf-8", errors="replace")
    delimiter = "\t" if text.split("\n", 1)[0].count("\t") > text.split("\n", 1)[0].count(",") else ","
    csv.field_size_limit(1 << 30)
    return list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)), delimiter


def _csv_bytes(rows: List[List[str]], delimiter: str) -> bytes:
    out = io.StringIO()
    csv.writer(out, delimiter=delimiter, lineterminator="\n").writerows(rows)
    return out.getvalue().encode("utf-8")


def _header_row(rows: List[List[str]]) -> int:
    """The first row as wide as the widest (VTune / nsys stats files can open with a title line)."""
    widest = max(len(r) for r in rows)
    return next(i for i, r in enumerate(rows) if len(r) == widest)


def header_rename(data: bytes, rng: random.Random):
    rows, delimiter = _csv_rows(data)
    h = _header_row(rows)
    column = rng.randrange(len(rows[h]))
    new = rng.choice([rows[h][rng.randrange(len(rows[h]))], "", "x" * 20, rows[h][column].upper()])
    description = f"header column {column} {rows[h][column]!r} renamed {new!r}"
    rows[h][column] = new
    return _csv_bytes(rows, delimiter), description


def column_drop(data: bytes, rng: random.Random):
    rows, delimiter = _csv_rows(data)
    h = _header_row(rows)
    column = rng.randrange(len(rows[h]))
    description = f"column {column} {rows[h][column]!r} dropped"
    rows = [r[:column] + r[column + 1:] if i >= h else r for i, r in enumerate(rows)]
    return _csv_bytes(rows, delimiter), description


def column_duplicate(data: bytes, rng: random.Random):
    rows, delimiter = _csv_rows(data)
    h = _header_row(rows)
    column = rng.randrange(len(rows[h]))
    description = f"column {column} {rows[h][column]!r} duplicated"
    rows = [r[:column + 1] + r[column:] if i >= h and len(r) > column else r for i, r in enumerate(rows)]
    return _csv_bytes(rows, delimiter), description


HUGE_CELLS = ["1" + "0" * 40, "1e400", "-1e400", "nan", "-inf", "9" * 400, "k" * 200_000, "", "0x10", "-1"]


def huge_cells(data: bytes, rng: random.Random):
    rows, delimiter = _csv_rows(data)
    h = _header_row(rows)
    edits = []
    for _ in range(rng.randint(1, 3)):
        if len(rows) <= h + 1:
            break
        row = rng.randrange(h + 1, len(rows))
        if not rows[row]:
            continue
        column = rng.randrange(len(rows[row]))
        rows[row][column] = rng.choice(HUGE_CELLS)
        edits.append((row, column, rows[row][column][:12]))
    return _csv_bytes(rows, delimiter), f"cells set {edits}"


def extra_cells(data: bytes, rng: random.Random):
    rows, delimiter = _csv_rows(data)
    row = rng.randrange(len(rows))
    count = rng.randint(1, 50)
    rows[row] = rows[row] + ["1"] * count
    return _csv_bytes(rows, delimiter), f"{count} extra cells on row {row}"


def rows_shuffled(data: bytes, rng: random.Random):
    rows, delimiter = _csv_rows(data)
    h = _header_row(rows)
    body = rows[h + 1:]
    rng.shuffle(body)
    return _csv_bytes(rows[:h + 1] + body, delimiter), "data rows shuffled"


def delimiter_swap(data: bytes, rng: random.Random):
    rows, delimiter = _csv_rows(data)
    other = rng.choice([";", "\t", "|"] if delimiter == "," else [","])
    return _csv_bytes(rows, other), f"delimiter {delimiter!r} -> {other!r}"


CONTROL_TEXTS = ["\x1b[2J\x1b[31m", "\r", "\x00", "\u2028", "\x85", "\x07", "\x1b]0;title\x07", "\ufeff"]


def control_characters(data: bytes, rng: random.Random):
    """A header or cell carrying control characters (echoed raw, they would drive the terminal)."""
    rows, delimiter = _csv_rows(data)
    row = rng.randrange(len(rows))
    if not rows[row]:
        raise ValueError("empty row")
    column, text = rng.randrange(len(rows[row])), rng.choice(CONTROL_TEXTS)
    rows[row][column] = text + rows[row][column]
    return _csv_bytes(rows, delimiter), f"{text!r} put before row {row} cell {column}"


def row_repeats(data: bytes, rng: random.Random):
    """A data row repeated (a bigger trace of the same kernel: quadratic work shows as a hang)."""
    rows, delimiter = _csv_rows(data)
    h = _header_row(rows)
    if len(rows) <= h + 1:
        raise ValueError("no data rows")
    row, count = rng.randrange(h + 1, len(rows)), rng.choice([200, 3000])
    return _csv_bytes(rows[:row] + [rows[row]] * count + rows[row:], delimiter), f"row {row} repeated x{count}"


def wide_rows(data: bytes, rng: random.Random):
    rows, delimiter = _csv_rows(data)
    h = _header_row(rows)
    count = rng.choice([100, 2000])
    rows = [r + [f"extra{i}" if j == h else "1" for i in range(count)] if j >= h else r for j, r in enumerate(rows)]
    return _csv_bytes(rows, delimiter), f"+{count} columns"


CSV_MUTATIONS = [header_rename, column_drop, column_duplicate, huge_cells, extra_cells, bit_flips, truncation,
                 chunk_duplication, chunk_deletion, rows_shuffled, delimiter_swap, row_repeats, wide_rows,
                 control_characters]


# -- mutations of JSON -------------------------------------------------------------------------------
RETYPED = [None, True, 0, -1, 1e308, "", "x", [], {}, [1, 2], {"a": 1}, 2 ** 70]


def _json_paths(node, path=(), out=None, limit=5000) -> list:
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if path:
        out.append(path)
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in children:
        _json_paths(child, path + (key,), out, limit)
    return out


def _set(document, path, value):
    for key in path[:-1]:
        document = document[key]
    document[path[-1]] = value


def _delete(document, path):
    for key in path[:-1]:
        document = document[key]
    del document[path[-1]]


def _decoded(data: bytes):
    return json.loads(data.decode("utf-8"))


def json_retype(data: bytes, rng: random.Random):
    document = _decoded(data)
    paths = _json_paths(document)
    edits = []
    for path in rng.sample(paths, min(len(paths), rng.randint(1, 4))):
        value = rng.choice(RETYPED + [float("inf"), float("-inf"), float("nan")])
        try:
            _set(document, path, value)
        except (KeyError, IndexError, TypeError):  # an earlier edit replaced this path's parent
            continue
        edits.append((path[-3:], value))
    return json.dumps(document).encode("utf-8"), f"retyped {edits}"


def json_key_deletion(data: bytes, rng: random.Random):
    document = _decoded(data)
    paths = [p for p in _json_paths(document) if isinstance(p[-1], str)]
    deleted = []
    for path in rng.sample(paths, min(len(paths), rng.randint(1, 3))):
        try:
            _delete(document, path)
        except (KeyError, IndexError, TypeError):
            continue
        deleted.append(path[-3:])
    return json.dumps(document).encode("utf-8"), f"keys deleted {deleted}"


def json_deep_nesting(data: bytes, rng: random.Random):
    document = _decoded(data)
    path = rng.choice(_json_paths(document))
    depth = rng.choice([100, 1000, 5000])
    _set(document, path, "@@")
    text = json.dumps(document).replace('"@@"', "[" * depth + "]" * depth, 1)
    return text.encode("utf-8"), f"nesting {depth} deep at {path[-3:]}"


EVENT_FIELDS = ["ts", "dur", "ph", "pid", "tid", "name", "cat", "args", "id", "s", "BeginNs", "EndNs"]
EVENT_VALUES = RETYPED + [-1, -(2 ** 63), 2 ** 64, 1e20, "12", "", float("nan"), float("inf")]


def _events(document) -> list:
    events = document.get("traceEvents") if isinstance(document, dict) else document
    if not isinstance(events, list) or not events:
        raise ValueError("no trace events")
    return events


def json_event_fields(data: bytes, rng: random.Random):
    """The fields every trace event has (times, ids, phase, names) set to wrong types or values."""
    document = _decoded(data)
    events, edits = _events(document), []
    for _ in range(rng.randint(1, 3)):
        position, field, value = rng.randrange(len(events)), rng.choice(EVENT_FIELDS), rng.choice(EVENT_VALUES)
        if isinstance(events[position], dict):
            events[position][field] = value
            edits.append((position, field, value))
    return json.dumps(document).encode("utf-8"), f"event fields set {edits}"


JSON_MUTATIONS = [json_retype, json_event_fields, json_key_deletion, json_deep_nesting, bit_flips, truncation, chunk_duplication,
                  chunk_deletion]


# -- mutations of SQLite databases ---------------------------------------------------------------------
def _page_size(data: bytes) -> int:
    size = int.from_bytes(data[16:18], "big")
    return 65536 if size == 1 else size if size >= 512 else 4096


def page_zeroed(data: bytes, rng: random.Random):
    size = _page_size(data)
    page = rng.randrange(1, max(2, len(data) // size))
    return data[:page * size] + bytes(size) + data[(page + 1) * size:], f"page {page + 1} zeroed"


def pages_swapped(data: bytes, rng: random.Random):
    size = _page_size(data)
    pages = [data[i:i + size] for i in range(0, len(data), size)]
    a, b = rng.sample(range(1, len(pages)), 2)
    pages[a], pages[b] = pages[b], pages[a]
    return b"".join(pages), f"pages {a + 1} and {b + 1} swapped"


def _with_database(data: bytes, edit: Callable[[sqlite3.Connection], str]) -> Tuple[bytes, str]:
    """`edit` applied through sqlite3 to a private in-memory copy of the database."""
    db = sqlite3.connect(":memory:")
    try:
        db.deserialize(data)
        description = edit(db)
        db.commit()
        return db.serialize(), description
    finally:
        db.close()


def _tables(db: sqlite3.Connection) -> List[str]:
    return [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'")]


def _columns(db: sqlite3.Connection, table: str) -> List[str]:
    return [r[1] for r in db.execute(f'PRAGMA table_info("{table}")')]


def column_dropped(data: bytes, rng: random.Random):
    def edit(db):
        for table in rng.sample(_tables(db), len(_tables(db))):
            columns = _columns(db, table)
            if len(columns) > 1:
                column = rng.choice(columns)
                try:
                    db.execute(f'ALTER TABLE "{table}" DROP COLUMN "{column}"')
                except sqlite3.OperationalError:  # indexed / key columns cannot be dropped: try another
                    continue
                return f'ALTER TABLE "{table}" DROP COLUMN "{column}"'
        return "no column could be dropped"
    return _with_database(data, edit)


SQL_VALUES = ["NULL", "'text'", "x'00ff'", "9223372036854775807", "-9223372036854775808", "1e308", "-1", "0"]


def cells_retyped(data: bytes, rng: random.Random):
    def edit(db):
        tables = [t for t in _tables(db) if db.execute(f'SELECT 1 FROM "{t}" LIMIT 1').fetchone()]
        table = rng.choice(tables)
        column = rng.choice(_columns(db, table))
        value = rng.choice(SQL_VALUES)
        which = rng.choice(["all rows", "one row"])
        where = "" if which == "all rows" else f' WHERE rowid = (SELECT min(rowid) FROM "{table}")'
        try:
            db.execute(f'UPDATE "{table}" SET "{column}" = {value}{where}')
        except sqlite3.DatabaseError as e:  # a constraint refused it: the mutant is the original
            return f"UPDATE {table}.{column} refused ({e})"
        return f'UPDATE "{table}" SET "{column}" = {value} ({which})'
    return _with_database(data, edit)


def busiest_cells_retyped(data: bytes, rng: random.Random):
    """A cell of one of the tables with the most rows (kernels, API calls, ranges: the data, not the
    enums) set to a wrong type or an extreme."""
    def edit(db):
        sizes = sorted(((db.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0], t) for t in _tables(db)), reverse=True)
        rows, table = rng.choice(sizes[:6])
        if not rows:
            return f"{table} is empty"
        column, value = rng.choice(_columns(db, table)), rng.choice(SQL_VALUES)
        rowid = db.execute(f'SELECT rowid FROM "{table}" LIMIT 1 OFFSET ?', (rng.randrange(rows),)).fetchone()
        try:
            db.execute(f'UPDATE "{table}" SET "{column}" = {value} WHERE rowid = ?', rowid)
        except sqlite3.DatabaseError as e:  # a constraint refused it: the mutant is the original
            return f"UPDATE {table}.{column} refused ({e})"
        return f'UPDATE "{table}" SET "{column}" = {value} WHERE rowid = {rowid[0]}'
    return _with_database(data, edit)


def table_dropped(data: bytes, rng: random.Random):
    def edit(db):
        table = rng.choice(_tables(db))
        db.execute(f'DROP TABLE "{table}"')
        return f'DROP TABLE "{table}"'
    return _with_database(data, edit)


SQLITE_MUTATIONS = [column_dropped, cells_retyped, busiest_cells_retyped, table_dropped, page_zeroed, pages_swapped, bit_flips,
                    truncation, word_overwrite]


# -- the seeds: one or two small real samples of every reader format ---------------------------------
@dataclasses.dataclass(frozen=True)
class Seed:
    name: str  # test id
    sample: str  # relative to the samples folder: a file, or a folder (rocprof-compute workload)
    mutations: tuple
    gzipped: bool = False  # mutate the decompressed text, write it compressed again
    needs_tool: str = ""  # the program an unmutated seed needs to export (its mutants need none)


SEEDS = [
    Seed("ncu_csv", "ncu/esmm_a10g_cli_metrics_ncu-csv.csv", tuple(CSV_MUTATIONS)),
    Seed("ncu_rep", "ncu/darrenlu_rtx3050l_basic_2025.1.0.ncu-rep", tuple(BYTE_MUTATIONS)),
    Seed("ncu_rep_lakshya", "ncu/lakshya_gtx1660s_basic_2024.1.1.ncu-rep", tuple(BYTE_MUTATIONS)),
    Seed("nsys_sqlite", "nsys/kmeans_rtx3080_openacc_2020.5.1.sqlite", tuple(SQLITE_MUTATIONS)),
    Seed("nsys_sqlite_nvtx", "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite", tuple(SQLITE_MUTATIONS)),
    Seed("nsys_rep", "nsys/testcuda_rtx4060ti_2026.1.1.nsys-rep", tuple(BYTE_MUTATIONS), needs_tool="nsys"),
    Seed("nsys_stats_csv", "nsys/mineru_nsys_stats_stdout_2025.1.1.csv", tuple(CSV_MUTATIONS)),
    Seed("rocprof_v1_csv", "rocprof/v1_old_rome_omp/results.csv", tuple(CSV_MUTATIONS)),
    Seed("rocprof_v2_csv", "rocprof/v2_hip_api_trace_hiptrace.csv", tuple(CSV_MUTATIONS)),
    Seed("rocprof_v3_csv", "rocprof/v3_docs_kernel_trace_newer.csv", tuple(CSV_MUTATIONS)),
    Seed("rocprof_v3_counters", "rocprof/v3_docs_counter_collection_newer.csv", tuple(CSV_MUTATIONS)),
    Seed("rocprof_json", "rocprof/v1_old_rome_omp/results.json", tuple(JSON_MUTATIONS)),
    Seed("rocprof_db", "rocprof/v1_mi300a_vecadd/results.db", tuple(SQLITE_MUTATIONS)),
    Seed("rocpd_db", "rocprof/v3_rocpd_mi300x_ck_bmm_results.db", tuple(SQLITE_MUTATIONS)),
    Seed("rocprof_compute", "rocprof/omniperf_vcopy_mi200", tuple(CSV_MUTATIONS)),
    Seed("vtune_csv", "vtune/amplxe2015_hotspots_openmp.csv", tuple(CSV_MUTATIONS)),
    Seed("vtune_summary", "vtune/vtune_summary_tab.csv", tuple(CSV_MUTATIONS)),
    Seed("kineto_json", "torch/kineto_h100_cuda129_small.json", tuple(JSON_MUTATIONS)),
    Seed("kineto_json_gz", "torch/hta_a100_triton_kernel.json.gz", tuple(JSON_MUTATIONS), gzipped=True),
]
SEEDS_BY_NAME: Dict[str, Seed] = {s.name: s for s in SEEDS}


def mutate_bytes(data: bytes, mutation, rng: random.Random) -> Tuple[bytes, str]:
    """One mutation; a structured one that cannot parse this input falls back to bit flips."""
    if not data:  # an earlier step truncated it all: nothing left to change
        return data, f"{mutation.__name__}: nothing to mutate (empty)"
    try:
        out, description = mutation(data, rng)
    # RecursionError: a document an earlier step nested deeper than the json module decodes.
    except (ValueError, UnicodeDecodeError, IndexError, csv.Error, sqlite3.DatabaseError, RecursionError) as e:
        out, description = bit_flips(data, rng)
        return out, f"{description} ({mutation.__name__} not applicable: {type(e).__name__})"
    return out, f"{mutation.__name__}: {description}"


def _mutate_file(source: Path, target: Path, seed: Seed, steps: Sequence[Tuple[int, object]]) -> str:
    data = source.read_bytes()
    if seed.gzipped:
        data = gzip.decompress(data)
    done = []
    for mutation_index, step_seed in steps:
        data, description = mutate_bytes(data, seed.mutations[mutation_index % len(seed.mutations)],
                                         random.Random(step_seed))
        done.append(description)
    target.write_bytes(gzip.compress(data, 1) if seed.gzipped else data)
    return "; then ".join(done)


def write_mutant(samples: Path, seed: Seed, steps: Sequence[Tuple[int, object]], folder: Path) -> Tuple[Path, str]:
    """The seed's sample with `steps` applied in turn, each (mutation index, random seed), written under
    `folder` with the sample's own name: (its path, what was done).  Of a workload folder, one CSV
    (picked by the first step's seed) is mutated and the rest copied as they are."""
    source = samples / seed.sample
    target = folder / source.name
    folder.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target)
        inner = random.Random(steps[0][1]).choice(sorted(p.name for p in source.glob("*.csv")))
        return target, f"{inner}: " + _mutate_file(source / inner, target / inner, seed, steps)
    return target, _mutate_file(source, target, seed, steps)


def numbered_mutant(seed: Seed, index: int) -> List[Tuple[int, str]]:
    """Mutant `index` of a seed: the mutations taken round-robin from a place of the seed's own (a few
    mutants per seed still cover every kind across seeds), its parameters seeded by a string (the same
    on every machine, whatever PYTHONHASHSEED)."""
    return [((zlib.crc32(seed.name.encode()) + index) % len(seed.mutations), f"{seed.name}:{index}")]


_warm = False


def warm_up(samples: Path) -> None:
    """Import what an export imports, once, in this process: forked children then start warm (an
    export of a small sample in a cold child spends ~1 s importing)."""
    global _warm
    if _warm:
        return
    import tempfile
    import tb_hwprof
    from tb_hwprof.logdir import reader, run_trace, writer  # noqa: F401
    from tb_hwprof.readers import reader_modules
    reader_modules()
    with tempfile.TemporaryDirectory() as logdir:
        for sample in ("ncu/esmm_a10g_cli_metrics_ncu-csv.csv", "nsys/kmeans_rtx3080_openacc_2020.5.1.sqlite",
                       "torch/kineto_h100_cuda129_small.json"):
            if (samples / sample).is_file():
                check_run(tb_hwprof.export(samples / sample, logdir, Path(sample).stem))
    _warm = True


# -- damaged runs ------------------------------------------------------------------------------------
def _rewrite_json(path: Path, rng: random.Random, mutation) -> str:
    raw = path.read_bytes()
    zipped = path.name.endswith(".gz")
    out, description = mutate_bytes(gzip.decompress(raw) if zipped else raw, mutation, rng)
    path.write_bytes(gzip.compress(out, 1) if zipped else out)
    return description


def damage_run(run_dir: Path, rng: random.Random, index: int) -> str:
    """One file of a written run's assets damaged: truncated, flipped, JSON retyped, emptied, deleted,
    replaced by a gzip of garbage."""
    files = sorted(p for p in (run_dir / "plugins" / "tb_hwprof").rglob("*") if p.is_file())
    path = files[rng.randrange(len(files))]
    name = path.relative_to(run_dir).as_posix()
    kinds = ["truncate", "bit flips", "json", "json keys", "empty", "delete", "garbage gzip"]
    kind = kinds[index % len(kinds)]
    is_json = path.name.endswith((".json", ".json.gz"))
    if kind == "delete":
        path.unlink()
        return f"{name} deleted"
    if kind == "empty":
        path.write_bytes(b"")
        return f"{name} emptied"
    if kind == "garbage gzip":
        path.write_bytes(gzip.compress(bytes(rng.randrange(256) for _ in range(200))))
        return f"{name} replaced by a gzip of random bytes"
    if kind in ("json", "json keys") and is_json:
        return f"{name}: " + _rewrite_json(path, rng, json_retype if kind == "json" else json_key_deletion)
    out, description = (truncation if kind == "truncate" else bit_flips)(path.read_bytes(), rng)
    path.write_bytes(out)
    return f"{name}: {description}"
