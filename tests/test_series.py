"""An optimisation series (issue 12): files exported together under one --run are steps in the order
given; each run's scalars sit at its step and the group's own event file holds them all, so
TensorBoard's Scalars tab draws lines.  Figures from ncu_report on the real armleth T4 series."""
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tb_hwprof import cli
from tb_hwprof.logdir import metadata

from conftest import ncu_actions, sample
from support_plugin import App

SERIES = ["ncu/armleth_t4_series/report_v2.ncu-rep", "ncu/armleth_t4_series/report_v3_loop_unroll.ncu-rep",
          "ncu/armleth_t4_series/report_v8_1d_1_per_thread_stripped.ncu-rep"]
TOTAL = metadata.SCALAR_PREFIX + "total_kernel_time_ms"


def scalar_points(run_dir, tag=TOTAL):
    events = EventAccumulator(str(run_dir), size_guidance={"tensors": 0})
    events.Reload()
    return [(e.step, e.tensor_proto.float_val[0]) for e in events.Tensors(tag)]


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
