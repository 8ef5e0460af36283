"""Operator FLOPs / bytes (tb_hwprof.analysis.op_perf_models) against independent computations.

1. TraceLens's own reports of four traces (torch/tracelens_reference/<trace>/GEMM.csv, SDPA_fwd.csv,
   unified_perf_summary.csv): every row is matched to its trace events, read here with stdlib
   gzip + json (not the tb_hwprof reader), and our cost of each event must equal the row's.
2. Models those reports lack (convolution backward, bmm / matmul, attention backward): formulas
   written out below from first principles, on the real shapes of sample traces, and, where torch
   is installed, torch.utils.flop_counter's own formulas and a real torch.profiler recording.
"""
import ast
import csv
import functools
import gzip
import json
import math
from collections import defaultdict

import pytest

from conftest import sample
from tb_hwprof.analysis.op_perf_models import op_category, op_cost
from tb_hwprof.core.errors import InputError

REFERENCE_TRACES = ("tracelens_h100_bert_small", "tracelens_h100_falconsai_vit",
                    "tracelens_mi300x_bert_small", "tracelens_mi300x_falconsai_vit")
ARG_KEYS = ("Input Dims", "Input type", "Concrete Inputs")
# TraceLens's 'param: X' columns and our params' names for them.
PARAM_COLUMNS = {"GEMM.csv": ("M", "N", "K", "B", "bias"),
                 "SDPA_fwd.csv": ("B", "N_Q", "H_Q", "N_KV", "H_KV", "d_h_qk", "d_h_v", "dropout", "causal")}
# TraceLens's op categories -> ours (ours fold fwd / bwd; see op_perf_models' comment).
OUR_CATEGORY = {"GEMM": "GEMM", "SDPA_fwd": "SDPA", "SDPA_bwd": "SDPA", "CONV_fwd": "CONV", "CONV_bwd": "CONV",
                "NORM_fwd": "normalisation", "NORM_bwd": "normalisation", "elementwise": "elementwise",
                "reduce": "reduction", "record_param_comms": "communication", "other": "other"}
MB = 1024 * 1024


# -- reading the traces and the reports ------------------------------------------------------
@functools.lru_cache(maxsize=None)
def cpu_ops(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]
    return tuple(e for e in events if e.get("cat") == "cpu_op")


def as_text(value) -> str:
    """The compact JSON text the torch reader hands op_cost."""
    return json.dumps(value, separators=(",", ":"))


def cost_of(event):
    args = event.get("args", {})
    return op_cost(event["name"], *(as_text(args[k]) if k in args else None for k in ARG_KEYS))


def arg_key(name, dims, types, concrete):
    return name, json.dumps(dims), json.dumps(types), json.dumps(concrete)


def events_by_args(path):
    found = defaultdict(list)
    for event in cpu_ops(path):
        args = event.get("args", {})
        found[arg_key(event["name"], *(args.get(k) for k in ARG_KEYS))].append(event)
    return found


def from_report(text):
    """TraceLens prints args as Python literals ('((512,), (141, 512))'): back to JSON lists."""
    return json.loads(json.dumps(ast.literal_eval(text)))


def report_rows(samples_dir, trace, report):
    path = sample(samples_dir, f"torch/tracelens_reference/{trace}/{report}")
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def row_key(row, suffix=""):
    return arg_key(row["name"], *(from_report(row[k + suffix]) for k in ARG_KEYS))


def bias_free_flops_and_out_elements(row):
    """A TraceLens conv row's flops (it never counts the bias) and, from them, the output's elements:
    flops = 2 * out elements * (C_in/groups * kernel volume)."""
    weight = from_report(row["Input Dims"])[1]
    flops = float(row["GFLOPS"]) * 1e9
    return flops, flops / (2 * math.prod(weight[1:]))


def children(path, parent, name):
    """`name` ops nested in `parent` (same thread, inside its time span)."""
    end = parent["ts"] + parent["dur"]
    return [e for e in cpu_ops(path) if e["name"] == name and e["tid"] == parent["tid"]
            and parent["ts"] <= e["ts"] and e["ts"] + e["dur"] <= end]


# -- 1. TraceLens's reports -------------------------------------------------------------------
@pytest.mark.parametrize("report", ["GEMM.csv", "SDPA_fwd.csv"])
@pytest.mark.parametrize("trace", REFERENCE_TRACES)
def test_every_gemm_and_sdpa_row_of_tracelens_is_matched(samples_dir, trace, report):
    trace_path = sample(samples_dir, f"torch/{trace}.json.gz")
    rows = report_rows(samples_dir, trace, report)
    by_args = events_by_args(trace_path)
    assert rows, f"{report} of {trace} has no rows"
    matched = 0
    for row in rows:
        events = by_args.get(row_key(row, "_first"), [])
        where = f"{trace}/{report} row {row['name']} {row['Input Dims_first']}"
        assert len(events) == int(row["name_count"]), f"{where}: {len(events)} trace events"
        for event in events:
            cost = cost_of(event)
            assert cost.flops / 1e9 == pytest.approx(float(row["GFLOPS_first"]), rel=1e-9), where
            assert cost.bytes / MB == pytest.approx(float(row["Data Moved (MB)_first"]), rel=1e-9), where
            assert not cost.repeated and not cost.estimate
            for column in PARAM_COLUMNS[report]:
                assert cost.params[column] == ast.literal_eval(row[f"param: {column}"]), f"{where}: {column}"
        matched += 1
    assert matched == len(rows)


@pytest.mark.parametrize("trace", REFERENCE_TRACES)
def test_every_row_of_tracelens_unified_summary_is_matched(samples_dir, trace):
    """Categories for every row; flops and bytes where TraceLens has them, none where it has none
    (elementwise / reduction ops it does not model get only estimated bytes from us)."""
    trace_path = sample(samples_dir, f"torch/{trace}.json.gz")
    rows = report_rows(samples_dir, trace, "unified_perf_summary.csv")
    by_args = events_by_args(trace_path)
    matched = 0
    for row in rows:
        events = by_args.get(row_key(row), [])
        where = f"{trace} unified row {row['name']} {row['Input Dims']}"
        assert len(events) == int(row["operation_count"]), f"{where}: {len(events)} trace events"
        assert op_category(row["name"]) == OUR_CATEGORY[row["op category"]], where
        for cost in map(cost_of, events):
            if not row["GFLOPS"]:
                assert cost is None or (cost.flops is None and cost.estimate), where
                continue
            flops, nbytes = float(row["GFLOPS"]) * 1e9, float(row["Data Moved (MB)"]) * MB
            bias = from_report(row["Input Dims"])[2] if row["name"] == "aten::convolution" else []
            if bias:  # TraceLens misses a convolution's bias: one add per output element, C_out read
                flops += bias_free_flops_and_out_elements(row)[1]
                nbytes += bias[0] * 2  # bf16
            assert cost.flops == pytest.approx(flops, rel=1e-9), where
            assert cost.bytes == pytest.approx(nbytes, rel=1e-9), where
        matched += 1
    assert matched == len(rows) > 0


@pytest.mark.parametrize("trace", REFERENCE_TRACES)
def test_composites_carry_the_cost_tracelens_gives_the_op_they_dispatch_to(samples_dir, trace):
    """aten::linear holds an addmm, aten::scaled_dot_product_attention a _scaled_dot_product_flash_
    attention that holds an aten::_flash_attention_forward: each costs the reference row of the op
    TraceLens models, and only that op is counted (repeated=False)."""
    trace_path = sample(samples_dir, f"torch/{trace}.json.gz")
    rows = {row_key(r, "_first"): r for report in ("GEMM.csv", "SDPA_fwd.csv")
            for r in report_rows(samples_dir, trace, report)}
    checked = defaultdict(int)
    for parent_name, modelled, child_name in (
            ("aten::linear", "aten::addmm", None),
            ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
             "aten::_flash_attention_forward")):
        for parent in (e for e in cpu_ops(trace_path) if e["name"] == parent_name):
            (op,) = children(trace_path, parent, modelled)
            row = rows[arg_key(op["name"], *(op["args"][k] for k in ARG_KEYS))]
            chain = [parent] + (children(trace_path, op, child_name) if child_name else [])
            for event in chain:
                cost = cost_of(event)
                assert cost.repeated, event["name"]
                assert cost.flops / 1e9 == pytest.approx(float(row["GFLOPS_first"]), rel=1e-9), event["name"]
                assert cost.bytes / MB == pytest.approx(float(row["Data Moved (MB)_first"]), rel=1e-9)
                checked[event["name"]] += 1
    assert set(checked) == {"aten::linear", "aten::scaled_dot_product_attention", "aten::_flash_attention_forward"}


@pytest.mark.parametrize("trace", ["tracelens_h100_falconsai_vit", "tracelens_mi300x_falconsai_vit"])
def test_convolutions_below_aten_convolution_match_its_tracelens_row(samples_dir, trace):
    """conv2d / _convolution / miopen_convolution pass the bias (TraceLens row + bias);
    cudnn_convolution adds it afterwards (exactly the TraceLens row)."""
    trace_path = sample(samples_dir, f"torch/{trace}.json.gz")
    rows = report_rows(samples_dir, trace, "unified_perf_summary.csv")
    (row,) = [r for r in rows if r["name"] == "aten::convolution"]
    flops, out_elements = bias_free_flops_and_out_elements(row)
    nbytes, channels = float(row["Data Moved (MB)"]) * MB, from_report(row["Input Dims"])[1][0]
    below = [e for e in cpu_ops(trace_path) if e["name"] in (
        "aten::conv2d", "aten::_convolution", "aten::cudnn_convolution", "aten::miopen_convolution")]
    assert len(below) == 3
    for event in below:
        with_bias = event["name"] != "aten::cudnn_convolution"
        cost = cost_of(event)
        assert cost.repeated
        assert cost.flops == pytest.approx(flops + (out_elements if with_bias else 0), rel=1e-12), event["name"]
        assert cost.bytes == pytest.approx(nbytes + (channels * 2 if with_bias else 0), rel=1e-12), event["name"]


# -- 2. first principles on real shapes --------------------------------------------------------
RESNET = "torch/tracelens_mi300x_resnet_ddp_rank0.json.gz"


def conv_terms(x, w, stride, padding, dilation):
    """Output size per spatial dim and the multiply-adds of a (non-transposed) convolution:
    each output element (n, k, p, q) sums C/groups * R * S products."""
    out_spatial = [(size + 2 * pad - dil * (k - 1) - 1) // st + 1
                   for size, k, st, pad, dil in zip(x[2:], w[2:], stride, padding, dilation)]
    out_elements = x[0] * w[0] * math.prod(out_spatial)
    return out_spatial, out_elements * math.prod(w[1:])


def test_resnet_convolutions_forward_from_first_principles(samples_dir):
    path = sample(samples_dir, RESNET)
    checked = 0
    for event in cpu_ops(path):
        if event["name"] not in ("aten::convolution", "aten::miopen_convolution"):
            continue
        dims, types, concrete = (event["args"][k] for k in ARG_KEYS)
        x, w = dims[0], dims[1]
        if event["name"] == "aten::convolution":  # (input, weight, bias, stride, padding, dilation, ...)
            stride, padding, dilation = (ast.literal_eval(concrete[i]) for i in (3, 4, 5))
        else:  # miopen_convolution(self, weight, bias, padding, stride, dilation, ...)
            padding, stride, dilation = (ast.literal_eval(concrete[i]) for i in (3, 4, 5))
        assert types[:2] == ["c10::BFloat16"] * 2 and dims[2] == []  # ResNet convs: bf16, no bias
        out_spatial, macs = conv_terms(x, w, stride, padding, dilation)
        cost = cost_of(event)
        assert cost.flops == 2 * macs
        assert cost.bytes == 2 * (math.prod(x) + math.prod(w) + x[0] * w[0] * math.prod(out_spatial))
        assert list(cost.params["output_shape"]) == [x[0], w[0]] + out_spatial
        checked += 1
    assert checked == 2 * 117


def test_resnet_convolution_backward_from_first_principles(samples_dir):
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    output_padding, groups, output_mask): the input gradient (read dO and W, write dX) and the weight
    gradient (read dO and X, write dW) each take the forward's multiply-adds; output_mask says which
    are computed (the first layer needs no input gradient)."""
    path = sample(samples_dir, RESNET)
    masks = defaultdict(int)
    for event in (e for e in cpu_ops(path) if e["name"] == "aten::convolution_backward"):
        dims, types, concrete = (event["args"][k] for k in ARG_KEYS)
        grad_out, x, w = dims[:3]
        stride, padding, dilation = (ast.literal_eval(concrete[i]) for i in (4, 5, 6))
        want_input, want_weight, want_bias = ast.literal_eval(concrete[10])
        out_spatial, macs = conv_terms(x, w, stride, padding, dilation)
        assert grad_out == [x[0], w[0]] + out_spatial  # the recorded dO agrees with the forward geometry
        assert not want_bias and types[:3] == ["c10::BFloat16"] * 3
        dO, dX, dW = math.prod(grad_out), math.prod(x), math.prod(w)
        cost = cost_of(event)
        assert cost.flops == 2 * macs * (want_input + want_weight)
        assert cost.bytes == 2 * (want_input * (dO + dW + dX) + want_weight * (dO + dX + dW))
        masks[want_input, want_weight] += 1
    assert masks == {(True, True): 57, (False, True): 3}


def test_bmm_and_matmul_from_first_principles(samples_dir):
    """bmm [b, m, k] @ [b, k, n] and matmul with torch.matmul's broadcasting (float32 operands);
    events whose recorded args are not two tensors (this sampled trace has some) get no cost."""
    path = sample(samples_dir, "torch/hta_sampled_2rank_rank0.json.gz")
    checked = defaultdict(int)
    for event in cpu_ops(path):
        if event["name"] not in ("aten::bmm", "aten::matmul"):
            continue
        dims, types = event["args"]["Input Dims"], event["args"]["Input type"]
        cost = cost_of(event)
        if len(dims) != 2:
            assert cost is None
            checked["malformed"] += 1
            continue
        a, b = dims
        assert types == ["float", "float"] and len(a) >= 2 and len(b) >= 2
        batch = math.prod(_broadcast_batch(a[:-2], b[:-2]))
        m, k, n = a[-2], a[-1], b[-1]
        assert cost.flops == 2 * batch * m * n * k
        assert cost.bytes == 4 * (math.prod(a) + math.prod(b) + batch * m * n)
        assert cost.repeated == (event["name"] == "aten::matmul")
        checked[event["name"]] += 1
    assert checked["aten::bmm"] == 40 and checked["aten::matmul"] > 0


def _broadcast_batch(a, b):
    width = max(len(a), len(b))
    a, b = [1] * (width - len(a)) + list(a), [1] * (width - len(b)) + list(b)
    assert all(p == q or 1 in (p, q) for p, q in zip(a, b))
    return [max(p, q) for p, q in zip(a, b)]


def attention_backward_args(forward_event, causal):
    """_scaled_dot_product_flash_attention_backward(grad_out, query, key, value, out, logsumexp, cum_seq_q,
    cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset, scale) as the profiler
    would record it, built from a real forward's shapes (no sample trace has an attention backward)."""
    q, k, v = forward_event["args"]["Input Dims"][:3]
    dtype = forward_event["args"]["Input type"][0]
    dims = [q, q, k, v, q, q[:3], [], [], [], [], [], [], [], [], []]
    types = [dtype] * 5 + ["float", "", "", "Scalar", "Scalar", "Scalar", "Scalar", "", "", "Scalar"]
    concrete = [""] * 8 + [str(q[2]), str(k[2]), "0.", str(causal), "", "", "0.125"]
    return dims, types, concrete


@pytest.mark.parametrize("causal", [False, True])
def test_attention_backward_from_first_principles(samples_dir, causal):
    """Backward recomputes S = Q K^T, then dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q: five
    (N_Q x N_KV x d) matmuls per head; causal keeps half the pairs.  Bytes: Q, K, V, dO read and
    dQ, dK, dV written (TraceLens's list)."""
    checked = 0
    for trace in ("tracelens_h100_bert_small", "tracelens_h100_falconsai_vit"):
        path = sample(samples_dir, f"torch/{trace}.json.gz")
        forward = next(e for e in cpu_ops(path) if e["name"] == "aten::_scaled_dot_product_flash_attention")
        B, H, N, d = forward["args"]["Input Dims"][0]
        cost = op_cost("aten::_scaled_dot_product_flash_attention_backward",
                       *map(as_text, attention_backward_args(forward, causal)))
        assert cost.flops == 5 * 2 * B * H * N * N * d * (0.5 if causal else 1)
        assert cost.bytes == 2 * 7 * B * H * N * d  # bf16
        assert cost.params["causal"] is causal
        checked += 1
    assert checked == 2


def test_causal_attention_with_fewer_queries_than_keys_counts_the_unmasked_pairs():
    """Top-left causal mask (PyTorch's is_causal): query i sees keys 0..i, so 4 queries over 10 keys
    see 1 + 2 + 3 + 4 = 10 of the 40 pairs."""
    q, kv = [1, 2, 4, 64], [1, 2, 10, 64]
    cost = op_cost("aten::_scaled_dot_product_efficient_attention", [q, kv, kv, [], [], [], [], []],
                   ["float"] * 3 + ["", "Scalar", "Scalar", "Scalar", ""], ["", "", "", "", "False", "0.", "True", ""])
    assert cost.flops == 2 * 2 * 64 * 2 * 10  # (QK^T + PV) per head: 2 * pairs * d each
    assert cost.bytes == 4 * (2 * (2 * 4 * 64) + 2 * (2 * 10 * 64))  # float32 Q and O, K and V


# -- torch's own formulas and a real torch.profiler recording (when torch is installed) -----------
def test_resnet_convolutions_against_torch_flop_counter(samples_dir):
    flop_counter = pytest.importorskip("torch.utils.flop_counter")
    path = sample(samples_dir, RESNET)
    checked = 0
    for event in cpu_ops(path):
        dims, _, concrete = (event["args"].get(k) for k in ARG_KEYS)
        if event["name"] == "aten::convolution":
            out_spatial, _ = conv_terms(dims[0], dims[1], *(ast.literal_eval(concrete[i]) for i in (3, 4, 5)))
            expected = flop_counter.conv_flop_count(dims[0], dims[1], [dims[0][0], dims[1][0]] + out_spatial)
        elif event["name"] == "aten::convolution_backward":
            mask = ast.literal_eval(concrete[10])
            expected = flop_counter.conv_backward_flop(
                dims[0], dims[1], dims[2], None, None, None, None, False, None, None, mask, out_val=dims[1:3])
        else:
            continue
        assert cost_of(event).flops == expected, event["name"]
        checked += 1
    assert checked == 117 + 60


def test_attention_against_torch_flop_counter(samples_dir):
    flop_counter = pytest.importorskip("torch.utils.flop_counter")
    for trace in REFERENCE_TRACES:
        forward = next(e for e in cpu_ops(sample(samples_dir, f"torch/{trace}.json.gz"))
                       if e["name"] == "aten::_scaled_dot_product_flash_attention")
        q, k, v = forward["args"]["Input Dims"][:3]
        assert cost_of(forward).flops == flop_counter.sdpa_flop_count(q, k, v)
        backward = op_cost("aten::_scaled_dot_product_flash_attention_backward",
                           *map(as_text, attention_backward_args(forward, False)))
        assert backward.flops == flop_counter.sdpa_backward_flop_count(q, q, k, v)


def test_ops_recorded_by_torch_profiler_against_torch_flop_formulas(tmp_path):
    """Arg layouts as torch.profiler records them on this machine's CPU: causal attention forward and
    backward (BERT-small's shape), a grouped strided conv with bias and a transposed conv, forward
    and backward, and a broadcasting matmul."""
    torch = pytest.importorskip("torch")
    flop_counter = pytest.importorskip("torch.utils.flop_counter")
    import torch.nn.functional as F

    q, k, v = (torch.randn(1, 8, 141, 64, requires_grad=True) for _ in range(3))
    x, w, bias = torch.randn(2, 4, 17, 17, requires_grad=True), torch.randn(6, 2, 3, 3, requires_grad=True), \
        torch.randn(6, requires_grad=True)
    wt = torch.randn(4, 3, 3, 3, requires_grad=True)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
        F.conv2d(x, w, bias, stride=2, padding=1, groups=2).sum().backward()
        F.conv_transpose2d(x, wt, stride=2, padding=1, output_padding=1).sum().backward()
        torch.matmul(torch.randn(4, 5, 6), torch.randn(6, 7))
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    ops = [e for e in json.loads((tmp_path / "trace.json").read_text())["traceEvents"] if e.get("cat") == "cpu_op"]
    found = {}
    for event in ops:
        found.setdefault(event["name"], []).append((event, cost_of(event)))

    (attention, cost), = found["aten::_scaled_dot_product_flash_attention_for_cpu"]
    assert cost.flops == flop_counter.sdpa_flop_count(*attention["args"]["Input Dims"][:3]) / 2  # causal
    (attention, cost), = found["aten::_scaled_dot_product_flash_attention_for_cpu_backward"]
    assert cost.flops == flop_counter.sdpa_backward_flop_count(*attention["args"]["Input Dims"][:4]) / 2

    forward_convs = found["aten::convolution"]
    assert len(forward_convs) == 2
    for event, cost in forward_convs:
        dims, concrete = event["args"]["Input Dims"], event["args"]["Concrete Inputs"]
        transposed = concrete[6] == "True"
        out = list(cost.params["output_shape"])
        expected_out = [2, 6, 9, 9] if not transposed else [2, 3, 34, 34]  # (17+2-2-1)//2+1; (17-1)*2-2+2+1+1
        assert out == expected_out
        bias_adds = math.prod(out) if dims[2] else 0
        assert cost.flops == flop_counter.conv_flop_count(dims[0], dims[1], out, transposed) + bias_adds
    backward_convs = found["aten::convolution_backward"]
    assert len(backward_convs) == 2
    for event, cost in backward_convs:
        dims, concrete = event["args"]["Input Dims"], event["args"]["Concrete Inputs"]
        mask, groups = ast.literal_eval(concrete[10]), int(concrete[9])
        bias_sum = math.prod(dims[0]) if mask[2] else 0
        if groups == 1:
            expected = flop_counter.conv_backward_flop(dims[0], dims[1], dims[2], None, None, None, None,
                                                       concrete[7] == "True", None, None, mask, out_val=dims[1:3])
        else:
            # torch's weight-gradient formula multiplies by the group count (it takes batch = C_in over the
            # full weight); each weight element really sums N * P * Q products: 2 * |W| * |dO| / C_out.
            dO, x, w = dims[:3]
            forward_flops = 2 * math.prod(dO) * math.prod(w[1:])
            expected = mask[0] * forward_flops + mask[1] * 2 * math.prod(w) * math.prod(dO) // dO[1]
        assert cost.flops == expected + bias_sum, f"groups={groups}"
    (_, cost), = found["aten::matmul"]
    assert cost.flops == 2 * 4 * 5 * 6 * 7 and cost.repeated


# -- categories, input errors, caching ----------------------------------------------------------
@pytest.mark.parametrize("category, names", [
    ("GEMM", ["aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
              "aten::_scaled_mm", "tex_ts::te_gemm_ts"]),
    ("SDPA", ["aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
              "aten::_scaled_dot_product_efficient_attention_backward", "aten::_flash_attention_forward",
              "aten::_efficient_attention_backward", "flash_attn::_flash_attn_forward"]),
    ("CONV", ["aten::convolution", "aten::_convolution", "aten::cudnn_convolution", "aten::conv2d",
              "aten::convolution_backward", "aten::miopen_convolution"]),
    ("communication", ["nccl:all_reduce", "c10d::allreduce_", "record_param_comms", "c10d::_allgather_base_"]),
    ("elementwise", ["aten::add", "aten::mul_", "aten::div", "aten::sub", "aten::copy_", "aten::gelu",
                     "aten::relu_", "aten::silu", "aten::_foreach_add_"]),
    ("reduction", ["aten::sum", "aten::mean", "aten::softmax", "aten::_softmax", "aten::amax"]),
    ("normalisation", ["aten::layer_norm", "aten::native_layer_norm_backward", "aten::batch_norm",
                       "aten::native_group_norm", "aten::_fused_rms_norm", "_C::fused_add_rms_norm"]),
    ("other", ["aten::index_select", "aten::cat", "aten::empty", "fbgemm::split_embedding_codegen_lookup",
               "aten::convert_element_type"]),
])
def test_categories(category, names):
    assert {name: op_category(name) for name in names} == {name: category for name in names}


def test_args_that_are_not_json_lists_name_the_trace_the_op_and_the_fix():
    with pytest.raises(InputError) as raised:
        op_cost("aten::mm", "[[2, 3], [3", '["float","float"]', None, source="run1/trace.json")
    message = str(raised.value)
    assert message.startswith("run1/trace.json: aten::mm: its 'Input Dims' is not JSON") and "record_shapes" in message
    with pytest.raises(InputError, match="is a dict, not a list"):
        op_cost("aten::mm", "{}", None, None, source="run1/trace.json")
    assert op_cost("aten::mm", None, None, None) is None  # recorded without shapes: nothing to model


def test_the_same_args_text_gives_the_same_cached_cost():
    args = ("aten::mm", "[[8,16],[16,4]]", '["float","float"]', '["",""]')
    first = op_cost(*args)
    assert op_cost(*args) is first
    assert (first.flops, first.bytes) == (2 * 8 * 16 * 4, 4 * (8 * 16 + 16 * 4 + 8 * 4))
    assert op_cost("aten::mm", [[8, 16], [16, 4]], ["float", "float"], ["", ""]) == first
