"""Nsight Compute `.ncu-rep` reader, through NVIDIA's own `ncu_report` module.

`ncu_report` silently returns an empty or shortened report for a damaged file
(a launch without its name or metrics, a metric renamed), so damage is looked
for with signals of our own, and a damaged launch refuses the file, naming it
(with salvage=True, `export --salvage`, the sound launches are kept and the
run's notes list the others):
- the container is walked: it must end where its last block says, each block
  must hold the records its header counts, and each record must parse whole;
  the launches it declares must all reach us;
- per launch: a kernel name and each listed metric stored;
- per metric: a name that is text and follows Nsight Compute's grammar (MetricGrammar:
  a name a newer Nsight Compute could write is data), text values that read as
  text.  A metric that fails is dropped and listed in the run's notes, the launch
  kept: damage costs only what it touched (a launch left without any sound
  metric is a damaged launch);
- what ncu_report's protobuf code prints on stderr (a record it could not
  parse) is collected, not leaked, and is damage.
A flipped bit inside a metric value, or one that renames a metric into another
well-formed name, leaves no trace in the file (it has no checksum): not caught.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.util
import math
import re
import struct
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from ...core.errors import InputError
from ...core.model import Profile, Provenance, normalise_kernels
from . import ncu_metrics, ncu_workers
# The launch-level reading lives in ncu_launches (worker processes import it alone); its names are
# this module's too, as before.
from .ncu_launches import (  # noqa: F401
    ABSL_PREAMBLE, HOTSPOTS, INSTALL_HINT, LIBRARY_ERROR, METRIC_NAME, SALVAGE_FIX, SAMPLE_COUNT,
    SECTIONS_TABLE, STALL_SAMPLE_PREFIX, TOP_INSTRUCTIONS, TOP_REASONS, DamagedLaunch, Launches,
    MetricAccess, MetricGrammar, action_metrics, action_rules, check_metric_count, hotspot_row,
    import_ncu_report, instruction_text, launch_name, library_call, library_errors, library_stderr,
    other_names, read_launch, read_launches, readable_text, section_rows, source_hotspots,
    stall_samples_by_address, top_addresses, _dropped_text, _metric_names, _name_damage, _sound_text)
from ..common import RELEASE_BYTES, describe_bytes, mapped_input, release_read

MAGIC = b"NVR\x00"
_VERSION_RE = re.compile(rb"(20\d\d\.\d+\.\d+)(?:\.\d+)? \(build \d+\)")


def _varint(buf: bytes, i: int) -> Tuple[int, int]:
    if i < len(buf) and buf[i] < 0x80:  # one byte: most tags and lengths (a quarter of the read time otherwise)
        return buf[i], i + 1
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


def _top_level_fields(message: bytes) -> Dict[int, int]:
    """The varint fields of one protobuf message, checking that the whole message parses: every
    tag has a known wire type and every field ends inside the message (ValueError if not)."""
    varints: Dict[int, int] = {}
    i = 0
    while i < len(message):
        key, i = _varint(message, i)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise ValueError("field number 0")
        if wire == 0:
            varints[field], i = _varint(message, i)
        elif wire == 2:
            length, i = _varint(message, i)
            i += length
        elif wire == 5:
            i += 4
        elif wire == 1:
            i += 8
        else:
            raise ValueError(f"wire type {wire}")
        if i > len(message):
            raise ValueError("field past the end of its message")
    return varints


def _payload_size(block_header: bytes) -> int:
    """Field 5 (varint) of a block header protobuf is the size of the payload that follows."""
    return _top_level_fields(block_header).get(5, 0)


def _payload_records(payload: bytes) -> List[bytes]:
    """The records of a block's payload, each a u32 length then a protobuf message."""
    i, records = 0, []
    while i < len(payload):
        (length,) = struct.unpack_from("<I", payload, i)
        i += 4
        if i + length > len(payload):
            raise ValueError("record past the end of its block")
        records.append(payload[i:i + length])
        i += length
    return records


def _parse_problem(record: bytes) -> Optional[str]:
    """None when the record parses whole, else what is wrong with it."""
    try:
        _top_level_fields(record)
    except ValueError as e:
        return str(e)
    return None


METRIC_RESULT = (13 << 3) | 2  # ProfileResult.MetricResults (field 13, length-delimited) ...
NAME_ID = (1 << 3) | 0  # ... each opening with its NameId (field 1, varint): 2020.2 to 2025.1


try:  # the same walk in C (_ncu_rep_scan.c), where setup.py could build it: ~12 ms -> <1 ms a 30k-metric report
    from . import _ncu_rep_scan
except ImportError:
    _ncu_rep_scan = None


def metric_name_ids(record: bytes) -> Tuple[int, Optional[int]]:
    """(distinct NameIds, a NameId given to two different results or None) of one launch record,
    which must parse whole (ValueError).  A shared id is a damaged one: one metric's value read
    under another's name.  Results repeated byte for byte are not damage (2024 full-set reports
    repeat a few).  The C walk where it was built; it hands a varint wider than 63 bits (a damaged
    record) to the Python one, the reference."""
    if _ncu_rep_scan is not None:
        found = _ncu_rep_scan.metric_name_ids(record)
        if found is not None:
            return found
    return metric_name_ids_py(record)


def metric_name_ids_py(record: bytes) -> Tuple[int, Optional[int]]:
    """metric_name_ids in Python: one walk, the metric results (most of a record's ~300 fields) on
    a fast path that copies nothing (~12 ms for a 30k-metric report)."""
    first: Dict[int, int] = {}  # name id -> offset of its first result
    lengths: Dict[int, int] = {}
    shared = None
    i, end = 0, len(record)
    last = end - 5  # the fast path reads 5 bytes: tag, length, NameId tag, id (one or two bytes)
    while i < end:
        # The common shape (_fast_result_id), inline: ~30k results per report, a call each ~5 ms.
        name_id = -1
        if i <= last and record[i] == METRIC_RESULT and 2 <= record[i + 1] < 0x80 and record[i + 2] == NAME_ID:
            low = record[i + 3]
            if low < 0x80:
                name_id = low
            elif record[i + 1] >= 3 and record[i + 4] < 0x80:
                name_id = (low & 0x7F) | (record[i + 4] << 7)
        if name_id >= 0:
            length, at = record[i + 1], i + 2
            i = at + length
            seen = first.setdefault(name_id, at)
            if seen != at:
                if lengths[name_id] != length or record[seen:seen + length] != record[at:at + length]:
                    shared = name_id
            else:
                lengths[name_id] = length
        else:
            i = _skip_field(record, i, first, lengths)
            if isinstance(i, tuple):  # a metric result off the fast path, with a shared id
                i, shared = i
        if i > end:
            raise ValueError("field past the end of its message")
    return len(first), shared


def _skip_field(record: bytes, i: int, first: Dict[int, int], lengths: Dict[int, int]):
    """The offset after the field at `i` (any wire type; ValueError on damage).  A metric result
    read here (a length or id of more than one byte) is recorded as the fast path records it;
    (offset, its id) when that id was already given to a different result."""
    key, i = _varint(record, i)
    wire = key & 7
    if key >> 3 == 0:
        raise ValueError("field number 0")
    if wire == 2:
        length, i = _varint(record, i)
        if key == METRIC_RESULT and length and i < len(record) and record[i] == NAME_ID:
            name_id = _varint(record[i:i + length], 1)[0]
            seen = first.setdefault(name_id, i)
            if seen == i:
                lengths[name_id] = length
            elif lengths[name_id] != length or record[seen:seen + length] != record[i:i + length]:
                return i + length, name_id
        return i + length
    if wire == 0:
        return _varint(record, i)[1]
    if wire in (1, 5):
        return i + (8 if wire == 1 else 4)
    raise ValueError(f"wire type {wire}")


@dataclasses.dataclass
class Container:
    """What the container itself says: how many launches it holds, the launches (0-based, in
    report order) whose record does not parse, with why, and for the others metric_name_ids()."""

    launches: int = 0
    damaged: Dict[int, str] = dataclasses.field(default_factory=dict)
    name_ids: Dict[int, Tuple[int, Optional[int]]] = dataclasses.field(default_factory=dict)

    def add_launch(self, record: bytes) -> None:
        try:
            self.name_ids[self.launches] = metric_name_ids(record)
        except ValueError as e:
            self.damaged[self.launches] = f"its record does not parse ({e})"
        self.launches += 1

    def check_metrics(self, launch: int, listed: int) -> None:
        """DamagedLaunch unless ncu_report listed as many metrics as the launch's record holds
        results, each under its own name id."""
        check_metric_count(self.name_ids, launch, listed)


def _add_block(container: Container, header: bytes, payload: bytes) -> None:
    """Count one block's launches: its header counts its records (field 1: the session's, first;
    field 2: the launches'), and the payload must hold exactly that many."""
    fields = _top_level_fields(header)
    records = _payload_records(payload)
    session, launches = fields.get(1, 0), fields.get(2, 0)
    if 1 in fields and 2 in fields and session + launches != len(records):
        raise ValueError(f"a block declares {session + launches} records and holds {len(records)}")
    for record in records[:session]:
        problem = _parse_problem(record)
        if problem:
            raise ValueError(f"a session record does not parse ({problem})")
    for record in records[session:session + launches]:
        container.add_launch(record)


def check_container(path: Path, data: bytes, passed: Callable[[int], None] = lambda offset: None) -> Container:
    """Reject files that are not an Nsight Compute report, were cut short or whose structure does
    not parse; returns the launches the container declares and those whose record is damaged.
    passed(offset): called as the walk leaves each block (the bytes before offset are done with)."""
    if len(data) == 0:
        raise InputError(path, "file is empty", "re-export the report with `ncu -o`")
    if data[:len(MAGIC)] != MAGIC:
        raise InputError(path, "not an Nsight Compute report (no NVR header)",
                         "pass a file written by `ncu -o` or `ncu --csv`")
    container = Container()
    try:
        (header_len,) = struct.unpack_from("<I", data, 4)
        i = 8 + header_len
        blocks = 0
        while i < len(data):
            (block_len,) = struct.unpack_from("<I", data, i)
            i += 4
            if i + block_len > len(data):
                raise ValueError("block header past end")
            header = data[i:i + block_len]
            payload_end = i + block_len + _payload_size(header)
            if payload_end > len(data):
                raise ValueError("last block past end")
            _add_block(container, header, data[i + block_len:payload_end])
            i = payload_end
            blocks += 1
            passed(i)
        if i != len(data) or blocks == 0:
            raise ValueError("last block past end")
    except (ValueError, struct.error) as e:
        raise InputError(path, f"truncated or damaged Nsight Compute report ({len(data)} bytes: {e})",
                         "copy the file again or re-run `ncu -o`") from None
    return container


def tool_version(data: bytes) -> str:
    """Nsight Compute writes its version ("2024.2.1.0 (build ...)") in the session record: in the first
    4 MB up to 2025.1, at 6.3 MB of the 136 MB 2025.3.1 H200 report (after its first block); very old
    ones write none.  The whole file is searched (a few ms per 100 MB)."""
    match = _VERSION_RE.search(data)
    return match.group(1).decode() if match else ""


def _releasing(data) -> Callable[[int], None]:
    """passed(offset) for check_container: the mapped report's pages behind the walk handed back
    every RELEASE_BYTES."""
    released = [0]

    def passed(offset: int) -> None:
        if offset - released[0] >= RELEASE_BYTES:
            release_read(data, offset)
            released[0] = offset
    return passed


def version_and_digest(data) -> Tuple[str, str]:
    """(tool_version, SHA-256) of a report's bytes, read in windows of RELEASE_BYTES whose mapped
    pages are handed back behind (release_read).  The version is searched across each window's
    start as well (the tail of the window before is searched again with it)."""
    digest = hashlib.sha256()
    version = ""
    overlap = 64  # longer than any "2025.3.1.0 (build 36398880)"
    # Windows of a view, not slices of the map: a slice copies its 32 MB first (1 GB hashed in 1.29 s, 0.66 s here).
    with memoryview(data) as view:
        for start in range(0, len(view), RELEASE_BYTES):
            end = min(start + RELEASE_BYTES, len(view))
            digest.update(view[start:end])
            if not version:
                version = tool_version(view[max(start - overlap, 0):end])
            release_read(data, end)
    return version, digest.hexdigest()


def hotspots_frame(rows: List[dict]) -> "pd.DataFrame":
    import pandas as pd
    frame = pd.DataFrame(rows)
    frame.attrs["units"] = {"samples": "samples", **{f"stall_{i + 1}_samples": "samples" for i in range(TOP_REASONS)}}
    return frame


# -- the report's sections: titles and metric lists, for sections the drawer has no table of ------
def _damage_text(damaged: Dict[int, str], lost: int, declared: int) -> str:
    """'launch 3 (no kernel name), launch 7 (...)' (the first few), and the launches never read."""
    parts = [f"launch {i} ({why})" for i, why in sorted(damaged.items())[:3]]
    if len(damaged) > 3:
        parts.append(f"{len(damaged) - 3} more")
    if lost:
        parts.append(f"{lost} of its {declared} launches unreadable")
    return ", ".join(parts)


def _said(errors: List[str]) -> str:
    return f" (its reader says: {errors[0]})" if errors else ""


def judge_damage(path: Path, container: "Container", launches: Launches, errors: List[str],
                 salvage: bool) -> List[str]:
    """Refuse a damaged report (InputError naming the launches), or with salvage return the notes
    saying which launches were left out."""
    damaged = {**container.damaged, **launches.damaged}  # the library's words win for a launch both flag
    lost = max(container.launches - launches.count, 0)
    if errors and not damaged and not lost:
        # The library dropped something it could not parse, and no launch shows it: nothing is sound for sure.
        raise InputError(path, f"damaged Nsight Compute report{_said(errors)}",
                         "copy the file again or re-capture it")
    if not damaged and not lost:
        return []
    what = _damage_text(damaged, lost, container.launches) + _said(errors)
    if not launches.rows:
        raise InputError(path, f"damaged Nsight Compute report, no sound launch in it: {what}",
                         "copy the file again or re-capture it")
    if not salvage:
        raise InputError(path, f"damaged Nsight Compute report: {what}", SALVAGE_FIX)
    left_out = len(damaged) + lost
    note = f"--salvage: {left_out} damaged launch(es) left out: " + ", ".join(
        [f"launch {i} ({why})" for i, why in sorted(damaged.items())] + ([f"{lost} unreadable"] if lost else []))
    return [note]


def read_ncu_rep(path, salvage: bool = False) -> Profile:
    """The report's Profile.  A damaged launch (no name, an unreadable or missing metric, a record
    that does not parse) refuses the file, or with salvage is left out and listed in the notes.
    A big report is read by worker processes (ncu_workers.py), a small one here."""
    path = Path(path)
    with _server_if_big(path) as server:
        # The bytes are checked, searched for the version and hashed, then let go: the launches are read
        # by ncu_report from the file (mapped, a big report is never copied into this process, which
        # would hold all of it beside the workers' memory: 136 MB of the H200 report's 800).
        with mapped_input(path) as data:
            container = check_container(path, data, _releasing(data))
            size, (version, digest) = len(data), version_and_digest(data)
        lines: List[str] = []
        try:
            if server is not None and container.launches:
                launches, ranges = _read_by_workers(path, container, lines, server)
            else:
                launches, ranges = _read_here(path, container, lines)
        finally:  # even when reading failed: what was written there besides the library's errors is passed on
            errors = library_errors(lines)
    if ranges == 0 and not container.launches and not errors:
        raise InputError(path, "Nsight Compute could not read any range from this report",
                         "open it in the Nsight Compute GUI to check it, or re-run `ncu -o`")
    notes = judge_damage(path, container, launches, errors, salvage) + launches.dropped_note()
    if not launches.rows:
        raise InputError(path, "the report holds no profiled kernel launches",
                         "check the ncu filters (-k, --launch-count) used to capture it")
    return _profile(path, version, digest, launches, notes)


# Whether this process has loaded a report already.  ncu_report carries state from one report to the
# next: having read the A10 sample, it gives the GTX 1650 sample's breakdown:gpu__compute_memory_...
# metric the unit "byte" for "%" (ncu-report 2026.3.1).  So one report per process is read here; the
# others are read by worker processes, each fresh.
_READ_HERE = False


def _read_here(path: Path, container: Container, lines: List[str]) -> Tuple[Launches, int]:
    """(Launches, ranges the library read) of the whole report, read in this process."""
    global _READ_HERE
    ncu_report = import_ncu_report()
    _READ_HERE = True
    with library_stderr(lines):
        ctx = ncu_report.load_report(str(path))
        if ctx is None:
            return Launches(), 0
        return read_launches(ctx, ncu_report, container.name_ids), ctx.num_ranges()


def _server_if_big(path: Path):
    """ncu_workers.fork_server(path) where the report is read by workers (big, or a second report in
    this process), else a context of None."""
    try:
        big = path.stat().st_size >= ncu_workers.IN_PROCESS_BELOW or _READ_HERE
    except OSError:  # mapped_input names the file and the problem
        big = False
    if not big or not ncu_workers.can_start():
        return contextlib.nullcontext()
    if importlib.util.find_spec("ncu_report") is None:
        import_ncu_report()  # its MissingDependency, with how to install it
    return ncu_workers.fork_server(path)


def _read_by_workers(path: Path, container: Container, lines: List[str],
                     server: ncu_workers.ForkServer) -> Tuple[Launches, int]:
    try:
        return ncu_workers.read_in_workers(path, container.name_ids, container.launches, lines, server)
    except ncu_workers.WorkerFailed as e:
        raise InputError(path, str(e), "open the report in Nsight Compute to check it, or re-capture it; "
                         "if it opens there, report this with the ncu_report version") from None


def _profile(path: Path, version: str, digest: str, launches: Launches, notes: List[str]) -> Profile:
    device_metrics: Dict[int, dict] = {}
    device_peaks: Dict[int, Dict[str, float]] = {}
    for row, raw, launch_peaks in zip(launches.rows, launches.raws, launches.peaks):
        device = 0 if math.isnan(row["device"]) else int(row["device"])
        if device not in device_metrics:  # the device's attributes, from its first launch
            device_metrics[device] = {k: v[0] for k, v in raw.items()}
        peaks = device_peaks.setdefault(device, {})
        for key, value in launch_peaks.items():
            peaks[key] = max(peaks.get(key, 0.0), value)
    devices = [ncu_metrics.device_from_metrics(d, m, device_peaks.get(d)) for d, m in sorted(device_metrics.items())]
    provenance = Provenance(tool="ncu", tool_version=version, source_path=str(path.resolve()),
                            source_sha256=digest, source_format="ncu-rep")
    summaries = {HOTSPOTS: hotspots_frame(launches.hotspots)} if launches.hotspots else {}
    if launches.sections:
        import pandas as pd
        summaries[SECTIONS_TABLE] = pd.DataFrame(launches.sections)
    return Profile(provenance, devices, normalise_kernels(launches.rows), launches.raws, launches.rules, notes=notes,
                   summaries=summaries)


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


READ_OPTIONS = ("salvage",)  # the read options of tb_hwprof.readers.detect.read this reader takes


def read(path, fmt: str = "ncu-rep", salvage: bool = False) -> Profile:
    return read_ncu_rep(path, salvage)
