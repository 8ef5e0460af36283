"""Damaged Nsight Systems exports (issue 13): each reproducer in ../shared/repro is refused with one
line naming the file, what is wrong and the fix -- never an unhandled exception -- and a valid export
the reader used to refuse (sparse rowids) is read as plain SQL over the same file reads it.

What each error names (table, column, row) is checked against the file itself with plain sqlite3."""
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tb_hwprof
from tb_hwprof.core.errors import InputError
from tb_hwprof.readers.common import sqlite_columns
from tb_hwprof.readers.nvidia.nsys_timeline import CAT

from conftest import repro, sample
from support_nsys import KERNEL, RUNTIME, query

REPO = Path(__file__).resolve().parent.parent
KMEANS = "nsys/kmeans_rtx3080_openacc_2020.5.1.sqlite"
FIX = "re-export it with `nsys export --type sqlite`"
BACKENDS = [pytest.param(False, id="text")] + [pytest.param(
    True, id="native", marks=pytest.mark.skipif(not sqlite_columns.NATIVE, reason="C reader not built"))]


def refusal(path) -> str:
    """The InputError reading `path` raises: one line, naming the file, ending with the fix."""
    with pytest.raises(InputError) as caught:
        tb_hwprof.read(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path}: ") and message.endswith(FIX), message
    return caught.value.problem


def cli_refusal(path, tmp_path) -> str:
    """`tb-hwprof export` of `path`: exit 1, one line on stderr naming the file, nothing written."""
    result = subprocess.run([sys.executable, "-m", "tb_hwprof", "export", str(path), "--logdir",
                             str(tmp_path / "runs"), "--run", "r"], cwd=REPO, capture_output=True, text=True)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and str(path) in lines[0], result.stderr
    assert not (tmp_path / "runs" / "r").exists()
    return lines[0]


def copy_of(samples_dir, tmp_path, name=KMEANS) -> Path:
    path = tmp_path / Path(name).name
    shutil.copyfile(sample(samples_dir, name), path)
    path.chmod(0o644)
    return path


def edit(path, *statements):
    conn = sqlite3.connect(path)
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    conn.close()


# ------------------------------------------------------------------ the reproducers

MISSING_COLUMN = re.compile(r"table (\w+) has no (\w+) column")
BAD_VALUE = re.compile(r"unexpected NULL or non-integer value in (\w+): (\w+) \(row (-?\d+)\)")


@pytest.mark.parametrize("folder", ["03_crash_IndexError", "09_crash_OperationalError", "28_crash_OperationalError"])
def test_a_dropped_column_is_named(folder, tmp_path):
    """A required column dropped (the kernels' globalPid, the metadata's name or value): refused up
    front naming the table and the column, which the file indeed lacks."""
    path = next(repro(f"fuzz/{folder}").glob("*.sqlite"))
    table, column = MISSING_COLUMN.search(refusal(path)).groups()
    assert column not in [c for (_, c, *_) in query(path, f'PRAGMA table_info("{table}")')]
    assert f"has no {column} column" in cli_refusal(path, tmp_path)


@pytest.mark.parametrize("folder", ["04_crash_TypeError", "05_crash_TypeError", "07_crash_ValueError",
                                    "08_crash_TypeError"])
def test_swapped_pages_are_refused_naming_the_bad_value(folder, tmp_path):
    """Swapped pages put NULLs and texts where ids and names belong: the error names the table, the
    column and the row, and that cell of the file really is of another type than the column's."""
    path = next(repro(f"fuzz/{folder}").glob("*.sqlite"))
    table, column, row = BAD_VALUE.search(refusal(path)).groups()
    declared = {c: t for (_, c, t, *_) in query(path, f'PRAGMA table_info("{table}")')}
    # A full scan (+rowid: no seek): a swapped page can hold a row whose rowid another page holds too.
    kinds = {k for (k,) in query(path, f'SELECT typeof("{column}") FROM "{table}" WHERE +rowid = ?', int(row))}
    assert kinds - {declared[column].lower()}, kinds
    assert "damaged Nsight Systems export" in cli_refusal(path, tmp_path)


def test_a_malformed_database_is_one_line(tmp_path):
    """SQLite's own "database disk image is malformed", wherever in reading it comes from."""
    path = next(repro("fuzz/06_crash_DatabaseError").glob("*.sqlite"))
    with pytest.raises(sqlite3.DatabaseError, match="malformed"):  # plain sqlite3 says so too
        query(path, "PRAGMA integrity_check")
    assert refusal(path) == "the SQLite file is damaged (database disk image is malformed)"
    assert "the SQLite file is damaged" in cli_refusal(path, tmp_path)


# ------------------------------------------------------------------ a valid export read, not refused

@pytest.mark.parametrize("native", BACKENDS)
def test_sparse_rowids_are_read_like_sql_reads_them(monkeypatch, native):
    """A valid export (integrity_check ok) whose kernel rowids are 1..45 and 1000046: every kernel
    is read, with the count, times and names plain SQL gives."""
    monkeypatch.setattr(sqlite_columns, "NATIVE", native)
    path = repro("sqlite/valid_sparse_rowid.sqlite")
    assert query(path, "PRAGMA integrity_check")[0][0] == "ok"
    count, first, last = query(path, f"SELECT count(*), min(rowid), max(rowid) FROM {KERNEL}")[0]
    assert last - first + 1 > 1000 * count  # the rowids really are sparse
    profile = tb_hwprof.read(path)
    kernels = profile.kernels
    assert len(kernels) == count
    assert kernels["duration_ns"].sum() == query(path, f"SELECT sum(end - start) FROM {KERNEL}")[0][0]
    rows = query(path, f"""SELECT k.start, k.end, coalesce(nullif(s.value, ''), d.value) FROM {KERNEL} k
                           LEFT JOIN StringIds s ON s.id = k.shortName LEFT JOIN StringIds d ON d.id = k.demangledName
                           ORDER BY k.start, k.rowid""")
    assert kernels["start_ns"].tolist() == [r[0] for r in rows]
    assert kernels["end_ns"].tolist() == [r[1] for r in rows]
    assert kernels["name"].tolist() == [r[2] for r in rows]
    moved = query(path, f"SELECT start FROM {KERNEL} WHERE rowid = ?", last)[0][0]
    assert moved in kernels["start_ns"].tolist()  # the row far past the others is among them
    assert np.count_nonzero(profile.timeline.slices["cat"] == CAT["kernel"]) == count


# ------------------------------------------------------------------ damage made here, on a copy

def test_kernels_no_traced_call_launched_still_export(tmp_path, samples_dir):
    """Kernels whose launching calls were not traced (none of their correlation ids among the API
    calls) are a valid export: read, without launch flows (this was fuzz/03's IndexError)."""
    path = copy_of(samples_dir, tmp_path)
    edit(path, f"DELETE FROM {RUNTIME} WHERE correlationId IN (SELECT correlationId FROM {KERNEL})")
    profile = tb_hwprof.read(path)
    assert len(profile.kernels) == query(path, f"SELECT count(*) FROM {KERNEL}")[0][0] > 0
    kernel_slices = profile.timeline.slices["flow"][:len(profile.kernels)]
    assert (kernel_slices == -1).all()


@pytest.mark.parametrize("native", BACKENDS)
def test_text_in_a_kernel_time_names_table_column_and_row(tmp_path, samples_dir, monkeypatch, native):
    monkeypatch.setattr(sqlite_columns, "NATIVE", native)
    path = copy_of(samples_dir, tmp_path)
    edit(path, f"UPDATE {KERNEL} SET start = 'QnxKernelTrace' WHERE rowid = 4")
    assert refusal(path) == f"damaged Nsight Systems export: unexpected NULL or non-integer value in {KERNEL}: " \
                            "start (row 4)"


@pytest.mark.parametrize("table, change", [
    (KERNEL, "end = start - 5"), (KERNEL, "start = -9223372036854775808"),  # end - start overflows
    (RUNTIME, "end = 9223372036854775807"), ("CUPTI_ACTIVITY_KIND_MEMCPY", "end = start - 100"),
    ("NVTX_EVENTS", "start = end + 100")])
def test_a_negative_or_impossible_duration_is_refused(tmp_path, samples_dir, table, change):
    """An operation, call or range that ends before it starts or lasts centuries: damage, named."""
    path = copy_of(samples_dir, tmp_path, "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite")
    row = query(path, f"SELECT min(rowid) FROM {table} WHERE end IS NOT NULL AND rowid > 3")[0][0]
    edit(path, f"UPDATE {table} SET {change} WHERE rowid = {row}")
    assert refusal(path) == f"damaged Nsight Systems export: a negative or impossibly long duration in {table}: " \
                            f"end - start (row {row})"


def test_a_text_copy_size_is_refused_before_it_is_summed(tmp_path, samples_dir):
    """The memory summaries are SQL sums the reader never sees row by row: a text there (SQLite
    would sum it as 0) is caught first."""
    path = copy_of(samples_dir, tmp_path)
    edit(path, "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = 'many' WHERE rowid = 7")
    assert refusal(path) == "damaged Nsight Systems export: unexpected NULL or non-integer value in " \
                            "CUPTI_ACTIVITY_KIND_MEMCPY: bytes (row 7)"


def test_a_column_declared_with_another_type_is_named(tmp_path, samples_dir):
    path = copy_of(samples_dir, tmp_path)
    edit(path, "ALTER TABLE StringIds RENAME TO s_old", "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value REAL)",
         "INSERT INTO StringIds SELECT * FROM s_old", "DROP TABLE s_old")
    assert refusal(path).startswith("not a complete Nsight Systems export: column StringIds.value is declared REAL")


@pytest.mark.parametrize("table, column, value, bounds", [
    (KERNEL, "streamId", -5, "-1..4294967295"), (KERNEL, "deviceId", 300, "0..127"),
    ("CUPTI_ACTIVITY_KIND_MEMCPY", "contextId", 1 << 40, "-1..16777215")])
def test_an_id_no_cuda_numbering_has_is_refused(tmp_path, samples_dir, table, column, value, bounds):
    """Devices, contexts and streams are packed into one key per GPU operation: an id outside what
    CUDA numbers (what a damaged page holds) would silently merge streams, so it is refused."""
    path = copy_of(samples_dir, tmp_path)
    edit(path, f"UPDATE {table} SET {column} = {value} WHERE rowid = 3")
    assert refusal(path) == f"damaged Nsight Systems export: an id outside {bounds} in {table}: {column} (row 3)"


def test_sqlite_quoting_damaged_text_is_still_one_line(tmp_path, samples_dir):
    """SQLite's message quotes the text it could not decode (newlines and all): cut to one line."""
    path = copy_of(samples_dir, tmp_path, "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite")
    edit(path, "UPDATE NVTX_EVENTS SET text = CAST(x'0a66660aff0a' AS TEXT) || hex(randomblob(400)) "
               "WHERE rowid = (SELECT min(rowid) FROM NVTX_EVENTS WHERE text IS NOT NULL AND eventType = 59)")
    problem = refusal(path)
    assert problem.startswith("the SQLite file is damaged (NVTX_EVENTS: Could not decode") and len(problem) < 300


@pytest.mark.parametrize("table", [KERNEL, "CUPTI_ACTIVITY_KIND_MEMCPY"])
def test_text_in_a_process_id_is_refused_not_shifted_to_zero(tmp_path, samples_dir, table):
    """globalPid is shifted to a pid: done in SQL, a text there would silently become process 0."""
    path = copy_of(samples_dir, tmp_path)
    edit(path, f"UPDATE {table} SET globalPid = 'x' WHERE rowid = 2")
    assert refusal(path).endswith(f"in {table}: coalesce(globalPid, 0) (row 2)")


@pytest.mark.parametrize("column, value", [("gridX", -1), ("gridX", -(1 << 63)), ("blockZ", 0), ("gridY", 65536)])
def test_a_launch_shape_no_kernel_has_is_refused(tmp_path, samples_dir, column, value):
    """A dimension below 1 (or one whose packing leaves a dimension 0) is no CUDA launch: refused
    naming the row, never labelled as another shape."""
    path = copy_of(samples_dir, tmp_path)
    edit(path, f"UPDATE {KERNEL} SET {column} = {value} WHERE rowid = 5")
    field = column[:-1]
    assert refusal(path) == f"damaged Nsight Systems export: a launch shape no CUDA kernel has (a dimension below 1) " \
                            f"in {KERNEL}: {field}X, {field}Y, {field}Z (row 5)"


def test_a_device_id_no_gpu_has_is_refused(tmp_path, samples_dir):
    path = copy_of(samples_dir, tmp_path)  # its TARGET_INFO_GPU names the device `deviceId`
    edit(path, "UPDATE TARGET_INFO_GPU SET deviceId = 9223372036854775807 WHERE rowid = 1")
    assert refusal(path) == "damaged Nsight Systems export: an id outside 0..127 in TARGET_INFO_GPU: deviceId (row 1)"
