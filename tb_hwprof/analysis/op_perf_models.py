"""FLOPs and bytes moved by one PyTorch operator, from the shapes torch.profiler records.

Input: an op's name and its "Input Dims", "Input type" and "Concrete Inputs" args (recorded with
record_shapes=True), as decoded JSON lists or as their JSON text (the torch reader hands the text;
results are cached by text, since the same shapes repeat thousands of times in a trace).

The formulas are TraceLens's performance models (AMD-AGI/TraceLens, TraceLens/PerfModel/perf_model.py
and torch_op_mapping.py at commit 171dd747), written anew here.  tests/test_op_perf_models.py checks
them against TraceLens's own reports of four traces.  GFLOPS = flops / 1e9 and "Data Moved (MB)" =
bytes / 2**20 there.  Bytes are the operand tensors each model names (inputs read, outputs written)
times their element size.

Where we knowingly differ from TraceLens (each a limitation of its code at that commit):
- aten::convolution with a bias: TraceLens tests len(Input Dims) == 3, but the op always records 9
  args, so it never counts the bias; we add one add per output element and C_out bias elements.
- aten::convolution_backward: we follow output_mask (TraceLens always counts the input gradient and
  never the bias gradient), and count the bias gradient's traffic in bytes (TraceLens adds elements).
- Transposed convolution with groups: C_out = weight[1] * groups (TraceLens leaves out groups).
- Attention bytes use the tensors' element size (TraceLens assumes 2 bytes); an attention bias or
  mask, when given, is read too.  Backward of every fused kernel (flash, memory-efficient, cuDNN)
  recomputes Q K^T (TraceLens counts that for flash only; torch.utils.flop_counter counts it for all).
  Causal with N_Q != N_KV counts the unmasked (query, key) pairs (TraceLens raises).
- GEMM bias bytes are the bias tensor's own size (TraceLens assumes N elements, per batch).
- Reductions: the output size follows dim (TraceLens reads Concrete Inputs as Python values; they
  are strings, so its output is always one element).
- layer_norm's affine terms follow whether weight / bias were passed (TraceLens: always affine).
- Ops TraceLens leaves unmodelled but that dispatch to one it models (aten::linear, aten::matmul,
  aten::scaled_dot_product_attention, aten::_flash_attention_forward, aten::_convolution,
  aten::cudnn_convolution, aten::conv2d, ...) get the cost of the work they dispatch, with
  OpCost.repeated set: their parent or child op in the trace carries the same cost, so add up only
  ops with repeated=False.
- Elementwise / reduction ops TraceLens has no model for get bytes estimated from their tensor sizes
  (OpCost.estimate) and no flops.
Not ported: TraceLens's batch / group / instance / RMS norm models and the norm backwards, its
non-aten ops (aiter, vLLM, Transformer Engine, MoE ...), varlen (packed) attention; these get None.
"""
from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from tb_hwprof.core.errors import InputError

Shape = Tuple[int, ...]

# --------------------------------------------------------------------------------------------
# Categories
# --------------------------------------------------------------------------------------------
# TraceLens (torch_op_mapping.categorize_torch_op) labels an op by an exact-name registry built from
# its perf models (GEMM, CONV_fwd/CONV_bwd, SDPA_fwd/SDPA_bwd, NORM_fwd/NORM_bwd, elementwise,
# reduce, plus MoE / SSM / RoPE ... families), then the patterns ^triton and ^record_param_comms,
# then the first kernel's name ("void at::native..." with elementwise / reduce / multi_tensor_apply),
# else "other".  Ours is by name only (we label ops that launched no kernel too) and differs thus:
# fwd/bwd are one category; composites TraceLens leaves as "other" (aten::linear, aten::matmul,
# aten::conv2d, aten::scaled_dot_product_attention, aten::_convolution) join their kernel's family;
# record_param_comms, nccl:*, c10d::* and other collectives are "communication"; softmax and
# friends are "reduction"; _foreach_* ops are "elementwise" (TraceLens: multi_tensor_apply).
CATEGORIES = ("GEMM", "SDPA", "CONV", "elementwise", "reduction", "normalisation", "communication", "other")

_GEMM_OPS = frozenset({
    "mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_scaled_mm", "addbmm", "addmv", "mv", "dot",
    "vdot", "_addmm_activation", "_int_mm", "_grouped_mm", "_scaled_grouped_mm"})
# GEMMs outside aten that TraceLens models (tex_ts::te_gemm_ts, primus_turbo::grouped_gemm, ...).
_OTHER_GEMM = re.compile(r"(^|::|_)(grouped_)?gemm|cublas_scaled_mm|int8_linear_matmul")
_SDPA_WORDS = ("scaled_dot_product", "flash_attention", "flash_attn", "flashattn", "fusedattn",
               "efficient_attention", "cudnn_attention", "fmha", "unified_attention")
_CONV = re.compile(r"convolution|^_?(slow_|thnn_|mkldnn_|cudnn_|miopen_)?conv(\d|_|$)")
_COMM_PREFIXES = ("nccl:", "rccl:", "gloo:", "mpi:", "ucc:", "c10d::", "c10d_functional::",
                  "_c10d_functional::", "_c10d_functional_autograd::", "record_param_comms", "symm_mem::")
_COMM_WORDS = ("allreduce", "all_reduce", "allgather", "all_gather", "reduce_scatter", "reducescatter",
               "alltoall", "all_to_all")
_NORM_WORDS = ("layer_norm", "batch_norm", "group_norm", "instance_norm", "rms_norm")
_REDUCTION_OPS = frozenset({
    "sum", "nansum", "mean", "prod", "amax", "amin", "max", "min", "aminmax", "argmax", "argmin", "all",
    "any", "std", "var", "std_mean", "var_mean", "norm", "linalg_norm", "linalg_vector_norm",
    "frobenius_norm", "logsumexp", "cumsum", "cumprod", "cummax", "cummin", "count_nonzero",
    "softmax", "_softmax", "log_softmax", "_log_softmax", "_softmax_backward_data",
    "_log_softmax_backward_data"})
_ELEMENTWISE_OPS = frozenset({
    "add", "sub", "rsub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod", "neg", "abs",
    "sign", "sgn", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal",
    "pow", "square", "sin", "cos", "tan", "tanh", "sinh", "cosh", "asin", "acos", "atan", "atan2", "erf",
    "erfc", "erfinv", "sigmoid", "logit", "relu", "relu6", "gelu", "silu", "mish", "elu", "selu", "celu",
    "leaky_relu", "hardtanh", "hardswish", "hardsigmoid", "softplus", "softshrink", "hardshrink",
    "threshold", "clamp", "clamp_min", "clamp_max", "clip", "where", "masked_fill", "lerp", "addcmul",
    "addcdiv", "maximum", "minimum", "floor", "ceil", "round", "trunc", "frac", "eq", "ne", "lt", "le",
    "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_or",
    "bitwise_xor", "bitwise_not", "isnan", "isinf", "isfinite", "nan_to_num", "copy", "fill", "zero",
    "normal", "uniform", "bernoulli", "random", "exponential", "native_dropout", "gelu_backward",
    "silu_backward", "sigmoid_backward", "tanh_backward", "threshold_backward", "hardswish_backward",
    "hardsigmoid_backward", "leaky_relu_backward", "elu_backward", "softplus_backward", "mish_backward",
    "native_dropout_backward", "to", "_to_copy", "clone", "contiguous", "dropout", "type_as"})


def _aten_base(name: str) -> str:
    """'aten::add_' -> 'add' (in-place ops share their out-of-place op's category and model)."""
    base = name[len("aten::"):] if name.startswith("aten::") else name
    return base.rstrip("_") or base


@functools.lru_cache(maxsize=1 << 14)
def op_category(name: str) -> str:
    """One of CATEGORIES for an op name (see the comment above for how it compares with TraceLens)."""
    lower = name.lower()
    if lower.startswith(_COMM_PREFIXES) or any(word in lower for word in _COMM_WORDS):
        return "communication"
    if any(word in lower for word in _SDPA_WORDS):
        return "SDPA"
    aten = name.startswith("aten::")
    base = _aten_base(name)
    if aten and _CONV.search(base):
        return "CONV"
    if (aten and base in _GEMM_OPS) or (not aten and _OTHER_GEMM.search(lower) and "fbgemm" not in lower):
        return "GEMM"
    if any(word in lower for word in _NORM_WORDS):
        return "normalisation"
    if aten and base in _REDUCTION_OPS:
        return "reduction"
    if aten and (base in _ELEMENTWISE_OPS or base.startswith("_foreach_")):
        return "elementwise"
    return "other"


# --------------------------------------------------------------------------------------------
# The result and the recorded arguments
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OpCost:
    """FLOPs and bytes of one op instance.  Shared between instances of the same shapes: read only."""
    flops: Optional[float]          # None: no model defines them (bytes are then an estimate)
    bytes: Optional[int]            # None: an element size is unknown
    params: Mapping[str, Any]       # the shape parameters (M, N, K, B / B, H_Q, N_Q, ...) and dtype
    estimate: bool = False          # bytes estimated from tensor sizes; TraceLens has no model
    repeated: bool = False          # a parent or child op in the trace carries the same cost


# Element sizes of the dtype names torch.profiler writes in "Input type" (TraceLens's name2bpe plus
# bool, short, unsigned, complex and quantised types).
_ELEMENT_BYTES = {
    "double": 8, "long int": 8, "long": 8, "unsigned long": 8, "c10::complex<float>": 8, "c10::complex<double>": 16,
    "float": 4, "int": 4, "unsigned int": 4, "c10::qint32": 4, "c10::complex<c10::half>": 4,
    "c10::half": 2, "c10::bfloat16": 2, "short int": 2, "unsigned short": 2,
    "signed char": 1, "unsigned char": 1, "bool": 1, "c10::qint8": 1, "c10::quint8": 1,
    "c10::quint4x2": 1, "c10::float8_e4m3fn": 1, "c10::float8_e4m3fnuz": 1, "c10::float8_e5m2": 1,
    "c10::float8_e5m2fnuz": 1, "c10::float8_e8m0fnu": 1, "c10::float4_e2m1fn_x2": 1,
}
# "Input type" entries that are not tensors ('' is an absent optional argument).
_NOT_TENSOR = frozenset({"", "scalar", "scalarlist", "tensorlist", "genericlist", "string", "device",
                         "layout", "memoryformat", "scalartype", "bool[]", "int[]"})
# ScalarType codes (c10/core/ScalarType.h) an out_dtype argument is recorded as.
_SCALAR_TYPE_BYTES = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 11: 1, 15: 2, 23: 1, 24: 1, 25: 1, 26: 1}


def element_bytes(dtype: Optional[str]) -> Optional[int]:
    """Bytes per element of a profiler dtype name ('c10::BFloat16' -> 2); None when unknown."""
    return _ELEMENT_BYTES.get(dtype.lower()) if isinstance(dtype, str) else None


class _Args:
    """One op's recorded arguments, read defensively: a missing or odd entry reads as None."""

    def __init__(self, dims, types, concrete):
        self.dims = dims if isinstance(dims, list) else []
        self.types = types if isinstance(types, list) else []
        self.concrete = concrete if isinstance(concrete, list) else []

    def dtype(self, i: int) -> Optional[str]:
        value = self.types[i] if i < len(self.types) else None
        return value if isinstance(value, str) else None

    def tensor(self, i: Optional[int]) -> Optional[Shape]:
        """The shape of argument i when it is a tensor (() for a 0-dim one), else None."""
        if i is None or i >= len(self.dims) or (self.dtype(i) or "").lower() in _NOT_TENSOR:
            return None
        dims = self.dims[i]
        if not isinstance(dims, list) or not all(_is_int(d) for d in dims):
            return None
        return tuple(dims)

    def bpe(self, i: Optional[int]) -> Optional[int]:
        return element_bytes(self.dtype(i)) if i is not None else None

    def text(self, i: Optional[int]) -> str:
        value = self.concrete[i] if i is not None and i < len(self.concrete) else ""
        return value if isinstance(value, str) else ""

    def ints(self, i: Optional[int]) -> Optional[Shape]:
        """'[2, 2]' -> (2, 2), '3' -> (3,), '' -> None."""
        text = self.text(i).strip()
        if not text:
            return None
        try:
            value = json.loads(text)
        except ValueError:
            return None
        values = value if isinstance(value, list) else [value]
        return tuple(values) if all(_is_int(v) for v in values) else None

    def flag(self, i: Optional[int]) -> Optional[bool]:
        return {"true": True, "false": False}.get(self.text(i).strip().lower())

    def flags(self, i: Optional[int]) -> Optional[Tuple[bool, ...]]:
        """'[True, True, False]' -> (True, True, False)."""
        text = self.text(i).strip()
        if not (text.startswith("[") and text.endswith("]")):
            return None
        words = [w.strip().lower() for w in text[1:-1].split(",") if w.strip()]
        return tuple(w == "true" for w in words) if all(w in ("true", "false") for w in words) else None

    def number(self, i: Optional[int]) -> Optional[float]:
        try:
            return float(self.text(i))
        except ValueError:
            return None


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def _traffic(*operands: Tuple[int, Optional[int]]) -> Optional[int]:
    """Sum of elements x element size over (elements, bytes per element); None if a size is unknown."""
    if any(bpe is None for _, bpe in operands):
        return None
    return sum(elements * bpe for elements, bpe in operands)


def _cost(flops, nbytes, params: Dict[str, Any], **flags) -> OpCost:
    return OpCost(flops=flops, bytes=nbytes, params=MappingProxyType(params), **flags)


# --------------------------------------------------------------------------------------------
# GEMM: flops 2*M*N*K (+ M*N for a bias add) per batch; bytes A + B + out (+ bias)
# --------------------------------------------------------------------------------------------
def _gemm(args: _Args, batch: int, M: int, N: int, K: int, *, a: int, b: int, bias: Optional[int] = None,
          a_elems: Optional[int] = None, b_elems: Optional[int] = None, out_bpe: Optional[int] = None,
          repeated: bool = False) -> OpCost:
    bias_shape = args.tensor(bias)
    flops = batch * (2 * M * N * K + (M * N if bias_shape is not None else 0))
    operands = [(batch * M * K if a_elems is None else a_elems, args.bpe(a)),
                (batch * K * N if b_elems is None else b_elems, args.bpe(b)),
                (batch * M * N, args.bpe(a) if out_bpe is None else out_bpe)]
    if bias_shape is not None:
        operands.append((_numel(bias_shape), args.bpe(bias)))
    params = {"B": batch, "M": M, "N": N, "K": K, "bias": bias_shape is not None, "dtype": args.dtype(a)}
    return _cost(flops, _traffic(*operands), params, repeated=repeated)


def _matrices(args: _Args, a: int, b: int, ndim: int) -> Optional[Tuple[Shape, Shape]]:
    """Both operands when they have `ndim` dims and agree on K (and on the batch for bmm)."""
    A, B = args.tensor(a), args.tensor(b)
    if A is None or B is None or len(A) != ndim or len(B) != ndim or A[-1] != B[-2] or A[:-2] != B[:-2]:
        return None
    return A, B


def _mm(args: _Args, a: int = 0, b: int = 1, bias: Optional[int] = None) -> Optional[OpCost]:
    """aten::mm(self, mat2); aten::addmm(self=bias, mat1, mat2, beta, alpha)."""
    pair = _matrices(args, a, b, 2)
    if pair is None:
        return None
    (M, K), (_, N) = pair
    return _gemm(args, 1, M, N, K, a=a, b=b, bias=bias)


def _bmm(args: _Args, a: int = 0, b: int = 1, bias: Optional[int] = None) -> Optional[OpCost]:
    """aten::bmm(self, mat2); aten::baddbmm(self=bias, batch1, batch2, beta, alpha)."""
    pair = _matrices(args, a, b, 3)
    if pair is None:
        return None
    (batch, M, K), (_, _, N) = pair
    return _gemm(args, batch, M, N, K, a=a, b=b, bias=bias)


def _scaled_mm(args: _Args) -> Optional[OpCost]:
    """aten::_scaled_mm(self, mat2, scale_a, scale_b, bias?, scale_result?, out_dtype?, use_fast_accum).

    The output's element size comes from out_dtype when recorded; else TraceLens's assumption
    (fp8 inputs give fp16 out, 2- and 4-byte inputs keep their size).  Scales are not counted.
    """
    pair = _matrices(args, 0, 1, 2)
    if pair is None:
        return None
    (M, K), (_, N) = pair
    code = args.ints(6)
    in_bpe = args.bpe(0)
    out_bpe = _SCALAR_TYPE_BYTES.get(code[0]) if code and len(code) == 1 else (2 if in_bpe == 1 else in_bpe)
    return _gemm(args, 1, M, N, K, a=0, b=1, bias=4, out_bpe=out_bpe)


def _linear(args: _Args) -> Optional[OpCost]:
    """aten::linear(input[..., K], weight[N, K], bias[N]?): the addmm / mm it dispatches to."""
    x, w = args.tensor(0), args.tensor(1)
    if not x or w is None or len(w) != 2 or x[-1] != w[1]:
        return None
    M = _numel(x[:-1])
    return _gemm(args, 1, M, w[0], w[1], a=0, b=1, bias=2, repeated=True)


def _broadcast(*shapes: Shape) -> Optional[Shape]:
    """numpy-style broadcast of shapes; None when they do not broadcast."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(ndim):
        sizes = {s[axis - ndim + len(s)] for s in shapes if axis - ndim + len(s) >= 0} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _matmul(args: _Args) -> Optional[OpCost]:
    """aten::matmul(a, b) with torch.matmul's rules: 1-D operands gain a dim of 1, batch dims broadcast."""
    A, B = args.tensor(0), args.tensor(1)
    if not A or not B:
        return None
    a2 = (1,) + A if len(A) == 1 else A
    b2 = B + (1,) if len(B) == 1 else B
    batch = _broadcast(a2[:-2], b2[:-2])
    if a2[-1] != b2[-2] or batch is None:
        return None
    M, K, N = a2[-2], a2[-1], b2[-1]
    return _gemm(args, _numel(batch), M, N, K, a=0, b=1, a_elems=_numel(A), b_elems=_numel(B), repeated=True)


# --------------------------------------------------------------------------------------------
# Attention: forward 2*B*H_Q*N_Q*N_KV*(d_qk + d_v); backward recomputes Q K^T and runs 4 more
# matmuls (dV, dP, dQ, dK) plus the GQA reduce of dK, dV from H_Q to H_KV heads
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _SdpaLayout:
    query: int                          # index of query; key and value follow
    heads_first: bool                   # (B, H, N, d) rather than (B, N, H, d)
    dropout: int
    causal: Optional[int] = None        # index of is_causal
    mask_type: Optional[int] = None     # index of custom_mask_type (1: causal top-left, 2: bottom-right)
    bias: Optional[int] = None          # attention bias / mask
    backward: bool = False
    repeated: bool = False


# Argument positions from the ops' schemas (torch 2.x native_functions.yaml), as the profiler records them.
_SDPA_LAYOUTS = {
    "aten::scaled_dot_product_attention": _SdpaLayout(0, True, dropout=4, causal=5, bias=3, repeated=True),
    "aten::_scaled_dot_product_flash_attention": _SdpaLayout(0, True, dropout=3, causal=4),
    "aten::_scaled_dot_product_flash_attention_for_cpu": _SdpaLayout(0, True, dropout=3, causal=4, bias=5),
    "aten::_scaled_dot_product_efficient_attention": _SdpaLayout(0, True, dropout=5, causal=6, bias=3),
    "aten::_scaled_dot_product_cudnn_attention": _SdpaLayout(0, True, dropout=5, causal=6, bias=3),
    "aten::_flash_attention_forward": _SdpaLayout(0, False, dropout=7, causal=8, repeated=True),
    "aten::_efficient_attention_forward": _SdpaLayout(0, False, dropout=8, mask_type=9, bias=3, repeated=True),
    "aten::_scaled_dot_product_flash_attention_backward":
        _SdpaLayout(1, True, dropout=10, causal=11, backward=True),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward":
        _SdpaLayout(1, True, dropout=6, causal=7, bias=8, backward=True),
    "aten::_scaled_dot_product_efficient_attention_backward":
        _SdpaLayout(1, True, dropout=9, causal=11, bias=4, backward=True),
    "aten::_scaled_dot_product_cudnn_attention_backward":
        _SdpaLayout(1, True, dropout=13, causal=14, bias=8, backward=True),
    "aten::_flash_attention_backward": _SdpaLayout(1, False, dropout=10, causal=11, backward=True, repeated=True),
    "aten::_efficient_attention_backward":
        _SdpaLayout(1, False, dropout=11, mask_type=14, bias=4, backward=True, repeated=True),
}


def _bhnd(shape: Shape, heads_first: bool) -> Tuple[int, int, int, int]:
    B, first, second, d = shape
    return (B, first, second, d) if heads_first else (B, second, first, d)


def _causal_fraction(args: _Args, layout: _SdpaLayout, n_q: int, n_kv: int) -> Tuple[str, float]:
    """Which causal mask applies and the fraction of (query, key) pairs it keeps."""
    mask_type = args.ints(layout.mask_type) if layout.mask_type is not None else None
    if mask_type:
        kind = {1: "top_left", 2: "bottom_right"}.get(mask_type[0], "none")
    else:
        kind = "top_left" if args.flag(layout.causal) else "none"
    if kind == "none":
        return kind, 1.0
    if n_q == n_kv:
        return kind, 0.5  # TraceLens's convention: half the square (kernels skip whole tiles anyway)
    return kind, _causal_pairs(n_q, n_kv, kind == "bottom_right") / (n_q * n_kv)


def _causal_pairs(n_q: int, n_kv: int, bottom_right: bool) -> int:
    """Unmasked pairs: query row i sees keys j <= i (top-left) or j <= i + n_kv - n_q (bottom-right)."""
    if bottom_right:
        if n_kv >= n_q:
            return n_q * (n_kv - n_q) + n_q * (n_q + 1) // 2
        return n_kv * (n_kv + 1) // 2
    if n_q <= n_kv:
        return n_q * (n_q + 1) // 2
    return n_kv * (n_kv + 1) // 2 + (n_q - n_kv) * n_kv


def _attention(args: _Args, layout: _SdpaLayout) -> Optional[OpCost]:
    q, k, v = (args.tensor(layout.query + i) for i in range(3))
    if any(t is None or len(t) != 4 for t in (q, k, v)):
        return None  # varlen (packed 3-D) inputs: the per-sequence lengths are not recorded
    B, H_Q, N_Q, d_qk = _bhnd(q, layout.heads_first)
    _, H_KV, N_KV, d_kv = _bhnd(k, layout.heads_first)
    d_v = _bhnd(v, layout.heads_first)[3]
    if d_kv != d_qk or H_KV == 0 or H_Q % H_KV:
        return None
    causal, fraction = _causal_fraction(args, layout, N_Q, N_KV)
    pair_matmul = 2 * B * H_Q * N_Q * N_KV  # one (N_Q x d) @ (d x N_KV)-shaped matmul, per unit of d
    if layout.backward:
        gqa_reduce = B * N_KV * (d_qk + d_v) * (H_Q // H_KV - 1)
        flops = (pair_matmul * (3 * d_qk + 2 * d_v) + gqa_reduce) * fraction
    else:
        flops = pair_matmul * (d_qk + d_v) * fraction
    params = {"B": B, "N_Q": N_Q, "H_Q": H_Q, "N_KV": N_KV, "H_KV": H_KV, "d_h_qk": d_qk, "d_h_v": d_v,
              "causal": causal != "none", "causal_mask": causal, "dropout": args.number(layout.dropout) or 0.0,
              "backward": layout.backward, "dtype": args.dtype(layout.query)}
    return _cost(flops, _attention_bytes(args, layout, B * H_Q * N_Q * d_v), params, repeated=layout.repeated)


def _attention_bytes(args: _Args, layout: _SdpaLayout, out_elems: int) -> Optional[int]:
    """Forward: Q, K, V read, O written.  Backward: Q, K, V, dO read, dQ, dK, dV written (TraceLens's
    lists: O and the logsumexp, which flash backward also reads, are left out as TraceLens does)."""
    qkv = [(_numel(args.tensor(layout.query + i)), args.bpe(layout.query + i)) for i in range(3)]
    if layout.backward:
        grad_out = args.tensor(0)
        operands = qkv * 2 + [(_numel(grad_out) if grad_out is not None else out_elems, args.bpe(0))]
    else:
        operands = qkv + [(out_elems, args.bpe(layout.query))]
    bias = args.tensor(layout.bias)
    if bias is not None:
        operands.append((_numel(bias), args.bpe(layout.bias)))
    return _traffic(*operands)


# --------------------------------------------------------------------------------------------
# Convolution: forward 2 * out elements * (C_in/groups * kernel volume) (transposed: per input
# element); backward is one such pass for the input gradient and one for the weight gradient
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _ConvLayout:
    stride: int
    padding: int
    dilation: int
    groups: int
    bias: Optional[int] = 2
    transposed: Optional[int] = None        # index of the `transposed` flag
    output_padding: Optional[int] = None
    always_transposed: bool = False
    repeated: bool = False


_CONVOLUTION = dict(stride=3, padding=4, dilation=5, groups=8, transposed=6, output_padding=7)
_CONV_ND = dict(stride=3, padding=4, dilation=5, groups=6, repeated=True)
_CONV_TRANSPOSE_ND = dict(stride=3, padding=4, output_padding=5, groups=6, dilation=7, always_transposed=True,
                          repeated=True)
_BACKEND_CONV = dict(padding=3, stride=4, dilation=5, groups=6, repeated=True)  # miopen / mkldnn
# Argument positions from the ops' schemas (torch 2.x native_functions.yaml), as the profiler records them.
_CONV_LAYOUTS = {
    "aten::convolution": _ConvLayout(**_CONVOLUTION),
    "aten::_convolution": _ConvLayout(**_CONVOLUTION, repeated=True),
    **{f"aten::conv{n}d": _ConvLayout(**_CONV_ND) for n in (1, 2, 3)},
    **{f"aten::conv_transpose{n}d": _ConvLayout(**_CONV_TRANSPOSE_ND) for n in (1, 2, 3)},
    "aten::cudnn_convolution": _ConvLayout(padding=2, stride=3, dilation=4, groups=5, bias=None, repeated=True),
    "aten::cudnn_convolution_transpose": _ConvLayout(padding=2, output_padding=3, stride=4, dilation=5, groups=6,
                                                     bias=None, always_transposed=True, repeated=True),
    "aten::miopen_convolution": _ConvLayout(**_BACKEND_CONV),
    "aten::mkldnn_convolution": _ConvLayout(**_BACKEND_CONV),
    "aten::miopen_convolution_transpose": _ConvLayout(padding=3, output_padding=4, stride=5, dilation=6, groups=7,
                                                      always_transposed=True, repeated=True),
}
_CONV_BACKWARD = _ConvLayout(stride=4, padding=5, dilation=6, groups=9, bias=None, transposed=7, output_padding=8)


@dataclass(frozen=True)
class _ConvGeometry:
    x: Shape
    w: Shape
    out: Shape
    stride: Shape
    padding: Shape
    dilation: Shape
    groups: int
    transposed: bool

    def pass_flops(self) -> int:
        """One pass over the kernel: 2 * (out elements, or input elements if transposed) * w[1:] volume."""
        driver = self.x if self.transposed else self.out
        return 2 * _numel(driver) * _numel(self.w[1:])

    def params(self, args: _Args, bias: bool) -> Dict[str, Any]:
        return {"N": self.x[0], "C_in": self.x[1], "C_out": self.out[1], "input_shape": self.x,
                "weight_shape": self.w, "output_shape": self.out, "stride": self.stride,
                "padding": self.padding, "dilation": self.dilation, "groups": self.groups,
                "transposed": self.transposed, "bias": bias, "dtype": args.dtype(0)}


def _spatial(args: _Args, i: Optional[int], ndim: int, default: int) -> Optional[Shape]:
    """A per-spatial-dim int list ('[2, 2]'; one value broadcasts; absent: the default)."""
    values = args.ints(i) if i is not None else None
    if values is None:
        return (default,) * ndim if not args.text(i).strip() else None
    if len(values) == 1:
        return values * ndim
    return values if len(values) == ndim else None


def _conv_out_dim(size: int, kernel: int, stride: int, pad: int, dilation: int, out_pad: int,
                  transposed: bool) -> int:
    if transposed:
        return (size - 1) * stride - 2 * pad + dilation * (kernel - 1) + out_pad + 1
    return (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


def _conv_geometry(args: _Args, layout: _ConvLayout, x: Optional[Shape], w: Optional[Shape],
                   out: Optional[Shape] = None) -> Optional[_ConvGeometry]:
    if x is None or w is None or len(x) < 3 or len(x) != len(w):
        return None
    ndim = len(x) - 2
    transposed = layout.always_transposed or bool(args.flag(layout.transposed))
    stride = _spatial(args, layout.stride, ndim, 1)
    padding = _padding(args, layout.padding, ndim, w, _spatial(args, layout.dilation, ndim, 1))
    dilation = _spatial(args, layout.dilation, ndim, 1)
    out_pad = _spatial(args, layout.output_padding, ndim, 0) if transposed else (0,) * ndim
    groups = (args.ints(layout.groups) or (1,))[0]
    if None in (stride, padding, dilation, out_pad) or groups < 1:
        return None
    if out is None:
        channels = w[1] * groups if transposed else w[0]
        spatial = tuple(_conv_out_dim(x[2 + i], w[2 + i], stride[i], padding[i], dilation[i], out_pad[i], transposed)
                        for i in range(ndim))
        out = (x[0], channels) + spatial
    return _ConvGeometry(x, w, out, stride, padding, dilation, groups, transposed)


def _padding(args: _Args, i: int, ndim: int, w: Shape, dilation: Optional[Shape]) -> Optional[Shape]:
    """Padding list, or conv2d(padding='same' / 'valid')."""
    word = args.text(i).strip().strip("'\"").lower()
    if word == "valid":
        return (0,) * ndim
    if word == "same" and dilation is not None:
        return tuple(dilation[d] * (w[2 + d] - 1) // 2 for d in range(ndim))  # stride is 1 for 'same'
    return _spatial(args, i, ndim, 0)


def _convolution(args: _Args, layout: _ConvLayout) -> Optional[OpCost]:
    """Forward convolution: TraceLens's CONV model, plus the bias it misses (see the module docstring)."""
    geometry = _conv_geometry(args, layout, args.tensor(0), args.tensor(1))
    if geometry is None:
        return None
    bias = args.tensor(layout.bias)
    out_elems = _numel(geometry.out)
    flops = geometry.pass_flops() + (out_elems if bias is not None else 0)
    operands = [(_numel(geometry.x), args.bpe(0)), (_numel(geometry.w), args.bpe(1)), (out_elems, args.bpe(0))]
    if bias is not None:
        operands.append((geometry.out[1], args.bpe(layout.bias)))
    return _cost(flops, _traffic(*operands), geometry.params(args, bias is not None), repeated=layout.repeated)


def _convolution_backward(args: _Args) -> Optional[OpCost]:
    """aten::convolution_backward(grad_output, input, weight, bias_sizes, ..., output_mask).

    Per gradient output_mask asks for: input grad reads dO and W, writes dX; weight grad reads dO
    and X, writes dW (each a pass of forward FLOPs); bias grad sums dO over all but channels.
    """
    grad_out = args.tensor(0)
    geometry = _conv_geometry(args, _CONV_BACKWARD, args.tensor(1), args.tensor(2), out=grad_out)
    if grad_out is None or geometry is None or len(grad_out) != len(geometry.x):
        return None
    want_input, want_weight, want_bias = ((args.flags(10) or (True, True, False)) + (False,) * 3)[:3]
    dO, x, w = (_numel(geometry.out), args.bpe(0)), (_numel(geometry.x), args.bpe(1)), (_numel(geometry.w), args.bpe(2))
    flops, operands = 0, []
    if want_input:
        flops += geometry.pass_flops()
        operands += [dO, w, x]
    if want_weight:
        flops += geometry.pass_flops()
        operands += [dO, x, w]
    if want_bias:
        flops += dO[0]
        operands += [dO, (geometry.out[1], args.bpe(0))]
    params = geometry.params(args, bool(want_bias))
    params["output_mask"] = (bool(want_input), bool(want_weight), bool(want_bias))
    return _cost(flops, _traffic(*operands), params)


# --------------------------------------------------------------------------------------------
# Normalisation: TraceLens's LayerNorm model (its training-mode accounting, C = normalized_shape)
# --------------------------------------------------------------------------------------------
def _layer_norm(args: _Args, repeated: bool) -> Optional[OpCost]:
    """aten::layer_norm / native_layer_norm(input, normalized_shape, weight?, bias?, eps, ...).

    TraceLens: flops = 3C (1/std) + 3n (mean, var) + 3C (scale, shift) + 2n (normalise);
    bytes = input read + output written + C-sized tensors: mean, var, their update (4), weight, bias.
    """
    x = args.tensor(0)
    normalized = args.ints(1) or (x[-1:] if x else None)
    if not x or not normalized:
        return None
    n, C = _numel(x), _numel(normalized)
    affine = args.tensor(2) is not None
    has_bias = affine and args.tensor(3) is not None
    flops = 6 * C + 5 * n
    per_channel = 4 + affine + has_bias
    nbytes = _traffic((2 * n + per_channel * C, args.bpe(0)))
    params = {"elements": n, "C": C, "affine": affine, "bias": has_bias, "dtype": args.dtype(0)}
    return _cost(flops, nbytes, params, repeated=repeated)


# --------------------------------------------------------------------------------------------
# Elementwise and reductions: TraceLens's models for the ops it lists, byte estimates for the rest
# --------------------------------------------------------------------------------------------
_TRACELENS_UNARY = frozenset({"copy", "clamp_min", "clamp_max", "sigmoid", "rsqrt", "silu", "neg", "pow"})
_TRACELENS_BINARY = frozenset({"div", "mul", "add", "sigmoid_backward", "threshold_backward"})
_TRACELENS_REDUCE = frozenset({"sum", "mean", "max", "min", "norm", "linalg_norm", "std", "var", "logsumexp",
                               "cumsum", "cumprod", "amin", "amax"})
# Composites whose kernel is a child op (relu -> clamp_min, rsub -> sub, square -> pow, clone -> copy_,
# softmax -> _softmax, ...): a category, no cost of their own.
_COMPOSITE_ONLY = frozenset({"to", "_to_copy", "clone", "contiguous", "dropout", "type_as", "softmax",
                             "log_softmax", "relu", "rsub", "square"})
_WRITE_ONLY = frozenset({"fill", "zero", "normal", "uniform", "bernoulli", "random", "exponential"})
_BOOL_RESULT = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
                          "logical_not", "isnan", "isinf", "isfinite", "all", "any"})
_SAME_SHAPE_REDUCTIONS = frozenset({"cumsum", "cumprod", "cummax", "cummin", "_softmax", "_log_softmax",
                                    "_softmax_backward_data", "_log_softmax_backward_data"})
_DIM_AT_2 = frozenset({"norm", "linalg_vector_norm", "linalg_norm"})  # (self, p / ord, dim, ...)


def _unary(args: _Args) -> Optional[OpCost]:
    """TraceLens's unary model: one flop per element of arg 0; read it, write it (in arg 1's dtype if
    arg 1 is a tensor, as in copy_(self, src))."""
    x = args.tensor(0)
    if x is None:
        return None
    n = _numel(x)
    out_bpe = args.bpe(1) if args.tensor(1) else args.bpe(0)
    return _cost(n, _traffic((n, args.bpe(0)), (n, out_bpe)), {"elements": n, "dtype": args.dtype(0)})


def _binary_operand(args: _Args, i: int) -> Tuple[Optional[Shape], Optional[int]]:
    """TraceLens reads a Python scalar operand as one 4-byte element."""
    if (args.dtype(i) or "").lower() == "scalar":
        return (), 4
    return args.tensor(i), args.bpe(i)


def _binary(args: _Args) -> Optional[OpCost]:
    """TraceLens's binary model: one flop per output element; both inputs read, output written
    (output size: the larger input's if both are tensors with dims, else the first's)."""
    (s1, b1), (s2, b2) = _binary_operand(args, 0), _binary_operand(args, 1)
    out = _broadcast(s1, s2) if s1 is not None and s2 is not None else None
    if out is None:
        return None
    if args.tensor(2):  # an explicit output tensor
        out_bpe = args.bpe(2)
    elif b1 is None or b2 is None:
        out_bpe = None
    else:
        out_bpe = max(b1, b2) if s1 and s2 else b1
    n_out = _numel(out)
    nbytes = _traffic((_numel(s1), b1), (_numel(s2), b2), (n_out, out_bpe))
    return _cost(n_out, nbytes, {"elements": n_out, "dtype": args.dtype(0)})


def _tensors(args: _Args) -> List[Tuple[Shape, Optional[int]]]:
    found = []
    for i in range(len(args.dims)):
        shape = args.tensor(i)
        if shape is not None:
            found.append((shape, args.bpe(i)))
    return found


def _elementwise_estimate(args: _Args, base: str) -> Optional[OpCost]:
    """Bytes only: every tensor argument read once, one output of their broadcast shape written."""
    tensors = _tensors(args)
    out = _broadcast(*(s for s, _ in tensors)) if tensors else None
    if out is None:
        return None
    out_bpe = 1 if base in _BOOL_RESULT else tensors[0][1]
    reads = [] if base in _WRITE_ONLY else tensors
    nbytes = _traffic(*[(_numel(s), bpe) for s, bpe in reads], (_numel(out), out_bpe))
    return _cost(None, nbytes, {"elements": _numel(out), "dtype": args.dtype(0)}, estimate=True)


def _reduced_elements(args: _Args, base: str, x: Shape) -> int:
    """Elements of the result: same as the input for scans / softmax, else the input less `dim`."""
    if base in _SAME_SHAPE_REDUCTIONS:
        return _numel(x)
    dims = args.ints(2 if base in _DIM_AT_2 else 1)
    if not dims or any(not -len(x) <= d < len(x) for d in dims):
        return 1  # no dim (or dim=[]): a full reduction
    reduced = {d % len(x) for d in dims}
    return _numel([size for axis, size in enumerate(x) if axis not in reduced])


def _reduction(args: _Args, base: str) -> Optional[OpCost]:
    """TraceLens's reduce model for the ops it lists (a flop per input element), else bytes only."""
    x = args.tensor(0)
    if x is None:
        return None
    if base in ("max", "min") and args.tensor(1):  # max(self, other): elementwise
        return _binary(args)
    n_in, n_out = _numel(x), _reduced_elements(args, base, x)
    out_bpe = {"argmax": 8, "argmin": 8}.get(base, 1 if base in _BOOL_RESULT else args.bpe(0))
    modelled = base in _TRACELENS_REDUCE
    params = {"elements": n_in, "output_elements": n_out, "dtype": args.dtype(0)}
    return _cost(n_in if modelled else None, _traffic((n_in, args.bpe(0)), (n_out, out_bpe)), params,
                 estimate=not modelled)


# --------------------------------------------------------------------------------------------
# Dispatch
# --------------------------------------------------------------------------------------------
_MODELS: Dict[str, Callable[[_Args], Optional[OpCost]]] = {
    "aten::mm": _mm,
    "aten::addmm": lambda a: _mm(a, 1, 2, bias=0),
    "aten::bmm": _bmm,
    "aten::baddbmm": lambda a: _bmm(a, 1, 2, bias=0),
    "aten::_scaled_mm": _scaled_mm,
    "aten::linear": _linear,
    "aten::matmul": _matmul,
    "aten::convolution_backward": _convolution_backward,
    "aten::layer_norm": lambda a: _layer_norm(a, repeated=True),
    "aten::native_layer_norm": lambda a: _layer_norm(a, repeated=False),
    **{name: functools.partial(_attention, layout=layout) for name, layout in _SDPA_LAYOUTS.items()},
    **{name: functools.partial(_convolution, layout=layout) for name, layout in _CONV_LAYOUTS.items()},
}


# Most args a GEMM's schema records (its dtype / out overloads included).  More means a garbled
# record (sampled traces have some: an op's dims followed by other ops'): no cost rather than a wrong one.
_MAX_ARGS = {"aten::mm": 4, "aten::bmm": 4, "aten::addmm": 7, "aten::baddbmm": 7, "aten::matmul": 3,
             "aten::linear": 4, "aten::_scaled_mm": 9}


def _model_for(name: str) -> Optional[Callable[[_Args], Optional[OpCost]]]:
    model = _MODELS.get(name)
    if model is not None or not name.startswith("aten::"):
        return model
    base = _aten_base(name)
    if base in _COMPOSITE_ONLY:
        return None
    if base in _TRACELENS_UNARY:
        return _unary
    if base in _TRACELENS_BINARY:
        return _binary
    category = op_category(name)
    if category == "reduction":
        return functools.partial(_reduction, base=base)
    if category == "elementwise" and not base.startswith("_foreach_"):
        return functools.partial(_elementwise_estimate, base=base)
    return None


def _decode(text, what: str, name: str, source: str):
    """JSON text (or an already decoded value) -> list; an absent arg (None) -> []."""
    if text is None:
        return []
    if not isinstance(text, str):
        return text
    try:
        value = json.loads(text)
    except ValueError as error:
        raise InputError(source, f"{name}: its {what!r} is not JSON ({error})",
                         "pass the trace's args as recorded by torch.profiler (record_shapes=True)") from None
    if not isinstance(value, list):
        raise InputError(source, f"{name}: its {what!r} is a {type(value).__name__}, not a list",
                         "pass the trace's args as recorded by torch.profiler (record_shapes=True)")
    return value


def _compute(name: str, dims, types, concrete, source: str) -> Optional[OpCost]:
    model = _model_for(name)
    if model is None:
        return None
    args = _Args(_decode(dims, "Input Dims", name, source), _decode(types, "Input type", name, source),
                 _decode(concrete, "Concrete Inputs", name, source))
    if len(args.dims) > _MAX_ARGS.get(name, len(args.dims)):
        return None
    return model(args)


@functools.lru_cache(maxsize=1 << 16)
def _cost_from_text(name: str, dims: Optional[str], types: Optional[str], concrete: Optional[str],
                    source: str) -> Optional[OpCost]:
    return _compute(name, dims, types, concrete, source)


def op_cost(name: str, input_dims, input_types, concrete_inputs, source: str = "<trace>") -> Optional[OpCost]:
    """FLOPs and bytes of one op instance, or None when no model fits its name and recorded args.

    input_dims / input_types / concrete_inputs: the op's "Input Dims", "Input type" and "Concrete
    Inputs" args, as JSON text (cached by text) or decoded lists; None where the trace has none.
    source names the trace in the InputError raised for args that are not JSON lists.
    """
    if _is_text(input_dims) and _is_text(input_types) and _is_text(concrete_inputs):
        return _cost_from_text(name, input_dims, input_types, concrete_inputs, source)
    return _compute(name, input_dims, input_types, concrete_inputs, source)


def _is_text(value) -> bool:
    return value is None or isinstance(value, str)

