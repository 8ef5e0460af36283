"""Part of the Nsight Systems SQLite reader (nsys_sqlite.py): the summaries `nsys stats` reports
(cuda_gpu_kern_sum, cuda_gpu_mem_time_sum / size_sum, cuda_api_sum, nvtx_sum's CPU side as
nvtx_phases) plus memory kinds.  The big tables' summaries are numpy over the columns the reader
fetched once; the small ones (memory operations) are SQL GROUP BYs.  What the analysis derives
from the Timeline (GPU activity, idle time, the GPU time projected onto NVTX ranges) is
tb_hwprof/analysis/gpu_trace.py."""
from __future__ import annotations

import math
from typing import Dict, Optional, Sequence, Set, Tuple

import numpy as np
import pandas as pd

from ...core.columnar import grouped_stats
from ...core.model import units_of  # noqa: F401 (nsys_stats' too)
from .nsys_schema import (KERNEL, MEM_KINDS, MEMCPY, MEMCPY_KINDS, MEMSET, NVTX, NVTX_DOMAIN_CREATE, NVTX_STYLES,
                          api_name, check_integers, checked, columns, lookup, strings_of)


def duration_stats(conn, src_sql: str, keys: Sequence[str], value: str = "dur", extra: str = "") -> pd.DataFrame:
    """count/total/avg/med/min/max/sample-stddev of `value` per `keys`, in one SQL pass.

    `src_sql` yields the key columns and `value`.  The median is the mean of the middle
    one or two values (as nsys computes it); the stddev is the sample one, 0 for a single
    instance (as `nsys stats` prints it).  Only one row per group comes back to Python.
    """
    k = ", ".join(keys)
    sql = f"""
        SELECT {k}, count(*) AS n, sum(v) AS total, avg(v) AS mean, min(v) AS lo, max(v) AS hi,
               avg(CASE WHEN rn IN ((cnt + 1) / 2, (cnt + 2) / 2) THEN v END) AS med,
               sum((v - mu) * (v - mu)) AS ss {extra}
        FROM (SELECT *, {value} AS v,
                     row_number() OVER (PARTITION BY {k} ORDER BY {value}) AS rn,
                     count(*) OVER (PARTITION BY {k}) AS cnt,
                     avg({value}) OVER (PARTITION BY {k}) AS mu
              FROM ({src_sql}))
        GROUP BY {k}"""
    cur = conn.execute(sql)
    df = pd.DataFrame(cur.fetchall(), columns=[d[0] for d in cur.description])
    df["stddev"] = np.sqrt(df["ss"].astype("float64") / (df["n"] - 1).clip(lower=1)) if len(df) else []
    df.loc[df["n"] <= 1, "stddev"] = 0.0
    return df.drop(columns=["ss"])


def _stats_frame(df: pd.DataFrame, count_name: str, unit: str) -> pd.DataFrame:
    """Rename duration_stats' columns to <stat>_<unit> and add the nsys "Time (%)" share."""
    total = float(df["total"].sum()) if len(df) else 0.0
    out = pd.DataFrame({
        "time_pct" if unit == "ns" else "total_pct": 100.0 * df["total"].astype("float64") / total if total else
        np.full(len(df), math.nan),
        f"total_{unit}": df["total"].astype("int64"),
        count_name: df["n"].astype("int64"),
        f"avg_{unit}": df["mean"].astype("float64"),
        f"med_{unit}": df["med"].astype("float64"),
        f"min_{unit}": df["lo"].astype("int64"),
        f"max_{unit}": df["hi"].astype("int64"),
        f"stddev_{unit}": df["stddev"].astype("float64"),
    })
    return out


def _sorted(df: pd.DataFrame, by: str, name_col: str, keep_index: bool = False) -> pd.DataFrame:
    # nsys orders by total descending; the name breaks ties so the order is reproducible.
    out = df.sort_values([by, name_col], ascending=[False, True], kind="stable")
    return out if keep_index else out.reset_index(drop=True)


def kernel_summary(conn, kcols: Dict[str, np.ndarray], strings: pd.Series) -> pd.DataFrame:
    """`nsys stats --report cuda_gpu_kern_sum`: per demangled ("templated") name, as nsys groups by
    default (the short name where the export has no demangled one), from the fetched columns (numpy,
    one sort: ~0.2 s at 1M launches instead of ~1.9 s of SQL window functions)."""
    by_demangled = "demangledName" in columns(conn, KERNEL)
    stats = grouped_stats(kcols["demangled" if by_demangled else "short"], kcols["end"] - kcols["start"],
                          extra=kcols["short"])
    stats = stats.rename(columns={"key": "nid", "extra": "sid"})
    out = _stats_frame(stats, "instances", "ns")
    out["name"] = lookup(strings, stats["nid"].to_numpy())
    out["short_name"] = lookup(strings, stats["sid"].to_numpy())
    return _sorted(out, "total_ns", "name")


def _enum_cte(conn, names: Set[str], table: str, known: Dict[int, str], alias: str) -> str:
    """The export's own enum table when it has one, else nsys' known values inline."""
    if table in names:
        return f"{alias}(id, label) AS (SELECT id, label FROM {table})"
    values = ", ".join(f"({i}, '{label}')" for i, label in known.items())
    return f"{alias}(id, label) AS (VALUES {values})"


def _memops_sql(conn, names: Set[str]) -> Optional[str]:
    """One row per memcpy/memset: op, dur, bytes, src, dst (labels), device, start, end."""
    parts = []
    if MEMCPY in names:
        parts.append(f"""SELECT '[CUDA memcpy ' || coalesce(ck.label, 'kind ' || m.copyKind) || ']' AS op,
                             m.end - m.start AS dur, m.bytes AS bytes,
                             coalesce(sk.label, m.srcKind) AS src, coalesce(dk.label, m.dstKind) AS dst
                         FROM {MEMCPY} m LEFT JOIN copy_kind ck ON ck.id = m.copyKind
                         LEFT JOIN mem_kind sk ON sk.id = m.srcKind LEFT JOIN mem_kind dk ON dk.id = m.dstKind""")
    if MEMSET in names:
        has_kind = "memKind" in columns(conn, MEMSET)
        dst = "coalesce(dk.label, s.memKind)" if has_kind else "''"
        join = "LEFT JOIN mem_kind dk ON dk.id = s.memKind" if has_kind else ""
        parts.append(f"""SELECT '[CUDA memset]' AS op, s.end - s.start AS dur, s.bytes AS bytes, '' AS src,
                             {dst} AS dst FROM {MEMSET} s {join}""")
    if not parts:
        return None
    ctes = ", ".join([_enum_cte(conn, names, "ENUM_CUDA_MEMCPY_OPER", MEMCPY_KINDS, "copy_kind"),
                      _enum_cte(conn, names, "ENUM_CUDA_MEM_KIND", MEM_KINDS, "mem_kind")])
    return f"WITH {ctes} SELECT * FROM ({' UNION ALL '.join(parts)})"


def memory_summaries(conn, names: Set[str]) -> Dict[str, pd.DataFrame]:
    """cuda_gpu_mem_time_sum and cuda_gpu_mem_size_sum (per operation), plus bytes and time by
    source/destination memory kind (pageable vs pinned host memory is the usual lever)."""
    src = _memops_sql(conn, names)
    if src is None:
        return {}
    for table, kind in ((MEMCPY, ("copyKind",)), (MEMSET, ())):  # SQL sums them unseen: checked first
        if table in names:
            check_integers(conn, table, ("start", "end", "bytes") + kind)
    by_time = duration_stats(conn, src, ["op"])
    time_sum = _stats_frame(by_time, "count", "ns")
    time_sum["operation"] = by_time["op"]
    by_size = duration_stats(conn, src, ["op"], value="bytes")
    size_sum = _stats_frame(by_size, "count", "bytes")
    size_sum["operation"] = by_size["op"]
    cur = conn.execute(f"""SELECT op, CAST(src AS TEXT), CAST(dst AS TEXT), count(*), sum(bytes), sum(dur)
                           FROM ({src}) GROUP BY 1, 2, 3""")
    kinds = pd.DataFrame(cur.fetchall(), columns=["operation", "src_kind", "dst_kind", "count", "total_bytes",
                                                  "total_ns"])
    kinds["throughput_bytes_per_s"] = np.where(kinds["total_ns"] > 0,
                                               kinds["total_bytes"] * 1e9 / kinds["total_ns"].clip(lower=1), math.nan)
    return {"cuda_gpu_mem_time_sum": _sorted(time_sum, "total_ns", "operation"),
            "cuda_gpu_mem_size_sum": _sorted(size_sum, "total_bytes", "operation"),
            "cuda_gpu_mem_kind_sum": _sorted(kinds, "total_bytes", "operation")}


def api_summary(conn, api: tuple) -> pd.DataFrame:
    """`nsys stats --report cuda_api_sum`: CUDA runtime and driver calls per name, from the fetched
    (start, end, globalTid, correlation, nameId) arrays."""
    stats = grouped_stats(api[4], api[1] - api[0]).rename(columns={"key": "nid"})
    strings = strings_of(conn, stats["nid"].to_numpy())
    out = _stats_frame(stats, "num_calls", "ns")
    out["name"] = lookup(strings, stats["nid"].to_numpy())
    out["api"] = [api_name(n) for n in out["name"]]
    return _sorted(out, "total_ns", "name")


def _nvtx_domains(conn) -> Dict[int, str]:
    cols = columns(conn, NVTX)
    text = "coalesce(n.text, s.value)" if "textId" in cols else "n.text"
    join = "LEFT JOIN StringIds s ON s.id = n.textId" if "textId" in cols else ""
    if "domainId" not in cols:
        return {}
    rows = conn.execute(f"SELECT n.rowid, n.domainId, {text} FROM {NVTX} n {join} "
                        f"WHERE n.eventType = {NVTX_DOMAIN_CREATE}").fetchall()
    checked(NVTX, rows, ((int, type(None)), (str, type(None))), ("domainId", "text"))
    return {d: t or "" for _, d, t in rows if d is not None}


def nvtx_phases(conn, ranges: Dict[str, np.ndarray]) -> Tuple[Optional[pd.DataFrame], np.ndarray]:
    """NVTX ranges per (domain, name, style): instances and CPU wall time as `nsys stats --report
    nvtx_sum` gives them (the analysis adds the GPU time of the kernels launched inside them), and
    each range's row in that table (the Timeline's range_rows)."""
    if ranges["start"].size == 0:
        return None, np.zeros(0, np.int64)
    # One int64 per (name, domain, style) to group by: a MultiIndex factorize costs ~10x more.
    domain_code, domain_ids = pd.factorize(ranges["domain"])
    n_domains = max(len(domain_ids), 1)
    groups, keys = pd.factorize((ranges["nid"] * n_domains + domain_code) * 256 + (ranges["etype"] & 0xFF))
    stats = grouped_stats(groups, ranges["end"] - ranges["start"])
    out = _stats_frame(stats, "instances", "ns")
    picked = keys[stats["key"].to_numpy()]
    nid, domain, etype = picked // 256 // n_domains, domain_ids[picked // 256 % n_domains], picked % 256
    domains = _nvtx_domains(conn)
    out["domain"] = [domains.get(int(d), "" if int(d) == 0 else f"domain {d}") for d in domain]
    out["name"] = ranges["names"][nid]
    out["style"] = [NVTX_STYLES[int(e)] for e in etype]
    out = _sorted(out, "total_ns", "name", keep_index=True)
    row_of_group = np.empty(len(keys), np.int64)
    row_of_group[stats["key"].to_numpy()[out.index.to_numpy()]] = np.arange(len(out))
    return out.reset_index(drop=True), row_of_group[groups]


def read_summaries(conn, names: Set[str], fetched, kernel_sum: Optional[pd.DataFrame]):
    """({name: table}, each NVTX range's row in nvtx_phases)."""
    out: Dict[str, pd.DataFrame] = {}
    if kernel_sum is not None:
        out["cuda_gpu_kern_sum"] = kernel_sum
    out.update(memory_summaries(conn, names))
    if fetched.api is not None:
        out["cuda_api_sum"] = api_summary(conn, fetched.api)
    range_rows = np.zeros(0, np.int64)
    if fetched.ranges is not None:
        phases, range_rows = nvtx_phases(conn, fetched.ranges)
        if phases is not None:
            out["nvtx_phases"] = phases
    out = {name: df for name, df in out.items() if len(df)}  # "absent when there is no data", as documented
    for df in out.values():
        df.attrs["units"] = units_of(df)
    return out, range_rows
