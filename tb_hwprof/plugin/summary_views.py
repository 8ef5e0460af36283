"""The Summaries view's JSON document (docs/http_api.md: /summaries): the summary tables a run
exported (nsys `cuda_api_sum` / `osrt_sum`, rocprof `api_stats` / `kernel_stats`, VTune's summary),
shown as the tool wrote them."""
from __future__ import annotations

from .store import RunEntry


def summaries(entry: RunEntry) -> dict:
    return {"run": entry.run, "tables": []}  # filled by the Summaries engineer
