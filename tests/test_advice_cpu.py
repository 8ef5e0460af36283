"""CPU advice rules (tb_hwprof/analysis/advice/cpu.py) and the advice registry.

The real VTune samples only make the spin rule fire (tests/test_plugin_cpu_amd.py checks it on the
Amplifier 2015 OpenMP report against the csv module). No sample holds Python GIL functions or
top-down columns, so those rules are checked on the SYNTHETIC tables below, written with the
columns the VTune reader produces; no test here claims they come from a real profile.
"""
import pandas as pd
import pytest

from tb_hwprof.analysis import advice
from tb_hwprof.analysis.advice import cpu
from tb_hwprof.core.findings import Finding
from tb_hwprof.analysis.cpu_hotspots import hotspot_table, totals
from tb_hwprof.core.model import Profile, Provenance, normalise_kernels


def profile_of(rows):
    table = pd.DataFrame(rows)
    return Profile(Provenance("vtune", "", "synthetic.csv", "", "vtune-csv"), [], normalise_kernels([]),
                   summaries={"cpu_hotspots": table})


def row(name, module, cpu_s, spin_s=0.0, **topdown):
    return {"name": name, "module": module, "cpu_time_s": cpu_s, "spin_time_s": spin_s, "overhead_time_s": 0.0,
            **topdown}


def ids(p):
    return [a.id for a in advice.advise(p)]


def test_registry_calls_the_cpu_module_and_needs_a_table():
    empty = Profile(Provenance("ncu", "", "x", "", "ncu-rep"), [], normalise_kernels([]))
    assert advice.advise(empty) == [] and "cpu" in advice.DOMAINS
    found = advice.advise(profile_of([row("f", "a.out", 1.0, 0.5)]))
    assert [f.id for f in found] == ["cpu.spin"]
    for finding in found:
        assert isinstance(finding, Finding) and finding.severity in advice.SEVERITIES
        assert finding.text and finding.remedy and "threshold" in finding.text
        assert {f.unit for f in finding.figures.values()} <= {"s", "%", ""}
        assert finding.figures["spin_time_s"].unit == "s" and finding.figures["spin_pct"].unit == "%"


def test_gil_functions_while_data_loading():  # SYNTHETIC: a PyTorch loader thread fighting the training thread
    rows = [row("take_gil", "libpython3.10.so.1.0", 0.9), row("drop_gil", "libpython3.10.so.1.0", 0.3),
            row("PyEval_RestoreThread", "libpython3.10.so.1.0", 0.2),
            row("pthread_cond_timedwait", "libpython3.10.so.1.0", 0.1),  # counted: attributed to libpython
            row("pthread_cond_wait", "libc.so.6", 5.0),  # not counted: any thread may wait in libc
            row("_PyEval_EvalFrameDefault", "libpython3.10.so.1.0", 3.5),  # running Python, not the GIL
            row("conv2d", "libtorch_cpu.so", 10.0)]
    [gil] = [a for a in advice.advise(profile_of(rows)) if a.id == "cpu.gil"]
    cpu_s = 0.9 + 0.3 + 0.2 + 0.1 + 5.0 + 3.5 + 10.0
    assert gil.figure("gil_time_s") == pytest.approx(1.5)
    assert gil.figure("gil_pct") == pytest.approx(100 * 1.5 / cpu_s)
    assert [t["name"] for t in gil.figure("top")] == ["take_gil", "drop_gil", "PyEval_RestoreThread"]
    # libtorch_cpu.so in the modules: PyTorch's lever
    assert "DataLoader(num_workers>0" in gil.remedy and "processes instead of threads" in gil.remedy


def test_gil_remedy_without_pytorch_is_plain_python():  # SYNTHETIC: the same GIL churn, no torch module
    rows = [row("take_gil", "libpython3.10.so.1.0", 0.9), row("drop_gil", "libpython3.10.so.1.0", 0.3),
            row("parse_records", "libparser.so", 3.0)]
    [gil] = [a for a in advice.advise(profile_of(rows)) if a.id == "cpu.gil"]
    assert "ProcessPoolExecutor" in gil.remedy
    assert "torch" not in gil.remedy and "DataLoader" not in gil.remedy


def test_gil_under_threshold_is_silent():  # SYNTHETIC
    cpu_s = 100.0
    just_under = cpu.GIL_SHARE_PCT / 100 * cpu_s
    rows = [row("take_gil", "libpython3.11.so", just_under), row("work", "a.out", cpu_s - just_under)]
    assert "cpu.gil" not in ids(profile_of(rows))  # at the threshold, not over it


def test_spin_threshold_boundary():  # SYNTHETIC
    at = [row("f", "a.out", 10.0, spin_s=cpu.SPIN_SHARE_PCT / 10)]
    assert "cpu.spin" not in ids(profile_of(at))
    over = [row("f", "a.out", 10.0, spin_s=cpu.SPIN_SHARE_PCT / 10 + 0.01)]
    [spin] = advice.advise(profile_of(over))
    assert spin.severity == "medium" and "OMP_WAIT_POLICY" not in spin.remedy  # not an OpenMP module


def test_tma_memory_and_front_end_rules():  # SYNTHETIC: uarch-exploration percentages of pipeline slots
    td = dict(retiring_pct=15.0, bad_speculation_pct=3.0)
    rows = [row("stream_triad", "a.out", 6.0, front_end_bound_pct=2.0, back_end_bound_pct=80.0,
                memory_bound_pct=70.0, core_bound_pct=10.0, **td),
            row("interp_dispatch", "a.out", 3.0, front_end_bound_pct=45.0, back_end_bound_pct=10.0,
                memory_bound_pct=5.0, core_bound_pct=5.0, **td),
            row("tiny", "a.out", 1.0, front_end_bound_pct=5.0, back_end_bound_pct=5.0, **td)]
    found = {a.id: a for a in advice.advise(profile_of(rows))}
    assert set(found) == {"cpu.memory", "cpu.frontend"}
    assert found["cpu.memory"].figure("time_s") == 6.0 and found["cpu.memory"].figure("pct") == 60.0
    assert found["cpu.memory"].severity == "high" and "block" in found["cpu.memory"].remedy
    assert found["cpu.frontend"].figure("pct") == 30.0 and "profile-guided" in found["cpu.frontend"].remedy


def test_hotspot_table_order_shares_and_missing_columns():  # SYNTHETIC
    table = pd.DataFrame([{"name": "b", "cpu_time_s": 1.0}, {"name": "a", "cpu_time_s": 3.0},
                          {"name": "c", "cpu_time_s": float("nan")}])
    frame = hotspot_table(table)
    assert list(frame["name"]) == ["a", "b", "c"]  # self time, largest first; missing last
    assert list(frame["self_pct"][:2]) == [75.0, 25.0]
    assert frame["spin_pct"].isna().all()  # no Spin Time column: no share, not 0%
    assert set(frame["topdown_label"]) == {"unknown"}
    assert totals(frame)["spin_pct"] is None and totals(frame)["self_time_s"] == 4.0
