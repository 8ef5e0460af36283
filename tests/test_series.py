"""An optimisation series (issue 12): files exported together under one --run are steps in the order
given; each run's scalars sit at its step and the group's own event file holds them all, so
TensorBoard's Scalars tab draws lines.  Figures from ncu_report on the real armleth T4 series."""
import pytest

from tb_hwprof.app import cli
from tb_hwprof.logdir import metadata

from conftest import ncu_actions, sample
from support_plugin import App
from support_series import CHAIN, ORACLE, oracle_step, scalar_points

SERIES = ["ncu/armleth_t4_series/report_v2.ncu-rep", "ncu/armleth_t4_series/report_v3_loop_unroll.ncu-rep",
          "ncu/armleth_t4_series/report_v8_1d_1_per_thread_stripped.ncu-rep"]


def kernel_time_ms(ncu_report, path) -> float:
    """Sum of gpu__time_duration.sum over the report's launches, read with NVIDIA's own module."""
    return sum(a["gpu__time_duration.sum"].as_double() for a in ncu_actions(ncu_report, path)) / 1e6


@pytest.fixture
def series_files(samples_dir):
    return [sample(samples_dir, name) for name in SERIES]


def test_a_series_is_drawn_as_lines_at_the_steps_given(series_files, tmp_path, ncu_report_module):
    assert cli.main(["export", *map(str, series_files), "--logdir", str(tmp_path), "--run", "tuning", "--quiet"]) == 0
    expected = [kernel_time_ms(ncu_report_module, f) for f in series_files]
    series = scalar_points(tmp_path / "tuning")
    assert [step for step, _ in series] == [0, 1, 2]
    assert [v for _, v in series] == pytest.approx(expected, rel=1e-6)
    for step, f in enumerate(series_files):  # each run at its own step, the same figure
        own = scalar_points(tmp_path / "tuning" / f.name[: -len(".ncu-rep")])
        assert own == [series[step]]
    # The series is TensorBoard's run (Scalars), not one of ours: the tab lists the three runs only.
    assert sorted(r["run"] for r in App(tmp_path).json("/runs")["runs"]) == sorted(
        f"tuning/{f.name[: -len('.ncu-rep')]}" for f in series_files)


def test_step_starts_a_series_where_asked_and_overwrite_replaces_its_file(series_files, tmp_path):
    args = ["export", *map(str, series_files[:2]), "--logdir", str(tmp_path), "--run", "tuning", "--quiet"]
    assert cli.main(args + ["--step", "5"]) == 0
    assert [step for step, _ in scalar_points(tmp_path / "tuning")] == [5, 6]
    assert cli.main(args + ["--overwrite"]) == 0
    assert [step for step, _ in scalar_points(tmp_path / "tuning")] == [0, 1]
    assert len([p for p in (tmp_path / "tuning").iterdir() if p.name.endswith(metadata.SERIES_EVENTS_SUFFIX)]) == 1


def test_a_file_exported_alone_takes_step(series_files, tmp_path):
    assert cli.main(["export", str(series_files[2]), "--logdir", str(tmp_path), "--run", "v8", "--step", "7",
                     "--quiet"]) == 0
    assert [step for step, _ in scalar_points(tmp_path / "v8")] == [7]
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(metadata.SERIES_EVENTS_SUFFIX)]


# -- the Series view's document (/series) ----------------------------------------------------------
@pytest.fixture(scope="module")
def series_app(tmp_path_factory, samples_dir):
    logdir = tmp_path_factory.mktemp("series_view")
    files = [str(sample(samples_dir, name)) for name in CHAIN]
    assert cli.main(["export", *files, "--logdir", str(logdir), "--run", "tuning", "--step", "3", "--quiet"]) == 0
    # A run beside the series' folder, and a lone run: neither is a step of it.
    assert cli.main(["export", files[0], "--logdir", str(logdir), "--run", "alone", "--quiet"]) == 0
    return App(logdir)


def test_the_series_follows_the_renamed_kernel_step_by_step(series_app, samples_dir, ncu_report_module):
    runs = [f"tuning/{name.rsplit('/', 1)[1][: -len('.ncu-rep')]}" for name in CHAIN]
    doc = series_app.json("/series", run=runs[2])  # any step names its series
    assert doc["group"] == "tuning" and doc["steps"] == [{"step": 3 + i, "run": r} for i, r in enumerate(runs)]
    assert doc["metrics"] == list(ORACLE)
    [chain] = doc["chains"]  # one kernel per report, renamed twice: still one line
    expected = [oracle_step(ncu_report_module, sample(samples_dir, name)) for name in CHAIN]
    assert chain["labels"] == list(dict.fromkeys(e["name"] for e in expected))
    assert len(chain["labels"]) == 3
    for point, want in zip(chain["points"], expected):
        assert point["label"] == want["name"]
        for metric in ORACLE:
            assert point[metric] == pytest.approx(want[metric], rel=1e-6), (point["key"], metric)
    assert [p["paired_by"] for p in chain["points"]] == [None, "mangled", "only-one-left", "only-one-left"]


def test_a_run_outside_a_series_has_none(series_app):
    doc = series_app.json("/series", expect=404, run="alone")
    assert "not a step of a series" in doc["error"]


def test_chains_start_and_end_where_kernels_appear_and_vanish(samples_dir, ncu_report_module):
    """raytracer (build_meshes, build_lights, trace) -> lakshya (naive_gemm) -> raytracer: nothing pairs
    across the change of program, so each step's kernels are chains of their own, absent (None)
    elsewhere, and the third step's kernels are new chains too (a chain never skips a step)."""
    import tb_hwprof
    from tb_hwprof.analysis import compare
    from support_compare import ncu_launches
    files = [sample(samples_dir, "ncu/raytracer_gtx1660s_2021.1.0.ncu-rep"),
             sample(samples_dir, "ncu/lakshya_gtx1660s_full_2024.1.1.ncu-rep")]
    sets = [compare.kernel_set(tb_hwprof.read(f).kernels) for f in (files[0], files[1], files[0])]
    chains = compare.series_chains(sets)
    present = sorted(tuple(p is not None for p in c["points"]) for c in chains)
    assert present == sorted([(True, False, False)] * 3 + [(False, True, False)] + [(False, False, True)] * 3)
    # Each chain's time at its step is the report's own sum for that function (ncu_report).
    checked = 0
    for chain in chains:
        [(step, point)] = [(i, p) for i, p in enumerate(chain["points"]) if p is not None]
        f = files[1] if step == 1 else files[0]
        durations = [ns for name, ns, _ in ncu_launches(ncu_report_module, f) if name == point["label"]]
        assert durations and point["paired_by"] is None
        if all(d == d for d in durations):  # (a launch profiled without the duration metric has no total)
            assert point["duration_ns"] == pytest.approx(sum(durations))
            checked += 1
    assert checked >= 3
