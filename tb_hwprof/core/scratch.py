"""Folders that carry their owner, so that a later process can tell a dead one's and remove it.

A process killed (SIGKILL, the out-of-memory killer) removes nothing it made: a local copy of a
whole run for an export to object storage, the answers of Nsight Compute's workers (tens of MB
each).  Such folders are named '<kind>@<pid>@<host>@...' (the logdir's staging entries are named
so too, logdir/writer.py), and whoever makes one of a kind first removes those of this host whose
process is gone.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Iterator
from urllib.parse import quote, unquote


def owner_tag() -> str:
    """'<pid>@<host>' of this process, as staging folders and old copies carry it."""
    return f"{os.getpid()}@{quote(socket.gethostname(), safe='')}"


def owner_gone(entry_name: str) -> bool:
    """Whether the export that named an area entry '<key>@<pid>@<host>[@...]' is dead."""
    parts = entry_name.split("@")
    return len(parts) >= 3 and process_gone(parts[1], unquote(parts[2]))


def process_gone(pid: str, host: str) -> bool:
    """Whether process `pid` of `host` is dead: only known on its own host (a logdir on NFS is shared
    by hosts whose pids we cannot see)."""
    if not pid.isdigit() or host != socket.gethostname() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def dead_folders(kind: str) -> list:
    """This host's `kind` scratch folders in the temporary folder whose owner is gone."""
    return [p for p in Path(tempfile.gettempdir()).glob(f"tb-hwprof-{kind}@*@*@*") if owner_gone(p.name)]


def new_scratch_folder(kind: str) -> Path:
    """A temporary folder of this process (the caller removes it); dead owners' ones removed first."""
    for folder in dead_folders(kind):
        shutil.rmtree(folder, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"tb-hwprof-{kind}@{owner_tag()}@"))


@contextlib.contextmanager
def scratch_folder(kind: str) -> Iterator[Path]:
    """new_scratch_folder(kind) for the block, removed after it."""
    folder = new_scratch_folder(kind)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
