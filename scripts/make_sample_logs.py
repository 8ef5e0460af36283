"""Rebuilds sample_logs/ from the real reports in ../shared/samples (TB_HWPROF_SAMPLES).

    python scripts/make_sample_logs.py            # then: tensorboard --logdir sample_logs

Each run is exported by tb-hwprof itself; the armleth T4 series (v1..v8 of one kernel) becomes
armleth_t4_series/report_v1 ... at steps 0, 1, ... with the series' own event file in its group
folder, as `tb-hwprof export v1 v2 ... --run armleth_t4_series` writes it: Compare has a real
before/after sequence, the Series view and the Scalars tab its lines.
"""
import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import tb_hwprof  # noqa: E402
from tb_hwprof.logdir.writer import write_run, write_series_events  # noqa: E402

SAMPLES = Path(os.environ.get("TB_HWPROF_SAMPLES", REPO.parent / "shared" / "samples"))
OUT = REPO / "sample_logs"

# run name -> report path under the samples folder
SERIES = "armleth_t4_series"
RUNS = {
    "armleth_t4_series/report_v1": "ncu/armleth_t4_full_2024.2.1.ncu-rep",
    **{f"armleth_t4_series/{p.stem}": f"ncu/armleth_t4_series/{p.name}"
       for p in sorted((SAMPLES / "ncu" / "armleth_t4_series").glob("*.ncu-rep"))},
    "ncu_gtx1660s_naive_gemm": "ncu/lakshya_gtx1660s_full_2024.1.1.ncu-rep",
    "ncu_rtx3060l_shared_memory": "ncu/aplainjane_rtx3060l_full_7k_2024.1.0.ncu-rep",
    "ncu_a10_linear_105_launches": "ncu/spyinfer_a10_105launches_2023.2.0.ncu-rep",
    "ncu_a10g_sgemm_roofline": "ncu/esmm_a10g_rooflineset_2023.1.1.ncu-rep",
    "ncu_rtx3080_montecarlo": "ncu/montecarlo_rtx3080_full_2020.2.1.ncu-rep",
    "ncu_v100_gene_cli_metrics": "ncu/gene_v100_cli_flops_2020.ncu-rep",
    # AMD: rocprof-compute / Omniperf workload folders (measured roofs from roofline.csv).
    "amd_mi200_vcopy_omniperf": "rocprof/omniperf_vcopy_mi200",
    "amd_mi300x_bmm1_rocprof_compute": "rocprof/rocprof-compute_bmm1_mi300x",
    # AMD trace (rocpd SQLite, MI300X): Timeline and the Overview (busy / idle, gaps with the HIP call then).
    "amd_mi300x_ck_bmm_rocpd_trace": "rocprof/v3_rocpd_mi300x_ck_bmm_results.db",
    # Intel VTune CSV reports: CPU hotspots (the 2015 OpenMP one shows the spin advice).
    "vtune_amplxe2018_loops": "vtune/amplxe2018_advanced_hotspots_loops.csv",
    "vtune_amplxe2015_openmp": "vtune/amplxe2015_hotspots_openmp.csv",
    # Nsight Systems SQLite exports: timeline, NVTX phases (DLProf, PyTorch ranges), idle gaps, advice.
    "nsys_rtx2070s_dlprof_nvtx": "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite",
    "nsys_gtx1050_bitonic_sort": "nsys/annikola_gtx1050_2024.5.1.sqlite",
    # PyTorch profiler traces: Operators, Steps, op-level roofline. The ResNet-50 pair is
    # torch-tb-profiler's own before / after (DataLoader num_workers 0 -> 4): Compare them.
    "torch_v100_resnet50_workers0": "torch/kineto_rn50_v100_jun2021.json.gz",
    "torch_v100_resnet50_workers4": "torch/kineto_rn50_v100_workers4_jun2021.json.gz",
    "torch_h100_vit": "torch/tracelens_h100_falconsai_vit.json.gz",
    "torch_mi300x_bert": "torch/tracelens_mi300x_bert_small.json.gz",
}


def main() -> None:
    if not SAMPLES.is_dir():
        sys.exit(f"samples not found at {SAMPLES}: set TB_HWPROF_SAMPLES")
    shutil.rmtree(OUT, ignore_errors=True)
    series = [run for run in RUNS if run.startswith(SERIES + "/")]  # in the order of the optimisation
    points = []
    for i, (run, rel) in enumerate(sorted(RUNS.items()), 1):
        profile = tb_hwprof.read(SAMPLES / rel)
        profile.provenance.source_path = f"shared/samples/{rel}"  # not this machine's absolute path
        analysis = tb_hwprof.analyse(profile)
        step = series.index(run) if run in series else 0
        write_run(profile, analysis, OUT, run, step=step)
        if run in series:
            points.append((step, analysis.scalars))
        print(f"[{i}/{len(RUNS)}] {run} <- {rel} ({len(profile.kernels)} launches)", file=sys.stderr)
    write_series_events(OUT, SERIES, [(scalars, step) for step, scalars in sorted(points)])


if __name__ == "__main__":
    main()
