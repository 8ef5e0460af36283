"""Export time of the 105-launch Nsight Compute report vs a bare ncu_report loop.

The baseline reads, with NVIDIA's module alone and its documented convenience call
IMetric.value(), exactly what the reader reads: every metric's value and unit, the names and
the rule results of every launch. The ratio is what tb-hwprof costs end to end (reading,
model, analysis, writing the run) against that loop. Target: <= 1.3. (The reader calls the SWIG
functions IAction.metric_by_name(), IMetric.kind(), unit() and the as_*() accessor value()
dispatches to directly: same values, less per-call overhead, which buys the room for the checks,
the model, the analysis and the writing.)

    python benchmarks/bench_ncu_export.py [REPORT] [--repeat N]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SAMPLES = Path(os.environ.get("TB_HWPROF_SAMPLES", REPO.parent / "shared" / "samples"))
DEFAULT = SAMPLES / "ncu" / "spyinfer_a10_105launches_2023.2.0.ncu-rep"


def bare_ncu_report_loop(path: Path) -> int:
    import ncu_report
    ctx = ncu_report.load_report(str(path))
    n = 0
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            for name in action.metric_names():
                metric = action.metric_by_name(name)
                metric.value(), metric.unit()
                n += 1
            action.rule_results_as_dicts()
            action.name(), action.name(ncu_report.IAction.NameBase_DEMANGLED)
    return n


def tb_hwprof_export(path: Path, logdir: Path) -> None:
    from tb_hwprof import export
    export(path, logdir, "bench", overwrite=True)


def timed(fn, *args, cpu: list = None) -> float:
    """Wall seconds of fn(*args); its CPU seconds (every thread of the process) appended to `cpu`."""
    start, start_cpu = time.perf_counter(), time.process_time()
    fn(*args)
    if cpu is not None:
        cpu.append(time.process_time() - start_cpu)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("report", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        timed(bare_ncu_report_loop, args.report)  # warm both paths (imports, page cache)
        timed(tb_hwprof_export, args.report, Path(tmp))
        base, ours, base_cpu, ours_cpu = [], [], [], []
        for _ in range(args.repeat):  # interleaved, so drift hits both alike
            base.append(timed(bare_ncu_report_loop, args.report, cpu=base_cpu))
            ours.append(timed(tb_hwprof_export, args.report, Path(tmp), cpu=ours_cpu))
    b, o = statistics.median(base), statistics.median(ours)
    print(f"report: {args.report.name}")
    print(f"bare ncu_report loop (all metrics + rules): median {b * 1000:.1f} ms over {args.repeat}")
    print(f"tb-hwprof export (read + analyse + write):  median {o * 1000:.1f} ms over {args.repeat}")
    print(f"ratio export / bare loop: {o / b:.2f} (target <= 1.3)")
    # CPU time is less swayed by other jobs on a shared machine (not by waits on the disk, either).
    print(f"CPU time ratio: {statistics.median(ours_cpu) / statistics.median(base_cpu):.2f} "
          f"({statistics.median(ours_cpu) * 1000:.0f} / {statistics.median(base_cpu) * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
