"""Nsight Systems exports (and a rocpd database) with database pages swapped (issue 30, item 8): damage in SQLite's pages is
refused as damage, never read as data.

SQLite reads a page swapped in from another table as rows of this one without an error, when the
page's cells parse.  Two checks catch that:
- SQLite's own PRAGMA quick_check, run beside the read;
- string ids that StringIds does not hold.

Each mutant is a real sample with two pages exchanged; the oracle is SQLite's quick_check and the
original file's reading."""
from __future__ import annotations

import random
import sqlite3
import struct
from pathlib import Path

import pandas as pd
import pytest

from tb_hwprof.app.cli import main
from tb_hwprof.core.errors import InputError
from tb_hwprof.readers.common import sqlite_columns
from tb_hwprof.readers.detect import read

from conftest import sample

SAMPLES = ["nsys/annikola_gtx1050_2024.5.1.sqlite", "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite",
           "nsys/gpu4_t4_2022.4.2.sqlite", "nsys/kmeans_rtx3080_openacc_2020.5.1.sqlite",
           "nsys/mordred_quadro6000_2021.2.1.sqlite", "nsys/testcuda_rtx4060ti_2026.1.1.sqlite",
           "nsys/cardiac_rtx3060l_nocuda_2021.3.3.sqlite",
           "rocprof/v3_rocpd_mi300x_ck_bmm_results.db"]  # rocpd: the same check, the same refusal


def swapped(source: Path, a: int, b: int, out: Path) -> Path:
    """`source` with its pages a and b (numbered from 0, as offsets / page size) exchanged."""
    data = source.read_bytes()
    size = struct.unpack(">H", data[16:18])[0]
    size = 65536 if size == 1 else size
    pages = bytearray(data)
    pages[a * size:(a + 1) * size], pages[b * size:(b + 1) * size] = data[b * size:(b + 1) * size], data[a * size:(a + 1) * size]
    out.write_bytes(bytes(pages))
    return out


def page_count(path: Path) -> int:
    data = path.read_bytes()
    size = struct.unpack(">H", data[16:18])[0]
    return len(data) // (65536 if size == 1 else size)


def quick_check(path: Path) -> str:
    """SQLite's verdict on the file's pages: "ok", or what it found (an error where it cannot finish)."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            return db.execute("PRAGMA quick_check").fetchone()[0]
    except sqlite3.DatabaseError as e:
        return f"error: {e}"


def reading(path: Path):
    """What the export shows of an nsys report: its launches and summary tables, in a fixed order."""
    profile = read(path)
    kernels = profile.kernels[["name", "start_ns", "end_ns", "device", "stream"]].sort_values(["start_ns", "name"])
    return kernels.reset_index(drop=True), {n: f.sort_values(list(f.columns)).reset_index(drop=True)
                                            for n, f in profile.summaries.items()}


def same_reading(a, b) -> bool:
    try:
        pd.testing.assert_frame_equal(a[0], b[0], check_dtype=False)
        assert a[1].keys() == b[1].keys()
        for name in a[1]:
            pd.testing.assert_frame_equal(a[1][name], b[1][name], check_dtype=False)
    except AssertionError:
        return False
    return True


class NoPageCheck:
    """The reader without its quick_check (to show what it would read)."""

    def __init__(self, path):
        pass

    def problem(self):
        return None

    def cancel(self):
        pass


def test_a_page_of_another_table_is_refused_not_read_as_api_calls(samples_dir, tmp_path, monkeypatch, capsys):
    """kmeans with a PROFILER_OVERHEAD leaf in CUPTI_ACTIVITY_KIND_RUNTIME's place: SQLite's scan reads its
    cells as API calls (cuda_api_sum changes, no error); quick_check sees NULLs in a NOT NULL column."""
    source = sample(samples_dir, "nsys/kmeans_rtx3080_openacc_2020.5.1.sqlite")
    mutant = swapped(source, 18, 13, tmp_path / "kmeans.sqlite")
    assert quick_check(mutant).startswith("NULL value in CUPTI_ACTIVITY_KIND_RUNTIME")
    with monkeypatch.context() as m:
        m.setattr(sqlite_columns, "PageCheck", NoPageCheck)
        misread = reading(mutant)
    original = reading(source)
    assert not misread[1]["cuda_api_sum"].equals(original[1]["cuda_api_sum"])  # what the check prevents
    with pytest.raises(InputError, match="damaged.*quick_check: NULL value in CUPTI_ACTIVITY_KIND_RUNTIME"):
        read(mutant)
    assert main(["export", str(mutant), "--logdir", str(tmp_path / "runs"), "--run", "r"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"tb-hwprof: error: {mutant}: the SQLite file is damaged")
    assert not (tmp_path / "runs" / "r").exists()


def test_a_string_table_swapped_out_is_refused_though_sqlite_finds_it_sound(samples_dir, tmp_path, monkeypatch):
    """gpu4_t4 with StringIds' root page exchanged for another table's leaf: every b-tree is well formed
    (quick_check: ok) and the kernels lose their names.  The names the rows refer to are missing."""
    source = sample(samples_dir, "nsys/gpu4_t4_2022.4.2.sqlite")
    mutant = swapped(source, 1, 138, tmp_path / "gpu4.sqlite")
    assert quick_check(mutant) == "ok"
    with sqlite3.connect(source) as db:
        names = {i for (i,) in db.execute("SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL")}
    with sqlite3.connect(mutant) as db:
        held = {i for (i,) in db.execute("SELECT id FROM StringIds")}
    assert names - held  # the kernels' names are no longer in the string table
    with pytest.raises(InputError, match="damaged Nsight Systems export: .*string ids the rows name are missing"):
        read(mutant)


@pytest.mark.parametrize("relative", SAMPLES)
def test_every_page_swap_with_evidence_in_the_bytes_is_refused(samples_dir, tmp_path, relative):
    """Seeded swaps of two random pages: each mutant that SQLite's quick_check finds damaged is refused
    in one line naming the file, never read.  The others read, and the bytes say nothing is wrong,
    because every b-tree is well formed.  Most of those read exactly as the original.  The exception
    is two same-shaped one-page tables exchanged whole, e.g. ENUM_CUDA_MEM_KIND's rows with
    ENUM_STACK_UNWIND_METHOD's: a file like that could have been written so."""
    source = sample(samples_dir, relative)
    original = reading(source)
    rng = random.Random(relative)
    outcomes = {"refused": 0, "same": 0, "sound but different": 0}
    for i in range(8):
        a, b = rng.sample(range(1, page_count(source)), 2)
        mutant = swapped(source, a, b, tmp_path / f"m{i}.sqlite")
        damaged = quick_check(mutant) != "ok"
        try:
            got = reading(mutant)
        except InputError as e:
            assert str(mutant) in str(e) and "\n" not in str(e)
            outcomes["refused"] += 1
            continue
        assert not damaged, (a, b)
        outcomes["same" if same_reading(got, original) else "sound but different"] += 1
    assert outcomes["refused"] > 0 and outcomes["sound but different"] <= outcomes["refused"], outcomes
