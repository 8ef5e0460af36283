"""A real PyTorch trace read with stdlib json (load and its event helpers), and a copy of it with one
operator's kernels stretched (a straggler with a known cause), shared by test_ranks.py and
test_distributed_view.py."""
import gzip
import json
import math
from bisect import bisect_left
from collections import defaultdict

import numpy as np

OP_CATS = ("cpu_op", "user_annotation")
RUNTIME_CATS = ("cuda_runtime", "cuda_driver")


def load(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def ns(ts):
    whole = math.floor(ts)
    return int(whole) * 1000 + int(round((ts - whole) * 1000))


def complete(doc, cats):
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and str(e.get("cat", "")).lower() in cats:
            yield e


def span_of(e):
    start = ns(e["ts"])
    return start, start + int(round(e.get("dur", 0) * 1000))


def innermost_op_of_calls(doc):
    """correlation id -> name of the innermost cpu_op / user annotation around its runtime call."""
    ops = defaultdict(list)
    for e in complete(doc, OP_CATS):
        if not e["name"].startswith("ProfilerStep#"):
            ops[(e["pid"], e["tid"])].append((*span_of(e), e["name"]))
    out = {}
    for e in complete(doc, RUNTIME_CATS):
        s, end = span_of(e)
        around = [o for o in ops[(e["pid"], e["tid"])] if o[0] <= s and end <= o[1]]
        if around and "correlation" in e.get("args", {}):
            out[e["args"]["correlation"]] = max(around, key=lambda o: (o[0], -o[1]))[2]
    return out


def stretched(doc, op_name, factor, rank):
    """A copy of the trace where `op_name`'s kernels take `factor` times as long and every event
    after each of them moves later by what it gained (ranges around them grow); the copy claims `rank`."""
    doc = json.loads(json.dumps(doc))
    owner = innermost_op_of_calls(doc)
    points = sorted((e["ts"], e["dur"] * (factor - 1)) for e in complete(doc, ("kernel",))
                    if owner.get(e["args"].get("correlation")) == op_name)
    assert points, op_name
    at = [p[0] for p in points]
    cumulative = np.concatenate([[0.0], np.cumsum([p[1] for p in points])])

    def shift(t):  # the growth of the stretched kernels that started before t
        return cumulative[bisect_left(at, t)]

    for e in doc["traceEvents"]:
        if "ts" not in e:
            continue
        ts = float(e["ts"])
        if "dur" in e:
            end = ts + float(e["dur"])
            e["dur"] = (end + shift(end)) - (ts + shift(ts))
        e["ts"] = ts + shift(ts)
    doc["distributedInfo"]["rank"] = rank
    return doc
