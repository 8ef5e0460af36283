"""Run names -> folders (confined to the logdir) and a cache of loaded runs.

A run is loaded lazily, piece by piece (manifest, kernels table, encoded responses), and each
piece is kept until the (mtime_ns, size) of one of the run's files changes.  Failures are cached
the same way, so a corrupt run is not re-parsed on every request and /runs can report it.
"""
from __future__ import annotations

import collections
import os
import posixpath
import threading
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

from ..core.errors import HwprofError, InputError
from ..logdir import metadata, reader, run_checks
from . import encode

# TensorBoard's name for a run written at the top of the logdir (`--logdir` pointed at one run):
# the one name that is not a run folder's relative name.
LOGDIR_RUN = "."
# A re-export swaps the whole run folder in, so these change whenever any file of the run does.
RUN_FILES = (metadata.MANIFEST, metadata.KERNELS, metadata.DETAILS_DIR)
# Remote objects read by ranges, not fetched whole: a view reads part of them.
RANGED = (metadata.TIMELINE_INDEX,)
MAX_LOADED = 8  # runs whose tables stay in memory (a 100k-launch run holds ~100 MB)
# Per run, the cache keys that grow with what a client asks for, and how many of each are kept (the
# oldest go first): a launch's details (~200 KB for a full-set launch's 2,000+ metrics).  Summaries
# are one per table the manifest lists; /timeline is cached for the default budget only.
BOUNDED_KEYS = {"details": 256}
_MISSING = object()


class HttpError(Exception):
    """An answer to the client: status code and a one-line message."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = " ".join(str(message).split())  # one line, whatever the cause said


def run_param(run: Optional[str]) -> str:
    """A request's run parameter; 400 for names that can never be a run (the logdir's rule,
    metadata.run_name_problem: one rule for the writer and the plugin)."""
    if not run:
        raise HttpError(400, "missing run parameter")
    problem = None if run == LOGDIR_RUN else metadata.run_name_problem(run)
    if problem:
        raise HttpError(400, problem)
    return run


def check_summary_name(name: Optional[str]) -> str:
    """400 unless `name` is a summary table name (the writer's rule, metadata.is_summary_name)."""
    if not metadata.is_summary_name(name):
        raise HttpError(400, f"bad summary table name {name!r}: lowercase letters, digits and '_' (see /runs)")
    return name


def signature(asset_dir: Path) -> Tuple:
    """(name, mtime_ns, size) of each file of a run; None for a missing one."""
    out = []
    for name in RUN_FILES:
        try:
            st = os.stat(asset_dir / name)
            out.append((name, st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((name, None, None))
    return tuple(out)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def confined(folder: Path, relative: str) -> Path:
    """folder/relative as the real path it resolves to (symlinks followed); 404 unless that is inside
    `folder`'s real path: a file of a run, symlinked elsewhere (another run's table, any file the
    TensorBoard user can read), is never served."""
    real = os.path.realpath(folder / relative)
    if real == os.path.realpath(folder) or not _inside(real, os.path.realpath(folder)):
        raise HttpError(404, f"{relative} of this run resolves outside its folder: not served")
    return Path(real)


def run_relative(message: str, run_dir: Path, run: str) -> str:
    """`message` with the run folder's absolute path (as given and as resolved) written as the run's
    name: a 422 tells the client which file of which run, never where the server keeps it."""
    for prefix in sorted({str(run_dir), os.path.realpath(run_dir)}, key=len, reverse=True):
        message = message.replace(prefix, run)
    return message


class RunEntry:
    """One run at one signature: the manifest now, everything else built on first use."""

    def __init__(self, run: str, run_dir: Path, sig: Tuple, manifest: dict, loads: collections.Counter,
                 errors: Optional["ErrorLog"] = None, remote=None):
        self.run, self.run_dir, self.signature, self.manifest = run, run_dir, sig, manifest
        # A run of a URL logdir (logdir.fs.RemoteRun): run_dir is its local mirror, each object
        # fetched into it when first asked for.
        self.remote = remote
        self.loads = loads  # the store's read counter
        self.errors = ErrorLog() if errors is None else errors  # the store's: outlives this entry
        self.asset_dir = reader.asset_dir(run_dir)
        self._lock = threading.Lock()
        self._cache: Dict[object, object] = {}
        self._key_locks: Dict[object, threading.Lock] = {}
        self._bounded: Dict[str, "collections.deque"] = {}  # BOUNDED_KEYS' keys, oldest first
        self.error: Optional[str] = None  # first load failure, for /runs

    def asset(self, relative: str) -> Path:
        """The real path of the run's asset file `relative` (metadata's names); 404 when it resolves
        outside the run's asset folder.  A remote run's object is fetched first (once), but for
        the timeline index, read by ranges where it lies (logdir.fs.RemoteFile)."""
        path = confined(self.asset_dir, relative)
        if self.remote is not None:
            inside = path.relative_to(os.path.realpath(self.asset_dir)).as_posix()
            if inside in RANGED:
                return self.remote.ranged(inside)
            self.remote.fetch(inside, self.asset_dir)
        return path

    def has_asset(self, name: str) -> bool:
        """Whether the asset file `name` (a file name the manifest lists) is there."""
        if self.remote is not None:
            return self.asset(name).is_file()
        return (self.asset_dir / name).is_file()

    def memo(self, key, build: Callable[[], object]):
        """build() once per key; a failure is cached too (as a 422) until the files change.

        One lock per key: a build may use other keys (views need the table) and compare
        builds read a second run, so a single lock per run could deadlock.
        """
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            value = self._cache.get(key, _MISSING)  # one lookup: another key's insert may evict this one
            if value is _MISSING:
                value = self._cache[key] = self._build(build)
                self._bound(key)
        if isinstance(value, HttpError):  # a fresh one each time: re-raising the cached object would grow
            raise HttpError(value.code, value.message)  # its traceback by this request's frames, forever
        return value

    def _bound(self, key) -> None:
        """Forget the oldest entries of a key kind BOUNDED_KEYS bounds, beyond its bound."""
        kind = key[0] if isinstance(key, tuple) else None
        if kind not in BOUNDED_KEYS:
            return
        with self._lock:
            order = self._bounded.setdefault(kind, collections.deque())
            order.append(key)
            while len(order) > BOUNDED_KEYS[kind]:
                old = order.popleft()
                self._cache.pop(old, None)
                self._key_locks.pop(old, None)

    def _build(self, build: Callable[[], object]):
        try:
            return build()
        except HttpError as e:
            failure = e
        except HwprofError as e:  # the readers' one-line "file: problem -- fix"
            failure = HttpError(422, run_relative(str(e), self.run_dir, self.run))
        if failure.code == 422 and self.error is None:
            self.error = failure.message
            self.errors.record(self.run, self.signature, failure.message)
        return failure

    def kernels_response(self) -> bytes:
        return self.memo("kernels_response", self._kernels_response)

    def _kernels_response(self) -> bytes:
        return self._read_kernels(lambda raw, doc: encode.gzip_bytes(encode.splice_run(_format2_shape(raw, doc), self.run)))

    def kernels(self):
        """The kernels table as a DataFrame (parsed on first use, not for /kernels)."""
        from ..logdir import tables
        return self.memo("kernels", lambda: self._read_kernels(lambda raw, doc: _checked(tables.kernels_from_json(doc))))

    def _read_kernels(self, make):
        self.loads["kernels"] += 1
        from ..logdir.columnar_json import read_kernels_doc
        return _read_columnar(self.asset(metadata.KERNELS), "kernels table", make, self.manifest.get("kernel_count"),
                              metadata.declared_size(self.manifest, metadata.KERNELS), loads=read_kernels_doc)

    def summary_files(self) -> Dict[str, str]:
        """{name: asset file} of the run's summary tables (metadata.summary_names of the manifest)."""
        return dict(metadata.summary_names(self.manifest.get("files")))

    def summary_names(self) -> list:
        return sorted(self.summary_files())

    def _summary_path(self, name: str) -> Path:
        files = self.summary_files()
        if name not in files:
            raise HttpError(404, f"run {self.run!r} has no summary table {name!r} "
                                 f"(it has: {', '.join(sorted(files)) or 'none'})")
        # Only the file name counts: a manifest cannot point outside the asset folder.
        return self.asset(Path(files[name]).name)

    def summary_response(self, name: str) -> bytes:
        """gzip of {"run", "name", ...the table's columnar JSON}, as summary_<name>.json.gz holds it.
        A name the run has no table of is a 404 at once, never a cache entry (a client asking for
        arbitrary names would otherwise grow the cache without bound)."""
        self._summary_path(name)
        return self.memo(("summary_response", name), lambda: self._read_summary(name, lambda raw, doc: encode.gzip_bytes(
            encode.splice_run(encode.splice_field(raw, "name", name), self.run))))

    def summary(self, name: str):
        """One summary table as a DataFrame (units in .attrs); unknown names are not cached either."""
        from ..logdir import tables
        self._summary_path(name)
        return self.memo(("summary", name), lambda: self._read_summary(name, lambda raw, doc: _checked(tables.frame_from_json(doc))))

    def _read_summary(self, name: str, make):
        path = self._summary_path(name)
        self.loads["summary"] += 1
        return _read_columnar(path, "summary table", make, declared=metadata.declared_size(self.manifest, path.name))

    def raw_metrics(self, launch: int) -> dict:
        return self.details(launch)[0]

    def rules(self, launch: int) -> list:
        return self.details(launch)[1]

    def details(self, launch: int):
        """(raw metrics, rules) of one launch: one details file of DETAILS_CHUNK launches is read
        (none for a run without details: empty ones)."""
        def read():
            if reader.has_details(self.manifest):
                self.asset(metadata.details_file(launch))  # the file the reader opens: 404 outside the run
            return read_asset(self.asset_dir / metadata.details_file(launch), "details file",
                              lambda: reader.read_details(self.run_dir, launch, self.manifest))
        return self.memo(("details", launch), read)


def read_asset(path: Path, what: str, read: Callable[[], object]):
    """read(); what a damaged file raises (metadata.DAMAGED_FILE_ERRORS) becomes the one-line
    InputError naming `path` (a 422 once it reaches a route)."""
    try:
        return read()
    except metadata.DAMAGED_FILE_ERRORS as e:
        raise InputError(path, f"unreadable {what} ({type(e).__name__}: {_why(e)})",
                         "re-export the run with --overwrite") from None


def _read_columnar(path: Path, what: str, make, expected_rows: Optional[int] = None, declared: Optional[int] = None,
                   loads=encode.loads):
    """make(bytes, document) of a gzipped columnar table, checked for shape first; inflating it is
    bounded by the size its manifest declares (tables.read_gz_bytes).  loads: bytes -> document."""
    from ..logdir import tables

    def read():
        raw = tables.read_gz_bytes(path, declared)
        doc = loads(raw)
        encode.check_columnar(doc, expected_rows)
        return make(raw, doc)
    return read_asset(path, what, read)


def _checked(frame):
    """A table read back, its text cells checked (run_checks.check_cells: a JSON object in one is damage)."""
    run_checks.check_cells(frame)
    return frame


def _format2_shape(raw: bytes, doc: dict) -> bytes:
    """A format 1 kernels table holds "data" only: the empty "delta", "dictionary" and "constant" of
    format 2 are spliced in, so the browser sees one shape (the table itself is not re-encoded)."""
    for key in ("constant", "dictionary", "delta"):
        if key not in doc:
            raw = encode.splice_field(raw, key, {})
    return raw


def missing_files(sig: Tuple, manifest: dict) -> list:
    """The run files the manifest needs that are not there (details only where it has them)."""
    return [name for name, mtime, _ in sig
            if mtime is None and (name != metadata.DETAILS_DIR or reader.has_details(manifest))]


def _why(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    return text if len(text) < 200 else text[:200] + "..."


class ErrorLog:
    """The first load failure of each run at its files' signature, kept apart from the cache of loaded
    runs: /runs still shows a damaged run's error once other runs pushed its entry out."""

    def __init__(self):
        self._lock = threading.Lock()
        self._errors: Dict[str, Tuple[Tuple, str]] = {}

    def record(self, run: str, sig: Tuple, message: str) -> None:
        with self._lock:
            known = self._errors.get(run)
            if known is None or known[0] != sig:
                self._errors[run] = (sig, message)

    def get(self, run: str, sig: Tuple) -> Optional[str]:
        with self._lock:
            known = self._errors.get(run)
        return known[1] if known is not None and known[0] == sig else None


class RunStore:
    """Maps listed run names to folders under the logdir and caches what was read from them."""

    def __init__(self, logdir: Optional[str], max_loaded: int = MAX_LOADED):
        from ..logdir import fs
        self.remote = self.remote_error = None
        if fs.is_url(logdir):  # a URL logdir (s3://...); one the plugin cannot open answers 422, never
            try:               # failing TensorBoard's start
                self.remote = fs.RemoteDir(logdir)
            except HwprofError as e:
                self.remote_error = str(e)
        self.mirror = fs.mirror_folder() if self.remote is not None else None
        self.logdir = logdir if fs.is_url(logdir) else os.path.expanduser(logdir) if logdir else ""
        self.max_loaded = max_loaded
        self._lock = threading.Lock()
        self._manifests: Dict[str, Tuple[Tuple, object]] = {}  # run -> (signature, manifest or HttpError)
        self._loaded: "collections.OrderedDict[str, RunEntry]" = collections.OrderedDict()
        self.loads = collections.Counter()  # what was read from disk, for tests and benchmarks
        self.errors = ErrorLog()

    def run_dir(self, run: str) -> Path:
        """The run's folder; 404 unless it resolves (symlinks followed) inside the logdir."""
        if not self.logdir:
            raise HttpError(404, "tb_hwprof needs TensorBoard started with --logdir (not --logdir_spec)")
        if self.remote_error is not None:
            raise HttpError(422, self.remote_error)
        if self.remote is not None:
            return self._mirror_dir(run)
        run_dir = Path(self.logdir) if run == LOGDIR_RUN else Path(self.logdir, *posixpath.normpath(run).split("/"))
        root = os.path.realpath(self.logdir)
        for path in (run_dir, reader.asset_dir(run_dir)):
            if not _inside(os.path.realpath(path), root):
                raise HttpError(404, f"run {run!r} resolves outside the logdir")
        return run_dir

    def holds_series_events(self, group: str) -> bool:
        """Whether the folder of run name `group` holds an optimisation series' own event file
        (logdir/writer.py): listed where it lies, in the bucket for a URL logdir."""
        if self.remote is not None:
            try:
                key = self.remote.key(group)
            except HwprofError:
                return False
            return any(k.endswith(metadata.SERIES_EVENTS_SUFFIX) for k in self.remote.listing(key))
        folder = self.run_dir(group)  # 404 where it resolves outside the logdir
        return any(p.name.endswith(metadata.SERIES_EVENTS_SUFFIX) for p in folder.glob("events.out.tfevents.*"))

    def _mirror_dir(self, run: str) -> Path:
        """The local folder a remote run's objects are fetched into; 404 for a name that would leave
        the logdir's bucket and prefix (logdir.fs.RemoteDir.key)."""
        from ..logdir.writer import key_of
        try:
            self.remote.key(run)
        except HwprofError as e:
            raise HttpError(404, f"run {run!r} resolves outside the logdir ({e})") from None
        return self.mirror / ("run-" + key_of(run))  # never a generation folder's name

    def where(self, run: str, run_dir: Path) -> str:
        """The run's folder, or its URL on a remote logdir (not the local mirror), for messages."""
        return str(run_dir) if self.remote is None else self.remote.url_of(self.remote.key(run))

    def _remote_run(self, run: str):
        from ..logdir import fs
        return fs.RemoteRun(self.remote, run)

    def _signature(self, run: str, run_dir: Path) -> Tuple:
        if self.remote is None:
            return signature(reader.asset_dir(run_dir))
        return self._remote_run(run).signature()

    def _generation_dir(self, run_dir: Path, sig: Tuple) -> Path:
        """Where this version of a run's files is read: the run folder (local), or a mirror folder of
        its own per version (remote: an entry never mixes a new object into an old version's folder)."""
        if self.remote is None:
            return run_dir
        from ..logdir import fs
        return run_dir / fs.generation(sig)

    def manifest(self, run: str, run_dir: Path) -> Tuple[Tuple, dict]:
        """(signature, manifest); 422 when the manifest is missing, unreadable or too new."""
        sig = self._signature(run, run_dir)
        with self._lock:
            cached = self._manifests.get(run)
        if cached is None or cached[0] != sig:
            cached = (sig, self._read_manifest_of(run, run_dir, sig))
            with self._lock:
                self._manifests[run] = cached
        if isinstance(cached[1], HttpError):
            raise cached[1]
        return cached

    def _fetched_manifest(self, run: str, run_dir: Path, sig: Tuple) -> Path:
        """The folder to read the manifest from: a remote run's manifest is fetched first (a missing
        one answers 422 naming the URL, not the mirror)."""
        run_dir = self._generation_dir(run_dir, sig)
        if self.remote is not None:
            remote = self._remote_run(run)
            if remote.fetch(metadata.MANIFEST, reader.asset_dir(run_dir)).is_file() is False:
                raise HttpError(422, f"{self.remote.url_of(remote.assets)}/{metadata.MANIFEST}: missing -- "
                                     f"not a tb-hwprof run, or an export was interrupted: re-export the run")
        return run_dir

    def _read_manifest_of(self, run: str, run_dir: Path, sig: Tuple):
        try:
            return self._read_manifest(self._fetched_manifest(run, run_dir, sig), run)
        except HttpError as e:
            return e

    def _read_manifest(self, run_dir: Path, run: str = ""):
        self.loads["manifest"] += 1
        try:
            confined(reader.asset_dir(run_dir), metadata.MANIFEST)  # the file read_manifest opens
            return reader.read_manifest(run_dir)  # checked: logdir.run_checks
        except HwprofError as e:
            return HttpError(422, run_relative(str(e), run_dir, run) if run else str(e))

    def entry(self, run: str, run_dir: Path) -> RunEntry:
        """The cached run, reloaded when one of its files changed."""
        sig, manifest = self.manifest(run, run_dir)
        dropped = []
        with self._lock:
            entry = self._loaded.get(run)
            if entry is None or entry.signature != sig:
                dropped += [entry] if entry is not None else []
                remote = self._remote_run(run) if self.remote is not None else None
                entry = RunEntry(run, self._generation_dir(run_dir, sig), sig, manifest, self.loads, self.errors,
                                 remote)
                self._loaded[run] = entry
            self._loaded.move_to_end(run)
            while len(self._loaded) > self.max_loaded:
                dropped.append(self._loaded.popitem(last=False)[1])
            live = {e.run_dir for e in self._loaded.values()}
        self._drop_mirrors([e for e in dropped if e.run_dir not in live])
        return entry

    def _drop_mirrors(self, entries) -> None:
        """The fetched objects of remote run versions no longer cached (the mirror holds at most
        max_loaded runs' worth); a request still reading one fetches again or answers 422 once."""
        if self.remote is None:
            return
        import shutil
        for entry in entries:
            shutil.rmtree(entry.run_dir, ignore_errors=True)

    def known_error(self, run: str, sig: Tuple) -> Optional[str]:
        """A load failure already seen for this run at these files (no new reading), also after its
        entry left the cache."""
        return self.errors.get(run, sig)
