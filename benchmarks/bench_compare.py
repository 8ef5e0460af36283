"""Compare of two 1M-launch runs: `tb-hwprof compare` on two exported runs, and the plugin's /compare.

The runs are synthetic for scale: the two real PyTorch traces HTA's trace-diff example ships
(control on an A100, test on a V100: 170 and 131 kernels, 107 paired), their kernels tables
repeated under new launch ids up to --launches, written with tb_hwprof.logdir.writer.write_run
as kernels-only runs (no trace, no operator level).  The export writes each run's compare table
(summary compare_kernels: one row per kernel instantiation), which is what both comparisons read;
its size beside the kernels table is printed.

Timed in-process, each side read from disk every time (nothing cached):
  cli     tb_hwprof.app.cli.main(["compare", BASE, RUN])   target <= 2 s
  plugin  views.compare_runs on fresh run entries      target ~1 s
then `tb-hwprof compare` as a command (interpreter start and imports included), and the CLI on copies
of the runs without their compare table (runs exported before it: the kernels tables are read).

    python benchmarks/bench_compare.py [--launches N] [--repeat N]
"""
import argparse
import contextlib
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SAMPLES = Path(os.environ.get("TB_HWPROF_SAMPLES", REPO.parent / "shared" / "samples"))
BASE = SAMPLES / "torch" / "hta_trace_diff_control.json.gz"
RUN = SAMPLES / "torch" / "hta_trace_diff_test.json.gz"


def grow(profile, launches: int):
    """The trace's kernel launches repeated to `launches` rows with new launch ids; kernels only."""
    import pandas as pd
    k = len(profile.kernels)
    rows = pd.concat([profile.kernels] * (launches // k + 1), ignore_index=True).iloc[:launches].copy()
    rows["launch_id"] = range(launches)
    profile.kernels = rows
    profile.raw_metrics, profile.rules, profile.summaries = [], [], {}
    profile.timeline, profile.torch = None, None
    return profile


def build_run(report: Path, logdir: Path, name: str, launches: int) -> Path:
    import tb_hwprof
    from tb_hwprof.logdir.writer import write_run
    started = time.perf_counter()
    profile = grow(tb_hwprof.read(report), launches)
    run_dir = write_run(profile, tb_hwprof.analyse(profile), logdir, name, overwrite=True)
    assets = run_dir / "plugins" / "tb_hwprof"
    sizes = {p.name: p.stat().st_size for p in assets.glob("*.json.gz")}
    table = sizes.get("summary_compare_kernels.json.gz", 0)
    print(f"wrote {name}: {launches:,} launches in {time.perf_counter() - started:.1f} s; compare table "
          f"{table:,} bytes beside the kernels table's {sizes['kernels.json.gz']:,} (run: {sum(sizes.values()):,})")
    return run_dir


def cli_compare(base: Path, run: Path):
    """(wall, CPU) seconds of one in-process `tb-hwprof compare` (CPU time: the figure a shared machine
    distorts least)."""
    from tb_hwprof.app.cli import main
    started, cpu = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = main(["compare", str(base), str(run)])
    elapsed = time.perf_counter() - started, time.process_time() - cpu
    if code != 0:
        raise SystemExit(f"tb-hwprof compare exited {code}:\n{out.getvalue()[-2000:]}")
    return elapsed


def process_compare(base: Path, run: Path) -> float:
    """Wall seconds of `tb-hwprof compare` as a command (interpreter start and imports included)."""
    import subprocess
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tb_hwprof.app.cli", "compare", str(base), str(run)], check=True,
                   stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)})
    return time.perf_counter() - started


def as_exported_before(run_dir: Path, folder: Path) -> Path:
    """A copy of the run without its compare table, as runs exported before it are: compare reads
    the kernels table then."""
    import json
    import shutil
    copy = folder / run_dir.name
    shutil.copytree(run_dir, copy)
    assets = copy / "plugins" / "tb_hwprof"
    manifest = json.loads((assets / "profile.json").read_text())
    (assets / manifest["files"].pop("summary_compare_kernels")).unlink()
    (assets / "profile.json").write_text(json.dumps(manifest))
    return copy


def plugin_compare(logdir: Path):
    from tb_hwprof.plugin import store, views
    runs = store.RunStore(str(logdir))  # fresh: nothing of either run cached
    started, cpu = time.perf_counter(), time.process_time()
    base, run = (runs.entry(r, runs.run_dir(r)) for r in ("base", "run"))
    views.compare_runs(base, run)
    return time.perf_counter() - started, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--launches", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        logdir = Path(tmp) / "logs"
        logdir.mkdir()
        base = build_run(BASE, logdir, "base", args.launches)
        run = build_run(RUN, logdir, "run", args.launches)
        cli_compare(base, run)  # warm imports and the page cache
        cli = [cli_compare(base, run) for _ in range(args.repeat)]
        plugin = [plugin_compare(logdir) for _ in range(args.repeat)]
        process = [(process_compare(base, run), 0.0) for _ in range(args.repeat)]
        old = Path(tmp) / "old"
        old_cli = [cli_compare(*(as_exported_before(d, old / str(i)) for d in (base, run))) for i in range(args.repeat)]
    for label, times, target in (("tb-hwprof compare, two exported runs", cli, "<= 2 s"),
                                 ("plugin /compare (fresh run entries) ", plugin, "~1 s"),
                                 ("tb-hwprof compare as a command (its CPU not measured)", process, "<= 2 s"),
                                 ("tb-hwprof compare, runs exported before the compare table", old_cli, "-")):
        wall, cpu = statistics.median(t[0] for t in times), statistics.median(t[1] for t in times)
        cpu_text = f", CPU {cpu:.2f} s" if cpu else ""
        print(f"{label} of {args.launches:,} launches: median wall {wall:.2f} s{cpu_text} "
              f"over {args.repeat} (target {target}; load average now {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
