"""Analyses over the model only: they know no file format.

`analyse(profile)` fills the bound label, reason, occupancy note and roofline
columns of a profile's kernels table in place and returns the profile.
"""
from .bottleneck import classify_kernels
from .roofline import apply_roofline


def analyse(profile):
    from ..model import normalise_kernels

    apply_roofline(profile)
    classify_kernels(profile.kernels)
    profile.kernels = normalise_kernels(profile.kernels, copy=False)  # one dtype per column, whoever filled it
    return profile


__all__ = ["analyse", "classify_kernels", "apply_roofline"]
