"""The Memory view's tables (issue 33), from the `[memory]` events of a trace recorded with
profile_memory=True (model.TorchTrace.memory), computed as torch-tb-profiler 0.4.3 computes its
Memory view (profiler/memory_parser.py), vectorised:

- each event belongs to the innermost operator of its thread whose [start, end) holds its time, on
  torch-tb-profiler's operator tree: cpu_op / Operator events (user annotations are no nodes, but a
  collective's), an operator with one child of its own name merged with it; an event inside a
  ProfilerStep#N, a DataLoader / Optimizer.step range or no operator belongs to none;
- memory_by_op, per device and operator name: self_* sums the events of the operator's instances
  (increase: every event's bytes, frees negative; alloc: the allocations' bytes and count), the
  inclusive columns also those of the operators inside them; calls counts the instances the
  profiler's walk reaches (the top-level operators and those inside an operator or step that holds
  memory events, docs/FORMAT.md);
- memory_peak, per device: the highest allocated and reserved totals, when and in which operator
  (and its enclosing operators) the allocated peak was reached, and the device's capacity;
- memory_curve: allocated / reserved over time per device, decimated to at most CURVE_BINS time
  bins (each keeps its first, last, lowest and highest points: the exact peaks stay);
- memory_events: each allocation paired with the free of its address (address, bytes, operator,
  alloc / free times, lifetime; -1 where the trace holds no pair).

Devices are named as the profiler names them: "CPU", "GPU<id>" (CUDA, and HIP on ROCm, which
torch-tb-profiler 0.4.3 drops).
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np
import pandas as pd

from ..core.columnar import object_factorize

TABLES = ("memory_by_op", "memory_peak", "memory_curve", "memory_events")
BY_OP_COLUMNS = ["device", "op", "self_increase_bytes", "self_alloc_bytes", "self_alloc_count", "increase_bytes",
                 "alloc_bytes", "alloc_count", "calls"]
PEAK_COLUMNS = ["device", "peak_allocated_bytes", "peak_reserved_bytes", "at_ns", "op", "call_stack",
                "reserved_at_peak_bytes", "capacity_bytes", "allocations", "short_lived_bytes", "short_lived_count",
                "short_lived_ops"]
CURVE_COLUMNS = ["device", "ts_ns", "allocated_bytes", "reserved_bytes"]
EVENT_COLUMNS = ["device", "addr", "bytes", "op", "alloc_ns", "free_ns", "lifetime_ns"]
CURVE_BINS = 2000  # time bins per device; a bin keeps up to 4 points
# memory_events keeps the earliest allocations up to this many: writing 170k rows took 0.5 s of a
# 0.7 GB trace's export, and the view lists them in the browser (memory_peak counts them all).
EVENTS_KEPT = 20_000
SHORT_LIVED_NS = 1_000_000  # an allocation freed within 1 ms: a temporary (advice torch.allocator_churn)
CPU_TYPE, CUDA_TYPE, HIP_TYPE = 0, 1, 6  # c10::DeviceType
# torch-tb-profiler's operator tree: categories of its operator nodes, collectives it keeps among
# user annotations, and nodes it keeps out of the Memory view's operators (node.is_operator_node).
OPERATOR_CATS = ("cpu_op", "operator")
COLLECTIVES = {"nccl:broadcast", "nccl:reduce", "nccl:all_reduce", "nccl:all_gather", "nccl:reduce_scatter",
               "gloo:broadcast", "gloo:reduce", "gloo:all_reduce", "gloo:all_gather", "gloo:reduce_scatter"}
NOT_OPERATORS = {"DataParallel.forward", "DistributedDataParallel.forward"}


def memory_tables(profile, analysis) -> None:
    torch = getattr(profile, "torch", None)
    memory = getattr(torch, "memory", None)
    if memory is None or memory.empty:
        return
    tree = OpTree(torch)
    device = device_names(memory)
    owner = tree.owner(memory["ts_ns"].to_numpy(), memory["tid"].to_numpy())
    analysis.summaries["memory_by_op"] = memory_by_op(tree, memory, device, owner)
    events = memory_events(tree, memory, device, owner)
    peaks = memory_peak(tree, memory, device, owner, torch.device_properties)
    if len(peaks):
        analysis.summaries["memory_peak"] = with_churn(peaks, events)
        analysis.summaries["memory_curve"] = memory_curve(memory, device)
    if len(events):
        analysis.summaries["memory_events"] = events.head(EVENTS_KEPT)


def device_names(memory: pd.DataFrame) -> np.ndarray:
    """"CPU" / "GPU<id>" per event ("" for another device type: left out, as the profiler does)."""
    kind, ident = memory["device_type"].to_numpy(), memory["device_id"].to_numpy()
    codes, uniques = pd.factorize(kind * (1 << 32) + (ident & 0xFFFFFFFF))  # one int64 per (type, id)
    names = np.array([_device_name(int(k) >> 32, int(np.int32(np.uint32(int(k) & 0xFFFFFFFF)))) for k in uniques],
                     dtype=object)
    return names[codes] if names.size else np.zeros(0, dtype=object)


def _device_name(kind: int, ident: int) -> str:
    if kind == CPU_TYPE:
        return "CPU"
    return f"GPU{ident}" if kind in (CUDA_TYPE, HIP_TYPE) else ""


# ---------------------------------------------------------------- the operator tree
class OpTree:
    """torch-tb-profiler's operator tree over TorchTrace.ops (see the module doc), as columns:
    node (is a node of the tree), tree_parent (the nearest node enclosing it, -1), operator (counts
    as an operator in the Memory view), and the steps each thread's top level sits in."""

    def __init__(self, torch):
        ops = torch.ops
        self.ops, self.steps = ops, torch.steps
        self.name_codes, self.names = object_factorize(ops["name"].to_numpy())
        names = self.names[self.name_codes] if len(ops) else np.zeros(0, dtype=object)
        cat = np.array([str(c).lower() for c in pd.unique(ops["cat"].to_numpy())], dtype=object)
        cat_codes = pd.factorize(ops["cat"].to_numpy())[0] if len(ops) else np.zeros(0, dtype=np.int64)
        is_operator_cat = np.isin(cat, OPERATOR_CATS)[cat_codes] if len(ops) else np.zeros(0, dtype=bool)
        name_ok = np.array([_is_operator_name(n) for n in self.names], dtype=bool)
        collective = np.isin(self.names, list(COLLECTIVES))
        self.parent = ops["parent"].to_numpy()
        self.start, self.end = ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy()
        self.tid = ops["tid"].to_numpy()
        node = is_operator_cat | collective[self.name_codes]
        self.tree_parent = _nearest(self.parent, node)
        node &= ~self._merged(node, is_operator_cat)
        self.node = node
        self.tree_parent = _nearest(self.parent, node)
        self.operator = node & is_operator_cat & name_ok[self.name_codes]

    def _merged(self, node: np.ndarray, mergeable: np.ndarray) -> np.ndarray:
        """Nodes the profiler merges into their parent: an operator whose parent operator has it as
        its one child and the same name (its remove_dup_nodes)."""
        parent = self.tree_parent
        has = node & (parent >= 0)
        children = np.bincount(parent[has], minlength=len(parent)) if len(parent) else np.zeros(0, dtype=np.int64)
        p = np.maximum(parent, 0)
        return has & mergeable & mergeable[p] & (children[p] == 1) & (self.name_codes == self.name_codes[p])

    def owner(self, ts: np.ndarray, tid: np.ndarray) -> np.ndarray:
        """Per event, the row of the innermost node holding its time on its thread ([start, end)), -1."""
        out = np.full(ts.size, -1, dtype=np.int64)
        if not len(self.ops):
            return out
        for thread in np.unique(tid):
            events = np.flatnonzero(tid == thread)
            rows = np.flatnonzero(self.tid == thread)  # in start order, longest first (the reader's order)
            if rows.size == 0:
                continue
            at = np.searchsorted(self.start[rows], ts[events], side="right") - 1
            candidate = np.where(at >= 0, rows[np.maximum(at, 0)], -1)
            out[events] = self._innermost(candidate, ts[events])
        return out

    def _innermost(self, candidate: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """From the last op started at or before each time, up its enclosing ops to the first node
        that still holds the time (the innermost: any holding op encloses the last one started)."""
        c = candidate.copy()
        while True:
            live = np.flatnonzero(c >= 0)
            wrong = live[~(self.node[c[live]] & (self.end[c[live]] > ts[live]))]
            if wrong.size == 0:
                return c
            c[wrong] = self.parent[c[wrong]]

    def in_step(self, ts: np.ndarray, tid: np.ndarray) -> np.ndarray:
        """Per time, the row in steps of the ProfilerStep#N on its thread that holds it ([start, end)), -1."""
        out = np.full(ts.size, -1, dtype=np.int64)
        steps = self.steps
        if steps.empty:
            return out
        s_tid, s_start, s_end = steps["tid"].to_numpy(), steps["start_ns"].to_numpy(), steps["end_ns"].to_numpy()
        for thread in np.unique(tid):
            which = np.flatnonzero(tid == thread)
            rows = np.flatnonzero(s_tid == thread)
            if rows.size == 0:
                continue
            rows = rows[np.argsort(s_start[rows], kind="stable")]
            at = np.searchsorted(s_start[rows], ts[which], side="right") - 1
            row = rows[np.maximum(at, 0)]
            out[which] = np.where((at >= 0) & (s_end[row] > ts[which]), row, -1)
        return out

    def ancestors_or_self(self, rows: np.ndarray) -> np.ndarray:
        """Every node on the tree's paths from `rows` (nodes) up to the top, once each."""
        marked = np.zeros(len(self.ops), dtype=bool)
        level = np.zeros(len(self.ops), dtype=bool)
        level[rows[rows >= 0]] = True
        while True:
            level &= ~marked  # each node once: a mask, not a sort per level
            at = np.flatnonzero(level)
            if at.size == 0:
                return marked
            marked[at] = True
            up = self.tree_parent[at]
            level[:] = False
            level[up[up >= 0]] = True

    def chain(self, row: int, keep: int = 6) -> str:
        """The nodes enclosing `row` and it, outermost first ("a > b > c"), at most `keep`."""
        names = []
        while row >= 0:
            names.append(str(self.names[self.name_codes[row]]))
            row = int(self.tree_parent[row])
        shown = names[:keep][::-1]
        return ("... > " if len(names) > keep else "") + " > ".join(shown)


def _is_operator_name(name: str) -> bool:
    """torch-tb-profiler's plain OperatorNode: not a DataLoader / DataPipe / Optimizer range, not DP's forward."""
    name = str(name)
    return not (name in NOT_OPERATORS or name.startswith("Optimizer.") or name.startswith("enumerate(DataPipe)#")
                or (name.startswith("enumerate(DataLoader)#") and name.endswith(".__next__")))


def _nearest(parent: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Per row, its nearest ancestor (by `parent`) where keep holds, -1: pointer jumping."""
    up = parent.copy()
    while True:
        skip = np.flatnonzero((up >= 0) & ~keep[np.maximum(up, 0)])
        if skip.size == 0:
            return up
        up[skip] = parent[up[skip]]


# ---------------------------------------------------------------- per operator
def memory_by_op(tree: OpTree, memory: pd.DataFrame, device: np.ndarray, owner: np.ndarray) -> pd.DataFrame:
    """memory_by_op (module doc): one row per (device, operator name) with any non-zero figure."""
    counted = (owner >= 0) & (device != "")
    counted[counted] = tree.operator[owner[counted]]
    events = np.flatnonzero(counted)
    dev_codes, devices = pd.factorize(device[events])
    values = _event_values(memory["bytes"].to_numpy()[events])
    at = owner[events]
    self_sums = _sum_by(tree.name_codes[at], dev_codes, values, len(tree.names))
    inclusive = _inclusive(tree, at, values, dev_codes, len(tree.names))
    return _by_op_table(self_sums, inclusive, _calls(tree, memory, owner), tree.names, devices)


def _event_values(nbytes: np.ndarray) -> np.ndarray:
    """Per event: its increase (bytes, signed), allocation bytes and allocation count."""
    alloc = nbytes > 0
    return np.column_stack([nbytes, np.where(alloc, nbytes, 0), alloc.astype(np.int64)])


def _sum_by(name: np.ndarray, dev: np.ndarray, values: np.ndarray, n_names: int) -> Dict[Tuple[int, int], np.ndarray]:
    key = dev.astype(np.int64) * n_names + name
    codes, keys = pd.factorize(key)
    # bincount sums in float64: exact below 2**53 bytes (9 PB) per operator
    sums = np.column_stack([np.bincount(codes, weights=values[:, j], minlength=keys.size)
                            for j in range(values.shape[1])]).astype(np.int64)
    return {(int(k) % n_names, int(k) // n_names): sums[i] for i, k in enumerate(keys)}


def _inclusive(tree: OpTree, at: np.ndarray, values: np.ndarray, dev: np.ndarray, n_names: int):
    """Per (name, device): the events' values summed at every operator on each event's path up the tree."""
    names, devs, vals = [], [], []
    while at.size:
        here = tree.operator[at]
        names.append(tree.name_codes[at[here]]), devs.append(dev[here]), vals.append(values[here])
        up = tree.tree_parent[at]
        keep = up >= 0
        at, values, dev = up[keep], values[keep], dev[keep]
    if not names:
        return {}
    return _sum_by(np.concatenate(names), np.concatenate(devs), np.concatenate(vals), n_names)


def _calls(tree: OpTree, memory: pd.DataFrame, owner: np.ndarray) -> np.ndarray:
    """Per operator name, the instances torch-tb-profiler's walk reaches: top-level ones and those
    whose parent node (an operator or a ProfilerStep#N) holds a memory event of its thread."""
    ts, tid = memory["ts_ns"].to_numpy(), memory["tid"].to_numpy()
    held = tree.ancestors_or_self(owner)
    step_held = np.zeros(len(tree.steps), dtype=bool)
    step_of_event = tree.in_step(ts, tid)
    step_held[step_of_event[step_of_event >= 0]] = True
    parent = tree.tree_parent
    top = parent < 0
    # A top-level operator inside a step hangs under it (steps are nodes of the tree too).
    step = tree.in_step(tree.start, tree.tid) if len(tree.ops) else np.zeros(0, dtype=np.int64)
    inside_step_end = np.ones(len(tree.ops), dtype=bool)
    if len(tree.steps):
        ends = tree.steps["end_ns"].to_numpy()
        inside_step_end = np.where(step >= 0, tree.end <= ends[np.maximum(step, 0)], False)
    under_step = top & (step >= 0) & inside_step_end
    reached = np.where(top, np.where(under_step, step_held[np.maximum(step, 0)], True), held[np.maximum(parent, 0)])
    counted = tree.operator & reached
    return np.bincount(tree.name_codes[counted], minlength=len(tree.names))


def _by_op_table(self_sums, inclusive, calls, names, devices) -> pd.DataFrame:
    rows = []
    for (name, dev) in sorted(set(self_sums) | set(inclusive), key=lambda k: (str(devices[k[1]]), str(names[k[0]]))):
        own = self_sums.get((name, dev), np.zeros(3, dtype=np.int64))
        total = inclusive.get((name, dev), np.zeros(3, dtype=np.int64))
        if not (own.any() or total.any()):
            continue
        rows.append({"device": str(devices[dev]), "op": str(names[name]), "self_increase_bytes": int(own[0]),
                     "self_alloc_bytes": int(own[1]), "self_alloc_count": int(own[2]),
                     "increase_bytes": int(total[0]), "alloc_bytes": int(total[1]), "alloc_count": int(total[2]),
                     "calls": int(calls[name])})
    return pd.DataFrame(rows, columns=BY_OP_COLUMNS)


# ---------------------------------------------------------------- peaks and curves
def memory_peak(tree: OpTree, memory: pd.DataFrame, device: np.ndarray, owner: np.ndarray,
                device_properties) -> pd.DataFrame:
    """memory_peak (module doc): one row per device whose events carry the allocator's totals."""
    allocated, reserved = memory["total_allocated"].to_numpy(), memory["total_reserved"].to_numpy()
    ts = memory["ts_ns"].to_numpy()
    step_of = tree.in_step(ts, memory["tid"].to_numpy())
    capacity = _capacities(device_properties)
    rows = []
    for name in sorted(set(device[(allocated >= 0) & (device != "")])):
        mine = np.flatnonzero((device == name) & (allocated >= 0))
        at = mine[np.argmax(allocated[mine])]  # the first event at the peak
        held = reserved[mine][reserved[mine] >= 0]
        rows.append({"device": name, "peak_allocated_bytes": int(allocated[at]),
                     "peak_reserved_bytes": int(held.max()) if held.size else -1, "at_ns": int(ts[at]),
                     "op": _operator_name(tree, int(owner[at])), "call_stack": _call_stack(tree, int(owner[at]),
                                                                                           int(step_of[at])),
                     "reserved_at_peak_bytes": int(reserved[at]),
                     "capacity_bytes": float(capacity.get(name, np.nan))})
    return pd.DataFrame(rows, columns=PEAK_COLUMNS)


def with_churn(peaks: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """memory_peak's allocation columns per device, over every allocation: `allocations`, and the
    size most often freed within SHORT_LIVED_NS (`short_lived_bytes`, `short_lived_count`, and the
    operators that made them, "op xN, ...")."""
    peaks = peaks.copy()
    alloc = events[events["alloc_ns"] >= 0]
    short = alloc[(alloc["lifetime_ns"] >= 0) & (alloc["lifetime_ns"] < SHORT_LIVED_NS)]
    counts = alloc["device"].value_counts()
    peaks["allocations"] = [int(counts.get(d, 0)) for d in peaks["device"]]
    sizes, numbers, ops = [], [], []
    for device in peaks["device"]:
        mine = short[short["device"] == device]
        top = mine["bytes"].value_counts(sort=True) if len(mine) else pd.Series(dtype=np.int64)
        size = int(top.index[0]) if len(top) else -1
        sizes.append(size), numbers.append(int(top.iloc[0]) if len(top) else 0)
        callers = mine.loc[mine["bytes"] == size, "op"].astype(str).replace("", "(no operator)").value_counts()
        ops.append(", ".join(f"{n} x{c}" for n, c in callers.head(3).items()))
    peaks["short_lived_bytes"], peaks["short_lived_count"], peaks["short_lived_ops"] = sizes, numbers, ops
    return peaks


def _capacities(device_properties) -> Dict[str, float]:
    """{"GPU<id>": totalGlobalMem} from the trace's deviceProperties."""
    out = {}
    for p in device_properties or []:
        if isinstance(p, dict) and isinstance(p.get("id"), int) and isinstance(p.get("totalGlobalMem"), (int, float)):
            out[f"GPU{p['id']}"] = float(p["totalGlobalMem"])
    return out


def _operator_name(tree: OpTree, row: int) -> str:
    return str(tree.names[tree.name_codes[row]]) if row >= 0 and tree.operator[row] else ""


def _call_stack(tree: OpTree, row: int, step: int) -> str:
    outer = str(tree.steps["name"].iloc[step]) if step >= 0 else ""
    inner = tree.chain(row) if row >= 0 else ""
    return " > ".join(part for part in (outer, inner) if part)


def memory_curve(memory: pd.DataFrame, device: np.ndarray, bins: int = CURVE_BINS) -> pd.DataFrame:
    """memory_curve (module doc): the events with an address and both totals (the ones torch-tb-profiler
    draws), per device; past 4 x bins events, each time bin keeps its first, last, lowest and highest
    allocated and highest reserved points, so the exact maxima are kept."""
    allocated, reserved = memory["total_allocated"].to_numpy(), memory["total_reserved"].to_numpy()
    ts = memory["ts_ns"].to_numpy()
    drawn = (memory["addr"].to_numpy() >= 0) & (allocated >= 0) & (reserved >= 0) & (device != "")
    parts = []
    for name in sorted(set(device[drawn])):
        rows = np.flatnonzero(drawn & (device == name))
        if rows.size > 4 * bins:
            rows = rows[_kept(ts[rows], allocated[rows], reserved[rows], bins)]
        parts.append(pd.DataFrame({"device": name, "ts_ns": ts[rows], "allocated_bytes": allocated[rows],
                                   "reserved_bytes": reserved[rows]}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=CURVE_COLUMNS)


def _kept(ts: np.ndarray, allocated: np.ndarray, reserved: np.ndarray, bins: int) -> np.ndarray:
    """Positions (sorted) of each time bin's first, last, min / max allocated and max reserved point."""
    span = max(int(ts[-1] - ts[0]), 1)
    b = np.minimum((ts - ts[0]) * bins // span, bins - 1)
    frame = pd.DataFrame({"b": b, "a": allocated, "r": reserved})
    groups = frame.groupby("b", sort=False)
    first = np.r_[0, np.flatnonzero(np.diff(b)) + 1]
    last = np.r_[first[1:] - 1, ts.size - 1]
    picks = [first, last, groups["a"].idxmax().to_numpy(), groups["a"].idxmin().to_numpy(),
             groups["r"].idxmax().to_numpy()]
    return np.unique(np.concatenate(picks))


# ---------------------------------------------------------------- allocations
def memory_events(tree: OpTree, memory: pd.DataFrame, device: np.ndarray, owner: np.ndarray) -> pd.DataFrame:
    """memory_events (module doc): each allocation and its free (the next event of its address, if a
    free), then the frees of no allocation in the trace; events without an address (traces before
    PyTorch 1.10) have none."""
    addr, nbytes, ts = memory["addr"].to_numpy(), memory["bytes"].to_numpy(), memory["ts_ns"].to_numpy()
    rows = np.flatnonzero((addr >= 0) & (device != ""))
    if rows.size == 0:
        return pd.DataFrame(columns=EVENT_COLUMNS)
    rows = rows[np.lexsort((rows, addr[rows]))]  # by address, then time
    alloc = nbytes[rows] > 0
    same = np.r_[addr[rows][1:] == addr[rows][:-1], False]
    paired = alloc & same & np.r_[~alloc[1:], False]  # an allocation whose address's next event frees it
    freed = np.r_[False, paired[:-1]]  # the frees taken by a pair
    allocs, frees = rows[alloc], rows[~alloc & ~freed]
    free_at = np.where(paired[alloc], ts[rows[np.minimum(np.flatnonzero(alloc) + 1, rows.size - 1)]], -1)
    labels = _event_ops(tree, owner)
    table = pd.DataFrame({
        "device": np.concatenate([device[allocs], device[frees]]),
        "addr": np.concatenate([addr[allocs], addr[frees]]),
        "bytes": np.concatenate([nbytes[allocs], -nbytes[frees]]),
        "op": np.concatenate([labels[allocs], labels[frees]]),
        "alloc_ns": np.concatenate([ts[allocs], np.full(frees.size, -1)]),
        "free_ns": np.concatenate([free_at, ts[frees]]),
    })
    table["lifetime_ns"] = np.where((table["alloc_ns"] >= 0) & (table["free_ns"] >= 0),
                                    table["free_ns"] - table["alloc_ns"], -1)
    order = np.argsort(np.where(table["alloc_ns"] >= 0, table["alloc_ns"], table["free_ns"]), kind="stable")
    return table.iloc[order].reset_index(drop=True)


def _event_ops(tree: OpTree, owner: np.ndarray) -> np.ndarray:
    """Per event, its operator's name as torch-tb-profiler's events table shows it: an aten::empty*
    (PyTorch's malloc) with the operator that called it, "parent (aten::empty)"; "" outside operators."""
    at = np.maximum(owner, 0)
    own = np.where((owner >= 0) & tree.operator[at] if len(tree.ops) else False, at, -1)
    names = np.array(list(tree.names) + [""], dtype=object)
    name = names[np.where(own >= 0, tree.name_codes[at] if len(tree.ops) else -1, -1)]
    parent = np.where(own >= 0, tree.tree_parent[at] if len(tree.ops) else -1, -1)
    parent_name = names[np.where(parent >= 0, tree.name_codes[np.maximum(parent, 0)] if len(tree.ops) else -1, -1)]
    empty_name = np.array([str(n).startswith("aten::empty") for n in names], dtype=bool)
    codes = np.where(own >= 0, tree.name_codes[at] if len(tree.ops) else -1, -1)
    empty = empty_name[codes] & (parent >= 0)
    out = name.copy()
    out[empty] = parent_name[empty] + " (" + name[empty] + ")"
    return out
