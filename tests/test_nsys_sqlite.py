"""The Nsight Systems SQLite reader against every real export in the samples (nsys 2020.5 to 2026.1).

Every figure is checked against an independent query written here with plain sqlite3 (or
the statistics module on durations fetched row by row), never against the reader's own SQL.
"""
import dataclasses
import shutil
import sqlite3
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import tb_hwprof
from tb_hwprof.analysis.summary import headline_scalars, interval_union_ns
from tb_hwprof.readers.detect import sniff
from tb_hwprof.core.errors import InputError
from tb_hwprof.readers.common import sqlite_columns
from tb_hwprof.readers.nvidia.nsys_sqlite import read_nsys_sqlite

from conftest import sample
from support_nsys import CARDIAC, DLPROF, query, tables_of

REPO = Path(__file__).resolve().parent.parent
COPY_KINDS = {1: "Host-to-Device", 2: "Device-to-Host", 8: "Device-to-Device", 10: "Peer-to-Peer"}


def analysed(profile, analysis=None):
    """Every summary table of a profile, the reader's and the analysis' (analysed now if not given)."""
    return (analysis or tb_hwprof.analyse(profile)).tables(profile)


# ------------------------------------------------------------------ every export
def test_sniffed_and_read_with_provenance(nsys_sqlite):
    assert sniff(nsys_sqlite) == "nsys-sqlite"
    profile = tb_hwprof.read(nsys_sqlite)
    assert profile.provenance.tool == "nsys"
    assert profile.provenance.source_format == "nsys-sqlite"
    meta = [t for t in ("META_DATA_EXPORT", "EXPORT_META_DATA") if t in tables_of(nsys_sqlite)]
    if meta:
        (version,) = query(nsys_sqlite, f"SELECT value FROM {meta[0]} WHERE name = 'EXPORT_PRODUCT_VERSION'")[0]
        assert profile.provenance.tool_version == version
    else:
        assert profile.provenance.tool_version == ""
        assert any("version is unknown" in n for n in profile.notes)
    assert profile.devices and profile.devices[0].name
    for device in profile.devices:
        for peak in device.peaks.values():
            assert peak.source == "datasheet" and "not measured" in peak.how


def test_kernel_rows_and_per_name_totals(nsys_sqlite):
    profile = read_nsys_sqlite(nsys_sqlite)
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables_of(nsys_sqlite):
        assert profile.kernels.empty
        return
    expected = query(nsys_sqlite, """
        SELECT d.value, count(*), sum(k.end - k.start), min(k.end - k.start), max(k.end - k.start)
        FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds d ON d.id = k.demangledName GROUP BY d.value""")
    summary = profile.summaries["cuda_gpu_kern_sum"].set_index("name")
    assert len(summary) == len(expected)
    for name, count, total, lo, hi in expected:
        row = summary.loc[name]
        assert (row["instances"], row["total_ns"], row["min_ns"], row["max_ns"]) == (count, total, lo, hi)
        durations = [d for (d,) in query(nsys_sqlite, """
            SELECT k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds d ON d.id = k.demangledName
            WHERE d.value = ?""", name)]
        assert row["med_ns"] == pytest.approx(statistics.median(durations))
        assert row["stddev_ns"] == pytest.approx(statistics.stdev(durations) if count > 1 else 0.0)
    assert summary["time_pct"].sum() == pytest.approx(100.0)
    # The per-launch table agrees with the same query.
    kernels = profile.kernels
    assert len(kernels) == sum(e[1] for e in expected)
    by_name = kernels.groupby("demangled_name")["duration_ns"].agg(["count", "sum"])
    for name, count, total, _, _ in expected:
        assert (by_name.loc[name, "count"], by_name.loc[name, "sum"]) == (count, total)
    assert (kernels["end_ns"] - kernels["start_ns"] == kernels["duration_ns"]).all()
    assert kernels["start_ns"].is_monotonic_increasing
    assert kernels["correlation_id"].notna().all() and kernels["sm_throughput_pct"].isna().all()


def test_kernel_launch_columns(nsys_sqlite):
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables_of(nsys_sqlite):
        pytest.skip("no kernels in this export")
    kernels = read_nsys_sqlite(nsys_sqlite).kernels.set_index("correlation_id")
    rows = query(nsys_sqlite, """
        SELECT k.correlationId, s.value, k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ,
               k.registersPerThread, k.staticSharedMemory + k.dynamicSharedMemory, k.streamId, k.deviceId
        FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName""")
    for corr, short, gx, gy, gz, bx, by, bz, regs, shared, stream, device in rows:
        row = kernels.loc[float(corr)]
        row = row.iloc[0] if isinstance(row, pd.DataFrame) else row
        assert row["name"] == short
        assert row["grid"] == f"({gx}, {gy}, {gz})" and row["block"] == f"({bx}, {by}, {bz})"
        assert row["grid_size"] == gx * gy * gz and row["block_size"] == bx * by * bz
        assert (row["registers_per_thread"], row["shared_mem_bytes"]) == (regs, shared)
        assert (row["stream"], row["device"]) == (stream, device)


def test_memory_operation_totals(nsys_sqlite):
    profile = read_nsys_sqlite(nsys_sqlite)
    names = tables_of(nsys_sqlite)
    if "CUPTI_ACTIVITY_KIND_MEMCPY" not in names and "CUPTI_ACTIVITY_KIND_MEMSET" not in names:
        assert "cuda_gpu_mem_time_sum" not in profile.summaries
        return
    expected = {}
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in names:
        for kind, count, total, size in query(nsys_sqlite, """
                SELECT copyKind, count(*), sum(end - start), sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY
                GROUP BY copyKind"""):
            expected[f"[CUDA memcpy {COPY_KINDS[kind]}]"] = (count, total, size)
    if "CUPTI_ACTIVITY_KIND_MEMSET" in names:
        ((count, total, size),) = query(nsys_sqlite, "SELECT count(*), sum(end - start), sum(bytes) "
                                                     "FROM CUPTI_ACTIVITY_KIND_MEMSET")
        expected["[CUDA memset]"] = (count, total, size)
    times = profile.summaries["cuda_gpu_mem_time_sum"].set_index("operation")
    sizes = profile.summaries["cuda_gpu_mem_size_sum"].set_index("operation")
    assert set(times.index) == set(sizes.index) == set(expected)
    for op, (count, total, size) in expected.items():
        assert (times.loc[op, "count"], times.loc[op, "total_ns"]) == (count, total)
        assert (sizes.loc[op, "count"], sizes.loc[op, "total_bytes"]) == (count, size)
    kinds = profile.summaries["cuda_gpu_mem_kind_sum"]
    assert kinds["total_bytes"].sum() == sum(e[2] for e in expected.values())
    assert set(kinds["src_kind"]) | set(kinds["dst_kind"]) <= {"", "Pageable", "Pinned", "Device", "Managed"}


def test_cuda_api_totals(nsys_sqlite):
    profile = read_nsys_sqlite(nsys_sqlite)
    if "CUPTI_ACTIVITY_KIND_RUNTIME" not in tables_of(nsys_sqlite):
        assert "cuda_api_sum" not in profile.summaries
        return
    api = profile.summaries["cuda_api_sum"].set_index("name")
    expected = query(nsys_sqlite, """SELECT s.value, count(*), sum(r.end - r.start), min(r.end - r.start)
                                     FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
                                     GROUP BY s.value""")
    assert len(api) == len(expected)
    for name, count, total, lo in expected:
        assert (api.loc[name, "num_calls"], api.loc[name, "total_ns"], api.loc[name, "min_ns"]) == (count, total, lo)
    assert api["total_ns"].is_monotonic_decreasing


def test_gpu_busy_is_the_union_of_gpu_operations(nsys_sqlite):
    profile = read_nsys_sqlite(nsys_sqlite)
    tables = analysed(profile)
    names = tables_of(nsys_sqlite)
    gpu_tables = [t for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                              "CUPTI_ACTIVITY_KIND_MEMSET") if t in names]
    if not gpu_tables:
        assert "gpu_activity" not in tables
        assert set(headline_scalars(profile.kernels, tables)) == {"kernel_launches"}
        return
    intervals = sorted(r for t in gpu_tables for r in query(nsys_sqlite, f"SELECT start, end FROM {t}"))
    busy, reach = 0, None
    for start, end in intervals:  # the textbook sweep, one interval at a time
        if reach is None or start > reach:
            busy += end - start
            reach = end
        elif end > reach:
            busy += end - reach
            reach = end
    activity = tables["gpu_activity"]
    assert list(activity["device"]) == [0]
    assert activity.loc[0, "busy_ns"] == busy
    api_tables = gpu_tables + (["CUPTI_ACTIVITY_KIND_RUNTIME"] if "CUPTI_ACTIVITY_KIND_RUNTIME" in names else [])
    first = min(query(nsys_sqlite, f"SELECT min(start) FROM {t}")[0][0] for t in api_tables)
    last = max(query(nsys_sqlite, f"SELECT max(end) FROM {t}")[0][0] for t in api_tables)
    assert activity.loc[0, "span_ns"] == last - first
    scalars = headline_scalars(profile.kernels, tables)
    assert scalars["gpu_busy_pct"] == pytest.approx(100.0 * busy / (last - first))
    assert scalars["gpu_idle_ms"] == pytest.approx((last - first - busy) / 1e6)
    assert 0.0 <= scalars["memcpy_share_of_busy_pct"] <= 100.0


def test_interval_union_by_hand():
    assert interval_union_ns([], []) == 0
    assert interval_union_ns([0, 5, 20, 1], [10, 8, 30, 3]) == 20  # nested and disjoint
    assert interval_union_ns([0, 10], [10, 20]) == 20  # touching
    assert interval_union_ns([30, 0], [40, 35]) == 40  # unsorted, overlapping


def test_opened_read_only_nothing_written_beside(tmp_path, samples_dir):
    src = sample(samples_dir, DLPROF)
    copy = tmp_path / "report.sqlite"
    shutil.copyfile(src, copy)
    copy.chmod(0o444)
    before = copy.read_bytes()
    read_nsys_sqlite(copy)
    assert [p.name for p in tmp_path.iterdir()] == ["report.sqlite"]
    assert copy.read_bytes() == before


# ------------------------------------------------------------------ the export without CUDA
def test_export_without_cuda_is_an_empty_profile_with_a_note(tmp_path, samples_dir):
    path = sample(samples_dir, CARDIAC)
    profile = tb_hwprof.read(path)
    assert profile.kernels.empty and profile.summaries == {}
    assert any("no CUDA trace" in n for n in profile.notes)
    assert profile.devices[0].name == "NVIDIA GeForce RTX 3060 Laptop"
    run = tb_hwprof.export(path, tmp_path, "cardiac")
    back = tb_hwprof.load_run(run)
    assert back.kernels.empty and back.notes == profile.notes


def test_cuda_tables_without_rows_give_an_empty_profile(tmp_path, samples_dir):
    path = tmp_path / "emptied.sqlite"
    shutil.copyfile(sample(samples_dir, "nsys/gpu4_t4_2022.4.2.sqlite"), path)
    conn = sqlite3.connect(path)
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_RUNTIME"):
        conn.execute(f"DELETE FROM {table}")
    conn.commit()
    conn.close()
    profile = tb_hwprof.read(path)
    assert profile.kernels.empty and profile.summaries == {}
    assert any("no kernel ran" in n for n in profile.notes)
    assert tb_hwprof.load_run(tb_hwprof.export(path, tmp_path / "runs", "emptied")).summaries == {}


# ------------------------------------------------------------------ NVTX
def nvtx_kernels_by_sql(path, where, *args):
    """(count, GPU ns) of kernels whose launching call started inside the matching ranges, same thread."""
    return query(path, f"""
        SELECT count(*), coalesce(sum(k.end - k.start), 0)
        FROM NVTX_EVENTS n
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.globalTid = n.globalTid AND r.start >= n.start AND r.start < n.end
        JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = r.correlationId
        WHERE {where}""", *args)[0]


def test_nvtx_names_from_inline_text_or_string_ids(tmp_path, samples_dir):
    """nsys stores a range's name inline (`text`) or as a StringIds id (`textId`, registered
    strings): moved to StringIds, the real ranges keep their names (an inline text and a
    StringIds one that are equal are one name), and a dangling id gives an empty name."""
    from tb_hwprof.readers.nvidia.nsys_schema import connect
    from tb_hwprof.readers.nvidia.nsys_sqlite import nvtx_ranges
    src = sample(samples_dir, DLPROF)
    path = tmp_path / "textid.sqlite"
    shutil.copyfile(src, path)
    conn = sqlite3.connect(path)
    ranges = "eventType IN (59, 60) AND end IS NOT NULL"
    rowids = [r for (r,) in conn.execute(f"SELECT rowid FROM NVTX_EVENTS WHERE {ranges} ORDER BY rowid")]
    want = {r: t for r, t in conn.execute(f"SELECT rowid, text FROM NVTX_EVENTS WHERE {ranges}")}
    base = conn.execute("SELECT max(id) FROM StringIds").fetchone()[0] + 1
    moved = rowids[1::2]  # every other range: its text registered in StringIds instead
    for i, (text,) in enumerate(conn.execute(f"SELECT DISTINCT text FROM NVTX_EVENTS WHERE rowid IN "
                                             f"({','.join(map(str, moved))})").fetchall()):
        conn.execute("INSERT INTO StringIds (id, value) VALUES (?, ?)", (base + i, text))
        conn.execute(f"UPDATE NVTX_EVENTS SET textId = ?, text = NULL WHERE text = ? AND rowid IN "
                     f"({','.join(map(str, moved))})", (base + i, text))
    conn.execute("UPDATE NVTX_EVENTS SET text = NULL, textId = 999999 WHERE rowid = ?", (rowids[0],))
    want[rowids[0]] = ""
    conn.commit()
    assert conn.execute(f"SELECT count(*) FROM NVTX_EVENTS WHERE {ranges} AND textId IS NOT NULL").fetchone()[0] \
        == len(moved) + 1
    got = nvtx_ranges(connect(path))
    assert [got["names"][i] for i in got["nid"]] == [want[r] for r in rowids]
    assert len(set(got["names"])) == got["names"].size  # one entry per distinct name
    assert got["names"].tolist() == list(dict.fromkeys(want[r] for r in rowids))  # by first appearance


def test_nvtx_projection_checked_by_hand(samples_dir):
    path = sample(samples_dir, DLPROF)
    phases = analysed(read_nsys_sqlite(path))["nvtx_phases"].set_index("name")
    conv = "aten::cudnn_convolution, seq = 0"
    count, gpu = nvtx_kernels_by_sql(path, "n.text = ?", conv)
    assert count == 23 and gpu > 0
    assert (phases.loc[conv, "kernels"], phases.loc[conv, "gpu_time_ns"]) == (count, gpu)
    # aten::conv2d also holds the bias add_ that follows the cuDNN call: its kernels are exactly those two.
    outer, add = phases.loc["aten::conv2d, seq = 0"], phases.loc["aten::add_, seq = 2"]
    assert outer["kernels"] == count + add["kernels"] == 24
    assert outer["gpu_time_ns"] == gpu + add["gpu_time_ns"]
    (cpu,) = query(path, "SELECT end - start FROM NVTX_EVENTS WHERE text = ?", conv)[0]
    assert (phases.loc[conv, "instances"], phases.loc[conv, "total_ns"]) == (1, cpu)
    # Every kernel of the capture was launched under the outermost forward ranges, none twice.
    (n_kernels, all_gpu), = query(path, "SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    tops = phases.loc[["aten::conv2d, seq = 0", "aten::conv2d, seq = 3"]]
    assert (tops["kernels"].sum(), tops["gpu_time_ns"].sum()) == (n_kernels, all_gpu)


def test_nvtx_projection_equals_a_sql_join_per_range(samples_dir):
    """Every range name of the DLProf export: kernels launched inside its instances on the same
    thread, their GPU time and span, by a plain SQL join per instance (the reader does it in numpy)."""
    path = sample(samples_dir, DLPROF)
    phases = analysed(read_nsys_sqlite(path))["nvtx_phases"].set_index("name")
    rows = query(path, """
        SELECT name, sum(k), sum(gpu), sum(coalesce(span, 0)) FROM (
            SELECT n.rowid, n.text AS name, count(k.start) AS k, coalesce(sum(k.end - k.start), 0) AS gpu,
                   max(k.end) - min(k.start) AS span
            FROM NVTX_EVENTS n
            LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
              ON r.globalTid = n.globalTid AND r.start >= n.start AND r.start < n.end
            LEFT JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = r.correlationId
            WHERE n.eventType IN (59, 60) AND n.end IS NOT NULL GROUP BY n.rowid)
        GROUP BY name""")
    assert len(rows) == len(phases) > 10
    assert sum(r[1] for r in rows) > 0
    for name, kernels, gpu, span in rows:
        assert tuple(phases.loc[name, ["kernels", "gpu_time_ns", "gpu_span_ns"]]) == (kernels, gpu, span), name


def test_nvtx_range_inserted_around_two_real_launches(tmp_path, samples_dir):
    src = sample(samples_dir, DLPROF)
    path = tmp_path / "dlprof_plus_range.sqlite"
    shutil.copyfile(src, path)
    launches = query(path, """
        SELECT r.start, r.globalTid, k.end - k.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r
        JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = r.correlationId ORDER BY r.start""")
    (a_start, tid, a_gpu), (b_start, _, b_gpu), (c_start, _, _) = launches[10:13]
    assert a_start < b_start < c_start
    conn = sqlite3.connect(path)
    insert = ("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
              "VALUES (?, ?, ?, ?, ?, 0)")
    conn.execute(insert, (a_start, b_start + 1, 59, "two launches", tid))
    conn.execute(insert, (a_start, b_start + 1, 60, "two launches start/end", tid))
    conn.execute(insert, (a_start, c_start, 59, "other thread", tid + 1))
    conn.execute(insert, (b_start + 1, c_start, 59, "no launch", tid))  # ends where the third starts
    conn.commit()
    conn.close()
    phases = analysed(read_nsys_sqlite(path))["nvtx_phases"].set_index("name")
    for name, style in (("two launches", "PushPop"), ("two launches start/end", "StartEnd")):
        row = phases.loc[name]
        assert (row["style"], row["instances"], row["total_ns"]) == (style, 1, b_start + 1 - a_start)
        assert (row["kernels"], row["gpu_time_ns"]) == (2, a_gpu + b_gpu)
    assert phases.loc["other thread", "kernels"] == 0
    assert (phases.loc["no launch", "kernels"], phases.loc["no launch", "gpu_time_ns"]) == (0, 0)


def test_counterless_analysis_equals_the_full_analysis(nsys_sqlite):
    """Launches without counters are analysed once per device and the result copied: the same
    table as the full analysis of every launch, with the absent counters kept sparse."""
    from tb_hwprof.analysis import apply_roofline, label_kernels
    from tb_hwprof.analysis.bottleneck import classify_profile
    from tb_hwprof.core.model import ALL_NAN_DTYPE, normalise_kernels
    profile = read_nsys_sqlite(nsys_sqlite)
    if profile.kernels.empty:
        pytest.skip("no kernels in this export")
    assert profile.kernels["sm_throughput_pct"].dtype == ALL_NAN_DTYPE
    dense = lambda df: df.astype({c: "float64" for c in df.columns if df[c].dtype == ALL_NAN_DTYPE})  # noqa: E731
    full = dataclasses.replace(profile, kernels=dense(profile.kernels))
    apply_roofline(full)
    classify_profile(full)
    fast = label_kernels(dataclasses.replace(profile, kernels=profile.kernels.copy())).kernels
    pd.testing.assert_frame_equal(dense(fast), normalise_kernels(full.kernels, copy=False))
    assert set(fast["bound"]) == {"unknown"} and fast["attainable_flop_per_s"].dtype == ALL_NAN_DTYPE


def test_kernel_rows_out_of_start_order_give_the_same_profile(tmp_path, samples_dir):
    """Exports store kernels in start order (the reader then skips its sort); a table stored in
    another order reads the same."""
    src = sample(samples_dir, DLPROF)
    path = tmp_path / "reversed.sqlite"
    shutil.copyfile(src, path)
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE k2 AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start DESC")
    conn.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
    conn.execute("ALTER TABLE k2 RENAME TO CUPTI_ACTIVITY_KIND_KERNEL")
    conn.commit()
    conn.close()
    assert query(path, "SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY rowid LIMIT 2")[0] > \
        query(path, "SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY rowid LIMIT 2")[1]
    a, b = read_nsys_sqlite(src), read_nsys_sqlite(path)
    pd.testing.assert_frame_equal(a.kernels, b.kernels)
    a_tables, b_tables = analysed(a), analysed(b)
    for name, table in a_tables.items():
        pd.testing.assert_frame_equal(table, b_tables[name])
    for col, values in a.timeline.slices.items():
        assert values.tolist() == b.timeline.slices[col].tolist(), col



@pytest.mark.skipif(not sqlite_columns.NATIVE, reason="C reader not built")
def test_c_reader_and_text_path_give_the_same_profile(nsys_sqlite, monkeypatch):
    """The optional C column reader and the pure-Python text path it stands in for read every
    export alike (kernels, summaries, timeline)."""
    native = read_nsys_sqlite(nsys_sqlite)
    monkeypatch.setattr(sqlite_columns, "NATIVE", False)
    text = read_nsys_sqlite(nsys_sqlite)
    pd.testing.assert_frame_equal(native.kernels, text.kernels)
    native_tables, text_tables = analysed(native), analysed(text)
    assert native_tables.keys() == text_tables.keys()
    for name, table in native_tables.items():
        pd.testing.assert_frame_equal(table, text_tables[name])
    assert (native.timeline is None) == (text.timeline is None)
    if native.timeline is not None:
        for col, values in native.timeline.slices.items():
            assert values.tolist() == text.timeline.slices[col].tolist(), col

# ------------------------------------------------------------------ export and read back
def test_cli_export_and_load_run_round_trip(tmp_path, nsys_sqlite):
    logdir = tmp_path / "runs"
    result = subprocess.run([sys.executable, "-m", "tb_hwprof", "export", str(nsys_sqlite), "--logdir", str(logdir),
                             "--run", "r", "--quiet"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    back = tb_hwprof.load_run(logdir / "r")
    fresh = read_nsys_sqlite(nsys_sqlite)
    back_tables, fresh_tables = analysed(back, tb_hwprof.load_analysis(logdir / "r")), analysed(fresh)
    assert back_tables.keys() == fresh_tables.keys()
    for name, frame in fresh_tables.items():
        pd.testing.assert_frame_equal(back_tables[name], frame)
        assert back_tables[name].attrs["units"] == frame.attrs["units"]
        assert (logdir / "r" / "plugins" / "tb_hwprof" / f"summary_{name}.json.gz").is_file()
    cols = ["name", "demangled_name", "duration_ns", "start_ns", "end_ns", "correlation_id", "grid", "stream"]
    pd.testing.assert_frame_equal(back.kernels[cols], fresh.kernels[cols], check_dtype=False)
    assert back.provenance.tool == "nsys" and back.notes == fresh.notes


# ------------------------------------------------------------------ bad input
def _cli_error(path, tmp_path):
    result = subprocess.run([sys.executable, "-m", "tb_hwprof", "export", str(path), "--logdir",
                             str(tmp_path / "runs")], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tb-hwprof: error: ")
    assert not (tmp_path / "runs").exists()
    return lines[0]


def test_other_sqlite_is_a_one_line_input_error(tmp_path):
    path = tmp_path / "notes.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER, text TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(InputError, match="not an Nsight Systems export"):
        tb_hwprof.read(path)
    assert "not an Nsight Systems export" in _cli_error(path, tmp_path)


def test_truncated_export_is_a_one_line_input_error(tmp_path, samples_dir):
    path = tmp_path / "cut.sqlite"
    path.write_bytes(sample(samples_dir, DLPROF).read_bytes()[:65536])
    with pytest.raises(InputError, match="truncated SQLite file"):
        tb_hwprof.read(path)
    assert "truncated" in _cli_error(path, tmp_path)


def _damage_page(path, page: int, page_size: int) -> None:
    """Overwrite a b-tree page's cell pointers (what a bad copy or disk does to a file)."""
    with open(path, "r+b") as f:
        f.seek((page - 1) * page_size + 8)
        f.write(b"\xff" * 64)


def test_damaged_kernel_table_is_a_one_line_input_error(tmp_path, samples_dir):
    """The kernel table's page damaged: a one-line error naming the file and the table (SQLite
    checks cell sizes: without that, 1 run in 6 went through with garbage rows); nothing written."""
    src = sample(samples_dir, DLPROF)
    path = tmp_path / "damaged.sqlite"
    shutil.copyfile(src, path)
    root = query(src, "SELECT rootpage FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'")[0][0]
    _damage_page(path, root, query(src, "PRAGMA page_size")[0][0])
    for _ in range(3):  # the same answer every time
        with pytest.raises(InputError, match=r"damaged.sqlite: the SQLite file is damaged "
                                             r"\(CUPTI_ACTIVITY_KIND_KERNEL: database disk image is malformed\)"):
            tb_hwprof.read(path)
    assert "database disk image is malformed" in _cli_error(path, tmp_path)


@pytest.mark.parametrize("native", [False, True] if sqlite_columns.NATIVE else [False])
def test_damaged_page_inside_the_kernel_rows_stops_either_column_reader(tmp_path, samples_dir, monkeypatch, native):
    """A damaged leaf page in the middle of the kernel rows (the first and last pages intact): the
    scan itself must refuse it, in the C reader and in the text path alike."""
    monkeypatch.setattr(sqlite_columns, "NATIVE", native)
    path = tmp_path / "damaged.sqlite"
    shutil.copyfile(sample(samples_dir, DLPROF), path)
    conn = sqlite3.connect(path)
    for _ in range(39):  # the 46 real rows again and again: enough for many leaf pages
        conn.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL "
                     "WHERE rowid <= 46")
    conn.commit()
    leaves = [p for (p,) in conn.execute("SELECT pageno FROM dbstat WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL' "
                                         "AND pagetype = 'leaf' ORDER BY path")]
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    assert len(leaves) > 10
    _damage_page(path, leaves[len(leaves) // 2], page_size)
    with pytest.raises(InputError, match=r"CUPTI_ACTIVITY_KIND_KERNEL: .*malformed"):
        tb_hwprof.read(path)
