"""Export of a 1,000,000-kernel Nsight Systems capture vs a bare sqlite3 fetch of its kernels.

A real export (default: the DLProf one, which has NVTX ranges) is grown, in SQL, to
KERNELS kernels and NVTX ranges: its kernel rows, the API calls that launched them and its
NVTX ranges are copied again and again, each copy shifted in time by the span of the
original and in correlation id by the largest id, so launches, projections and flows still
pair up (synthetic for scale only; every row is a real row moved).  Memory copies and the
other API calls stay as they were.

Then subprocesses run on the same file, each reporting its own wall time and peak RSS:
  baseline: sqlite3 fetchall() of (start, end, streamId, shortName) of the kernel table;
  same columns: sqlite3 fetchall() of every column the export reads of the three big tables, with
            the reader's own expressions (same_columns_sql()): the kernels' 14, the API calls' 5 (the
            launches' flows, the timeline's host rows), the closed NVTX ranges' 6 and text (the
            phases), and the OS runtime calls' 4 where there are any, all held at once as the export
            holds them: what a script of the user's fetching the data the run shows costs;
  export:   `tb-hwprof export` (read + analyse + write; at this size `--trace auto` leaves the
            Chrome trace file out, the timeline index is written);
  trace:    `tb-hwprof trace` on the exported run (its timeline.json.gz rendered from the index);
  readback: load_run of the exported run and a kernel comparison of it with itself (information).
Fetch and export run alternately, --rounds times after --warmup rounds not counted, the file
read through before each; the ratio is of their median times, the peak is the highest of all
rounds.  Targets (issue 31): export <= 2.5x the fetch, <= 400 MB peak (the last line); the line
before it gives the export against the same-columns fetch.

With --baseline-tree, another revision's export runs in every round too (in turn before and after
ours) and this tree's time is given against it, round by round: on this project's VMs the fetch and
the export drift by ~30% between runs minutes apart, so a regression is judged by that paired ratio
rather than by comparing two runs' medians.

    python benchmarks/bench_nsys_export.py [--kernels 1000000] [--nvtx 200000] [--rounds 5] [--keep PATH]
                                           [--baseline-tree CHECKOUT]
"""
from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from children import in_page_cache, run_child  # noqa: E402  (benchmarks/ is the script's folder)

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # same_columns_sql() reads this tree's reader
SAMPLES = Path(os.environ.get("TB_HWPROF_SAMPLES", REPO.parent / "shared" / "samples"))
DEFAULT = SAMPLES / "nsys" / "dlprof_rtx2070s_nvtx_2022.1.3.sqlite"
KERNEL, RUNTIME, NVTX = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"
TARGET_RATIO, TARGET_MB = 2.5, 400


def _cols(conn, table):
    return [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]


def _copy_rows(conn, table: str, where: str, copies: int, period: int, corr_step: int, limit=None) -> int:
    """Insert `copies` shifted copies (1..copies) of the rows `where` selects; returns rows added."""
    shift = {"start": f"start + c * {period}", "end": f"end + c * {period}",
             "correlationId": f"correlationId + c * {corr_step}"}
    cols = _cols(conn, table)
    exprs = ", ".join(shift.get(c, f'"{c}"') for c in cols)
    conn.execute(f"CREATE TEMP TABLE orig AS SELECT * FROM {table} WHERE {where}")
    lim = f"LIMIT {int(limit)}" if limit is not None else ""
    cur = conn.execute(f"""INSERT INTO {table} ({', '.join(f'"{c}"' for c in cols)})
                           SELECT {exprs} FROM copies CROSS JOIN orig WHERE c BETWEEN 1 AND {copies}
                           ORDER BY c, orig.rowid {lim}""")
    conn.execute("DROP TABLE temp.orig")
    return cur.rowcount


def grow(src: Path, dst: Path, kernels: int = 1_000_000, nvtx: int = 200_000) -> dict:
    """Copy `src` to `dst` and grow it to at least `kernels` kernels and exactly `nvtx` NVTX ranges
    (when the source has any); returns the row counts."""
    shutil.copyfile(src, dst)
    conn = sqlite3.connect(dst)
    tables = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    has_nvtx = NVTX in tables
    launches = f"correlationId IN (SELECT correlationId FROM {KERNEL})"
    parts = [f"SELECT min(start) AS s, max(end) AS e FROM {KERNEL}",
             f"SELECT min(start), max(end) FROM {RUNTIME} WHERE {launches}"]
    if has_nvtx:
        parts.append(f"SELECT min(start), max(end) FROM {NVTX} WHERE end IS NOT NULL")
    lo, hi = conn.execute(f"SELECT min(s), max(e) FROM ({' UNION ALL '.join(parts)})").fetchone()
    period = hi - lo + 1000
    corr_step = conn.execute(f"SELECT max(correlationId) FROM {RUNTIME}").fetchone()[0] + 1
    n_kernels = conn.execute(f"SELECT count(*) FROM {KERNEL}").fetchone()[0]
    copies = -(-kernels // n_kernels) - 1
    conn.execute("CREATE TEMP TABLE copies (c INTEGER PRIMARY KEY)")
    conn.execute(f"""INSERT INTO copies WITH RECURSIVE n(c) AS (SELECT 1 UNION ALL SELECT c + 1 FROM n
                     WHERE c < {max(copies, 1)}) SELECT c FROM n""")
    _copy_rows(conn, KERNEL, "1", copies, period, corr_step)
    _copy_rows(conn, RUNTIME, launches, copies, period, corr_step)
    if has_nvtx:
        n_ranges = conn.execute(f"SELECT count(*) FROM {NVTX} WHERE end IS NOT NULL").fetchone()[0]
        nvtx_copies = max(-(-nvtx // n_ranges) - 1, 0)
        _copy_rows(conn, NVTX, "end IS NOT NULL", min(nvtx_copies, copies), period, corr_step,
                   limit=max(nvtx - n_ranges, 0))
    conn.commit()
    counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in (KERNEL, RUNTIME, NVTX)
              if t in tables}
    conn.close()
    return counts


FETCH = """
import resource, sqlite3, sys, time, json
t = time.perf_counter()
conn = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
rows = conn.execute("SELECT start, end, streamId, shortName FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
print(json.dumps({"s": time.perf_counter() - t, "rows": len(rows),
                  "mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

FETCH_SAME = """
import resource, sqlite3, sys, time, json
t = time.perf_counter()
conn = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
tables = [conn.execute(query).fetchall() for query in json.loads(sys.argv[2]).values()]  # all held: the export joins them
print(json.dumps({"s": time.perf_counter() - t, "rows": sum(map(len, tables)),
                  "mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def same_columns_sql(path: Path) -> dict:
    """{table: the SELECT of every column the export's reader fetches per row of it}: the kernels, the
    API calls, the closed NVTX ranges and the finished OS runtime calls, those the export has (the
    reader's own expressions, imported: they follow the reader).  Left out: memory copies and sets
    (a few rows), names and threads (looked up by id)."""
    from tb_hwprof.readers.nvidia import nsys_schema, nsys_sqlite, nsys_timeline
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables, queries = nsys_schema.table_names(conn), {}
        if KERNEL in tables:
            kernels = nsys_sqlite.kernel_exprs(nsys_schema.columns(conn, KERNEL))
            queries[KERNEL] = f"SELECT {', '.join(e for e in kernels if e != '-1')} FROM {KERNEL}"
        if RUNTIME in tables:
            queries[RUNTIME] = f"SELECT {', '.join(nsys_sqlite.API_EXPRS)} FROM {RUNTIME}"
        if NVTX in tables:
            text = ", coalesce(text, char(1))" if "text" in nsys_schema.columns(conn, NVTX) else ""
            queries[NVTX] = (f"SELECT {', '.join(nsys_sqlite.nvtx_int_exprs(conn))}{text} FROM {NVTX} "
                             f"WHERE {nsys_schema.NVTX_RANGE_ROWS}")
        if nsys_schema.OSRT in tables:
            queries[nsys_schema.OSRT] = (f"SELECT {', '.join(nsys_timeline.OSRT_EXPRS)} FROM {nsys_schema.OSRT} "
                                         f"WHERE {nsys_timeline.OSRT_ROWS}")
        return queries
    finally:
        conn.close()


EXPORT = """
import resource, sys, time, json
sys.path.insert(0, sys.argv[3])
t = time.perf_counter()
from tb_hwprof.app.cli import main
rc = main(["export", sys.argv[1], "--logdir", sys.argv[2], "--run", "big", "--overwrite"])
print(json.dumps({"s": time.perf_counter() - t, "rc": rc,
                  "mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

TRACE = """
import resource, sys, time, json
sys.path.insert(0, sys.argv[2])
t = time.perf_counter()
from tb_hwprof.app.cli import main
rc = main(["trace", sys.argv[1], "--quiet"])
print(json.dumps({"s": time.perf_counter() - t, "rc": rc,
                  "mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

READBACK = """
import resource, sys, time, json
sys.path.insert(0, sys.argv[2])
t = time.perf_counter()
import tb_hwprof
from tb_hwprof.analysis import compare
profile = tb_hwprof.load_run(sys.argv[1], with_details=False)
loaded = time.perf_counter() - t
t = time.perf_counter()
compare.compare_kernels(profile.kernels, profile.kernels)
print(json.dumps({"s": loaded, "compare_s": time.perf_counter() - t,
                  "mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def fetch_child(grown: Path) -> dict:
    in_page_cache(grown)  # both sides read the file from memory: the export reads tables the fetch does not
    return run_child(FETCH, grown)


def fetch_same_child(grown: Path, queries: dict) -> dict:
    in_page_cache(grown)
    return run_child(FETCH_SAME, grown, json.dumps(queries))


def export_child(grown: Path, logdir: Path, tree: Path = REPO) -> dict:
    in_page_cache(grown)
    return run_child(EXPORT, grown, logdir, tree)


def precompile(tree: Path = REPO) -> None:
    """The package's bytecode written once, as an installed package has it: pip compiles it at install,
    and an editable install's first import caches it, unless PYTHONDONTWRITEBYTECODE is set (as on
    this project's machines), when every child would compile ~70 modules again (~0.5 s of each export)."""
    compileall.compile_dir(str(tree / "tb_hwprof"), quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--kernels", type=int, default=1_000_000)
    parser.add_argument("--nvtx", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5, help="fetch/export rounds, alternating (medians reported)")
    parser.add_argument("--warmup", type=int, default=1, help="rounds run first and not counted (printed)")
    parser.add_argument("--keep", type=Path, help="keep the grown export at this path (and reuse it if present)")
    parser.add_argument("--baseline-tree", type=Path,
                        help="a checkout of another revision (its C extensions built in place: `python setup.py "
                             "build_ext --inplace` there) whose export runs in every round too, in turn before and "
                             "after ours: prints this tree's time against it, round by round")
    args = parser.parse_args()
    if args.baseline_tree is not None and not (args.baseline_tree / "tb_hwprof" / "app" / "cli.py").is_file():
        parser.error(f"--baseline-tree {args.baseline_tree}: no tb_hwprof/app/cli.py there (give a checkout's root)")
    with tempfile.TemporaryDirectory() as tmp:
        grown = args.keep or Path(tmp) / "grown.sqlite"
        if not grown.exists():
            started = time.perf_counter()
            counts = grow(args.source, grown, args.kernels, args.nvtx)
            print(f"grew {args.source.name} -> {grown} in {time.perf_counter() - started:.1f} s: {counts}")
            # The file's 173 MB are still being written back to disk: wait for that, or the first
            # rounds time the writeback as much as the export (CI's 3-round median: 4.9x, the same
            # run on a flushed file ~3.7x).
            os.sync()
        print(f"file: {grown.stat().st_size / 1e6:.0f} MB")
        precompile()
        if args.baseline_tree is not None:
            precompile(args.baseline_tree)
        # Alternating rounds, medians: on a VM one run's time swings by ~20% (fresh memory costs
        # page faults whose price varies), and each side should see the same conditions.  A first
        # round is not counted: on CI it was the slowest of both sides (fetch 1.06 vs 0.85-0.99 s,
        # export 5.45 vs 3.8-4.9 s); it is printed.
        queries = same_columns_sql(grown)
        same = []  # the same-columns fetch of each round, warm-up included (its first entries)

        def one_round(i: int):
            fetched = fetch_child(grown)
            same.append(fetch_same_child(grown, queries))
            if args.baseline_tree is None:
                return fetched, export_child(grown, Path(tmp) / "logs"), None
            # Which of the two exports goes first alternates: neither always follows the fetch.
            sides = [(REPO, "logs"), (args.baseline_tree, "baseline_logs")][::1 if i % 2 else -1]
            done = {tree: export_child(grown, Path(tmp) / logs, tree) for tree, logs in sides}
            return fetched, done[REPO], done[args.baseline_tree]
        warmup = [one_round(i) for i in range(args.warmup)]
        rounds = [one_round(i) for i in range(args.rounds)]
        base = {k: statistics.median(b[k] for b, _, _ in rounds) for k in ("s", "mb", "rows")}
        counted = same[args.warmup:]
        like = {k: statistics.median(f[k] for f in counted) for k in ("s", "mb", "rows")}
        ours = {k: statistics.median(o[k] for _, o, _ in rounds) for k in ("s", "mb")}
        ours["mb"] = max(o["mb"] for _, o, _ in warmup + rounds)  # memory: the worst round counts, warm-up too
        run = Path(tmp) / "logs" / "big" / "plugins" / "tb_hwprof"
        exported = {p.name for p in run.glob("*")}
        trace = run_child(TRACE, Path(tmp) / "logs" / "big", REPO)
        readback = run_child(READBACK, Path(tmp) / "logs" / "big", REPO)
        sizes = {p.name: p.stat().st_size for p in run.glob("*") if p.is_file()}
    ratio = ours["s"] / base["s"]
    listed = lambda values: ", ".join(f"{v:.2f}" for v in values)  # noqa: E731
    for fetched, exported_, _ in warmup:
        print(f"warm-up round (not counted): fetch {fetched['s']:.2f} s, export {exported_['s']:.2f} s, "
              f"peak {exported_['mb']:.0f} MB")
    if args.rounds > 1:
        print(f"{args.rounds} rounds: fetch {listed(b['s'] for b, _, _ in rounds)} s; "
              f"export {listed(o['s'] for _, o, _ in rounds)} s; ratios {listed(o['s'] / b['s'] for b, o, _ in rounds)}")
    print(f"bare sqlite3 fetchall (start, end, streamId, shortName): {base['s']:.2f} s, "
          f"peak {base['mb']:.0f} MB, {base['rows']:.0f} rows (median of {args.rounds})")
    print(f"bare sqlite3 fetchall of the columns the export reads:   {like['s']:.2f} s, peak {like['mb']:.0f} MB, "
          f"{like['rows']:.0f} rows of {len(queries)} tables (median of {args.rounds}; "
          f"rounds {listed(f['s'] for f in counted)} s)")
    print(f"tb-hwprof export (read + analyse + write):                {ours['s']:.2f} s, peak {ours['mb']:.0f} MB "
          f"(median time, highest peak of {args.rounds})")
    print(f"tb-hwprof trace (timeline.json.gz from the index):       {trace['s']:.2f} s, peak {trace['mb']:.0f} MB")
    print(f"load_run of the run (what the plugin's table views parse): {readback['s']:.2f} s, "
          f"peak {readback['mb']:.0f} MB; compare of it with itself {readback['compare_s']:.2f} s")
    print(f"ratio export / fetch of the same columns (what the run shows): time {ours['s'] / like['s']:.2f}, "
          f"memory {ours['mb'] / like['mb']:.2f}")
    print(f"ratio export / fetch: {ratio:.2f} (target <= {TARGET_RATIO:g}); "
          f"peak {ours['mb']:.0f} MB (target <= {TARGET_MB} MB)")
    if args.baseline_tree is not None:
        theirs = [t for _, _, t in rounds]
        # Per-round ratios: both exports ran within seconds of each other, so a drift of the machine
        # between rounds (this VM's medians move ~30% from one run to the next) moves both alike.
        per_round = [o["s"] / t["s"] for _, o, t in rounds]
        print(f"baseline tree {args.baseline_tree}: export {listed(t['s'] for t in theirs)} s, median "
              f"{statistics.median(t['s'] for t in theirs):.2f} s, peak {max(t['mb'] for t in theirs):.0f} MB; "
              f"this tree / baseline, per round: {listed(per_round)}, median {statistics.median(per_round):.2f}")
    for name, size in sorted(sizes.items()):
        print(f"  {name}: {size / 1e6:.1f} MB" + ("" if name in exported else " (by tb-hwprof trace)"))


if __name__ == "__main__":
    main()
