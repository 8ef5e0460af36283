"""Local temporary folders of exports to a URL logdir, which a later export can tell are a dead one's.

An export to object storage (and a job's) writes its runs into a local temporary folder, then
publishes them.  Killed meanwhile (SIGKILL, the OOM killer) it leaves that folder behind: a whole
run, every time.  The folder's name carries its owner as the logdir's staging folders do
('tb-hwprof-export@<pid>@<host>@...', logdir/writer.owner_tag), and every such export first removes
those of this host whose process is gone.
"""
from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import Iterator


def dead_folders(kind: str) -> list:
    """This host's `kind` scratch folders in the temporary folder whose owner is gone."""
    from ..logdir.writer import owner_gone
    return [p for p in Path(tempfile.gettempdir()).glob(f"tb-hwprof-{kind}@*@*@*") if owner_gone(p.name)]


@contextlib.contextmanager
def scratch_folder(kind: str) -> Iterator[Path]:
    """A temporary folder of this process for the block, removed after it; dead exports' ones are
    removed first."""
    from ..logdir.writer import owner_tag
    for folder in dead_folders(kind):
        shutil.rmtree(folder, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix=f"tb-hwprof-{kind}@{owner_tag()}@") as folder:
        yield Path(folder)
