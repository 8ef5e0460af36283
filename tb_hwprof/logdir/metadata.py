"""Owns the plugin name and the versioned on-disk format of an exported run.

Imports nothing heavy: the TensorBoard plugin's entry point imports this module.
"""
import zlib  # built into CPython: light enough for the entry point

PLUGIN_NAME = "tb_hwprof"
# Bump on any incompatible change to the files below; readers refuse newer versions and read
# every older one.  2: kernels.json.gz holds constant and dictionary columns; no details files
# for runs without raw metrics or rules (files.details = null).
FORMAT_VERSION = 2

# Asset files, under <run>/plugins/tb_hwprof/ (TensorBoard's plugin-asset convention).
ASSET_DIR = ("plugins", PLUGIN_NAME)
MANIFEST = "profile.json"  # provenance, devices, roofs, summary, notes, file index
KERNELS = "kernels.json.gz"  # columnar kernels table
# Per-launch details (every raw metric, the tool's rule results) in files of DETAILS_CHUNK launches,
# so the plugin's kernel-detail view reads one small file, never the whole run's counters.
DETAILS_DIR = "details"
DETAILS_CHUNK = 1000
# Traces (Nsight Systems): the timeline as Chrome trace-event JSON (Perfetto, chrome://tracing) and
# the same slices as columns for the plugin's Timeline view.
TIMELINE = "timeline.json.gz"
TIMELINE_INDEX = "timeline_index.npz"

# Event-file tags.
MANIFEST_TAG = "tb_hwprof/profile"  # plugin_name tb_hwprof, BLOB_SEQUENCE: the manifest JSON
SCALAR_PREFIX = "tb_hwprof/"  # scalars, plugin_name "scalars", shown by the Scalars / Time Series tabs
EVENTS_SUFFIX = ".tb-hwprof"
SERIES_EVENTS_SUFFIX = ".tb-hwprof-series"  # a series' own event file, in its group folder
# Beside runs, <folder>/.tb-hwprof/ holds exports at work (locks/, staging/, old copies of an
# --overwrite): never a "tfevents" file, so TensorBoard never lists it.  A run's event file waits
# in its asset folder under the pending prefix until the run is in place (logdir/writer.py).
WORK_AREA = ".tb-hwprof"
PENDING_EVENTS_PREFIX = "events.out.tfpending."


def declared_size(manifest: dict, relative: str):
    """Uncompressed bytes the manifest declares for asset file `relative` ("inflated_bytes", written
    at export); None for runs exported before sizes were declared."""
    sizes = (manifest or {}).get("inflated_bytes")
    value = sizes.get(relative) if isinstance(sizes, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def details_file(launch: int) -> str:
    """Asset path (relative to the asset folder) of the details file holding `launch`."""
    return f"{DETAILS_DIR}/{launch // DETAILS_CHUNK * DETAILS_CHUNK:09d}.json.gz"


def plugin_content() -> bytes:
    """SummaryMetadata.plugin_data.content of the manifest tag: the format version."""
    return ('{"format_version": %d}' % FORMAT_VERSION).encode()


# ---------------------------------------------------------------- naming rules, written once
# Summary tables: Profile.summaries["<name>"] is the asset "summary_<name>.json.gz", listed in the
# manifest's "files" under "summary_<name>".  Names are identifiers, so no path can be spelled.
SUMMARY_PREFIX = "summary_"
SUMMARY_NAME_PATTERN = r"[a-z0-9_]{1,100}"
# What reading a damaged asset file raises (gzip, zlib, JSON, a wrong layout): every reader of
# the logdir turns these into one error naming the file.
# zlib.error (a damaged deflate stream inside a whole gzip) is none of the others.
DAMAGED_FILE_ERRORS = (OSError, EOFError, zlib.error, ValueError, KeyError, TypeError, IndexError, OverflowError)


def is_summary_name(name) -> bool:
    import re  # here: this module is imported by TensorBoard on start and must stay light
    return isinstance(name, str) and re.fullmatch(SUMMARY_NAME_PATTERN, name) is not None


def summary_key(name: str) -> str:
    """The manifest "files" key of summary table `name`."""
    return SUMMARY_PREFIX + name


def summary_file(name: str) -> str:
    """Asset file of summary table `name` (ValueError for a name that is not an identifier)."""
    if not is_summary_name(name):
        raise ValueError(f"bad summary table name {name!r}: use lowercase letters, digits and '_'")
    return f"{SUMMARY_PREFIX}{name}.json.gz"


def summary_names(files: dict):
    """(name, asset file) of each summary table a manifest's "files" lists, sorted by name; keys
    that are not summary tables, or whose name breaks the rule, are left out."""
    for key, filename in sorted((files or {}).items()):
        name = key[len(SUMMARY_PREFIX):] if isinstance(key, str) and key.startswith(SUMMARY_PREFIX) else None
        if name is not None and is_summary_name(name) and isinstance(filename, str):
            yield name, filename


# Summary tables that index a run for a view rather than show it: the Summaries view lists the others.
# compare_kernels (analysis/compare.COMPARE_TABLE): the kernels per instantiation that compare reads;
# plan (analysis/plan.PLAN_TABLE): the Plan view's rows, shown there whole.
UNLISTED_SUMMARIES = ("compare_kernels", "plan")


def listed_summary_names(files: dict):
    """summary_names of the tables the Summaries view lists (UNLISTED_SUMMARIES left out)."""
    return ((name, filename) for name, filename in summary_names(files) if name not in UNLISTED_SUMMARIES)


def run_name_problem(run) -> "str | None":
    """Why `run` cannot name a run folder inside a logdir (None when it can): runs are relative
    names of non-empty parts, none of them '.', '..' or hidden (leading '.': staging folders),
    no NUL, no drive letter, no absolute path, also once more percent-decoded (an HTTP client may
    send %2e%2e%2f encoded twice)."""
    from urllib.parse import unquote
    if not isinstance(run, str) or not run:
        return "empty run name"
    for form in (run, unquote(run)):
        text = form.replace("\\", "/")
        parts = text.split("/")
        if ("\x00" in form or text.startswith("/") or (len(text) > 1 and text[1] == ":")
                or any(p in ("", ".", "..") or p.startswith(".") for p in parts)):
            return f"bad run name {run!r}: use a relative name such as 'baseline' or 'series/v2'"
    return None
