"""Damaged and extreme CSV text reports (ncu --csv, VTune, nsys stats, rocprof-compute workloads), issue 13.

Each reproducer under ../shared/repro (read in place) either exports correctly, when it is still valid
input (an `inf` metric, a 200 kB kernel name, 5000 extra columns), or is refused with one line naming
the file, the problem and the fix: never an unhandled exception, never a damaged cell read as data.
Expected values come from the CSV itself, parsed here with the csv module.
"""
import csv
import io
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import tb_hwprof
from tb_hwprof.core.errors import InputError

from conftest import repro, sample

REPO = Path(__file__).resolve().parent.parent
ESMM_CSV = "ncu/esmm_a10g_cli_metrics_ncu-csv.csv"
MINERU_STATS = "nsys/mineru_nsys_stats_stdout_2025.1.1.csv"


def csv_rows(path, **fmtparams):
    """Every row of a CSV by the csv module, its cell limit raised past the largest cell in the file."""
    old = csv.field_size_limit(Path(path).stat().st_size + 1)
    try:
        with open(path, newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f, **fmtparams))
    finally:
        csv.field_size_limit(old)


def refused(path) -> InputError:
    """The InputError reading `path` raises; it must be one line naming the file."""
    with pytest.raises(InputError) as caught:
        tb_hwprof.read(path)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message, message
    assert caught.value.fix, message  # says what to do
    assert len(message) < 600, message  # a damaged cell is never quoted whole
    return caught.value


# ---------------------------------------------------------------------------- ncu --csv: valid extremes
@pytest.mark.parametrize("name", ["min/ncu_csv_metric_inf.csv", "min/ncu_csv_metric_1e309.csv"])
def test_infinite_ncu_metric_is_kept_as_printed(tmp_path, name):
    path = repro(name)
    rows = csv_rows(path)
    infinite = [r for r in rows if math.isinf(float(r["Metric Value"].replace(",", "")))]
    assert len(infinite) == 1  # the reproducer holds one
    cell = infinite[0]
    launch, metric = int(cell["ID"]), cell["Metric Name"]
    run = tb_hwprof.load_run(tb_hwprof.export(path, tmp_path, "r"))
    assert run.raw_metrics[launch][metric][0] == cell["Metric Value"]  # shown as the CSV prints it
    assert math.isnan(run.kernels["duration_ns"][launch])  # no finite number to compute with
    assert any("infinite" in note and metric in note for note in run.notes)
    # Every other launch keeps the CSV's finite duration.
    durations = {int(r["ID"]): float(r["Metric Value"].replace(",", "")) for r in rows
                 if r["Metric Name"] == "gpu__time_duration.sum" and int(r["ID"]) != launch}
    assert {i: run.kernels["duration_ns"][i] for i in durations} == durations


def test_na_metric_exports_as_missing(samples_dir, tmp_path):
    """'n/a' is a value ncu prints (NaN); the details file writes it as JSON null (it raised 'Out of
    range float values are not JSON compliant' before)."""
    def not_available(lines):
        row = next(csv.reader([lines[2]]))
        assert row[12] == "gpu__time_duration.sum"
        row[14] = "n/a"
        out = io.StringIO()
        csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerow(row)
        return lines[:2] + [out.getvalue().rstrip("\n")] + lines[3:]
    path = _esmm_with(samples_dir, tmp_path, not_available)
    run = tb_hwprof.load_run(tb_hwprof.export(path, tmp_path / "logs", "r"))
    assert run.raw_metrics[0]["gpu__time_duration.sum"][0] is None
    assert math.isnan(run.kernels["duration_ns"][0])


def test_200k_kernel_name_is_read_whole(tmp_path):
    path = repro("min/ncu_csv_name_200k.csv")
    first_rows = {}
    for row in csv_rows(path):
        first_rows.setdefault(int(row["ID"]), row)
    long_name = first_rows[0]["Kernel Name"]
    assert len(long_name) >= 200_000
    run = tb_hwprof.load_run(tb_hwprof.export(path, tmp_path, "r"))
    assert run.kernels["demangled_name"].tolist() == [first_rows[i]["Kernel Name"] for i in sorted(first_rows)]
    # Launch 0's later rows print its usual name: each launch is read with its first row's, and the run says so.
    assert any("Kernel Name (4 row(s))" in note for note in run.notes)


# ---------------------------------------------------------------------------- ncu --csv: damage
def test_duplicated_chunk_splitting_a_row_is_refused():
    error = refused(repro("fuzz/00_crash_ValueError/esmm_a10g_cli_metrics_ncu-csv.csv"))
    assert "line 15" in error.problem


def test_huge_damaged_cells_are_refused_without_quoting_them():
    """Cells of 100 kB no longer stop the csv module; the one in a Process ID column would make an
    extra launch, so it is refused, its text cut short in the message."""
    error = refused(repro("fuzz/01_crash_Error/esmm_a10g_cli_metrics_ncu-csv.csv"))
    assert "process ID" in error.problem and "characters)" in error.problem


def _esmm_with(samples_dir, tmp_path, edit) -> Path:
    """The real esmm CSV with its lines edited by `edit(lines) -> lines`."""
    lines = sample(samples_dir, ESMM_CSV).read_text().splitlines()
    path = tmp_path / "esmm_edited.csv"
    path.write_text("\n".join(edit(lines)) + "\n")
    return path


def test_rows_repeated_word_for_word_read_once_and_noted(samples_dir, tmp_path):
    original = tb_hwprof.read(sample(samples_dir, ESMM_CSV))
    path = _esmm_with(samples_dir, tmp_path, lambda lines: lines + lines[1:4])
    profile = tb_hwprof.read(path)
    pd.testing.assert_frame_equal(profile.kernels, original.kernels)
    assert profile.raw_metrics == original.raw_metrics
    assert any(note.startswith("3 row(s) repeat an earlier row") for note in profile.notes)


def test_a_metric_repeated_with_another_value_is_refused(samples_dir, tmp_path):
    def conflicting(lines):
        row = next(csv.reader([lines[1]]))
        row[-1] = "1"  # launch 0's first metric again, another value
        out = io.StringIO()
        csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="").writerow(row)
        return lines + [out.getvalue()]
    path = _esmm_with(samples_dir, tmp_path, conflicting)
    added = len(path.read_text().splitlines())  # the line appended, the real one is line 2
    error = refused(path)
    assert error.problem.startswith(f"line {added}: ") and "again with another value" in error.problem
    assert "line 2: '32,746,880'" in error.problem


def test_a_row_whose_id_cell_is_damaged_is_refused_not_skipped(samples_dir, tmp_path):
    def damaged_id(lines):
        row = next(csv.reader([lines[7]]))
        row[0] = "x7"  # the rest of the row is intact: skipping it would drop a metric silently
        out = io.StringIO()
        csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="").writerow(row)
        return lines[:7] + [out.getvalue()] + lines[8:]
    assert refused(_esmm_with(samples_dir, tmp_path, damaged_id)).problem.startswith("line 8: ")


@pytest.mark.parametrize("column, cell", [("Device", "inf"), ("Grid Size", "(1e309, 1, 1)")])
def test_an_infinite_launch_column_is_refused(samples_dir, tmp_path, column, cell):
    """Found by mutation: an infinite device ID or grid dimension crashed (OverflowError); unlike a
    metric value it cannot be a measurement."""
    def infinite(lines):
        header = next(csv.reader([lines[0]]))
        out = io.StringIO()
        writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
        for row in csv.reader(lines[1:]):
            row[header.index(column)] = cell if row[0] == "0" else row[header.index(column)]
            writer.writerow(row)
        return lines[:1] + out.getvalue().splitlines()
    assert "infinite in the launch columns" in refused(_esmm_with(samples_dir, tmp_path, infinite)).problem


def test_a_cut_last_row_is_refused(samples_dir, tmp_path):
    """A file cut inside its last quoted cell: the csv module would read the half cell as the value."""
    path = _esmm_with(samples_dir, tmp_path, lambda lines: lines[:-1] + [lines[-1][:-5]])
    assert "unexpected end of data" in refused(path).problem


# ---------------------------------------------------------------------------- VTune
@pytest.mark.parametrize("name, column", [
    ("fuzz/23_crash_ValueError/amplxe2015_hotspots_openmp.csv", "CPU Time:Ideal"),
    ("fuzz/24_crash_ValueError/amplxe2015_hotspots_openmp.csv", "Overhead Time:Scheduling (OpenMP)"),
    ("fuzz/34_crash_ValueError/amplxe2015_hotspots_openmp.csv", "Function"),
])
def test_vtune_header_naming_a_column_twice_is_refused(name, column):
    path = repro(name)
    header = next(csv.reader(path.open(newline="")))
    assert header.count(column) == 2  # the damage, seen independently
    assert repr(column) in refused(path).problem


def test_vtune_summary_with_random_bytes_is_refused():
    """'keep 29 bytes then random': exported rc 0 before, random bytes read as a summary table."""
    path = repro("fuzz/25_crash_Error/vtune_summary_tab.csv")
    with pytest.raises(UnicodeDecodeError):
        path.read_bytes().decode("utf-8")
    assert "not UTF-8" in refused(path).problem


def test_vtune_summary_with_an_infinite_cpu_count_is_refused(vt, tmp_path):
    """Found by mutation: 'Logical CPU Count' of 1e309 crashed (OverflowError) making the CPU device."""
    real = vt / "vtune_summary_tab.csv"
    rows = list(csv.reader(real.open(newline=""), delimiter="\t"))
    count_rows = [i for i, r in enumerate(rows) if r[1:2] == ["Logical CPU Count"]]
    assert len(count_rows) == 1
    rows[count_rows[0]][2] = "1e309"
    edited = tmp_path / "vtune_summary_tab.csv"
    with edited.open("w", newline="") as f:
        csv.writer(f, delimiter="\t", lineterminator="\n").writerows(rows)
    assert "Logical CPU Count is '1e309'" in refused(edited).problem


# ---------------------------------------------------------------------------- nsys stats
def test_nsys_stats_damaged_progress_lines_are_refused_fast():
    path = repro("fuzz/26_hang_mineru/mineru_nsys_stats_stdout_2025.1.1.csv")
    started = time.monotonic()
    assert "Processing" in refused(path).problem
    assert time.monotonic() - started < 10  # was ~35 s


def test_nsys_stats_5000_extra_columns_read_fast(samples_dir, tmp_path):
    """Columns are data: the real osrt_sum block, 5000 columns wider (header and every row alike), reads
    whole and quickly, its own columns as in the real file."""
    real = sample(samples_dir, MINERU_STATS)
    extra = ",".join(f"c{i}" for i in range(5000))
    lines, in_block = [], False
    for line in real.read_text().splitlines():
        in_block = (in_block or line.startswith("Time (%)")) and bool(line.strip())
        lines.append(f"{line},{extra}" if in_block else line)
    wide = tmp_path / "wide_stats.csv"
    wide.write_text("\n".join(lines) + "\n")
    started = time.monotonic()
    table = tb_hwprof.read(wide).summaries["osrt_sum"]
    assert time.monotonic() - started < 20  # was ~35 s; ~1 s here
    narrow = tb_hwprof.read(real).summaries["osrt_sum"]
    assert table.shape == (len(narrow), len(narrow.columns) + 5000)
    pd.testing.assert_frame_equal(table[narrow.columns], narrow)
    assert table["c4999"].tolist() == ["c4999"] * len(narrow)


def test_nsys_stats_notice_with_a_comma_is_no_table(samples_dir, tmp_path):
    """'Generating SQLite file <path>' with a comma in the path: a notice, not a table of its own."""
    real = sample(samples_dir, MINERU_STATS)
    text = real.read_text()
    assert text.startswith("Generating SQLite file /data/MinerU/")
    edited = tmp_path / "stats.csv"
    edited.write_text(text.replace("/data/MinerU/", "/data/Miner,U/", 1))
    assert set(tb_hwprof.read(edited).summaries) == set(tb_hwprof.read(real).summaries) == {"osrt_sum"}


@pytest.mark.parametrize("edit, words", [
    (lambda cells: cells.__setitem__(5, "-1"), "min_ns is negative (-1)"),        # fuzz nsys_stats_csv-17
    (lambda cells: cells.__setitem__(1, "-" + cells[1]), "total_ns is negative"),
    (lambda cells: cells.__setitem__(5, str(int(cells[6]) + 1)), "exceeds max_ns"),
])
def test_nsys_stats_times_that_cannot_be_are_refused_naming_the_line(samples_dir, tmp_path, edit, words):
    """A time below zero or a minimum above its maximum is damage; the message names the file line
    the edit is on (counted here from the file itself)."""
    lines = sample(samples_dir, MINERU_STATS).read_text().split("\n")
    target = next(i for i, line in enumerate(lines) if line.startswith("Time (%)")) + 3
    cells = lines[target].split(",")
    edit(cells)
    lines[target] = ",".join(cells)
    edited = tmp_path / "stats.csv"
    edited.write_text("\n".join(lines))
    error = refused(edited)
    assert f"line {target + 1}:" in str(error) and words in str(error)


# ---------------------------------------------------------------------------- rocprof-compute workloads
@pytest.mark.parametrize("name, file, words", [
    ("fuzz/27_crash_KeyError/omniperf_vcopy_mi200", "pmc_perf.csv", "lacks column(s) 'Dispatch_ID'"),
    ("fuzz/35_crash_ValueError/omniperf_vcopy_mi200", "SQ_LEVEL_WAVES.csv", "line 2:"),
])
def test_damaged_workload_csv_is_refused_naming_it(name, file, words):
    folder = repro(name)
    error = refused(folder)
    assert error.path == str(folder / file) and words in error.problem


# ---------------------------------------------------------------------------- the CLI, end to end
@pytest.mark.parametrize("name", [
    "fuzz/00_crash_ValueError/esmm_a10g_cli_metrics_ncu-csv.csv",
    "fuzz/24_crash_ValueError/amplxe2015_hotspots_openmp.csv",
    "fuzz/35_crash_ValueError/omniperf_vcopy_mi200",
])
def test_cli_prints_one_line(tmp_path, name):
    path = repro(name)
    done = subprocess.run([sys.executable, "-m", "tb_hwprof", "export", str(path), "--logdir", str(tmp_path),
                           "--run", "r"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "Traceback" not in done.stderr, done.stderr


def test_roofline_csv_without_a_device_column_is_refused(samples_dir, tmp_path):
    """roofline.csv written with semicolons: one header cell, no device column (was a pandas IndexingError)."""
    folder = tmp_path / "omniperf_vcopy_mi200"
    shutil.copytree(sample(samples_dir, "rocprof/omniperf_vcopy_mi200/sysinfo.csv").parent, folder)
    roofline = folder / "roofline.csv"
    roofline.chmod(0o644)
    roofline.write_text(roofline.read_text().replace(",", ";"))
    error = refused(folder)
    assert error.path == str(roofline) and "'device'" in error.problem


@pytest.mark.parametrize("cell", ["nan", "1e309"])
def test_sysinfo_unit_count_that_is_no_number_is_refused(samples_dir, tmp_path, cell):
    """Found by mutation: cu_per_gpu of nan / 1e309 crashed making the device (int() of NaN / inf).
    An infinite count is a damaged cell; "nan" is what a tool writes for a field it could not query:
    read as absent (issue 27), the device then has no CU count, nothing crashes."""
    folder = tmp_path / "omniperf_vcopy_mi200"
    shutil.copytree(sample(samples_dir, "rocprof/omniperf_vcopy_mi200/sysinfo.csv").parent, folder)
    sysinfo = folder / "sysinfo.csv"
    sysinfo.chmod(0o644)
    rows = list(csv.reader(sysinfo.open(newline="")))
    rows[1][rows[0].index("cu_per_gpu")] = cell
    with sysinfo.open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    if cell == "nan":
        import tb_hwprof
        profile = tb_hwprof.read(folder)
        assert profile.devices[0].sm_count is None and len(profile.kernels) > 0
        return
    error = refused(folder)
    assert error.path == str(sysinfo) and f"cu_per_gpu is '{cell}'" in error.problem
