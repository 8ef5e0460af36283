"""decode.py on real PyTorch profiler (Kineto) traces: the native scanner (_kineto_scan.c) gives the
msgspec reference's columns on every sample, both agree with stdlib json's reading of the same
files, the same trace written differently (escapes, whitespace, array format) decodes the same,
and bad input is a ValueError (TraceError) naming the byte, never a crash."""
import gzip
import json
import math
import os
import random
from collections import Counter
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from tb_hwprof.readers.torch import decode

from conftest import samples_path

SAMPLES = samples_path() / "torch"


def _trace_files():
    files = sorted(SAMPLES.glob("*.json*")) if SAMPLES.is_dir() else []
    if files:
        return files
    if os.environ.get("TB_HWPROF_REQUIRE_SAMPLES"):
        return [None]  # the test fails on it
    return [pytest.param(None, marks=pytest.mark.skip(reason=f"no PyTorch traces under {SAMPLES}"))]


TRACES = _trace_files()
ids = lambda p: p.name if isinstance(p, Path) else "none"  # noqa: E731
# Files for the slower checks: a 2024 V100 trace (kernels, memcpy / memset, flows), the 2021 one
# ("external id", "Runtime" / "Kernel" categories, string tids), an MI300X one (instants), plain JSON.
JSON_CHECKED = ["hta_v100_resnet_rank0.json.gz", "kineto_rn50_v100_jun2021.json.gz",
                "tracelens_mi300x_bert_small.json.gz", "deepseek_h800_train_ep64_rank0.json"]
SMALL = ["hta_mi250_rocm62_minitoy.json.gz", "tracelens_torch_compile_triton.json.gz",
         "hta_a100_triton_kernel.json.gz", "kineto_h100_cuda129_small.json"]


def sample_trace(name: str) -> Path:
    path = SAMPLES / name
    if not path.is_file():
        if os.environ.get("TB_HWPROF_REQUIRE_SAMPLES"):
            pytest.fail(f"{path} missing")
        pytest.skip(f"{name} not in the samples")
    return path


@lru_cache(maxsize=4)  # a few decompressed traces at a time (they are up to 35 MB)
def trace_bytes(path: Path) -> bytes:
    assert path is not None, f"real samples required but no PyTorch traces under {SAMPLES}"
    return gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()


@lru_cache(maxsize=4)
def reference(path: Path) -> decode.KinetoEvents:
    return decode.decode_events_msgspec(trace_bytes(path))


@pytest.fixture(scope="module")
def scanner():
    return pytest.importorskip("tb_hwprof.readers.torch._kineto_scan", reason="the C scanner is not built")


def native_decode(scanner, data: bytes) -> decode.KinetoEvents:
    return decode._from_native(scanner.scan(data))


def assert_same_events(got: decode.KinetoEvents, want: decode.KinetoEvents, same_codes: bool = True) -> None:
    """Equal columns (strings compared through the table), metadata, top-level keys, other events."""
    for table in ("x", "x_gpu", "x_op", "flows", "instants"):
        a, b = getattr(got, table), getattr(want, table)
        assert list(a) == list(b), table
        for column in a:
            assert a[column].dtype == b[column].dtype, (table, column)
            if column in decode.STRING_COLUMNS:
                assert got.text(a[column]).tolist() == want.text(b[column]).tolist(), (table, column)
                assert np.array_equal(a[column] < 0, b[column] < 0), (table, column)
            else:
                assert np.array_equal(a[column], b[column], equal_nan=a[column].dtype.kind == "f"), (table, column)
    assert got.metadata == want.metadata
    assert got.top == want.top
    assert got.other_events == want.other_events
    if same_codes:  # flow ids that are strings are codes: the tables must be in the same order
        assert got.strings == want.strings


# ---------------------------------------------------------------- native == reference
@pytest.mark.parametrize("path", TRACES, ids=ids)
def test_native_scanner_equals_the_msgspec_reference(scanner, path):
    got = native_decode(scanner, trace_bytes(path))
    assert len(got) > 0
    assert_same_events(got, reference(path))


def test_decode_events_takes_the_native_scanner_where_built(scanner):
    data = trace_bytes(sample_trace(SMALL[0]))
    assert_same_events(decode.decode_events(data), native_decode(scanner, data))


def test_columns_are_writable_arrays_over_the_scanners_memory(scanner):
    events = native_decode(scanner, trace_bytes(sample_trace(SMALL[0])))
    ts = events.x["ts_ns"]
    assert ts.flags.writeable and ts.flags.c_contiguous and ts.base is not None  # a view, not a copy
    ts.sort()  # consumers may sort or fill in place
    assert events.x_gpu["row"].dtype == np.int64 and events.flows["bp_enclosing"].dtype == np.bool_


# ---------------------------------------------------------------- both against stdlib json
def ts_ns(ts) -> int:
    if ts is None:
        return -1
    whole = math.floor(ts)
    return whole * 1000 + round((ts - whole) * 1000)


def first_not_none(args: dict, *keys):
    return next((args[k] for k in keys if args.get(k) is not None), None)


@pytest.fixture(params=["msgspec", "native"])
def decoder(request):
    if request.param == "msgspec":
        return decode.decode_events_msgspec
    scan = pytest.importorskip("tb_hwprof.readers.torch._kineto_scan", reason="the C scanner is not built")
    return lambda data: native_decode(scan, data)


@pytest.mark.parametrize("name", JSON_CHECKED)
def test_columns_agree_with_stdlib_json(decoder, name):
    data = trace_bytes(sample_trace(name))
    doc = json.loads(data)
    events_json = doc["traceEvents"]
    ev = decoder(data)
    complete = [e for e in events_json if e.get("ph") == "X"]
    assert len(ev) == len(complete) > 0
    assert Counter(ev.text(ev.x["cat"]).tolist()) == Counter(e.get("cat") or "" for e in complete)
    kernels = [e for e in complete if e.get("cat") in ("kernel", "Kernel")]
    is_kernel = np.isin(ev.text(ev.x["cat"]), ["kernel", "Kernel"])
    assert int(ev.x["dur_ns"][is_kernel].sum()) == sum(round(e["dur"] * 1000) for e in kernels) and kernels
    picked = range(0, len(complete), 97)
    assert [(ev.text(ev.x["name"][i:i + 1])[0], int(ev.x["ts_ns"][i])) for i in picked] == \
           [(complete[i].get("name") or "", ts_ns(complete[i].get("ts"))) for i in picked]
    args = [e.get("args") or {} for e in complete]
    assert ev.x["ext"].tolist() == [first_not_none(a, "External id", "external id") if
                                    isinstance(first_not_none(a, "External id", "external id"), int) else -1 for a in args]
    # side tables: the events with a non-null value under one of their group's keys
    gpu_rows = [i for i, a in enumerate(args) if any(a.get(k) is not None for k in decode.GPU_KEYS)]
    op_rows = [i for i, a in enumerate(args) if any(a.get(k) is not None for k in decode.OP_KEYS)]
    assert ev.x_gpu["row"].tolist() == gpu_rows and ev.x_op["row"].tolist() == op_rows
    grids = [args[i].get("grid") for i in gpu_rows]
    assert ev.x_gpu["grid_x"].tolist() == [g[0] if isinstance(g, list) and len(g) == 3 else -1 for g in grids]
    dims = [args[i].get("Input Dims") for i in op_rows]
    assert ev.text(ev.x_op["input_dims"]).tolist() == [
        json.dumps(d, separators=(",", ":")) if isinstance(d, list) else d or "" for d in dims]
    flows = [e for e in events_json if e.get("ph") in ("s", "f", "t")]
    assert Counter(ev.flows["ph"].tolist()) == Counter(decode.FLOW_PH[e["ph"]] for e in flows)
    assert int(ev.flows["bp_enclosing"].sum()) == sum(e.get("bp") == "e" for e in flows)
    assert ev.instants["ts_ns"].tolist() == [ts_ns(e.get("ts")) for e in events_json if e.get("ph") in ("i", "I")]
    assert ev.metadata == [{"name": e.get("name"), "pid": e.get("pid"), "tid": e.get("tid"),
                            "args": e.get("args") or {}} for e in events_json if e.get("ph") == "M"]
    assert ev.top == {k: v for k, v in doc.items() if k != "traceEvents"}


# ---------------------------------------------------------------- the same trace, written differently
def escaped_json(value) -> str:
    """JSON with every character of every string (keys too) escaped ('/' as \\/, the others as
    \\u), spaces and newlines around every token: the slow paths of a tokenizer on real content."""
    if isinstance(value, str):
        units = value.encode("utf-16-le")
        return '"' + "".join("\\/" if units[i:i + 2] == b"/\0" else "\\u%04x" % int.from_bytes(units[i:i + 2], "little")
                             for i in range(0, len(units), 2)) + '"'
    if isinstance(value, list):
        return "[\n " + " ,\t".join(escaped_json(v) for v in value) + " ]"
    if isinstance(value, dict):
        return "{ " + " ,\r\n".join(escaped_json(k) + " : " + escaped_json(v) for k, v in value.items()) + "\n}"
    return json.dumps(value)


@pytest.mark.parametrize("name", SMALL + ["tracelens_mi300x_bert_small.json.gz"])
def test_escaped_and_spaced_trace_decodes_the_same(scanner, name):
    data = trace_bytes(sample_trace(name))
    rewritten = escaped_json(json.loads(data)).encode()
    assert rewritten.count(b"\\u") > 1000 and (b"/" not in data or b"\\/" in rewritten)
    assert_same_events(native_decode(scanner, rewritten), native_decode(scanner, data))
    assert_same_events(decode.decode_events_msgspec(rewritten), reference(sample_trace(name)))


@pytest.mark.parametrize("name", SMALL)
def test_array_format_and_non_ascii_names_decode_as_the_reference(scanner, name):
    doc = json.loads(trace_bytes(sample_trace(name)))
    events = doc["traceEvents"]
    array = json.dumps(events).encode()  # Chrome's JSON Array Format: events only
    assert_same_events(native_decode(scanner, array), decode.decode_events_msgspec(array))
    assert native_decode(scanner, array).top == {}
    odd = " µs→😀\u2028\t/\\\"\n\x01\x7f"  # 2-, 3- and 4-byte UTF-8, raw and escaped, and the short escapes
    for e in events:
        if "name" in e:
            e["name"] += odd
        if isinstance((e.get("args") or {}).get("Input type"), list):  # compact JSON text, escaped as msgspec does
            e["args"]["Input type"] = [t + odd if isinstance(t, str) else t for t in e["args"]["Input type"]]
    for ensure_ascii in (False, True):
        data = json.dumps(doc, ensure_ascii=ensure_ascii).encode()
        assert_same_events(native_decode(scanner, data), decode.decode_events_msgspec(data))


@pytest.mark.parametrize("name", ["hta_v100_resnet_rank0.json.gz", "tracelens_mi300x_bert_small.json.gz"])
def test_unusual_arg_values_decode_as_the_reference(scanner, name):
    """Real args given values the reference hands to msgspec: objects and floats in text args,
    grids that are not three ints, explicit nulls (a msgspec.Raw null still makes the row)."""
    doc = json.loads(trace_bytes(sample_trace(name)))
    changed, ties, row = Counter(), {}, -1
    for i, e in enumerate(doc["traceEvents"]):
        row += e.get("ph") == "X"
        a = e.get("args")
        if not a:
            continue
        if "Input Dims" in a and i % 3 == 0:
            a["Input Dims"] = [{"dims": a["Input Dims"], "scale": 0.5 + i}, [1e-7, -0.0, 2 ** 70]][i % 2]
            changed["object"] += 1
        if "Concrete Inputs" in a or ("Input type" in a and i % 5 == 0):
            a["Concrete Inputs"] = [[x, 1.25] for x in a.get("Input type", [])]
            changed["floats"] += 1
        if "grid" in a:
            a["grid"] = [[4.0, 1, 1], None, a["grid"], a["grid"][:2], [True, 1, 1]][i % 5]
            changed["grid"] += 1
        if "kind" in a or ("stream" in a and i % 7 == 0):
            a["kind"] = None
            changed["null kind"] += 1
        if e.get("ph") == "X" and i % 4 == 0:  # half-way ns (exact in binary): Python's round goes to even
            e["dur"], e["ts"] = int(e["dur"]) + 0.0625 + (i % 8) / 16, (e["ts"] - 1.7e15) // 1 + 0.0625 + (i % 8) / 16
            ties[row] = int(e["dur"]) * 1000 + [62, 125, 188, 250, 312, 375, 438, 500][i % 8]  # 62.5 -> 62, 187.5 -> 188
        if "correlation" in a and i % 11 == 0:
            a["correlation"] = [2 ** 64 + 5, -(2 ** 63) - 1, 1.9e19, -7.99, "7"][i % 5]
            changed["ints"] += 1
    assert sum(changed.values()) > 100 and len(ties) > 100, changed
    data = json.dumps(doc).encode()
    # text-level edits: ints JSON writes but Python never prints (-0, past 2**64), and repeated
    # keys (the last one counts) in the args of ~500 events
    data = data.replace(b'"Input type": [', b'"Input type": [-0, 123456789012345678901234567890, ', 300)
    data = data.replace(b'"args": {"External id": ', b'"args": {"correlation": 7, "correlation": null, "stream": 99, '
                                                     b'"External id": null, "External id": ', 500)
    assert data.count(b'"stream": 99') == 500 and (b'"Input type"' not in data or b'[-0, ' in data)
    got, want = native_decode(scanner, data), decode.decode_events_msgspec(data)
    assert_same_events(got, want)
    assert (got.x_gpu["kind"] == -1).sum() >= changed["null kind"]
    assert got.x["dur_ns"][list(ties)].tolist() == list(ties.values())


# ---------------------------------------------------------------- bad input
def decoders(scanner=None):
    return [decode.decode_events_msgspec] + ([lambda data: native_decode(scanner, data)] if scanner else [])


def not_traces():
    real = trace_bytes(sample_trace("kineto_h100_cuda129_small.json"))
    name = real.index(b'"name": "') + 9
    cut = real.index(b'"traceEvents"')
    return {
        "truncated": real[:len(real) // 2],
        "cut after the key": real[:cut + 14],
        "gzip bytes": gzip.compress(real)[:200],
        "text": b"Profiler output\n",
        "empty": b"",
        "an object without traceEvents": b'{"schemaVersion": 1, "deviceProperties": []}',
        "a list of numbers": b"[1, 2, 3]",
        "traceEvents not a list": b'{"traceEvents": {"ph": "X"}}',
        "a name not UTF-8": real[:name] + b"\xff\xfe" + real[name + 2:],
        "trailing garbage": real + b"\n}",
    }


@pytest.mark.parametrize("case", ["truncated", "cut after the key", "gzip bytes", "text", "empty",
                                  "an object without traceEvents", "a list of numbers",
                                  "traceEvents not a list", "a name not UTF-8", "trailing garbage"])
def test_bad_input_is_a_trace_error_naming_the_byte(scanner, case):
    data = not_traces()[case]
    with pytest.raises(decode.TraceError):
        decode.decode_events_msgspec(data)
    with pytest.raises(decode.TraceError, match=r"at byte \d+$") as raised:
        native_decode(scanner, data)
    offset = int(str(raised.value).rsplit(" ", 1)[1])
    assert 0 <= offset <= len(data)


def agreeing(scanner, data: bytes) -> None:
    """The native scanner on any bytes: a TraceError or the reference's columns, never a crash.
    Where they part, only as documented: the reference lets bad UTF-8 pass in strings it skips
    (native refuses it), and raises OverflowError on a ts / dur past int64 ns (native TraceError)."""
    try:
        want, refused = decode.decode_events_msgspec(data), None
    except (ValueError, OverflowError) as e:  # msgspec's errors are ValueErrors
        want, refused = None, e
    try:
        got = native_decode(scanner, data)
    except decode.TraceError as e:
        if refused is None:
            assert "invalid UTF-8" in str(e), e
        elif isinstance(refused, OverflowError):
            assert "out of range" in str(e), e
        return
    assert refused is None, f"native accepted what the reference refused: {refused!r}"
    assert_same_events(got, want)


@pytest.mark.parametrize("name", SMALL)
def test_truncated_and_flipped_bytes_never_crash(scanner, name):
    data = trace_bytes(sample_trace(name))
    rng = random.Random(20240403)
    for end in sorted(rng.sample(range(len(data)), 60)) + list(range(len(data) - 40, len(data))):
        if data[end:].strip():
            with pytest.raises(decode.TraceError):
                native_decode(scanner, data[:end])
    structural = b'{}[]":,.-+0123456789eE\\u truefalsenull \x00\x1f\x7f\x80\xc3\xff'
    for _ in range(300):
        at = rng.randrange(len(data))
        mutated = data[:at] + bytes([rng.choice(structural)]) + data[at + 1:]
        agreeing(scanner, mutated)


DEEP = "[" * 5000 + "]" * 5000


@pytest.mark.parametrize("where", ["a top-level value", "a metadata event", "an event's args"])
def test_values_nested_thousands_deep_never_crash(scanner, where):
    """JSON nested deeper than Python's stack: a TraceError, never a RecursionError (was one out of
    msgspec for decoded values).  The scanner keeps raw args as text, never decoded: those read."""
    event = '{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":2%s}'
    doc = {"a top-level value": '{"traceEvents":[%s],"deviceProperties":%s}' % (event % "", DEEP),
           "a metadata event": '{"traceEvents":[{"ph":"M","name":"process_name","pid":1,"tid":1,"args":{"name":%s}},%s]}'
                               % (DEEP, event % ""),
           "an event's args": '{"traceEvents":[%s]}' % (event % (',"args":{"x":%s}' % DEEP))}[where].encode()
    with pytest.raises(decode.TraceError):  # msgspec recurses even to skip a value
        decode.decode_events_python(doc)
    if where == "an event's args":
        assert native_decode(scanner, doc).x["dur_ns"].tolist() == [2000]
    else:
        with pytest.raises(decode.TraceError, match="nested"):
            native_decode(scanner, doc)
