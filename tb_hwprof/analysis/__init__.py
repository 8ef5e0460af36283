"""Analyses over the model only: they know no file format.

`analyse(profile) -> Analysis` (pipeline.py) computes everything derived from a profile: the
kernels table's bound labels and roofline columns (filled in place), each device's roofs and
ridge points, derived summary tables, headline scalars and advice (typed findings).
"""
from .bottleneck import classify_kernels
from ..core.findings import Figure, Finding
from .pipeline import ANALYSIS_SUMMARIES, STEPS, Analysis, analyse, label_kernels
from .roofline import apply_roofline

__all__ = ["analyse", "Analysis", "Finding", "Figure", "STEPS", "ANALYSIS_SUMMARIES", "label_kernels",
           "classify_kernels", "apply_roofline"]
