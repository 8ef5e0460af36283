"""The frontend's files: found in the installed package, or in <repo>/frontend from a checkout."""
from __future__ import annotations

import functools
import importlib.util
import os
import re
from pathlib import Path
from typing import Optional, Tuple

CONTENT_TYPES = {
    ".js": "text/javascript",  # ES modules: browsers refuse them under other types
    ".mjs": "text/javascript",
    ".css": "text/css",
    ".html": "text/html",
    ".svg": "image/svg+xml",
    ".json": "application/json",
    ".map": "application/json",
}
# Plain relative names only: no '..', no dot files, no backslashes, no odd characters.
_SAFE = re.compile(r"^(?:[A-Za-z0-9_][A-Za-z0-9_.-]*/)*[A-Za-z0-9_][A-Za-z0-9_.-]*$")


@functools.lru_cache(maxsize=1)
def frontend_dir() -> Optional[str]:
    """setup.py installs frontend/ as the package `tb_hwprof.frontend`; from source it is beside tb_hwprof/."""
    try:
        spec = importlib.util.find_spec("tb_hwprof.frontend")
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec else []:
        if os.path.isfile(os.path.join(location, "index.js")):
            return os.path.realpath(location)
    source = Path(__file__).resolve().parents[2] / "frontend"
    return str(source) if source.is_dir() else None


def find(name: str) -> Optional[Tuple[str, str]]:
    """(path, content type) of a frontend file, or None: unknown, unsafe or outside the folder."""
    root = frontend_dir()
    ext = os.path.splitext(name)[1].lower()
    if root is None or not _SAFE.match(name) or ".." in name.split("/") or ext not in CONTENT_TYPES:
        return None
    path = os.path.realpath(os.path.join(root, *name.split("/")))
    if not path.startswith(root + os.sep) or not os.path.isfile(path):
        return None
    return path, CONTENT_TYPES[ext]
