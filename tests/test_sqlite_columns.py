"""sqlite_columns: integer and text columns fetched through group_concat equal a plain row fetch."""
import sqlite3

import numpy as np
import pytest

from tb_hwprof.readers import sqlite_columns

from test_nsys_sqlite import DLPROF, sample

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"


def _conn(path):
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


@pytest.mark.parametrize("chunk", [sqlite_columns.CHUNK_ROWS, 7])
def test_int_columns_equal_a_row_fetch(samples_dir, monkeypatch, chunk):
    monkeypatch.setattr(sqlite_columns, "CHUNK_ROWS", chunk)  # 7: many chunks, rowid gaps across them
    conn = _conn(sample(samples_dir, DLPROF))
    exprs = ["start", "end", "coalesce(streamId, -1)", "(gridX << 32) | (gridY << 16) | gridZ"]
    rows = conn.execute(f"SELECT {', '.join(exprs)} FROM {KERNEL} ORDER BY rowid").fetchall()
    got = sqlite_columns.int_columns(conn, KERNEL, exprs)
    assert len(rows) > 20
    for i, col in enumerate(got):
        assert col.dtype == np.int64 and col.tolist() == [r[i] for r in rows]
    where = "streamId = 7"
    kept = conn.execute(f"SELECT start FROM {KERNEL} WHERE {where} ORDER BY rowid").fetchall()
    assert sqlite_columns.int_columns(conn, KERNEL, ["start"], where)[0].tolist() == [r[0] for r in kept]


def test_null_or_real_values_are_refused(tmp_path):
    conn = sqlite3.connect(tmp_path / "t.sqlite")
    conn.execute("CREATE TABLE t (a INTEGER, b)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(1, 1), (None, 2.5), (3, 3)])
    for expr in ("a", "b"):
        with pytest.raises(ValueError, match=f"in t: {expr}"):
            sqlite_columns.int_columns(conn, "t", [expr])
    assert sqlite_columns.int_columns(conn, "t", ["coalesce(a, -1)"])[0].tolist() == [1, -1, 3]
    assert [c.size for c in sqlite_columns.int_columns(conn, "t", ["a"], "a > 5")] == [0]


def test_text_column_keeps_every_row(tmp_path):
    conn = sqlite3.connect(tmp_path / "t.sqlite")
    conn.execute("CREATE TABLE t (s TEXT)")
    texts = ["a,b", "", "x<y>", None, "unicode µs"]
    conn.executemany("INSERT INTO t VALUES (?)", [(t,) for t in texts])
    assert sqlite_columns.text_column(conn, "t", "coalesce(s, 'none')") == [t if t is not None else "none" for t in texts]
    with pytest.raises(ValueError):
        sqlite_columns.text_column(conn, "t", "s")
    assert sqlite_columns.text_column(conn, "t", "s", "s = 'nothing'") == []


def test_row_ranges_put_back_together_equal_the_whole(samples_dir):
    conn = _conn(sample(samples_dir, DLPROF))
    whole = sqlite_columns.int_columns(conn, KERNEL, ["start", "correlationId"])
    span = sqlite_columns.rowid_span(conn, KERNEL)
    for parts in (1, 2, 3, 1000):
        ranges = sqlite_columns.split_rows(span, parts)
        assert ranges[0][0] == span[0] and ranges[-1][1] == span[1]
        assert all(b[0] == a[1] + 1 for a, b in zip(ranges, ranges[1:]))  # contiguous, no overlap
        pieces = [sqlite_columns.int_columns(conn, KERNEL, ["start", "correlationId"], rows=r) for r in ranges]
        for i in range(2):
            assert np.concatenate([p[i] for p in pieces]).tolist() == whole[i].tolist()
    assert sqlite_columns.split_rows(None, 2) == [None]
