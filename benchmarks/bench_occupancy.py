"""Theoretical occupancy of a 1M-launch trace: the pipeline step analysis/occupancy.py
theoretical_occupancy (columns and notes), timed in-process.

The trace is synthetic for scale: a real Nsight Systems export's kernels table (DLProf on an RTX 2070
SUPER, 46 launches of cuDNN / cuBLAS kernels) repeated to --launches rows, grids varied 7 ways so the
notes have more than one wording per configuration.  Target: <= 2 s on 2 cores.

    python benchmarks/bench_occupancy.py [--launches N] [--repeat N]
"""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SAMPLES = Path(os.environ.get("TB_HWPROF_SAMPLES", REPO.parent / "shared" / "samples"))
SOURCE = SAMPLES / "nsys" / "dlprof_rtx2070s_nvtx_2022.1.3.sqlite"


def grown(launches: int):
    import numpy as np
    import pandas as pd
    import tb_hwprof
    from tb_hwprof.core.model import normalise_kernels
    profile = tb_hwprof.read(SOURCE)
    k = profile.kernels
    rows = pd.concat([k] * (launches // len(k) + 1), ignore_index=True).iloc[:launches].copy()
    rows["grid_size"] = rows["grid_size"] * (1 + np.arange(launches) % 7)
    rows["launch_id"] = np.arange(launches)
    profile.kernels = normalise_kernels(rows, copy=False, sparse_absent=True)
    return profile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from tb_hwprof.analysis.occupancy import theoretical_occupancy
    times = []
    for _ in range(args.repeat):
        profile = grown(args.launches)
        started = time.perf_counter()
        theoretical_occupancy(profile)
        times.append(time.perf_counter() - started)
        assert profile.kernels["theoretical_occupancy_pct"].notna().all()
    print(f"theoretical_occupancy on {args.launches:,} launches: median {statistics.median(times):.2f} s "
          f"(runs: {', '.join(f'{t:.2f}' for t in times)})")


if __name__ == "__main__":
    main()
