"""Reads an exported run back into a Profile (the plugin and `tb_hwprof.load_run` use this)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Collection, List, Optional, Tuple

import orjson

from ..core.errors import FormatVersionError, InputError
from ..core.findings import Analysis, Finding
from ..core.model import Device, Profile, Provenance
from . import columnar_json, metadata, run_checks, tables
from .run_checks import REEXPORT

if TYPE_CHECKING:
    import pandas as pd


def asset_dir(run_dir) -> Path:
    return Path(run_dir).joinpath(*metadata.ASSET_DIR)


def read_manifest(run_dir) -> dict:
    """The run's manifest, checked (run_checks.check_manifest).  A run that an interrupted
    --overwrite left renamed aside is put back first (writer.recover_interrupted), once.  run_dir
    may be a URL (only the manifest is fetched)."""
    from . import fs
    if fs.is_url(run_dir):
        with fs.fetched_run(run_dir, fs.manifest_only) as local:
            return read_manifest(local)
    try:
        return _read_manifest(run_dir)
    except FileNotFoundError:
        _repair(Path(run_dir))
    try:
        return _read_manifest(run_dir)
    except FileNotFoundError:
        raise InputError(run_dir, "not a tb-hwprof run (no plugins/tb_hwprof/profile.json)",
                         "export one with `tb-hwprof export REPORT --logdir DIR --run NAME`") from None


def _repair(run_dir: Path) -> None:
    """writer.recover_interrupted (a no-op while an export holds the run), its failure one line."""
    from .writer import recover_interrupted
    try:
        recover_interrupted(run_dir)
    except OSError as e:
        raise InputError(run_dir, f"cannot put back what an interrupted export left ({e.strerror or e})",
                         "check the logdir's permissions and free space, then read the run again") from None


# A manifest holds facts, figures and advice (kilobytes; ~1 MB for the largest runs): a bigger file is
# not one, and is not read whole.
MANIFEST_MAX_BYTES = 64 << 20


def _read_manifest(run_dir) -> dict:
    """FileNotFoundError when the manifest is not there (the caller may repair the run)."""
    path = asset_dir(run_dir) / metadata.MANIFEST
    try:
        if path.stat().st_size > MANIFEST_MAX_BYTES:
            raise ValueError(f"{path.stat().st_size:,} bytes, more than any manifest ({MANIFEST_MAX_BYTES:,})")
        manifest = orjson.loads(path.read_bytes())  # depth-bounded: deep nesting is an error, not a RecursionError
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as e:
        raise InputError(path, f"unreadable manifest ({e})", REEXPORT) from None
    if not isinstance(manifest, dict):
        raise run_checks.damaged(path, f"manifest is a JSON {type(manifest).__name__}, not an object")
    version = manifest.get("format_version")
    if not run_checks.is_count(version) or version > metadata.FORMAT_VERSION or version < 1:
        raise FormatVersionError(
            f"{path}: format version {version!r}, this tb-hwprof reads 1..{metadata.FORMAT_VERSION} "
            f"-- upgrade tb-hwprof or re-export the run")
    return run_checks.check_manifest(path, manifest)


def read_kernels(run_dir, manifest: Optional[dict] = None):
    manifest = read_manifest(run_dir) if manifest is None else manifest
    path = asset_dir(run_dir) / metadata.KERNELS
    try:
        doc = columnar_json.read_kernels_doc(tables.read_gz_bytes(path, metadata.declared_size(manifest, metadata.KERNELS)))
        run_checks.check_columnar(doc, manifest["kernel_count"])
        kernels = tables.kernels_from_json(doc)
        run_checks.check_cells(kernels)
        return kernels
    except metadata.DAMAGED_FILE_ERRORS as e:
        raise InputError(path, f"unreadable kernels table ({e})", REEXPORT) from None


def has_details(manifest: dict) -> bool:
    """Whether the run has details files: since format 2 a run whose report has no raw metrics and
    no rules (tracers) has none, and its manifest says files.details = null."""
    return (manifest.get("files") or {}).get("details", metadata.DETAILS_DIR) is not None


def read_details(run_dir, launch: int, manifest: Optional[dict] = None) -> Tuple[dict, list]:
    """({metric: [value, unit]}, rule results) of one launch: reads only that launch's details file
    (none for a run without details).  manifest: the run's, when the caller has it already."""
    manifest = read_manifest(run_dir) if manifest is None else manifest
    if not has_details(manifest):
        return {}, []
    if not 0 <= launch < manifest["kernel_count"]:
        raise IndexError(f"launch {launch} of a run of {manifest['kernel_count']} launches")
    first = launch // metadata.DETAILS_CHUNK * metadata.DETAILS_CHUNK
    doc = _read_details_file(run_dir, first, manifest)
    entry = doc["launches"][launch - first]
    return tables.expand_launch(doc, entry), entry["rules"]


def read_all_details(run_dir, count: int, manifest: Optional[dict] = None) -> Tuple[List[dict], List[list]]:
    """Every launch's raw metrics and rule results, in launch order (empty ones for a run without details)."""
    manifest = read_manifest(run_dir) if manifest is None else manifest
    if not has_details(manifest):
        return [{} for _ in range(count)], [[] for _ in range(count)]
    raw, rules = [], []
    for first in range(0, count, metadata.DETAILS_CHUNK):
        doc = _read_details_file(run_dir, first, manifest, count)
        raw += [tables.expand_launch(doc, e) for e in doc["launches"]]
        rules += [e["rules"] for e in doc["launches"]]
    return raw, rules


def _read_details_file(run_dir, first: int, manifest: dict, count: Optional[int] = None) -> dict:
    """The details file of launches first.. (checked: run_checks.check_details); count: the run's
    launches (the manifest's kernel_count by default)."""
    count = manifest["kernel_count"] if count is None else count
    relative = metadata.details_file(first)
    path = asset_dir(run_dir) / relative
    try:
        doc = tables.read_json_gz(path, metadata.declared_size(manifest, relative))
        run_checks.check_details(doc, first, min(metadata.DETAILS_CHUNK, count - first))
        return doc
    except metadata.DAMAGED_FILE_ERRORS as e:
        raise InputError(path, f"unreadable details ({e})", REEXPORT) from None


def read_raw_metrics(run_dir, launch=None):
    """Every launch's {metric: [value, unit]} (a list), or one launch's (a dict)."""
    if launch is not None:
        return read_details(run_dir, launch)[0]
    manifest = read_manifest(run_dir)
    return read_all_details(run_dir, manifest["kernel_count"], manifest)[0]


def read_rules(run_dir, launch=None):
    """Every launch's rule results (a list of lists), or one launch's (a list)."""
    if launch is not None:
        return read_details(run_dir, launch)[1]
    manifest = read_manifest(run_dir)
    return read_all_details(run_dir, manifest["kernel_count"], manifest)[1]


def read_summaries(run_dir, manifest: dict) -> dict:
    """{name: DataFrame} of the summary tables the manifest lists (metadata.summary_names)."""
    return {name: _read_summary_file(run_dir, manifest, filename, None)
            for name, filename in metadata.summary_names(manifest.get("files"))}


def read_summary(run_dir, manifest: dict, name: str,
                 check: Optional[Callable[[pd.DataFrame], None]] = None) -> Optional[pd.DataFrame]:
    """One summary table of the run (only its file is read), None where the run has none.
    check(frame): the caller's ValueError for a table that is not what its maker writes."""
    filename = dict(metadata.summary_names(manifest.get("files"))).get(name)
    return None if filename is None else _read_summary_file(run_dir, manifest, filename, check)


def _read_summary_file(run_dir, manifest: dict, filename: str, check) -> pd.DataFrame:
    path = asset_dir(run_dir) / Path(filename).name  # confined to the asset folder
    try:
        doc = tables.read_json_gz(path, metadata.declared_size(manifest, path.name))
        run_checks.check_columnar(doc)
        frame = tables.frame_from_json(doc)
        run_checks.check_cells(frame)
        if check is not None:
            check(frame)
    except metadata.DAMAGED_FILE_ERRORS as e:
        raise InputError(path, f"unreadable summary table ({e})", REEXPORT) from None
    return frame


def load_run(run_dir, with_details: bool = True, analysis_tables: Collection[str] = ()) -> Profile:
    """The Profile a run was written from (<logdir>/<run>/): the reader's summary tables, not those
    named in `analysis_tables` (the analysis' own: analysis.pipeline.ANALYSIS_SUMMARIES, which
    tb_hwprof.load_run passes; load_analysis has those); with_details=False skips raw metrics and
    rules.  Damage is an InputError (or FormatVersionError) naming the file, nothing else.  run_dir
    may be a URL (s3://bucket/runs/NAME, any fsspec URL): its tables are fetched, its timeline is not."""
    from . import fs
    if fs.is_url(run_dir):
        with fs.fetched_run(run_dir, fs.tables_but_timeline if with_details else fs.tables_but_launches) as local:
            return load_run(local, with_details, analysis_tables)
    manifest = read_manifest(run_dir)
    kernels = read_kernels(run_dir, manifest)
    # A run without details (tracers) gives [] as its reader did: the Profile's "none in the report".
    with_details = with_details and has_details(manifest)
    raw, rules = read_all_details(run_dir, manifest["kernel_count"], manifest) if with_details else ([], [])
    return Profile(
        provenance=Provenance(**manifest["provenance"]),
        devices=[Device.from_dict(d) for d in manifest["devices"]],
        kernels=kernels, raw_metrics=raw, rules=rules, notes=manifest.get("notes", []),
        summaries={k: v for k, v in read_summaries(run_dir, manifest).items() if k not in analysis_tables},
    )


def load_analysis(run_dir, analysis_tables: Collection[str]) -> Analysis:
    """The Analysis a run was written with: findings, headline scalars, roofs per device and the
    summary tables named in `analysis_tables` (analysis.pipeline.ANALYSIS_SUMMARIES).  Runs written
    before findings were typed (advice as evidence / suggestion / values) load through
    Finding.from_dict."""
    from . import fs
    if fs.is_url(run_dir):
        with fs.fetched_run(run_dir, fs.tables_but_launches) as local:
            return load_analysis(local, analysis_tables)
    manifest = read_manifest(run_dir)
    written = read_summaries(run_dir, manifest)
    return Analysis(findings=[Finding.from_dict(f) for f in manifest.get("advice") or []],
                    scalars=dict(manifest.get("summary") or {}),
                    roofline={_device_id(k): v for k, v in (manifest.get("roofline") or {}).items()},
                    summaries={k: v for k, v in written.items() if k in analysis_tables})


def _device_id(key: str):
    """A device id as the model has it (an int); the manifest's keys are its JSON text."""
    try:
        return int(key)
    except ValueError:
        return key
