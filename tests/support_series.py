"""The T4 optimisation series the Series tests follow (its reports and their ncu_report oracle),
shared by the local, browser and object-storage tests of /series."""
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from conftest import ncu_actions
from tb_hwprof.logdir import metadata

# The headline scalar a series draws a line of (each run's total kernel time).
TOTAL = metadata.SCALAR_PREFIX + "total_kernel_time_ms"

# The T4 series with its renames: matrix_addition2D (v2, v4) -> matrix_addition1D (v6) ->
# matrix_addition1D_stripped (v8); one kernel per report.
CHAIN = ["ncu/armleth_t4_series/report_v2.ncu-rep", "ncu/armleth_t4_series/report_v4_8_per_thread.ncu-rep",
         "ncu/armleth_t4_series/report_v6_1d_1_per_thread.ncu-rep",
         "ncu/armleth_t4_series/report_v8_1d_1_per_thread_stripped.ncu-rep"]
# Series metric -> the ncu metric it is read from (NVIDIA's names, read with ncu_report below).
ORACLE = {"duration_ns": "gpu__time_duration.sum",
          "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
          "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
          "memory_throughput_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
          "l1_hit_rate_pct": "l1tex__t_sector_hit_rate.pct", "l2_hit_rate_pct": "lts__t_sector_hit_rate.pct"}


def oracle_step(ncu_report, path) -> dict:
    """{series metric: value} of the report's one launch, and its function name, by ncu_report."""
    [action] = list(ncu_actions(ncu_report, path))
    return {"name": action.name(), **{m: action[n].as_double() for m, n in ORACLE.items()}}


def scalar_points(run_dir, tag=TOTAL):
    """(step, value) of every `tag` point in the event files of `run_dir`, read as TensorBoard reads them."""
    events = EventAccumulator(str(run_dir), size_guidance={"tensors": 0})
    events.Reload()
    return [(e.step, e.tensor_proto.float_val[0]) for e in events.Tensors(tag)]
