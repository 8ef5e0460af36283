"""Integer columns of a SQLite table straight into numpy arrays, fast.

Python's sqlite3 makes a tuple and an int object per value: ~0.55 s for 1M rows x 4 columns.
Here SQLite itself renders each column as one comma-separated text (`group_concat`, in C, with
the GIL released) and numpy parses it (`np.fromstring`, ~1 GB/s): 14 columns of 1M kernels in
~0.9 s on one thread, ~0.5 s on two, and never a Python object per row.  Where the optional C
reader (_sqlite_scan.c) was built, `columns_in_parts` reads through it instead: each value goes
from sqlite3_column_int64 to its place, no text (~0.45 s on one thread, ~0.3 s on two).

Rows come in rowid order: the table is scanned `NOT INDEXED`, so a covering index can never give
one column another order than the next.  Queries take CHUNK_ROWS rows at a time, so their texts
stay small and the allocator hands the same memory to the next chunk (fresh memory costs a page
fault per 4 kB, which on a VM costs more than parsing it); `columns_in_parts` writes the chunks
straight into the final arrays.  Values must be integers (coalesce NULLs away in the
expression): a NULL is skipped by group_concat and a REAL is not an integer, and both are caught
by counting; either is a DamagedValues error naming the table, the expression and the row.

Rowids need not be dense: a valid table may hold rowids 1..45 and 1000046 (rows deleted, or
inserted with an explicit rowid).  Chunks step from one row to the next that exists, and
`columns_in_parts` sizes its arrays by the rowid range only where the file could hold that many
rows, by count(*) otherwise.
"""
from __future__ import annotations

import contextlib
import sqlite3
import threading
from concurrent.futures import Executor
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

try:  # the C reader (setup.py builds it where a compiler and sqlite3.h are): same columns, no text
    from . import _sqlite_scan
except ImportError:
    _sqlite_scan = None
# columns_in_parts reads through it when True (its workers scan at once: the SQLite it links must allow threads)
NATIVE = _sqlite_scan is not None and _sqlite_scan.threadsafe()

# Rows per query: one column's text is at most ~1.3 MB (SQLite's limit is 1 GB).
CHUNK_ROWS = 1 << 16
# Queries run at once by readers that fetch on threads: SQLite work releases the GIL, so two
# scans use two cores.
WORKERS = 2


# A row takes at least this many bytes of its page (a cell pointer, a header): a rowid range wider
# than the file's bytes / MIN_ROW_BYTES is sparse, and arrays are not sized by it.
MIN_ROW_BYTES = 4


class DamagedValues(ValueError):
    """A NULL, a REAL or a text where the reader needs an integer: no export writes one there, a
    damaged file (a swapped or overwritten page) does."""

    def __init__(self, table: str, expr: str, rowid: Optional[int] = None,
                 problem: str = "unexpected NULL or non-integer value"):
        self.table, self.expr, self.rowid = table, expr, rowid
        row = f" (row {rowid})" if rowid is not None else ""
        super().__init__(f"{problem} in {table}: {expr}{row}")


def first_bad_rowid(conn: sqlite3.Connection, table: str, expr: str, rows: tuple, where: str = "") -> Optional[int]:
    """The first rowid in `rows` (first, last) whose `expr` is not an integer: run only once a scan
    has failed, to name the row."""
    keep = f"AND ({where})" if where else ""
    found = _one_row(conn, table, f'SELECT rowid FROM "{table}" WHERE rowid BETWEEN ? AND ? {keep} '
                                  f"AND typeof({expr}) != 'integer' ORDER BY rowid LIMIT 1", rows)
    return found[0] if found else None


def _parse(text, count: int) -> Optional[np.ndarray]:
    """The integers of a group_concat text, None unless there are `count` of them."""
    try:  # text that is not all integers stops the parse (a DeprecationWarning, an error under -W error)
        values = np.fromstring(text, dtype=np.int64, sep=",") if text else np.zeros(0, np.int64)
    except ValueError:
        return None
    return values if values.size == count else None


def _one_row(conn: sqlite3.Connection, table: str, sql: str, params=()) -> tuple:
    """The first row of a query on `table`; SQLite's error names the table ("database disk image is
    malformed" alone does not say which part of a report is damaged)."""
    try:
        return conn.execute(sql, params).fetchone()
    except sqlite3.DatabaseError as e:
        raise sqlite3.DatabaseError(f"{table}: {e}") from None


def rowid_span(conn: sqlite3.Connection, table: str):
    """(first, last) rowid of `table`, or None when it is empty (both ends of its b-tree: no scan;
    min() and max() in one SELECT would scan the whole table, ~50 ms per 1M rows)."""
    lo, hi = _one_row(conn, table, f'SELECT (SELECT min(rowid) FROM "{table}"), (SELECT max(rowid) FROM "{table}")')
    return None if lo is None else (lo, hi)


def split_rows(span, parts: int) -> List[tuple]:
    """`span` cut into `parts` rowid ranges, for threads that each scan their own rows (splitting
    the columns instead would have every thread decode every row)."""
    if span is None:
        return [None]
    lo, hi = span
    step = max(-(-(hi - lo + 1) // parts), 1)
    return [(a, min(a + step - 1, hi)) for a in range(lo, hi + 1, step)]


def _chunk_row(conn, table: str, sql: str, exprs: Sequence[str], rows: tuple, where: str) -> tuple:
    """The chunk query's one row.  A value that is not valid UTF-8 text makes its group_concat
    undecodable: that is a non-integer value too, named as one."""
    try:
        return conn.execute(sql, rows).fetchone()
    except sqlite3.DatabaseError as e:
        if not str(e).startswith("Could not decode"):
            raise sqlite3.DatabaseError(f"{table}: {e}") from None
    for expr in exprs:
        bad = first_bad_rowid(conn, table, expr, rows, where)
        if bad is not None:
            raise DamagedValues(table, expr, bad)
    raise DamagedValues(table, ", ".join(exprs))


def _parsed(conn, table: str, exprs: Sequence[str], row: tuple, rows: tuple, where: str):
    """(rows, int64 arrays) of one chunk's (count, last rowid, group_concat texts...) over `rows`."""
    cols = [_parse(text, row[0]) for text in row[2:]]
    for expr, values in zip(exprs, cols):
        if values is None:
            raise DamagedValues(table, expr, first_bad_rowid(conn, table, expr, rows, where))
    return row[0], cols


def _chunks(conn: sqlite3.Connection, table: str, exprs: Sequence[str], span: tuple, where: str = "",
            dense: bool = True):
    """(rows, one int64 array per expression) of each chunk of `span` in turn.  Dense rowids: a
    query per CHUNK_ROWS rowids (the faster query).  Sparse ones: a query per CHUNK_ROWS rows, each
    starting after the last row of the one before, so a rowid gap of any width costs nothing."""
    first, hi = span
    keep = f"AND ({where})" if where else ""
    if dense:
        aggs = ", ".join(f"group_concat({e})" for e in exprs)
        sql = f'SELECT count(*), NULL, {aggs} FROM "{table}" NOT INDEXED WHERE rowid BETWEEN ? AND ? {keep}'
        for first in range(first, hi + 1, CHUNK_ROWS):
            rows = (first, min(first + CHUNK_ROWS - 1, hi))
            yield _parsed(conn, table, exprs, _chunk_row(conn, table, sql, exprs, rows, where), rows, where)
        return
    aggs = ", ".join(f"group_concat(c{i})" for i in range(len(exprs)))
    picked = ", ".join(f"{e} AS c{i}" for i, e in enumerate(exprs))
    sql = (f'SELECT count(*), max(r), {aggs} FROM (SELECT rowid AS r, {picked} FROM "{table}" NOT INDEXED '
           f"WHERE rowid BETWEEN ? AND ? {keep} ORDER BY rowid LIMIT {CHUNK_ROWS})")
    while True:
        row = _chunk_row(conn, table, sql, exprs, (first, hi), where)
        yield _parsed(conn, table, exprs, row, (first, hi), where)
        if row[0] < CHUNK_ROWS or row[1] >= hi:
            return
        if row[1] < first:  # a b-tree whose rowids do not rise: stepping on would never end
            raise sqlite3.DatabaseError(f"{table}: rowids out of order (damaged b-tree)")
        first = row[1] + 1


def int_columns(conn: sqlite3.Connection, table: str, exprs: Sequence[str], where: str = "",
                rows: Optional[tuple] = None, own_connection: bool = False) -> List[np.ndarray]:
    """One int64 array per expression over the rows of `table` (rowid order) that `where` keeps,
    within the rowid range `rows` (first, last) when given.  own_connection: the expressions read
    only the file's own tables (no temp table of `conn`), so the C reader may scan them on a
    connection of its own (~2x the text path: 200k NVTX ranges x 6 columns in ~0.07 s)."""
    span = rows if rows is not None else rowid_span(conn, table)
    if span is None or not exprs:
        return [np.zeros(0, np.int64) for _ in exprs]
    check_span(table, span)
    dense = is_dense(span, _file_bytes(conn))
    if own_connection and NATIVE and dense:
        out = [np.empty(span[1] - span[0] + 1, np.int64) for _ in exprs]
        n = native_fill(read_only_uri(_main_file(conn)), table, exprs, span, out, where)
        return [o if n == o.size else o[:n].copy() for o in out]
    pieces = list(zip(*(cols for _, cols in _chunks(conn, table, exprs, span, where, dense))))
    return [p[0] if len(p) == 1 else np.concatenate(p) for p in pieces]


def _main_file(conn: sqlite3.Connection) -> str:
    """The file `conn` has open as its main database."""
    return next(row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main")


def fill_columns(conn: sqlite3.Connection, table: str, exprs: Sequence[str], rows: tuple,
                 out: Sequence[np.ndarray], dense: bool = True) -> int:
    """Write `exprs` over the rows of `table` with rowid in `rows` (first, last), in rowid order, to the
    start of the `out` arrays (room for every row of the range); returns how many rows there were."""
    n = 0
    for count, cols in _chunks(conn, table, exprs, rows, dense=dense):
        for values, col in zip(out, cols):
            values[n:n + count] = col
        n += count
    return n


def native_fill(uri: str, table: str, exprs: Sequence[str], rows: tuple, out: Sequence[np.ndarray],
                where: str = "") -> int:
    """fill_columns() through the C reader, on a connection of its own to `uri` (only the rows
    `where` keeps, when given)."""
    count, bad_column, error = _sqlite_scan.fill(uri, _rowid_range_query(table, exprs, where), rows[0], rows[1], out)
    if error is not None:
        raise sqlite3.DatabaseError(f"{table}: {error}")
    if bad_column >= 0:
        conn = sqlite3.connect(uri, uri=True)
        try:
            raise DamagedValues(table, exprs[bad_column], first_bad_rowid(conn, table, exprs[bad_column], rows, where))
        finally:
            conn.close()
    return count


def _rowid_range_query(table: str, exprs: Sequence[str], where: str = "") -> str:
    """The C reader's query: `exprs` of the rows of `table` with rowid between its two parameters
    that `where` keeps, in rowid order."""
    keep = f"AND ({where})" if where else ""
    return f'SELECT {", ".join(exprs)} FROM "{table}" NOT INDEXED WHERE rowid BETWEEN ? AND ? {keep}'


def check_span(table: str, span: tuple) -> None:
    """Refuse a rowid range that ends before it starts (a damaged b-tree): arrays are sized by it."""
    if span[1] < span[0]:
        raise sqlite3.DatabaseError(f"{table}: rowids {span[0]}..{span[1]} (damaged?)")


def _file_bytes(conn: sqlite3.Connection) -> int:
    return conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]


def is_dense(span: tuple, file_bytes: int) -> bool:
    """Whether the file could hold a row at every rowid of `span` (arrays may then be sized by it)."""
    return (span[1] - span[0] + 1) * MIN_ROW_BYTES <= max(file_bytes, 4096)


def row_count(path, table: str) -> int:
    conn = open_read_only(path)
    try:
        return _one_row(conn, table, f'SELECT count(*) FROM "{table}"')[0]
    finally:
        conn.close()


def read_only_uri(path) -> str:
    """The URI that opens `path` read-only: nothing is ever created or locked next to the user's file."""
    return Path(path).resolve().as_uri() + "?mode=ro"


# Without it SQLite trusts a page's cell offsets: a damaged page then reads as whatever memory lies
# past them, a different garbage row each run (seen: 1 of 6 runs of one damaged export went through
# with made-up values), where with it every run says "database disk image is malformed".
CELL_SIZE_CHECK = "PRAGMA cell_size_check = ON"


def open_read_only(path, check_same_thread: bool = True) -> sqlite3.Connection:
    """A read-only connection to the SQLite file at `path` that refuses damaged pages."""
    conn = sqlite3.connect(read_only_uri(path), uri=True, check_same_thread=check_same_thread)
    conn.execute(CELL_SIZE_CHECK)
    return conn


class PageCheck:
    """SQLite's own check of the whole file's pages (PRAGMA quick_check: b-tree structure, page
    use, NOT NULL columns), run on a connection and thread of its own while the reader reads.  A
    page swapped in from another table can read as rows of this one without any error a scan sees
    (an Nsight Systems export with two pages swapped read other tables' rows as API calls): the
    check is what tells.  ~0.7 s of CPU for a 170 MB export, mostly beside the reader's fetch."""

    def __init__(self, path):
        self._conn = open_read_only(path, check_same_thread=False)  # made here, used and closed by the thread
        self._done = threading.Event()
        self._problem: Optional[str] = None
        self._error: Optional[BaseException] = None
        threading.Thread(target=self._run, name="tb-hwprof-quick-check", daemon=True).start()

    def _run(self) -> None:
        try:
            first = self._conn.execute("PRAGMA quick_check(1)").fetchone()
            self._problem = None if first is not None and first[0] == "ok" else str(first[0] if first else "no result")
        except sqlite3.DatabaseError as e:  # interrupted (the read failed first), or the damage itself
            self._error = e
        finally:
            self._conn.close()
            self._done.set()

    def problem(self) -> Optional[str]:
        """None when the file passed; else what SQLite found (sqlite3.DatabaseError where it could
        not finish)."""
        self._done.wait()
        if self._error is not None:
            raise sqlite3.DatabaseError(f"quick_check: {self._error}")
        return self._problem

    def cancel(self) -> None:
        """Stop the check (the read already failed and says why)."""
        if not self._done.is_set():
            try:
                self._conn.interrupt()
            except sqlite3.ProgrammingError:  # closed meanwhile
                pass
        self._done.wait()


@contextlib.contextmanager
def pages_checked(path):
    """PageCheck run beside the block that reads `path`: when the block ends without error and the
    check found damage, sqlite3.DatabaseError("PRAGMA quick_check: ...") (the readers' damage line)."""
    check = PageCheck(path)
    try:
        yield
    except BaseException:
        check.cancel()
        raise
    problem = check.problem()
    if problem:
        raise sqlite3.DatabaseError(f"PRAGMA quick_check: {problem}")


def columns_in_parts(pool: Executor, path, table: str, exprs: Sequence[str], span,
                     parts: int = WORKERS) -> Callable[[], List[np.ndarray]]:
    """Start fetching `exprs` of every row of `table` (rowid `span`: rowid_span()) in the SQLite file
    at `path` on `pool`, one rowid range per worker, each on a connection of its own and into its
    own stretch of the output arrays; returns the function that waits for them and gives the
    columns."""
    if span is None or not exprs:
        return lambda: [np.zeros(0, np.int64) for _ in exprs]
    lo = span[0]
    check_span(table, span)
    rows, dense = span[1] - lo + 1, is_dense(span, Path(path).stat().st_size)
    if not dense:  # sparse rowids: one worker, arrays as long as the table
        parts, rows = 1, row_count(path, table)
    out = [np.empty(rows, np.int64) for _ in exprs]
    uri, native = read_only_uri(path), NATIVE

    def job(first: int, last: int) -> int:
        stretch = [o[first - lo:] for o in out]
        if native:
            return native_fill(uri, table, exprs, (first, last), stretch)
        conn = open_read_only(path)
        try:
            return fill_columns(conn, table, exprs, (first, last), stretch, dense)
        finally:
            conn.close()

    started = [(first, pool.submit(job, first, last)) for first, last in split_rows(span, parts)]

    def result() -> List[np.ndarray]:
        n = 0
        for first, future in started:
            got = future.result()
            if first - lo != n:  # rowids missing before this range (deleted rows): close the gap
                for o in out:
                    o[n:n + got] = o[first - lo:first - lo + got]
            n += got
        return [o if n == o.size else o[:n].copy() for o in out]
    return result


def _native_text_codes(conn: sqlite3.Connection, table: str, expr: str, where: str):
    """text_codes() through the C reader on a connection of its own; None where the SQL path must
    answer: sparse rowids, or a NULL or text that is not UTF-8 (whose error that path words)."""
    span = rowid_span(conn, table)
    if span is None:
        return None
    check_span(table, span)
    if not is_dense(span, _file_bytes(conn)):
        return None
    sql = _rowid_range_query(table, [f"CAST({expr} AS TEXT)"], where)
    codes = np.empty(span[1] - span[0] + 1, np.int64)
    rows, values, error = _sqlite_scan.text_codes(read_only_uri(_main_file(conn)), sql, span[0], span[1], codes)
    if error is not None:
        raise sqlite3.DatabaseError(f"{table}: {error}")
    if values is None:
        return None
    return (codes if rows == codes.size else codes[:rows].copy()), values


def _texts(conn: sqlite3.Connection, table: str) -> List[str]:
    """The distinct texts text_codes() collected, in code order.  Text that is not UTF-8 cannot
    become a str: SQLite's error then names `table`, and the cursor is closed at once (an open one
    keeps the temp table locked, and dropping it would fail in its place)."""
    cur = conn.execute("SELECT tbh_text FROM temp.tbh_texts ORDER BY rowid")
    try:
        return [v for (v,) in cur]
    except sqlite3.DatabaseError as e:
        raise sqlite3.DatabaseError(f"{table}: {e}") from None
    finally:
        cur.close()


def text_codes(conn: sqlite3.Connection, table: str, expr: str, where: str = "",
               own_connection: bool = False) -> Tuple[np.ndarray, List[str]]:
    """(codes, values): per row of `table` (rowid order) that `where` keeps, the index in `values`
    of its text `expr`, each distinct text once (in order of first appearance).  No text crosses
    into Python per row: 200k NVTX ranges of ~200 characters each (69 distinct) were 41 MB of
    text, ~130 MB of Python strings at their peak.  The C reader does it in one pass where it may
    (own_connection, as int_columns'); else the distinct texts go to a temp table (the
    connection's own) and each row's code is looked up in SQL (~3x the time).  NULL must be
    coalesced away in `expr`."""
    if own_connection and NATIVE:
        found = _native_text_codes(conn, table, expr, where)
        if found is not None:
            return found
    keep = f"WHERE {where}" if where else ""
    text = f"CAST({expr} AS TEXT)"
    conn.execute("DROP TABLE IF EXISTS temp.tbh_texts")
    conn.execute("CREATE TEMP TABLE tbh_texts (tbh_text TEXT PRIMARY KEY)")  # its rowid - 1 is the code
    try:
        conn.execute(f'INSERT OR IGNORE INTO temp.tbh_texts SELECT {text} FROM "{table}" {keep}')
        codes = int_columns(conn, table, [f"(SELECT rowid - 1 FROM temp.tbh_texts WHERE tbh_text = {text})"], where)[0]
        values = _texts(conn, table)
    finally:
        conn.execute("DROP TABLE temp.tbh_texts")
    if codes.size and (codes.min() < 0 or codes.max() >= len(values)):
        raise DamagedValues(table, expr)
    return codes, values