"""Export of a ~4M-event PyTorch profiler (Kineto) trace vs a bare json.load of it.

A real trace (default: HTA's ResNet rank-0 V100 trace, 68,692 events) is grown FACTOR times
(default 58: ~4M events, ~0.7 GB of JSON) by writing its events again and again, each copy
shifted in time by the span of the original (ts + k * span) and in ids by k * 10,000,000
(External id, correlation, flow id, Sequence number), ProfilerStep#N renamed N + k * 1000, so
launches, flows and steps still pair up (synthetic for scale only; every event is a real event
moved).  Metadata events (process / thread names) are written once.

Then subprocesses run on the same file, each reporting its own wall time and peak RSS:
  baseline: json.load of the file (what torch-tb-profiler and HTA start with);
  export:   `tb-hwprof export` (read + analyse + write; at this size `--trace auto` leaves the
            Chrome trace file out, the timeline index is written);
  decode:   decode_events alone, the file's bytes to columns (information: the native scanner's
            MB/s, or the msgspec path's where the scanner is not built).
With --gzip the rounds read the grown trace gzipped (as torch.profiler users often keep it) and
json.load reads it through gzip.open.  Baseline and export run alternately, --rounds times; the ratios are of their median times and
of the highest peaks.  Targets (issue 31): export <= 0.1x json.load's time and <= 0.25x its peak
memory (before it: 0.25x and 0.5x).

    python benchmarks/bench_torch_export.py [--factor 58] [--rounds 3] [--keep PATH] [--gzip]
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

from children import run_child  # noqa: E402  (benchmarks/ is the script's folder)

REPO = Path(__file__).resolve().parent.parent
SAMPLES = Path(os.environ.get("TB_HWPROF_SAMPLES", REPO.parent / "shared" / "samples"))
DEFAULT = SAMPLES / "torch" / "hta_v100_resnet_rank0.json.gz"
TARGET_TIME_RATIO, TARGET_MEMORY_RATIO = 0.1, 0.25  # issue 31
ID_STEP = 10_000_000
SHIFTED_ARGS = ("External id", "external id", "correlation", "Sequence number")


def _load(path: Path) -> dict:
    with (gzip.open(path) if path.suffix == ".gz" else open(path, "rb")) as f:
        return json.load(f)


def _shifted(event: dict, k: int, span: float) -> dict:
    """The k-th copy of an event: later by k spans, its ids and step number past the k-1 before."""
    e = dict(event)
    if isinstance(e.get("ts"), (int, float)):
        e["ts"] = e["ts"] + k * span
    if isinstance(e.get("id"), int):
        e["id"] = e["id"] + k * ID_STEP
    if isinstance(e.get("name"), str) and e["name"].startswith("ProfilerStep#"):
        e["name"] = f"ProfilerStep#{int(e['name'][len('ProfilerStep#'):]) + k * 1000}"
    if e.get("args"):
        e["args"] = {key: value + k * ID_STEP if key in SHIFTED_ARGS and isinstance(value, int) else value
                     for key, value in e["args"].items()}
    return e


def grow(src: Path, dst: Path, factor: int) -> int:
    """Write `factor` shifted copies of src's events (metadata once) to dst; returns the event count."""
    doc = _load(src)
    events = doc.pop("traceEvents")
    times = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    span = (max(times) - min(times)) * 1.01 + 1000
    written = 0
    with open(dst, "wb") as f:
        f.write(orjson.dumps(doc)[:-1] + (b", " if doc else b"") + b'"traceEvents": [')
        for k in range(factor):
            chunk = [orjson.dumps(_shifted(e, k, span)) for e in events if k == 0 or e.get("ph") != "M"]
            f.write((b",\n" if k else b"") + b",\n".join(chunk))
            written += len(chunk)
        f.write(b"]}")
    return written


GROW = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[4])
from bench_torch_export import grow
print(json.dumps({"events": grow(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))}))
"""

BASELINE = """
import gzip, json, resource, sys, time
t = time.perf_counter()
with (gzip.open if sys.argv[1].endswith(".gz") else open)(sys.argv[1], "rb") as f:
    doc = json.load(f)
print(json.dumps({"s": time.perf_counter() - t, "events": len(doc["traceEvents"]),
                  "mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

EXPORT = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[3])
t = time.perf_counter()
from tb_hwprof.app.cli import main
rc = main(["export", sys.argv[1], "--logdir", sys.argv[2], "--run", "big", "--overwrite", "--quiet"])
print(json.dumps({"s": time.perf_counter() - t, "rc": rc,
                  "mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

DECODE = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
from tb_hwprof.readers.torch import decode
t = time.perf_counter()
data = open(sys.argv[1], "rb").read()
read = time.perf_counter() - t
try:
    from tb_hwprof.readers.torch import _kineto_scan  # noqa: F401
    native = True
except ImportError:
    native = False
t = time.perf_counter()
events = decode.decode_events(data)
print(json.dumps({"s": time.perf_counter() - t, "read_s": read, "bytes": len(data), "native": native,
                  "x": len(events), "flows": len(events.flows["ph"]),
                  "mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--factor", type=int, default=58, help="copies of the source's events")
    parser.add_argument("--rounds", type=int, default=3, help="json.load / export rounds, alternating (medians)")
    parser.add_argument("--keep", type=Path, help="keep the grown trace at this path (and reuse it if present)")
    parser.add_argument("--gzip", action="store_true",
                        help="time the grown trace gzipped (level 1; json.load then reads it through gzip.open): "
                             "torch.profiler users often keep .pt.trace.json.gz")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        grown = args.keep or Path(tmp) / "grown.json"
        if not grown.exists():
            started = time.perf_counter()
            # in a child: a child's peak RSS starts from its parent's size when forked
            events = run_child(GROW, args.source, grown, args.factor, Path(__file__).parent)["events"]
            print(f"grew {args.source.name} x{args.factor} -> {grown}: {events:,} events "
                  f"in {time.perf_counter() - started:.1f} s")
            os.sync()  # the writeback of ~0.7 GB would otherwise be timed with the first rounds
        size_mb = grown.stat().st_size / 1e6
        print(f"file: {size_mb:.0f} MB")
        decoded = run_child(DECODE, grown, REPO)
        if args.gzip:
            zipped = Path(tmp) / (grown.name + ".gz")
            with open(grown, "rb") as f, gzip.open(zipped, "wb", compresslevel=1) as out:
                shutil.copyfileobj(f, out, 16 << 20)
            os.sync()
            grown = zipped
            print(f"gzipped: {grown.stat().st_size / 1e6:.0f} MB (the rounds read it)")
        # Alternating rounds, medians: on a shared VM one run's time swings by 20% or more.
        rounds = [(run_child(BASELINE, grown), run_child(EXPORT, grown, Path(tmp) / "logs", REPO))
                  for _ in range(args.rounds)]
        if any(o["rc"] != 0 for _, o in rounds):
            raise SystemExit(f"export failed: {rounds}")
    base_s = statistics.median(b["s"] for b, _ in rounds)
    ours_s = statistics.median(o["s"] for _, o in rounds)
    base_mb = max(b["mb"] for b, _ in rounds)
    ours_mb = max(o["mb"] for _, o in rounds)  # memory: the worst round counts on both sides
    time_ratio, memory_ratio = ours_s / base_s, ours_mb / base_mb
    if args.rounds > 1:
        listed = lambda values: ", ".join(f"{v:.2f}" for v in values)  # noqa: E731
        print(f"{args.rounds} rounds: json.load {listed(b['s'] for b, _ in rounds)} s; "
              f"export {listed(o['s'] for _, o in rounds)} s")
    print(f"decode_events ({'native scanner' if decoded['native'] else 'msgspec path'}): {decoded['s']:.2f} s "
          f"({decoded['bytes'] / 1e6 / decoded['s']:.0f} MB/s; reading the file {decoded['read_s']:.2f} s), "
          f"{decoded['x']:,} complete events, {decoded['flows']:,} flows, peak {decoded['mb']:.0f} MB")
    print(f"json.load:                                  {base_s:.2f} s, peak {base_mb:.0f} MB "
          f"({rounds[0][0]['events']:,} events; median time, highest peak of {args.rounds})")
    print(f"tb-hwprof export (read + analyse + write):  {ours_s:.2f} s, peak {ours_mb:.0f} MB")
    missed = [what for what, ratio, target in (("time", time_ratio, TARGET_TIME_RATIO),
                                                ("memory", memory_ratio, TARGET_MEMORY_RATIO)) if ratio > target]
    if missed:
        print(f"target missed: {', '.join(missed)}")
    print(f"ratio export / json.load: time {time_ratio:.2f} (target <= {TARGET_TIME_RATIO:g}), "
          f"peak memory {memory_ratio:.2f} (target <= {TARGET_MEMORY_RATIO:g})")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
