"""The Distributed view's JSON document (docs/http_api.md: /distributed): a job run's cross-rank
summaries (ranks, rank_steps, rank_kernels)."""
from __future__ import annotations

from .store import RunEntry


def distributed(entry: RunEntry) -> dict:
    return {"run": entry.run, "ranks": []}  # filled by the Distributed engineer
