"""`tb-hwprof` command line."""
from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path
from typing import List, Optional

from ..core import __version__
from .compare_cli import add_compare_command
from .plan_cli import add_plan_command
from ..core.errors import HwprofError
from .profile_cli import add_join_arguments, add_profile_command, cmd_export_joined
from ..logdir.metadata import TIMELINE as TIMELINE_NAME

EXPORT_EPILOG = """\
examples:
  tb-hwprof export report.ncu-rep --logdir runs --run baseline
  tb-hwprof export ncu_output.csv --logdir runs --run baseline-csv      # `ncu --csv` text
  tb-hwprof export report.sqlite --logdir runs                          # nsys export --type sqlite
  tb-hwprof export report.nsys-rep --logdir runs --nvtx-range train_step   # needs nsys on PATH
  tb-hwprof export report.sqlite --logdir runs --time-range 2000000000:2500000000   # a window, ns
  tb-hwprof export workloads/vcopy/MI200 --logdir runs --run vcopy      # rocprof-compute workload folder
  tb-hwprof export results.csv kernel_trace.csv hotspots.csv --logdir runs   # rocprof v1/v3, VTune CSV
  tb-hwprof export v1.ncu-rep v2.ncu-rep --logdir runs --run series     # runs series/v1, series/v2 at steps 0, 1
  tb-hwprof export worker0.1623143089861.pt.trace.json.gz --logdir runs   # PyTorch profiler trace
  tb-hwprof export runs/exp1                # tensorboard_trace_handler's folder: exported beside its trace
  tb-hwprof export rank*.pt.trace.json.gz --logdir runs --run job       # a distributed job: job/rank_N + job
  tb-hwprof export rank*.sqlite --ranks --logdir runs --run job         # ranks of other formats: --ranks
  tb-hwprof export rank*.json.gz --run job --scheduler tcp://host:8786  # on an existing Dask cluster
  tensorboard --logdir runs

The format is detected from the file's content. Each report becomes one run:
<logdir>/<run>/ with a TensorBoard event file (headline scalars) and the tables
under plugins/tb_hwprof/ (see docs/FORMAT.md). With several files, --run NAME
names a group and each file becomes NAME/<file stem>. A PyTorch run folder inside
the logdir (what torch.profiler.tensorboard_trace_handler writes) gets the run
beside its trace, so TensorBoard shows one run with the PyTorch Profiler and
tb-hwprof tabs; a folder of several traces gets a run per trace inside it.

Writes are atomic: the run is built in a hidden folder and renamed into place,
so a failed or killed export leaves the logdir as it was. An existing run is
never touched unless --overwrite is given; then it is replaced as a whole,
only after the new one has been written completely.

Series or job: several files under --run NAME are an optimisation series
(NAME/<file stem> at steps 0, 1, ...), except when they are the ranks of one
distributed job: --ranks says so for any format (Nsight Systems .sqlite or
rocprof per rank), and PyTorch traces whose distributedInfo gives each a
different rank of the same world size are taken as a job without it (--series
exports them as a series).  A job's ranks become runs NAME/rank_N (the rank from
distributedInfo, else rank_N / rankN in the file name, else the order given)
and NAME itself a cross-rank run (ranks, steps per rank, stragglers).  The ranks
are exported on Dask: a local cluster of one single-threaded worker process per
core (--workers), or the cluster at --scheduler ADDRESS ($TB_HWPROF_SCHEDULER),
whose workers must see the files and the logdir at the same paths; --scheduler
none exports them one after another in this process.  A missing or damaged rank
stops the job with nothing written, unless --skip-bad-ranks (the job's notes
list the skipped ones); ranks of different jobs are refused.
"""


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".ncu-rep", ".csv", ".txt"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def run_names(files: List[Path], run: Optional[str]) -> List[str]:
    if len(files) == 1:
        return [run if run is not None else _stem(files[0])]
    stems = [_stem(f) for f in files]
    dupes = sorted({s for s in stems if stems.count(s) > 1})
    if dupes:
        raise HwprofError(f"several inputs would share the run name {dupes[0]!r}: export them one at a time with --run")
    return [f"{run}/{s}" if run is not None else s for s in stems]


def reuse_freed_memory() -> None:
    """Have glibc keep freed memory for the next allocation instead of handing it back to the OS.

    An export allocates and frees hundreds of MB of numpy temporaries.  By default glibc serves
    large blocks with mmap and unmaps them when freed, so each new array starts on fresh pages:
    a page fault and zeroing per 4 kB, which on a VM cost more than the work done with them (a
    1M-kernel export spent ~1.2 of its ~2.3 s in the kernel).  One arena for all threads (each
    thread's own would keep its own freed memory), the heap for every block, nothing trimmed: that
    export then takes ~1.5 s at about the same peak (the same memory is used again).  Only for the
    CLI's export and trace commands, short-lived processes; a no-op where there is no glibc (macOS,
    Windows, musl)."""
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    for option, value in ((-8, 1),         # M_ARENA_MAX
                          (-3, 1 << 30),   # M_MMAP_THRESHOLD (also stops glibc moving it)
                          (-1, 1 << 30)):  # M_TRIM_THRESHOLD
        libc.mallopt(option, value)


HUGE_PAGE_ADVICE = "NUMPY_MADVISE_HUGEPAGE"


def no_huge_page_advice() -> None:
    """Have numpy stop asking the kernel for huge pages for its arrays (madvise MADV_HUGEPAGE on
    every array of 4 MB or more, numpy's default on Linux), unless the user's environment says
    otherwise.  With transparent huge pages on request only (`madvise`, the default of Ubuntu and
    of this project's machines), each such page fault compacts and zeroes 2 MB in the kernel: in
    alternating rounds (5 each) a 4M-event PyTorch export took 2.87 s with the advice and 2.49 s
    without, a 1M-kernel nsys export 2.49 and 2.39 s, the kernel's share of both ~0.4 s less, at the
    same peak.  Before numpy is imported, through its environment variable, set for that import
    only (the processes the export starts are not told); after, through the setter numpy's own
    import calls with it."""
    if HUGE_PAGE_ADVICE in os.environ:
        return
    if "numpy" not in sys.modules:
        os.environ[HUGE_PAGE_ADVICE] = "0"  # numpy reads it once, at import
        try:
            import numpy  # noqa: F401
        finally:
            del os.environ[HUGE_PAGE_ADVICE]
        return
    numpy = sys.modules["numpy"]
    core = getattr(numpy, "_core", None) or getattr(numpy, "core", None)
    setter = getattr(getattr(core, "multiarray", None), "_set_madvise_hugepage", None)
    if setter is not None:
        setter(False)


def cmd_export(args) -> int:
    if args.join:  # a trace and a counter report into one run (profile_cli.py)
        return cmd_export_joined(args)
    no_huge_page_advice()
    from .export import WindowOptions, export_reports
    reuse_freed_memory()
    from .torch_runs import export_folder, is_torch_run_folder
    inputs = [Path(f) for f in args.files]
    # PyTorch run folders (tensorboard_trace_handler's): their traces are exported beside them.
    folders = [p for p in inputs if p.is_dir() and is_torch_run_folder(p)]
    files = [p for p in inputs if p not in folders]
    window = WindowOptions(args.time_range, args.nvtx_range, args.nvtx_instances)
    first_step = args.step or 0
    options = dict(step=first_step, window=window, trace=args.trace, progress=lambda line: _progress(args, line),
                   written=lambda run_dir: _report_timeline(run_dir, args.trace))
    count = 0
    if files and is_job(args, files, folders):
        return export_job(args, files, window)
    refuse_job_options(args)
    if files:
        series = args.run if len(files) > 1 and args.run is not None else None
        count += len(export_reports(files, args.logdir, run_names(files, args.run), overwrite=args.overwrite,
                                    salvage=args.salvage, series=series,
                                    **{**options, "step": series_steps(len(files), first_step) if series else first_step}))
    for folder in folders:
        run = args.run if len(folders) == 1 and not files else None
        count += len(export_folder(folder, args.logdir, run, overwrite=args.overwrite, **options))
    logdir = args.logdir if "://" in str(args.logdir) else Path(args.logdir)  # a URL stays one (s3://...)
    print(f"exported {count} run(s) to {logdir}: tensorboard --logdir {logdir}")
    return 0


JOB_OPTIONS = (("scheduler", "--scheduler"), ("workers", "--workers"), ("skip_bad_ranks", "--skip-bad-ranks"))


def is_job(args, files: List[Path], folders: List[Path]) -> bool:
    """Whether the files are the ranks of one job (the rule of EXPORT_EPILOG's "Series or job")."""
    if args.series:
        return False
    if args.ranks:
        if args.run is None or folders:
            raise HwprofError("--ranks needs --run JOB naming the job, and rank files (not run folders)")
        return True
    if args.run is None or folders or len(files) < 2:
        return False
    from .jobs import looks_like_job
    if looks_like_job(files):
        _progress(args, f"{len(files)} PyTorch traces of distinct ranks of one world size: exported as job "
                        f"{args.run} (--series exports them as a series)")
        return True
    return False


def refuse_job_options(args) -> None:
    """--scheduler, --workers and --skip-bad-ranks mean nothing outside a job: say so rather than ignore them."""
    given = [flag for attr, flag in JOB_OPTIONS if getattr(args, attr) not in (None, False)]
    if given:
        raise HwprofError(f"{', '.join(given)}: only for the ranks of a job -- add --ranks (and --run JOB)")


def export_job(args, files: List[Path], window) -> int:
    from .jobs import export_job as run_job
    runs = run_job(files, args.logdir, args.run, scheduler=args.scheduler, skip_bad_ranks=args.skip_bad_ranks,
                   overwrite=args.overwrite, step=args.step or 0, trace=args.trace, window=window,
                   salvage=args.salvage, workers=args.workers, progress=lambda line: _progress(args, line))
    logdir = args.logdir if "://" in str(args.logdir) else Path(args.logdir)  # a URL stays one (s3://...)
    print(f"exported job {args.run}: {len(runs) - 1} rank run(s) and the job's run to {logdir}: "
          f"tensorboard --logdir {logdir}")
    return 0


def _report_timeline(run_dir: Path, mode: str) -> None:
    """How many trace events the export kept and dropped, and whether it wrote the trace file
    (printed: it is the export's result)."""
    from ..logdir.reader import read_manifest
    info = read_manifest(run_dir).get("timeline")
    if not info:
        return
    window = info.get("window")
    where = f" in {window['label']} [{window['start_ns']}, {window['end_ns']}] ns" if window else ""
    kept = ", ".join(f"{n} {k}" for k, n in info["kept"].items() if n and k != "flow")
    print(f"{run_dir}: timeline kept {info['kept_events']} events, dropped {info['dropped_events']}{where}"
          f" ({kept or 'nothing'}; {info['kept']['flow']} launch flows)")
    if info.get("trace_written") is False:
        from ..logdir.trace import TRACE_EAGER_EVENTS
        why = "--trace never" if mode == "never" else f"over {TRACE_EAGER_EVENTS:,} slices: --trace always writes it"
        print(f"{run_dir}: trace file {TIMELINE_NAME} not written ({why}); `tb-hwprof trace {run_dir}` writes it "
              f"from the run, the plugin's Download trace renders it")


def series_steps(count: int, first: int) -> List[int]:
    """Files exported together under one --run are an optimisation series, in the order given: the
    scalars' step is the file's position (from --step, default 0), so TensorBoard draws lines."""
    return list(range(first, first + count))


def cmd_trace(args) -> int:
    """Render an exported run's Chrome trace from its timeline index."""
    no_huge_page_advice()
    from ..logdir import run_trace
    reuse_freed_memory()  # 2.2M slices: ~2.8 instead of ~3.1 s
    started = time.perf_counter()
    out = Path(args.output) if args.output else None
    done = run_trace.render(Path(args.run_dir), out, progress=lambda line: _progress(args, line))
    if done is None:
        print(f"{args.run_dir}: {TIMELINE_NAME} is already there: nothing to do (-o OUT.json.gz writes a copy)")
        return 0
    print(f"wrote {done['path']}: {done['events']:,} slices, {_size(done['gz_bytes'])} gz "
          f"in {time.perf_counter() - started:.1f} s")
    return 0


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


def _progress(args, line: str) -> None:
    if not args.quiet:
        print(line, file=sys.stderr, flush=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tb-hwprof", description="GPU/CPU profiler results in TensorBoard.")
    parser.add_argument("--version", action="version", version=f"tb-hwprof {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    export = sub.add_parser("export", help="convert profiler reports into TensorBoard runs",
                            description="Convert profiler reports into TensorBoard runs.",
                            epilog=EXPORT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    export.add_argument("files", nargs="+", metavar="FILE", help="report file(s), rocprof-compute workload folder(s) or PyTorch run folder(s)")
    export.add_argument("--logdir", default="runs", help="TensorBoard log folder (default: runs)")
    export.add_argument("--run", help="run name (default: the file name without extension)")
    export.add_argument("--overwrite", action="store_true", help="replace an existing run of the same name")
    export.add_argument("--step", type=int, default=None,
                        help="step of the headline scalars (default 0); files exported together with --run NAME "
                             "are a series in the order given, at steps STEP, STEP+1, ... (and NAME's own event "
                             "file holds them all, drawn as lines in TensorBoard's Scalars)")
    window = export.add_mutually_exclusive_group()
    window.add_argument("--time-range", metavar="START:END",
                        help="traces: keep only events overlapping START..END ns on the report's clock (for "
                             "Nsight Systems, from the start of the capture session, as the nsys GUI shows it); "
                             "either side may be left empty")
    window.add_argument("--nvtx-range", metavar="NAME",
                        help="traces: keep only events overlapping the NVTX range NAME (see --nvtx-instances)")
    export.add_argument("--nvtx-instances", choices=("first", "all"), default="first",
                        help="with --nvtx-range: the first range of that name (default), or from the first "
                             "one's start to the last one's end")
    export.add_argument("--trace", choices=("auto", "always", "never"), default="auto",
                        help=f"traces: write {TIMELINE_NAME} (Chrome trace for Perfetto) at export: auto "
                             f"(default) unless the kept window is too big to write quickly (the export says "
                             f"so), always, or never; a run without it gets it from `tb-hwprof trace RUN_DIR` "
                             f"or the plugin's Download trace")
    export.add_argument("--salvage", action="store_true",
                        help="a damaged report (Nsight Compute .ncu-rep): keep its sound launches instead of "
                             "refusing the file; the run's notes list the launches left out")
    add_job_options(export)
    export.add_argument("--quiet", action="store_true", help="no progress lines")
    export.add_argument("--debug", action="store_true", help="show tracebacks")
    add_join_arguments(export)
    export.set_defaults(func=cmd_export)
    add_trace_command(sub)
    add_compare_command(sub)
    add_plan_command(sub)
    add_profile_command(sub)
    return parser


def add_job_options(export) -> None:
    kind = export.add_mutually_exclusive_group()
    kind.add_argument("--ranks", action="store_true",
                      help="the files are the ranks of one distributed job (any format): runs JOB/rank_N and the "
                           "cross-rank run JOB (needs --run JOB); PyTorch traces naming distinct ranks of one world "
                           "size in distributedInfo are a job without it")
    kind.add_argument("--series", action="store_true",
                      help="the files are an optimisation series even if they look like a job's ranks")
    export.add_argument("--scheduler", metavar="ADDRESS",
                        help="job: the Dask scheduler to run the ranks on (tcp://host:8786; its workers must see "
                             "the files and the logdir at these paths), or 'none' for one after another in this "
                             "process (default: $TB_HWPROF_SCHEDULER, else a local cluster)")
    export.add_argument("--workers", type=int, metavar="N",
                        help="job on a local cluster: N single-threaded worker processes (default: one per core, "
                             "at most one per rank; each holds one rank at a time)")
    export.add_argument("--skip-bad-ranks", action="store_true",
                        help="job: export the other ranks when one is missing or damaged, listing it in the job's "
                             "notes (default: stop with nothing written)")


def add_trace_command(sub) -> None:
    trace = sub.add_parser("trace", help=f"write an exported run's {TIMELINE_NAME} from its timeline index",
                           description=f"Render the Chrome trace (Perfetto / chrome://tracing) of an exported "
                                       f"trace run from its timeline index: into the run's own {TIMELINE_NAME} "
                                       f"(listed in its manifest), or into -o OUT. Runs exported with "
                                       f"--trace never, or above --trace auto's size, have only the index.")
    trace.add_argument("run_dir", metavar="RUN_DIR", help="the run's folder (<logdir>/<run>)")
    trace.add_argument("-o", "--output", metavar="OUT.json.gz",
                       help=f"write the trace here instead of the run's {TIMELINE_NAME}")
    trace.add_argument("--quiet", action="store_true", help="no progress lines")
    trace.add_argument("--debug", action="store_true", help="show tracebacks")
    trace.set_defaults(func=cmd_trace)


def os_error_text(e: OSError) -> str:
    """One line for a failed write or read: "no space left on <path>" for a full disk, else the
    system's words with the path."""
    import errno
    where = e.filename or "the logdir"
    if e.errno == errno.ENOSPC:
        return f"no space left on {where} -- free space there or export to another --logdir"
    if e.errno == errno.EDQUOT:
        return f"disk quota exceeded on {where} -- free space there or export to another --logdir"
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"cannot write {where} ({e.strerror}) -- check its permissions or choose another --logdir"
    return f"{e.strerror or type(e).__name__} on {where}"


NCU_REP_MAGIC = b"NVR\x00"


def load_ncu_report_first(args) -> None:
    """Import NVIDIA's ncu_report before pandas when this command reads an Nsight Compute report (a
    file given starts with its magic, or `profile ncu`): the copy Nsight Compute 2025.3 ships in
    extras/python crashes (SIGSEGV in IMetric.unit, seen on an H200) once pyarrow, which pandas 3
    imports, was loaded before it.  PyPI's ncu-report has no such trouble; loaded first, neither has."""
    if "pandas" in sys.modules or "pyarrow" in sys.modules:
        return
    given = [v for value in vars(args).values() for v in (value if isinstance(value, list) else [value])]
    if getattr(args, "tool", None) == "ncu" or any(_starts_with(v, NCU_REP_MAGIC) for v in given if isinstance(v, str)):
        try:
            import ncu_report  # noqa: F401  (optional; the reader says how to install it where needed)
        except ImportError:
            pass


def _starts_with(path: str, magic: bytes) -> bool:
    if not os.path.isfile(path):  # never open a pipe here: a FIFO without a writer would block
        return False
    try:
        with open(path, "rb") as f:
            return f.read(len(magic)) == magic
    except OSError:  # a folder, a glob, a URL, a run name: not a report file
        return False


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    load_ncu_report_first(args)
    try:
        return args.func(args)
    except HwprofError as e:
        if args.debug:
            traceback.print_exc()
        print(f"tb-hwprof: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("tb-hwprof: interrupted; nothing was left half-written", file=sys.stderr)
        return 130
    except OSError as e:  # the disk, not the input: say which and that nothing was kept
        if args.debug:
            raise
        print(f"tb-hwprof: error: {os_error_text(e)}; nothing was left half-written", file=sys.stderr)
        return 1
    except Exception as e:  # a bug, or an input we did not foresee: still one line unless --debug
        if args.debug:
            raise
        print(f"tb-hwprof: error: {crash_text(e)}", file=sys.stderr)
        return 1


def crash_text(e: Exception) -> str:
    """One line for an exception nobody foresaw, naming the input being handled when there was one
    (the pipeline tags the exception with it: input_path)."""
    where = getattr(e, "input_path", None)
    what = f"{type(e).__name__}: {e}".splitlines()[0] if str(e) else type(e).__name__
    if where is None:
        return f"unexpected {what} (a bug; rerun with --debug for the traceback and report it)"
    return (f"{where}: unexpected {what} (a bug or a damage we did not foresee; rerun with --debug "
            f"and report it with the file)")


if __name__ == "__main__":
    sys.exit(main())
