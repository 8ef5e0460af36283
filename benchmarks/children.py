"""What the benchmarks share: a measured step run in a child process of its own (its peak RSS is
its own, not the parent's), reporting one JSON line."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading


def run_child(code: str, *args) -> dict:
    """Run `code` with `args` in a fresh interpreter; its last stdout line, as JSON."""
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"child failed:\n{done.stdout}\n{done.stderr}")
    sys.stderr.write(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def in_page_cache(*files) -> None:
    """Read the files through once, so the measured step reads them from memory: this VM pages out
    what was not touched for a minute (DAMON), and a file read from disk in one step and from
    memory in the other made either side up to 4x slower (CPU time unchanged)."""
    for path in files:
        with open(path, "rb", buffering=0) as f:
            while f.read(1 << 24):
                pass


def run_child_watched(code: str, *args) -> dict:
    """run_child, its process tree's memory polled meanwhile (TreeWatch): the JSON line with
    "tree_mb" (the peak of the root's RSS plus its descendants' unique memory at one instant) and
    "family_mb" ({pid: the same peak over that process and its own children} for each process
    below the root that had children, e.g. a local Dask worker and the rank processes it forked)
    and "tree_cpu_s" (the CPU time of every process of the tree, as last seen: a little short); the
    same two peaks in proportional set size ("tree_pss_mb", "family_pss_mb": each page a process
    shares counted as its share, so processes forked from one another are not charged twice)."""
    process = subprocess.Popen([sys.executable, "-c", code, *map(str, args)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    watch = TreeWatch(process.pid)
    watch.start()
    stdout, stderr = process.communicate()
    watch.stop()
    if process.returncode != 0:
        raise SystemExit(f"child failed:\n{stdout}\n{stderr}")
    sys.stderr.write(stderr)
    return {**json.loads(stdout.strip().splitlines()[-1]), "tree_mb": watch.tree_mb,
            "family_mb": {str(k): v for k, v in watch.family_mb.items()}, "tree_cpu_s": watch.cpu_s,
            "tree_pss_mb": watch.tree_pss_mb, "family_pss_mb": {str(k): v for k, v in watch.family_pss_mb.items()}}


class TreeWatch:
    """Polls /proc every `interval` s (Linux): the memory a process and its descendants need
    together at one instant, as the process' RSS (every page it maps) plus each descendant's unique
    set (USS: Private_Clean + Private_Dirty of /proc/<pid>/smaps_rollup; the pages a forked child
    shares with its parent are counted there already).  A forked child's own ru_maxrss counts
    those shared pages a second time; its USS alone leaves out what its parent holds for it.
    Beside it the same in PSS (proportional set size: a page shared by k processes counts 1/k in
    each), which charges the pages many forked workers share to each only in part.
    Polled, so a peak shorter than the interval can be missed."""

    def __init__(self, root: int, interval: float = 0.1):
        self.root, self.interval = root, interval
        self.tree_mb = self.tree_pss_mb = 0.0
        self.family_mb, self.family_pss_mb = {}, {}
        self._cpu_ticks = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    @property
    def cpu_s(self) -> float:
        return sum(self._cpu_ticks.values()) / os.sysconf("SC_CLK_TCK")

    def _run(self) -> None:
        while not self._done.is_set():
            self.sample()
            self._done.wait(self.interval)

    def sample(self) -> None:
        kids = children_of()
        tree = [self.root] + descendants(self.root, kids)
        for pid in tree:
            self._cpu_ticks[pid] = max(self._cpu_ticks.get(pid, 0), cpu_ticks(pid))
        memory = {pid: memory_mb(pid) for pid in tree}
        memory = {pid: m for pid, m in memory.items() if m is not None}
        if self.root not in memory:
            return
        self.tree_mb = max(self.tree_mb, memory[self.root][0] + sum(m[1] for p, m in memory.items() if p != self.root))
        self.tree_pss_mb = max(self.tree_pss_mb, sum(m[2] for m in memory.values()))
        for pid in tree[1:]:
            children = [memory[c] for c in kids.get(pid, []) if c in memory]
            if pid in memory and children:
                self.family_mb[pid] = max(self.family_mb.get(pid, 0.0), memory[pid][0] + sum(c[1] for c in children))
                self.family_pss_mb[pid] = max(self.family_pss_mb.get(pid, 0.0),
                                              memory[pid][2] + sum(c[2] for c in children))


def memory_mb(pid: int):
    """(RSS, USS, PSS) of a process in MB from /proc/<pid>/smaps_rollup; None when it is gone."""
    fields = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name in ("Rss", "Pss", "Private_Clean", "Private_Dirty"):
                    fields[name] = int(rest.split()[0]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    if "Rss" not in fields:
        return None
    return (fields["Rss"], fields.get("Private_Clean", 0.0) + fields.get("Private_Dirty", 0.0),
            fields.get("Pss", fields["Rss"]))


def cpu_ticks(pid: int) -> int:
    """utime + stime of a process (its own, not its children's), in clock ticks; 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, ValueError, IndexError):
        return 0


def children_of() -> dict:
    """{pid: [its children's pids]} of every process now."""
    kids = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(entry))
    return kids


def descendants(pid: int, kids: dict) -> list:
    out, todo = [], list(kids.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out
