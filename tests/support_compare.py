"""Compare's sample profiles and independent readers of the raw files (NVIDIA's ncu_report for
.ncu-rep, TraceLens's per-op report for PyTorch traces), shared by test_compare.py,
test_compare_vendors.py, test_compare_browser.py and test_series.py."""
import ast
import csv
import json

import pytest

from conftest import ncu_actions

V1 = "ncu/armleth_t4_full_2024.2.1.ncu-rep"  # the series' first version (matrix_addition2D)
V8 = "ncu/armleth_t4_series/report_v8_1d_1_per_thread_stripped.ncu-rep"  # renamed: matrix_addition1D_stripped
V2 = "ncu/armleth_t4_series/report_v2.ncu-rep"


def ncu_launches(ncu_report, path):
    """[(function name, gpu__time_duration.sum, {metric: value})] per launch, by NVIDIA's own module."""
    out = []
    for action in ncu_actions(ncu_report, path):
        metrics = {}
        for name in action.metric_names():
            try:
                metrics[name] = float(action[name].value())
            except (TypeError, ValueError):
                pass
        out.append((action.name(), metrics.get("gpu__time_duration.sum", float("nan")), metrics))
    return out


def _compact(text: str) -> str:
    """TraceLens's Python-tuple text ("((512,), (141, 512))") as the JSON text op_shapes holds."""
    return json.dumps(ast.literal_eval(text), separators=(",", ":"))


def tracelens_ops(samples_dir, name) -> dict:
    """{(op, input dims, input types): kernel time ns} from TraceLens's unified_perf_summary.csv."""
    path = samples_dir / "torch" / "tracelens_reference" / name / "unified_perf_summary.csv"
    if not path.is_file():
        pytest.skip(f"{path} not in the samples")
    out = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            key = (row["name"], _compact(row["Input Dims"]), _compact(row["Input type"]))
            out[key] = out.get(key, 0.0) + float(row["Kernel Time (µs)_sum"]) * 1e3
    return out
