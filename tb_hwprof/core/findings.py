"""What an analysis gives, as data: `Analysis` (findings, headline scalars, roofs, summary tables)
and the typed result of an advice rule, a `Finding`, with the figures that made it fire.

A finding is only worth showing when it is true and material, so every one carries its numbers
(figures, each with its unit) and the threshold it crossed; the remedy is phrased for the program
and the tool the capture shows (docs/FORMAT.md "advice").

Serialised form (the manifest's "advice" list, the plugin's views):
  {"id": "gpu.idle", "severity": "high", "title": "...", "text": "...", "remedy": "...",
   "figures": {"busy_ns": {"value": 1.2e9, "unit": "ns"}, ...}}
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional

import pandas as pd

SEVERITIES = ("high", "medium", "low")


@dataclasses.dataclass
class Figure:
    value: Any  # a number, a text, or a list of records (e.g. the longest gaps)
    unit: str = ""


@dataclasses.dataclass
class Finding:
    """One piece of advice.  id: "<domain>.<rule>", stable (tests and the frontend key on it)."""

    id: str
    severity: str  # one of SEVERITIES
    title: str
    text: str  # the evidence: one or two sentences with the figures and the threshold crossed
    remedy: str  # what to try, for this program and this tool
    figures: Dict[str, Figure] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.severity not in SEVERITIES:
            raise ValueError(f"finding {self.id}: severity {self.severity!r} is not one of {SEVERITIES}")

    def figure(self, name: str, default=None):
        f = self.figures.get(name)
        return default if f is None else f.value

    def to_dict(self) -> dict:
        return {"id": self.id, "severity": self.severity, "title": self.title, "text": self.text,
                "remedy": self.remedy,
                "figures": {k: {"value": f.value, "unit": f.unit} for k, f in self.figures.items()}}

    @classmethod
    def from_dict(cls, d: dict) -> "Finding":
        """A finding as written by to_dict (or by format-2 runs: evidence / suggestion / values)."""
        figures = d.get("figures")
        if figures is None:  # runs exported before findings were typed
            figures = {k: {"value": v, "unit": ""} for k, v in (d.get("values") or {}).items()}
        return cls(id=str(d.get("id", "")), severity=d.get("severity") if d.get("severity") in SEVERITIES else "low",
                   title=str(d.get("title", "")), text=str(d.get("text", d.get("evidence", ""))),
                   remedy=str(d.get("remedy", d.get("suggestion", ""))),
                   figures={k: Figure(f.get("value") if isinstance(f, dict) else f,
                                      f.get("unit", "") if isinstance(f, dict) else "")
                            for k, f in figures.items()})


def time_text(ns) -> str:
    """A time in a finding's text: 3 significant digits, in ms, in s from one second on."""
    ns = float(ns)
    return f"{ns / 1e9:.3g} s" if ns >= 1e9 else f"{ns / 1e6:.3g} ms"


def by_severity(findings) -> list:
    """Most severe first, in the order given within a severity."""
    order = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(findings, key=lambda f: order[f.severity])


def finding(rule_id: str, severity: str, title: str, text: str, remedy: str,
            figures: Optional[Dict[str, tuple]] = None) -> Finding:
    """Finding from figures given as {name: (value, unit)}."""
    return Finding(rule_id, severity, title, text, remedy,
                   {k: Figure(*v) if isinstance(v, tuple) else Figure(v) for k, v in (figures or {}).items()})


@dataclasses.dataclass
class Analysis:
    """Everything derived from a profile (besides the kernels table's own derived columns)."""

    findings: List[Finding] = dataclasses.field(default_factory=list)  # advice, most severe first per domain
    scalars: Dict[str, float] = dataclasses.field(default_factory=dict)  # headline figures (Scalars tab)
    roofline: Dict[int, dict] = dataclasses.field(default_factory=dict)  # device id -> {"roofs", "ridge_points"}
    summaries: Dict[str, pd.DataFrame] = dataclasses.field(default_factory=dict)  # tables the analysis made

    def tables(self, profile) -> Dict[str, pd.DataFrame]:
        """The reader's summary tables and the analysis' together (the analysis' win a shared name)."""
        return {**profile.summaries, **self.summaries}
