"""The nn.Module tree and the Python stacks (tb_hwprof/analysis/torch_modules.py, issue 33).

module_tree against torch-tb-profiler 0.4.3's Module view itself (profiler/module_op.py
aggegate_module_view), run here on every sample trace with `nn.Module:` frames.  tb-profiler 0.4.3
does not know current PyTorch's runtime categories ('cuda_runtime', 'cuda_driver'): it would drop
every launch and report no device time.  It runs on a copy spelled as it expects (those calls
named 'Runtime', as tests/test_torch_steps.py does; GPU-side 'gpu_user_annotation' steps
dropped), timestamps rebased to the first microsecond (doubles at epoch magnitude round ts + dur).
A runtime call without an 'External id' gets 0 in that copy: tb-profiler then keeps it apart from
every operator (its zero-id list) instead of attaching it to the first module of the trace (it
looks calls up by external id, and a module's is None).

python_stacks against the trace JSON read here with the json module: the GPU time of the kernels
launched (by correlation id) by runtime calls inside an operator inside a Python frame, and the
frames' CPU time.
"""
from __future__ import annotations

import collections
import gzip
import json

import numpy as np
import pytest

import tb_hwprof
from tb_hwprof.analysis import torch_modules

from conftest import sample

pytest.importorskip("torch_tb_profiler", reason="torch-tb-profiler (the oracle) is not installed")
from torch_tb_profiler.profiler.data import RunProfileData  # noqa: E402
from torch_tb_profiler.profiler.module_op import aggegate_module_view  # noqa: E402

# Every sample trace with nn.Module frames (grep '"nn.Module: ' over the decompressed samples).
MODULE_TRACES = ["torch/h200_resnet50_bf16_handler_stack.pt.trace.json.gz",
                 "torch/tracelens_b200_eager_8rank_rank0.json.gz", "torch/tracelens_h100_bert_small.json.gz",
                 "torch/tracelens_h100_falconsai_vit.json.gz", "torch/tracelens_mi300x_bert_small.json.gz",
                 "torch/tracelens_mi300x_falconsai_vit.json.gz", "torch/tracelens_mi300x_resnet_ddp_rank0.json.gz"]
RENAMED = {"cuda_runtime": "Runtime", "cuda_driver": "Runtime"}
US = 1000.0
GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
OP_CATEGORIES = {"cpu_op", "operator", "user_annotation"}


def load_events(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def oracle_modules(path):
    """tb-profiler's Module view on the trace spelled its way: {module name: Stats}, and the
    (parent, child) edges of its module hierarchy."""
    doc = load_events(path)
    events = [dict(e, cat=RENAMED.get(e.get("cat"), e.get("cat"))) for e in doc["traceEvents"]
              if e.get("cat") != "gpu_user_annotation"]
    for e in events:
        if e.get("cat") == "Runtime" and "External id" not in (e.get("args") or {}):
            e["args"] = dict(e.get("args") or {}, **{"External id": 0})
    base = int(min(e["ts"] for e in events if "ts" in e))
    for e in events:
        if "ts" in e:
            e["ts"] -= base
    doc["traceEvents"] = events
    data = RunProfileData.from_json("worker0", None, doc)
    stats, edges = {}, set()

    def walk(items, parent):
        for item in items:
            stats[item.name] = item
            if parent is not None:
                edges.add((parent, item.name))
            walk(item.children, item.name)
    walk(aggegate_module_view(data.tid2tree, data.events) or [], None)
    return stats, edges


@pytest.fixture(scope="module")
def analysed(samples_dir):
    cache = {}

    def run(relative):
        if relative not in cache:
            profile = tb_hwprof.read(sample(samples_dir, relative))
            cache[relative] = tb_hwprof.analyse(profile).summaries
        return cache[relative]
    return run


@pytest.mark.parametrize("relative", MODULE_TRACES)
def test_module_tree_equals_tb_profiler_module_view(relative, samples_dir, analysed):
    tree = analysed(relative)["module_tree"]
    theirs, their_edges = oracle_modules(sample(samples_dir, relative))
    ours = tree.groupby("module").agg(calls=("calls", "sum"), operators=("operators", "sum"),
                                      host_total=("host_total_ns", "sum"), host_self=("host_self_ns", "sum"),
                                      device_total=("device_total_ns", "sum"), device_self=("device_self_ns", "sum"))
    assert set(ours.index) == set(theirs)
    for name, row in ours.iterrows():
        stats = theirs[name]
        assert row["calls"] == stats.occurences, name
        assert row["operators"] == stats.operators, name
        # tb-profiler sums microsecond doubles: ~1 ns per call of rounding.
        slack = lambda v: 0.002 * row["calls"] * 10 + 1e-6 * abs(v)  # µs
        for ours_col, their_value in (("host_total", stats.host_duration), ("host_self", stats.self_host_duration),
                                      ("device_total", stats.device_duration),
                                      ("device_self", stats.self_device_duration)):
            assert abs(row[ours_col] / US - their_value) <= slack(their_value), (name, ours_col)
    # The same hierarchy: each module's parent module.
    by_id = dict(zip(tree["path_id"], tree["module"]))
    our_edges = {(by_id[p], m) for p, m in zip(tree["parent_id"], tree["module"]) if p >= 0}
    assert our_edges == their_edges


def test_module_tree_per_step_rows_sum_and_nest(samples_dir, analysed):
    tables = analysed(MODULE_TRACES[0])
    tree = tables["module_tree"]
    steps = tb_hwprof.read(sample(samples_dir, MODULE_TRACES[0])).torch.steps
    assert set(tree["step"]) <= set(steps["step"]) | {-1}
    assert (tree["host_self_ns"] <= tree["host_total_ns"]).all()
    assert (tree["device_self_ns"] <= tree["device_total_ns"] + 1e-6).all()
    # A module's device total is at least its self time plus its child modules' totals.
    children = tree[tree["parent_id"] >= 0].groupby(["step", "parent_id"])["device_total_ns"].sum()
    for (step, parent), child_total in children.items():
        row = tree[(tree["step"] == step) & (tree["path_id"] == parent)].iloc[0]
        assert row["device_total_ns"] >= row["device_self_ns"] + child_total - 1e-6
    # The operators listed per module are the instances the tree counts directly and below.
    ops = tables["module_ops"]
    assert set(ops["path"]) <= set(tree["path"])


@pytest.mark.parametrize("relative", MODULE_TRACES[:3])
def test_a_modules_operators_add_up_to_its_device_time_and_are_part_of_the_runs(samples_dir, analysed, relative):
    """module_ops (the operators the Modules view lists for a module, with their figures in it):
    their GPU self time over a module and its submodules is the module's device total over the steps,
    which module_tree measures on the module frames; and per operator, its figures inside modules
    are a part of its whole-run ones (op_gpu_time)."""
    tables = analysed(relative)
    tree, ops, whole = tables["module_tree"], tables["module_ops"], tables["op_gpu_time"].set_index("op")
    paths = ops["path"].to_numpy(dtype=object)
    forward = (ops["pass"] == "forward").to_numpy()
    for path, device_total in tree.groupby("path")["device_total_ns"].sum().items():
        inside = forward & ((paths == path) | np.char.startswith(paths.astype(str), path + "/"))
        assert ops.loc[inside, "device_ns"].sum() == pytest.approx(device_total, rel=1e-9, abs=1e-3), path
    assert (ops["device_total_ns"] >= ops["device_ns"] - 1e-6).all()
    per_op = ops.groupby("op")[["calls", "device_ns", "device_total_ns", "host_total_ns"]].sum()
    mine = whole.loc[per_op.index]
    assert (per_op["calls"] <= mine["instances"]).all()
    # GPU work launched inside a user annotation (nccl:all_gather) is the enclosing operator's here, as
    # tb-profiler joins it, and the annotation's in op_gpu_time (TraceLens): compare self time in all.
    assert per_op["device_ns"].sum() <= whole["direct_gpu_ns"].sum() + 1e-3
    assert (per_op["device_total_ns"] <= mine["subtree_gpu_ns"] + 1e-3).all()
    assert (per_op["host_total_ns"] <= mine["cpu_total_ns"] + 1e-3).all()
    assert per_op["host_total_ns"].sum() > 0


BACKWARD_OF = {"aten::convolution_backward": "Conv2d_", "aten::native_batch_norm_backward": "BatchNorm2d_",
               "aten::max_pool2d_with_indices_backward": "MaxPool2d_", "aten::mm": "Linear_"}
BACKWARD_TRACES = ["torch/h200_resnet50_bf16_handler_stack.pt.trace.json.gz", "torch/tracelens_mi300x_resnet_ddp_rank0.json.gz"]


def json_backward_gpu_ns(path):
    """GPU time (ns) of the kernels, copies and sets launched by runtime calls inside an autograd
    engine call that carries a sequence number (an operator's node), from the trace JSON."""
    events = [e for e in load_events(path)["traceEvents"] if e.get("ph") == "X"]
    gpu = collections.defaultdict(float)
    for e in events:
        if str(e.get("cat", "")).lower() in GPU_CATEGORIES:
            gpu[(e.get("args") or {}).get("correlation")] += e["dur"]
    engine = collections.defaultdict(list)
    for e in events:
        if str(e.get("name", "")).startswith("autograd::engine::evaluate_function: ") and \
                (e.get("args") or {}).get("Sequence number", -1) >= 0:
            engine[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    total = 0.0
    for e in events:
        correlation = (e.get("args") or {}).get("correlation")
        if str(e.get("cat", "")).lower() in {"cuda_runtime", "cuda_driver", "runtime"} and correlation in gpu:
            if any(a <= e["ts"] and e["ts"] + e["dur"] <= b + 0.001 for a, b in engine[(e["pid"], e["tid"])]):
                total += gpu[correlation]
    return total * US


@pytest.mark.parametrize("relative", BACKWARD_TRACES)
def test_backward_operators_run_in_the_module_whose_forward_made_their_autograd_node(samples_dir, analysed, relative):
    """module_ops' backward rows: the operators under an autograd node (evaluate_function:
    XBackward0) count for the module of the forward operators with its sequence number.  A
    convolution's backward lands in a Conv2d module, a batch norm's in a BatchNorm2d, max pooling's in
    a MaxPool2d, a matrix product's (AddmmBackward0) in a Linear; and on the H200 trace (one forward thread, no checkpointing) nearly all the GPU time
    of the autograd nodes that have a sequence number, summed from the trace JSON, is linked."""
    ops = analysed(relative)["module_ops"]
    backward = ops[ops["pass"] == "backward"]
    assert len(backward)
    for op, module in BACKWARD_OF.items():
        rows = backward[backward["op"] == op]
        assert len(rows), op
        assert all(p.rsplit("/", 1)[-1].startswith(module) for p in rows["path"]), (op, set(rows["path"]))
    linked = float(backward["device_ns"].sum())
    under_nodes = json_backward_gpu_ns(sample(samples_dir, relative))
    assert linked <= under_nodes * (1 + 1e-9)
    if relative.startswith("torch/h200"):
        assert linked >= 0.99 * under_nodes


# -- Python stacks, against the trace JSON --------------------------------------------------------
def independent_stack_totals(path):
    """(GPU µs launched under a Python frame, CPU µs of the outermost frames) from the JSON."""
    events = [e for e in load_events(path)["traceEvents"] if e.get("ph") == "X"]
    gpu = collections.defaultdict(float)
    for e in events:
        if str(e.get("cat", "")).lower() in GPU_CATEGORIES:
            gpu[(e.get("args") or {}).get("correlation")] += e["dur"]
    frames, ops = collections.defaultdict(list), collections.defaultdict(list)
    for e in events:
        cat = str(e.get("cat", "")).lower()
        if cat == "python_function":
            frames[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
        elif cat in OP_CATEGORIES and not str(e.get("name", "")).startswith("ProfilerStep#"):
            ops[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for table in (frames, ops):
        for key in table:
            table[key].sort(key=lambda iv: (iv[0], -iv[1]))
    slack = 0.0015  # µs: ns rounding of the doubles
    under = 0.0
    for e in events:
        correlation = (e.get("args") or {}).get("correlation")
        if str(e.get("cat", "")).lower() not in {"cuda_runtime", "cuda_driver", "runtime"} or correlation not in gpu:
            continue
        thread = (e["pid"], e["tid"])
        # Launched by an operator (an op holds the call) that ran inside a Python frame.
        holders = [o for o in ops[thread] if o[0] <= e["ts"] + slack and e["ts"] + e["dur"] <= o[1] + slack]
        if holders and any(f[0] <= holders[-1][0] + slack and holders[-1][1] <= f[1] + 0.5 for f in frames[thread]):
            under += gpu[correlation]
    outermost = 0.0
    for intervals in frames.values():
        reach = -np.inf
        for s, e in intervals:
            if s >= reach - slack:
                outermost += e - s
                reach = e
            reach = max(reach, e)
    return under, outermost


@pytest.mark.parametrize("relative", [MODULE_TRACES[0], MODULE_TRACES[2]])
def test_stacks_gpu_and_cpu_weights_equal_the_trace(relative, samples_dir, analysed):
    stacks = analysed(relative)["python_stacks"]
    gpu_us, cpu_us = independent_stack_totals(sample(samples_dir, relative))
    roots = stacks[stacks["parent_id"] < 0]
    assert gpu_us > 0
    assert roots["gpu_ns"].sum() / US == pytest.approx(gpu_us, rel=1e-6, abs=0.01)
    assert roots["cpu_total_ns"].sum() / US == pytest.approx(cpu_us, rel=1e-6, abs=0.01 * len(roots))


def test_stacks_self_and_total_are_consistent(analysed):
    stacks = analysed(MODULE_TRACES[0])["python_stacks"]
    ops = analysed(MODULE_TRACES[0])["python_stack_ops"]
    child = stacks[stacks["parent_id"] >= 0].groupby("parent_id")[["cpu_total_ns", "gpu_ns"]].sum()
    total = stacks.set_index("path_id")
    for parent, sums in child.iterrows():
        row = total.loc[parent]
        assert row["cpu_self_ns"] + sums["cpu_total_ns"] == pytest.approx(row["cpu_total_ns"], abs=1e-3)
        assert row["gpu_self_ns"] + sums["gpu_ns"] == pytest.approx(row["gpu_ns"], abs=1e-3)
    assert (stacks["cpu_self_ns"] >= -1e-6).all()
    assert stacks["cpu_self_ns"].sum() == pytest.approx(stacks.loc[stacks["parent_id"] < 0, "cpu_total_ns"].sum())
    # The kernels listed per frame are its GPU self time, in all.
    kernels = ops[ops["kind"] == "kernel"].groupby("path_id")["gpu_ns"].sum()
    assert kernels.sum() == pytest.approx(stacks["gpu_self_ns"].sum())
    # Bounded: paths under 0.1 % of both totals are merged into "(other)".
    others = stacks[stacks["name"] == torch_modules.OTHER]
    assert len(others) > 0 and len(stacks) < 2000
    assert sorted(stacks["path_id"]) == list(range(len(stacks)))
    assert (stacks["parent_id"] < stacks["path_id"]).all()


def test_nest_parents_matches_a_stack_walk():
    rng = np.random.default_rng(7)
    start, end, group = [], [], []
    for g in range(3):  # random nested intervals per group, children overhanging by up to 3 ns
        def grow(lo, hi, depth):
            t = lo
            while t < hi - 10 and depth < 5:
                a = t + int(rng.integers(0, 20))
                b = min(hi, a + int(rng.integers(5, 200)))
                if b <= a:
                    break
                start.append(a), end.append(b + int(rng.integers(0, 4)) * (depth > 0)), group.append(g)
                grow(a + 1, b - 1, depth + 1)
                t = b + int(rng.integers(1, 10))
        grow(0, 5000, 0)
    start, end, group = (np.array(v, dtype=np.int64) for v in (start, end, group))
    parent = torch_modules.nest_parents(start, end, group, tolerance_ns=5)
    order = np.lexsort((-end, start, group))
    expected = np.full(start.size, -1)
    stack = []
    for i in order:
        while stack and (group[stack[-1]] != group[i] or end[stack[-1]] <= start[i] or end[stack[-1]] < end[i] - 5):
            stack.pop()
        expected[i] = stack[-1] if stack else -1
        stack.append(i)
    assert (parent == expected).all()
