"""The PyTorch profiler (Kineto) trace reader against independent computations on every trace we
hold: stdlib json for the events, a plain per-thread stack for the operator nesting and the
launching operator, TraceLens's own ops_summary.csv for the per-operator GPU time."""
import csv
import gzip
import json
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

import tb_hwprof
from tb_hwprof.analysis.torch_ops import op_gpu_time
from tb_hwprof.readers.detect import sniff
from tb_hwprof.core.errors import InputError
from tb_hwprof.core.nesting import Intervals

TRACELENS = ["tracelens_h100_bert_small", "tracelens_h100_falconsai_vit", "tracelens_mi300x_bert_small",
             "tracelens_mi300x_falconsai_vit"]
KERNEL_CATS = {"kernel", "Kernel"}
GPU_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}
OP_CATS = {"cpu_op", "Operator", "user_annotation"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime"}


def torch_samples(samples_dir):
    folder = samples_dir / "torch"
    files = sorted(p for p in folder.glob("*.json*") if p.is_file())
    if not files:
        pytest.skip("no PyTorch traces in the samples")
    return files


def load_json(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def complete_events(doc) -> list:
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return [e for e in events if e.get("ph") == "X"]


def arg(e, *keys, default=None):
    args = e.get("args") or {}
    for k in keys:
        if k in args:
            return args[k]
    return default


def test_every_sample_is_detected_and_read(samples_dir):
    for path in torch_samples(samples_dir):
        assert sniff(path) == "pytorch-trace", path.name
        profile = tb_hwprof.read(path)
        events = complete_events(load_json(path))
        kernels = [e for e in events if e.get("cat") in KERNEL_CATS]
        ops = [e for e in events if e.get("cat") in OP_CATS and not str(e.get("name")).startswith("ProfilerStep#")]
        assert len(profile.kernels) == len(kernels), path.name
        assert len(profile.torch.ops) == len(ops), path.name  # nested, never dropped
        # Durations as the tool wrote them (µs) -> ns.
        assert profile.kernels["duration_ns"].sum() == pytest.approx(sum(e["dur"] for e in kernels) * 1000, abs=len(kernels))
        assert profile.timeline is not None and len(profile.timeline) > 0


def _stack_parents(ops: list, tolerance_us: float) -> list:
    """Innermost enclosing op of each op, by a per-thread stack (a different algorithm from the reader's)."""
    order = sorted(range(len(ops)), key=lambda i: (ops[i]["pid"], ops[i]["tid"], ops[i]["ts"], -ops[i]["dur"]))
    parent = [-1] * len(ops)
    stack, thread = [], None
    for i in order:
        e = ops[i]
        if (e["pid"], e["tid"]) != thread:
            stack, thread = [], (e["pid"], e["tid"])
        end = e["ts"] + e["dur"]
        while stack and not (ops[stack[-1]]["ts"] + ops[stack[-1]]["dur"] >= end - tolerance_us
                             and ops[stack[-1]]["ts"] + ops[stack[-1]]["dur"] > e["ts"]):
            stack.pop()
        parent[i] = stack[-1] if stack else -1
        stack.append(i)
    return parent


@pytest.mark.parametrize("name", ["tracelens_h100_bert_small.json.gz", "hta_v100_resnet_rank0.json.gz",
                                  "kineto_rn50_v100_jun2021.json.gz", "hta_mi250_rocm62_minitoy.json.gz"])
def test_launching_operator_of_every_kernel(samples_dir, name):
    """Kernel -> runtime call (correlation id) -> innermost operator around the call: recomputed with a stack."""
    path = samples_dir / "torch" / name
    if not path.is_file():
        pytest.skip(name)
    events = complete_events(load_json(path))
    ops = [e for e in events if e.get("cat") in OP_CATS and not str(e.get("name")).startswith("ProfilerStep#")]
    calls = [e for e in events if e.get("cat") in RUNTIME_CATS]
    # Calls are queried like ops: put them on the stack pass with the ops, then read their parent.
    merged = ops + calls
    parent = _stack_parents(merged, tolerance_us=0.5)
    call_op = {}
    for k, call in enumerate(calls):
        p = parent[len(ops) + k]
        while p >= len(ops):  # a call is never an operator's parent in these traces, but be safe
            p = parent[p]
        call_op[arg(call, "correlation")] = ops[p]["name"] if p >= 0 else ""
    expected = [call_op.get(arg(e, "correlation"), "") for e in sorted(
        (e for e in events if e.get("cat") in KERNEL_CATS), key=lambda e: e["ts"])]
    profile = tb_hwprof.read(path)
    got = profile.kernels.sort_values("start_ns", kind="stable")["op"].tolist()
    assert len(got) == len(expected)
    mismatched = [(g, x) for g, x in zip(got, expected) if g != x]
    assert not mismatched, mismatched[:5]
    assert sum(1 for x in expected if x) > 0.9 * len(expected)


def _ns(ts: float) -> int:
    """The documented conversion of a double µs timestamp to ns (readers/torch/decode.py)."""
    whole = int(ts // 1)
    return whole * 1000 + round((ts - whole) * 1000)


def test_operators_overhanging_their_parent_are_nested(samples_dir):
    """hta_v100_resnet_rank0 has children ending up to ~0.15 µs after their parent (float rounding):
    each gets the parent a per-thread stack with the same tolerance finds, and none is dropped."""
    path = samples_dir / "torch" / "hta_v100_resnet_rank0.json.gz"
    if not path.is_file():
        pytest.skip("hta_v100_resnet_rank0.json.gz")
    events = complete_events(load_json(path))
    ops = [dict(e, ts=_ns(e["ts"]), dur=round(e["dur"] * 1000)) for e in events
           if e.get("cat") in OP_CATS and not str(e.get("name")).startswith("ProfilerStep#")]
    parent = _stack_parents(ops, tolerance_us=500)  # ns here
    overhang = [i for i, p in enumerate(parent) if p >= 0 and ops[i]["ts"] + ops[i]["dur"] > ops[p]["ts"] + ops[p]["dur"]]
    assert len(overhang) > 100
    expected = sorted((o["ts"], o["name"], ops[p]["ts"] if p >= 0 else -1, ops[p]["name"] if p >= 0 else "")
                      for o, p in zip(ops, parent))
    t = tb_hwprof.read(path).torch.ops
    par = t["parent"].to_numpy()
    starts, names = t["start_ns"].to_numpy(), t["name"].to_numpy()
    got = sorted((int(s), n, int(starts[p]) if p >= 0 else -1, names[p] if p >= 0 else "")
                 for s, n, p in zip(starts, names, par))
    assert got == expected


def test_nesting_matches_a_brute_force_on_random_nested_intervals():
    rng = np.random.default_rng(7)
    start, end, group = [], [], []
    for g in range(3):
        t = 0
        for _ in range(300):
            s = t + int(rng.integers(0, 3))
            e = s + int(rng.integers(1, 50))
            start.append(s); end.append(e); group.append(g)
            inner = s
            while inner < e - 2 and rng.random() < 0.7:  # children of (s, e)
                cs = inner + int(rng.integers(0, 2)); ce = min(e, cs + int(rng.integers(1, 10)))
                start.append(cs); end.append(ce); group.append(g)
                inner = ce
            t = e
    start, end, group = map(np.array, (start, end, group))
    parents = Intervals(start, end, group).parents(0)
    for i in range(0, start.size, 5):
        cands = [j for j in range(start.size) if j != i and group[j] == group[i] and start[j] <= start[i]
                 and end[j] >= end[i] and end[j] > start[i] and (start[j], -end[j], j) < (start[i], -end[i], i)]
        want = max(cands, key=lambda j: (start[j], -end[j], j)) if cands else -1
        assert parents[i] == want, i


@pytest.mark.parametrize("trace", TRACELENS)
def test_op_gpu_time_equals_tracelens_ops_summary(samples_dir, trace):
    ref_path = samples_dir / "torch" / "tracelens_reference" / trace / "ops_summary.csv"
    if not ref_path.is_file():
        pytest.skip(trace)
    profile = tb_hwprof.read(samples_dir / "torch" / f"{trace}.json.gz")
    ours = op_gpu_time(profile.torch).set_index("op")
    with open(ref_path, newline="") as f:
        reference = list(csv.DictReader(f))
    assert reference
    for row in reference:
        mine = ours.loc[row["name"]]
        assert mine["calls"] == int(row["Count"]), row["name"]
        # TraceLens sums end - start of float µs timestamps (~1 ns per kernel of rounding).
        kernels = int(mine["kernels"])  # a plain int: pytest 9.2 refuses a numpy tolerance
        assert mine["direct_gpu_ns"] == pytest.approx(float(row["total_direct_kernel_time_sum"]) * 1000, abs=2 * kernels)
        assert mine["subtree_gpu_ns"] == pytest.approx(float(row["total_subtree_kernel_time_sum"]) * 1000, abs=2 * kernels)
    # And no operator of ours launches GPU work directly that TraceLens does not list.
    assert set(ours.index[ours["direct_gpu_ns"] > 0]) == {r["name"] for r in reference}


def test_devices_from_device_properties(samples_dir):
    path = samples_dir / "torch" / "tracelens_mi300x_bert_small.json.gz"
    if not path.is_file():
        pytest.skip("mi300x trace")
    props = load_json(path)["deviceProperties"]
    profile = tb_hwprof.read(path)
    assert [d.name for d in profile.devices] == [p["name"] for p in props]
    assert profile.devices[0].vendor == "AMD" and profile.devices[0].sm_count == props[0]["numSms"]
    assert profile.devices[0].peaks["bytes_per_s_dram"].source == "datasheet"


def test_gpu_activity_is_joined_by_correlation(samples_dir):
    """Every GPU activity whose correlation id a runtime call carries is matched to that call."""
    path = samples_dir / "torch" / "kineto_rn50_v100_jun2021.json.gz"
    if not path.is_file():
        pytest.skip("2021 trace")
    events = complete_events(load_json(path))
    call_names = {arg(e, "correlation"): e["name"] for e in events if e.get("cat") in RUNTIME_CATS}
    gpu = [e for e in events if e.get("cat") in GPU_CATS]
    profile = tb_hwprof.read(path)
    t = profile.torch
    launched_by = t.runtime["name"].to_numpy()[t.gpu["runtime"].to_numpy()]
    expected = defaultdict(int)
    for e in gpu:
        expected[call_names.get(arg(e, "correlation"))] += 1
    got = defaultdict(int)
    for name in launched_by:
        got[name] += 1
    assert dict(got) == dict(expected)


# ---------------------------------------------------------------- bad input
def _write(tmp_path, name, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_truncated_gzip_is_an_error_naming_the_file(samples_dir, tmp_path):
    src = (samples_dir / "torch" / "tracelens_h100_bert_small.json.gz").read_bytes()
    bad = _write(tmp_path, "trace.pt.trace.json.gz", src[: len(src) // 2])
    with pytest.raises(InputError) as err:
        tb_hwprof.read(bad)
    assert str(bad) in str(err.value) and "\n" not in str(err.value)


def test_truncated_json_is_an_error(samples_dir, tmp_path):
    text = gzip.decompress((samples_dir / "torch" / "tracelens_h100_bert_small.json.gz").read_bytes())
    bad = _write(tmp_path, "trace.json", text[: len(text) * 2 // 3])
    with pytest.raises(InputError) as err:
        tb_hwprof.read(bad)
    assert "trace.json" in str(err.value)


def test_trace_with_no_events_is_an_error(samples_dir, tmp_path):
    doc = load_json(samples_dir / "torch" / "kineto_h100_cuda129_small.json")
    doc["traceEvents"] = []
    bad = _write(tmp_path, "empty.pt.trace.json", json.dumps(doc).encode())
    with pytest.raises(InputError) as err:
        tb_hwprof.read(bad)
    assert "no events" in str(err.value)


def test_non_utf8_name_is_an_error(samples_dir, tmp_path):
    text = (samples_dir / "torch" / "kineto_h100_cuda129_small.json").read_bytes()
    bad = _write(tmp_path, "bad.json", text.replace(b'"cpu_op"', b'"cpu_\xff\xfeop"', 1))
    with pytest.raises(InputError):
        tb_hwprof.read(bad)


def test_events_missing_fields_are_read_with_what_they_have(samples_dir, tmp_path):
    """An operator without dur or args is still an operator (dur 0), not an error nor a crash."""
    doc = load_json(samples_dir / "torch" / "kineto_h100_cuda129_small.json")
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
    del ops[0]["dur"], ops[0]["args"]
    path = _write(tmp_path, "partial.json", json.dumps(doc).encode())
    profile = tb_hwprof.read(path)
    assert len(profile.torch.ops) == len(ops)


def test_cpu_only_trace_is_a_profile_with_a_note(tmp_path):
    """A real trace torch writes for a CPU-only model (torch is an optional extra)."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        model(torch.randn(8, 16)).sum().backward()
    path = tmp_path / "cpu.pt.trace.json"
    prof.export_chrome_trace(str(path))
    events = complete_events(load_json(path))
    profile_ = tb_hwprof.read(path)
    assert len(profile_.kernels) == 0
    assert any("CPU-only" in n for n in profile_.notes)
    assert len(profile_.torch.ops) == sum(1 for e in events if e.get("cat") in OP_CATS
                                          and not str(e.get("name")).startswith("ProfilerStep#"))
    assert "aten::addmm" in set(profile_.torch.ops["name"])


def test_timestamp_beyond_int64_ns_is_an_error_on_both_decoders(samples_dir, tmp_path):
    """A ts of 1e300 µs is damage, not data: TraceError from either decoder, InputError from the reader."""
    from tb_hwprof.readers.torch import decode

    doc = load_json(samples_dir / "torch" / "kineto_h100_cuda129_small.json")
    next(e for e in doc["traceEvents"] if e.get("cat") == "cpu_op")["ts"] = 1e300
    data = json.dumps(doc).encode()
    with pytest.raises(decode.TraceError):
        decode.decode_events_python(data)
    with pytest.raises(decode.TraceError):
        decode.decode_events(data)
    with pytest.raises(InputError):
        tb_hwprof.read(_write(tmp_path, "huge_ts.json", data))



def test_sparse_flow_ids_pair_as_dense_ones(samples_dir):
    """Correlation ids far above the number of slices (PyTorch's reach 10^8) take the join path of the
    trace writer's flow pairs and the NVTX projection's launches: the same pairs as dense ids."""
    import copy

    from tb_hwprof.analysis.gpu_trace import launches
    from tb_hwprof.logdir.trace import _flow_pairs

    timeline = tb_hwprof.read(samples_dir / "torch" / "hta_v100_resnet_rank0.json.gz").timeline
    sparse = copy.deepcopy(timeline)
    flow = sparse.slices["flow"]
    flow[flow >= 0] += 1 << 40
    keep = np.ones(len(timeline), dtype=bool)
    dense_pairs = _flow_pairs(timeline, keep)
    assert dense_pairs.size > 1000
    assert (_flow_pairs(sparse, keep) == dense_pairs + (1 << 40)).all()
    assert all((a == b).all() for a, b in zip(launches(sparse), launches(timeline)))


@pytest.mark.parametrize("tick_ns", [1, 1000, 100_000])
def test_operator_order_is_start_then_longest_then_file_order(samples_dir, tick_ns):
    """The reader's operator order (columnar.start_then_longest: one stable sort, then only the runs of
    equal starts by end) against Python's sort on (start, -end, position), on a real trace's operator
    times as recorded and coarsened to 1 µs and 100 µs (many equal starts)."""
    from tb_hwprof.core.columnar import start_then_longest
    path = samples_dir / "torch" / "hta_v100_resnet_rank0.json.gz"
    if not path.is_file():
        pytest.skip("hta_v100_resnet_rank0.json.gz")
    ops = [e for e in complete_events(load_json(path)) if e.get("cat") in OP_CATS]
    start = np.array([_ns(e["ts"]) // tick_ns for e in ops], dtype=np.int64)
    end = np.array([(_ns(e["ts"]) + round(e["dur"] * 1000)) // tick_ns for e in ops], dtype=np.int64)
    want = sorted(range(len(ops)), key=lambda i: (start[i], -end[i], i))
    assert (start[1:] == start[:-1]).sum() > (10 if tick_ns == 1 else 1000)
    assert start_then_longest(start, end).tolist() == want


def _scanner_and_decode():
    scanner = pytest.importorskip("tb_hwprof.readers.torch._kineto_scan", reason="the C scanner is not built")
    from tb_hwprof.readers.torch import decode
    return scanner, decode


def _same_events(one, two):
    assert two.strings == one.strings
    for table in ("x", "x_gpu", "x_op", "flows", "instants"):
        a, b = getattr(one, table), getattr(two, table)
        assert list(b) == list(a), table
        for column in a:
            assert b[column].dtype == a[column].dtype, (table, column)
            np.testing.assert_array_equal(b[column], a[column], err_msg=f"{table}.{column}")
    assert (two.metadata, two.top, two.other_events) == (one.metadata, one.top, one.other_events)


def _trace_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


@pytest.mark.parametrize("where", [0.1, 0.5, 0.9])
def test_scan_in_two_parts_equals_one_scan_on_every_sample(samples_dir, where):
    """decode.scan_in_two (two threads, joined) against one scan of the same bytes: every column,
    string table, metadata and top-level value equal, wherever the split falls."""
    scanner, decode = _scanner_and_decode()
    landed = 0
    for path in torch_samples(samples_dir):
        data = _trace_bytes(path)
        near = int(len(data) * where)
        two = decode.scan_in_two(scanner, data, near)
        found = decode._EVENT_START.search(data, near)
        landed += bool(found and scanner.scan_part(data, 0, found.end() - 1)[1])
        if two is not None:
            _same_events(decode._from_native(scanner.scan(data)), two)
    assert landed >= len(torch_samples(samples_dir)) - 2  # the split does land on events (a test that can fail)


def test_scan_in_two_parts_renumbers_string_ids(samples_dir):
    """Flow ids, pids and tids given as strings (a real trace's, rewritten so) are string codes: the
    second part's are renumbered into the first part's table as one scan numbers them."""
    scanner, decode = _scanner_and_decode()
    path = samples_dir / "torch" / "hta_v100_resnet_rank0.json.gz"
    if not path.is_file():
        pytest.skip("hta_v100_resnet_rank0.json.gz")
    data = re.sub(rb'"id": (\d+)', rb'"id": "flow \1"', _trace_bytes(path))
    data = re.sub(rb'"pid": (\d+), "tid": (\d+)', rb'"pid": "p\1", "tid": "t\2"', data)
    one = decode._from_native(scanner.scan(data))
    assert (one.flows["pid"] <= decode.STRING_ID_BASE).sum() > 1000 and len(one.flows["id"]) > 1000
    for where in (0.3, 0.7):
        two = decode.scan_in_two(scanner, data, int(len(data) * where))
        assert two is not None
        _same_events(one, two)
    ids = [one.strings[c] for c in one.flows["id"][:3]]
    assert all(i.startswith("flow ") for i in ids)


@pytest.mark.parametrize("damage", ["truncated", "bad value early", "bad value late"])
def test_damage_on_either_side_of_the_split_is_the_one_scans_error(samples_dir, monkeypatch, damage):
    """A damaged trace decoded in two parts raises the TraceError one scan raises (same message)."""
    scanner, decode = _scanner_and_decode()
    path = samples_dir / "torch" / "hta_v100_resnet_rank0.json.gz"
    if not path.is_file():
        pytest.skip("hta_v100_resnet_rank0.json.gz")
    data = _trace_bytes(path)
    if damage == "truncated":
        data = data[: int(len(data) * 0.8)]
    else:
        at = data.index(b'"ts": ', int(len(data) * (0.2 if damage == "bad value early" else 0.8)))
        data = data[:at] + b'"ts": x' + data[at + 6:]
    with pytest.raises(decode.TraceError) as one:
        decode._from_native(scanner.scan(data))
    monkeypatch.setattr(decode, "TWO_PARTS_FROM", 0)
    with pytest.raises(decode.TraceError) as two:
        decode.decode_events(data)
    assert str(two.value) == str(one.value)


@pytest.mark.parametrize("layout", ["array", "events first", "events between", "two arrays"])
def test_scan_in_two_parts_of_other_document_layouts(samples_dir, layout):
    """A real trace's events as Chrome's array format, with top-level keys after traceEvents, and with
    a second traceEvents array (the last one wins: two parts then leave it to one scan)."""
    scanner, decode = _scanner_and_decode()
    path = samples_dir / "torch" / "hta_v100_resnet_rank0.json.gz"
    if not path.is_file():
        pytest.skip("hta_v100_resnet_rank0.json.gz")
    doc = load_json(path)
    events = doc.pop("traceEvents")
    data = {"array": lambda: json.dumps(events),
            "events first": lambda: json.dumps({"traceEvents": events, **doc}),
            "events between": lambda: json.dumps({"a": 1, "traceEvents": events, **doc}),
            "two arrays": lambda: json.dumps({"traceEvents": events[:100], **doc})[:-1]
            + ', "traceEvents": ' + json.dumps(events) + "}"}[layout]().encode()
    one = decode._from_native(scanner.scan(data))
    for where in (0.05, 0.5, 0.8):
        two = decode.scan_in_two(scanner, data, int(len(data) * where))
        if layout == "two arrays":
            assert two is None
        else:
            _same_events(one, two)
