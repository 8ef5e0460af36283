"""Nsight Systems report containers (.nsys-rep, .qdrep): only nsys can open them.

With `nsys` on PATH the container is converted by `nsys export --type sqlite` into a temporary
folder (never beside the user's file), read with the SQLite reader, and the temporary folder is
deleted before this returns (the Profile, timeline included, is held in memory).  Without nsys:
one line naming the nsys version that wrote the report and the command to run where nsys is.

The version is in the container itself: newer reports (2024+) spell it in the first line
("NVIDIA Tegra Profiler Report 2026@1@1@204-261137176666v0."); in older ones the first line is
"... Report 1." and the version ("2022.4.2.1-df9881f") is a string field of the session record
near the end of the file, right after the capture's host name.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Optional

from ...core.errors import InputError
from ...core.model import Profile
from ..common import sha256_file
from .nsys_sqlite import read_nsys_sqlite

MAGIC = b"NVIDIA Tegra Profiler Report"
TAIL_BYTES = 64 << 10  # the session record sits in the last few hundred bytes of every sample
EXPORT_TIMEOUT_S = 3600  # nsys export of a multi-GB report takes minutes, not hours
_HEADER_VERSION = re.compile(rb"^NVIDIA Tegra Profiler Report (\d{4})@(\d+)@(\d+)@([0-9A-Za-z\-]+)\.")
_VERSION = re.compile(r"^\d{4}\.\d+\.\d+(?:\.\d+)?-[0-9A-Za-z]+$")
# Protobuf string field 6 (tag byte 0x32), one length byte, then the version text.
_FIELD = re.compile(rb"\x32([\x08-\x40])(\d{4}\.\d)")
_INSTALL_PATH = re.compile(rb"nsight-systems[/-](\d{4}\.\d+\.\d+)")


def report_version(path: Path) -> str:
    """The nsys version that wrote the container ('2022.4.2.1-df9881f'), '' when not found."""
    with open(path, "rb") as f:
        head = f.read(TAIL_BYTES)
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - TAIL_BYTES))
        tail = f.read()
    m = _HEADER_VERSION.match(head)
    if m:
        return ".".join(x.decode() for x in m.groups())
    for m in _FIELD.finditer(tail):
        text = tail[m.start(2):m.start(2) + m.group(1)[0]].decode("ascii", "replace")
        if _VERSION.match(text):
            return text
    m = _INSTALL_PATH.search(head) or _INSTALL_PATH.search(tail)  # the nsys install folder, as a last resort
    return m.group(1).decode() if m else ""


def _release(version: str) -> str:
    """'2022.4.2.1-df9881f' -> '2022.4.2' (what a user installs)."""
    m = re.match(r"\d{4}\.\d+\.\d+", version)
    return m.group(0) if m else version


def no_nsys_error(path: Path) -> InputError:
    version = report_version(path)
    wrote = f"written by nsys {version}" if version else "(its header names no nsys version)"
    newer = f"nsys {_release(version)} or newer" if version else "nsys"
    return InputError(path, f"Nsight Systems report {wrote}; reading it needs nsys, which is not on PATH",
                      f"on a machine with {newer} run `nsys export --type sqlite --output report.sqlite "
                      f"{path.name}`, then export the .sqlite")


def _export(nsys: str, path: Path, out: Path) -> None:
    cmd = [nsys, "export", "--type", "sqlite", "--output", str(out), str(path)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise InputError(path, f"`nsys export` failed ({e})", "run it by hand and export the .sqlite") from None
    if done.returncode != 0 or not out.is_file():
        said = (done.stderr or done.stdout or "").strip().splitlines()
        raise InputError(path, f"`nsys export --type sqlite` failed (exit {done.returncode}"
                         f"{': ' + said[-1] if said else ''})", "run it by hand and export the .sqlite")


def read_nsys_rep(path, nsys: Optional[str] = None) -> Profile:
    path = Path(path)
    nsys = nsys or shutil.which("nsys")
    if nsys is None:
        raise no_nsys_error(path)
    tmp = Path(tempfile.mkdtemp(prefix="tb-hwprof-nsys-"))  # the system temp folder, not beside the report
    try:
        out = tmp / "x.sqlite"
        _export(nsys, path, out)
        profile = read_nsys_sqlite(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    prov = profile.provenance
    prov.source_path, prov.source_sha256, prov.source_format = str(path.resolve()), sha256_file(path), "nsys-rep"
    prov.tool_version = prov.tool_version or _release(report_version(path))
    profile.notes.insert(0, f"converted from {path.name} with `nsys export --type sqlite` ({nsys})")
    return profile


# ---------------------------------------------------------------- registry hooks (readers/__init__.py)
FORMATS = ("nsys-rep",)
NSYS_REPORT_MAGIC = b"NVIDIA Tegra Profiler Report"  # .nsys-rep and .qdrep alike (2021.2-2026.1 seen)


def sniff(path: Path, head) -> Optional[str]:
    # Converted by nsys when it is on PATH, else a one-line error naming the command.
    return "nsys-rep" if head is not None and head.startswith(NSYS_REPORT_MAGIC) else None


def refuse(path: Path, head: bytes) -> None:
    if path.suffix in (".nsys-rep", ".qdrep"):
        raise InputError(path, "not an Nsight Systems report (no report header)",
                         "pass the file `nsys profile` wrote, or its `nsys export --type sqlite` output")


def read(path, fmt: str = "nsys-rep") -> Profile:
    return read_nsys_rep(path)
