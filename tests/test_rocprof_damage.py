"""Damaged rocprof inputs (issue 13): each class of damage the fuzzer found in the AMD readers is
refused with one line naming the file, the problem and the fix, or, where the input is still valid,
read.  The inputs are the reproducers in ../shared/repro, read in place."""
import csv
import json
import sqlite3
import time

import pytest

import tb_hwprof
from tb_hwprof.core.errors import InputError

from conftest import repro, sample

pytestmark = pytest.mark.fuzz

V3_TRACE = "v3_docs_kernel_trace_newer.csv"


def refused(path, *words) -> str:
    """The InputError reading `path` raises: one line, naming the file and each of `words`."""
    with pytest.raises(InputError) as caught:
        tb_hwprof.read(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(str(path) + ": ")
    assert caught.value.fix, message
    for word in words:
        assert word in message, message
    return message


# ---------------------------------------------------------------- CSV kernel traces

@pytest.mark.parametrize("case, column, columns", [("fuzz/10_crash_KeyError", "'Agent_Id'", "columns 2 and 17"),
                                                   ("fuzz/14_crash_KeyError", "'Thread_Id'", "columns 4 and 15")])
def test_a_header_naming_a_column_twice_is_refused(case, column, columns):
    refused(repro(f"{case}/{V3_TRACE}"), f"column {column} twice", columns)


def test_a_dropped_launch_shape_column_is_named():
    refused(repro(f"fuzz/29_crash_KeyError/{V3_TRACE}"), "no column 'Workgroup_Size_Y' (rocprofv3 kernel_trace.csv")


def drop_column(text: str, name: str) -> str:
    rows = list(csv.reader(text.splitlines()))
    at = rows[0].index(name)
    return "".join(",".join(f'"{c}"' for c in row[:at] + row[at + 1:]) + "\n" for row in rows)


@pytest.mark.parametrize("name, dropped", [("rocprof/v3_docs_kernel_trace_older.csv", "Agent_Id"),
                                           ("rocprof/v1_old_rome_omp/results.csv", "queue-id")])
def test_a_trace_without_a_column_its_tool_always_writes_is_refused(name, dropped, samples_dir, tmp_path):
    source = sample(samples_dir, name)
    path = tmp_path / source.name
    path.write_text(drop_column(source.read_text(), dropped))
    refused(path, f"no column {dropped!r}")


def test_a_half_written_partial_launch_shape_names_every_missing_column(samples_dir, tmp_path):
    """Grid_Size_X kept, its five siblings dropped: the check names all five."""
    source = sample(samples_dir, f"rocprof/{V3_TRACE}")
    text = source.read_text()
    for name in ("Grid_Size_Y", "Grid_Size_Z", "Workgroup_Size_X", "Workgroup_Size_Y", "Workgroup_Size_Z"):
        text = drop_column(text, name)
    path = tmp_path / source.name
    path.write_text(text)
    refused(path, "'Grid_Size_Y', 'Grid_Size_Z', 'Workgroup_Size_X', 'Workgroup_Size_Y', 'Workgroup_Size_Z'")


def test_bit_flips_are_refused_at_the_first_damage():
    """Five flips: the first one met while reading is a byte that is not UTF-8 (it was a KeyError)."""
    refused(repro(f"fuzz/13_crash_KeyError/{V3_TRACE}"), "bytes that are not UTF-8 at offset 1315")


def test_a_number_turned_to_text_is_refused_with_its_column_and_row(samples_dir, tmp_path):
    """One of the 13 reproducer's flips alone: a digit of Agent_Id turned into 'q'."""
    def flip(data):
        lines = data.split(b"\n")
        lines[6] = lines[6].replace(b'"KERNEL_DISPATCH",1,', b'"KERNEL_DISPATCH",q,', 1)
        return b"\n".join(lines)
    path = edited_copy(tmp_path, sample(samples_dir, f"rocprof/{V3_TRACE}"), flip)
    refused(path, "column 'Agent_Id', data row 6", "'q' is not a number")


@pytest.mark.parametrize("case, words", [
    (f"fuzz/15_crash_OverflowError/{V3_TRACE}", ("column 'Start_Timestamp', data row 6", "out of range")),
    ("min/rocprof_v3_grid_1e400.csv", ("column 'Grid_Size_X', data row 1", "'1e400' is out of range"))])
def test_numbers_too_large_for_their_field_are_refused(case, words):
    refused(repro(case), *words)


def test_a_tokenizer_error_is_one_line():
    refused(repro(f"fuzz/11_multiline-error_/{V3_TRACE}"), "Expected 18 fields in line 7, saw 61")


@pytest.mark.parametrize("case, words", [
    (f"fuzz/12_hang_v3/{V3_TRACE}", ("dispatch id '6' (Dispatch_Id) is on 20001 rows", "data rows 1, 2, 3")),
    ("fuzz/16_hang_v1/v1_old_rome_results.csv", ("dispatch id '2' (Index) is on 20001 rows",))])
def test_a_data_row_repeated_20000_times_is_refused_fast(case, words):
    began = time.perf_counter()
    refused(repro(case), *words)
    assert time.perf_counter() - began < 10  # was 20-40 s of lane assignment before it exported


def edited_copy(tmp_path, source, edit):
    """`source` (a real sample) with `edit(bytes) -> bytes` applied, under its own name in tmp_path."""
    path = tmp_path / source.name
    path.write_bytes(edit(source.read_bytes()))
    return path


def test_surplus_cells_on_the_first_data_row_are_refused_not_made_an_index(samples_dir, tmp_path):
    """pandas takes surplus first cells for an index (the row then reads shifted): refused instead."""
    def two_more(data):
        header, first, rest = data.split(b"\n", 2)
        return b"\n".join([header, first + b",1,2", rest])
    path = edited_copy(tmp_path, sample(samples_dir, "rocprof/v1_old_rome_omp/results.csv"), two_more)
    refused(path, "data row 1 has 2 more cell(s) than the header")


@pytest.mark.parametrize("bad, words", [(b"\x00", "NUL byte at offset 40"),
                                        (b"\xff\xfe", "bytes that are not UTF-8 at offset 40")])
def test_bytes_no_rocprof_csv_holds_are_refused(bad, words, samples_dir, tmp_path):
    path = edited_copy(tmp_path, sample(samples_dir, f"rocprof/{V3_TRACE}"), lambda d: d[:40] + bad + d[40:])
    refused(path, words)


def test_a_file_cut_mid_row_is_refused(samples_dir, tmp_path):
    source = sample(samples_dir, f"rocprof/{V3_TRACE}")
    def cut(data):
        data = data.rstrip(b"\n")
        return data[:data.rindex(b"\n") + 30]  # '"KERNEL_DISPATCH",1,1,69,3,18' of the last row
    refused(edited_copy(tmp_path, source, cut), "the last row has 6 of the header's 18 cells", "cut short")
    whole = edited_copy(tmp_path, source, lambda d: d.rstrip(b"\n"))  # only the final line end missing
    assert len(tb_hwprof.read(whole).kernels) == len(tb_hwprof.read(source).kernels) == 7


def test_an_infinite_counter_value_is_read_as_infinity(samples_dir, tmp_path):
    """Still-valid input: a counter (not a model field) may be inf; it is kept, and the run exports."""
    source = sample(samples_dir, "rocprof/v1_mi300a_vecadd/output_vec_add_gpu.csv")
    rows = list(csv.reader(source.read_text().splitlines()))
    rows[1][rows[0].index("Wavefronts")] = "inf"
    path = tmp_path / source.name
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    assert tb_hwprof.read(path).raw_metrics[0]["Wavefronts"][0] == float("inf")
    counters = sample(samples_dir, "rocprof/v3_docs_counter_collection_newer.csv")
    nan = rewritten(tmp_path, counters, lambda rows: rows[1].__setitem__(rows[0].index("Counter_Value"), "nan"))
    assert tb_hwprof.read(nan).summaries["counters"]["value"].isna().sum() == 1  # a nan reading, kept
    assert tb_hwprof.export(path, tmp_path / "logs", "r").is_dir()


# ---------------------------------------------------------------- rocprof v1 results.json

@pytest.mark.parametrize("case, words", [
    ("17_crash_AttributeError", ("traceEvents[1].args.name is a list",)),
    ("20_crash_AttributeError", ("traceEvents[1].args is a number, not an object",)),
    ("30_crash_AttributeError", ("traceEvents[3].args is a number, not an object",)),
    ("31_crash_AttributeError", ("traceEvents[19].args is null, not an object",)),
    ("32_crash_AttributeError", ("traceEvents[17].args.Name is an object, not text or a number",))])
def test_json_values_of_the_wrong_type_are_refused_with_event_and_field(case, words):
    refused(repro(f"fuzz/{case}/results.json"), *words)


def test_a_non_finite_json_timestamp_is_refused():
    refused(repro("fuzz/18_crash_IntCastingNaNError/results.json"), "traceEvents[23].args.BeginNs is -inf")


def test_json_nested_a_thousand_deep_is_refused_not_a_recursion_error():
    refused(repro("fuzz/19_crash_RecursionError/results.json"), "nested too deeply")


def test_json_numbers_written_as_numbers_not_text_read_the_same(samples_dir, tmp_path):
    """Still-valid input: rocprof writes numbers as text; the same trace with JSON numbers reads the same."""
    source = sample(samples_dir, "rocprof/v1_mi300a_vecadd/results.json")
    doc = json.loads(source.read_text())
    for event in doc["traceEvents"]:
        for key in ("BeginNs", "EndNs", "dev-id"):
            if key in event.get("args", {}):
                event["args"][key] = int(event["args"][key])
    path = tmp_path / source.name
    path.write_text(json.dumps(doc))
    numbers, text = tb_hwprof.read(path), tb_hwprof.read(source)
    assert numbers.kernels[["start_ns", "end_ns", "device"]].equals(text.kernels[["start_ns", "end_ns", "device"]])
    for key in ("memory_copies", "api_trace"):
        assert numbers.summaries[key].equals(text.summaries[key]), key


# ---------------------------------------------------------------- rocprof v1 results.db, rocpd

def test_a_v1_table_without_a_column_it_needs_is_named():
    refused(repro("fuzz/21_crash_KeyError/results.db"), "table HIP has no column 'BeginNs'")


def test_a_rocpd_agent_whose_extdata_is_not_json_text_is_refused():
    refused(repro("fuzz/22_crash_TypeError/v3_rocpd_mi300x_ck_bmm_results.db"),
            "rocpd_info_agent column 'extdata'", "(id 6)", "where rocprof writes text")


def test_binary_data_in_a_text_cell_is_refused_not_a_unicode_error():
    refused(repro("fuzz/33_crash_UnicodeDecodeError/results.db"), "OPS column '__lane', row 1: binary data")


def rewritten(tmp_path, source, edit_rows):
    """`source` (a real CSV sample) with `edit_rows(rows)` applied to its cells, under its own name."""
    rows = list(csv.reader(source.read_text().splitlines()))
    edit_rows(rows)
    path = tmp_path / source.name
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    return path


def test_a_blank_cell_the_tool_always_fills_is_refused(samples_dir, tmp_path):
    def wipe(rows):
        rows[2][rows[0].index("Start_Timestamp")] = ""
    refused(rewritten(tmp_path, sample(samples_dir, f"rocprof/{V3_TRACE}"), wipe),
            "column 'Start_Timestamp', data row 2 is blank")


def test_a_repeated_row_of_a_trace_without_dispatch_ids_is_refused(samples_dir, tmp_path):
    """rocprofv3's older columns have no Dispatch_Id: a row repeated whole (timestamps too) is damage."""
    refused(rewritten(tmp_path, sample(samples_dir, "rocprof/v3_docs_kernel_trace_older.csv"),
                      lambda rows: rows.append(rows[1])), "data row 2 repeats an earlier row")


@pytest.mark.parametrize("name, column", [("rocprof/v3_docs_hip_api_stats.csv", "TotalDurationNs"),
                                          ("rocprof/v3_docs_counter_collection_newer.csv", "Counter_Value"),
                                          ("rocprof/v2_hip_api_trace_hiptrace.csv", "End_Timestamp")])
def test_text_in_a_number_column_is_refused(name, column, samples_dir, tmp_path):
    def garble(rows):
        data = [row for row in rows[1:] if row]  # the v2 trace has a blank line after its header
        data[2][rows[0].index(column)] = "12x4"
    refused(rewritten(tmp_path, sample(samples_dir, name), garble), f"column {column!r}, data row 3: '12x4'")


def test_a_zero_total_percentage_reads_as_empty_not_damage(samples_dir):
    """rocprof v1 writes Percentage 'None' when the total is 0: still valid, read as empty with a note."""
    path = sample(samples_dir, "rocprof/v1_old_rome_omp/results.hsa_stats.csv")
    assert ",None" in path.read_text()
    profile = tb_hwprof.read(path)
    assert any("'None'" in n for n in profile.notes)
    assert profile.summaries["hsa_api_stats"]["pct"].isna().all() and profile.summaries["hsa_api_stats"]["calls"].notna().all()


def edited_db(tmp_path, source, *statements):
    """A copy of a real SQLite sample with `statements` run on it (damage of one kind each)."""
    path = tmp_path / source.name
    path.write_bytes(source.read_bytes())
    with sqlite3.connect(path) as conn:
        guid = conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'rocpd_kernel_dispatch_%'").fetchone()
        for statement in statements:  # {dispatch}: rocpd's GUID-suffixed dispatch table
            conn.execute(statement.format(dispatch=guid[0] if guid else ""))
    return path


V1_DB, ROCPD = "rocprof/v1_mi300a_vecadd/results.db", "rocprof/v3_rocpd_mi300x_ck_bmm_results.db"


def test_a_v1_ops_table_without_its_queue_column_is_named(samples_dir, tmp_path):
    path = edited_db(tmp_path, sample(samples_dir, V1_DB), 'ALTER TABLE OPS DROP COLUMN "queue-id"')
    refused(path, "table OPS has no column 'queue-id'")


def test_a_wiped_name_of_an_api_call_is_refused(samples_dir, tmp_path):
    path = edited_db(tmp_path, sample(samples_dir, V1_DB), "UPDATE HIP SET Name = NULL WHERE rowid = 3")
    refused(path, "HIP column 'Name', row 3", "is NULL")


def test_a_dispatch_that_drops_out_of_the_kernels_view_is_refused(samples_dir, tmp_path):
    """A dangling queue reference: the view's join loses the row; the reader counts and refuses."""
    path = edited_db(tmp_path, sample(samples_dir, ROCPD),
                     'UPDATE "{dispatch}" SET queue_id = 987654 WHERE id IN (SELECT id FROM "{dispatch}" LIMIT 2)')
    refused(path, "2 of 151 kernel dispatches do not join")


@pytest.mark.parametrize("column, value, words", [("start", "'abc'", "kernels column 'start'"),
                                                  ("grid_size_y", "1e300", "column 'grid_y'"),
                                                  ("workgroup_size_x", "0", "column 'workgroup_x'")])
def test_rocpd_kernel_numbers_that_cannot_be_right_are_refused(column, value, words, samples_dir, tmp_path):
    path = edited_db(tmp_path, sample(samples_dir, ROCPD), f'UPDATE "{{dispatch}}" SET {column} = {value} WHERE id = 7')
    refused(path, words)


def edited_json(tmp_path, source, edit):
    doc = json.loads(source.read_text())
    edit(doc["traceEvents"])
    path = tmp_path / source.name
    path.write_text(json.dumps(doc))
    return path


def test_a_repeated_json_event_is_refused(samples_dir, tmp_path):
    source = sample(samples_dir, "rocprof/v1_old_rome_omp/results.json")
    first = next(i for i, e in enumerate(json.loads(source.read_text())["traceEvents"]) if e.get("ph") == "X")
    path = edited_json(tmp_path, source, lambda events: events.extend([events[first]] * 100))
    refused(path, f"repeats traceEvents[{first}]")
    # Still valid: two dispatches of the real trace share BeginNs/EndNs (told apart by queue-index).
    kernels = tb_hwprof.read(source).kernels
    assert len(kernels) == 3 and kernels["start_ns"].duplicated().sum() == 1


def test_a_json_event_without_its_times_is_refused(samples_dir, tmp_path):
    source = sample(samples_dir, "rocprof/v1_mi300a_vecadd/results.json")
    last = max(i for i, e in enumerate(json.loads(source.read_text())["traceEvents"]) if e.get("ph") == "X")
    path = edited_json(tmp_path, source, lambda events: events[last]["args"].pop("EndNs"))
    refused(path, f"traceEvents[{last}] (a complete event) has no args.EndNs")


def test_v2_stdout_damage_names_the_file(samples_dir, tmp_path):
    """The CLI-plugin output is parsed line by line: its refusals name the file as the CSV ones do."""
    source = sample(samples_dir, "rocprof/v2_cli_stdout_golden_hip_vectoradd.txt")
    line = next(x for x in source.read_text().splitlines() if x.startswith("Dispatch_ID("))
    path = tmp_path / source.name
    path.write_text(source.read_text() + line + "\n")
    refused(path, "dispatch id '1' (Dispatch_ID) is on 2 rows")
    path.write_text(source.read_text().replace("Grid_Size(1048576)", "Grid_Size(1e400)", 1))
    refused(path, "column 'Grid_Size', data row 1: '1e400' is out of range")


@pytest.mark.parametrize("name, column", [("rocprof/v2_hip_api_trace_hiptrace.csv", "Start_Timestamp"),
                                          ("rocprof/v3_docs_counter_collection_newer.csv", "Counter_Name"),
                                          ("rocprof/v3_docs_hip_api_stats.csv", "Calls")])
def test_a_row_cut_short_in_the_other_rocprof_tables_is_refused(name, column, samples_dir, tmp_path):
    """A row keeping only its first cells: the cells the tool always fills read blank, and are refused."""
    def cut(rows):
        data = [row for row in rows[1:] if row]
        del data[1][rows[0].index(column):]
    refused(rewritten(tmp_path, sample(samples_dir, name), cut), f"column {column!r}, data row 2 is blank")


def test_a_repeated_row_of_a_statistics_file_is_refused(samples_dir, tmp_path):
    path = rewritten(tmp_path, sample(samples_dir, "rocprof/v3_docs_hip_api_stats.csv"),
                     lambda rows: rows.insert(3, rows[1]))
    refused(path, "data row 3 repeats the name")


def test_a_blob_among_integers_is_refused(samples_dir, tmp_path):
    """pandas calls integers mixed with bytes 'mixed-integer': the blob must still be found."""
    path = edited_db(tmp_path, sample(samples_dir, V1_DB), """UPDATE HIP SET "Index" = x'00ff' WHERE rowid = 2""")
    refused(path, "HIP column 'Index', row 2: binary data b'\\x00\\xff'")


# ---------------------------------------------------------------- host API calls that end before they start
def test_a_v2_api_call_ending_before_it_starts_is_refused(samples_dir, tmp_path):
    """fuzz rocprof_v2_csv-21 exported API statistics with negative times: the CPU-timed call's
    begin after its end is damage, named by its row (the call's own name, counted here)."""
    source = sample(samples_dir, "rocprof/v2_hip_api_trace_hiptrace.csv")

    def backwards(rows):
        data = [row for row in rows[1:] if row]
        start, end = rows[0].index("Start_Timestamp"), rows[0].index("End_Timestamp")
        data[4][end] = str(int(data[4][start]) - 1)
    path = rewritten(tmp_path, source, backwards)
    name = [row for row in csv.reader(source.read_text().splitlines())][1:]
    name = [row for row in name if row][4][1]
    refused(path, f"API trace row 5: call {name!r} ends before it starts")


@pytest.mark.parametrize("sample_name, statement, words", [
    (V1_DB, "UPDATE HIP SET EndNs = 0 WHERE rowid = 5", "table HIP row 5: call"),
    (ROCPD, 'UPDATE "{region}" SET "end" = start - 1 WHERE rowid = (SELECT min(rowid) FROM "{region}")', "table regions row"),
])
def test_a_database_api_call_ending_before_it_starts_is_refused(sample_name, statement, words, samples_dir, tmp_path):
    source = sample(samples_dir, sample_name)
    with sqlite3.connect(f"file:{source}?mode=ro", uri=True) as conn:  # rocpd's GUID-suffixed region table
        region = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd_region_%'").fetchone()
    path = edited_db(tmp_path, source, statement.replace("{region}", region[0] if region else ""))
    refused(path, words, "ends before it starts")
    tb_hwprof.read(sample(samples_dir, sample_name))  # the real file reads


def test_a_negative_device_number_is_damage(samples_dir, tmp_path):
    """rocprof v1's results.db with one dispatch's dev-id set to -1 (found by the stacked fuzzing): it
    was read as device -1 and written into a run whose manifest its own reader refused."""
    import shutil
    path = tmp_path / "results.db"
    shutil.copy(sample(samples_dir, "rocprof/v1_mi300a_vecadd/results.db"), path)
    path.chmod(0o644)
    with sqlite3.connect(path) as db:
        db.execute('UPDATE "OPS" SET "dev-id" = -1 WHERE rowid = (SELECT min(rowid) FROM "OPS")')
    with pytest.raises(InputError, match="dev-id"):
        tb_hwprof.read(path)
