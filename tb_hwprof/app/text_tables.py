"""Text tables of the terminal commands (compare, plan): aligned columns, or markdown."""
from __future__ import annotations

from typing import List

# The name column of a terminal table: C++ template names run to thousands of characters, which
# padded every row to that width.  Names are cut as the plugin's tables cut them (their start, then
# "..."); --format markdown and json keep them whole.
NAME_WIDTH = 72


def short_name(name: str, width: int = NAME_WIDTH) -> str:
    return name if len(name) <= width else name[:width - 3] + "..."


def table(headers: List[str], rows: List[List[str]], markdown: bool) -> List[str]:
    """Lines of a table: markdown, or columns aligned (the first left, the others right, the first cut)."""
    if markdown:
        cells = lambda r: "| " + " | ".join(c.replace("|", "\\|") for c in r) + " |"  # noqa: E731
        return [cells(headers), "|" + "|".join("---" for _ in headers) + "|"] + [cells(r) for r in rows]
    rows = [[short_name(str(r[0])), *r[1:]] for r in rows]
    widths = [max(len(str(r[i])) for r in [headers] + rows) for i in range(len(headers))]
    line = lambda r: "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)  # noqa: E731
                               for i, (c, w) in enumerate(zip(r, widths))).rstrip()
    return [line(headers)] + [line(r) for r in rows]


def section(title: str, markdown: bool) -> str:
    return f"\n### {title}\n" if markdown else f"\n{title}"
