"""Logdirs given as URLs (s3://, gs://, az://, hdfs://, any fsspec protocol), as TensorBoard takes them.

Local paths never come here: the writer, reader and plugin keep their local code (renames, locks).
A URL logdir is reached through fsspec with the same URL (credentials and endpoint as the
filesystem's library reads them: for S3, AWS_ENDPOINT_URL is read by both s3fs and TensorBoard's
own boto3 client).  Three narrow uses:

- export: the run is written by the local writer into a temporary folder, then published here
  (publish_run): uploaded under <logdir>/.tb-hwprof/staging/<run key>@<pid>@<host>@<time>/, then
  copied under <logdir>/<run>/ with the manifest after every table and our event file last
  (TensorBoard lists a run once a tfevents object is there), then the previous generation's
  leftovers and the staging prefix are deleted.  docs/FORMAT.md says what is and is not atomic.
- load_run: the run's tables (not its timeline) fetched into a temporary folder and read there.
- the plugin: RemoteRun fetches one object at a time, when a view first needs it, into a local
  mirror the plugin's local code reads (the store's RunEntry.asset is the only caller).
"""
from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import posixpath
import re
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

from ..core.errors import HwprofError, InputError, RunExists
from . import metadata

URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
ASSET_PREFIX = "/".join(metadata.ASSET_DIR)
STAGING = f"{metadata.WORK_AREA}/staging"
# Written into a staging prefix once every object is uploaded, before the first copy into the run:
# a dead export's staging prefix holding it is rolled forward (its copies finished), not deleted.
COPYING = "COPYING"
# A staging prefix whose export is neither on this host nor finished after this long is abandoned.
STALE_AFTER_S = 6 * 3600
# The plugin's run signatures reuse a listing this long (one LIST per run for a view's burst of
# requests): a run replaced by another process is seen up to this late (this process's own writes
# drop the cached listings at once).
LISTING_TTL_S = 1.0
# Listing fields that change when an object is rewritten, by filesystem (s3fs ETag, gcsfs md5Hash /
# generation, adlfs etag / last_modified, local mtime, memory created); without any (some HTTP and
# FTP servers) a run's signature hashes its manifest, which every export rewrites.
CHANGE_FIELDS = ("ETag", "etag", "md5Hash", "generation", "LastModified", "last_modified", "mtime", "updated",
                 "created")
# Tests only: the export kills itself (SIGKILL) after this many object writes, to leave what a
# killed export leaves at a known point.
KILL_AFTER_WRITES_ENV = "TB_HWPROF_TEST_KILL_AFTER_WRITES"


def is_url(logdir) -> bool:
    """Whether `logdir` is a URL for fsspec (file:// stays a local path)."""
    return isinstance(logdir, str) and bool(URL.match(logdir)) and not logdir.lower().startswith("file://")


def missing_library(url: str, error: ImportError) -> HwprofError:
    extra = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs"}.get(url.split("://", 1)[0].lower())
    hint = f"pip install 'tb-hwprof[{extra}]'" if extra else "install the fsspec filesystem for this protocol"
    return InputError(url, f"cannot open this logdir URL ({error})", hint)


def relative_problem(relative: str) -> Optional[str]:
    """Why `relative` cannot name something under a remote logdir (None when it can): the run-name
    rule (no '..', '.', hidden or empty parts, also once percent-decoded), and none of the characters
    that fsspec URLs give a meaning ('?' versions, '#' fragments, '\\')."""
    problem = metadata.run_name_problem(relative)
    if problem is None and any(c in relative for c in "?#\\"):
        problem = f"bad run name {relative!r}: '?', '#' and '\\' cannot be part of an object key"
    return problem


class RemoteDir:
    """A logdir (or a run) at a URL: the fsspec filesystem and the root key every path stays under."""

    def __init__(self, url: str):
        try:
            import fsspec
            self.fs, root = fsspec.core.url_to_fs(url)
        except ImportError as e:
            raise missing_library(url, e) from None
        self.root = root.rstrip("/")
        if not self.root:
            raise InputError(url, "no bucket or folder in this logdir URL", "give one, e.g. s3://bucket/runs")
        self.url = url.rstrip("/")

    def key(self, relative: str = ".") -> str:
        """The key of `relative` under the root; HwprofError unless it stays there (same bucket,
        normalised, no '..')."""
        if relative == ".":
            return self.root
        problem = relative_problem(relative)
        key = f"{self.root}/{relative}"
        if problem or posixpath.normpath(key) != key or not key.startswith(self.root + "/"):
            raise HwprofError(problem or f"bad run name {relative!r}: it leaves {self.url}")
        return key

    def url_of(self, key: str) -> str:
        return self.url + key[len(self.root):]

    def listing(self, key: str, recursive: bool = False) -> Dict[str, dict]:
        """{key: info} of the objects under `key` (fresh: fsspec's listing cache is bypassed)."""
        try:
            self.fs.invalidate_cache(key)
            if recursive:
                return self.fs.find(key, detail=True)
            return {info["name"].rstrip("/"): info for info in self.fs.ls(key, detail=True)}
        except FileNotFoundError:
            return {}


class RecentListings:
    """What was read from listings (run signatures), by (URL, filesystem), each kept LISTING_TTL_S;
    any write of this process drops them all."""

    def __init__(self):
        self._lock = threading.Lock()
        self._listings: Dict[Tuple, Tuple[float, object]] = {}

    def get(self, key: Tuple, list_now):
        now = time.monotonic()
        with self._lock:
            known = self._listings.get(key)
        if known is not None and now - known[0] < LISTING_TTL_S:
            return known[1]
        listing = list_now()
        with self._lock:
            self._listings = {k: v for k, v in self._listings.items() if now - v[0] < LISTING_TTL_S}
            self._listings[key] = (now, listing)
        return listing

    def forget(self) -> None:
        with self._lock:
            self._listings.clear()


_RECENT = RecentListings()


def change_tag(info: dict) -> Optional[str]:
    """What changes in an object's listing entry when it is rewritten (CHANGE_FIELDS); None if none."""
    for field in CHANGE_FIELDS:
        value = info.get(field)
        if value not in (None, ""):
            return f"{field}:{value}"
    return None


def our_event_keys(listing: Dict[str, dict]) -> List[str]:
    return sorted(k for k, info in listing.items() if info.get("type") != "directory"
                  and is_our_events(posixpath.basename(k)))


def is_our_events(name: str) -> bool:
    return name.startswith("events.out.tfevents.") and name.endswith(metadata.EVENTS_SUFFIX)


# ---------------------------------------------------------------- export: publish a local run
class Publisher:
    """Object writes of one export, counted (the tests' kill hook)."""

    def __init__(self, remote: RemoteDir):
        self.remote = remote
        self.writes = 0
        kill_after = os.environ.get(KILL_AFTER_WRITES_ENV, "")
        self.kill_after = int(kill_after) if kill_after.isdigit() else None

    def _wrote(self) -> None:
        _RECENT.forget()
        self.writes += 1
        if self.kill_after is not None and self.writes >= self.kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    # Single-object calls only (put_file, cp_file, rm_file): fsspec's put / copy / rm expand glob
    # characters, and a run may be named 'a*b' or '[x]'.
    def put(self, local: Path, key: str) -> None:
        with_parent(self.remote.fs, key, lambda: self.remote.fs.put_file(str(local), key))
        self._wrote()

    def mark(self, key: str) -> None:
        with_parent(self.remote.fs, key, lambda: self.remote.fs.pipe_file(key, b""))
        self._wrote()

    def copy(self, source: str, key: str) -> None:
        with_parent(self.remote.fs, key, lambda: self.remote.fs.cp_file(source, key))
        self._wrote()


def with_parent(filesystem, key: str, write) -> None:
    """write(); on a filesystem of real folders (local://, hdfs://) whose parent folder of `key` is
    missing, the folder is made and write() run again.  Object stores never miss one, and pay no
    extra request for it."""
    try:
        write()
    except FileNotFoundError:
        filesystem.makedirs(posixpath.dirname(key), exist_ok=True)
        write()


def check_free(remote: RemoteDir, run: str, overwrite: bool, beside: bool = False) -> str:
    """The run's key; RunExists when the run is there (our event file, or with `beside` our manifest)
    and overwrite is not asked."""
    run_key = remote.key(run)
    if overwrite:
        return run_key
    if beside:
        taken = remote.fs.exists(f"{run_key}/{ASSET_PREFIX}/{metadata.MANIFEST}")
    else:
        taken = bool(our_event_keys(remote.listing(run_key)))
    if taken:
        raise RunExists(f"{remote.url_of(run_key)}: run already exists -- pass --overwrite to replace it, "
                        f"or choose another --run")
    return run_key


def run_files(local_run: Path) -> List[Tuple[Path, str]]:
    """(local file, key relative to the run) of a run the local writer wrote: the tables, then the
    manifest, then our event file (the order they become visible in)."""
    assets = local_run.joinpath(*metadata.ASSET_DIR)
    tables = sorted(p for p in assets.rglob("*") if p.is_file() and p.name != metadata.MANIFEST)
    ordered = [(p, p.relative_to(local_run).as_posix()) for p in tables]
    ordered.append((assets / metadata.MANIFEST, f"{ASSET_PREFIX}/{metadata.MANIFEST}"))
    ordered += [(p, p.name) for p in sorted(local_run.iterdir()) if p.is_file() and is_our_events(p.name)]
    return ordered


def staged_name(relative: str) -> str:
    """Staged event files carry a pending name: TensorBoard lists hidden prefixes too."""
    return relative.replace("events.out.tfevents.", metadata.PENDING_EVENTS_PREFIX, 1) \
        if is_our_events(relative) else relative


_EXPORTS = itertools.count()


def owner_tag() -> str:
    """'<pid>@<host>@<time>@<n>': n tells apart two exports of one process in one second (one staging
    prefix each, never shared)."""
    from ..core.scratch import owner_tag as local_owner_tag
    return f"{local_owner_tag()}@{int(time.time())}@{next(_EXPORTS)}"


def publish_run(remote: RemoteDir, local_run: Path, run: str, overwrite: bool, beside: bool = False) -> str:
    """The locally written run `local_run` published as <logdir>/<run> (the module's steps); its URL."""
    from .writer import key_of
    clean_staging(remote)
    run_key = check_free(remote, run, overwrite, beside)
    staging = f"{remote.root}/{STAGING}/{key_of(run)}@{owner_tag()}"
    files = run_files(local_run)
    publisher = Publisher(remote)
    try:
        for local, relative in files:
            publisher.put(local, f"{staging}/{staged_name(relative)}")
        check_free(remote, run, overwrite, beside)  # another export may have published it meanwhile
        publisher.mark(f"{staging}/{COPYING}")
    except BaseException:
        delete(remote, [staging], recursive=True)
        raise
    # A failure from here on keeps the staging prefix: the next export rolls it forward (clean_staging).
    copy_into_place(publisher, staging, run_key, [relative for _, relative in files])
    delete(remote, [staging], recursive=True)
    return remote.url_of(run_key)


def copy_into_place(publisher: Publisher, staging: str, run_key: str, relatives: List[str]) -> None:
    """Staged objects copied under the run in order (tables, manifest, event file), then what the
    previous generation had and this one has not (its event file, tables it no longer has) deleted."""
    remote = publisher.remote
    previous = set(remote.listing(f"{run_key}/{ASSET_PREFIX}", recursive=True)) | set(
        our_event_keys(remote.listing(run_key)))
    for relative in relatives:
        publisher.copy(f"{staging}/{staged_name(relative)}", f"{run_key}/{relative}")
    delete(remote, sorted(previous - {f"{run_key}/{r}" for r in relatives}))


def delete(remote: RemoteDir, keys: List[str], recursive: bool = False) -> None:
    """Delete these objects (recursive: every object under these prefixes), one object at a time
    by its exact key: never a glob, so a run named 'a*b' touches no other run's objects."""
    _RECENT.forget()
    for key in keys:
        for target in (sorted(remote.listing(key, recursive=True)) if recursive else []) + [key]:
            try:
                remote.fs.rm_file(target)
            except FileNotFoundError:
                pass
            except IsADirectoryError:  # a filesystem of real folders (local://, hdfs://): the prefix's
                remove_folders(remote, target)  # folders are left once its objects are gone


def remove_folders(remote: RemoteDir, key: str) -> None:
    """The (emptied) folders under `key` and `key` itself, deepest first."""
    found = remote.fs.find(key, withdirs=True, detail=True)
    folders = [k for k, info in found.items() if info.get("type") == "directory" and k != key]
    for folder in sorted(folders, key=lambda k: -k.count("/")) + [key]:
        with contextlib.suppress(FileNotFoundError):
            remote.fs.rmdir(folder)


def staging_owner(name: str) -> Tuple[str, str, int]:
    """(pid, host, start time) from '<run key>@<pid>@<host>@<time>[@<n>]'; time 0 when unreadable."""
    parts = name.split("@")
    stamp = parts[3] if len(parts) >= 4 and parts[3].isdigit() else "0"
    return (parts[1], parts[2], int(stamp)) if len(parts) >= 3 else ("", "", 0)


def staging_stale(name: str, now: float) -> bool:
    """A staging prefix of a dead export of this host, or one older than STALE_AFTER_S (other hosts:
    their pids cannot be checked from here)."""
    from urllib.parse import unquote
    from ..core.scratch import process_gone
    pid, host, started = staging_owner(name)
    return process_gone(pid, unquote(host)) or (started and now - started > STALE_AFTER_S)


def clean_staging(remote: RemoteDir) -> List[str]:
    """Delete the staging prefixes killed or abandoned exports left, after finishing the copies of
    those that had begun copying into their run (COPYING: every object was uploaded); the keys."""
    now = time.time()
    stale = [key for key in remote.listing(f"{remote.root}/{STAGING}") if staging_stale(posixpath.basename(key), now)]
    for key in stale:
        if remote.fs.exists(f"{key}/{COPYING}"):
            roll_forward(remote, key)
    delete(remote, stale, recursive=True)
    return stale


def roll_forward(remote: RemoteDir, staging: str) -> None:
    """Finish the copies of a dead export's staging prefix into its run (named by the prefix's key;
    a hashed key names none: then it is only deleted)."""
    from .writer import name_of_key
    run = name_of_key(posixpath.basename(staging).split("@", 1)[0])
    if run is None or relative_problem(run):
        return
    staged = [k[len(staging) + 1:] for k, info in remote.listing(staging, recursive=True).items()
              if info.get("type") != "directory" and k != f"{staging}/{COPYING}"]
    relatives = [published_name(r) for r in staged]
    started = staging_owner(posixpath.basename(staging))[2]
    if published_since(remote, remote.key(run), started, own=set(relatives)):
        return  # a later export of the run finished (another host's dead export, found hours later)
    manifest = f"{ASSET_PREFIX}/{metadata.MANIFEST}"
    ordered = sorted(r for r in relatives if r != manifest and not is_our_events(r)) + [manifest] + sorted(
        r for r in relatives if is_our_events(r))
    copy_into_place(Publisher(remote), staging, remote.key(run), ordered)


def published_since(remote: RemoteDir, run_key: str, started: int, own: set) -> bool:
    """Whether an event file not among `own` (the dead export's) was written under the run after
    `started` (unix time): another export published the run since."""
    for key, info in remote.listing(run_key).items():
        name, stamp = posixpath.basename(key), modified_time(info)
        if is_our_events(name) and name not in own and stamp is not None and stamp > started:
            return True
    return False


MODIFIED_FIELDS = ("LastModified", "last_modified", "mtime", "updated", "created")


def modified_time(info: dict) -> Optional[float]:
    """When the object was written (unix time) from its listing entry, whatever the filesystem calls
    it and however it writes it (datetime: s3fs, adlfs; seconds: local, memory; ISO text: gcsfs)."""
    import datetime
    for field in MODIFIED_FIELDS:
        value = info.get(field)
        if isinstance(value, datetime.datetime):
            return value.timestamp()
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return None


def published_name(staged: str) -> str:
    """staged_name undone: a pending event file's name in the run."""
    if "/" not in staged and staged.startswith(metadata.PENDING_EVENTS_PREFIX) and staged.endswith(metadata.EVENTS_SUFFIX):
        return "events.out.tfevents." + staged[len(metadata.PENDING_EVENTS_PREFIX):]
    return staged


def publish_series_events(remote: RemoteDir, local_logdir: Path, group: str) -> None:
    """The series' event file (writer.write_series_events wrote it locally) uploaded under a
    temporary key, copied into the group, then the group's earlier series files deleted."""
    group_key = remote.key(group)
    for events in Path(local_logdir, *group.split("/")).glob("*" + metadata.SERIES_EVENTS_SUFFIX):
        # The temporary key has no "tfevents" in it: TensorBoard would list the staging prefix.
        pending = events.name.replace("events.out.tfevents.", metadata.PENDING_EVENTS_PREFIX, 1)
        key, tmp = f"{group_key}/{events.name}", f"{remote.root}/{STAGING}/{pending}@{owner_tag()}"
        remote.fs.put_file(str(events), tmp)
        _RECENT.forget()
        try:
            remote.fs.cp_file(tmp, key)
        finally:
            delete(remote, [tmp])
        earlier = [k for k in remote.listing(group_key) if k.endswith(metadata.SERIES_EVENTS_SUFFIX) and k != key]
        delete(remote, earlier)


# ---------------------------------------------------------------- reading: load_run and the plugin
class RemoteRun:
    """One run of a remote logdir, its objects fetched one at a time into a local folder."""

    def __init__(self, remote: RemoteDir, run: str):
        self.remote = remote
        self.key = remote.key(run)
        self.assets = f"{self.key}/{ASSET_PREFIX}"
        self.fetched = {"requests": 0, "bytes": 0}  # what was downloaded, for benchmarks

    def signature(self) -> Tuple:
        """(name, change tag, size) of metadata.RUN_FILES-like names (manifest, kernels, details) from
        one listing, reused for LISTING_TTL_S; tag None for a missing one (the local store's stat
        signature, over the network).  An object whose listing has no change field (CHANGE_FIELDS)
        is tagged with the manifest's content hash: one small GET, never a stale run."""
        return _RECENT.get((self.remote.url_of(self.assets), self.remote.fs), self._signature_now)

    def _signature_now(self) -> Tuple:
        listing = self.remote.listing(self.assets)
        out, manifest_hash = [], None
        for name in (metadata.MANIFEST, metadata.KERNELS, metadata.DETAILS_DIR):
            info = listing.get(f"{self.assets}/{name}")
            if info is None:
                out.append((name, None, None))
                continue
            tag = "dir" if info.get("type") == "directory" else change_tag(info)
            if tag is None:
                manifest_hash = manifest_hash or self._manifest_hash()
                tag = manifest_hash
            out.append((name, tag, info.get("size")))
        return tuple(out)

    def _manifest_hash(self) -> str:
        """sha256 of the manifest's bytes (it names the export's time and source hash)."""
        try:
            data = self.remote.fs.cat_file(f"{self.assets}/{metadata.MANIFEST}")
        except FileNotFoundError:
            return "missing"
        return "sha256:" + hashlib.sha256(data).hexdigest()

    def visible(self) -> bool:
        """Whether TensorBoard would list it: our event file is there (written last by an export)."""
        return bool(our_event_keys(self.remote.listing(self.key)))

    def ranged(self, relative: str) -> RemoteFile:
        return RemoteFile(self.remote, f"{self.assets}/{relative}")

    def fetch(self, relative: str, local_assets: Path) -> Path:
        """local_assets/relative, downloaded once (a missing object leaves it missing: the caller's
        read then fails as for a missing local file)."""
        local = local_assets / relative
        if local.exists():
            return local
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(f".{local.name}.part-{os.getpid()}-{id(local)}")
        try:
            self.remote.fs.get_file(f"{self.assets}/{relative}", str(tmp))
        except FileNotFoundError:
            tmp.unlink(missing_ok=True)
            return local
        self.fetched["requests"] += 1
        self.fetched["bytes"] += tmp.stat().st_size
        os.replace(tmp, local)
        return local

    def fetch_tables(self, local_run: Path, wanted) -> None:
        """The objects under the asset prefix whose relative name is `wanted`."""
        local_assets = local_run.joinpath(*metadata.ASSET_DIR)
        for key, info in sorted(self.remote.listing(self.assets, recursive=True).items()):
            relative = key[len(self.assets) + 1:]
            if info.get("type") != "directory" and wanted(relative):
                self.fetch(relative, local_assets)


def tables_but_timeline(relative: str) -> bool:
    """What load_run reads: every table, not the timeline's files."""
    return relative not in (metadata.TIMELINE, metadata.TIMELINE_INDEX)


def tables_but_launches(relative: str) -> bool:
    """What load_analysis and load_run(with_details=False) need less: no details files either."""
    return tables_but_timeline(relative) and not relative.startswith(metadata.DETAILS_DIR + "/")


def manifest_only(relative: str) -> bool:
    return relative == metadata.MANIFEST


class RemoteFile:
    """An object read by ranges where it lies, never downloaded whole (the timeline index: a view
    reads some of its columns).  str() is its URL, for messages."""

    BLOCK = 1 << 20  # bytes a range request reads at least (zip headers are read a few bytes at a time)

    def __init__(self, remote: RemoteDir, key: str):
        self.remote, self.key = remote, key

    def __str__(self) -> str:
        return self.remote.url_of(self.key)

    def is_file(self) -> bool:
        return self.remote.fs.isfile(self.key)

    @property
    def name(self) -> str:
        return posixpath.basename(self.key)

    def size(self) -> int:
        try:
            return int(self.remote.fs.size(self.key))
        except FileNotFoundError:
            raise OSError(f"{self} is missing") from None

    def open(self):
        return self.remote.fs.open(self.key, "rb", block_size=self.BLOCK, cache_type="readahead")

    def read_range(self, start: int, end: int) -> bytes:
        """Bytes start..end-1: one range request for exactly those (a timeline window's rows)."""
        return self.remote.fs.cat_file(self.key, start=start, end=end)

    def read_ranges(self, ranges) -> List[bytes]:
        """Bytes of each (start, end) range, one request each, sent together by filesystems that
        can (s3fs, gcsfs: concurrently); the first failure is raised."""
        if not ranges:
            return []
        out = self.remote.fs.cat_ranges([self.key] * len(ranges), [a for a, _ in ranges], [b for _, b in ranges])
        for data in out:
            if isinstance(data, BaseException):
                raise data
        return out


@contextlib.contextmanager
def fetched_run(url: str, wanted=tables_but_timeline) -> Iterator[Path]:
    """A local copy of the run at `url` (the objects whose name under the asset prefix is `wanted`),
    removed on exit; errors name the URL.  A run with no event file of ours is not one (an export
    killed before its end)."""
    remote = RemoteDir(url)
    run = RemoteRun(remote, ".")
    if not run.visible():
        raise InputError(url, "not a tb-hwprof run (no tb-hwprof event file: nothing exported here, "
                              "or an export was interrupted)",
                         "export one with `tb-hwprof export REPORT --logdir URL --run NAME`")
    local = Path(tempfile.mkdtemp(prefix="tb-hwprof-run-"))
    try:
        if wanted is manifest_only:  # one request, no listing
            run.fetch(metadata.MANIFEST, local.joinpath(*metadata.ASSET_DIR))
        else:
            run.fetch_tables(local, wanted)
        try:
            yield local
        except InputError as e:
            raise InputError(e.path.replace(str(local), remote.url), e.problem, e.fix) from None
        except HwprofError as e:  # FormatVersionError: "<path>: ..." as well
            raise type(e)(str(e).replace(str(local), remote.url)) from None
    finally:
        shutil.rmtree(local, ignore_errors=True)


def mirror_folder() -> Path:
    """A folder of this process for the plugin's fetched objects, removed when it exits."""
    import atexit
    folder = Path(tempfile.mkdtemp(prefix="tb-hwprof-mirror-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def generation(sig: Tuple) -> str:
    """A folder name for one version of a run's files."""
    return hashlib.sha256(repr(sig).encode()).hexdigest()[:16]

