"""Owns the plugin name and the versioned on-disk format of an exported run.

Imports nothing heavy: the TensorBoard plugin's entry point imports this module.
"""
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


def details_file(launch: int) -> str:
    """Asset path (relative to the asset folder) of the details file holding `launch`."""
    return f"{DETAILS_DIR}/{launch // DETAILS_CHUNK * DETAILS_CHUNK:09d}.json.gz"


def plugin_content() -> bytes:
    """SummaryMetadata.plugin_data.content of the manifest tag: the format version."""
    return ('{"format_version": %d}' % FORMAT_VERSION).encode()
