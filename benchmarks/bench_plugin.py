"""Plugin response times on a 100,000-launch run vs reading the run's files directly.

The run is synthetic for scale: the real 105-launch Nsight Compute report (spyinfer) with its
kernel rows repeated under new launch ids up to --launches, its real per-launch raw metrics and
rules repeated alongside, written with tb_hwprof.logdir.writer.write_run.

Timed through a real TensorBoard WSGI app (the --load_fast=false data provider, in process),
as a browser asks (Accept-Encoding: gzip), until the whole body is received:
  first  /kernels for the run on a fresh plugin (nothing cached)       target <= 1 s
  warm   /kernels again (served from the cached, pre-encoded gzip)     target <= 200 ms
  direct tb_hwprof.load_run(run, with_details=False)                   the baseline of the ratios
plus, for information, the other routes first/warm and a fresh-process first request
(which also pays for importing pandas and the plugin's modules).

    python benchmarks/bench_plugin.py [--launches N] [--repeat N] [--keep DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SAMPLES = Path(os.environ.get("TB_HWPROF_SAMPLES", REPO.parent / "shared" / "samples"))
REPORT = SAMPLES / "ncu" / "spyinfer_a10_105launches_2023.2.0.ncu-rep"
RUN = "spyinfer_100k"
P = "/data/plugin/tb_hwprof"


def grow(profile, launches: int):
    """The report's launches repeated to `launches` rows, with new launch ids."""
    import pandas as pd
    k = len(profile.kernels)
    rows = pd.concat([profile.kernels] * (launches // k + 1), ignore_index=True).iloc[:launches].copy()
    rows["launch_id"] = range(launches)
    profile.kernels = rows
    profile.raw_metrics = [profile.raw_metrics[i % k] for i in range(launches)]
    profile.rules = [profile.rules[i % k] for i in range(launches)]
    return profile


def build_run(logdir: Path, launches: int) -> Path:
    import tb_hwprof
    from tb_hwprof.logdir.writer import write_run
    started = time.perf_counter()
    profile = grow(tb_hwprof.read(REPORT), launches)
    run_dir = write_run(profile, tb_hwprof.analyse(profile), logdir, RUN, overwrite=True)
    sizes = {p.name: p.stat().st_size for p in (run_dir / "plugins" / "tb_hwprof").iterdir()}
    print(f"wrote {launches} launches in {time.perf_counter() - started:.1f} s: "
          + ", ".join(f"{n} {s / 1e6:.1f} MB" for n, s in sorted(sizes.items())))
    return run_dir


def make_client(logdir: Path):
    """A TensorBoard app with only the core plugin and tb_hwprof, every run loaded."""
    from tensorboard import program
    from tensorboard.backend import application
    from tensorboard.backend.event_processing.data_ingester import LocalDataIngester
    from tensorboard.plugins.core import core_plugin
    from werkzeug.test import Client
    from tb_hwprof.plugin.hwprof_plugin import HwprofPluginLoader
    loaders = [core_plugin.CorePluginLoader(), HwprofPluginLoader()]
    tb = program.TensorBoard(plugins=loaders)
    tb.configure(argv=["", f"--logdir={logdir}", "--load_fast=false", "--reload_interval=0",
                       "--reload_task=blocking"])
    ingester = LocalDataIngester(tb.flags)
    ingester.start()
    return Client(application.TensorBoardWSGIApp(tb.flags, loaders, ingester.data_provider, None,
                                                 ingester.deprecated_multiplexer))


def request(client, route: str, gzip: bool = True, **params) -> float:
    """Seconds until the whole response body is in hand; fails loudly on an error status."""
    started = time.perf_counter()
    headers = {"Accept-Encoding": "gzip"} if gzip else {}
    response = client.get(P + route, query_string={"run": RUN, **params}, headers=headers)
    data = response.get_data()
    elapsed = time.perf_counter() - started
    if response.status_code != 200:
        raise SystemExit(f"{route}: HTTP {response.status_code} {data[:300]!r}")
    return elapsed


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def fresh_process_first(logdir: Path) -> float:
    """First /kernels in a new Python process: imports (pandas, the plugin's modules) included."""
    code = ("import sys, json; sys.path.insert(0, %r); from bench_plugin import make_client, request; "
            "from pathlib import Path; c = make_client(Path(%r)); print(json.dumps(request(c, '/kernels')))"
            % (str(Path(__file__).parent), str(logdir)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--launches", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="write the logdir here and keep it")
    args = parser.parse_args()
    tmp = None if args.keep else tempfile.TemporaryDirectory()
    logdir = args.keep or Path(tmp.name)
    run_dir = build_run(logdir, args.launches)

    import tb_hwprof
    timed(lambda: tb_hwprof.load_run(run_dir, with_details=False))  # imports and page cache, for both sides
    direct = statistics.median(timed(lambda: tb_hwprof.load_run(run_dir, with_details=False))
                               for _ in range(args.repeat))
    firsts, warms = [], []
    for _ in range(args.repeat):  # a new app each time: nothing of the run cached
        client = make_client(logdir)
        firsts.append(request(client, "/kernels"))
        warms.extend(request(client, "/kernels") for _ in range(5))
    first, warm = statistics.median(firsts), statistics.median(warms)

    print(f"\n/kernels of {args.launches} launches (median of {args.repeat} fresh apps; warm: of {len(warms)})")
    print(f"  direct read (load_run, no details) {ms(direct)}")
    print(f"  plugin first                      {ms(first)}   ratio {first / direct:5.2f}   target <= 1 s:"
          f" {'ok' if first <= 1 else 'MISSED'}")
    print(f"  plugin warm                       {ms(warm)}   ratio {warm / direct:5.3f}   target <= 200 ms:"
          f" {'ok' if warm <= 0.2 else 'MISSED'}")
    print(f"  first in a fresh process          {ms(fresh_process_first(logdir))}   (imports included)")
    plain = statistics.median(request(client, "/kernels", gzip=False) for _ in range(3))
    print(f"  warm, client without gzip         {ms(plain)}   (TensorBoard gunzips the cached bytes on the fly)")

    print("\nother routes, first / warm (after /kernels)")
    client = make_client(logdir)
    request(client, "/kernels")
    for route, params in (("/kernel_groups", {}), ("/bottlenecks", {}), ("/roofline", {}),
                          ("/kernel", {"launch": str(args.launches - 1)})):
        cold = request(client, route, **params)
        print(f"  {route:15s} {ms(cold)} / {ms(request(client, route, **params))}")
    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    main()
