"""The TensorBoard plugin backend, driven through a real TensorBoard WSGI app (and real servers).

Runs are exported from the real reports in the shared samples; expected values come from the
reports themselves (tb_hwprof.read, or NVIDIA's ncu_report directly), never from the plugin.
"""
import gzip
import json
import os
import subprocess
import sys
import time
import urllib.error
from pathlib import Path

import pytest

import tb_hwprof
from tb_hwprof.analysis import compare
from tb_hwprof.logdir import columns, metadata, reader, tables
from tb_hwprof.plugin import hwprof_plugin, routes, static, store

from conftest import free_port, get_json, ncu_actions
from support_plugin import P, App, body

REPO = Path(__file__).resolve().parent.parent
V1 = "armleth/armleth_t4_full_2024.2.1"
V6 = "armleth/report_v6_1d_1_per_thread"
SPY = "spyinfer"


# -- fixtures --------------------------------------------------------------------------------
def ncu(samples_dir, name):
    return samples_dir / "ncu" / name


def export_samples(samples_dir, logdir: Path) -> None:
    tb_hwprof.export(ncu(samples_dir, "armleth_t4_full_2024.2.1.ncu-rep"), logdir, V1)
    tb_hwprof.export(ncu(samples_dir, "armleth_t4_series/report_v6_1d_1_per_thread.ncu-rep"), logdir, V6)
    tb_hwprof.export(ncu(samples_dir, "spyinfer_a10_105launches_2023.2.0.ncu-rep"), logdir, SPY)
    v2 = ncu(samples_dir, "armleth_t4_series/report_v2.ncu-rep")
    for name in ("broken/truncated", "broken/no_manifest", "broken/too_new"):
        tb_hwprof.export(v2, logdir, name)
    kernels = logdir / "broken/truncated/plugins/tb_hwprof" / metadata.KERNELS
    kernels.write_bytes(kernels.read_bytes()[:100])  # a half-written table
    (logdir / "broken/no_manifest/plugins/tb_hwprof" / metadata.MANIFEST).unlink()
    manifest = logdir / "broken/too_new/plugins/tb_hwprof" / metadata.MANIFEST
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "format_version": 99}))


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir, ncu_report_module):
    path = tmp_path_factory.mktemp("plugin") / "logs"
    export_samples(samples_dir, path)
    return path


@pytest.fixture(scope="module")
def app(logdir):
    return App(logdir)


# -- listing and runs ------------------------------------------------------------------------
def test_plugins_listing_enables_the_tab(app):
    listing = json.loads(body(app.get("/data/plugins_listing")))["tb_hwprof"]
    assert listing["enabled"] is True
    assert listing["loading_mechanism"] == {"type": "IFRAME", "module_path": P + "/static/index.js"}


def test_runs_lists_every_run_sorted_with_errors(app, samples_dir):
    runs = {r["run"]: r for r in app.json("/runs")["runs"]}
    assert list(runs) == sorted(runs)
    assert set(runs) == {V1, V6, SPY, "broken/truncated", "broken/no_manifest", "broken/too_new"}
    v1 = runs[V1]
    assert v1["error"] is None and v1["tool"] == "ncu" and v1["tool_version"] == "2024.2.1"
    assert v1["source_format"] == "ncu-rep" and v1["kernel_count"] == 1
    assert v1["source_path"] == str(ncu(samples_dir, "armleth_t4_full_2024.2.1.ncu-rep").resolve())  # readers store it resolved
    assert v1["devices"] == [{"id": 0, "name": "Tesla T4", "architecture": "cc7.5"}]
    assert runs[SPY]["kernel_count"] == 105
    assert "profile.json" in runs["broken/no_manifest"]["error"]
    assert "format version 99" in runs["broken/too_new"]["error"]
    assert "upgrade tb-hwprof" in runs["broken/too_new"]["error"]


# -- data routes -----------------------------------------------------------------------------
def test_kernels_is_the_exported_table_and_the_reports_durations(app, logdir, samples_dir):
    doc = app.json("/kernels", run=SPY)
    on_disk = json.loads(gzip.decompress((logdir / SPY / "plugins/tb_hwprof" / metadata.KERNELS).read_bytes()))
    assert doc == {"run": SPY, **on_disk}
    doc = columns.data_only(doc)  # every column value by value (some arrive as steps or constants)
    expected = tb_hwprof.read(ncu(samples_dir, "spyinfer_a10_105launches_2023.2.0.ncu-rep")).kernels
    assert doc["rows"] == len(expected) == 105
    assert doc["data"]["duration_ns"] == expected["duration_ns"].tolist()
    assert doc["data"]["launch_id"] == list(range(105))


def test_kernels_without_gzip_is_plain_json(app):
    response = app.client.get(P + "/kernels", query_string={"run": V1})  # no Accept-Encoding
    assert response.status_code == 200 and "Content-Encoding" not in response.headers
    assert json.loads(response.data)["data"]["duration_ns"] == [52576.0]


def test_kernel_groups(app):
    groups = app.json("/kernel_groups", run=SPY)["groups"]
    durations = columns.data_only(app.json("/kernels", run=SPY))["data"]["duration_ns"]
    assert len(groups) == 1
    g = groups[0]
    assert g["name"] == "__cuda_linear_fp32_fp16_kernel" and g["calls"] == 105
    assert g["demangled_name"].startswith("void __cuda_linear_fp32_fp16_kernel<(int)256, (int)4>(")
    assert g["total_ns"] == pytest.approx(sum(durations))
    assert (g["min_ns"], g["max_ns"]) == (min(durations), max(durations))
    assert g["mean_ns"] == pytest.approx(sum(durations) / 105) and g["pct_time"] == pytest.approx(100.0)
    assert g["bound"] == "latency"


def test_bottlenecks(app):
    doc = app.json("/bottlenecks", run=SPY)
    durations = columns.data_only(app.json("/kernels", run=SPY))["data"]["duration_ns"]
    assert doc["total_ns"] == pytest.approx(sum(durations))
    assert doc["by_bound"] == [{"bound": "latency", "time_ns": doc["total_ns"], "pct_time": 100.0, "launches": 105}]
    assert len(doc["top"]) == 20
    assert [t["duration_ns"] for t in doc["top"]] == sorted(durations, reverse=True)[:20]
    assert all(t["bound_reason"].startswith("latency-bound") for t in doc["top"])


def test_roofline(app):
    doc = app.json("/roofline", run=V1)
    device = doc["devices"][0]
    assert device["name"] == "Tesla T4"
    assert device["roofs"]["bytes_per_s_dram"]["source"] == "measured"
    assert device["roofs"]["flop_per_s_fp32"]["value"] > device["roofs"]["bytes_per_s_dram"]["value"]
    assert device["ridge_points"]["fp32"]["dram"] == pytest.approx(
        device["roofs"]["flop_per_s_fp32"]["value"] / device["roofs"]["bytes_per_s_dram"]["value"])
    [point] = doc["points"]
    assert point["duration_ns"] == 52576.0 and point["device"] == 0 and point["binding_roof"] == "dram"
    assert point["ai_dram"] > 0 and point["ai_l2"] is None
    assert app.json("/roofline", run=SPY)["points"] == []  # no FLOP counters in that report


def test_kernel_detail(app, samples_dir):
    doc = app.json("/kernel", run=SPY, launch="7")
    durations = columns.data_only(app.json("/kernels", run=SPY))["data"]["duration_ns"]
    assert doc["launch"] == 7 and doc["row"]["launch_id"] == 7
    assert doc["row"]["duration_ns"] == durations[7]
    value, unit = doc["raw_metrics"]["gpu__time_duration.sum"]
    assert value == durations[7] and unit == "ns"
    assert doc["rules"] and {"rule", "title", "message", "estimated_speedup_pct"} <= set(doc["rules"][0])
    app.json("/kernel", expect=404, run=SPY, launch="105")
    app.json("/kernel", expect=404, run=SPY, launch="-1")
    app.json("/kernel", expect=400, run=SPY, launch="x")
    app.json("/kernel", expect=400, run=SPY)


def test_kernel_detail_reads_one_details_file(logdir, monkeypatch):
    """/kernel answers from the launch's own details file, equal to the whole-run reader."""
    expected_raw, expected_rules = reader.read_all_details(logdir / SPY, 105)
    app = App(logdir)
    opened = []
    real = tables.read_json_gz
    monkeypatch.setattr(tables, "read_json_gz", lambda path, *args: opened.append(Path(path).name) or real(path, *args))
    for launch in (0, 57, 104):
        got = app.json("/kernel", run=SPY, launch=str(launch))
        assert got["raw_metrics"] == expected_raw[launch] and got["rules"] == expected_rules[launch]
    assert set(opened) == {Path(metadata.details_file(0)).name}  # 105 launches: one file, read per new launch


def test_kernel_detail_of_a_truncated_details_file_is_422(tmp_path, samples_dir, ncu_report_module):
    logs = tmp_path / "logs"
    tb_hwprof.export(ncu(samples_dir, "spyinfer_a10_105launches_2023.2.0.ncu-rep"), logs, "run")
    path = logs / "run/plugins/tb_hwprof" / metadata.details_file(3)
    path.write_bytes(path.read_bytes()[:-1000])
    app = App(logs)
    error = app.json("/kernel", expect=422, run="run", launch="3")["error"]
    assert metadata.details_file(3) in error and "re-export" in error
    assert app.json("/kernels", run="run")["rows"] == 105  # the table itself is fine


def gpu_time(ncu_report, path):
    """gpu__time_duration.sum summed over the report's launches, read by NVIDIA's own module."""
    ctx = ncu_report.load_report(str(path))
    total = 0.0
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            total += float(rng.action_by_idx(a).metric_by_name("gpu__time_duration.sum").value())
    return total


def test_compare_renamed_kernel_series(app, samples_dir, ncu_report_module):
    base_ns = gpu_time(ncu_report_module, ncu(samples_dir, "armleth_t4_full_2024.2.1.ncu-rep"))
    run_ns = gpu_time(ncu_report_module, ncu(samples_dir, "armleth_t4_series/report_v6_1d_1_per_thread.ncu-rep"))
    assert (base_ns, run_ns) == (52576.0, 47104.0)
    doc = app.json("/compare", base=V1, run=V6)
    assert doc["base"] == V1 and doc["run"] == V6
    assert doc["totals"] == {"base_ns": base_ns, "run_ns": run_ns, "speedup": pytest.approx(base_ns / run_ns)}
    # The series renamed its kernel (2D -> 1D): no name matches, the one kernel left on each side is
    # paired, and the pair says so (issue 12).
    [pair] = doc["matched"]
    assert (pair["base_name"], pair["run_name"], pair["paired_by"]) == ("matrix_addition2D", "matrix_addition1D",
                                                                        "only-one-left")
    assert (pair["base_ns"], pair["run_ns"]) == (base_ns, run_ns)
    assert doc["only_in_base"] == doc["only_in_run"] == []


def test_compare_same_kernel_matches_with_deltas(app):
    doc = app.json("/compare", base=V1, run=V1)
    [m] = doc["matched"]
    assert m["key"] == "matrix_addition2D(float *, float *, float *, int, int)"
    assert m["speedup"] == 1.0 and m["base_bound"] == m["run_bound"] == "memory"
    assert set(m["deltas"]) == set(compare.DELTA_COLUMNS)
    assert all(d in (0.0, None) for d in m["deltas"].values())
    app.json("/compare", expect=404, base="nope", run=V1)
    app.json("/compare", expect=400, base="../x", run=V1)


# -- security --------------------------------------------------------------------------------
TRAVERSALS = ["../../etc/passwd", "/etc/passwd", "a/../../etc", "..", "..\\..\\etc", "C:\\Windows",
              "x\x00y", "", "%2e%2e%2f%2e%2e%2fetc%2fpasswd", "..%2f..%2fetc"]


@pytest.mark.parametrize("route", ["/kernels", "/kernel_groups", "/kernel", "/roofline", "/bottlenecks"])
@pytest.mark.parametrize("run", TRAVERSALS)
def test_bad_run_names_are_refused(app, route, run):
    response = app.get(P + route, run=run, launch="0")
    assert response.status_code in (400, 404)
    assert "error" in json.loads(body(response))


@pytest.mark.parametrize("raw_query", ["run=%2e%2e%2f%2e%2e%2fetc%2fpasswd", "run=%252e%252e%252fetc%252fpasswd",
                                       "run=..%2F..%2Fetc%2Fpasswd", "run=%2Fetc%2Fpasswd", "run=a%00b"])
def test_encoded_traversals_are_refused(app, raw_query):
    response = app.client.get(f"{P}/kernels?{raw_query}")
    assert response.status_code == 400, response.data


def test_symlink_out_of_the_logdir_is_refused(tmp_path, samples_dir, ncu_report_module):
    outside, logs = tmp_path / "outside", tmp_path / "logs"
    tb_hwprof.export(ncu(samples_dir, "armleth_t4_full_2024.2.1.ncu-rep"), outside, "secret")
    tb_hwprof.export(ncu(samples_dir, "armleth_t4_full_2024.2.1.ncu-rep"), logs, "inside")
    (logs / "evil").symlink_to(outside / "secret", target_is_directory=True)
    app = App(logs)
    app.json("/kernels", expect=404, run="evil")
    app.json("/kernels", run="inside")
    runs = {r["run"]: r["error"] for r in app.json("/runs")["runs"]}
    assert runs["inside"] is None
    assert "outside the logdir" in runs.get("evil", "outside the logdir")  # listed or not: never served
    with pytest.raises(store.HttpError) as e:  # also when a data provider does list it
        store.RunStore(str(logs)).run_dir("evil")
    assert e.value.code == 404


# -- robustness ------------------------------------------------------------------------------
@pytest.mark.parametrize("run, words", [("broken/truncated", "kernels.json.gz"),
                                        ("broken/no_manifest", "profile.json"),
                                        ("broken/too_new", "format version 99")])
def test_broken_run_answers_422_and_others_still_work(app, run, words, samples_dir, ncu_report_module):
    for route in ("/kernels", "/kernel_groups", "/bottlenecks", "/roofline"):
        error = app.json(route, expect=422, run=run)["error"]
        assert words in error and "\n" not in error
    if run == "broken/truncated":  # /compare reads the run's compare table, which is intact
        [launch] = ncu_actions(ncu_report_module, ncu(samples_dir, "armleth_t4_series/report_v2.ncu-rep"))
        duration = launch.metric_by_name("gpu__time_duration.sum").as_double()
        assert app.json("/compare", base=V1, run=run)["totals"]["run_ns"] == pytest.approx(duration)
    else:
        app.json("/compare", expect=422, base=V1, run=run)
    assert app.json("/kernels", run=V1)["rows"] == 1
    runs = {r["run"]: r for r in app.json("/runs")["runs"]}
    assert words in runs[run]["error"]  # listed with its error once it failed to load
    assert runs[V1]["error"] is None


def test_unexpected_exception_is_a_json_error(app, monkeypatch):
    from tb_hwprof.plugin import views

    def boom(entry):
        raise RuntimeError("synthetic failure")
    monkeypatch.setattr(views, "bottlenecks", boom)
    app.store._loaded.clear()  # drop cached responses so the handler runs
    error = app.json("/bottlenecks", expect=422, run=V6)["error"]
    assert "RuntimeError: synthetic failure" in error


# -- caching ---------------------------------------------------------------------------------
def test_second_request_does_not_reread_and_a_changed_file_is_reloaded(tmp_path, samples_dir, ncu_report_module,
                                                                       monkeypatch):
    logs = tmp_path / "logs"
    tb_hwprof.export(ncu(samples_dir, "armleth_t4_full_2024.2.1.ncu-rep"), logs, "run")
    app = App(logs)
    reads = []
    real = reader.read_manifest
    monkeypatch.setattr(reader, "read_manifest", lambda d: reads.append(d) or real(d))
    first = app.json("/kernels", run="run")
    assert app.json("/kernels", run="run") == first
    app.json("/kernel_groups", run="run")
    app.json("/kernel_groups", run="run")
    assert app.store.loads["kernels"] == 2  # once for /kernels (bytes), once for the table; no more
    assert len(reads) == 1
    # Re-export another report in place: new mtimes and sizes, so everything is read again.
    tb_hwprof.export(ncu(samples_dir, "armleth_t4_series/report_v6_1d_1_per_thread.ncu-rep"), logs, "run",
                     overwrite=True)
    assert app.json("/kernels", run="run")["data"]["duration_ns"] == [47104.0]
    assert app.store.loads["kernels"] == 3 and len(reads) == 2


# -- static files ----------------------------------------------------------------------------
def test_static_index_js(app):
    if not (REPO / "frontend" / "index.js").is_file():
        pytest.skip("frontend/index.js not written yet")
    response = app.get(P + "/static/index.js")
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/javascript")
    assert body(response) == (REPO / "frontend" / "index.js").read_bytes()


@pytest.mark.parametrize("path", ["/static/../setup.py", "/static/%2e%2e/setup.py", "/static/..%2fsetup.py",
                                  "/static/.hidden.js", "/static/no_such_file.js", "/static/",
                                  "/static/%2fetc%2fpasswd", "/static/index.py"])
def test_static_refuses_anything_else(app, path):
    response = app.client.get(P + path)
    assert response.status_code == 404


def test_frontend_found_from_source():
    assert static.frontend_dir() == str(REPO / "frontend")


def test_entry_point_module_imports_nothing_heavy():
    code = ("import sys, tb_hwprof.plugin.hwprof_plugin; "
            "heavy = [m for m in ('pandas', 'numpy', 'ncu_report', 'tb_hwprof.plugin.service') if m in sys.modules]; "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})


# -- analyses (pure functions) ---------------------------------------------------------------
@pytest.mark.parametrize("name, key", [
    ("void k<float, 4>(float *, int) [clone .kd]", "void k<float, 4>(float *, int)"),
    ("  gemm(int)  ", "gemm(int)"),
    ("f(int) [clone .constprop.0] [clone .kd]", "f(int)"),
    ("k<[clone]>(int)", "k<[clone]>(int)"),
    (None, ""),
])
def test_normalise_kernel_name(name, key):
    assert compare.normalise_kernel_name(name) == key


def test_compare_aggregates_launches_duration_weighted():
    from tb_hwprof.core.model import normalise_kernels
    base = normalise_kernels([
        {"name": "k", "demangled_name": "k(int) [clone .kd]", "duration_ns": 100.0, "sm_throughput_pct": 10.0, "bound": "memory"},
        {"name": "k", "demangled_name": "k(int)", "duration_ns": 300.0, "sm_throughput_pct": 50.0, "bound": "compute"},
        {"name": "gone", "duration_ns": 5.0},
    ])
    run = normalise_kernels([{"name": "k", "demangled_name": "k(int)", "duration_ns": 200.0,
                              "sm_throughput_pct": 60.0, "bound": "compute"}])
    doc = compare.compare_kernels(base, run)
    [m] = doc["matched"]
    assert m["base_ns"] == 400.0 and m["run_ns"] == 200.0 and m["speedup"] == 2.0
    assert m["deltas"]["sm_throughput_pct"] == pytest.approx(60.0 - (10 * 100 + 50 * 300) / 400)
    assert m["deltas"]["dram_throughput_pct"] is None
    assert m["base_bound"] == "compute"  # the label covering most of the time, not the first
    assert doc["only_in_base"] == [{"key": "gone", "name": "gone", "total_ns": 5.0}]
    assert doc["totals"] == {"base_ns": 405.0, "run_ns": 200.0, "speedup": 405.0 / 200.0}


# -- real TensorBoard servers ----------------------------------------------------------------
def data_server_flag() -> str:
    """--load_fast=true when the Rust data server binary is installed, else the Python loader."""
    try:
        from tensorboard.data import server_ingester
        return "--load_fast=true" if server_ingester.get_server_binary() else "--load_fast=false"
    except Exception:  # noqa: BLE001 - any failure to find it means: not available
        return "--load_fast=false"


def plugin_env(tmp_path: Path) -> dict:
    """PYTHONPATH with this checkout, plus a stand-in dist-info declaring the entry point when
    tb_hwprof is not installed: TensorBoard then loads the plugin the way users get it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    probe = ("from importlib.metadata import entry_points; "
             "print(any(e.name == 'tb_hwprof' for e in entry_points(group='tensorboard_plugins')))")
    declared = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, cwd=tmp_path)
    if declared.stdout.strip() != "True":
        dist = tmp_path / "site" / "tb_hwprof_checkout-0.0.dist-info"
        dist.mkdir(parents=True)
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tb-hwprof-checkout\nVersion: 0.0\n")
        (dist / "entry_points.txt").write_text(
            "[tensorboard_plugins]\ntb_hwprof = tb_hwprof.plugin.hwprof_plugin:HwprofPluginLoader\n")
        env["PYTHONPATH"] += os.pathsep + str(dist.parent)
    return env


class TensorBoardServer:
    def __init__(self, logdir: Path, tmp_path: Path):
        self.port = free_port()
        self.log = open(tmp_path / "tensorboard.log", "w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--host", "127.0.0.1",
             "--port", str(self.port), "--reload_interval", "1", data_server_flag()],
            env=plugin_env(tmp_path), stdout=self.log, stderr=subprocess.STDOUT, cwd=tmp_path)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def wait_for(self, path: str, ready, timeout: float = 90):
        """GET path until ready(json) holds; fails with the server's log otherwise."""
        deadline, last = time.time() + timeout, None
        while time.time() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                last = get_json(self.url(path))
                if ready(last):
                    return last
            except (urllib.error.URLError, ConnectionError, json.JSONDecodeError) as e:
                last = e
            time.sleep(0.5)
        self.log.seek(0)
        pytest.fail(f"{path} never ready (last: {last!r}); tensorboard log:\n{self.log.read()[-4000:]}")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@pytest.fixture
def server_factory(tmp_path):
    servers = []

    def start(logdir):
        servers.append(TensorBoardServer(logdir, tmp_path))
        return servers[-1]
    yield start
    for s in servers:
        s.stop()


def test_real_tensorboard_server_loads_the_plugin(logdir, server_factory):
    tb = server_factory(logdir)
    listing = tb.wait_for("/data/plugins_listing", lambda d: d.get("tb_hwprof", {}).get("enabled"))
    assert listing["tb_hwprof"]["tab_name"] == "HW Profile"
    runs = tb.wait_for(P + "/runs", lambda d: len(d["runs"]) == 6)["runs"]
    assert [r["run"] for r in runs] == sorted([V1, V6, SPY, "broken/truncated", "broken/no_manifest", "broken/too_new"])
    assert get_json(tb.url(P + f"/kernels?run={V1}"))["data"]["duration_ns"] == [52576.0]
    with pytest.raises(urllib.error.HTTPError) as e:
        get_json(tb.url(P + "/kernels?run=..%2F..%2Fetc%2Fpasswd"))
    assert e.value.code == 400


def make_torch_trace(run_dir: Path) -> None:
    torch = pytest.importorskip("torch", reason="torch not installed (pip install torch==2.13.0)")
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
    x = torch.randn(64, 64)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=2),
                 on_trace_ready=tensorboard_trace_handler(str(run_dir))) as prof:
        for _ in range(4):
            x = torch.tanh(x @ x)
            prof.step()
    assert list(run_dir.glob("*.pt.trace.json*")), "torch wrote no trace"


def test_coexists_with_torch_tb_profiler(tmp_path, samples_dir, ncu_report_module, server_factory):
    pytest.importorskip("torch_tb_profiler", reason="torch-tb-profiler not installed (pip install torch-tb-profiler==0.4.3)")
    logs = tmp_path / "logs"
    make_torch_trace(logs / "pt_run")
    tb_hwprof.export(ncu(samples_dir, "armleth_t4_full_2024.2.1.ncu-rep"), logs, "hw_run")
    tb = server_factory(logs)
    listing = tb.wait_for("/data/plugins_listing", lambda d: d.get("pytorch_profiler", {}).get("enabled")
                          and d.get("tb_hwprof", {}).get("enabled"))
    assert listing["pytorch_profiler"]["enabled"] and listing["tb_hwprof"]["enabled"]
    pt_runs = tb.wait_for("/data/plugin/pytorch_profiler/runs", lambda d: "pt_run" in d.get("runs", []))
    assert "hw_run" not in pt_runs["runs"]
    assert [r["run"] for r in tb.wait_for(P + "/runs", lambda d: d["runs"])["runs"]] == ["hw_run"]


def test_every_view_has_a_served_route_and_a_frontend_module():
    """The views table (tb_hwprof/plugin/routes.py) is all the frontend knows: each view's route
    must be served, with a handler, and views/<name>.js must exist to draw it."""
    from tb_hwprof.plugin import routes
    from tb_hwprof.plugin.service import Service
    served = Service(None, None).routes
    assert set(served) == set(hwprof_plugin.ROUTES)
    for view in routes.VIEWS:
        assert view.route in served and callable(served[view.route])
        assert (REPO / "frontend/views" / f"{view.name}.js").is_file(), view.name


# -- which views a run has (/runs "views": the nav) -----------------------------------------------
SAMPLE_LOGS = REPO / "sample_logs"
KERNEL_VIEWS = {"kernels", "roofline", "bottlenecks"}


def placeable(kernels: dict) -> int:
    """Launches of a kernels file the Roofline can place: FLOP/s, an intensity, not above every roof."""
    data, n = kernels["data"], kernels["rows"]
    col = lambda name: data.get(name) or [None] * n  # noqa: E731
    return sum(1 for f, d, l2, l1, roof in zip(col("flop_per_s"), col("ai_dram"), col("ai_l2"), col("ai_l1"),
                                                col("binding_roof"))
               if f is not None and (d, l2, l1) != (None, None, None) and roof != "above every roof")


def views_from_files(run_dir: Path) -> set:
    """The per-run views a run has data for, judged from its files: Roofline where launches can be
    placed (FLOP/s and an intensity) or operator shapes under a roof, Bottlenecks where launches
    have durations, Plan where the run has a plan table, Series where the run's folder holds a
    series' event file and is no job's run."""
    assets = run_dir / "plugins/tb_hwprof"
    manifest = json.loads((assets / metadata.MANIFEST).read_text())
    kernels = columns.data_only(tables.read_json_gz(assets / metadata.KERNELS))
    launches = kernels["rows"]
    counted = lambda col: any(v is not None for v in kernels["data"].get(col, []))  # noqa: E731
    table = lambda name: (assets / f"summary_{name}.json.gz").is_file()  # noqa: E731
    roofs = any(d.get("roofs") for d in (manifest.get("roofline") or {}).values())
    group = run_dir.parent
    job = json.loads((group / "plugins/tb_hwprof" / metadata.MANIFEST).read_text()) if (
        group / "plugins/tb_hwprof" / metadata.MANIFEST).is_file() else {}
    has = {"cpu": table("cpu_hotspots"), "timeline": (assets / metadata.TIMELINE_INDEX).is_file(),
           "phases": table("nvtx_phases") or table("nvtx_sum"),
           "operators": table("op_gpu_time"), "steps": table("step_time_breakdown"),
           "summaries": any(p.name[len("summary_"):-len(".json.gz")] not in routes.DRAWER_TABLES + metadata.UNLISTED_SUMMARIES
                            for p in assets.glob("summary_*.json.gz")), "distributed": table("ranks"),
           "overview": bool(manifest.get("summary")) or "advice" in manifest or table("gpu_activity"),
           "kernels": launches > 0, "bottlenecks": counted("duration_ns"),
           "roofline": placeable(kernels) > 0 or (roofs and table("op_shapes")), "plan": table("plan"),
           "modules": table("module_tree"), "stacks": table("python_stacks"), "memory": table("memory_by_op"),
           "series": group != SAMPLE_LOGS and any(group.glob("*" + metadata.SERIES_EVENTS_SUFFIX))
                     and "summary_ranks" not in job.get("files", {})}
    return {name for name, yes in has.items() if yes}


@pytest.fixture(scope="module")
def sample_logs_app():
    if not any(SAMPLE_LOGS.rglob(metadata.MANIFEST)):
        pytest.skip("sample_logs/ holds no runs (scripts/make_sample_logs.py builds it)")
    return App(SAMPLE_LOGS)


def test_runs_list_exactly_the_views_each_sample_run_has_data_for(sample_logs_app):
    app = sample_logs_app
    doc = app.json("/runs")
    nav = {v["name"]: v for v in doc["views"]}
    per_run = {name for name, v in nav.items() if v["per_run"]}
    assert set(nav) - per_run == {"runs", "compare"} and per_run >= KERNEL_VIEWS | {"cpu", "overview", "timeline", "phases", "series"}
    on_disk = {str(p.parents[2].relative_to(SAMPLE_LOGS)) for p in SAMPLE_LOGS.rglob(metadata.MANIFEST)}
    runs = {r["run"]: r for r in doc["runs"]}
    assert set(runs) == on_disk
    for run, row in runs.items():
        assert row["error"] is None
        assert set(row["views"]) == views_from_files(SAMPLE_LOGS / run), run
        assert row["views"] == [name for name in nav if name in row["views"]]  # in nav order
        for name in row["views"]:  # each view listed is filled by its route
            app.json(nav[name]["route"], run=run)
        for name in per_run - set(row["views"]):  # the others have nothing to show
            assert nothing_to_show(app, nav[name]["route"], run), (run, name)
    by_tool = {}
    for row in runs.values():
        by_tool.setdefault(row["tool"], []).append(set(row["views"]))
    assert all({"kernels", "overview"} <= views - {"summaries"} <= KERNEL_VIEWS | {"overview", "series", "plan"}
               for views in by_tool["ncu"])
    assert all(views - {"summaries"} == {"cpu", "overview"} for views in by_tool["vtune"])
    # Nsight Systems: no FLOP counts, so no roofline to draw.
    assert all(views >= {"kernels", "bottlenecks", "overview", "timeline"} and "roofline" not in views
               for views in by_tool["nsys"])
    assert {run for run, row in runs.items() if "series" in row["views"]} == {
        run for run in runs if run.startswith("armleth_t4_series/")}


def nothing_to_show(app, route: str, run: str) -> bool:
    """Whether a view the run does not list would show nothing: no launch (kernel views), no launch
    duration (Bottlenecks), no point to place under a roof (Roofline), else its route's 404."""
    if app.json("/kernels", run=run)["rows"] == 0:
        return True
    if route == "/bottlenecks":
        return app.json(route, run=run)["total_ns"] is None
    if route == "/roofline":
        doc = app.json(route, run=run)
        placed = [p for p in doc["points"] if (p.get("flop_per_s") or 0) > 0] + doc["op_points"]
        return not placed or not any(d["roofs"] for d in doc["devices"])
    return app.get(P + route, run=run).status_code == 404


def test_a_logdir_that_is_one_run(tmp_path, samples_dir, ncu_report_module):
    """TensorBoard names a run written at the top of the logdir '.': served, though no folder name
    may be '.'."""
    run_dir = tb_hwprof.export(ncu(samples_dir, "armleth_t4_full_2024.2.1.ncu-rep"), tmp_path, "only")
    app = App(run_dir)
    [row] = app.json("/runs")["runs"]
    assert row["run"] == "." and row["error"] is None and row["kernel_count"] == 1
    assert app.json("/kernels", run=".")["rows"] == 1
    app.json("/kernels", expect=400, run="./.")


def test_every_table_the_analysis_makes_is_listed_as_tb_hwprofs(sample_logs_app):
    """Summaries never lists one of tb-hwprof's own tables as the profiler's (issue 32 item 7: counter_join and
    op_counters read 'from pytorch'): the analysis' tables, whatever step made them, are derived."""
    from tb_hwprof.analysis.pipeline import ANALYSIS_SUMMARIES
    seen = set()
    for row in sample_logs_app.json("/runs")["runs"]:
        if "summaries" not in row["views"]:
            continue
        for t in sample_logs_app.json("/summaries", run=row["run"])["tables"]:
            if t["name"] in ANALYSIS_SUMMARIES:
                seen.add(t["name"])
                assert t["derived"] and t["origin"] == "tb-hwprof", (row["run"], t["name"])
    assert {"module_tree", "memory_by_op", "op_gpu_time"} <= seen
