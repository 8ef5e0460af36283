"""What a written run's files must hold before anything is built from them.

The readers of the logdir (reader.py, the plugin's store) check a run's manifest and tables here,
so a damaged or hand-edited run is one InputError naming the file and the fix, never a KeyError or
TypeError from deep inside the model or pandas.  Imports nothing heavy: the plugin's store uses it.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ..core.errors import InputError
from ..core.model import is_count
from . import metadata

REEXPORT = "re-export the run with --overwrite"
JSON_SCALARS = (str, int, float, bool, type(None))


def damaged(path, problem: str) -> InputError:
    return InputError(path, problem, REEXPORT)


# -- the manifest (profile.json) --------------------------------------------------------------
# Keys every run's manifest has, and the JSON type each key must hold when present.
REQUIRED_KEYS = ("provenance", "devices", "kernel_count")
KEY_TYPES = {"provenance": dict, "devices": list, "files": dict, "notes": list, "advice": (list, type(None)),
             "summary": (dict, type(None)), "roofline": (dict, type(None)), "inflated_bytes": dict,
             "timeline": (dict, type(None))}


def check_manifest(path: Path, manifest: Any) -> dict:
    """`manifest` as read from `path`, refused (InputError) unless every key the readers use holds
    what the writer writes there."""
    if not isinstance(manifest, dict):
        raise damaged(path, f"manifest is a JSON {type(manifest).__name__}, not an object")
    missing = [key for key in REQUIRED_KEYS if key not in manifest]
    if missing:
        raise damaged(path, f"manifest lacks {', '.join(missing)}")
    for key, kind in KEY_TYPES.items():
        if key in manifest and not isinstance(manifest[key], kind):
            raise damaged(path, f"manifest {key!r} is a JSON {type(manifest[key]).__name__}")
    if not is_count(manifest["kernel_count"]):
        raise damaged(path, f"manifest kernel_count {manifest['kernel_count']!r} is not a count")
    _check_provenance(path, manifest["provenance"])
    for device in manifest["devices"]:
        _check_device(path, device)
    _check_entries(path, manifest)
    return manifest


def _check_entries(path: Path, manifest: dict) -> None:
    """The lists and maps whose items the readers and views index."""
    _check_files(path, manifest.get("files") or {})
    for name, value in (manifest.get("inflated_bytes") or {}).items():
        if not is_count(value):
            raise damaged(path, f"manifest inflated_bytes[{name!r}] is {value!r}, not a size")
    if not all(isinstance(note, str) for note in manifest.get("notes") or []):
        raise damaged(path, "manifest notes are not all text")
    if not all(map(_is_finding, manifest.get("advice") or [])):
        raise damaged(path, "manifest advice is not a list of findings")
    if not all(map(_is_roofs, (manifest.get("roofline") or {}).values())):
        raise damaged(path, "manifest roofline is not a map of device -> roofs")
    if not _is_map_of(manifest.get("summary") or {}, is_number):
        raise damaged(path, "manifest summary is not a map of figures")
    _check_timeline(path, manifest.get("timeline") or {})


def _check_files(path: Path, files: dict) -> None:
    """File names (and details_chunk, a number); a summary table's key names a table and its file."""
    for name, value in files.items():
        if not isinstance(value, (str, int, type(None))) or isinstance(value, bool):
            raise damaged(path, f"manifest files[{name!r}] is a JSON {type(value).__name__}")
        if name.startswith(metadata.SUMMARY_PREFIX) and not (
                isinstance(value, str) and metadata.is_summary_name(name[len(metadata.SUMMARY_PREFIX):])):
            raise damaged(path, f"manifest files[{name!r}] = {value!r} names no summary table")


def _is_finding(finding: Any) -> bool:
    """What Finding.from_dict reads: an object whose figures (or, before format 2, values) are maps."""
    return isinstance(finding, dict) and all(isinstance(finding.get(k, {}), (dict, type(None)))
                                             for k in ("figures", "values"))


def _is_roofs(roofs: Any) -> bool:
    """One device's {"roofs": {name: value}, "ridge_points": {precision: {level: value}}, "points": n}."""
    return isinstance(roofs, dict) and _is_map_of(roofs.get("roofs", {}), is_number) \
        and _is_map_of(roofs.get("ridge_points", {}), lambda per_level: _is_map_of(per_level, is_number)) \
        and is_count(roofs.get("points", 0))


def _check_timeline(path: Path, timeline: dict) -> None:
    """The manifest's timeline entry: counts per category, the capture's span, the window."""
    kept = timeline.get("kept_events")
    if kept is not None and not is_count(kept):
        raise damaged(path, f"manifest timeline.kept_events {kept!r} is not a count")
    span = timeline.get("capture_ns")
    if not all(_is_map_of(timeline.get(k, {}), is_count) for k in ("kept", "dropped")) \
            or not isinstance(timeline.get("window"), (dict, type(None))) \
            or not (span is None or (isinstance(span, list) and len(span) == 2 and all(map(is_number, span)))):
        raise damaged(path, "manifest timeline is not counts, a capture span and a window")


def is_number(value: Any) -> bool:
    """A JSON number or null (a missing figure)."""
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _is_map_of(value: Any, test) -> bool:
    return isinstance(value, dict) and all(test(v) for v in value.values())


def _fields(cls) -> tuple:
    """(all field names, the ones without a default) of a model dataclass."""
    fields = dataclasses.fields(cls)
    required = {f.name for f in fields
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    return {f.name for f in fields}, required


def _check_record(path: Path, what: str, record: Any, cls, nested: tuple = ()) -> None:
    """A JSON object that becomes cls(**record): known keys, the required ones present, scalar values
    (but for the `nested` keys, checked by the caller)."""
    if not isinstance(record, dict):
        raise damaged(path, f"manifest {what} is a JSON {type(record).__name__}, not an object")
    names, required = _fields(cls)
    unknown, absent = sorted(set(record) - names), sorted(required - set(record))
    if unknown or absent:
        raise damaged(path, f"manifest {what} has unknown keys {unknown} or lacks {absent}")
    for key, value in record.items():
        if key not in nested and not isinstance(value, JSON_SCALARS):
            raise damaged(path, f"manifest {what}.{key} is a JSON {type(value).__name__}")


def _check_provenance(path: Path, provenance: dict) -> None:
    from ..core.model import Provenance
    _check_record(path, "provenance", provenance, Provenance)


def _check_device(path: Path, device: Any) -> None:
    from ..core.model import Device, Peak
    _check_record(path, "device", device, Device, nested=("peaks",))
    if not is_count(device["id"]):
        raise damaged(path, f"manifest device id {device['id']!r} is not a count")
    peaks = device.get("peaks", {})
    if not isinstance(peaks, dict):
        raise damaged(path, f"manifest device {device['id']} peaks is a JSON {type(peaks).__name__}")
    for name, peak in peaks.items():
        _check_record(path, f"device {device['id']} peak {name!r}", peak, Peak)


# -- columnar tables (kernels.json.gz, summary_*.json.gz) -----------------------------------------
def check_columnar(doc: Any, expected_rows: Optional[int] = None) -> None:
    """A columnar table (ValueError naming what is wrong): every listed column present with `rows`
    values (and as many as the manifest announced, which catches a table from another export).
    Format 2 kernels tables may hold a column in "delta", "dictionary" or "constant" instead of
    "data" (docs/FORMAT.md)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("columns"), list) or not doc["columns"]:
        raise ValueError("not a columnar table (no columns)")
    rows, data = doc.get("rows"), doc.get("data")
    constant, dictionary, delta = doc.get("constant", {}), doc.get("dictionary", {}), doc.get("delta", {})
    if not is_count(rows) or not all(isinstance(d, dict) for d in (data, constant, dictionary, delta)):
        raise ValueError("not a columnar table (no rows / data)")
    if not all(isinstance(column, str) for column in doc["columns"]):
        raise ValueError("column names are not all text")
    for column in doc["columns"]:
        if (column in data) + (column in delta) + (column in constant) + (column in dictionary) != 1:
            raise ValueError(f"column {column!r} is not in exactly one of data, delta, dictionary, constant")
        if column in data or column in delta:
            _check_values(column, data[column] if column in data else delta[column], rows)
        elif column in dictionary:
            _check_dictionary(column, dictionary[column], rows)
    if not isinstance(doc.get("dtypes", {}), dict) or not isinstance(doc.get("units", {}), dict):
        raise ValueError("dtypes / units are not maps")
    if expected_rows is not None and expected_rows != rows:
        raise ValueError(f"{rows} rows but profile.json says {expected_rows} launches (files from different exports?)")


def _check_values(column: str, values: Any, rows: int) -> None:
    """A list, or a 1-D array (logdir/columnar_json.py reads numbers into arrays)."""
    if not (isinstance(values, list) or isinstance(values, np.ndarray) and values.ndim == 1) or len(values) != rows:
        raise ValueError(f"column {column!r} does not hold {rows} values")


def _check_dictionary(column: str, entry: Any, rows: int) -> None:
    """Codes are integers indexing the values (the browser looks them up as they are)."""
    values, codes = (entry.get("values"), entry.get("codes")) if isinstance(entry, dict) else (None, None)
    if not isinstance(values, list):
        raise ValueError(f"dictionary column {column!r} has no values")
    _check_values(column, codes, rows)
    if isinstance(codes, np.ndarray):
        integers = codes.dtype.kind == "i"
        low, high = (int(codes.min()), int(codes.max())) if integers and codes.size else (0, -1)
    else:
        low, high = (min(codes), max(codes)) if codes else (0, -1)
        integers = all(type(code) is int for code in codes)  # 0.5 between two whole codes too
    if not integers or low < 0 or high >= len(values):
        raise ValueError(f"dictionary column {column!r} has codes outside 0..{len(values) - 1}")


# -- details files (details/NNNNNNNNN.json.gz) -----------------------------------------------------
def check_details(doc: Any, first_launch: int, launches: int) -> None:
    """A details file holding launches first_launch .. first_launch + launches - 1 (ValueError naming
    what is wrong): each launch's metric set exists and its values match the set's names."""
    if not isinstance(doc, dict) or not isinstance(doc.get("metric_sets"), list) \
            or not isinstance(doc.get("launches"), list):
        raise ValueError("not a details file (no metric_sets / launches)")
    if doc.get("first_launch") != first_launch or len(doc["launches"]) != launches:
        raise ValueError(f"holds {len(doc['launches'])} launches from {doc.get('first_launch')!r}, "
                         f"profile.json says {launches} from {first_launch}")
    widths = [_metric_set_width(s) for s in doc["metric_sets"]]
    for n, entry in enumerate(doc["launches"]):
        which = entry.get("set") if isinstance(entry, dict) else None
        if not is_count(which) or which >= len(widths) or not isinstance(entry.get("rules"), list) \
                or not isinstance(entry.get("values"), list) or len(entry["values"]) != widths[which]:
            raise ValueError(f"launch {first_launch + n} is not a metric set's values with rules")


def _metric_set_width(metric_set: Any) -> int:
    names = metric_set.get("names") if isinstance(metric_set, dict) else None
    units = metric_set.get("units") if isinstance(metric_set, dict) else None
    if not isinstance(names, list) or not isinstance(units, list) or len(names) != len(units) \
            or not all(isinstance(n, str) for n in names):
        raise ValueError("a metric set is not names with their units")
    return len(names)


# -- cells ----------------------------------------------------------------------------------------
# What pandas' infer_dtype calls a column of plain values (skipping nulls): no JSON object or list in it.
PLAIN_KINDS = {"string", "empty", "integer", "floating", "mixed-integer-float", "boolean", "decimal"}


def check_cells(frame) -> None:
    """ValueError unless every text (object) column of a table read back holds plain values: a JSON
    object or list in a cell is damage (the analyses group and sort on these columns).  infer_dtype
    scans in C (~10 ms per 1M names); only a mixed column is looked at value by value."""
    from pandas.api.types import infer_dtype
    for column in frame.columns[(frame.dtypes == object).to_numpy()]:
        values = frame[column]
        if infer_dtype(values, skipna=True) not in PLAIN_KINDS \
                and any(isinstance(v, (dict, list)) for v in values.tolist()):
            raise ValueError(f"column {column!r} holds JSON objects or lists, not values")
