"""Integer columns of a SQLite table straight into numpy arrays, fast.

Python's sqlite3 makes a tuple and an int object per value: ~0.55 s for 1M rows x 4 columns.
Here SQLite itself renders each column as one comma-separated text (`group_concat`, in C, with
the GIL released) and numpy parses it (`np.fromstring`, ~1 GB/s): 14 columns of 1M kernels in
~0.9 s on one thread, ~0.5 s on two, and never a Python object per row.

Rows come in rowid order: the table is scanned `NOT INDEXED`, so a covering index can never give
one column another order than the next.  Values must be integers (coalesce NULLs away in the
expression): a NULL is skipped by group_concat and a REAL is not an integer, and both are caught
by counting.
"""
from __future__ import annotations

import sqlite3
from typing import List, Optional, Sequence

import numpy as np

# Rows per query: one column's text stays far below SQLite's 1 GB string limit.
CHUNK_ROWS = 1 << 22
# Queries run at once by readers that fetch on threads: SQLite work releases the GIL, so two
# scans use two cores.
WORKERS = 2


def _parse(text, count: int, expr: str, table: str) -> np.ndarray:
    try:  # text that is not all integers stops the parse (a DeprecationWarning, an error under -W error)
        values = np.fromstring(text, dtype=np.int64, sep=",") if text else np.zeros(0, np.int64)
    except ValueError:
        values = None
    if values is None or values.size != count:
        raise ValueError(f"unexpected NULL or non-integer value in {table}: {expr}")
    return values


def rowid_span(conn: sqlite3.Connection, table: str):
    """(first, last) rowid of `table`, or None when it is empty (both ends of its b-tree: no scan)."""
    lo, hi = conn.execute(f'SELECT min(rowid), max(rowid) FROM "{table}"').fetchone()
    return None if lo is None else (lo, hi)


def split_rows(span, parts: int) -> List[tuple]:
    """`span` cut into `parts` rowid ranges, for threads that each scan their own rows (splitting
    the columns instead would have every thread decode every row)."""
    if span is None:
        return [None]
    lo, hi = span
    step = max(-(-(hi - lo + 1) // parts), 1)
    return [(a, min(a + step - 1, hi)) for a in range(lo, hi + 1, step)]


def int_columns(conn: sqlite3.Connection, table: str, exprs: Sequence[str], where: str = "",
                rows: Optional[tuple] = None) -> List[np.ndarray]:
    """One int64 array per expression over the rows of `table` (rowid order) that `where` keeps,
    within the rowid range `rows` (first, last) when given."""
    span = rows if rows is not None else rowid_span(conn, table)
    if span is None or not exprs:
        return [np.zeros(0, np.int64) for _ in exprs]
    lo, hi = span
    aggs = ", ".join(f"group_concat({e})" for e in exprs)
    keep = f"AND ({where})" if where else ""
    pieces: List[List[np.ndarray]] = [[] for _ in exprs]
    for first in range(lo, hi + 1, CHUNK_ROWS):
        row = conn.execute(f'SELECT count(*), {aggs} FROM "{table}" NOT INDEXED '
                           f'WHERE rowid BETWEEN ? AND ? {keep}', (first, min(first + CHUNK_ROWS - 1, hi))).fetchone()
        for i, text in enumerate(row[1:]):
            pieces[i].append(_parse(text, row[0], exprs[i], table))
    return [p[0] if len(p) == 1 else np.concatenate(p) for p in pieces]


def text_column(conn: sqlite3.Connection, table: str, expr: str, where: str = "") -> List[str]:
    """The text of `expr` per row (rowid order), for tables of modest size (one Python str per row).
    Rows are joined with NUL, which a C string (what profilers write) cannot hold; NULL must be
    coalesced away in `expr`."""
    keep = f"WHERE {where}" if where else ""
    count, text = conn.execute(f'SELECT count(*), group_concat({expr}, char(0)) FROM "{table}" NOT INDEXED {keep}'
                               ).fetchone()
    values = [] if count == 0 else text.split("\0")
    if len(values) != count:
        raise ValueError(f"unexpected NULL or NUL character in {table}: {expr}")
    return values
