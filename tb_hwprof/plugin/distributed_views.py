"""The Distributed view's JSON document (docs/http_api.md: /distributed): a job run's cross-rank
summaries (ranks, rank_steps, rank_kernels)."""
from __future__ import annotations

from .store import HttpError, RunEntry


def distributed(entry: RunEntry) -> dict:
    raise HttpError(404, "the Distributed view is not built yet")
