"""What opening the Kernels view of a 100,000-launch run costs over S3: requests and bytes the
plugin fetches before the first table appears, vs the run's total bytes (goal: under 10%).

The run is synthetic for scale, as bench_plugin.py builds it: the real 105-launch Nsight Compute
report (spyinfer) grown to --launches rows with its real raw metrics and rules.  It is written
locally, published to a moto S3 server on 127.0.0.1 the way `tb-hwprof export --logdir s3://...`
does (tb_hwprof.logdir.fs.publish_run), then a fresh TensorBoard app (--load_fast=false, as
TensorBoard runs for s3:// logdirs) serves /runs and /kernels of it.  Requests are counted where
every s3fs request passes (S3FileSystem._call_s3), bytes from each GetObject's ContentLength.
TensorBoard's own reads of the event file (its boto3 client, not s3fs) are not the plugin's and
are not counted.

With --timeline N (default 100,000), the same for the Timeline view of an Nsight Systems capture
grown to N kernels (bench_nsys_export.py's grower over the real dlprof export): its first request
(the whole capture, at the page's budget for a 1200-pixel canvas) and a window zoomed to 1/16 of
the capture, on the run as exported (timeline index v3: read by ranges, the first request from the
overview at its front, a window from the chunks it overlaps) and on a copy of it whose index is
rewritten as the v2 layout older runs have (the view then reads its columns whole).

    python benchmarks/bench_remote.py [--launches N] [--timeline N]
"""
import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(REPO / "tests"))  # support_trace: the v2 index layout, shared with the tests
BUCKET = "hwprof-bench"
LOGDIR = f"s3://{BUCKET}/runs"
GOAL = 0.10


class RequestCounter:
    """Counts s3fs's requests (by operation) and the object bytes GetObject returned."""

    def __init__(self):
        self.requests = collections.Counter()
        self.bytes = 0
        self.enabled = False

    def install(self):
        import s3fs.core
        original = s3fs.core.S3FileSystem._call_s3
        counter = self

        async def counted(fs, method, *args, **kwargs):
            response = await original(fs, method, *args, **kwargs)
            if counter.enabled:
                name = getattr(method, "__name__", str(method))
                counter.requests[name] += 1
                if name == "get_object" and isinstance(response, dict):
                    counter.bytes += int(response.get("ContentLength") or 0)
            return response
        s3fs.core.S3FileSystem._call_s3 = counted


def start_s3():
    from moto.server import ThreadedMotoServer
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_REGION="us-east-1",
                      AWS_DEFAULT_REGION="us-east-1", AWS_ENDPOINT_URL=f"http://{host}:{port}")
    import boto3
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    return server


def run_bytes(run: str) -> dict:
    """{key: size} of every object of the run, listed with boto3 (not through tb_hwprof)."""
    import boto3
    pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"runs/{run}/")
    return {o["Key"]: o["Size"] for page in pages for o in page.get("Contents", [])}


def view_cost(client, counter, requests) -> tuple:
    """(requests by operation, bytes, seconds) s3fs spent while the plugin answered `requests`."""
    counter.requests.clear()
    counter.bytes = 0
    counter.enabled = True
    started = time.perf_counter()
    for route, params in requests:
        response = client.get(f"/data/plugin/tb_hwprof{route}", query_string=params,
                              headers={"Accept-Encoding": "gzip"})
        response.get_data()
        if response.status_code != 200:
            raise SystemExit(f"{route}: HTTP {response.status_code} {response.get_data()[:300]!r}")
    elapsed = time.perf_counter() - started
    counter.enabled = False
    return dict(counter.requests), counter.bytes, elapsed


def report(what: str, cost: tuple, total: int, goal: str = "", of: str = "the run's") -> float:
    requests, fetched, elapsed = cost
    share = fetched / total
    print(f"{what}: {sum(requests.values())} requests ({', '.join(f'{n} {k}' for k, n in sorted(requests.items()))}), "
          f"{fetched / 1e6:.2f} MB fetched = {share:.1%} of {of} {total / 1e6:.1f} MB{goal}, {elapsed:.2f} s")
    return share


PAGE_EVENTS = 4800  # what the Timeline page asks for on a 1200-pixel canvas (timeline.js maxEvents)


def publish_nsys_runs(kernels: int) -> tuple:
    """A real nsys export grown to `kernels` kernels, exported and published as run nsys_<k>k, and
    again as nsys_<k>k_v2 with its index rewritten in the v2 layout; the two run names."""
    import tb_hwprof
    from bench_nsys_export import DEFAULT, grow
    from support_trace import as_v2_index
    from tb_hwprof.logdir import fs, metadata
    run = f"nsys_{kernels // 1000}k"
    with tempfile.TemporaryDirectory() as local:
        grown = Path(local) / "grown.sqlite"
        grow(DEFAULT, grown, kernels=kernels, nvtx=kernels // 5)
        run_dir = tb_hwprof.export(grown, Path(local) / "logs", run, trace="never")
        fs.publish_run(fs.RemoteDir(LOGDIR), run_dir, run, overwrite=False)
        as_v2_index(run_dir.joinpath(*metadata.ASSET_DIR, metadata.TIMELINE_INDEX))
        fs.publish_run(fs.RemoteDir(LOGDIR), run_dir, run + "_v2", overwrite=False)
    return run, run + "_v2"


def timeline_costs(counter, runs: tuple, kernels: int) -> None:
    """The Timeline's first request and a zoomed window, per run (a fresh app each: nothing cached)."""
    for run in runs:
        sizes = run_bytes(run)
        index = next(size for key, size in sizes.items() if key.endswith("timeline_index.npz"))
        client = tensorboard_client()
        first = view_cost(client, counter, [("/timeline", {"run": run, "max_events": str(PAGE_EVENTS)})])
        report(f"Timeline of {kernels:,} kernels, {run}: first request", first, index, of="its index's")
        response = client.get("/data/plugin/tb_hwprof/timeline", query_string={"run": run, "max_events": "1"})
        import json
        lo, hi = json.loads(response.get_data())["capture_ns"]
        zoom = {"run": run, "start": str(lo + (hi - lo) // 2), "end": str(lo + (hi - lo) // 2 + (hi - lo) // 16),
                "max_events": str(PAGE_EVENTS)}
        report(f"Timeline of {kernels:,} kernels, {run}: then a window of 1/16 of the capture",
               view_cost(client, counter, [("/timeline", zoom)]), index, of="its index's")


def tensorboard_client():
    """A TensorBoard app on the s3:// logdir with the core plugin and tb_hwprof, runs loaded."""
    from bench_plugin import make_client as local_make_client
    return local_make_client(LOGDIR)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--launches", type=int, default=100_000)
    parser.add_argument("--timeline", type=int, default=100_000, help="kernels of the nsys run (0: none)")
    args = parser.parse_args()
    from bench_plugin import RUN, build_run
    from tb_hwprof.logdir import fs

    server = start_s3()
    counter = RequestCounter()
    counter.install()
    try:
        with tempfile.TemporaryDirectory() as local:
            run_dir = build_run(Path(local), args.launches)
            started = time.perf_counter()
            fs.publish_run(fs.RemoteDir(LOGDIR), run_dir, RUN, overwrite=False)
            print(f"published to {LOGDIR}/{RUN} in {time.perf_counter() - started:.1f} s")
        sizes = run_bytes(RUN)
        total = sum(sizes.values())
        print(f"run: {len(sizes)} objects, {total / 1e6:.1f} MB")
        cost = view_cost(tensorboard_client(), counter, [("/runs", {}), ("/kernels", {"run": RUN})])
        share = report(f"Kernels view of {args.launches:,} launches over S3 (/runs + /kernels)", cost, total,
                       f" (goal < {GOAL:.0%})")
        if args.timeline:
            timeline_costs(counter, publish_nsys_runs(args.timeline), args.timeline)
    finally:
        server.stop()
    if share >= GOAL:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
