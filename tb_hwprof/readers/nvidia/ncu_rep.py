"""Nsight Compute `.ncu-rep` reader, through NVIDIA's own `ncu_report` module.

`ncu_report` silently returns an empty or shortened report for a damaged file,
so the container is walked first: a file that does not end where its last
block says it does is rejected instead of being half-read.
"""
from __future__ import annotations

import math
import re
import struct
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from ...errors import InputError, MissingDependency
from ...model import Profile, Provenance, normalise_kernels
from . import ncu_metrics
from ..common import describe_bytes, read_input_bytes, sha256_of

MAGIC = b"NVR\x00"
INSTALL_HINT = "pip install 'tb-hwprof[ncu]' (NVIDIA's ncu-report module; no GPU needed)"
_VERSION_RE = re.compile(rb"(20\d\d\.\d+\.\d+)(?:\.\d+)? \(build \d+\)")


def import_ncu_report():
    try:
        import ncu_report  # noqa: WPS433 (optional, proprietary: imported on use)
    except ImportError:
        raise MissingDependency(f"reading .ncu-rep files needs NVIDIA's ncu_report: {INSTALL_HINT}") from None
    return ncu_report


def _varint(buf: bytes, i: int) -> Tuple[int, int]:
    result = shift = 0
    while True:
        if i >= len(buf):
            raise ValueError("varint past end")
        byte = buf[i]
        i += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, i


def _payload_size(block_header: bytes) -> int:
    """Field 5 (varint) of a block header protobuf is the size of the payload that follows."""
    i = 0
    while i < len(block_header):
        key, i = _varint(block_header, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(block_header, i)
            if field == 5:
                return value
        elif wire == 2:
            length, i = _varint(block_header, i)
            i += length
        elif wire == 5:
            i += 4
        elif wire == 1:
            i += 8
        else:
            raise ValueError(f"wire type {wire}")
    return 0


def check_container(path: Path, data: bytes) -> None:
    """Reject files that are not an Nsight Compute report or were cut short."""
    if len(data) == 0:
        raise InputError(path, "file is empty", "re-export the report with `ncu -o`")
    if not data.startswith(MAGIC):
        raise InputError(path, "not an Nsight Compute report (no NVR header)",
                         "pass a file written by `ncu -o` or `ncu --csv`")
    try:
        (header_len,) = struct.unpack_from("<I", data, 4)
        i = 8 + header_len
        blocks = 0
        while i < len(data):
            (block_len,) = struct.unpack_from("<I", data, i)
            i += 4
            if i + block_len > len(data):
                raise ValueError("block header past end")
            i += block_len + _payload_size(data[i:i + block_len])
            blocks += 1
        if i != len(data) or blocks == 0:
            raise ValueError("last block past end")
    except (ValueError, struct.error):
        raise InputError(path, f"truncated or damaged Nsight Compute report ({len(data)} bytes)",
                         "copy the file again or re-run `ncu -o`") from None


def tool_version(data: bytes) -> str:
    """Nsight Compute writes its version ("2024.2.1.0 (build ...)") near the start; very old ones do not."""
    match = _VERSION_RE.search(data[: 4 << 20])
    return match.group(1).decode() if match else ""


def value_readers(ncu_report) -> Dict[int, object]:
    """IMetric value kind -> accessor: what IMetric.value() dispatches to, without the dict of
    lambdas value() builds on every call (a third of the reading time of a big report)."""
    m = ncu_report.IMetric
    none = lambda metric: None  # noqa: E731
    return {m.ValueKind_ANY: none, m.ValueKind_UNKNOWN: none,
            m.ValueKind_DOUBLE: m.as_double, m.ValueKind_FLOAT: m.as_double,
            m.ValueKind_STRING: m.as_string, m.ValueKind_UINT32: m.as_uint64, m.ValueKind_UINT64: m.as_uint64}


def action_metrics(action, readers: Dict[int, object]) -> Dict[str, list]:
    """{metric name: [value, unit]} for every metric of one launch."""
    out = {}
    for name in action.metric_names():
        metric = action.metric_by_name(name)
        if metric is None:
            continue
        value = readers[metric.kind()](metric)
        out[name] = [None if value != value else value, metric.unit()]  # NaN -> null, as JSON has it
    return out


def action_rules(action) -> List[dict]:
    rules = []
    for d in action.rule_results_as_dicts():
        message = d.get("rule_message") or {}
        speedup = d.get("speedup_estimation") or {}
        rules.append({
            "rule": d.get("rule_identifier", ""),
            "name": d.get("name", ""),
            "section": d.get("section_identifier", ""),
            "type": message.get("type"),
            "title": message.get("title", ""),
            "message": message.get("message", ""),
            "speedup_type": {1: "global", 2: "local"}.get(speedup.get("type"), ""),
            "estimated_speedup_pct": speedup.get("speedup", math.nan),
        })
    return rules


def read_ncu_rep(path) -> Profile:
    path = Path(path)
    data = read_input_bytes(path)
    check_container(path, data)
    ncu_report = import_ncu_report()
    ctx = ncu_report.load_report(str(path))
    if ctx is None or ctx.num_ranges() == 0:
        raise InputError(path, "Nsight Compute could not read any range from this report",
                         "open it in the Nsight Compute GUI to check it, or re-run `ncu -o`")
    rows, raws, rules = [], [], []
    readers = value_readers(ncu_report)
    device_metrics: Dict[int, dict] = {}
    device_peaks: Dict[int, Dict[str, float]] = {}
    for range_id in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(range_id)
        for action_id in range(rng.num_actions()):
            action = rng.action_by_idx(action_id)
            raw = action_metrics(action, readers)
            values = {k: v[0] for k, v in raw.items()}
            row = ncu_metrics.kernel_fields(values)
            row.update(
                launch_id=len(rows),
                range_id=range_id,
                name=action.name(ncu_report.IAction.NameBase_FUNCTION),
                demangled_name=action.name(ncu_report.IAction.NameBase_DEMANGLED),
                mangled_name=action.name(ncu_report.IAction.NameBase_MANGLED),
            )
            device = 0 if math.isnan(row["device"]) else int(row["device"])
            device_metrics.setdefault(device, values)
            peaks = device_peaks.setdefault(device, {})
            for key, value in ncu_metrics.kernel_peaks(values).items():
                peaks[key] = max(peaks.get(key, 0.0), value)
            rows.append(row)
            raws.append(raw)
            rules.append(action_rules(action))
    if not rows:
        raise InputError(path, "the report holds no profiled kernel launches",
                         "check the ncu filters (-k, --launch-count) used to capture it")
    devices = [ncu_metrics.device_from_metrics(d, m, device_peaks.get(d)) for d, m in sorted(device_metrics.items())]
    provenance = Provenance(tool="ncu", tool_version=tool_version(data), source_path=str(path.resolve()),
                            source_sha256=sha256_of(data), source_format="ncu-rep")
    return Profile(provenance, devices, normalise_kernels(rows), raws, rules)


# ---------------------------------------------------------------- registry hooks (readers/__init__.py)
FORMATS = ("ncu-rep",)
NCU_REP_MAGIC = b"NVR\x00"


def sniff(path: Path, head) -> Optional[str]:
    return "ncu-rep" if head is not None and head.startswith(NCU_REP_MAGIC) else None


def refuse(path: Path, head: bytes) -> None:
    """A file named .ncu-rep that no reader claimed: say what it is instead."""
    if path.suffix == ".ncu-rep":
        raise InputError(path, f"not an Nsight Compute report (no NVR header; looks like {describe_bytes(head)})",
                         "pass a file written by `ncu -o`, or its `ncu --csv` output")


def read(path, fmt: str = "ncu-rep") -> Profile:
    return read_ncu_rep(path)
