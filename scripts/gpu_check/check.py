"""The GPU check: `tb-hwprof profile ncu` on a small bundled training program, then the joined run
checked against NVIDIA's own ncu_report.  Needs an NVIDIA GPU, PyTorch with CUDA, Nsight Compute's
`ncu` (on PATH, or under /opt/nvidia/nsight-compute) and its ncu_report module (found beside ncu).

    python scripts/gpu_check/check.py                 # the CNN, 20 launches, --set full (~2 min)
    python scripts/gpu_check/check.py --model gpt --launch-count 30 --keep out/
    python scripts/gpu_check/check.py --per-config    # every configuration of the step once (~3-4 min)

What it checks, each printed as a line (exit status 1 when one fails):
  - the capture keeps its files and exports (the report is read, not refused);
  - every launch of the report exports, its duration, grid size and tensor-core operations equal to
    ncu_report's for the same launch;
  - the join: every report launch is matched to a trace launch or listed with a reason, every
    matched pair has the same grid and block on both sides, and the operators carry counters.
"""
from __future__ import annotations

import argparse
import glob
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROGRAMS = {"cnn": HERE / "train_cnn.py", "gpt": HERE / "train_gpt.py"}
TENSOR_COUNT_PREFIX = "sm__ops_path_tensor_src_"


def find_ncu() -> str:
    found = shutil.which("ncu") or next(iter(sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True)), None)
    if not found:
        sys.exit("gpu check: ncu not found on PATH or under /opt/nvidia/nsight-compute -- install Nsight Compute")
    return found


def import_ncu_report(ncu: str):
    """NVIDIA's module: installed, else from ncu's own extras/python."""
    extras = Path(ncu).resolve().parent / "extras" / "python"
    if extras.is_dir():
        sys.path.append(str(extras))
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(extras)]))
    import ncu_report  # noqa: E402
    return ncu_report


class Checks:
    def __init__(self):
        self.failed = 0

    def check(self, ok: bool, what: str) -> bool:
        print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
        self.failed += not ok
        return ok


def profile(args, ncu: str, work: Path) -> Path:
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(ncu).parent), os.environ.get("PATH", "")]))
    # By launch order, the first N launches (a few minutes at most); --per-config: each configuration of
    # the step once, the default of `profile ncu` (the CNN step: ~70 configurations, ~3 min of ncu).
    order = [] if args.per_config else ["--by-order", "--launch-count", str(args.launch_count)]
    argv = [sys.executable, "-m", "tb_hwprof", "profile", "ncu", "--steps", "1", "--skip-steps", "2",
            *order, "--set", args.set, "--run", f"gpu_check_{args.model}",
            "--logdir", str(work / "runs"), "--capture-dir", str(work / "capture"), "--", sys.executable,
            str(PROGRAMS[args.model])]
    print("$ " + subprocess.list2cmdline(argv), flush=True)
    started = time.monotonic()
    status = subprocess.call(argv, env=env)
    print(f"profile: exit {status} after {time.monotonic() - started:.0f} s", flush=True)
    return work / "runs" / f"gpu_check_{args.model}" if status == 0 else None


def ncu_launches(ncu_report, path: Path):
    ctx = ncu_report.load_report(str(path))
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            yield rng.action_by_idx(a)


def value(action, name: str) -> float:
    metric = action.metric_by_name(name)
    return math.nan if metric is None else float(metric.value())


def tensor_ops(action) -> float:
    names = [n for n in action.metric_names() if n.startswith(TENSOR_COUNT_PREFIX) and n.endswith(".sum")
             and "_int" not in n]
    return sum(value(action, n) for n in names) if names else math.nan


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9)


def check_report(checks: Checks, ncu_report, report: Path) -> None:
    import tb_hwprof
    kernels = tb_hwprof.read(report).kernels
    launches = list(ncu_launches(ncu_report, report))
    checks.check(len(kernels) == len(launches) > 0, f"report: {len(kernels)} launches exported of {len(launches)}")
    differ = []
    for row, action in zip(kernels.to_dict("records"), launches):
        for column, theirs in (("duration_ns", value(action, "gpu__time_duration.sum")),
                               ("grid_size", value(action, "launch__grid_size")),
                               ("flops_tensor", tensor_ops(action))):
            if not same(float(row[column]), theirs):
                differ.append(f"launch {row['launch_id']} {column}: {row[column]} vs ncu_report {theirs}")
    tensor = kernels[kernels["flops_tensor"] > 0]
    checks.check(not differ, "report: duration, grid size and tensor-core operations equal ncu_report's "
                 f"({len(tensor)} launches ran tensor-core work)" + (f": {differ[:3]}" if differ else ""))


def check_join(checks: Checks, run: Path) -> None:
    import tb_hwprof
    analysis, loaded = tb_hwprof.load_analysis(run), tb_hwprof.load_run(run, with_details=False)
    table = loaded.summaries.get("counter_join", analysis.summaries.get("counter_join"))
    if not checks.check(table is not None, "join: the run has its counter_join table"):
        return
    counts = table["status"].value_counts().to_dict()
    print(f"     join statuses: {counts}", flush=True)
    report_side = table[table["status"] != "trace-only"]
    unexplained = report_side[(report_side["status"] != "matched") & (report_side["reason"].fillna("") == "")]
    checks.check(counts.get("matched", 0) > 0 and unexplained.empty,
                 f"join: {counts.get('matched', 0)} of {len(report_side)} report launches matched, "
                 f"the others listed with a reason")
    kernels = loaded.kernels
    joined = kernels[kernels["counter_launch_id"] >= 0] if "counter_launch_id" in kernels else kernels.iloc[:0]
    checks.check(len(joined) == counts.get("matched", 0), f"join: {len(joined)} trace launches carry counters")
    operators = analysis.summaries.get("op_counters")
    checks.check(operators is not None and len(operators) > 0
                 and operators["sm_throughput_pct"].notna().any(),
                 f"join: {0 if operators is None else len(operators)} operators carry counters")
    if operators is not None:
        print(operators.head(8).to_string(max_colwidth=40), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=sorted(PROGRAMS), default="cnn")
    parser.add_argument("--launch-count", type=int, default=20, help="launches profiled by launch order")
    parser.add_argument("--per-config", action="store_true",
                        help="profile each (kernel, grid, block) of the step once instead (profile ncu's default)")
    parser.add_argument("--set", default="full")
    parser.add_argument("--keep", help="copy the run folder here")
    args = parser.parse_args()
    import torch
    if not torch.cuda.is_available():
        sys.exit("gpu check: PyTorch sees no CUDA GPU -- run it on a machine with an NVIDIA GPU")
    ncu = find_ncu()
    ncu_report = import_ncu_report(ncu)
    print(f"gpu check: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, {ncu}", flush=True)
    checks = Checks()
    with tempfile.TemporaryDirectory(prefix="tb-hwprof-gpu-check-") as work:
        run = profile(args, ncu, Path(work))
        if checks.check(run is not None and run.is_dir(), "profile ncu: the capture exported into a run"):
            reports = sorted(run.rglob("*.ncu-rep"))
            if checks.check(len(reports) == 1, f"profile ncu: the run keeps its report ({len(reports)})"):
                check_report(checks, ncu_report, reports[0])
            check_join(checks, run)
        if args.keep:
            shutil.copytree(work, args.keep, dirs_exist_ok=True)
    print(f"gpu check: {checks.failed} check(s) failed" if checks.failed else "gpu check: all checks passed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
