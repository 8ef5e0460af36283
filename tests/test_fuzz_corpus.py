"""Every reproducer in ../shared/repro (issue 13), read in place: each damaged input either exports
(and the run it wrote reads back) or fails with one line naming the input, within the time limit;
the valid ones in min/ and sqlite/ export, and read their values as they are in the file."""
import csv
import math
import os
from pathlib import Path

import pytest

import fuzzing
from conftest import repro_path

pytestmark = pytest.mark.fuzz


def _fuzz_folders():
    """(folder name, its input, its README's mutation line) per row of fuzz/INDEX.tsv."""
    index = repro_path() / "fuzz" / "INDEX.tsv"
    if not index.is_file():
        return []
    cases = []
    for line in index.read_text(encoding="utf-8").splitlines():
        folder = repro_path() / "fuzz" / line.split("\t", 1)[0]
        inputs = [p for p in sorted(folder.iterdir()) if p.name != "README.txt"]
        mutation = next((m for m in (folder / "README.txt").read_text(encoding="utf-8").splitlines()
                         if m.startswith("mutation:")), "mutation: ?")
        cases.append(pytest.param(inputs[0], mutation, id=folder.name))
    return cases


def _params_or_skip(cases, what):
    """The cases, or one case that skips (fails when reproducers are required) when there are none."""
    if cases:
        return cases
    marks = [] if os.environ.get("TB_HWPROF_REQUIRE_SAMPLES") else [pytest.mark.skip(reason=f"no {what} under {repro_path()}")]
    return [pytest.param(None, "", id="none", marks=marks)]


def _files(folder: str):
    path = repro_path() / folder
    return [pytest.param(p, p.name, id=p.name) for p in sorted(path.glob("*"))] if path.is_dir() else []


def _export(path: Path, tmp_path: Path) -> fuzzing.Outcome:
    assert path is not None, f"reproducers required but missing under {repro_path()}"
    return fuzzing.export_outcome(path, tmp_path / "logdir")


@pytest.mark.parametrize("damaged, mutation", _params_or_skip(_fuzz_folders(), "fuzz/INDEX.tsv"))
def test_damaged_input_exports_or_fails_in_one_line(damaged, mutation, tmp_path):
    outcome = _export(damaged, tmp_path)
    assert not fuzzing.problems_with(outcome, damaged), f"{damaged} ({mutation}): {outcome}"


# -- min/: minimal inputs, most of them valid --------------------------------------------------------
VALID_MIN = {"ncu_csv_name_200k.csv", "ncu_csv_metric_inf.csv", "ncu_csv_metric_1e309.csv", "xss_ncu.csv",
             "xss_vtune.csv"}


@pytest.mark.parametrize("path, name", _params_or_skip(_files("min"), "min/ reproducers"))
def test_minimal_input_exports_or_fails_in_one_line(path, name, tmp_path):
    outcome = _export(path, tmp_path)
    expected = "exported" if name in VALID_MIN else None
    assert not fuzzing.problems_with(outcome, path), f"{path}: {outcome}"
    if expected:
        assert outcome.kind == expected, f"{path} is valid input: {outcome}"


def _csv_rows(path: Path) -> list:
    csv.field_size_limit(1 << 30)
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _exported_profile(name: str, tmp_path: Path):
    import tb_hwprof
    path = fuzzing.require_repro() / "min" / name
    outcome = fuzzing.export_outcome(path, tmp_path)
    assert outcome.kind == "exported", f"{path} is valid input: {outcome}"
    return path, tb_hwprof.load_run(outcome.detail)


@pytest.mark.parametrize("name", ["xss_ncu.csv", "ncu_csv_name_200k.csv"])
def test_kernel_names_come_through_as_written(name, tmp_path):
    """HTML in a name is data (escaping is the page's job); a 200 kB name is kept whole.  A launch's
    name is its first row's (the 200k file changed only that one)."""
    path, profile = _exported_profile(name, tmp_path)
    written = {}
    for row in _csv_rows(path):
        written.setdefault(row["ID"], row["Kernel Name"])
    read = dict(zip(profile.kernels["launch_id"].astype(str), profile.kernels["demangled_name"]))
    assert read == written


def test_vtune_function_names_come_through_as_written(tmp_path):
    path, profile = _exported_profile("xss_vtune.csv", tmp_path)
    assert set(profile.summaries["cpu_hotspots"]["name"]) == {row["Function"] for row in _csv_rows(path)}


def _is_infinite(cell: str) -> bool:
    try:
        return math.isinf(float(cell.replace(",", "")))
    except ValueError:  # a text metric ("n/a", an enum)
        return False


@pytest.mark.parametrize("name", ["ncu_csv_metric_inf.csv", "ncu_csv_metric_1e309.csv"])
def test_infinite_metric_is_shown_as_printed_and_noted(name, tmp_path):
    """'inf' and '1e309' (which overflows to inf) are values a tool can print, not damage.  JSON has
    no infinity, so the run keeps the cell's text in the launch's details (what ncu printed), leaves
    the number out of the kernels table, and says so in a note naming the metric."""
    path, profile = _exported_profile(name, tmp_path)
    infinite = [(r["ID"], r["Metric Name"], r["Metric Value"]) for r in _csv_rows(path)
                if _is_infinite(r["Metric Value"])]
    assert infinite, f"{path} has no infinite metric"
    launches = list(profile.kernels["launch_id"].astype(str))
    for launch, metric, cell in infinite:
        assert profile.raw_metrics[launches.index(launch)][metric][0] == cell, (launch, metric)
        assert any(metric in note for note in profile.notes), profile.notes
    if any(metric == "gpu__time_duration.sum" for _, metric, _ in infinite):
        assert profile.kernels["duration_ns"].isna().any()


# -- sqlite/: a valid export with sparse rowids --------------------------------------------------------
@pytest.mark.parametrize("path, name", _params_or_skip(_files("sqlite"), "sqlite/ reproducers"))
def test_valid_sqlite_exports(path, name, tmp_path):
    outcome = _export(path, tmp_path)
    assert outcome.kind == "exported", f"{path} is a valid export (integrity_check ok): {outcome}"


# -- ncu_rep_silent/: damaged .ncu-rep files that exported while losing kernel names or metrics ----------
ORIGINALS = {"darrenlu": "ncu/darrenlu_rtx3050l_basic_2025.1.0.ncu-rep",
             "lakshya": "ncu/lakshya_gtx1660s_basic_2024.1.1.ncu-rep"}


def _original_of(name: str) -> str:
    return next(sample for key, sample in ORIGINALS.items() if key in name)


@pytest.mark.parametrize("path, name", _params_or_skip(_files("ncu_rep_silent"), "ncu_rep_silent/ reproducers"))
def test_damaged_ncu_rep_is_refused_or_read_whole(path, name, tmp_path, ncu_report_module, read_sample):
    """Either one line naming the file, or the original's kernels with every one of their metrics but
    those the run's notes list as damaged and left out (a damaged name costs its metric only), each
    kept metric as the original holds it."""
    import re
    import tb_hwprof
    outcome = _export(path, tmp_path)
    assert not fuzzing.problems_with(outcome, path), f"{path}: {outcome}"
    if outcome.kind == "exported":
        original, damaged = read_sample(_original_of(name)), tb_hwprof.load_run(outcome.detail)
        assert list(damaged.kernels["demangled_name"]) == list(original.kernels["demangled_name"])
        noted = [int(m.group(1)) for n in damaged.notes for m in [re.match(r"(\d+) damaged metric\(s\) left out", n)] if m]
        lost = sum(len(set(o) - set(d)) for o, d in zip(original.raw_metrics, damaged.raw_metrics))
        assert lost == sum(noted), (lost, damaged.notes)
        for kept, whole in zip(damaged.raw_metrics, original.raw_metrics):
            assert set(kept) <= set(whole)
            assert all(kept[m] == whole[m] for m in kept)
