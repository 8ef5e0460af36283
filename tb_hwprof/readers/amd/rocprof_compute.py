"""rocprof-compute (formerly Omniperf) workload folders: pmc_perf.csv + sysinfo.csv (+ roofline.csv, ...).

Per-dispatch model columns are derived with rocprof-compute's own formulas, as its analysis
configs write them (src/rocprof_compute_soc/analysis_configs/gfx90a|gfx942/0200_system-speed-of-light.yaml,
"SOL" below) and its roofline code (src/utils/roofline_calc.py, calc_ai, "roofline" below):

  achieved occupancy  SOL "Wavefront Occupancy": SQ_ACCUM_PREV_HIRES / (GRBM_GUI_ACTIVE / num_xcd)
                      over max_waves_per_cu x cu_per_gpu, both counters from the SQ_LEVEL_WAVES pass
  L2 hit rate         SOL: 100 x TCC_HIT_sum / (TCC_HIT_sum + TCC_MISS_sum)
  vL1D hit rate       SOL: 100 - 100 x (TCP_TCC_{READ,WRITE,ATOMIC_WITH_RET,ATOMIC_WITHOUT_RET}_REQ_sum)
                      / TCP_TOTAL_CACHE_ACCESSES_sum
  HBM bytes           roofline hbm_data: MI200 TCC_EA_* (32 B / 64 B requests); MI300 TCC_EA0_* with
                      TCC_BUBBLE_sum (128 B reads)
  L2 / L1 bytes       roofline: 64 x TCP->TCC requests; 64 x TCP_TOTAL_CACHE_ACCESSES_sum
  FLOPs               roofline: VALU 64 x (ADD + MUL + TRANS + 2 FMA) per precision; MFMA 512 x MOPS
  % of peak           SOL "Pct of Peak" of VALU / MFMA utilisation, L2-Fabric read+write BW, L2 and
                      vL1D cache BW (peaks from sysinfo.csv clocks, as SOL computes them)
  waves per CU        work-groups x ceil(work-group size / wave size) / (cu_per_gpu x max_waves_per_cu):
                      how many times the grid fills every wave slot of the GPU, the unit of Nsight
                      Compute's launch__waves_per_multiprocessor (registers and LDS not counted, so
                      below 1 the grid alone caps occupancy)

Roofs come from roofline.csv (the tool's measured benchmark) where present, else from
sysinfo.csv with SOL's peak formulas, else from a datasheet.
"""
from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

from ...core.errors import InputError
from ...core.model import Device, Peak, Profile, Provenance
from . import devices as amd_devices
from ..common import csvtext, sha256_of
from .dispatch import dispatch_kernels, numeric, raw_rows, read_table, read_text, stats_of, with_units

REQUIRED = ("pmc_perf.csv", "sysinfo.csv")
PRECISIONS = ("F16", "F32", "F64")
MFMA_PRECISIONS = ("F16", "BF16", "F32", "F64")
WAVE_SIZE = ("Wave_Size", "wave_size")  # pmc_perf.csv's per-dispatch wave size (rocprofv2/v3, v1)
DAMAGED_FIX = "profile the workload again with `rocprof-compute profile` (the folder's CSV files are damaged)"
TOP_COLUMNS = ("Kernel_Name", "Count", "Sum(ns)", "Mean(ns)", "Median(ns)", "Pct")


def checked_text(path: Path) -> str:
    """A workload CSV's text once it is a well-formed table: no control bytes, strict quoting, a header
    naming each column once, every row as wide as the header (a wider first row would otherwise
    become pandas' index and shift every column)."""
    text = read_text(path)
    csvtext.check_characters(path, text, DAMAGED_FIX)
    csvtext.check_table(path, text, DAMAGED_FIX)
    return text


def checked_table(path: Path, required: Tuple[str, ...] = ()) -> pd.DataFrame:
    text = checked_text(path)
    table = read_table(path, text)
    csvtext.require_columns(path, list(table.columns), required, DAMAGED_FIX)
    return table


def per_dispatch(path: Path, table: pd.DataFrame) -> pd.DataFrame:
    """A table of one row per dispatch: a Dispatch_ID twice is a duplicated or spliced row."""
    ids = table["Dispatch_ID"]
    twice = ids[ids.duplicated()]
    if len(twice):
        raise InputError(path, f"Dispatch_ID {csvtext.shown(str(twice.iloc[0]))} is on {int((ids == twice.iloc[0]).sum())} "
                         "rows (one row per dispatch): the file is damaged", DAMAGED_FIX)
    return table


def is_workload(path: Path) -> bool:
    return path.is_dir() and all((path / f).is_file() for f in REQUIRED)


def read_sysinfo(folder: Path) -> Dict[str, str]:
    rows = list(csv.DictReader(io.StringIO(checked_text(folder / "sysinfo.csv"), newline="")))
    if not rows:
        raise InputError(folder / "sysinfo.csv", "empty sysinfo.csv", "re-run rocprof-compute profile")
    info = {k.strip(): (v or "").strip() for k, v in rows[0].items() if k}
    for key, value in list(info.items()):
        number = num(info, key, 0.0)
        if math.isinf(number):  # a clock or unit count of inf is a damaged cell
            raise InputError(folder / "sysinfo.csv", f"{key} is {csvtext.shown(value)}, not a finite number: "
                             "the file is damaged", DAMAGED_FIX)
        if math.isnan(number):  # what the tool could not query on this GPU ("nan"): absent, as an empty cell
            del info[key]
    return info


def num(info: Dict[str, str], key: str, default: float = math.nan) -> float:
    try:
        return float(info.get(key, ""))
    except ValueError:
        return default


class Counters:
    """Counter columns of pmc_perf.csv as float arrays; an absent counter reads NaN and is remembered."""

    def __init__(self, table: pd.DataFrame):
        self.table, self.missing = table, set()

    def has(self, name: str) -> bool:
        return name in self.table.columns

    def __call__(self, name: str) -> pd.Series:
        if name not in self.table.columns:
            self.missing.add(name)
            return pd.Series(np.nan, index=self.table.index)
        return numeric(self.table[name]).astype("float64")


def _ratio(a: pd.Series, b: pd.Series) -> pd.Series:
    return (a / b).where(b != 0)  # SOL: "... if (denominator != 0) else None"


# ---------------------------------------------------------------- derived per-dispatch metrics

def is_mi300(info: Dict[str, str]) -> bool:
    return info.get("gpu_arch", "").startswith(("gfx94", "gfx95"))


def cache_line(info: Dict[str, str]) -> int:
    return 128 if is_mi300(info) else 64  # SOL's vL1D / L2 BW factor: 64 on gfx90a, 128 on gfx942


def hbm_bytes(c: Counters) -> Tuple[pd.Series, pd.Series]:
    """Read and write bytes between L2 and HBM (roofline hbm_data), per arch by the counters present."""
    if c.has("TCC_BUBBLE_sum") or c.has("TCC_EA0_RDREQ_sum"):
        rd = 128 * c("TCC_BUBBLE_sum") + 64 * (c("TCC_EA0_RDREQ_sum") - c("TCC_BUBBLE_sum")
                                                - c("TCC_EA0_RDREQ_32B_sum")) + 32 * c("TCC_EA0_RDREQ_32B_sum")
        wr = 64 * c("TCC_EA0_WRREQ_64B_sum") + 32 * (c("TCC_EA0_WRREQ_sum") - c("TCC_EA0_WRREQ_64B_sum"))
    else:
        rd = 32 * c("TCC_EA_RDREQ_32B_sum") + 64 * (c("TCC_EA_RDREQ_sum") - c("TCC_EA_RDREQ_32B_sum"))
        wr = 64 * c("TCC_EA_WRREQ_64B_sum") + 32 * (c("TCC_EA_WRREQ_sum") - c("TCC_EA_WRREQ_64B_sum"))
    return rd, wr


def valu_flops(c: Counters, p: str) -> pd.Series:
    return 64 * (c(f"SQ_INSTS_VALU_ADD_{p}") + c(f"SQ_INSTS_VALU_MUL_{p}") + c(f"SQ_INSTS_VALU_TRANS_{p}")
                 + 2 * c(f"SQ_INSTS_VALU_FMA_{p}"))


def mfma_flops(c: Counters) -> Dict[str, pd.Series]:
    return {p: 512 * c(f"SQ_INSTS_VALU_MFMA_MOPS_{p}") for p in MFMA_PRECISIONS}


def occupancy_accum(pmc: pd.DataFrame, level: Optional[pd.DataFrame]) -> Tuple[pd.Series, pd.Series, str]:
    """SQ_ACCUM_PREV_HIRES and GRBM_GUI_ACTIVE of the SQ_LEVEL_WAVES pass, aligned to pmc rows."""
    if level is not None and {"SQ_ACCUM_PREV_HIRES", "GRBM_GUI_ACTIVE", "Dispatch_ID"} <= set(level.columns):
        lv = level.set_index(numeric(level["Dispatch_ID"]))
        ids = numeric(pmc["Dispatch_ID"])
        accum = numeric(lv["SQ_ACCUM_PREV_HIRES"]).reindex(ids).to_numpy(dtype="float64")
        gui = numeric(lv["GRBM_GUI_ACTIVE"]).reindex(ids).to_numpy(dtype="float64")
        return pd.Series(accum, index=pmc.index), pd.Series(gui, index=pmc.index), "SQ_LEVEL_WAVES.csv"
    cols = list(pmc.columns)
    if "SQ_LEVEL_WAVES" in cols:
        # rocprofv3 backends merge every pass into pmc_perf.csv: the accumulation of the SQ_LEVEL_WAVES
        # pass is the SQ_ACCUM_PREV_HIRES* column written right after it.
        after = cols[cols.index("SQ_LEVEL_WAVES") + 1:]
        acc = next((c for c in after[:3] if c.startswith("SQ_ACCUM_PREV_HIRES")), None)
        if acc and "GRBM_GUI_ACTIVE" in cols:
            return (numeric(pmc[acc]).astype("float64"), numeric(pmc["GRBM_GUI_ACTIVE"]).astype("float64"),
                    f"pmc_perf.csv column {acc} (the SQ_LEVEL_WAVES pass)")
    nan = pd.Series(np.nan, index=pmc.index)
    return nan, nan, ""


def derive(pmc: pd.DataFrame, info: Dict[str, str], level: Optional[pd.DataFrame],
           duration_ns: pd.Series) -> Tuple[pd.DataFrame, List[str]]:
    """The model's metric columns for each dispatch, by rocprof-compute's formulas (module docstring)."""
    c = Counters(pmc)
    cu, xcd = num(info, "cu_per_gpu"), num(info, "num_xcd", 1.0)
    out = pd.DataFrame(index=pmc.index)
    accum, gui, occ_source = occupancy_accum(pmc, level)
    out["achieved_occupancy_pct"] = 100 * _ratio(accum, gui / xcd) / (num(info, "max_waves_per_cu") * cu)
    out["l2_hit_rate_pct"] = 100 * _ratio(c("TCC_HIT_sum"), c("TCC_HIT_sum") + c("TCC_MISS_sum"))
    tcp_to_tcc = (c("TCP_TCC_READ_REQ_sum") + c("TCP_TCC_WRITE_REQ_sum") + c("TCP_TCC_ATOMIC_WITH_RET_REQ_sum")
                  + c("TCP_TCC_ATOMIC_WITHOUT_RET_REQ_sum"))
    out["l1_hit_rate_pct"] = 100 - 100 * _ratio(tcp_to_tcc, c("TCP_TOTAL_CACHE_ACCESSES_sum"))
    rd, wr = hbm_bytes(c)
    out["dram_bytes_read"], out["dram_bytes_write"], out["dram_bytes"] = rd, wr, rd + wr
    out["l2_bytes"] = 64 * tcp_to_tcc
    out["l1_bytes"] = 64 * c("TCP_TOTAL_CACHE_ACCESSES_sum")
    for p in PRECISIONS:
        out[f"flops_{p.lower().replace('f', 'fp')}"] = valu_flops(c, p)
    mfma = mfma_flops(c)
    out["flops_tensor"] = sum(mfma.values())
    out["flops"] = out[["flops_fp16", "flops_fp32", "flops_fp64", "flops_tensor"]].sum(axis=1, min_count=1)
    seconds = duration_ns.where(duration_ns > 0) / 1e9
    out["flop_per_s"] = out["flops"] / seconds
    _percent_of_peak(out, c, info, gui=c("GRBM_GUI_ACTIVE") / xcd, ns=duration_ns.where(duration_ns > 0))
    notes = [f"achieved occupancy from {occ_source}" if occ_source else
             "no SQ_LEVEL_WAVES pass in this workload: achieved occupancy is empty"]
    important = sorted(c.missing & {"TCC_HIT_sum", "TCP_TOTAL_CACHE_ACCESSES_sum", "SQ_INSTS_VALU_FMA_F32",
                                    "SQ_INSTS_VALU_MFMA_MOPS_F16", "TCC_EA_RDREQ_sum", "TCC_EA0_RDREQ_sum",
                                    "SQ_ACTIVE_INST_VALU", "TCC_REQ_sum"})
    if important:
        notes.append(f"counters absent from pmc_perf.csv (their metrics are empty): {', '.join(important)}")
    return out, notes


def waves_per_cu(kernels: pd.DataFrame, pmc: pd.DataFrame, info: Dict[str, str]) -> pd.Series:
    """Full waves of the GPU's wave slots each grid makes (module docstring): every work-group
    takes ceil(work-group size / wave size) of a CU's max_waves_per_cu slots."""
    size = next((c for c in WAVE_SIZE if c in pmc.columns), None)
    wave = numeric(pmc[size]).to_numpy(dtype="float64") if size else num(info, "wave_size")
    waves = kernels["grid_size"].to_numpy(dtype="float64") * np.ceil(kernels["block_size"].to_numpy(dtype="float64")
                                                                      / wave)
    return pd.Series(waves / (num(info, "cu_per_gpu") * num(info, "max_waves_per_cu")), index=kernels.index)


def hbm_peak_gbs(info: Dict[str, str]) -> float:
    """SOL's HBM peak: sysinfo hbm_bw (Omniperf 2) or max_mclk/1000 x 32 x num_hbm_channels (rocprof-compute 3)."""
    if not math.isnan(num(info, "hbm_bw")):
        return num(info, "hbm_bw")
    return num(info, "max_mclk") / 1000 * 32 * num(info, "num_hbm_channels")


def _percent_of_peak(out: pd.DataFrame, c: Counters, info: Dict[str, str], gui: pd.Series, ns: pd.Series) -> None:
    cu, sclk, line = num(info, "cu_per_gpu"), num(info, "max_sclk"), cache_line(info)
    valu = 100 * c("SQ_ACTIVE_INST_VALU") / (gui * cu)
    mfma = 100 * c("SQ_VALU_MFMA_BUSY_CYCLES") / (gui * cu * 4)
    # Compute side: the busier of the VALU and MFMA pipes (SOL "VALU / MFMA Utilization").
    out["sm_throughput_pct"] = pd.concat([valu, mfma], axis=1).max(axis=1, skipna=True)
    gbs = lambda nbytes: nbytes / ns  # bytes per ns = GB/s, as SOL divides by End - Start
    out["dram_throughput_pct"] = 100 * gbs(out["dram_bytes"]) / hbm_peak_gbs(info)
    out["l2_throughput_pct"] = 100 * gbs(c("TCC_REQ_sum") * 128) / (sclk / 1000 * line * num(info, "total_l2_chan"))
    out["l1_throughput_pct"] = 100 * gbs(c("TCP_TOTAL_CACHE_ACCESSES_sum") * line) / (sclk / 1000 * line * cu)
    levels = out[["dram_throughput_pct", "l2_throughput_pct", "l1_throughput_pct"]]
    out["memory_throughput_pct"] = levels.max(axis=1, skipna=True)
    busiest = levels.fillna(-1).idxmax(axis=1).map({"dram_throughput_pct": "DRAM", "l2_throughput_pct": "L2",
                                                    "l1_throughput_pct": "L1"})
    out["busiest_memory_unit"] = busiest.where(levels.notna().any(axis=1), "")


# ---------------------------------------------------------------- roofs

def roofline_row(folder: Path) -> Tuple[Dict[str, float], Optional[pd.DataFrame]]:
    """Device 0's row of roofline.csv (rocprof-compute plots device 0 by default) and the whole table."""
    path = folder / "roofline.csv"
    if not path.is_file():
        return {}, None
    table = checked_table(path, ("device",))
    if not len(table):
        return {}, None
    row = table[table["device"].astype(str).str.strip() == "0"]
    first = (row if len(row) else table).iloc[0]
    return {k: float(v) for k, v in first.items() if _is_number(v)}, table


def _is_number(v) -> bool:
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


def dominant_mfma(derived_mfma: Dict[str, float]) -> str:
    best = max(derived_mfma, key=derived_mfma.get) if derived_mfma else "F16"
    return best if derived_mfma.get(best, 0) > 0 else "F16"


def peaks_from_roofline(roof: Dict[str, float], mfma: str) -> Dict[str, Peak]:
    how = "roofline.csv (rocprof-compute's measured roofline benchmark, device 0): "
    out = {}
    for key, col in (("bytes_per_s_dram", "HBMBw"), ("bytes_per_s_l2", "L2Bw"), ("bytes_per_s_l1", "L1Bw")):
        if col in roof:
            out[key] = Peak(roof[col] * 1e9, "byte/s", "measured", how + f"{col} GB/s")
    for key, col in (("flop_per_s_fp64", "FP64Flops"), ("flop_per_s_fp32", "FP32Flops"),
                     ("flop_per_s_fp16", "FP16Flops"), ("flop_per_s_tensor", f"MFMA{mfma}Flops")):
        if roof.get(col):
            out[key] = Peak(roof[col] * 1e9, "FLOP/s", "measured", how + f"{col} GFLOP/s")
    return out


def mfma_per_clock(info: Dict[str, str], precision: str) -> float:
    """SOL's MFMA peak FLOP per CU per cycle: gfx90a F16/BF16 1024, gfx942 4096; F32/F64 256."""
    if precision in ("F32", "F64"):
        return 256
    return 4096 if is_mi300(info) else 1024


def peaks_from_sysinfo(info: Dict[str, str], mfma: str) -> Dict[str, Peak]:
    cu, hz, line = num(info, "cu_per_gpu"), num(info, "max_sclk") * 1e6, cache_line(info)
    if math.isnan(cu) or math.isnan(hz):
        return {}
    # Theoretical peaks (clock x units), not benchmarked: tagged "datasheet" so the roofline
    # legend does not present them as measured; roofline.csv holds the measured ones.
    how = "theoretical, from sysinfo.csv with rocprof-compute's SOL peak formula: "
    out = {f"flop_per_s_{p}": Peak(hz * cu * 128, "FLOP/s", "datasheet", how + "max_sclk x CUs x 64 lanes x 2")
           for p in ("fp64", "fp32", "fp16")}
    out["flop_per_s_tensor"] = Peak(hz * cu * mfma_per_clock(info, mfma), "FLOP/s", "datasheet",
                                    how + f"MFMA {mfma}: max_sclk x CUs x {mfma_per_clock(info, mfma):.0f}")
    hbm = hbm_peak_gbs(info)
    if not math.isnan(hbm):
        out["bytes_per_s_dram"] = Peak(hbm * 1e9, "byte/s", "datasheet", how + "HBM bandwidth")
    l2 = hz * line * num(info, "total_l2_chan")
    if not math.isnan(l2):
        out["bytes_per_s_l2"] = Peak(l2, "byte/s", "datasheet", how + f"max_sclk x {line} B x L2 channels")
    out["bytes_per_s_l1"] = Peak(hz * line * cu, "byte/s", "datasheet", how + f"max_sclk x {line} B x CUs")
    return out


def device_of(info: Dict[str, str], device_id: int, roof: Dict[str, float], mfma: str) -> Device:
    name = info.get("gpu_model", "")
    peaks = amd_devices.datasheet_peaks(name, int(num(info, "cu_per_gpu", 0)) or None)
    peaks.update(peaks_from_sysinfo(info, mfma))
    peaks.update(peaks_from_roofline(roof, mfma))  # measured beats sysinfo beats datasheet
    return Device(id=device_id, name=name, vendor="AMD", architecture=info.get("gpu_arch", ""),
                  sm_count=int(num(info, "cu_per_gpu", 0)) or None, clock_mhz=num(info, "max_sclk", None),
                  memory_clock_mhz=num(info, "max_mclk", None), peaks=peaks)


# ---------------------------------------------------------------- provenance

_VERSION = re.compile(r"^(Omniperf|Rocprofiler-Compute|rocprofiler-compute|ROCm Compute Profiler) version:\s*(\S+)",
                      re.M | re.I)
_BACKEND = re.compile(r"^Profiler choice:\s*(\S+)", re.M)


def tool_and_version(folder: Path) -> Tuple[str, str, str]:
    """(tool, version, backend) from log.txt's first lines; ('rocprof-compute', '', '') when absent."""
    log = folder / "log.txt"
    text = log.read_text(encoding="utf-8", errors="replace")[:20000] if log.is_file() else ""
    m, b = _VERSION.search(text), _BACKEND.search(text)
    tool = "omniperf" if m and m.group(1).lower() == "omniperf" else "rocprof-compute"
    return tool, (m.group(2) if m else ""), (b.group(1) if b else "")


def workload_notes(folder: Path, info: Dict[str, str], tool: str, version: str, backend: str,
                   roof: Dict[str, float]) -> List[str]:
    notes = [f"{tool} {version or '(version unknown: no log.txt)'} workload folder, profiler backend "
             f"{backend or 'unknown'}; {info.get('gpu_model', '?')} ({info.get('gpu_arch', '?')}), "
             f"ROCm {info.get('rocm_version', '?')}, sysinfo version {info.get('version', '?')}"]
    notes.append("roofs: " + ("measured (roofline.csv, device 0)" if roof else
                              "no roofline.csv in this workload: computed from sysinfo.csv clocks with "
                              "rocprof-compute's speed-of-light peak formulas"))
    notes.append("bound label: % of peak from rocprof-compute's speed-of-light formulas (compute = busier of "
                 "VALU and MFMA utilisation; memory = busiest of HBM, L2 and vL1D bandwidth)")
    notes.append(f"waves per CU (waves_per_sm): work-groups x waves per work-group / ({info.get('cu_per_gpu', '?')} "
                 f"CUs x {info.get('max_waves_per_cu', '?')} wave slots per CU, sysinfo.csv cu_per_gpu x "
                 "max_waves_per_cu): below 1 the grid cannot fill the GPU's wave slots once")
    return notes


# ---------------------------------------------------------------- entry point

def read_workload(folder) -> Profile:
    folder = Path(folder)
    if not is_workload(folder):
        raise InputError(folder, "not a rocprof-compute / Omniperf workload folder (needs pmc_perf.csv and "
                         "sysinfo.csv)", "pass the folder `rocprof-compute profile` wrote (<name>/<gpu model>/)")
    info = read_sysinfo(folder)
    pmc = per_dispatch(folder / "pmc_perf.csv", checked_table(folder / "pmc_perf.csv", ("Dispatch_ID",)))
    level_path = folder / "SQ_LEVEL_WAVES.csv"
    level = per_dispatch(level_path, checked_table(level_path, ("Dispatch_ID",))) if level_path.is_file() else None
    kernels, notes = dispatch_kernels(pmc)
    derived, derive_notes = derive(pmc, info, level, kernels["duration_ns"])
    for col in derived.columns:
        kernels[col] = derived[col].to_numpy()
    kernels["waves_per_sm"] = waves_per_cu(kernels, pmc, info).to_numpy()
    roof, roof_table = roofline_row(folder)
    mfma = dominant_mfma({p: float(v.sum()) for p, v in mfma_flops(Counters(pmc)).items()})
    ids = sorted({int(d) for d in kernels["device"].dropna()}) or [0]
    devices = [device_of(info, i, roof, mfma) for i in ids]
    tool, version, backend = tool_and_version(folder)
    notes = workload_notes(folder, info, tool, version, backend, roof) + derive_notes + notes
    return Profile(_provenance(folder, tool, version), devices, kernels, raw_metrics=raw_rows(pmc),
                   notes=notes, summaries=_summaries(folder, kernels, roof_table))


def _summaries(folder: Path, kernels: pd.DataFrame, roof_table: Optional[pd.DataFrame]) -> Dict[str, pd.DataFrame]:
    out = {}
    if kernels["duration_ns"].notna().any():
        out["kernel_stats"] = stats_of(kernels["demangled_name"], kernels["duration_ns"])
    top = folder / "pmc_kernel_top.csv"
    if top.is_file():
        t = checked_table(top, TOP_COLUMNS)
        out["pmc_kernel_top"] = with_units(pd.DataFrame({
            "name": t["Kernel_Name"], "calls": numeric(t["Count"]), "total_ns": numeric(t["Sum(ns)"]),
            "avg_ns": numeric(t["Mean(ns)"]), "median_ns": numeric(t["Median(ns)"]), "pct": numeric(t["Pct"])}))
    if roof_table is not None:
        out["roofline_benchmark"] = roof_table.apply(numeric)  # GB/s and GFLOP/s per device, as measured
    return out


def _provenance(folder: Path, tool: str, version: str) -> Provenance:
    digest = sha256_of(b"".join((folder / f).read_bytes() for f in REQUIRED))  # the two files that define it
    return Provenance(tool=tool, tool_version=version, source_path=str(folder.resolve()), source_sha256=digest,
                      source_format="rocprof-compute-workload")


# ---------------------------------------------------------------- registry hooks (readers/__init__.py)
FORMATS = ("rocprof-compute",)


def sniff(path: Path, head) -> Optional[str]:
    """A workload folder, or its main table pmc_perf.csv (then the whole folder is read)."""
    if head is None:
        return "rocprof-compute" if is_workload(path) else None
    if path.name == "pmc_perf.csv" and is_workload(path.parent):
        return "rocprof-compute"
    return None


def read(path, fmt: str = "rocprof-compute") -> Profile:
    path = Path(path)
    return read_workload(path if path.is_dir() else path.parent)
