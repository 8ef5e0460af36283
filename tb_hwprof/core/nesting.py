"""Which interval encloses which, on one thread, for a million intervals without a Python loop.

Tracers write a thread's ranges as complete events (start, duration) that nest by construction,
but their timestamps pass through doubles: PyTorch's operators overlap their parent by a rounding
step (torch-tb-profiler logs "ranges on the same thread should not intersect" thousands of times on
a real trace and drops them).  Here a child may end up to `tolerance_ns` after its parent: nested
by containment with that slack, never dropped.

The innermost enclosing interval of a query is the nearest interval before it (sorted by group,
start, longest first) whose end reaches the query's end: a "previous greater element" search,
answered for all queries at once by binary lifting over a sparse table of running maxima
(log2(n) vectorised passes).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

try:  # the same answers in one pass (core/_nesting.c), where setup.py could build it
    from . import _nesting
except ImportError:
    _nesting = None


class Intervals:
    """Intervals sorted by (group, start, end descending), ready to answer enclosing queries."""

    def __init__(self, start: np.ndarray, end: np.ndarray, group: np.ndarray, presorted: bool = False):
        """presorted: the intervals are already in (start, end descending) order (then only a stable
        sort by group, on small integer ranks, is left to do)."""
        start, end, group = (np.asarray(a, dtype=np.int64) for a in (start, end, group))
        # Group ranks by hashing (a few threads among a million intervals), in sorted group order.
        codes, uniques = pd.factorize(group)
        uniques = np.asarray(uniques, dtype=np.int64)
        by_value = np.argsort(uniques, kind="stable")
        rank_of_code = np.empty(uniques.size, dtype=np.int64)
        rank_of_code[by_value] = np.arange(uniques.size)
        self.groups, group_rank = uniques[by_value], rank_of_code[codes]
        if presorted:
            small = group_rank.astype(np.int32 if uniques.size >= 1 << 15 else np.int16)
            self.order = np.argsort(small, kind="stable")  # a radix sort for 16-bit ranks
        else:
            self.order = np.lexsort((-end, start, group))
        self.base = int(min(start.min(), end.min())) if start.size else 0
        top = int(max(start.max(), end.max())) if start.size else 0
        # Keys put each group in its own band, so that no search crosses into another group.
        self.span = top - self.base + 2
        self.start_key = self._key(start, group_rank)[self.order]
        self.end_key = self._key(end, group_rank)[self.order]
        self._levels = None  # the numpy path's sparse table, built on first use

    @property
    def levels(self) -> list:
        if self._levels is None:
            self._levels = _running_maxima(self.end_key)
        return self._levels

    def _key(self, t: np.ndarray, rank: np.ndarray) -> np.ndarray:
        return (t - self.base) + rank.astype(np.int64) * self.span

    def _rank_of(self, group: np.ndarray) -> np.ndarray:
        """Band of each query group; -1 for a group no interval has."""
        pos = np.searchsorted(self.groups, group)
        pos = np.minimum(pos, max(self.groups.size - 1, 0))
        found = self.groups.size > 0
        return np.where(found & (self.groups[pos] == group) if found else False, pos, -1)

    def enclosing(self, start, end, group, tolerance_ns: int = 0, before=None) -> np.ndarray:
        if _nesting is not None and before is None:
            return self._enclosing_native(start, end, group, tolerance_ns)
        return self._enclosing_numpy(start, end, group, tolerance_ns, before)

    def _enclosing_native(self, start, end, group, tolerance_ns: int) -> np.ndarray:
        start, end, group = (np.asarray(a, dtype=np.int64) for a in (start, end, group))
        result = np.full(start.size, -1, dtype=np.int64)
        if self.end_key.size == 0 or start.size == 0:
            return result
        rank = self._rank_of(group)
        known = np.flatnonzero(rank >= 0)
        band = rank[known] * self.span
        # Keys of the queries on their group's band; the stack compares only keys of one group, so a
        # query reaching past the band's last end finds none, as in the numpy path.
        q_start = start[known] - self.base + band
        q_end = end[known] - self.base + band
        order = np.lexsort((q_start, rank[known]))
        found = np.frombuffer(_nesting.enclosing(
            self.start_key, self.end_key, self.start_key // self.span,
            np.ascontiguousarray(q_start[order]), np.ascontiguousarray(q_end[order]),
            np.ascontiguousarray(rank[known][order]), int(tolerance_ns)), dtype=np.int64)
        hit = found >= 0
        out = np.full(known.size, -1, dtype=np.int64)
        out[order[hit]] = self.order[found[hit]]
        result[known] = out
        return result

    def _enclosing_numpy(self, start, end, group, tolerance_ns: int = 0, before=None) -> np.ndarray:
        """Per query (start, end, group): the index (in the caller's original order) of the innermost
        interval that starts at or before it, ends after its start and reaches its end less
        `tolerance_ns`; -1 for none.  `before`: per query, the last sorted position it may take (an
        interval's own position - 1, so that an interval is never its own parent)."""
        start, end, group = (np.asarray(a, dtype=np.int64) for a in (start, end, group))
        n = self.end_key.size
        result = np.full(start.size, -1, dtype=np.int64)
        if n == 0 or start.size == 0:
            return result
        rank = self._rank_of(group)
        known = rank >= 0
        clipped_start = np.clip(start - self.base, -1, self.span - 2)
        if before is None:
            before = np.searchsorted(self.start_key, clipped_start + rank * self.span, side="right") - 1
        # Reach at least the query's end (less the slack) and strictly past its start.
        need = np.maximum(end - tolerance_ns, start + 1) - self.base
        need_key = np.clip(need, 0, self.span - 1) + rank * self.span
        cur = np.where(known, before, -1).astype(np.int64)
        for k in range(len(self.levels) - 1, -1, -1):
            width = 1 << k
            ok = cur - width + 1 >= 0
            idx = np.where(ok, cur, 0)
            skip = ok & (self.levels[k][idx] < need_key)
            cur = np.where(skip, cur - width, cur)
        hit = cur >= 0
        hit[hit] &= self.end_key[cur[hit]] >= need_key[hit]
        hit[hit] &= self.start_key[cur[hit]] >= rank[hit] * self.span  # same group (band)
        result[hit] = self.order[cur[hit]]
        return result

    def parents(self, tolerance_ns: int = 0) -> np.ndarray:
        """Per interval (original order): its innermost enclosing interval of the same group, -1."""
        n = self.order.size
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        if _nesting is not None:
            found = np.frombuffer(_nesting.parents(self.start_key, self.end_key, self.start_key // self.span,
                                                   int(tolerance_ns)), dtype=np.int64)
            out = np.empty(n, dtype=np.int64)
            out[self.order] = np.where(found >= 0, self.order[np.maximum(found, 0)], -1)
            return out
        return self._parents_numpy(tolerance_ns)

    def _parents_numpy(self, tolerance_ns: int = 0) -> np.ndarray:
        n = self.order.size
        inverse = np.empty(n, dtype=np.int64)
        inverse[self.order] = np.arange(n)
        rank = self.start_key // self.span
        start_sorted = self.start_key - rank * self.span + self.base
        end_sorted = self.end_key - rank * self.span + self.base
        group_sorted = self.groups[rank]
        found = self._enclosing_numpy(start_sorted, end_sorted, group_sorted, tolerance_ns,
                                      before=np.arange(n, dtype=np.int64) - 1)
        out = np.empty(n, dtype=np.int64)
        out[self.order] = found
        return out


def _running_maxima(values: np.ndarray) -> list:
    """levels[k][i] = max(values[i - 2**k + 1 .. i]) (positions before 0 are ignored)."""
    levels = [values]
    width = 1
    while width * 2 <= values.size:
        prev = levels[-1]
        nxt = prev.copy()
        nxt[width:] = np.maximum(prev[width:], prev[:-width])
        levels.append(nxt)
        width *= 2
    return levels


def depths(parent: np.ndarray) -> np.ndarray:
    """Depth of each node of a forest given by parent indices (-1 for roots), by pointer jumping."""
    depth = np.zeros(parent.size, dtype=np.int64)
    up = parent.copy()
    while True:
        alive = up >= 0
        if not alive.any():
            return depth
        depth[alive] += 1
        up[alive] = parent[up[alive]]
