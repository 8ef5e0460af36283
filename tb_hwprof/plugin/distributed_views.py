"""The Distributed view's JSON document (docs/http_api.md: /distributed): a job run's cross-rank
summaries (ranks, rank_steps, rank_kernels)."""
from __future__ import annotations

from .store import HttpError, RunEntry


def distributed(entry: RunEntry) -> dict:
    if "ranks" not in entry.summary_names():
        raise HttpError(404, f"run {entry.run!r} is not a multi-rank job (no ranks table)")
    return {"run": entry.run, "ranks": []}  # filled by the Distributed engineer
