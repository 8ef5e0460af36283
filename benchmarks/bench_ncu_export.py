"""Export of Nsight Compute reports vs a bare ncu_report loop, time and memory (issue 31).

Reports: the 105-launch sample (ncu/spyinfer_a10_105launches_2023.2.0.ncu-rep) and, when present,
the real H200 report (pairs/h200_resnet18_bf16/resnet18_step3_first58.ncu-rep.xz: 58 launches x
2,243 metrics, `--set full`), decompressed with lzma into a temporary folder; or the reports named
on the command line (.ncu-rep or .ncu-rep.xz).  Samples: $TB_HWPROF_SAMPLES, else ../shared/samples.

Per report, two sides, each in a fresh interpreter of its own (a child process), the report read
through before each (this VM pages out files left idle for a minute):
  baseline: bare_ncu_report_loop(): NVIDIA's module alone reading, with its documented convenience
            call IMetric.value(), exactly what the reader reads: every metric's value and unit,
            the rule results and the names of every launch;
  baseline with SASS: the same loop, plus what the export also reads for the Source view where a
            launch has sampled warp stalls (`--set full`): its 10 instructions with most samples and
            their SASS and source line, each kernel disassembled once (hotspot_sass(), ncu_report's
            calls alone).  The like-for-like baseline: a script of the user's reading what the run
            shows.  Reports without samples (the 105-launch one) read the same as the bare loop;
  export:   tb_hwprof.export(report, logdir, "bench", overwrite=True) into a temporary logdir: what
            `tb-hwprof export` costs end to end (reading, model, analysis, writing the run).
Each child times itself from before its side's first import (ncu_report; tb_hwprof, which brings
pandas and numpy: the export's share of imports is printed beside) to the end of its work; the
interpreter's own start is left out of both.  The two sides alternate, --repeat rounds after
--warmup rounds not counted (printed), and the medians of their wall and CPU times are compared.
Memory is the peak of the child's whole process tree (benchmarks/children.py run_child_watched:
"tree_mb", the root's RSS plus its descendants' unique memory, polled every 0.1 s: the export may
start worker processes, and theirs counts), the highest of all rounds, warm-up included.  CPU is
that tree's "tree_cpu_s" (every process of the tree, the interpreter's start included on both
sides, ~0.05 s); both polled figures miss what happens after the last poll, so each is taken no
lower than the child's own getrusage (its RSS peak; its CPU plus that of the children it waited
for), both also lower bounds of the tree's.

Targets (issue 31): export time <= 1.1x and peak memory <= 1.2x the bare loop's.  Printed, not
asserted: CI runs this for the record.  The last lines are the ratios against the bare loop, one
per report; the lines before them, against the baseline with SASS.

With --grow COPIES, each report is grown first (its launch blocks appended COPIES more times):
`--grow 7` on the H200 report is the issue's 1 GB report.

    python benchmarks/bench_ncu_export.py [REPORT ...] [--repeat N] [--warmup N] [--quick] [--grow COPIES]
"""
from __future__ import annotations

import argparse
import compileall
import lzma
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from children import in_page_cache, run_child_watched  # noqa: E402  (benchmarks/ is the script's folder)

BENCHMARKS = Path(__file__).resolve().parent
REPO = BENCHMARKS.parent
sys.path.insert(0, str(REPO))
SAMPLES = Path(os.environ.get("TB_HWPROF_SAMPLES", REPO.parent / "shared" / "samples"))
DEFAULT = SAMPLES / "ncu" / "spyinfer_a10_105launches_2023.2.0.ncu-rep"
H200 = SAMPLES / "pairs" / "h200_resnet18_bf16" / "resnet18_step3_first58.ncu-rep.xz"
TARGET_TIME, TARGET_MEMORY = 1.1, 1.2


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


def bare_loop_with_sass(path: Path) -> int:
    """bare_ncu_report_loop plus hotspot_sass() of every launch: the metric values read, as there."""
    import ncu_report
    ctx = ncu_report.load_report(str(path))
    n, first_of_code = 0, {}
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            names = action.metric_names()
            for name in names:
                metric = action.metric_by_name(name)
                metric.value(), metric.unit()
                n += 1
            action.rule_results_as_dicts()
            action.name(), action.name(ncu_report.IAction.NameBase_DEMANGLED)
            hotspot_sass(ncu_report, action, names, first_of_code)
    return n


STALLED = "smsp__pcsamp_warps_issue_stalled_"  # per-instruction sampled stall reasons (SourceCounters)


def hotspot_sass(ncu_report, action, names, first_of_code: dict) -> list:
    """The SASS text and source line at a launch's 10 instructions with most sampled warp stalls
    (none without samples), the code of each kernel (its mangled name) disassembled once, at its
    first launch with samples, as the export does; the addresses looked up."""
    if "smsp__pcsamp_sample_count" not in names:
        return []
    samples = {}
    for name in names:
        if name.startswith(STALLED) and not name.endswith("_not_issued"):
            metric = action.metric_by_name(name)
            if metric is not None and metric.has_correlation_ids():
                addresses = metric.correlation_ids()
                for i in range(metric.num_instances()):
                    count = metric.as_uint64(i)
                    if count:
                        address = addresses.as_uint64(i)
                        samples[address] = samples.get(address, 0) + count
    top = sorted(samples.items(), key=lambda pair: (-pair[1], pair[0]))[:10]
    source = first_of_code.setdefault(action.name(ncu_report.IAction.NameBase_MANGLED), action)
    for address, _ in top:
        source.sass_by_pc(address), source.source_info(address)
    return [address for address, _ in top]


def tb_hwprof_export(path: Path, logdir: Path) -> None:
    from tb_hwprof import export
    export(path, logdir, "bench", overwrite=True)


# The children import this module (its folder and the repository on sys.path, so this tree's
# tb_hwprof is the one run), then time their side from before its first import.
_PRELUDE = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
import bench_ncu_export as bench
def finish(out):
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    out.update(cpu_s=own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime, mb=own.ru_maxrss / 1024)
    print(json.dumps(out))
"""

BARE = _PRELUDE + """
t = time.perf_counter()
n = bench.bare_ncu_report_loop(sys.argv[2])
finish({"s": time.perf_counter() - t, "metrics": n})
"""

BARE_SASS = _PRELUDE + """
t = time.perf_counter()
n = bench.bare_loop_with_sass(sys.argv[2])
finish({"s": time.perf_counter() - t, "metrics": n})
"""

EXPORT = _PRELUDE + """
t = time.perf_counter()
import tb_hwprof, tb_hwprof.app.export  # what export() imports on its first call (pandas, numpy, ...)
imported = time.perf_counter() - t
bench.tb_hwprof_export(sys.argv[2], sys.argv[3])
finish({"s": time.perf_counter() - t, "import_s": imported})
"""


def watched(code: str, report: Path, *args) -> dict:
    """A child run under run_child_watched; its CPU and peak no lower than its own getrusage."""
    in_page_cache(report)
    done = run_child_watched(code, BENCHMARKS, report, *args)
    done["cpu_s"] = max(done["tree_cpu_s"], done["cpu_s"])
    done["mb"] = max(done["tree_mb"], done["mb"])
    return done


def precompile() -> None:
    """This tree's bytecode written once, as an installed package has it (pip compiles at install):
    with PYTHONDONTWRITEBYTECODE set, as on this project's machines, every export child would
    compile ~70 modules again (~0.5 s each), which the bare loop's child never does."""
    compileall.compile_dir(str(REPO / "tb_hwprof"), quiet=1)


def readable(report: Path, tmp: Path) -> Path:
    """The report itself, or, for a .xz, its content decompressed into `tmp`."""
    if report.suffix != ".xz":
        return report
    out = tmp / report.stem
    with lzma.open(report) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 24)
    return out


def first_launch_block(data: bytes) -> int:
    """Offset of the report's first block that holds launch records (its header's field 2)."""
    import struct
    from tb_hwprof.readers.nvidia import ncu_rep
    (header_len,) = struct.unpack_from("<I", data, 4)
    i = 8 + header_len
    while i < len(data):
        (block_len,) = struct.unpack_from("<I", data, i)
        header = data[i + 4:i + 4 + block_len]
        if ncu_rep._top_level_fields(header).get(2, 0):
            return i
        i += 4 + block_len + ncu_rep._payload_size(header)
    raise ValueError("no launch in the report")


def grown(path: Path, copies: int, tmp: Path) -> Path:
    """The report with everything from its first launch's block on appended `copies` more times:
    its launch records, and the code blocks between them, repeated as ncu_report reads them (the
    H200 report x8: 464 launches, 1.05 GB).  Synthetic for scale only: every record is a real one."""
    data = path.read_bytes()
    start = first_launch_block(data)
    out = tmp / f"{path.stem}_x{copies + 1}.ncu-rep"
    with open(out, "wb") as f:
        f.write(data)
        for _ in range(copies):
            f.write(data[start:])
    return out


def bench_report(report: Path, tmp: Path, repeat: int, warmup: int, grow: int = 0) -> dict:
    path = readable(report, tmp)
    if grow:
        path = grown(path, grow, tmp)
    logdir = tmp / "logs"

    def one_round():
        return watched(BARE, path), watched(EXPORT, path, logdir), watched(BARE_SASS, path)

    warm = [one_round() for _ in range(warmup)]
    rounds = [one_round() for _ in range(repeat)]
    listed = lambda values: ", ".join(f"{v:.2f}" for v in values)  # noqa: E731
    print(f"report: {path.name if grow else report.name} ({path.stat().st_size / 1e6:.1f} MB"
          f"{', decompressed' if report.suffix == '.xz' else ''}{f', grown from {report.name}' if grow else ''}; "
          f"{rounds[0][0]['metrics']:,} metric values)")
    for bare, ours, sass in warm:
        print(f"  warm-up round (not counted): bare loop {bare['s']:.2f} s, export {ours['s']:.2f} s, "
              f"bare loop with SASS {sass['s']:.2f} s; peaks {bare['mb']:.0f} / {ours['mb']:.0f} / {sass['mb']:.0f} MB")
    if repeat > 1:
        print(f"  {repeat} rounds: bare loop {listed(b['s'] for b, _, _ in rounds)} s; "
              f"export {listed(o['s'] for _, o, _ in rounds)} s; "
              f"bare loop with SASS {listed(w['s'] for _, _, w in rounds)} s")
    sides = {}
    for i, (label, what) in enumerate([("bare ncu_report loop", "all metrics + rules"),
                                        ("tb-hwprof export", "read + analyse + write"),
                                        ("bare loop with SASS", "+ the hotspots' SASS and lines")]):
        side = {"s": statistics.median(r[i]["s"] for r in rounds),
                "cpu_s": statistics.median(r[i]["cpu_s"] for r in rounds),
                "mb": max(r[i]["mb"] for r in warm + rounds)}  # memory: the worst round counts, warm-up too
        imports = ""
        if "import_s" in rounds[0][i]:
            side["import_s"] = statistics.median(r[i]["import_s"] for r in rounds)
            imports = f" (of which imports {side['import_s']:.2f} s)"
        print(f"  {label} ({what}): wall {side['s']:.2f} s{imports}, CPU {side['cpu_s']:.2f} s, "
              f"peak {side['mb']:.0f} MB (median times of {repeat}, highest tree peak of {repeat + warmup})")
        sides[label] = side
    return {"report": path.name if grow else report.name, **dict(zip(("bare", "ours", "sass"), sides.values()))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="*", type=Path,
                        help=f"reports to run (.ncu-rep or .ncu-rep.xz; default: {DEFAULT.name}, and "
                             f"{H200.name} when present)")
    parser.add_argument("--repeat", type=int, default=5, help="counted rounds, the two sides alternating (medians)")
    parser.add_argument("--warmup", type=int, default=1, help="rounds run first and not counted (printed)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: one round, no warm-up, only the 105-launch sample unless reports are named")
    parser.add_argument("--grow", type=int, default=0, metavar="COPIES",
                        help="append COPIES more copies of each report's launch blocks (the H200 report "
                             "with 7: 1.05 GB, 464 launches): does a 1 GB report export within memory")
    args = parser.parse_args()
    if args.quick:
        args.repeat, args.warmup = 1, 0
    if args.repeat < 1 or args.warmup < 0:
        parser.error("--repeat must be >= 1 and --warmup >= 0")
    reports = args.reports or [DEFAULT] + ([H200] if H200.is_file() and not args.quick else [])
    for report in reports:
        if not report.is_file():
            parser.error(f"{report}: no such file")
    precompile()
    results = []
    for report in reports:
        with tempfile.TemporaryDirectory() as tmp:
            results.append(bench_report(report, Path(tmp), args.repeat, args.warmup, args.grow))
    # Also what the ratio is without the export's imports (~0.3 s of pandas and numpy, each run of
    # the command pays them; the bare loop's import of ncu_report is a few ms).
    for r in results:
        bare, ours = r["bare"], r["ours"]
        print(f"{r['report']}: export without its imports / bare loop: time "
              f"{(ours['s'] - ours['import_s']) / bare['s']:.2f}; CPU ratio {ours['cpu_s'] / bare['cpu_s']:.2f}")
    for r in results:
        sass, ours = r["sass"], r["ours"]
        print(f"{r['report']}: ratio export / bare loop with the hotspots' SASS (what the run shows): "
              f"time {ours['s'] / sass['s']:.2f}, memory {ours['mb'] / sass['mb']:.2f}")
    for r in results:
        bare, ours = r["bare"], r["ours"]
        print(f"{r['report']}: ratio export / bare loop: time {ours['s'] / bare['s']:.2f} (target <= {TARGET_TIME:g}), "
              f"memory {ours['mb'] / bare['mb']:.2f} (target <= {TARGET_MEMORY:g})")


if __name__ == "__main__":
    main()
