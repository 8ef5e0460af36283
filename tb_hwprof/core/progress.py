"""Progress lines from inside a long step that has no other way to the user (a reader deep in a big
report): the application sets where they go for the span of a call (told_to), the step says them
(tell).  Nothing is said where no one listens."""
from __future__ import annotations

import contextlib
import contextvars
from typing import Callable, Iterator, Optional

_SINK: contextvars.ContextVar[Optional[Callable[[str], None]]] = contextvars.ContextVar("tb_hwprof_progress",
                                                                                        default=None)


def tell(line: str) -> None:
    """Say one progress line to whoever listens in this context (nobody: nothing happens)."""
    sink = _SINK.get()
    if sink is not None:
        sink(line)


@contextlib.contextmanager
def told_to(sink: Callable[[str], None]) -> Iterator[None]:
    """Within the block, tell(line) calls sink(line) (in this thread and context only)."""
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)
