"""Small helpers every reader shares."""
import contextlib
import hashlib
import mmap
from pathlib import Path
from typing import Iterator, Optional

from ...core.errors import InputError


SQLITE_MAGIC = b"SQLite format 3\x00"


def describe_bytes(head: bytes) -> str:
    """What a file that is no report looks like, for an error message."""
    if head.startswith(b"\x1f\x8b"):
        return "gzip-compressed data"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return "random bytes"
    if "\x00" in text:
        return "random bytes"
    return "JSON text" if text.lstrip("\ufeff \t\r\n")[:1] in ("{", "[") else "text"


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path) -> str:
    """SHA-256 of a file read in 1 MB blocks (an export of hundreds of MB is never held whole)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def mapped_input(path) -> Iterator[bytes]:
    """The file's bytes as a read-only map for the block (read_input_bytes' errors; an empty file or
    one that cannot be mapped, a pipe, is read instead): a big input checked and hashed here is never
    copied into the process, whose memory holds none of it once the block ends (the pages stay in the
    page cache for whoever reads the file next).  (A file truncated by another process meanwhile
    would fault: reports are complete once written.)"""
    path = Path(path)
    with opening_errors(path), open(path, "rb") as f:
        try:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (ValueError, OSError):  # empty, or not a regular file
            mapped = None
    if mapped is None:
        yield read_input_bytes(path)
        return
    try:
        yield mapped
    finally:
        mapped.close()


# Bytes of a mapped input read between two hand-backs of its pages (release_read).
RELEASE_BYTES = 32 << 20


def release_read(data, upto: int) -> None:
    """Hand back the pages of a mapped input (mapped_input) below `upto`, once read: a file read
    through by the map would otherwise sit whole in the process until the map closes (its RSS; a
    1 GB Nsight Compute report's container check put 1 GB on top of the export).  The pages stay
    in the page cache; a page read again comes back from there.  Nothing for bytes (no map)."""
    if isinstance(data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        end = min(upto, len(data)) // mmap.PAGESIZE * mmap.PAGESIZE
        if end:
            data.madvise(mmap.MADV_DONTNEED, 0, end)


def read_input_bytes(path, limit: Optional[int] = None) -> bytes:
    """The file's bytes (the first `limit` of them), with one-line errors a user can act on."""
    path = Path(path)
    with opening_errors(path), open(path, "rb") as f:
        return f.read() if limit is None else f.read(limit)


@contextlib.contextmanager
def opening_errors(path: Path) -> Iterator[None]:
    """An OSError of opening or reading `path` in the block, as the one-line InputError a user can act on."""
    try:
        yield
    except FileNotFoundError:
        raise InputError(path, "no such file", "check the path") from None
    except IsADirectoryError:
        raise InputError(path, "is a folder, not a report file", "pass the report file itself") from None
    except OSError as e:
        raise InputError(path, f"cannot read ({e.strerror})", "check the file's permissions") from None
