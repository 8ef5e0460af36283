"""Nsight Systems inputs besides the SQLite export: report containers (.nsys-rep / .qdrep) through
`nsys export` (a stub executable stands in for nsys) or a one-line error without it, and
`nsys stats --format csv` output."""
import csv
import hashlib
import io
import os
import shutil
import statistics
import stat
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import tb_hwprof
from tb_hwprof.readers.detect import sniff
from tb_hwprof.readers.nvidia.nsys_sqlite import read_nsys_sqlite
from tb_hwprof.readers.nvidia.nsys_stats import read_nsys_stats

from conftest import sample
from support_nsys import DLPROF, query

REPO = Path(__file__).resolve().parent.parent
STATS = "nsys/mineru_nsys_stats_stdout_2025.1.1.csv"
# Versions as PROVENANCE.md and the containers' own session records give them.
CONTAINERS = {"dlprof_rtx2070s_nvtx_2022.1.3.nsys-rep": "2022.1.3.3-1c7b5f7",
              "gpu4_streams_2022.4.2_rep_only.nsys-rep": "2022.4.2.1-df9881f",
              "mordred_quadro6000_2021.2.1.qdrep": "2021.2.1.58-642947b",
              "testcuda_rtx4060ti_2026.1.1.nsys-rep": "2026.1.1.204-261137176666v0"}

STUB = """#!/bin/sh
# Stands in for nsys in the tests: `nsys export --type sqlite --output OUT REPORT` copies a known
# real export (the same run as the report) to OUT; every call is logged.
echo "$@" >> "$STUB_LOG"
out=""
while [ $# -gt 0 ]; do
  case "$1" in --output|-o) out="$2"; shift ;; esac
  shift
done
if [ -n "$STUB_FAIL" ]; then echo "nsys: cannot open the report: $STUB_FAIL" >&2; exit 3; fi
cp "$STUB_SQLITE" "$out"
"""


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "tb_hwprof", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, env=env)


@pytest.fixture
def stub_nsys(tmp_path, samples_dir):
    """PATH with a stub `nsys` first; returns (env, log file)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "nsys"
    stub.write_text(STUB)
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    log = tmp_path / "nsys.log"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "STUB_LOG": str(log),
           "STUB_SQLITE": str(sample(samples_dir, DLPROF)), "PYTHONPATH": str(REPO)}
    return env, log


def without_nsys_env():
    """PATH holding only the Python interpreter's folder (no nsys there)."""
    folder = Path(sys.executable).parent
    assert not (folder / "nsys").exists()
    return {**os.environ, "PATH": str(folder), "PYTHONPATH": str(REPO)}


# ------------------------------------------------------------------ report containers
def test_container_with_nsys_on_path_is_exported_in_a_temp_folder(tmp_path, samples_dir, stub_nsys):
    env, log = stub_nsys
    user = tmp_path / "user"
    user.mkdir()
    rep = user / "run.nsys-rep"
    shutil.copyfile(sample(samples_dir, "nsys/dlprof_rtx2070s_nvtx_2022.1.3.nsys-rep"), rep)
    done = cli("export", rep, "--logdir", tmp_path / "runs", "--run", "rep", env=env)
    assert done.returncode == 0, done.stderr
    args = log.read_text().split()
    assert args[:4] == ["export", "--type", "sqlite", "--output"] and args[5] == str(rep)
    out = Path(args[4])
    assert out.name == "x.sqlite" and out.parent != user and not out.parent.exists()  # temp, deleted after
    assert sorted(p.name for p in user.iterdir()) == ["run.nsys-rep"]  # nothing beside the user's file
    back = tb_hwprof.load_run(tmp_path / "runs" / "rep")
    fresh = read_nsys_sqlite(sample(samples_dir, DLPROF))
    cols = ["name", "demangled_name", "start_ns", "end_ns", "duration_ns", "stream", "correlation_id"]
    pd.testing.assert_frame_equal(back.kernels[cols], fresh.kernels[cols], check_dtype=False)
    assert "nvtx_phases" in back.summaries
    assert "gpu_idle_gaps" in tb_hwprof.load_analysis(tmp_path / "runs" / "rep").summaries
    prov = back.provenance
    assert (prov.source_path, prov.source_format) == (str(rep.resolve()), "nsys-rep")
    assert prov.source_sha256 == hashlib.sha256(rep.read_bytes()).hexdigest()
    assert prov.tool_version == "2022.1.3.3"  # the export's own EXPORT_META_DATA
    assert (tmp_path / "runs" / "rep" / "plugins" / "tb_hwprof" / "timeline.json.gz").is_file()


def test_failing_nsys_export_is_one_line(tmp_path, samples_dir, stub_nsys):
    env, _ = stub_nsys
    rep = sample(samples_dir, "nsys/dlprof_rtx2070s_nvtx_2022.1.3.nsys-rep")
    done = cli("export", rep, "--logdir", tmp_path / "runs", env={**env, "STUB_FAIL": "bad magic"})
    assert done.returncode == 1
    line = done.stderr.strip().splitlines()[-1]
    assert "`nsys export --type sqlite` failed (exit 3: nsys: cannot open the report: bad magic)" in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("name", sorted(CONTAINERS))
def test_container_without_nsys_names_the_version_and_the_command(tmp_path, samples_dir, name):
    path = sample(samples_dir, f"nsys/{name}")
    assert sniff(path) == "nsys-rep"
    done = cli("export", path, "--logdir", tmp_path / "runs", env=without_nsys_env())
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    version = CONTAINERS[name]
    assert f"written by nsys {version}" in lines[0] and "not on PATH" in lines[0]
    assert f"nsys export --type sqlite --output report.sqlite {name}" in lines[0]
    assert f"nsys {version[:8].rstrip('.')}" in lines[0]  # the release to install, e.g. nsys 2022.4.2 or newer
    assert not (tmp_path / "runs").exists()


def test_file_named_like_a_container_without_the_header(tmp_path):
    fake = tmp_path / "x.nsys-rep"
    fake.write_bytes(b"not a report at all\n" * 10)
    with pytest.raises(tb_hwprof.core.errors.InputError, match="no report header"):
        sniff(fake)


# ------------------------------------------------------------------ nsys stats --format csv
def blocks_by_hand(text):
    """{report: rows} and skipped report names, by walking the lines once."""
    out, skipped, name, rows = {}, [], None, []
    for line in text.splitlines() + [""]:
        if line.startswith("Processing ["):
            name = line.split("/")[-1].split(".py]")[0]
        elif line.startswith("SKIPPED:"):
            skipped.append(name)
        elif line.strip() and name:
            rows.append(line)
        elif rows:
            out[name] = list(csv.reader(io.StringIO("\n".join(rows))))
            rows = []
    return out, skipped


def test_stats_csv_blocks_become_summaries(tmp_path, samples_dir):
    path = sample(samples_dir, STATS)
    assert sniff(path) == "nsys-stats-csv"
    text = path.read_text()
    blocks, skipped = blocks_by_hand(text)
    profile = tb_hwprof.read(path)
    assert set(profile.summaries) == set(blocks) == {"osrt_sum"}
    osrt = profile.summaries["osrt_sum"]
    header, *rows = blocks["osrt_sum"]
    assert header[:3] == ["Time (%)", "Total Time (ns)", "Num Calls"] and len(osrt) == len(rows) == 61
    for (pct, total, calls, avg, med, lo, hi, sd, name), row in zip(rows, osrt.itertuples()):
        assert (row.name, row.total_ns, row.num_calls, row.min_ns, row.max_ns) == (
            name, int(total), int(calls), int(lo), int(hi))
        assert (row.time_pct, row.avg_ns, row.med_ns, row.stddev_ns) == (float(pct), float(avg), float(med), float(sd))
    assert osrt.attrs["units"]["total_ns"] == "ns"
    assert profile.kernels.empty and profile.devices == []
    assert profile.provenance.tool == "nsys" and profile.provenance.tool_version == "2025.1.1"
    notes = [n for n in profile.notes if n.startswith("nsys stats skipped ")]
    assert len(notes) == len(skipped) == text.count("SKIPPED:") == 19
    assert any("cuda_gpu_kern_sum: " in n and "does not contain CUDA kernel data" in n for n in notes)
    run = tb_hwprof.export(path, tmp_path, "stats")
    back = tb_hwprof.load_run(run)
    pd.testing.assert_frame_equal(back.summaries["osrt_sum"], osrt)


def test_stats_csv_of_a_kernel_summary_built_from_a_real_export(tmp_path, samples_dir):
    """A bare cuda_gpu_kern_sum / cuda_gpu_mem_size_sum block (`nsys stats -o PREFIX` writes one per file),
    written here from independent SQL over the annikola export, read back."""
    db = sample(samples_dir, "nsys/annikola_gtx1050_2024.5.1.sqlite")
    rows = query(db, """SELECT s.value, count(*), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k
                        JOIN StringIds s ON s.id = k.demangledName GROUP BY 1 ORDER BY 3 DESC""")
    total = sum(r[2] for r in rows)
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["Time (%)", "Total Time (ns)", "Instances", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)",
                "StdDev (ns)", "Name"])
    for name, n, t in rows:
        durations = [d for (d,) in query(db, """SELECT k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k
                                               JOIN StringIds s ON s.id = k.demangledName WHERE s.value = ?""", name)]
        w.writerow([f"{100 * t / total:.1f}", t, n, f"{t / n:.1f}", f"{statistics.median(durations):.1f}",
                    min(durations), max(durations), f"{statistics.stdev(durations) if n > 1 else 0:.1f}", name])
    kern = tmp_path / "report_cuda_gpu_kern_sum.csv"
    kern.write_text(out.getvalue())
    assert sniff(kern) == "nsys-stats-csv"
    profile = read_nsys_stats(kern)
    table = profile.summaries["cuda_gpu_kern_sum"]
    assert list(zip(table["name"], table["instances"], table["total_ns"])) == rows
    assert profile.kernels.empty and any("kernels table is empty" in n for n in profile.notes)
    (count, size), = query(db, "SELECT count(*), sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1")
    mem = tmp_path / "mem.csv"
    mem.write_text("Processing [r.sqlite] with [/opt/nvidia/nsight-systems/2024.5.1/host-linux-x64/reports/"
                   "cuda_gpu_mem_size_sum.py]... \n"
                   "Total (MB),Count,Avg (MB),Med (MB),Min (MB),Max (MB),StdDev (MB),Operation\n"
                   f"{size / 1e6:.6f},{count},0,0,0,0,0,[CUDA memcpy Host-to-Device]\n")
    sizes = read_nsys_stats(mem)
    assert sizes.provenance.tool_version == "2024.5.1"
    row = sizes.summaries["cuda_gpu_mem_size_sum"].iloc[0]
    assert (row["count"], row["operation"]) == (count, "[CUDA memcpy Host-to-Device]")
    assert row["total_bytes"] == pytest.approx(size) and sizes.summaries["cuda_gpu_mem_size_sum"].attrs["units"][
        "total_bytes"] == "bytes"
