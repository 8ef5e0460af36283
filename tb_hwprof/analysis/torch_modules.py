"""The nn.Module tree and the Python call stacks of a PyTorch trace recorded with `with_modules=True`
or `with_stack=True` (pipeline step `torch_modules`), from the Profile alone: the Python frames are
the timeline's `python` slices (`nn.Module: Name` frames among them), the operators and their GPU
work `Profile.torch`.

module_tree: one row per (ProfilerStep#N, module path), as torch-tb-profiler 0.4.3's Module view
(profiler/module_op.py) measures each module instance in its operator tree: a tree of the thread's
operators and module frames nested by time, where user annotations are left out but
ProfilerStep#N, nccl:* / gloo:*, enumerate(DataLoader)#... and Optimizer.step... are kept.  Per
instance: host total (its wall time), host self (less its direct children), device total (GPU
work launched by the operators under it), device self (that of its direct operator children),
operators (direct operator children).  tb-profiler sums them per module over the whole trace;
here per step (step -1: outside every ProfilerStep#N), summed per path: summing a module's rows
gives tb-profiler's figures.

python_stacks: the Python frames merged by call path (a flame graph's boxes): CPU time total and
self (less the child frames), GPU time of the kernels, copies and sets launched by the operators
under the frame (gpu_ns: total; gpu_self_ns: whose innermost frame it is), calls.  Paths under
0.1 % of both the CPU and the GPU total are merged into one "(other)" row per parent, so the
table stays small on any trace.  python_stack_ops: per path, the operators (outermost in the frame)
and GPU activities (by name) whose innermost frame it is.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np
import pandas as pd

from ..core.columnar import object_factorize
from ..core.model import TIMELINE_CATEGORIES
from ..core.nesting import Intervals, depths
from .torch_ops import climb_ancestors

MODULE_TREE = "module_tree"
MODULE_OPS = "module_ops"
PYTHON_STACKS = "python_stacks"
PYTHON_STACK_OPS = "python_stack_ops"
TABLES = (MODULE_TREE, MODULE_OPS, PYTHON_STACKS, PYTHON_STACK_OPS)

MODULE_PREFIX = "nn.Module: "
OTHER = "(other)"
COLLAPSE_SHARE = 0.001  # paths below 0.1 % of both totals are merged into "(other)"
# A child may end this much after its parent (timestamps pass through doubles; the reader nests
# the operators with the same slack).
TOLERANCE_NS = 500

MODULE_TREE_COLUMNS = ["step", "path_id", "parent_id", "path", "module", "depth", "calls", "operators",
                       "host_self_ns", "host_total_ns", "device_self_ns", "device_total_ns", "kernels"]
MODULE_OPS_COLUMNS = ["path_id", "path", "pass", "op", "calls", "device_ns", "device_total_ns", "host_total_ns"]
FORWARD, BACKWARD = "forward", "backward"  # module_ops' pass
BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
STACK_COLUMNS = ["path_id", "parent_id", "name", "depth", "calls", "cpu_self_ns", "cpu_total_ns",
                 "gpu_self_ns", "gpu_ns", "kernels"]
STACK_OPS_COLUMNS = ["path_id", "kind", "name", "calls", "cpu_ns", "gpu_ns"]

# tb-profiler's operator tree (node.py create_operator_node, is_operator_node).
COMMUNICATION_NAMES = {f"{lib}:{op}" for lib in ("nccl", "gloo")
                       for op in ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter")}
OPERATOR_CATEGORIES = {"cpu_op", "operator"}
NOT_OPERATORS = {"DataParallel.forward", "DistributedDataParallel.forward"}


def torch_modules(profile, analysis) -> None:
    """Pipeline step: the four tables, where the trace has Python frames (and modules)."""
    torch, timeline = getattr(profile, "torch", None), getattr(profile, "timeline", None)
    if torch is None or timeline is None:
        return
    frames = python_frames(timeline)
    if not frames["start"].size:
        return
    nesting = nest_frames_and_ops(torch, frames)  # one nesting serves both tables
    tree, ops = module_tree(torch, frames, nesting)
    if len(tree):
        analysis.summaries[MODULE_TREE] = tree
        analysis.summaries[MODULE_OPS] = ops
    stacks, stack_ops = python_stacks(torch, frames, nesting)
    analysis.summaries[PYTHON_STACKS] = stacks
    analysis.summaries[PYTHON_STACK_OPS] = stack_ops


# ------------------------------------------------------------------ inputs
def python_frames(timeline) -> Dict[str, np.ndarray]:
    """The timeline's Python frames: start, end, thread (pid, tid), name (object array)."""
    slices = timeline.slices
    rows = np.flatnonzero(slices["cat"] == TIMELINE_CATEGORIES.index("python"))
    tracks = slices["track"][rows]
    pid = np.array([t.pid for t in timeline.tracks], dtype=object)[tracks] if rows.size else np.zeros(0, dtype=object)
    tid = np.array([t.tid for t in timeline.tracks], dtype=object)[tracks] if rows.size else np.zeros(0, dtype=object)
    names = np.asarray(timeline.names, dtype=object)[slices["name"][rows]]
    return {"start": slices["start"][rows].astype(np.int64), "end": slices["end"][rows].astype(np.int64),
            "pid": pid, "tid": tid, "name": names}


def _text_codes(values: np.ndarray) -> np.ndarray:
    """Codes of a pid or tid column by its text (a 2021 trace writes an operator's tid 7 as "7" and a
    frame's as 7: one thread), factorized by value first so only the few distinct ones become text."""
    codes, uniques = object_factorize(values)
    text_codes, _ = object_factorize(np.array([str(u) for u in uniques], dtype=object))
    return text_codes[codes] if codes.size else codes.astype(np.int64)


def _thread_codes(*pairs) -> list:
    """One int code per (pid, tid) shared across the given (pid, tid) column pairs."""
    pid = _text_codes(np.concatenate([np.asarray(p, dtype=object) for p, _ in pairs]))
    tid = _text_codes(np.concatenate([np.asarray(t, dtype=object) for _, t in pairs]))
    _, codes = np.unique(pid.astype(np.int64) * (int(tid.max()) + 1 if tid.size else 1) + tid, return_inverse=True)
    out, at = [], 0
    for p, _ in pairs:
        out.append(codes[at:at + len(p)])
        at += len(p)
    return out


# ------------------------------------------------------------------ nesting
def nest_parents(start: np.ndarray, end: np.ndarray, group: np.ndarray, tolerance_ns: int = TOLERANCE_NS) -> np.ndarray:
    """Per interval: the innermost interval of its group that starts at or before it (longer first
    on equal starts), ends after its start and reaches its end less the tolerance; -1 for none
    (core/nesting.py: the reader's nesting, a per-thread stack in C where it was built)."""
    return Intervals(start, end, group).parents(tolerance_ns)


def nearest_marked_ancestor(parent: np.ndarray, marked: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per row of `rows`: its nearest proper ancestor with marked True, -1 for none."""
    found = np.full(rows.size, -1, dtype=np.int64)
    cur = parent[rows]
    alive = np.flatnonzero(cur >= 0)
    while alive.size:
        hit = marked[cur[alive]]
        found[alive[hit]] = cur[alive[hit]]
        alive = alive[~hit]
        cur[alive] = parent[cur[alive]]
        alive = alive[cur[alive] >= 0]
    return found


def path_ids(parent: np.ndarray, name_codes: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Call paths of a forest: (path id per node, parent path id per path, name code per path);
    nodes with the same name under the same parent path share a path.  Level by level."""
    depth = depths(parent)
    path = np.full(parent.size, -1, dtype=np.int64)
    path_parent, path_name = [], []
    n_names = int(name_codes.max()) + 1 if name_codes.size else 1
    for d in range(int(depth.max()) + 1 if depth.size else 0):
        rows = np.flatnonzero(depth == d)
        up = path[parent[rows]] if d else np.full(rows.size, -1, dtype=np.int64)
        codes, first = pd.factorize((up + 1) * n_names + name_codes[rows])
        first_rows = rows[_first_of(codes, len(first))]
        path[rows] = codes + len(path_name)
        path_parent.extend((path[parent[first_rows]] if d else np.full(first_rows.size, -1)).tolist())
        path_name.extend(name_codes[first_rows].tolist())
    return path, np.asarray(path_parent, dtype=np.int64), np.asarray(path_name, dtype=np.int64)


def _first_of(codes: np.ndarray, n: int) -> np.ndarray:
    first = np.empty(n, dtype=np.int64)
    first[codes[::-1]] = np.arange(codes.size - 1, -1, -1)
    return first


def path_text(path_parent: np.ndarray, path_name: np.ndarray, names: np.ndarray) -> np.ndarray:
    """'/A/B/C' per path (paths are numbered parents first)."""
    text = np.empty(path_parent.size, dtype=object)
    for p in range(path_parent.size):
        up = path_parent[p]
        text[p] = (text[up] if up >= 0 else "") + "/" + str(names[path_name[p]])
    return text


def _durations(frame) -> np.ndarray:
    return (frame["end_ns"].to_numpy() - frame["start_ns"].to_numpy()).astype(np.float64)


def gpu_launches(torch) -> Tuple[np.ndarray, np.ndarray]:
    """(launching op row, GPU ns) per GPU activity launched by an operator of the trace."""
    op = torch.gpu["op"].to_numpy()
    mine = op >= 0
    return op[mine], _durations(torch.gpu)[mine]


# ------------------------------------------------------------------ module tree
def per_value(values: np.ndarray, test) -> np.ndarray:
    """test(value) per element, asked once per distinct value (a trace repeats a few thousand names
    over a million rows)."""
    codes, uniques = object_factorize(np.asarray(values, dtype=object))
    return np.array([bool(test(u)) for u in uniques], dtype=bool)[codes] if codes.size else np.zeros(0, dtype=bool)


def _special(name) -> bool:
    name = str(name)
    return name.startswith("Optimizer.step") or name.startswith("enumerate(DataPipe)#") or (
        name.startswith("enumerate(DataLoader)#") and name.endswith(".__next__"))


def _tree_ops(ops: pd.DataFrame) -> Tuple[np.ndarray, np.ndarray]:
    """(in tb-profiler's operator tree, counted as an operator) per op row."""
    names = ops["name"].to_numpy(dtype=object)
    operator_cat = per_value(ops["cat"].to_numpy(dtype=object), lambda c: str(c).lower() in OPERATOR_CATEGORIES)
    special = per_value(names, _special)
    in_tree = operator_cat | special | per_value(names, lambda n: n in COMMUNICATION_NAMES)
    is_operator = operator_cat & ~special & ~per_value(names, lambda n: n in NOT_OPERATORS or str(n).startswith("Optimizer."))
    return in_tree, is_operator


def nest_frames_and_ops(torch, frames: Dict[str, np.ndarray]) -> np.ndarray:
    """nest_parents over every Python frame then every operator (in that order), per thread: the
    frames' and operators' one forest, which both tables read (the module tree skips the nodes it
    does not hold: containment is transitive)."""
    ops = torch.ops
    frame_thread, op_thread = _thread_codes((frames["pid"], frames["tid"]), (ops["pid"].to_numpy(), ops["tid"].to_numpy()))
    start = np.concatenate([frames["start"], ops["start_ns"].to_numpy()])
    end = np.concatenate([frames["end"], ops["end_ns"].to_numpy()])
    return nest_parents(start, end, np.concatenate([frame_thread, op_thread]))


def module_tree(torch, frames: Dict[str, np.ndarray], nesting: Optional[np.ndarray] = None
                ) -> Tuple[pd.DataFrame, pd.DataFrame]:
    """(module_tree, module_ops): see the module docstring."""
    names = frames["name"]
    is_module = per_value(names, lambda n: str(n).startswith(MODULE_PREFIX))
    if not is_module.any():
        return pd.DataFrame(columns=MODULE_TREE_COLUMNS), pd.DataFrame(columns=MODULE_OPS_COLUMNS)
    ops = torch.ops
    in_tree, is_operator = _tree_ops(ops)
    op_rows = np.flatnonzero(in_tree)
    mod_rows = np.flatnonzero(is_module)
    n_ops = op_rows.size
    start = np.concatenate([ops["start_ns"].to_numpy()[op_rows], frames["start"][mod_rows]])
    end = np.concatenate([ops["end_ns"].to_numpy()[op_rows], frames["end"][mod_rows]])
    nesting = nest_frames_and_ops(torch, frames) if nesting is None else nesting
    # The tree's nodes (its operators, then the modules) in the frames-then-operators forest: each
    # node's parent is its nearest ancestor there that is a node of the tree.
    n_frames = frames["start"].size
    forest_index = np.concatenate([n_frames + op_rows, mod_rows])
    tree_node = np.full(nesting.size, -1, dtype=np.int64)
    tree_node[forest_index] = np.arange(forest_index.size)
    up = nearest_marked_ancestor(nesting, tree_node >= 0, forest_index)
    parent = np.where(up >= 0, tree_node[np.maximum(up, 0)], -1)
    node_is_module = np.arange(start.size) >= n_ops
    node_is_operator = np.concatenate([is_operator[op_rows], np.zeros(mod_rows.size, dtype=bool)])
    duration = (end - start).astype(np.float64)

    # Device time per node (its subtree), from each GPU activity's launching op in the tree.
    node_of_op = np.full(len(ops), -1, dtype=np.int64)
    node_of_op[op_rows] = np.arange(n_ops)
    # GPU work launched inside a user annotation (nccl:_all_gather_base) counts for the operator
    # around the annotation, as tb-profiler joins it (by the runtime call's external id).
    outside = np.flatnonzero(~in_tree)
    holder = nearest_marked_ancestor(ops["parent"].to_numpy(), in_tree, outside)
    node_of_op[outside] = np.where(holder >= 0, node_of_op[np.maximum(holder, 0)], -1)
    launcher, gpu_ns = gpu_launches(torch)
    nodes = node_of_op[launcher]
    keep = nodes >= 0
    climbed, carried = climb_ancestors(parent, nodes[keep], gpu_ns[keep])
    device_total = np.bincount(climbed, weights=carried, minlength=start.size)
    climbed, ones = climb_ancestors(parent, nodes[keep], np.ones(int(keep.sum())))
    activities = np.bincount(climbed, weights=ones, minlength=start.size)
    # Per node, over its direct children: their wall time, the operators' device time and count.
    slot = parent + 1
    child_wall = np.bincount(slot, weights=duration, minlength=start.size + 1)[1:]
    child_device = np.bincount(slot, weights=np.where(node_is_operator, device_total, 0.0), minlength=start.size + 1)[1:]
    child_operators = np.bincount(slot, weights=node_is_operator.astype(np.float64), minlength=start.size + 1)[1:]

    modules = np.flatnonzero(node_is_module)
    up_module = nearest_marked_ancestor(parent, node_is_module, modules)
    index_in_modules = np.full(start.size, -1, dtype=np.int64)
    index_in_modules[modules] = np.arange(modules.size)
    module_parent = np.where(up_module >= 0, index_in_modules[np.maximum(up_module, 0)], -1)
    label = np.array([str(n)[len(MODULE_PREFIX):] for n in names[mod_rows]], dtype=object)
    name_codes, distinct = object_factorize(label)
    path, path_parent, path_name = path_ids(module_parent, name_codes)
    texts = path_text(path_parent, path_name, distinct)
    step = step_of(torch.steps, start[modules])

    per_instance = pd.DataFrame({
        "step": step, "path_id": path, "calls": 1, "operators": child_operators[modules].astype(np.int64),
        "host_self_ns": duration[modules] - child_wall[modules], "host_total_ns": duration[modules],
        "device_self_ns": child_device[modules], "device_total_ns": device_total[modules],
        "kernels": activities[modules].astype(np.int64), "first": start[modules]})
    tree = per_instance.groupby(["step", "path_id"], sort=False).agg(
        calls=("calls", "sum"), operators=("operators", "sum"), host_self_ns=("host_self_ns", "sum"),
        host_total_ns=("host_total_ns", "sum"), device_self_ns=("device_self_ns", "sum"),
        device_total_ns=("device_total_ns", "sum"), kernels=("kernels", "sum"), first=("first", "min")).reset_index()
    tree = tree.sort_values(["step", "first"], kind="stable")
    pid = tree["path_id"].to_numpy()
    tree["parent_id"] = path_parent[pid]
    tree["path"] = texts[pid]
    tree["module"] = distinct[path_name[pid]]
    tree["depth"] = depths(path_parent)[pid]
    per_node = {"device_total_ns": device_total, "host_total_ns": duration}
    return tree[MODULE_TREE_COLUMNS].reset_index(drop=True), _module_ops(ops, parent, node_is_module, op_rows,
                                                                           node_of_op, launcher, gpu_ns, path,
                                                                           index_in_modules, texts, per_node)


def _module_ops(ops, parent, node_is_module, op_rows, node_of_op, launcher, gpu_ns, path, index_in_modules,
                texts, per_node) -> pd.DataFrame:
    """Per (innermost module path, operator name): the instances, the GPU time they launched
    themselves (device_ns) and under them (device_total_ns), their wall time (host_total_ns): the
    operators' figures inside that module only, which the Modules view lists for a module."""
    nodes = np.arange(op_rows.size)
    inner = nearest_marked_ancestor(parent, node_is_module, nodes)
    inside = inner >= 0
    if not inside.any():
        return pd.DataFrame(columns=MODULE_OPS_COLUMNS)
    op_path = np.full(op_rows.size, -1, dtype=np.int64)
    op_path[inside] = path[index_in_modules[inner[inside]]]
    backward = backward_paths(ops, op_rows, op_path, inside)
    op_pass = np.where(inside, FORWARD, np.where(backward >= 0, BACKWARD, ""))
    op_path = np.where(inside, op_path, backward)
    kept = op_path >= 0
    launched_node = node_of_op[launcher]
    direct = np.bincount(launched_node[launched_node >= 0], weights=gpu_ns[launched_node >= 0], minlength=op_rows.size)
    frame = pd.DataFrame({"path_id": op_path[kept], "op": ops["name"].to_numpy(dtype=object)[op_rows[kept]],
                          "pass": op_pass[kept].astype(object), "calls": 1, "device_ns": direct[kept],
                          **{name: values[nodes[kept]] for name, values in per_node.items()}})
    out = frame.groupby(["path_id", "pass", "op"], sort=False).agg(
        calls=("calls", "sum"), device_ns=("device_ns", "sum"), device_total_ns=("device_total_ns", "sum"),
        host_total_ns=("host_total_ns", "sum")).reset_index()
    out["path"] = texts[out["path_id"].to_numpy()]
    out = out.sort_values(["path_id", "pass", "device_ns"], ascending=[True, False, False], kind="stable")
    return out[MODULE_OPS_COLUMNS].reset_index(drop=True)


def backward_paths(ops: pd.DataFrame, op_rows: np.ndarray, op_path: np.ndarray, inside: np.ndarray) -> np.ndarray:
    """Per operator node outside every module: the module path of the forward operators whose autograd
    node it runs under (`autograd::engine::evaluate_function: XBackward0`, linked to them by its
    Sequence number, as the profiler records both), -1 for none.  A sequence number whose forward
    operators ran in more than one module path (two forward threads count apart) links none."""
    found = np.full(op_rows.size, -1, dtype=np.int64)
    seq = ops["seq"].to_numpy() if "seq" in ops.columns else None
    if seq is None or not (~inside).any():
        return found
    seq = np.asarray(seq, dtype=np.int64)
    names = ops["name"].to_numpy(dtype=object)
    is_engine = per_value(names, lambda n: str(n).startswith(BACKWARD_PREFIX)) & (seq >= 0)
    if not is_engine.any():
        return found
    # The forward side: (sequence number, path) of the operators inside modules, kept where unique.
    fwd = inside & (seq[op_rows] >= 0)
    pairs = pd.DataFrame({"seq": seq[op_rows[fwd]], "path": op_path[fwd]}).drop_duplicates()
    pairs = pairs[~pairs["seq"].duplicated(keep=False)]
    if pairs.empty:
        return found
    # The backward side: each operator's engine call (itself, or its nearest ancestor that is one).
    outside = np.flatnonzero(~inside)
    rows = op_rows[outside]
    engine = np.where(is_engine[rows], rows, nearest_marked_ancestor(ops["parent"].to_numpy(), is_engine, rows))
    linked = engine >= 0
    lookup = pd.Series(pairs["path"].to_numpy(), index=pairs["seq"].to_numpy())
    paths = lookup.reindex(seq[engine[linked]]).to_numpy()
    found[outside[linked]] = np.where(np.isnan(paths), -1, paths).astype(np.int64)
    return found


def step_of(steps: pd.DataFrame, at: np.ndarray) -> np.ndarray:
    """The ProfilerStep#N number whose range holds each time, -1 for none."""
    if steps is None or not len(steps):
        return np.full(at.size, -1, dtype=np.int64)
    order = np.argsort(steps["start_ns"].to_numpy(), kind="stable")
    s_start = steps["start_ns"].to_numpy()[order]
    s_end = steps["end_ns"].to_numpy()[order]
    s_step = steps["step"].to_numpy()[order].astype(np.int64)
    pos = np.searchsorted(s_start, at, side="right") - 1
    ok = (pos >= 0) & (at < s_end[np.maximum(pos, 0)])
    return np.where(ok, s_step[np.maximum(pos, 0)], -1)


# ------------------------------------------------------------------ Python stacks
def python_stacks(torch, frames: Dict[str, np.ndarray], nesting: Optional[np.ndarray] = None
                  ) -> Tuple[pd.DataFrame, pd.DataFrame]:
    """(python_stacks, python_stack_ops): see the module docstring."""
    ops = torch.ops
    n_frames = frames["start"].size
    # Frames and operators nested together: an operator's nearest frame ancestor is where it ran.
    start = np.concatenate([frames["start"], ops["start_ns"].to_numpy()])
    parent = nest_frames_and_ops(torch, frames) if nesting is None else nesting
    is_frame = np.arange(start.size) < n_frames
    frame_parent = nearest_marked_ancestor(parent, is_frame, np.arange(n_frames))
    op_frame = nearest_marked_ancestor(parent, is_frame, np.arange(n_frames, start.size))

    name_codes, distinct = object_factorize(frames["name"])
    path, path_parent, path_name = path_ids(frame_parent, name_codes)
    n_paths = path_parent.size
    duration = (frames["end"] - frames["start"]).astype(np.float64)
    child_wall = np.bincount(frame_parent + 1, weights=duration, minlength=n_frames + 1)[1:]
    per_path = lambda values: np.bincount(path, weights=values, minlength=n_paths)

    launcher, gpu_ns = gpu_launches(torch)
    launch_frame = op_frame[launcher]
    framed = launch_frame >= 0
    gpu_self = np.bincount(path[launch_frame[framed]], weights=gpu_ns[framed], minlength=n_paths)
    launches_self = np.bincount(path[launch_frame[framed]], minlength=n_paths).astype(np.float64)
    stacks = pd.DataFrame({
        "path_id": np.arange(n_paths), "parent_id": path_parent, "name": distinct[path_name],
        "depth": depths(path_parent), "calls": np.bincount(path, minlength=n_paths).astype(np.int64),
        "cpu_self_ns": per_path(duration - child_wall), "cpu_total_ns": per_path(duration),
        "gpu_self_ns": gpu_self, "gpu_ns": _subtree_sums(path_parent, gpu_self),
        "kernels": _subtree_sums(path_parent, launches_self).astype(np.int64)})
    stack_ops = _stack_ops(torch, path, op_frame, parent, n_frames, launcher, gpu_ns, launch_frame)
    return collapse_small_paths(stacks, stack_ops)


def _subtree_sums(path_parent: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per path: its value plus its descendants' (paths are numbered parents first)."""
    total = values.astype(np.float64).copy()
    for p in range(path_parent.size - 1, -1, -1):  # children after parents: one reverse pass
        if path_parent[p] >= 0:
            total[path_parent[p]] += total[p]
    return total


def _stack_ops(torch, path, op_frame, parent, n_frames, launcher, gpu_ns, launch_frame) -> pd.DataFrame:
    """Per path: its outermost operators by name (CPU time, GPU time of their subtree), and the
    GPU activities by name launched under it directly."""
    ops = torch.ops
    n_ops = len(ops)
    op_nodes = np.arange(n_frames, n_frames + n_ops)
    op_parent = parent[op_nodes]
    # Outermost in its frame: its parent is the frame itself (not another operator).
    outermost = (op_frame >= 0) & (op_parent == op_frame)
    climbed, carried = climb_ancestors(ops["parent"].to_numpy(), launcher, gpu_ns)
    op_gpu = np.bincount(climbed, weights=carried, minlength=n_ops)
    rows = np.flatnonzero(outermost)
    op_part = pd.DataFrame({"path_id": path[op_frame[rows]], "kind": "op",
                            "name": ops["name"].to_numpy(dtype=object)[rows], "calls": 1,
                            "cpu_ns": _durations(ops)[rows], "gpu_ns": op_gpu[rows]})
    framed = launch_frame >= 0
    gpu_names = torch.gpu["name"].to_numpy(dtype=object)[torch.gpu["op"].to_numpy() >= 0]
    kernel_part = pd.DataFrame({"path_id": path[launch_frame[framed]], "kind": "kernel",
                                "name": gpu_names[framed], "calls": 1, "cpu_ns": 0.0, "gpu_ns": gpu_ns[framed]})
    both = pd.concat([op_part, kernel_part], ignore_index=True)
    return _group_stack_ops(both)


def _group_stack_ops(frame: pd.DataFrame) -> pd.DataFrame:
    if not len(frame):
        return pd.DataFrame(columns=STACK_OPS_COLUMNS)
    out = frame.groupby(["path_id", "kind", "name"], sort=False).agg(
        calls=("calls", "sum"), cpu_ns=("cpu_ns", "sum"), gpu_ns=("gpu_ns", "sum")).reset_index()
    return out.sort_values(["path_id", "kind", "gpu_ns", "cpu_ns"], ascending=[True, False, False, False],
                           kind="stable")[STACK_OPS_COLUMNS].reset_index(drop=True)


def collapse_small_paths(stacks: pd.DataFrame, stack_ops: pd.DataFrame) -> Tuple[pd.DataFrame, pd.DataFrame]:
    """Paths under COLLAPSE_SHARE of both the CPU and the GPU total merged, per parent, into one
    "(other)" row (its self time is the whole of theirs); the totals are unchanged.  Path ids are
    renumbered 0..n-1, parents first."""
    roots = stacks["parent_id"].to_numpy() < 0
    cpu_total = float(stacks["cpu_total_ns"].to_numpy()[roots].sum())
    gpu_total = float(stacks["gpu_ns"].to_numpy()[roots].sum())
    small = (stacks["cpu_total_ns"].to_numpy() < COLLAPSE_SHARE * cpu_total) \
        & (stacks["gpu_ns"].to_numpy() <= COLLAPSE_SHARE * gpu_total)
    parent = stacks["parent_id"].to_numpy()
    # A path is dropped when it or an ancestor is small: its top-most small ancestor stands for it.
    top_small = np.where(small, np.arange(len(stacks)), -1)
    for p in range(len(stacks)):  # parents first
        if parent[p] >= 0 and top_small[parent[p]] >= 0:
            top_small[p] = top_small[parent[p]]
    dropped_top = np.flatnonzero(top_small == np.arange(len(stacks)))
    if not dropped_top.size:
        return stacks, stack_ops
    kept = top_small < 0
    other_parent = parent[dropped_top]
    groups, heads = pd.factorize(other_parent)
    n_kept = int(kept.sum())
    renumber = np.full(len(stacks), -1, dtype=np.int64)
    renumber[kept] = np.arange(n_kept)
    other_id = n_kept + np.arange(len(heads))
    renumber[dropped_top] = other_id[groups]
    renumber[~kept] = renumber[top_small[~kept]]
    sums = lambda col: np.bincount(groups, weights=stacks[col].to_numpy()[dropped_top].astype(np.float64), minlength=len(heads))
    heads = np.asarray(heads, dtype=np.int64)
    depth = stacks["depth"].to_numpy()
    others = pd.DataFrame({
        "path_id": other_id, "parent_id": np.where(heads >= 0, renumber[np.maximum(heads, 0)], -1), "name": OTHER,
        "depth": np.where(heads >= 0, depth[np.maximum(heads, 0)] + 1, 0), "calls": sums("calls").astype(np.int64),
        "cpu_self_ns": sums("cpu_total_ns"), "cpu_total_ns": sums("cpu_total_ns"), "gpu_self_ns": sums("gpu_ns"),
        "gpu_ns": sums("gpu_ns"), "kernels": sums("kernels").astype(np.int64)})
    rest = stacks[kept].copy()
    rest["path_id"] = renumber[kept]
    rest["parent_id"] = np.where(rest["parent_id"].to_numpy() >= 0, renumber[np.maximum(rest["parent_id"].to_numpy(), 0)], -1)
    merged = pd.concat([rest, others], ignore_index=True)[STACK_COLUMNS]
    ops = stack_ops.copy()
    ops["path_id"] = renumber[ops["path_id"].to_numpy(dtype=np.int64)]
    return merged, _group_stack_ops(ops)
