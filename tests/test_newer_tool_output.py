"""What a newer profiler version writes is data, not damage (issue 27): each test takes a real sample
and rewrites one field the way a current or newer version of the tool writes it, then checks the
export reads it as the original's figures.  The rewrite is the only difference from the real file;
the expected figures come from exporting the unmodified sample (or from the sample's own cells).
"""
import csv
import io

import pytest

import tb_hwprof
from tb_hwprof.core.errors import InputError

from conftest import required, sample

# rocprofv3 (rocprofiler-sdk 1.x, ROCm 6.4+) writes Agent_Id as the agent index's kind and number:
# "Agent 1" (absolute, the default), "GPU 0" (--agent-index type-relative); older versions wrote "1".
AGENT_FORMS = ("Agent {}", "GPU {}")
V3_CSVS = ("rocprof/v3_docs_kernel_trace_newer.csv", "rocprof/v3_docs_counter_collection_newer.csv")


def rewritten(path, tmp_path, column, form):
    """A copy of the CSV with every cell of `column` written as `form.format(cell)`."""
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    at = rows[0].index(column)
    for row in rows[1:]:
        if row:
            row[at] = form.format(row[at])
    out = tmp_path / path.name
    with open(out, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows(rows)
    return out


@pytest.mark.parametrize("name", V3_CSVS)
@pytest.mark.parametrize("form", AGENT_FORMS)
def test_rocprofv3_agent_labels_read_as_their_device_number(name, form, samples_dir, tmp_path):
    original = sample(samples_dir, name)
    expected = tb_hwprof.read(original).kernels
    labelled = tb_hwprof.read(rewritten(original, tmp_path, "Agent_Id", form)).kernels
    assert labelled["device"].tolist() == expected["device"].tolist()
    assert labelled.drop(columns=["device"]).equals(expected.drop(columns=["device"]))


def test_an_agent_cell_that_is_no_label_is_still_damage(samples_dir, tmp_path):
    original = sample(samples_dir, V3_CSVS[0])
    with pytest.raises(InputError, match="column 'Agent_Id', data row 1: 'Agent one' is not a number"):
        tb_hwprof.read(rewritten(original, tmp_path, "Agent_Id", "Agent one"))


def merged(path, tmp_path, column, first=True):
    """The CSV's rows twice, as two processes' captures merged into one file (rocpd convert of two
    databases writes a leading Guid column; counter collection names each row's Process_Id): the
    second copy under another process, its dispatch ids restarting as that process's do."""
    rows = [r for r in csv.reader(io.StringIO(path.read_text(encoding="utf-8"))) if r]
    header, body = rows[0], rows[1:]
    if column in header:
        at = header.index(column)
        second = [r[:at] + [r[at] + "1"] + r[at + 1:] for r in body]
        out_rows = [header] + body + second
    else:
        out_rows = [[column] + header] + [["proc-a"] + r for r in body] + [["proc-b"] + r for r in body]
    out = tmp_path / f"merged_{path.name}"
    with open(out, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows(out_rows)
    return out


@pytest.mark.parametrize("name, column", [(V3_CSVS[0], "Guid"), (V3_CSVS[1], "Process_Id")])
def test_a_merged_multi_process_file_reads_each_process_dispatches(name, column, samples_dir, tmp_path):
    """Dispatch ids restart per process: the same id under two processes is two dispatches, each with
    its own counters; the same id twice within one process is still a damaged (repeated) row."""
    original = sample(samples_dir, name)
    expected = tb_hwprof.read(original)
    both = tb_hwprof.read(merged(original, tmp_path, column))
    assert len(both.kernels) == 2 * len(expected.kernels)
    half = len(expected.kernels)
    for part in (both.kernels.iloc[:half], both.kernels.iloc[half:]):
        assert part["name"].tolist() == expected.kernels["name"].tolist()
    for raws in (both.raw_metrics[:half], both.raw_metrics[half:]):
        assert [{k: v for k, v in r.items() if k not in ("Guid", "Process_Id")} for r in raws] == \
            [{k: v for k, v in r.items() if k not in ("Guid", "Process_Id")} for r in expected.raw_metrics]
    if name == V3_CSVS[0]:  # no process column: the second copy repeats each dispatch id
        doubled = tmp_path / "doubled.csv"
        lines = original.read_text(encoding="utf-8").rstrip("\n").split("\n")
        doubled.write_text("\n".join(lines + lines[1:]) + "\n", encoding="utf-8")
        with pytest.raises(InputError, match="a trace lists each dispatch once"):
            tb_hwprof.read(doubled)


# Nsight Systems declares these columns nullable in every schema we hold (2022.4 - 2026.1): a row
# without the value is what the schema allows a newer nsys to write, not damage.
NSYS = "nsys/testcuda_rtx4060ti_2026.1.1.sqlite"
NULLABLE = [("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid"), ("ThreadNames", "globalTid"), ("PROCESSES", "pid"),
            ("ENUM_CUDA_MEMCPY_OPER", "label")]


@pytest.mark.parametrize("table, column", NULLABLE)
def test_nsys_nullable_columns_left_null_export(table, column, samples_dir, tmp_path):
    import shutil
    import sqlite3
    original = sample(samples_dir, NSYS)
    copy = tmp_path / "null.sqlite"
    shutil.copyfile(original, copy)
    with sqlite3.connect(copy) as conn:
        declared = {row[1]: row[3] for row in conn.execute(f"PRAGMA table_info({table})")}
        assert declared[column] == 0, f"{table}.{column} is NOT NULL in this schema"
        assert conn.execute(f"UPDATE {table} SET {column} = NULL WHERE rowid = (SELECT min(rowid) FROM {table})"
                            ).rowcount == 1
    expected, nulled = tb_hwprof.read(original), tb_hwprof.read(copy)
    assert nulled.kernels.equals(expected.kernels)
    assert nulled.timeline is not None


def test_a_sysinfo_field_the_tool_could_not_query_is_absent_not_damage(samples_dir, tmp_path):
    """rocprof-compute writes "nan" for a field it cannot query on a GPU: read as an absent cell (the
    peaks that need it fall back as for an empty one); "inf" there is still a damaged cell."""
    import shutil
    original = required(samples_dir / "rocprof/omniperf_vcopy_mi200", "the MI200 omniperf workload", "TB_HWPROF_SAMPLES")
    copy = tmp_path / "workload"
    shutil.copytree(original, copy)
    rows = list(csv.reader(io.StringIO((copy / "sysinfo.csv").read_text(encoding="utf-8"))))
    at = rows[0].index("max_mclk")
    expected = tb_hwprof.read(original)
    for cell, empty in (("nan", ""), ("", "")):
        rows[1][at] = cell
        with open(copy / "sysinfo.csv", "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows(rows)
        profile = tb_hwprof.read(copy)
        assert profile.kernels.equals(expected.kernels)
        if cell == "nan":
            as_nan = profile.devices[0].to_dict()
        else:
            assert profile.devices[0].to_dict() == as_nan  # "nan" reads as the empty cell does
    rows[1][at] = "inf"
    with open(copy / "sysinfo.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)
    with pytest.raises(InputError, match="max_mclk is 'inf', not a finite number"):
        tb_hwprof.read(copy)


@pytest.mark.parametrize("device_id", ["cuda:0", {"index": 0}, 0.0])
def test_a_kineto_device_without_an_integer_id_is_left_out(device_id, samples_dir, tmp_path):
    """A deviceProperties entry whose id is not an integer (another writer's form) is left out of the
    devices, as one without an id; the trace's operators and kernels read as before."""
    import json
    original = sample(samples_dir, "torch/kineto_h100_cuda129_small.json")
    document = json.loads(original.read_text(encoding="utf-8"))
    assert isinstance(document["deviceProperties"][0]["id"], int)
    document["deviceProperties"][0]["id"] = device_id
    copy = tmp_path / "trace.json"
    copy.write_text(json.dumps(document), encoding="utf-8")
    expected, read = tb_hwprof.read(original), tb_hwprof.read(copy)
    assert read.kernels.equals(expected.kernels)
    assert [d.id for d in read.devices] == [d.id for d in expected.devices][1:]


def test_a_vtune_summary_with_a_column_more_reads_its_three(samples_dir, tmp_path):
    """A summary report whose header has a column after Hierarchy Level / Metric Name / Metric Value
    (as a newer VTune could add, a unit or a description): the three read as before, the rest is noted."""
    original = sample(samples_dir, "vtune/vtune_summary_tab.csv")
    lines = original.read_text(encoding="utf-8").splitlines()
    widened = tmp_path / "summary.csv"
    widened.write_text("\n".join([lines[0] + "\tMetric Description"] + [line + "\tsomething" if line.count("\t") == 2
                                                                          else line for line in lines[1:]]) + "\n",
                       encoding="utf-8")
    expected, read = tb_hwprof.read(original), tb_hwprof.read(widened)
    assert read.summaries["vtune_summary"].equals(expected.summaries["vtune_summary"])
    added = [n for n in read.notes if n not in expected.notes]
    assert added == ["columns after Hierarchy Level, Metric Name, Metric Value left out: 'Metric Description'"]
    assert [n for n in read.notes if n in expected.notes] == expected.notes
