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
grown to N kernels (bench_nsys_export.py's grower over the real dlprof export): its timeline
index is read by ranges, so only the columns the view reads travel.

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


def report(what: str, cost: tuple, total: int, goal: str = "") -> float:
    requests, fetched, elapsed = cost
    share = fetched / total
    print(f"{what}: {sum(requests.values())} requests ({', '.join(f'{n} {k}' for k, n in sorted(requests.items()))}), "
          f"{fetched / 1e6:.2f} MB fetched = {share:.1%} of the run's {total / 1e6:.1f} MB{goal}, {elapsed:.2f} s")
    return share


def publish_nsys_run(kernels: int) -> str:
    """A real nsys export grown to `kernels` kernels, exported and published as run nsys_<kernels>."""
    import tb_hwprof
    from bench_nsys_export import DEFAULT, grow
    from tb_hwprof.logdir import fs
    run = f"nsys_{kernels // 1000}k"
    with tempfile.TemporaryDirectory() as local:
        grown = Path(local) / "grown.sqlite"
        grow(DEFAULT, grown, kernels=kernels, nvtx=kernels // 5)
        run_dir = tb_hwprof.export(grown, Path(local) / "logs", run, trace="never")
        fs.publish_run(fs.RemoteDir(LOGDIR), run_dir, run, overwrite=False)
    return run


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
            nsys_run = publish_nsys_run(args.timeline)
            nsys_sizes = run_bytes(nsys_run)
            index = next(size for key, size in nsys_sizes.items() if key.endswith("timeline_index.npz"))
            cost = view_cost(tensorboard_client(), counter, [("/timeline", {"run": nsys_run})])
            # The view holds the whole index in memory (5 of its 7 columns): ranges spare the other two.
            report(f"Timeline view of {args.timeline:,} kernels over S3 (/timeline; index {index / 1e6:.1f} MB)",
                   cost, sum(nsys_sizes.values()), " (no goal: the view reads the index's 5 view columns whole)")
    finally:
        server.stop()
    if share >= GOAL:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
