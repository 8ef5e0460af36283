"""The `ncu --csv` reader against the real CSVs in the samples.

gene_v100: a 2020 `--metrics` run (old long header) whose .ncu-rep from the same run is also
held, so every value can be checked against NVIDIA's own ncu_report.  esmm_a10g: a 2023
`--metrics` run (newer header, thousands separators) with no .ncu-rep, checked against a plain
csv-module parse written out in the test.
"""
import csv
import math
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest

import tb_hwprof
from tb_hwprof.readers.detect import sniff
from tb_hwprof.core.errors import InputError
from tb_hwprof.readers.nvidia import ncu_csv
from tb_hwprof.readers.nvidia.ncu_csv import read_ncu_csv
from tb_hwprof.readers.nvidia.ncu_rep import read_ncu_rep

from conftest import sample

REPO = Path(__file__).resolve().parent.parent
GENE_CSV = "ncu/gene_v100_cli_flops_2020_ncu-csv.csv"
GENE_REP = "ncu/gene_v100_cli_flops_2020.ncu-rep"
ESMM_CSV = "ncu/esmm_a10g_cli_metrics_ncu-csv.csv"
VTUNE_CSV = "vtune/amplxe2015_hotspots_openmp.csv"


def csv_rows_by_launch(path):
    """{launch ID: {metric name: (unit, value text)}} straight from the csv module."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    by_launch = defaultdict(dict)
    for row in rows:
        by_launch[int(row["ID"])][row["Metric Name"]] = (row["Metric Unit"], row["Metric Value"])
    return by_launch, rows


def is_missing(value):
    return value == "" or (isinstance(value, float) and math.isnan(value))


# ---------------------------------------------------------------------------- (a) gene: CSV == .ncu-rep
def test_gene_csv_equals_ncu_rep_launch_by_launch(samples_dir, ncu_report_module):
    csv_path, rep_path = sample(samples_dir, GENE_CSV), sample(samples_dir, GENE_REP)
    from_csv, from_rep = read_ncu_csv(csv_path), read_ncu_rep(rep_path)
    assert from_csv.provenance.source_format == "ncu-csv-long"
    assert len(from_csv.kernels) == len(from_rep.kernels) == 12
    for ours, theirs in zip(from_csv.kernels.to_dict("records"), from_rep.kernels.to_dict("records")):
        assert ours["demangled_name"] == theirs["demangled_name"]
        assert ours["name"] == theirs["name"] == "kernel_assign_6"
        # The FLOP columns must be there (the CSV holds the dadd/dmul/dfma counts) and equal.
        for column in ("flops_fp64", "flops"):
            assert not math.isnan(ours[column]) and ours[column] == theirs[column], (ours["launch_id"], column)
        # Every other column the CSV could fill equals the .ncu-rep's.
        for column, value in ours.items():
            if not is_missing(value):
                assert value == theirs[column], (ours["launch_id"], column, value, theirs[column])


def test_gene_csv_metrics_equal_ncu_report(samples_dir, ncu_report_module):
    """Each metric of the CSV, launch by launch, equals ncu_report's metric_by_name value."""
    csv_path, rep_path = sample(samples_dir, GENE_CSV), sample(samples_dir, GENE_REP)
    raw = read_ncu_csv(csv_path).raw_metrics
    by_launch, _ = csv_rows_by_launch(csv_path)
    ctx = ncu_report_module.load_report(str(rep_path))
    assert ctx.num_ranges() == 1 and ctx.range_by_idx(0).num_actions() == len(raw) == len(by_launch)
    for launch_id, metrics in sorted(by_launch.items()):
        action = ctx.range_by_idx(0).action_by_idx(launch_id)
        assert set(metrics) <= set(raw[launch_id])
        for name, (value, _unit) in raw[launch_id].items():
            theirs = action.metric_by_name(name)
            if name in metrics:
                assert theirs is not None, name
            if theirs is not None:  # also the Context/Stream columns (launch__context_id, ...)
                assert value == float(theirs.value()), (launch_id, name, value, theirs.value())


def test_gene_csv_device_and_rules(samples_dir):
    profile = read_ncu_csv(sample(samples_dir, GENE_CSV))
    assert [d.id for d in profile.devices] == [0]  # the old header has no Device/CC column
    assert profile.provenance.tool == "ncu" and profile.provenance.tool_version == ""
    assert profile.rules == [[]] * 12  # no rule columns in a --metrics run
    assert profile.kernels["context"].tolist() == [1.0] * 12
    assert profile.kernels["stream"].tolist() == [7.0] * 12


# ---------------------------------------------------------------------------- (b) esmm: CSV == csv module
def test_esmm_values_equal_plain_csv_parse(samples_dir):
    path = sample(samples_dir, ESMM_CSV)
    kernels = read_ncu_csv(path).kernels
    by_launch, _ = csv_rows_by_launch(path)
    assert len(kernels) == len(by_launch) == 9
    for launch_id, metrics in sorted(by_launch.items()):
        row = kernels.iloc[launch_id]

        def number(name, unit):
            printed_unit, text = metrics[name]
            assert printed_unit == unit  # base units here, so no scaling to redo
            return float(text.replace(",", ""))  # "32,746,880" -> 32746880.0

        duration = number("gpu__time_duration.sum", "nsecond")
        dram = number("dram__bytes.sum", "byte")
        fadd = number("sm__sass_thread_inst_executed_op_fadd_pred_on.sum", "inst")
        fmul = number("sm__sass_thread_inst_executed_op_fmul_pred_on.sum", "inst")
        ffma = number("sm__sass_thread_inst_executed_op_ffma_pred_on.sum", "inst")
        assert row["duration_ns"] == duration
        assert row["dram_bytes"] == dram
        assert row["flops_fp32"] == fadd + fmul + 2 * ffma
        assert row["flops"] == row["flops_fp32"]
        assert row["flop_per_s"] == pytest.approx(row["flops"] / (duration * 1e-9), rel=1e-12)
    # Launch 0, written out: basic(...) ran 10,776,576 ns, 1,073,741,824 FFMA + 1,048,576 FMUL.
    first = kernels.iloc[0]
    assert first["duration_ns"] == 10776576.0 and first["dram_bytes"] == 32746880.0
    assert first["flops_fp32"] == 0 + 1048576 + 2 * 1073741824
    assert first["name"] == "basic"
    assert first["demangled_name"] == "basic(int, int, int, const float *, const float *, float *)"


def test_esmm_raw_metrics_hold_each_op_count(samples_dir):
    path = sample(samples_dir, ESMM_CSV)
    raw = read_ncu_csv(path).raw_metrics
    by_launch, _ = csv_rows_by_launch(path)
    for launch_id, metrics in sorted(by_launch.items()):
        for op in ("fadd", "fmul", "ffma"):
            name = f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum"
            assert raw[launch_id][name] == [float(metrics[name][1].replace(",", "")), "inst"]
        assert raw[launch_id]["gpu__time_duration.sum"][1] == "ns"  # named as ncu_report names it


def test_esmm_launch_columns(samples_dir):
    """Block Size / Grid Size / Device / CC columns become the launch and device fields."""
    path = sample(samples_dir, ESMM_CSV)
    profile = read_ncu_csv(path)
    with open(path, newline="") as f:
        first_rows = {}
        for row in csv.DictReader(f):
            first_rows.setdefault(int(row["ID"]), row)
    for launch_id, row in first_rows.items():
        k = profile.kernels.iloc[launch_id]
        assert k["block"] == row["Block Size"] and k["grid"] == row["Grid Size"]
        bx, by, bz = (int(v) for v in row["Block Size"].strip("()").split(","))
        gx, gy, gz = (int(v) for v in row["Grid Size"].strip("()").split(","))
        assert k["block_size"] == bx * by * bz and k["grid_size"] == gx * gy * gz
        assert k["device"] == float(row["Device"]) and k["stream"] == float(row["Stream"])
    assert profile.kernels.iloc[3]["grid"] == "(16, 16, 1)" and profile.kernels.iloc[3]["block"] == "(512, 1, 1)"
    assert len(profile.devices) == 1 and profile.devices[0].compute_capability == "8.6"


# ---------------------------------------------------------------------------- layouts derived from real data
def test_esmm_rewritten_as_page_raw_reads_the_same(samples_dir, tmp_path):
    """Not real ncu output: the real esmm rows pivoted here into the `--page raw` layout
    (header of metric names, units row, one row per launch) must give the same kernels."""
    path = sample(samples_dir, ESMM_CSV)
    by_launch, rows = csv_rows_by_launch(path)
    launch_cols = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
                   "Block Size", "Grid Size", "Device", "CC"]
    names = sorted(by_launch[0])
    first = {}
    for row in rows:
        first.setdefault(int(row["ID"]), row)
    wide = tmp_path / "esmm_pivoted_raw.csv"
    with open(wide, "w", newline="") as f:
        out = csv.writer(f, quoting=csv.QUOTE_ALL)
        out.writerow(launch_cols + names)
        out.writerow([""] * len(launch_cols) + [by_launch[0][n][0] for n in names])
        for launch_id, metrics in sorted(by_launch.items()):
            out.writerow([first[launch_id][c] for c in launch_cols] + [metrics[n][1] for n in names])
    long_profile, raw_profile = read_ncu_csv(path), read_ncu_csv(wide)
    assert raw_profile.provenance.source_format == "ncu-csv-raw"
    pd.testing.assert_frame_equal(raw_profile.kernels, long_profile.kernels)
    assert raw_profile.raw_metrics == long_profile.raw_metrics


def test_prof_preamble_and_app_output_are_skipped(samples_dir, tmp_path):
    """The real esmm bytes behind ncu's log lines and program output, as `ncu --csv ./a.out > f` gives."""
    real = sample(samples_dir, ESMM_CSV).read_bytes()
    captured = (b"==PROF== Connected to process 17333 (/home/user/a.out)\n"
                b"==WARNING== some launches were not profiled\n"
                b"result ok, 1.23, 4.56\n"
                b"==PROF== Disconnected from process 17333\n" + real)
    assert ncu_csv.looks_like_ncu_csv(captured[:64 << 10])
    path = tmp_path / "captured.csv"
    path.write_bytes(captured)
    pd.testing.assert_frame_equal(read_ncu_csv(path).kernels, read_ncu_csv(sample(samples_dir, ESMM_CSV)).kernels)


# ---------------------------------------------------------------------------- (c) detection and errors
def test_both_real_csvs_sniff_as_ncu_csv(samples_dir):
    assert sniff(sample(samples_dir, GENE_CSV)) == "ncu-csv"
    assert sniff(sample(samples_dir, ESMM_CSV)) == "ncu-csv"


def test_other_csv_is_rejected_in_one_line(samples_dir, tmp_path):
    """Another profiler's CSV is not ncu's (the ncu reader says how to export one), and a CSV
    of no profiler at all is no report (detection says so) - both in one line naming the file."""
    vtune = sample(samples_dir, VTUNE_CSV)
    assert not ncu_csv.looks_like_ncu_csv(vtune.read_bytes())
    with pytest.raises(InputError) as read:
        read_ncu_csv(vtune)
    plain = tmp_path / "training_log.csv"
    plain.write_text("step,loss,lr\n1,2.31,0.001\n2,2.05,0.001\n")  # not a report of any tool
    with pytest.raises(InputError) as sniffed:
        sniff(plain)
    for error, path in ((sniffed.value, plain), (read.value, vtune)):
        assert "\n" not in str(error) and str(path) in str(error)
    assert "ncu --csv --page details" in str(read.value) and "--page raw" in str(read.value)


def test_every_non_ncu_sample_is_rejected(samples_dir):
    """No CSV or text file of another profiler sniffs as ncu's."""
    for path in sorted(samples_dir.rglob("*")):
        if path.is_file() and path.suffix in (".csv", ".txt", ".report") and "ncu-csv" not in path.name:
            assert not ncu_csv.looks_like_ncu_csv(path.read_bytes()[:64 << 10]), path


def test_empty_and_header_only_files(tmp_path, samples_dir):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(InputError, match="empty"):
        read_ncu_csv(empty)
    header_only = tmp_path / "header_only.csv"
    header_only.write_text(sample(samples_dir, ESMM_CSV).read_text().splitlines()[0] + "\n")
    with pytest.raises(InputError, match="no profiled kernel launches"):
        read_ncu_csv(header_only)


# ---------------------------------------------------------------------------- (d) CLI round trip
@pytest.mark.parametrize("name", [GENE_CSV, ESMM_CSV])
def test_cli_export_and_load_run(samples_dir, tmp_path, name):
    path = sample(samples_dir, name)
    logdir = tmp_path / "logs"
    done = subprocess.run([sys.executable, "-m", "tb_hwprof", "export", str(path), "--logdir", str(logdir),
                           "--run", "x"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    loaded, read = tb_hwprof.load_run(logdir / "x"), tb_hwprof.read(path)
    pd.testing.assert_frame_equal(loaded.kernels, read.kernels)
    assert loaded.raw_metrics == read.raw_metrics
    assert loaded.provenance.source_format == "ncu-csv-long"


# ---------------------------------------------------------------------------- parsing helpers
@pytest.mark.parametrize("unit, factor, base", [
    ("nsecond", 1, "ns"), ("usecond", 1e3, "ns"), ("us", 1e3, "ns"), ("msecond", 1e6, "ns"), ("second", 1e9, "ns"),
    ("byte", 1, "byte"), ("Kbyte", 1e3, "byte"), ("KB", 1e3, "byte"), ("Mbyte", 1e6, "byte"), ("GB", 1e9, "byte"),
    ("byte/second", 1, "byte/s"), ("Gbyte/second", 1e9, "byte/s"), ("GB/s", 1e9, "byte/s"),
    ("Kbyte/block", 1e3, "byte/block"), ("cycle/nsecond", 1e9, "hz"), ("cycle/usecond", 1e6, "hz"),
    ("Ghz", 1e9, "hz"), ("MHz", 1e6, "hz"), ("hz", 1, "hz"), ("%", 1, "%"), ("inst", 1, "inst"),
    ("register/thread", 1, "register/thread"), ("", 1, ""),
])
def test_unit_scale(unit, factor, base):
    assert ncu_csv.unit_scale(unit) == (factor, base)


def test_value_parsing():
    assert ncu_csv.parse_value("32,746,880") == 32746880.0
    assert ncu_csv.parse_value("1,234.5") == 1234.5
    assert math.isnan(ncu_csv.parse_value("n/a")) and math.isnan(ncu_csv.parse_value(""))
    assert ncu_csv.parse_value("CachePreferNone") == "CachePreferNone"
    assert ncu_csv.parse_value("866,86") == "866,86"  # not thousands grouping: left as text, not guessed
    assert ncu_csv.base_value("3.94", "usecond")[:2] == (3940.0, "ns")  # exact, no float residue


def test_details_labels_map_to_metric_names():
    assert ncu_csv.metric_for_label("Duration", "ns") == "gpu__time_duration.sum"
    assert ncu_csv.metric_for_label("Memory Throughput", "%") == \
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
    assert ncu_csv.metric_for_label("Memory Throughput", "byte/s") == "dram__bytes.sum.per_second"
    assert ncu_csv.metric_for_label("Achieved Occupancy", "%") == "sm__warps_active.avg.pct_of_peak_sustained_active"
    assert ncu_csv.metric_for_label("dram__bytes.sum", "byte") == "dram__bytes.sum"
    assert ncu_csv.metric_for_label("Some New Label", "") == "Some New Label"


def test_rule_columns_become_rule_results():
    """The 2023+ long layout's rule columns, in the shape read_ncu_rep gives (MsgType numbers)."""
    cells = {"Rule Name": "SOLBottleneck", "Section Name": "SpeedOfLight", "Rule Type": "OPT",
             "Rule Description": "Memory is more heavily utilized than Compute.",
             "Estimated Speedup Type": "global", "Estimated Speedup": "50"}
    rule = ncu_csv.rule_result(lambda column: cells.get(column, ""))
    assert rule == {"rule": "SOLBottleneck", "name": "", "section": "SpeedOfLight", "type": 2, "title": "",
                    "message": "Memory is more heavily utilized than Compute.", "speedup_type": "global",
                    "estimated_speedup_pct": 50.0}
    assert ncu_csv.RULE_TYPES["WRN"] == ncu_report_msg_type("WARNING")


def ncu_report_msg_type(name):
    ncu_report = pytest.importorskip("ncu_report")
    return getattr(ncu_report, f"MsgType_{name}")


def test_function_name_matches_ncu_report_on_every_real_launch(samples_dir, ncu_report_module):
    """The CSV only prints the demangled name; the FUNCTION name is derived from it the way
    ncu_report gives it, checked on every launch of every real .ncu-rep."""
    checked = 0
    for path in sorted((samples_dir / "ncu").rglob("*.ncu-rep")):
        ctx = ncu_report_module.load_report(str(path))
        for r in range(ctx.num_ranges()):
            rng = ctx.range_by_idx(r)
            for a in range(rng.num_actions()):
                action = rng.action_by_idx(a)
                demangled = action.name(ncu_report_module.IAction.NameBase_DEMANGLED)
                assert ncu_csv.function_name(demangled) == action.name(ncu_report_module.IAction.NameBase_FUNCTION)
                checked += 1
    assert checked > 0
