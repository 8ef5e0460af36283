"""Shared helpers of the CSV text readers (ncu --csv, nsys stats, VTune, rocprof-compute), so a damaged
CSV is refused in one line naming the file, the line and the fix, never read as data.

    decode(path, data, fix)             bytes -> text, refusing bytes that are not UTF-8
    check_characters(path, text, ...)   refuse NUL / control characters / undecodable bytes in a table
    lines(text)                         the lines of a CSV text, as the csv module splits them
    records(path, lines, fix, ...)      csv.reader over lines: (line number, cells); csv.Error -> InputError
    require_unique(path, header, fix)   refuse a header naming one column twice
    require_columns(path, header, names, fix)
    require_width(path, line, record, width, fix)
    check_table(path, text, fix)        a plain table: unique header, every row as wide as it
    shown(cell)                         a cell quoted for a message, cut short
    one_line(text)                      any message (pandas' "C error: ...\\n") as one line

Importing this module raises the csv module's per-cell limit (128 kB by default) for the whole
process: a 200 kB kernel name is valid input, and a cell can never be larger than the file holding it.
"""
from __future__ import annotations

import csv
import io
import re
from collections import Counter
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

from ...core.errors import InputError

# The largest limit a C long takes on every platform; only ever raised here, never lowered.
FIELD_LIMIT = 2 ** 31 - 1
csv.field_size_limit(max(csv.field_size_limit(), FIELD_LIMIT))

# What no profiler writes into a CSV table: NUL and other C0 controls (tab, CR, LF aside), and
# U+FFFD, which decoding with errors="replace" puts where bytes were not UTF-8.
_DAMAGE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]")


def one_line(text) -> str:
    """`text` with every run of whitespace (newlines included) as one space."""
    return " ".join(str(text).split())


def shown(cell: str, limit: int = 40) -> str:
    """A cell quoted for a message, cut to `limit` characters (a damaged cell may be megabytes)."""
    return repr(cell) if len(cell) <= limit else repr(cell[:limit]) + f"... ({len(cell):,} characters)"


def lines(text: str) -> List[str]:
    """The lines of `text`, endings kept, split only at \\n, \\r\\n and \\r as the csv module expects:
    str.splitlines also splits at U+2028 and other separators a cell may hold, and lines without
    endings lose a quoted cell's own line breaks."""
    return list(io.StringIO(text, newline=""))


def line_of(text: str, position: int) -> int:
    """1-based line number of a character position in `text`."""
    return text.count("\n", 0, position) + 1


def decode(path, data: bytes, fix: str) -> str:
    """UTF-8 text of a CSV (a BOM dropped); bytes that are not UTF-8 are damage, not text."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InputError(path, f"line {line}: bytes that are not UTF-8 text (byte {e.start:,}): the file is "
                         "damaged or not a CSV export", fix) from None


def check_characters(path, text: str, fix: str, start: int = 0) -> None:
    """Refuse control characters or undecodable bytes at or after character `start` (a table's first line)."""
    found = _DAMAGE.search(text, start)
    if found:
        raise InputError(path, f"line {line_of(text, found.start())}: binary or undecodable character "
                         f"{found.group()!r} inside the table: the file is damaged", fix)


def records(path, lines: Iterable[str], fix: str, first_line: int = 1,
            **fmtparams) -> Iterator[Tuple[int, List[str]]]:
    """(line number, cells) of each record of `lines` (one string per line, as `lines(text)` gives them;
    pass "" for a line to skip so numbers stay right).  Quoting is strict: a stray quote or a quoted cell
    cut off by the end of the file is damage, refused with its line number."""
    reader = csv.reader(lines, strict=True, **fmtparams)
    before = first_line - 1
    try:
        for record in reader:
            yield before + reader.line_num, record
    except csv.Error as e:
        raise InputError(path, f"line {before + reader.line_num}: unreadable CSV ({one_line(e)})", fix) from None


def duplicates(names: Sequence[str]) -> List[str]:
    """Names that appear more than once, in header order."""
    counts = Counter(names)
    return [n for n in dict.fromkeys(names) if counts[n] > 1]


def require_unique(path, header: Sequence[str], fix: str, line: int = 1) -> None:
    twice = duplicates([name for name in header if name != ""])
    if twice:
        raise InputError(path, f"line {line}: the header names column(s) {', '.join(map(shown, twice[:5]))} more "
                         "than once: the header is damaged", fix)


def require_columns(path, header: Sequence[str], names: Sequence[str], fix: str, line: int = 1) -> None:
    missing = [n for n in names if n not in header]
    if missing:
        raise InputError(path, f"line {line}: the header lacks column(s) {', '.join(map(shown, missing))} "
                         f"(it has {len(header)} cell(s): {_sample(header)})", fix)


def require_width(path, line: int, record: Sequence[str], width: int, fix: str,
                  least: Optional[int] = None) -> None:
    """Refuse a record of more cells than the header, or fewer than `least` (default: the header's)."""
    least = width if least is None else least
    if not least <= len(record) <= width:
        raise InputError(path, f"line {line}: {len(record)} cell(s) where the header has {width}: the row is "
                         "damaged (cut, merged or shifted)", fix)


def _sample(header: Sequence[str]) -> str:
    return ", ".join(shown(h, 20) for h in header[:4]) + (", ..." if len(header) > 4 else "")


def is_blank(record: Sequence[str]) -> bool:
    """A blank line: no cells, or one of only spaces (",,," is a row of empty cells, not blank)."""
    return not record or (len(record) == 1 and not record[0].strip())


def check_table(path, text: str, fix: str, **fmtparams) -> List[str]:
    """The header of a plain CSV table (a header line, then one row per line; blank lines skipped, as
    pandas skips them), refusing duplicated header names and rows wider or narrower than the header."""
    rows = ((line, r) for line, r in records(path, lines(text), fix, **fmtparams) if not is_blank(r))
    first = next(rows, None)
    if first is None:
        raise InputError(path, "empty CSV file (no header line)", fix)
    header_line, header = first
    require_unique(path, header, fix, header_line)
    for line, record in rows:
        require_width(path, line, record, len(header), fix)
    return header
