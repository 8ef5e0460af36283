"""Advice: findings with the numbers behind them, per domain module (knows no file format).

`advise(profile)` returns every domain module's findings, each a dict
{"id", "severity", "title", "evidence", "suggestion"} (+ "values": the numbers in the evidence):
  id          "<domain>.<rule>", stable (tests and the frontend key on it)
  severity    "high", "medium" or "low"
  evidence    one sentence with the figures that made the rule fire
  suggestion  what to try
A domain module (cpu.py, ...) exposes `advise(profile) -> list` and is listed in DOMAINS; a rule
only fires where the report holds the evidence (no finding without numbers).
"""
from __future__ import annotations

import importlib
from typing import List

DOMAINS = ("cpu", "gpu_timeline")  # modules of this package, asked in this order
SEVERITIES = ("high", "medium", "low")


def advise(profile) -> List[dict]:
    """Findings of every domain module for `profile`."""
    out: List[dict] = []
    for name in DOMAINS:
        out += importlib.import_module(f"{__name__}.{name}").advise(profile)
    return out
