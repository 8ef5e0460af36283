"""`tb-hwprof profile TOOL ... -- PROGRAM ARGS`: run a Python program under the profilers and export one run.

  ncu / rocprof-compute (counters): the program runs twice, once with the PyTorch profiler on (the
      trace: operators and kernels as the application ran them), once under the counter profiler
      with the filters that keep a capture short; both are exported and joined (analysis/join.py)
      into one run: the trace's kernels and operators carry the counters.
  nsys / rocprofv3 (tracers): the program runs once under the tracer; its capture is the run.

The capture is steered from inside the program by tb_hwprof/profile_env.py, loaded through the
sitecustomize.py of tb_hwprof/profile_boot/ put first on PYTHONPATH: the same steps (optimizer steps,
or tb_hwprof.profile_env.step() calls) are captured in every pass; ncu and nsys are told to capture
only inside the cudaProfilerStart/Stop range it marks.

Files: each pass writes into a capture folder of its own outside the logdir (a temporary one, or
--capture-dir when it is new or empty; a --capture-dir holding anything else gets a fresh
capture-<time> folder inside it, so an earlier capture's files are never read as this one's and
nothing of the user's is touched); the profilers' own output goes to <capture>/logs/<pass>.log as
well as to the terminal.  When every pass has succeeded the run is exported from the captured files
(the writer's atomic replace: with --overwrite the old run stays whole until the new one is
complete), and only then are they moved into <logdir>/<run>/ (the PyTorch trace where
torch-tb-profiler finds it).  Nothing a profiler wrote is ever deleted: a pass that fails, an export
that fails or Ctrl-C leave the capture folder as it is, and the error names it and the one
`tb-hwprof export ... --join ...` command that retries from it.

The join is checked on a real H200 trace + ncu pair (tests/test_h200_pair.py) and by
scripts/gpu_check/check.py wherever a GPU is at hand; the process handling is tested against fake
`ncu` / `nsys` executables and a real CPU PyTorch run.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

from ..core.errors import HwprofError

TOOLS = ("ncu", "nsys", "rocprof-compute", "rocprofv3")
COUNTER_TOOLS = ("ncu", "rocprof-compute")
INSTALL_HINTS = {
    "ncu": "install Nsight Compute (part of the CUDA toolkit, or https://developer.nvidia.com/nsight-compute) "
           "and put its folder on PATH",
    "nsys": "install Nsight Systems (part of the CUDA toolkit, or https://developer.nvidia.com/nsight-systems) "
            "and put its folder on PATH",
    "rocprof-compute": "install ROCm's rocprofiler-compute (apt install rocprofiler-compute; "
                       "https://rocm.docs.amd.com/projects/rocprofiler-compute) and put /opt/rocm/bin on PATH",
    "rocprofv3": "install ROCm's rocprofiler-sdk (apt install rocprofiler-sdk; "
                 "https://rocm.docs.amd.com/projects/rocprofiler-sdk) and put /opt/rocm/bin on PATH",
}
NCU_SETS = ("basic", "full", "roofline")
BOOT = Path(__file__).resolve().parent.parent / "profile_boot"
REPORT_STEM = "profile"
LOGS = "logs"
TRACE_FOLDER = "trace"


@dataclasses.dataclass
class ProfileOptions:
    tool: str
    command: List[str]
    logdir: str = "runs"
    run: str = "profile"
    steps: int = 3
    skip: int = 1
    kernels: Optional[str] = None  # a regular expression over kernel function names
    launch_skip: int = 0
    launch_count: Optional[int] = None
    ncu_set: str = "full"
    clock_control: str = "base"
    replay_mode: str = "kernel"
    duration_s: Optional[int] = 600
    overwrite: bool = False
    per_config: bool = True  # ncu profiles each (kernel, grid, block) once; False: by launch order (--by-order)

    @property
    def ranged(self) -> bool:
        """The capture is limited to the steps (else: the whole program)."""
        return self.steps > 0


# ------------------------------------------------------------------ the profilers' command lines
def ncu_argv(o: ProfileOptions, out_stem: Path) -> List[str]:
    """Nsight Compute over the program: every process, the filters that keep a capture short, the
    clock and cache settings stated (the cross-tool time check names them), report at out_stem.ncu-rep."""
    argv = ["ncu", "--target-processes", "all", "--replay-mode", o.replay_mode, "--clock-control", o.clock_control,
            "--cache-control", "all", "--set", o.ncu_set]
    if o.kernels:
        argv += ["--kernel-name-base", "function", "--kernel-name", f"regex:{o.kernels}"]
    if o.per_config:  # each launch configuration once (--launch-skip / --launch-count count per configuration)
        argv += ["--filter-mode", "per-launch-config"]
    if o.launch_skip:
        argv += ["--launch-skip", str(o.launch_skip)]
    if o.launch_count is not None or o.per_config:
        argv += ["--launch-count", str(o.launch_count if o.launch_count is not None else 1)]
    if o.ranged:
        argv += ["--profile-from-start", "off"]  # the steps' cudaProfilerStart/Stop range only
    return argv + ["--export", str(out_stem), "--force-overwrite", "--", *o.command]


def nsys_argv(o: ProfileOptions, out_stem: Path) -> List[str]:
    """Nsight Systems over the program: CUDA, NVTX and OS runtime traced, the steps' cudaProfilerApi
    range (or the whole run), a duration limit, exported to out_stem.sqlite as well."""
    argv = ["nsys", "profile", "--trace", "cuda,nvtx,osrt", "--sample", "none"]
    if o.ranged:
        argv += ["--capture-range", "cudaProfilerApi", "--capture-range-end", "stop"]
    if o.duration_s:
        argv += ["--duration", str(o.duration_s)]
    return argv + ["--output", str(out_stem), "--force-overwrite", "true", "--export", "sqlite", "--", *o.command]


def rocprof_compute_argv(o: ProfileOptions, workload: Path) -> List[str]:
    """rocprof-compute's profile mode into the workload folder (kernel filter by name where asked)."""
    argv = ["rocprof-compute", "profile", "--name", REPORT_STEM, "--path", str(workload)]
    if o.kernels:
        argv += ["--kernel", o.kernels]
    return argv + ["--", *o.command]


def rocprofv3_argv(o: ProfileOptions, out_dir: Path) -> List[str]:
    """rocprofv3's kernel and copy trace as CSV into out_dir."""
    return ["rocprofv3", "--kernel-trace", "--memory-copy-trace", "--output-format", "csv",
            "--output-directory", str(out_dir), "--output-file", REPORT_STEM, "--", *o.command]


def missing_tools(tools) -> List[str]:
    """One line per profiler not on PATH, with how to install it."""
    return [f"{tool} not found on PATH -- {INSTALL_HINTS[tool]}" for tool in tools if shutil.which(tool) is None]


# ------------------------------------------------------------------ running a pass
def pass_environment(mode: Optional[str], o: ProfileOptions, claim: Path) -> Dict[str, str]:
    """The program's environment for one pass: profile_boot first on PYTHONPATH and the capture asked."""
    env = dict(os.environ)
    env.pop("TB_HWPROF_PROFILE", None)
    if mode is None:
        return env
    env["PYTHONPATH"] = os.pathsep.join([str(BOOT), *filter(None, [env.get("PYTHONPATH")])])
    env.update(TB_HWPROF_PROFILE=mode, TB_HWPROF_PROFILE_STEPS=str(o.steps), TB_HWPROF_PROFILE_SKIP=str(o.skip),
               TB_HWPROF_PROFILE_CLAIM=str(claim))
    return env


def run_logged(argv: List[str], env: Dict[str, str], log: Path, echo: Callable[[str], None],
               watch: Callable[[str], None] = lambda line: None) -> int:
    """Run argv, its output (stdout and stderr together) into `log` line by line and to echo(line)
    and watch(line); the exit status.  A program that cannot start is a one-line error."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8", errors="replace") as out:
        out.write("$ " + subprocess.list2cmdline(argv) + "\n")
        try:
            process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, text=True, errors="replace", bufsize=1)
        except OSError as e:
            raise HwprofError(f"{argv[0]}: cannot start ({e.strerror or e}) -- check the command after --")
        try:
            for line in process.stdout:
                out.write(line)
                echo(line.rstrip("\n"))
                watch(line.rstrip("\n"))
        except BaseException:
            process.kill()
            process.wait()
            raise
        return process.wait()


@dataclasses.dataclass
class Capture:
    """One profile command's capture folder and its passes."""

    folder: Path
    options: ProfileOptions
    progress: Callable[[str], None]
    echo: Callable[[str], None]
    count: int = 0
    total: int = 1

    def run_pass(self, name: str, argv: List[str], mode: Optional[str],
                 watch: Callable[[str], None] = lambda line: None) -> None:
        """Run one pass; a non-zero exit is a one-line error naming the log."""
        self.count += 1
        log = self.folder / LOGS / f"{name}.log"
        claim = self.folder / f".claim-{name}"
        self.progress(f"[{self.count}/{self.total}] {name} pass: {subprocess.list2cmdline(argv)} (log: {log})")
        status = run_logged(argv, pass_environment(mode, self.options, claim), log, self.echo, watch)
        if status != 0:
            raise HwprofError(f"{log}: the {name} pass exited with status {status} -- see that log (the capture "
                              f"folder {self.folder} is kept; the logdir is untouched)")
        no_step = self.folder / "no-step-seen"
        if mode is not None and no_step.exists():
            seen = no_step.read_text().strip()
            raise HwprofError(f"{log}: the program ended after {seen} step(s), before the {self.options.skip} "
                              f"skipped + {self.options.steps} profiled -- pass --steps 0 (the whole program), "
                              f"fewer --skip-steps, or call tb_hwprof.profile_env.step() once per iteration")


def one_file(folder: Path, pattern: str, what: str, log: Path) -> Path:
    found = sorted(folder.rglob(pattern)) if folder.is_dir() else []
    if len(found) != 1:
        raise HwprofError(f"{log}: the pass wrote {len(found)} {what} under {folder}, expected one -- see that log")
    return found[0]


# ------------------------------------------------------------------ the command
def cmd_profile(args) -> int:
    o = options_of(args)
    lines = missing_tools([o.tool])
    if lines:
        raise HwprofError("; ".join(lines))
    from ..logdir.writer import run_folder
    run_folder(o.logdir, o.run, o.overwrite)  # a name in use fails before anything runs
    progress = (lambda line: None) if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    echo = (lambda line: None) if args.quiet else (lambda line: print(f"  | {line}", file=sys.stderr, flush=True))
    folder, temporary = capture_folder(args.capture_dir, progress)
    capture = Capture(folder, o, progress, echo, total=2 if o.tool in COUNTER_TOOLS else 1)
    files = CAPTURES[o.tool](capture)
    run_dir = place_and_export(files, o, progress, folder)
    if temporary:  # everything the passes wrote is in the run now
        shutil.rmtree(folder, ignore_errors=True)
    print(f"profiled into run {run_dir}: tensorboard --logdir {o.logdir}")
    return 0


CAPTURE_PREFIX = "capture-"


def capture_folder(asked: Optional[str], progress: Callable[[str], None]):
    """(the folder this capture writes into, whether it is a temporary one to remove once the run
    holds its files).  --capture-dir is used as it is when it is new or empty; one holding anything
    (an earlier capture's claims, reports and logs, or the user's own files) gets a fresh
    capture-<time> folder inside it: a capture folder serves one capture."""
    if not asked:
        return Path(tempfile.mkdtemp(prefix="tb-hwprof-profile-")), True
    folder = Path(asked)
    if folder.exists() and not folder.is_dir():
        raise HwprofError(f"{folder}: --capture-dir is a file -- give a folder (new or empty)")
    folder.mkdir(parents=True, exist_ok=True)
    if not any(folder.iterdir()):
        return folder, False
    stamp = time.strftime("%Y%m%d-%H%M%S")
    fresh = folder / f"{CAPTURE_PREFIX}{stamp}"
    for n in range(2, 1000):
        if not fresh.exists():
            break
        fresh = folder / f"{CAPTURE_PREFIX}{stamp}-{n}"
    fresh.mkdir()
    progress(f"{folder} already holds files: this capture goes into {fresh} (nothing there is read or changed)")
    return fresh, False


def options_of(args) -> ProfileOptions:
    command = list(args.program)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise HwprofError("no program to profile -- give it after --, e.g. tb-hwprof profile ncu --run r -- python train.py")
    return ProfileOptions(tool=args.tool, command=command, logdir=args.logdir, run=args.run, steps=args.steps,
                          skip=args.skip_steps, kernels=args.kernels, launch_skip=args.launch_skip,
                          launch_count=args.launch_count, ncu_set=args.set, clock_control=args.clock_control,
                          replay_mode=args.replay_mode, duration_s=args.duration, overwrite=args.overwrite,
                          per_config=not args.by_order)


@dataclasses.dataclass
class Captured:
    """What the passes produced: the file to export (a trace, or a tracer's capture), the counter
    report to join onto it (None for tracers), the logs."""

    primary: Path
    counters: Optional[Path]
    logs: Path
    filters: object = None  # analysis.join.JoinFilters
    per_config: bool = False  # the counter report holds one launch per configuration: joined per configuration
    keep: Optional[Path] = None  # the folder holding `counters`, moved whole (a rocprof-compute workload)

    def moves(self) -> List[Path]:
        return [p for p in (self.primary, self.keep or self.counters, self.logs) if p is not None]


def torch_pass(capture: Capture) -> Path:
    folder = capture.folder / TRACE_FOLDER
    capture.run_pass("torch", capture.options.command, f"torch:{folder}")
    return one_file(folder, "*.pt.trace.json*", "PyTorch traces", capture.folder / LOGS / "torch.log")


def capture_ncu(capture: Capture) -> Captured:
    from ..analysis.join import JoinFilters
    o = capture.options
    trace = torch_pass(capture)
    filters = JoinFilters(kernel_name=f"regex:{o.kernels}" if o.kernels else None, launch_skip=o.launch_skip,
                          launch_count=o.launch_count)
    asked = ncu_estimate(trace, filters, o, capture.progress)
    stem = capture.folder / REPORT_STEM
    capture.run_pass("ncu", ncu_argv(o, stem), "cuda-range" if o.ranged else None,
                     NcuProgress(asked, capture.progress).line)
    report = one_file(capture.folder, f"{REPORT_STEM}.ncu-rep", "Nsight Compute reports", capture.folder / LOGS / "ncu.log")
    return Captured(trace, report, capture.folder / LOGS, filters, per_config=o.per_config)


# Seconds Nsight Compute takes per kernel, per section set: measured on an H200 (Nsight Compute
# 2025.3.1, clocks locked to base): --set full replays each kernel 38 times, ~2.4 s a kernel.  Other
# sets are not measured: the progress line's own rate replaces the guess once kernels are done.
NCU_SECONDS_PER_KERNEL = {"full": 2.4}


def ncu_estimate(trace: Path, filters, o: ProfileOptions, progress: Callable[[str], None]) -> Optional[int]:
    """Say, before the ncu pass, how many kernels the trace pass saw in the captured steps, how many
    of them ncu is asked to profile, and about how long it will take; the number asked (None when
    the trace cannot be read here: the pass runs all the same)."""
    import numpy as np
    import pandas as pd
    from ..analysis.join import expected_launches
    from .export import read_report
    try:
        kernels = read_report(trace).profile.kernels
    except Exception as e:  # the estimate is advice: the export reads the trace again and says what is wrong
        progress(f"ncu pass: no estimate ({trace}: {e})")
        return None
    configurations = kernels.groupby(["name", "grid", "block"], dropna=False, sort=False).size() \
        if len(kernels) else pd.Series(dtype=int)
    if o.per_config:  # per configuration: --launch-skip of its launches, then --launch-count (default 1)
        named = expected_launches(kernels, filters.names_only())
        counts = kernels.iloc[named].groupby(["name", "grid", "block"], dropna=False, sort=False).size()
        asked = int(np.minimum(np.maximum(counts.to_numpy() - o.launch_skip, 0), o.launch_count or 1).sum())
        how = f"each configuration {o.launch_count or 1} time(s), --filter-mode per-launch-config"
    else:
        asked, how = len(expected_launches(kernels, filters)), filters.text()
    per_kernel = NCU_SECONDS_PER_KERNEL.get(o.ncu_set)
    took = (f"about {_duration(asked * per_kernel)} at ~{per_kernel} s a kernel (--set {o.ncu_set}, measured on an H200)"
            if per_kernel else f"--set {o.ncu_set}: the time per kernel shows once the first ones are done")
    progress(f"ncu pass: the trace pass saw {len(kernels)} kernel launches ({len(configurations)} distinct kernel, grid "
             f"and block) in the captured steps; ncu profiles {asked} of them ({how}): {took}")
    return asked


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


# ncu's line for each kernel it profiled: '==PROF== Profiling "name" - 3: 0%....50%....100% - 38 passes',
# 2025.3 with --launch-count: '==PROF== Profiling "name" - 4 (5/20): 0%....50%....100% - 38 passes'.
NCU_PROFILED = re.compile(r'^==PROF== Profiling ".*" - \d+(?: \(\d+/\d+\))?: .*100% - \d+ pass')


@dataclasses.dataclass
class NcuProgress:
    """A progress line per kernel ncu has profiled: done / asked and the time left at the rate so far."""

    asked: Optional[int]
    progress: Callable[[str], None]
    done: int = 0
    started: float = dataclasses.field(default_factory=time.monotonic)

    def line(self, text: str) -> None:
        if not NCU_PROFILED.match(text):
            return
        self.done += 1
        elapsed = time.monotonic() - self.started
        if self.asked:
            left = max(self.asked - self.done, 0) * elapsed / self.done
            self.progress(f"ncu: {self.done}/{self.asked} kernels profiled, {_duration(elapsed)} so far, "
                          f"about {_duration(left)} left")
        else:
            self.progress(f"ncu: {self.done} kernels profiled, {_duration(elapsed)} so far")


def capture_rocprof_compute(capture: Capture) -> Captured:
    from ..analysis.join import JoinFilters
    o = capture.options
    trace = torch_pass(capture)
    workload = capture.folder / "workload"
    capture.run_pass("rocprof-compute", rocprof_compute_argv(o, workload), None)
    perf = one_file(workload, "pmc_perf.csv", "rocprof-compute workloads", capture.folder / LOGS / "rocprof-compute.log")
    # rocprof-compute's --kernel matches a substring of the name.
    return Captured(trace, perf.parent, capture.folder / LOGS, JoinFilters(), keep=workload)


def capture_nsys(capture: Capture) -> Captured:
    stem = capture.folder / REPORT_STEM
    capture.run_pass("nsys", nsys_argv(capture.options, stem), "cuda-range" if capture.options.ranged else None)
    sqlite = one_file(capture.folder, f"{REPORT_STEM}.sqlite", "Nsight Systems exports", capture.folder / LOGS / "nsys.log")
    return Captured(sqlite, None, capture.folder / LOGS)


def capture_rocprofv3(capture: Capture) -> Captured:
    out = capture.folder / "rocprofv3"
    capture.run_pass("rocprofv3", rocprofv3_argv(capture.options, out), None)
    trace = one_file(out, "*kernel_trace.csv", "rocprofv3 kernel traces", capture.folder / LOGS / "rocprofv3.log")
    return Captured(trace, None, capture.folder / LOGS)


CAPTURES = {"ncu": capture_ncu, "nsys": capture_nsys, "rocprof-compute": capture_rocprof_compute,
            "rocprofv3": capture_rocprofv3}


def place_and_export(files: Captured, o: ProfileOptions, progress, folder: Path) -> Path:
    """Export the run from the captured files where they lie, then move them into <logdir>/<run>/.
    The export writes the run atomically (an --overwrite replaces the old run only once the new one
    is complete); when it fails, or is interrupted, nothing the passes wrote has moved: the error
    names the capture folder and the command that retries the export from it."""
    run_dir = Path(o.logdir).joinpath(*Path(o.run).parts)
    roots = files.moves()
    placed = {path: run_dir / path.name for path in roots}
    try:
        export_captured(files, o, progress, {path: _relocated(path, roots, run_dir)
                                             for path in (files.primary, files.counters) if path is not None})
    except KeyboardInterrupt:
        print(f"tb-hwprof: interrupted: {capture_kept(files, o, folder)}", file=sys.stderr, flush=True)
        raise
    except Exception as e:
        message = str(e) if isinstance(e, HwprofError) else f"unexpected {type(e).__name__}: {e}"
        raise HwprofError(f"{message}; {capture_kept(files, o, folder)}") from e
    try:
        if run_dir.exists():  # --overwrite: an earlier profile's traces would sit beside the new one
            for old in run_dir.glob("*.pt.trace.json*"):
                old.unlink()
        for path, target in placed.items():
            _move_to(path, target)
    except OSError as e:  # a full disk, say: the run is complete, the files not moved are where they were
        raise HwprofError(f"{run_dir}: the run is written but moving the captured files into it failed "
                          f"({e.strerror or e}); what was not moved is still in {folder}") from e
    return run_dir


def export_captured(files: Captured, o: ProfileOptions, progress, located: Dict[Path, Path]) -> Path:
    """Write the run from the captured files; `located`: where each will lie once moved into the run
    (the run's provenance names those paths, not the capture folder's)."""
    if files.counters is not None:
        return export_joined(files.primary, files.counters, o.logdir, o.run, files.filters, overwrite=o.overwrite,
                             beside=True, progress=progress, located=located, per_config=files.per_config)
    from .export import export_reports
    return export_reports([files.primary], o.logdir, [o.run], overwrite=o.overwrite, beside=True, progress=progress,
                          located=located)[0]


def capture_kept(files: Captured, o: ProfileOptions, folder: Path) -> str:
    """What the user is told when the export of a capture fails: where it is, and how to retry."""
    inputs = [files.primary] + ([files.counters] if files.counters is not None else [])
    argv = ["tb-hwprof", "export", *map(str, inputs)]
    if files.counters is not None:
        argv += ["--join", "--per-config"] if files.per_config else ["--join"]
        filters = files.filters
        if filters is not None and filters.kernel_name:
            argv += ["--kernel-name", filters.kernel_name, "--kernel-name-base", filters.name_base]
        if filters is not None and filters.launch_skip and not files.per_config:
            argv += ["--launch-skip", str(filters.launch_skip)]
        if filters is not None and filters.launch_count is not None and not files.per_config:
            argv += ["--launch-count", str(filters.launch_count)]
    argv += ["--logdir", str(o.logdir), "--run", o.run] + (["--overwrite"] if o.overwrite else [])
    return f"the capture is kept in {folder} -- retry the export alone with: {subprocess.list2cmdline(argv)}"


def _relocated(path: Path, roots: List[Path], run_dir: Path) -> Path:
    """Where `path` is once the roots (it or a folder above it) have been moved into run_dir."""
    for root in roots:
        if path == root or root in path.parents:
            return run_dir / root.name / path.relative_to(root)
    raise ValueError(f"{path} was not moved")


def _move_to(path: Path, target: Path) -> None:
    """Move a captured file or folder to `target`, replacing what an earlier profile of the run left
    there (the run folder's files are this tool's own)."""
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    elif target.exists() or target.is_symlink():
        target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(path), str(target))


# ------------------------------------------------------------------ the joined export
def export_joined(trace_path, counter_path, logdir, run: str, filters=None, overwrite: bool = False,
                  beside: bool = False, progress: Callable[[str], None] = lambda line: None,
                  trace_mode: str = "auto", located: Optional[Dict[Path, Path]] = None,
                  per_config: bool = False) -> Path:
    """Read a trace and a counter report of the same program, join them (analysis/join.py) and write
    one run; its notes and its counter_join table say what was matched and what was not.  located:
    {input path: the path the run's provenance names instead} (files moved into the run after).
    per_config: the report holds one launch per configuration (ncu --filter-mode per-launch-config):
    its counters go onto every trace launch of that configuration (analysis/join.py join_per_config)."""
    from ..analysis.join import JoinFilters, join, join_per_config
    from .export import Report, _analyse_and_write, read_report
    from ..logdir.writer import run_folder
    run_folder(logdir, run, overwrite, beside)
    first = read_report(trace_path, progress=progress, located=located)
    second = read_report(counter_path, progress=progress, located=located)
    trace, counters = sides(first, second)
    result = (join_per_config if per_config else join)(trace.profile, counters.profile, filters or JoinFilters())
    progress(f"joined {counters.path} onto {trace.path}: {result.count('matched')} matched, "
             f"{len(result.table) - result.count('matched')} listed as not joined ({result.stage} names)")
    if per_config:  # the coverage: launches and kernel time that carry counters
        progress(next(n for n in result.profile.notes if n.startswith("per-configuration join")))
    out, _ = _analyse_and_write([Report(trace.path, result.profile, trace.window)], Path(logdir), [run], overwrite,
                                [0], trace_mode, progress, lambda run_dir: None, beside)
    return out[0]


def sides(a, b):
    """(trace, counter report) of two read reports: the trace is the one with a timeline or operators."""
    is_trace = lambda r: r.profile.timeline is not None or r.profile.torch is not None
    if is_trace(a) == is_trace(b):
        what = "traces" if is_trace(a) else "counter reports"
        raise HwprofError(f"{a.path}: --join needs one trace (PyTorch, Nsight Systems, rocprofv3) and one counter "
                          f"report (Nsight Compute, rocprof-compute); {a.path.name} and {b.path.name} are both {what}")
    return (a, b) if is_trace(a) else (b, a)


def add_join_arguments(export) -> None:
    """The export command's --join and the filters the counter report was captured with."""
    export.add_argument("--join", action="store_true",
                        help="two files, a trace (PyTorch, Nsight Systems) and a counter report (Nsight Compute, "
                             "rocprof-compute) of the same program: one run, the counters on the trace's kernels "
                             "(matched by name and launch order; what does not match is listed, never guessed)")
    export.add_argument("--kernel-name", metavar="NAME|regex:EXPR",
                        help="with --join: the --kernel-name ncu was given (which kernels it profiled)")
    export.add_argument("--kernel-name-base", choices=("function", "demangled", "mangled"), default="function",
                        help="with --join: ncu's --kernel-name-base (default function)")
    export.add_argument("--launch-skip", type=int, default=0, help="with --join: ncu's --launch-skip")
    export.add_argument("--launch-count", type=int, default=None, help="with --join: ncu's --launch-count")
    export.add_argument("--per-config", action="store_true",
                        help="with --join: the report holds one launch per (kernel, grid, block) (ncu --filter-mode "
                             "per-launch-config): its counters go onto every trace launch of that configuration")


def cmd_export_joined(args) -> int:
    from ..analysis.join import JoinFilters
    if len(args.files) != 2:
        raise HwprofError(f"--join takes two files (a trace and a counter report), not {len(args.files)}")
    if args.run is None:
        raise HwprofError("--join writes one run: name it with --run")
    filters = JoinFilters(args.kernel_name, args.kernel_name_base, args.launch_skip, args.launch_count)
    progress = (lambda line: None) if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    run_dir = export_joined(args.files[0], args.files[1], args.logdir, args.run, filters, args.overwrite,
                            progress=progress, trace_mode=args.trace, per_config=args.per_config)
    print(f"exported 1 joined run to {run_dir}: tensorboard --logdir {Path(args.logdir)}")
    return 0


PROFILE_EPILOG = """\
examples:
  tb-hwprof profile ncu --kernels 'gemm|conv' --launch-count 50 --run r1 -- python train.py --epochs 1
  tb-hwprof profile nsys --steps 5 --run r2 -- python train.py
  tb-hwprof profile rocprof-compute --run r3 -- python train.py
  tb-hwprof export trace.pt.trace.json.gz report.ncu-rep --join --run r4 --launch-count 50

The program runs with tb_hwprof/profile_boot first on PYTHONPATH: it captures --steps optimizer
steps (torch.optim's step hook; a program without an optimizer calls tb_hwprof.profile_env.step()
once per iteration) after --skip-steps, in every pass; --steps 0 captures the whole program.
A --capture-dir that holds files gets a fresh capture-<time> folder inside it; a failed export keeps
the capture and prints the export --join command that retries it.
"""


def add_profile_command(sub) -> None:
    """`profile TOOL [options] -- PROGRAM`: one sub-command per tool, so that everything after the
    options (or after --) is the program's, options included."""
    p = sub.add_parser("profile", help="run a Python program under a profiler (and the PyTorch profiler) into one run",
                       description="Run a Python program under Nsight Compute / rocprof-compute (twice: once with "
                                   "the PyTorch profiler, once under the counter profiler, joined into one run) or "
                                   "Nsight Systems / rocprofv3 (once), and export the run.",
                       epilog=PROFILE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    tools = p.add_subparsers(dest="tool", required=True, metavar="TOOL")
    common = profile_options()
    for tool in TOOLS:
        t = tools.add_parser(tool, parents=[common], help=f"profile under {tool}", epilog=PROFILE_EPILOG,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        t.add_argument("program", nargs=argparse.REMAINDER, help="-- then the program and its arguments")
        t.set_defaults(func=cmd_profile)


def profile_options() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--logdir", default="runs", help="TensorBoard log folder (default: runs)")
    p.add_argument("--run", required=True, help="run name")
    p.add_argument("--steps", type=int, default=3, help="steps to capture (default 3; 0: the whole program)")
    p.add_argument("--skip-steps", type=int, default=1, help="steps to let pass first (default 1: warm-up)")
    p.add_argument("--kernels", metavar="REGEX", help="ncu / rocprof-compute: profile only kernels whose name matches")
    p.add_argument("--launch-skip", type=int, default=0, help="ncu: matching launches to skip first")
    p.add_argument("--launch-count", type=int, default=None,
                   help="ncu: launches to profile per configuration (default 1), with --by-order in all")
    p.add_argument("--by-order", action="store_true",
                   help="ncu: profile launches in launch order (each launch's own counters) instead of each "
                        "(kernel, grid, block) configuration once, joined onto every launch of it (the default)")
    p.add_argument("--set", choices=NCU_SETS, default="full", help="ncu: section set (default full)")
    p.add_argument("--clock-control", choices=("base", "none"), default="base",
                   help="ncu: lock clocks to base (default, ncu's own) or leave them")
    p.add_argument("--replay-mode", choices=("kernel", "application", "range"), default="kernel",
                   help="ncu: replay mode (default kernel)")
    p.add_argument("--duration", type=int, default=600, help="nsys: stop after this many seconds (default 600)")
    p.add_argument("--capture-dir", help="keep the capture folder here (default: a temporary one, removed on success)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing run of the same name")
    p.add_argument("--quiet", action="store_true", help="no progress lines and no program output on the terminal")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p
