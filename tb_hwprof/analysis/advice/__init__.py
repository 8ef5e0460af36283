"""Advice: typed findings with the numbers behind them, per domain module (knows no file format).

`advise(profile, summaries)` returns every domain module's findings (tb_hwprof.core.findings.
Finding: id "<domain>.<rule>", severity, title, text with the figures and the threshold crossed,
remedy for this program and tool, figures with units).  A domain module (cpu.py, ...) exposes
`advise(profile, summaries, context) -> List[Finding]` and is listed in DOMAINS; a rule fires only
where the capture holds the evidence, above a named share of the time it concerns.
"""
from __future__ import annotations

import importlib
from typing import Dict, List, Optional

import pandas as pd

from ..context import capture_context
from ...core.findings import SEVERITIES, Finding

DOMAINS = ("cpu", "gpu_timeline", "kernels", "torch")  # modules of this package, asked in this order


def advise(profile, summaries: Optional[Dict[str, pd.DataFrame]] = None) -> List[Finding]:
    """Findings of every domain module for `profile`; summaries: the reader's and the analysis'
    tables together (default: the profile's own)."""
    summaries = profile.summaries if summaries is None else summaries
    context = capture_context(profile)
    out: List[Finding] = []
    for name in DOMAINS:
        out += importlib.import_module(f"{__name__}.{name}").advise(profile, summaries, context)
    return out


__all__ = ["advise", "DOMAINS", "SEVERITIES", "Finding"]
