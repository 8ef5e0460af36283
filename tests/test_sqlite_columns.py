"""sqlite_columns: integer and text columns fetched through group_concat equal a plain row fetch."""
import sqlite3
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tb_hwprof.readers.common import sqlite_columns

from conftest import sample
from support_nsys import DLPROF

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
    # The C reader on a connection of its own (own_connection), where it is built: the same rows.
    own = sqlite_columns.int_columns(conn, KERNEL, exprs, own_connection=True)
    assert [c.tolist() for c in own] == [[r[i] for r in rows] for i in range(len(exprs))]
    own_kept = sqlite_columns.int_columns(conn, KERNEL, ["start"], where, own_connection=True)
    assert own_kept[0].tolist() == [r[0] for r in kept] and own_kept[0].flags.owndata


def test_null_or_real_values_are_refused(tmp_path):
    conn = sqlite3.connect(tmp_path / "t.sqlite")
    conn.execute("CREATE TABLE t (a INTEGER, b)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(1, 1), (None, 2.5), (3, 3)])
    for expr in ("a", "b"):
        with pytest.raises(ValueError, match=f"in t: {expr}"):
            sqlite_columns.int_columns(conn, "t", [expr])
    assert sqlite_columns.int_columns(conn, "t", ["coalesce(a, -1)"])[0].tolist() == [1, -1, 3]
    assert [c.size for c in sqlite_columns.int_columns(conn, "t", ["a"], "a > 5")] == [0]


def test_text_codes_give_every_row_its_text(tmp_path, monkeypatch):
    conn = sqlite3.connect(tmp_path / "t.sqlite")
    conn.execute("CREATE TABLE t (s TEXT, k INTEGER)")
    texts = ["a,b", "", "x<y>", None, "unicode µs", "a,b", "", None, "x<y>"]
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(t, i) for i, t in enumerate(texts)])
    monkeypatch.setattr(sqlite_columns, "CHUNK_ROWS", 2)
    codes, values = sqlite_columns.text_codes(conn, "t", "coalesce(s, 'none')")
    assert [values[c] for c in codes] == [t if t is not None else "none" for t in texts]
    assert len(values) == len(set(values)) == 5
    codes, values = sqlite_columns.text_codes(conn, "t", "s", "k % 2 = 0 AND s IS NOT NULL")
    assert [values[c] for c in codes] == [t for i, t in enumerate(texts) if i % 2 == 0 and t is not None]
    with pytest.raises(ValueError, match="NULL"):
        sqlite_columns.text_codes(conn, "t", "s")
    codes, values = sqlite_columns.text_codes(conn, "t", "s", "s = 'nothing'")
    assert codes.size == 0 and values == []
    assert "tbh_texts" not in {n for (n,) in conn.execute("SELECT name FROM temp.sqlite_master")}


@pytest.mark.skipif(not sqlite_columns.NATIVE, reason="C reader not built")
def test_native_text_codes_equal_a_row_fetch(samples_dir):
    """The C reader's one-pass codes (own_connection) on a real export's NVTX texts: each row its
    own text, the distinct texts in order of first appearance, as a plain fetch gives them."""
    conn = _conn(sample(samples_dir, DLPROF))
    expr, where = "coalesce(text, char(1))", "eventType IN (59, 60) AND end IS NOT NULL"
    rows = [t for (t,) in conn.execute(f"SELECT {expr} FROM NVTX_EVENTS WHERE {where} ORDER BY rowid")]
    codes, values = sqlite_columns.text_codes(conn, "NVTX_EVENTS", expr, where, own_connection=True)
    assert len(rows) > 50 and [values[c] for c in codes] == rows
    assert values == list(dict.fromkeys(rows))
    sql_codes, sql_values = sqlite_columns.text_codes(conn, "NVTX_EVENTS", expr, where)
    assert sql_values == values and sql_codes.tolist() == codes.tolist()


@pytest.mark.skipif(not sqlite_columns.NATIVE, reason="C reader not built")
def test_native_text_codes_leave_null_and_bad_text_to_the_sql_path(tmp_path):
    """A NULL or text that is not UTF-8 gives the SQL path's error, not a C reader's guess."""
    path = tmp_path / "t.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (s TEXT)")
    conn.executemany("INSERT INTO t VALUES (?)", [("a",), ("b",), ("a",), (None,)])
    conn.execute("INSERT INTO t VALUES (CAST(x'66ff' AS TEXT))")
    conn.commit()
    codes, values = sqlite_columns.text_codes(conn, "t", "s", "rowid < 4", own_connection=True)
    assert codes.tolist() == [0, 1, 0] and values == ["a", "b"]
    with pytest.raises(ValueError, match="NULL"):
        sqlite_columns.text_codes(conn, "t", "s", "rowid < 5", own_connection=True)
    with pytest.raises(sqlite3.DatabaseError, match="t: Could not decode"):
        sqlite_columns.text_codes(conn, "t", "s", "rowid <> 4", own_connection=True)


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


BACKENDS = [pytest.param(False, id="text")] + [pytest.param(
    True, id="native", marks=pytest.mark.skipif(not sqlite_columns.NATIVE, reason="C reader not built"))]


@pytest.mark.parametrize("native", BACKENDS)
@pytest.mark.parametrize("parts", [1, 2, 3])
def test_columns_in_parts_equal_a_row_fetch(samples_dir, monkeypatch, native, parts):
    monkeypatch.setattr(sqlite_columns, "NATIVE", native)
    monkeypatch.setattr(sqlite_columns, "CHUNK_ROWS", 5)  # the text path: many queries per part
    path = sample(samples_dir, DLPROF)
    conn = _conn(path)
    exprs = ["start", "end", "coalesce(correlationId, -1)", "(blockX << 32) | (blockY << 16) | blockZ"]
    rows = conn.execute(f"SELECT {', '.join(exprs)} FROM {KERNEL} ORDER BY rowid").fetchall()
    with ThreadPoolExecutor(2) as pool:
        got = sqlite_columns.columns_in_parts(pool, path, KERNEL, exprs, sqlite_columns.rowid_span(conn, KERNEL),
                                              parts)()
    for i, col in enumerate(got):
        assert col.dtype == np.int64 and col.tolist() == [r[i] for r in rows]


def _table_with_gaps(path):
    """A table whose rowids have holes (deleted rows) before, inside and after each part."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (a INTEGER, b INTEGER)")
    conn.executemany("INSERT INTO t (rowid, a, b) VALUES (?, ?, ?)", [(i, i * 3, -i) for i in range(1, 41)])
    conn.execute("DELETE FROM t WHERE rowid IN (2, 3, 4, 17, 18, 19, 20, 21, 22, 30)")
    conn.commit()
    return conn


@pytest.mark.parametrize("native", BACKENDS)
def test_columns_in_parts_close_rowid_gaps(tmp_path, monkeypatch, native):
    monkeypatch.setattr(sqlite_columns, "NATIVE", native)
    conn = _table_with_gaps(tmp_path / "t.sqlite")
    want = conn.execute("SELECT a, b FROM t ORDER BY rowid").fetchall()
    span = sqlite_columns.rowid_span(conn, "t")
    with ThreadPoolExecutor(2) as pool:
        for parts in (1, 2, 4):
            a, b = sqlite_columns.columns_in_parts(pool, tmp_path / "t.sqlite", "t", ["a", "b"], span, parts)()
            assert list(zip(a.tolist(), b.tolist())) == want and a.base is None  # compacted into its own array


@pytest.mark.parametrize("native", BACKENDS)
def test_columns_in_parts_refuse_null_and_real(tmp_path, monkeypatch, native):
    monkeypatch.setattr(sqlite_columns, "NATIVE", native)
    conn = sqlite3.connect(tmp_path / "t.sqlite")
    conn.execute("CREATE TABLE t (a INTEGER, b)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(1, 1), (None, 2.5), (3, 3)])
    conn.commit()
    span = sqlite_columns.rowid_span(conn, "t")
    with ThreadPoolExecutor(2) as pool:
        for expr in ("a", "b"):
            with pytest.raises(ValueError, match=f"in t: {expr}"):
                sqlite_columns.columns_in_parts(pool, tmp_path / "t.sqlite", "t", ["coalesce(a, 0)", expr], span)()
        with pytest.raises(sqlite3.DatabaseError, match="no_such_column"):
            sqlite_columns.columns_in_parts(pool, tmp_path / "t.sqlite", "t", ["no_such_column"], span)()


@pytest.mark.skipif(not sqlite_columns.NATIVE, reason="C reader not built")
def test_native_reader_checks_its_buffers(tmp_path):
    conn = _table_with_gaps(tmp_path / "t.sqlite")
    uri = sqlite_columns.read_only_uri(tmp_path / "t.sqlite")
    sql = 'SELECT a, b FROM "t" NOT INDEXED WHERE rowid BETWEEN ? AND ?'
    fill = sqlite_columns._sqlite_scan.fill
    with pytest.raises(TypeError, match="int64"):
        fill(uri, sql, 1, 40, [np.zeros(40), np.zeros(40)])  # float64
    with pytest.raises(ValueError):
        fill(uri, sql, 1, 40, np.zeros((2, 40), np.int64)[:, ::2])  # not contiguous
    assert fill(uri, sql, 1, 40, [np.zeros(40, np.int64)])[2] == "the query's column count differs from the number of buffers"
    small = [np.zeros(5, np.int64), np.zeros(5, np.int64)]
    assert fill(uri, sql, 1, 40, small) == (5, -1, "more rows than room")
    assert small[0].tolist() == [r[0] for r in conn.execute("SELECT a FROM t ORDER BY rowid LIMIT 5")]
    assert fill(sqlite_columns.read_only_uri(tmp_path / "absent.sqlite"), sql, 1, 2, small)[2] is not None


@pytest.mark.parametrize("native", BACKENDS)
def test_sparse_rowids_are_read_not_refused(tmp_path, monkeypatch, native):
    """A valid table whose rowids span far more than the file could hold rows for (rows inserted
    with explicit rowids): every row read, in rowid order, in as many queries as it has chunks
    (not one per CHUNK_ROWS rowids) and into arrays as long as the table (not the rowid range)."""
    monkeypatch.setattr(sqlite_columns, "NATIVE", native)
    monkeypatch.setattr(sqlite_columns, "CHUNK_ROWS", 3)
    path = tmp_path / "t.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (a INTEGER, b INTEGER)")
    rowids = [-(1 << 62), -5, 1, 2, 3, 4, 1000046, 1 << 40, (1 << 63) - 1]
    conn.executemany("INSERT INTO t (rowid, a, b) VALUES (?, ?, ?)", [(r, i, -i) for i, r in enumerate(rowids)])
    conn.commit()
    want = conn.execute("SELECT a, b FROM t ORDER BY rowid").fetchall()
    assert len(want) == len(rowids)
    a, b = sqlite_columns.int_columns(conn, "t", ["a", "b"])
    assert list(zip(a.tolist(), b.tolist())) == want
    span = sqlite_columns.rowid_span(conn, "t")
    assert not sqlite_columns.is_dense(span, path.stat().st_size)
    with ThreadPoolExecutor(2) as pool:
        for parts in (1, 2):
            a, b = sqlite_columns.columns_in_parts(pool, path, "t", ["a", "b"], span, parts)()
            assert list(zip(a.tolist(), b.tolist())) == want and a.size == len(rowids)
    with pytest.raises(sqlite3.DatabaseError, match="rowids 5..4"):
        sqlite_columns.check_span("t", (5, 4))


@pytest.mark.parametrize("bad", ["'QnxKernelTrace'", "CAST(x'ff00' AS TEXT)"], ids=["text", "not-utf8"])
@pytest.mark.parametrize("native", BACKENDS)
def test_a_non_integer_value_names_its_row(tmp_path, monkeypatch, native, bad):
    """A text where an integer must be (what a swapped page puts there; one that is not even UTF-8
    makes SQLite's group_concat undecodable) is refused naming the table, the expression and the
    row, however far into the table it is."""
    monkeypatch.setattr(sqlite_columns, "NATIVE", native)
    monkeypatch.setattr(sqlite_columns, "CHUNK_ROWS", 4)
    path = tmp_path / "t.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (a INTEGER, b INTEGER)")
    conn.executemany("INSERT INTO t (rowid, a, b) VALUES (?, ?, ?)", [(r, r, r) for r in range(1, 30)])
    conn.execute(f"UPDATE t SET b = {bad} WHERE rowid = 23")
    conn.commit()
    with pytest.raises(sqlite_columns.DamagedValues, match=r"in t: b \(row 23\)"):
        sqlite_columns.int_columns(conn, "t", ["a", "b"])
    with pytest.raises(sqlite_columns.DamagedValues, match=r"in t: b \(row 23\)"):
        sqlite_columns.int_columns(conn, "t", ["a", "b"], "a > 20", own_connection=True)
    with ThreadPoolExecutor(2) as pool, pytest.raises(sqlite_columns.DamagedValues, match=r"in t: b \(row 23\)"):
        sqlite_columns.columns_in_parts(pool, path, "t", ["a", "b"], sqlite_columns.rowid_span(conn, "t"))()
