"""The project's errors: one printable line whatever the damaged input quotes, and picklable (an
error raised in a worker process reaches the caller as itself)."""
import pickle
import shutil

import pytest

import tb_hwprof
from tb_hwprof.core.errors import HwprofError, InputError

KMEANS = "nsys/kmeans_rtx3080_openacc_2020.5.1.sqlite"


def test_sqlites_own_words_quoting_a_damaged_schema_stay_printable(samples_dir, tmp_path):
    """A u32 written into the schema page: SQLite's message quotes the damaged token (a DEL byte),
    which our one line shows escaped, not as the raw byte."""
    damaged = tmp_path / "damaged.sqlite"
    shutil.copy(samples_dir / KMEANS, damaged)
    data = bytearray(damaged.read_bytes())
    data[110284:110288] = (0x7FFFFFFF).to_bytes(4, "little")
    damaged.write_bytes(bytes(data))
    with pytest.raises(InputError) as refused:
        tb_hwprof.read(damaged)
    message = str(refused.value)
    assert message.isprintable() and str(damaged) in message
    assert "\\x7f" in message and "malformed database schema" in message


@pytest.mark.parametrize("quoted", ["\x1b[31mred", "a\nb", "x\u2028y", "nul\x00", "tab\tend"])
def test_control_characters_and_line_breaks_are_escaped(quoted):
    message = str(InputError(f"/runs/{quoted}.csv", f"bad cell {quoted}", "fix it"))
    assert message.isprintable() and len(message.splitlines()) == 1
    assert quoted.encode("unicode_escape").decode("ascii") in message


def test_printable_text_is_left_as_it_is():
    text = "kernel 'void gemm<float>' — 1.5× slower, 😀"
    assert str(HwprofError(text)) == text


def test_errors_pickle_as_themselves():
    error = pickle.loads(pickle.dumps(InputError("/a/report.ncu-rep", "launch 2 damaged", "pass --salvage")))
    assert type(error) is InputError and (error.path, error.problem, error.fix) == (
        "/a/report.ncu-rep", "launch 2 damaged", "pass --salvage")
    assert str(error) == "/a/report.ncu-rep: launch 2 damaged -- pass --salvage"


@pytest.mark.parametrize("what", ["missing", "folder"])
def test_a_path_that_is_no_readable_file_is_one_line_naming_it_whether_read_or_mapped(tmp_path, what):
    """read_input_bytes and mapped_input (the big-input path) say the same one-line error, with its fix."""
    from tb_hwprof.readers.common import mapped_input, read_input_bytes
    path = tmp_path / "nothing.ncu-rep" if what == "missing" else tmp_path
    expected = {"missing": f"{path}: no such file -- check the path",
                "folder": f"{path}: is a folder, not a report file -- pass the report file itself"}[what]
    with pytest.raises(InputError) as read:
        read_input_bytes(path)
    with pytest.raises(InputError) as mapped:
        with mapped_input(path):
            pass
    assert str(read.value) == str(mapped.value) == expected
