"""The Summaries view's JSON document (docs/http_api.md: /summaries): the summary tables a run
exported (nsys `cuda_api_sum` / `osrt_sum`, rocprof `api_stats` / `kernel_stats`, VTune's summary),
shown as the tool wrote them."""
from __future__ import annotations

from .store import HttpError, RunEntry


def summaries(entry: RunEntry) -> dict:
    names = sorted(entry.summary_names())
    if not names:
        raise HttpError(404, f"run {entry.run!r} exported no summary tables")
    return {"run": entry.run, "tables": names}  # filled by the Summaries engineer
