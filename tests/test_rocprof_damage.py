"""Damaged rocprof inputs (issue 13): each class of damage the fuzzer found in the AMD readers is
refused with one line naming the file, the problem and the fix, or, where the input is still valid,
read.  The inputs are the reproducers in ../shared/repro, read in place."""
import time

import pytest

import tb_hwprof
from tb_hwprof.errors import InputError

from conftest import repro

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
    refused(repro(f"fuzz/29_crash_KeyError/{V3_TRACE}"), "no column 'Workgroup_Size_Y'", "all six")


def test_a_bit_flipped_number_is_refused_with_its_column_and_row():
    refused(repro(f"fuzz/13_crash_KeyError/{V3_TRACE}"), "column 'Agent_Id', data row 6", "'q' is not a number")


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


# ---------------------------------------------------------------- rocprof v1 results.db, rocpd

def test_a_v1_table_without_a_column_it_needs_is_named():
    refused(repro("fuzz/21_crash_KeyError/results.db"), "table HIP has no column 'BeginNs'")


def test_a_rocpd_agent_whose_extdata_is_not_json_text_is_refused():
    refused(repro("fuzz/22_crash_TypeError/v3_rocpd_mi300x_ck_bmm_results.db"),
            "rocpd_info_agent column 'extdata'", "(id 6)", "where rocprof writes text")


def test_binary_data_in_a_text_cell_is_refused_not_a_unicode_error():
    refused(repro("fuzz/33_crash_UnicodeDecodeError/results.db"), "OPS column '__lane', row 1: binary data")
