"""The in-program side of `tb-hwprof profile`: what runs inside the user's Python program.

`tb-hwprof profile` puts tb_hwprof/profile_boot/ first on PYTHONPATH; its sitecustomize.py calls
start_from_environment() as the interpreter starts, which reads:

  TB_HWPROF_PROFILE        "torch:<folder>"  record a PyTorch profiler trace into <folder>
                           "cuda-range"      call cudaProfilerStart/Stop around the steps, for
                                             `ncu --profile-from-start off` / `nsys --capture-range
                                             cudaProfilerApi` to capture exactly those steps
  TB_HWPROF_PROFILE_STEPS  how many steps to capture (0: the whole program, start to exit)
  TB_HWPROF_PROFILE_SKIP   how many steps to let pass first (warm-up)

A step is an optimizer step (torch.optim's global step hook), or a call of tb_hwprof.profile_env.step()
for a program without an optimizer (inference loops): both passes count the same steps, so the trace
and the counter report cover the same launches.  Only the first Python process of the run that
starts claims the capture (a file in the folder): spawned workers and other ranks run unprofiled.
"""
from __future__ import annotations

import atexit
import os
import socket
import sys
import time
from pathlib import Path
from typing import Callable, Optional

MODE = "TB_HWPROF_PROFILE"
STEPS = "TB_HWPROF_PROFILE_STEPS"
SKIP = "TB_HWPROF_PROFILE_SKIP"
CLAIM = "TB_HWPROF_PROFILE_CLAIM"  # a file path: the first process to create it captures
NO_STEP_MARKER = "no-step-seen"  # written beside the claim when the program ended before its steps


class StepWindow:
    """Counts steps and calls start() once `skip` have passed and stop() after `steps` more (steps 0:
    start() at once, stop() at exit)."""

    def __init__(self, skip: int, steps: int, start: Callable[[], None], stop: Callable[[], None],
                 on_step: Callable[[], None] = lambda: None):
        self.skip, self.steps = skip, steps
        self._start, self._stop, self._on_step = start, stop, on_step
        self.done = 0
        self.state = "waiting"  # waiting -> capturing -> stopped
        if steps == 0 or skip == 0:
            self._begin()

    def _begin(self) -> None:
        self.state = "capturing"
        self._start()

    def end(self) -> None:
        if self.state == "capturing":
            self.state = "stopped"
            self._stop()

    def step(self) -> None:
        self.done += 1
        if self.state == "capturing":
            if self.steps and self.done >= self.skip + self.steps:
                self.end()
            else:
                self._on_step()
        elif self.state == "waiting" and self.done >= self.skip:
            self._begin()


_window = None  # a LazyWindow once the environment asks for a capture


LOADED_AS = "_tb_hwprof_profile_env"  # the name profile_boot/sitecustomize.py loads this file under


def step() -> None:
    """Mark the end of one step (for a program without a torch.optim optimizer).  The capture runs in
    the copy of this module the bootstrap loaded: a call through tb_hwprof.profile_env goes there."""
    here = sys.modules.get(LOADED_AS)
    if here is not None and here.__dict__ is not globals():
        here.step()
    elif _window is not None:
        _window.step()


def _claimed(path: str) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    except OSError:
        return False
    os.write(fd, f"{os.getpid()}\n".encode())
    os.close(fd)
    return True


def start_from_environment() -> None:
    """Called by profile_boot/sitecustomize.py: set the capture up as the environment asks."""
    global _window
    mode = os.environ.get(MODE, "")
    if not mode or _window is not None:
        return
    claim = os.environ.get(CLAIM)
    steps, skip = max(int(os.environ.get(STEPS, "0")), 0), int(os.environ.get(SKIP, "0"))
    if mode.startswith("torch:"):
        make = lambda: _torch_profiler(Path(mode[len("torch:"):]))
    elif mode == "cuda-range":
        make = _cuda_range
    else:
        print(f"tb-hwprof: {MODE}={mode!r} not understood: the program runs unprofiled", file=sys.stderr)
        return
    if steps == 0 and claim and not _claimed(claim):  # the whole program: the first process to start
        return
    _window = LazyWindow(skip, steps, make, claim if steps else None)
    _hook_optimizer_steps()
    atexit.register(_at_exit, claim)


class LazyWindow:
    """A StepWindow made at the first step, by the process that claims the capture then: a launcher
    (torchrun, a Python wrapper, a fake profiler in the tests) starts first but never steps."""

    def __init__(self, skip: int, steps: int, make, claim: Optional[str]):
        self.skip, self.steps, self.make, self.claim = skip, steps, make, claim
        self.window: Optional[StepWindow] = None
        self.state = "waiting"
        self.done = 0
        if claim is None:
            self._make()

    def _make(self) -> None:
        self.window = StepWindow(self.skip, self.steps, *self.make())
        self.state = self.window.state

    def step(self) -> None:
        if self.state == "inert":
            return
        if self.window is None:
            if self.claim and not _claimed(self.claim):
                self.state = "inert"  # another process of the program captures
                return
            self._make()
        self.window.step()
        self.done, self.state = self.window.done, self.window.state

    def end(self) -> None:
        if self.window is not None:
            self.window.end()
            self.state = self.window.state


def _at_exit(claim: Optional[str]) -> None:
    if _window is None:
        return
    if _window.state == "waiting" and claim and not Path(claim).exists():
        # No process of the program reached the steps asked for: say so to the profile command.
        Path(claim).with_name(NO_STEP_MARKER).write_text(f"{_window.done}\n")
    _window.end()


def _hook_optimizer_steps() -> None:
    try:
        from torch.optim.optimizer import register_optimizer_step_post_hook
    except ImportError:  # no torch (or too old): tb_hwprof.profile_env.step() still counts
        return
    register_optimizer_step_post_hook(lambda optimizer, args, kwargs: step())


def _torch_profiler(folder: Path):
    """(start, stop, on_step) of a torch.profiler.profile writing <folder>/<host>_<pid>.<ms>.pt.trace.json.gz."""
    import torch
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    # A schedule that always records: the profiler then marks each step as a ProfilerStep#N range.
    profiler = torch.profiler.profile(activities=activities, record_shapes=True,
                                      schedule=lambda step: torch.profiler.ProfilerAction.RECORD)

    def stop() -> None:
        profiler.stop()
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{socket.gethostname()}_{os.getpid()}.{time.time_ns() // 1_000_000}.pt.trace.json.gz"
        profiler.export_chrome_trace(str(folder / name))

    return profiler.start, stop, profiler.step


def _cuda_range():
    """(start, stop, on_step) calling cudaProfilerStart / Stop (nothing on a machine without CUDA)."""
    import torch
    if not torch.cuda.is_available():
        print("tb-hwprof: no CUDA device: the capture range is not marked", file=sys.stderr)
        return (lambda: None), (lambda: None), (lambda: None)
    return torch.cuda.profiler.start, torch.cuda.profiler.stop, (lambda: None)
