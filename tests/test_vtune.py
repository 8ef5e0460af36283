"""VTune CLI reports: every real file in the samples' vtune folder, checked against the csv module.

The samples hold hotspots CSVs (Amplifier 2015, 2018 loop grouping), a tab-delimited summary
and two TEXT reports. No real uarch-exploration (top-down) or GPU computing-task CSV is among
them, so those layouts are covered by the small synthetic files marked SYNTHETIC below,
written with VTune's column names.
"""
import csv
import math

import pytest

import tb_hwprof
from tb_hwprof.analysis.topdown import classify_topdown, topdown_label
from tb_hwprof.app.cli import main as cli_main
from tb_hwprof.readers.detect import sniff
from tb_hwprof.core.errors import InputError
from tb_hwprof.readers.intel.vtune import parse_value, sniff_delimiter

EXPECT = {
    "amplxe2015_hotspots_openmp.csv": "cpu_hotspots",
    "amplxe2018_advanced_hotspots_loops.csv": "cpu_hotspots",
    "vtune_summary_tab.csv": "vtune_summary",
    "vtune2022_hotspots_srcline_text.report": None,
    "vtune2022_topdown_text.report": None,
}


def rows_of(path, delimiter=","):
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter=delimiter))


def test_every_sample_is_listed(vt):
    assert {p.name for p in vt.iterdir() if p.is_file()} == set(EXPECT)


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_each_file_reads_or_says_export_csv(vt, name):
    if EXPECT[name] is None:
        with pytest.raises(InputError) as err:
            tb_hwprof.read(vt / name)
        message = str(err.value)
        assert "-format csv" in message and "text report" in message and "\n" not in message
        return
    p = tb_hwprof.read(vt / name)
    assert sniff(vt / name) == "vtune-csv"
    assert p.provenance.tool == "vtune" and p.kernels.empty and list(p.summaries) == [EXPECT[name]]
    assert any("not per-launch GPU kernels" in n for n in p.notes)


def test_amplifier_2015_hotspots_cpu_times(vt):
    rows = rows_of(vt / "amplxe2015_hotspots_openmp.csv")
    t = tb_hwprof.read(vt / "amplxe2015_hotspots_openmp.csv").summaries["cpu_hotspots"]
    assert len(t) == len(rows) == 10
    for r, got in zip(rows, t.to_dict("records")):
        assert got["name"] == r["Function"] and got["module"] == r["Module"]
        assert got["cpu_time_s"] == float(r["CPU Time"])
        assert got["spin_time_s"] == float(r["Spin Time"]) and got["overhead_time_s"] == float(r["Overhead Time"])
        # This era has no Effective Time column: CPU Time = Effective + Spin + Overhead.
        assert got["effective_time_s"] == pytest.approx(
            float(r["CPU Time"]) - float(r["Spin Time"]) - float(r["Overhead Time"]))
        assert got["CPU Time:Ideal"] == float(r["CPU Time:Ideal"])
    # The empty MPI column (",,") stays empty text, not zeros.
    assert set(t["Spin Time:Communication (MPI)"]) == {""}
    assert t["cpu_time_s"].sum() == pytest.approx(sum(float(r["CPU Time"]) for r in rows))
    assert t.attrs["units"]["cpu_time_s"] == "s"


def test_amplifier_2018_loop_rows(vt):
    rows = rows_of(vt / "amplxe2018_advanced_hotspots_loops.csv")
    p = tb_hwprof.read(vt / "amplxe2018_advanced_hotspots_loops.csv")
    t = p.summaries["cpu_hotspots"]
    assert len(t) == len(rows) == 148
    for r, got in zip(rows, t.to_dict("records")):
        assert got["cpu_time_s"] == float(r["CPU Time"])
        assert got["effective_time_s"] == float(r["CPU Time:Effective Time"])
        assert got["Instructions Retired"] == float(r["Instructions Retired"])
        assert got["function_full"] == r["Function (Full)"] and got["source_file"] == r["Source File"]
    loops = sum(1 for r in rows if r["Function"].startswith(("[Loop", "[Outside any loop]")))
    assert int(t["is_loop"].sum()) == loops
    assert t.loc[0, "name"] == "[Loop at line 4015 in gwce_new]" and t.loc[0, "cpu_time_s"] == 20.119159
    assert any("grouped by loop" in n for n in p.notes)
    assert any("2016+" in n for n in p.notes)


def test_loop_rows_keep_instructions_cpi_and_start_address(vt):
    """Rows of one name (the same loop inlined twice) are told apart by their start address; CPI and
    instructions retired come through as numbers, and /cpu_hotspots' table carries them."""
    from tb_hwprof.analysis.cpu_hotspots import hotspot_table
    rows = rows_of(vt / "amplxe2018_advanced_hotspots_loops.csv")
    t = tb_hwprof.read(vt / "amplxe2018_advanced_hotspots_loops.csv").summaries["cpu_hotspots"]
    number = lambda text: float(text) if text else None  # noqa: E731  (VTune leaves CPI empty for rows of no instructions)
    for r, got in zip(rows, t.to_dict("records")):
        assert got["instructions_retired"] == float(r["Instructions Retired"])
        assert (None if math.isnan(got["cpi_rate"]) else got["cpi_rate"]) == number(r["CPI Rate"])
        assert got["start_address"] == r["Start Address"]
    names = [r["Function"] for r in rows]
    repeated = {n for n in names if names.count(n) > 1}
    assert repeated, "the sample has loops of one name (why the address matters)"
    for name in repeated:
        addresses = [r["Start Address"] for r in rows if r["Function"] == name]
        assert len(set(addresses)) == len(addresses)
    shown = hotspot_table(t)
    by_address = {r["Start Address"]: r for r in rows}
    for got in shown.to_dict("records"):
        r = by_address[got["start_address"]]
        cpi = None if math.isnan(got["cpi_rate"]) else got["cpi_rate"]
        assert (got["name"], cpi, got["instructions_retired"]) == (
            r["Function"], number(r["CPI Rate"]), float(r["Instructions Retired"]))


def test_reports_without_those_columns_leave_them_empty(vt):
    from tb_hwprof.analysis.cpu_hotspots import hotspot_table
    header = rows_of(vt / "amplxe2015_hotspots_openmp.csv")[0].keys()
    assert not {"CPI Rate", "Instructions Retired", "Start Address"} & set(header)
    shown = hotspot_table(tb_hwprof.read(vt / "amplxe2015_hotspots_openmp.csv").summaries["cpu_hotspots"])
    assert shown["cpi_rate"].isna().all() and shown["instructions_retired"].isna().all()
    assert (shown["start_address"] == "").all()


def test_tab_summary_is_sniffed_and_kept_as_a_hierarchy(vt):
    path = vt / "vtune_summary_tab.csv"
    header = path.read_text().splitlines()[0]
    assert sniff_delimiter(header) == "\t"
    raw = [line.split("\t") for line in path.read_text().splitlines()[1:]]
    p = tb_hwprof.read(path)
    t = p.summaries["vtune_summary"]
    assert len(t) == len(raw)
    assert list(t["level"]) == [int(r[0]) for r in raw] and list(t["metric"]) == [r[1] for r in raw]
    by = dict(zip(t["path"], zip(t["value"], t["unit"], t["value_text"])))
    assert by["Elapsed Time"][0] == 0.620616
    assert by["Effective Physical Core Utilization"][:2] == (3.8, "%")
    assert by["Effective Physical Core Utilization:Effective Logical Core Utilization"][:2] == (1.9, "%")
    assert math.isnan(by["Collection and Platform Info:Collection start time"][0])  # a time of day, not a number
    assert by["Collection and Platform Info:CPU:Frequency"][0] == 2593749806
    assert by["Function"][2] == "Module | CPU Time | % of CPU Time(%)"  # the ragged row (written at level 0)
    assert p.devices[0].name.startswith("Intel(R) Xeon(R) E5/E7 v3") and p.devices[0].sm_count == 40
    assert p.devices[0].clock_mhz == pytest.approx(2593.749806)
    assert any("tab-delimited" in n for n in p.notes) and any("sub-table header" in n for n in p.notes)


@pytest.mark.parametrize("level", ["3", "1" + "0" * 40])
def test_a_summary_row_that_skips_a_level_is_damage(vt, tmp_path, level):
    """The summary lists a tree depth first: a row is at most one level below the row above.  A
    fuzzed level (a digit changed, a 41-digit number) skipped levels; the 41-digit one was read and
    written as a summary its own run could not read back."""
    lines = (vt / "vtune_summary_tab.csv").read_text().splitlines()
    assert [line.split("\t")[0] for line in lines[1:5]] == ["0"] * 4  # four rows at the top level
    lines[4] = "\t".join([level] + lines[4].split("\t")[1:])
    damaged = tmp_path / "summary.csv"
    damaged.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"line \d+: hierarchy level .* under a row of level 0 \(a level was skipped\)"):
        tb_hwprof.read(damaged)


def test_values_units_and_thousands_separators():
    assert parse_value("1,455") == (1455.0, "")
    assert parse_value("0.170s") == (0.17, "s")
    assert parse_value("3.8% (0.759 out of 20)") == (3.8, "%")
    assert parse_value("12,345,678.5") == (12345678.5, "")
    assert math.isnan(parse_value("15:17:07 26/11/2024 UTC")[0])
    assert math.isnan(parse_value("[Unknown]")[0])


# ---------------------------------------------------------------- SYNTHETIC layouts (no real sample)

UARCH_SEMICOLON = (  # SYNTHETIC: uarch-exploration columns as VTune 2023 names them, semicolon-delimited
    "Function;CPU Time;Clockticks;Instructions Retired;Retiring(%);Front-End Bound(%);Bad Speculation(%);"
    "Back-End Bound(%);Back-End Bound:Memory Bound(%);Back-End Bound:Core Bound(%);Module\n"
    'stream_triad;"1,234.5ms";"1,000,000";400000;12.0;5.0;3.0;80.0;70.0;10.0;a.out\n'
    "dgemm_kernel;2.5s;900000;2000000;45.0;10.0;5.0;40.0;8.0;32.0;a.out\n"
    "parse_input;0.5s;100000;80000;30.0;40.0;20.0;10.0;5.0;5.0;a.out\n"
    "hot_loop;0.1s;50000;190000;85.0;5.0;2.0;8.0;4.0;4.0;a.out\n")


def test_synthetic_uarch_report_gets_tma_labels(tmp_path):
    path = tmp_path / "uarch.csv"
    path.write_text(UARCH_SEMICOLON)
    p = tb_hwprof.read(path)
    t = p.summaries["cpu_hotspots"].set_index("name")
    assert t.loc["stream_triad", "cpu_time_s"] == pytest.approx(1.2345)  # "1,234.5ms"
    assert t.loc["stream_triad", "Clockticks"] == 1_000_000
    assert t["topdown_label"].to_dict() == {"stream_triad": "memory-bound", "dgemm_kernel": "core-bound",
                                            "parse_input": "front-end-bound", "hot_loop": "retiring"}
    assert "70% of pipeline slots" in t.loc["stream_triad", "topdown_reason"]
    assert any("semicolon-delimited" in n for n in p.notes)


def test_synthetic_hybrid_cpu_uses_p_core_columns(tmp_path):
    path = tmp_path / "hybrid.csv"  # SYNTHETIC: hybrid-CPU column prefixes, comma-delimited
    path.write_text("Function,CPU Time,Efficient-core (E-core):Back-End Bound(%),"
                    "Performance-core (P-core):Back-End Bound(%),Performance-core (P-core):Retiring(%),"
                    "Performance-core (P-core):Front-End Bound(%),Performance-core (P-core):Bad Speculation(%)\n"
                    "f,1.0,90.0,10.0,60.0,20.0,10.0\n")
    t = tb_hwprof.read(path).summaries["cpu_hotspots"]
    assert t.loc[0, "back_end_bound_pct"] == 10.0 and t.loc[0, "topdown_label"] == "front-end-bound"


def test_synthetic_gpu_computing_tasks(tmp_path):
    path = tmp_path / "gpu.csv"  # SYNTHETIC: `-report hotspots -group-by computing-task` layout
    path.write_text("Computing Task\tComputing Task:Total Time\tComputing Task:Instance Count\tEU Array:Stalled(%)\n"
                    "matmul\t0.250s\t10\t35.5\nreduce\t0.010s\t2\t60.0\n")
    p = tb_hwprof.read(path)
    t = p.summaries["gpu_computing_tasks"]
    assert list(t["Computing Task:Total Time"]) == [0.25, 0.01] and list(t["EU Array:Stalled(%)"]) == [35.5, 60.0]
    assert p.kernels.empty


def test_tma_thresholds():
    row = dict(retiring_pct=20, front_end_bound_pct=10, bad_speculation_pct=5, back_end_bound_pct=65,
               memory_bound_pct=21, core_bound_pct=44)
    assert topdown_label(row)[0] == "core-bound"  # both children flagged: the larger one
    assert topdown_label({**row, "memory_bound_pct": 50, "core_bound_pct": 15})[0] == "memory-bound"
    assert topdown_label({**row, "memory_bound_pct": 20, "core_bound_pct": 10})[0] == "back-end-bound"  # not > limits
    assert topdown_label(dict(retiring_pct=62, front_end_bound_pct=15, bad_speculation_pct=15,
                              back_end_bound_pct=8))[0] == "balanced"  # exactly at 15%: not over
    assert topdown_label(dict(retiring_pct=20, front_end_bound_pct=16, bad_speculation_pct=44,
                              back_end_bound_pct=20))[0] == "bad-speculation"
    assert topdown_label({})[0] == "unknown"
    import pandas as pd
    frame = classify_topdown(pd.DataFrame([row, {}]))
    assert list(frame["topdown_label"]) == ["core-bound", "unknown"]


# ---------------------------------------------------------------- CLI round trip

@pytest.mark.parametrize("name", [n for n, v in sorted(EXPECT.items()) if v])
def test_cli_export_and_load_run(vt, tmp_path, name):
    assert cli_main(["export", str(vt / name), "--logdir", str(tmp_path), "--run", "v", "--quiet"]) == 0
    back = tb_hwprof.load_run(tmp_path / "v")
    original = tb_hwprof.read(vt / name)
    assert back.kernels.empty and back.notes == original.notes
    (summary,) = original.summaries
    assert len(back.summaries[summary]) == len(original.summaries[summary])
    if summary == "cpu_hotspots":
        assert list(back.summaries[summary]["cpu_time_s"]) == list(original.summaries[summary]["cpu_time_s"])


def test_cli_text_report_is_one_line_error(vt, tmp_path, capsys):
    assert cli_main(["export", str(vt / "vtune2022_topdown_text.report"), "--logdir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "-format csv" in err
    assert not any(tmp_path.iterdir())
