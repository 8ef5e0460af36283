"""Compare (issue 12) on real pairs of profiles: pairing and how each pair was made, the per-pair
detail, the warnings that qualify the totals, the ncu-vs-tracer check, and `tb-hwprof compare`.

Every figure is checked against the raw files read independently: NVIDIA's ncu_report for
.ncu-rep, sqlite3 for Nsight Systems exports, the trace JSON for PyTorch traces.
"""
import gzip
import json
import sqlite3
from collections import defaultdict

import pandas as pd
import pytest

import tb_hwprof
from tb_hwprof.analysis import compare
from tb_hwprof.app.cli import main
from tb_hwprof.plugin import store, views

from conftest import sample
from support_compare import V1, V2, V8, ncu_launches

DLPROF = "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite"
ANNIKOLA = "nsys/annikola_gtx1050_2024.5.1.sqlite"
NSYS_T4 = "nsys/gpu4_t4_2022.4.2.sqlite"
HTA_CONTROL, HTA_TEST = "torch/hta_trace_diff_control.json.gz", "torch/hta_trace_diff_test.json.gz"
RN50, RN50_WORKERS4 = "torch/kineto_rn50_v100_jun2021.json.gz", "torch/kineto_rn50_v100_workers4_jun2021.json.gz"


# -- independent readers of the raw files --------------------------------------------------------
def sqlite_kernels(path):
    """{demangled name: (short name, [durations])} and per instantiation its launch configurations."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = db.execute("SELECT d.value, s.value, k.[end] - k.start, gridX, gridY, gridZ, blockX, blockY, blockZ, "
                      "registersPerThread, staticSharedMemory + dynamicSharedMemory FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                      "JOIN StringIds d ON d.id = k.demangledName JOIN StringIds s ON s.id = k.shortName").fetchall()
    db.close()
    kernels, configs = defaultdict(lambda: ["", []]), defaultdict(set)
    for demangled, short, duration, *config in rows:
        kernels[demangled][0] = short
        kernels[demangled][1].append(float(duration))
        configs[demangled].add(tuple(config))
    return dict(kernels), dict(configs)


def trace_kernels(path):
    """{kernel name: total ns} from a PyTorch trace's kernel events, and the GPU names it lists."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    totals = defaultdict(float)
    devices = set()
    for e in doc["traceEvents"]:
        if e.get("cat") in ("kernel", "Kernel") and e.get("ph") == "X":
            totals[e["name"]] += e["dur"] * 1000.0
            devices.add(e["args"]["device"])
    names = {p["id"]: p["name"] for p in doc.get("deviceProperties", [])}
    return dict(totals), {names[d] for d in devices if d in names}


def profiler_steps(path):
    """The ProfilerStep#N ranges of a PyTorch trace."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    return len({e["name"] for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")})


@pytest.fixture(scope="module")
def profiles(samples_dir):
    cache = {}

    def read(relative):
        if relative not in cache:
            cache[relative] = tb_hwprof.read(sample(samples_dir, relative))
        return cache[relative]
    return read


def info(profile):
    devices = {d.id: d.name for d in profile.devices}
    ran = {devices.get(int(x)) for x in profile.kernels["device"].dropna()} - {None}
    return compare.RunInfo(profile.provenance.tool, tuple(sorted(ran)))


def compared(profiles, base, run, chosen=()):
    b, r = profiles(base), profiles(run)
    return compare.compare_kernels(b.kernels, r.kernels, chosen, info(b), info(r))


# -- pairing --------------------------------------------------------------------------------------
def test_renamed_kernel_of_a_series_pairs_as_only_one_left(profiles, samples_dir, ncu_report_module):
    [(b_name, b_ns, _)] = ncu_launches(ncu_report_module, samples_dir / V1)
    [(r_name, r_ns, _)] = ncu_launches(ncu_report_module, samples_dir / V8)
    assert (b_name, r_name) == ("matrix_addition2D", "matrix_addition1D_stripped")
    doc = compared(profiles, V1, V8)
    [m] = doc["matched"]
    assert m["paired_by"] == "only-one-left"
    assert (m["base_name"], m["run_name"]) == (b_name, r_name)
    assert (m["base_ns"], m["run_ns"]) == (b_ns, r_ns)
    assert m["speedup"] == pytest.approx(b_ns / r_ns)
    assert doc["only_in_base"] == doc["only_in_run"] == []
    assert doc["totals"] == {"base_ns": b_ns, "run_ns": r_ns, "speedup": pytest.approx(b_ns / r_ns)}
    assert doc["basis"]["per_step"] is False  # no profiler steps: whole runs
    # Inferred, not named: said, but the speed-up is still a result (same program, GPU and tool).
    assert [w["id"] for w in doc["warnings"]] == ["inferred-pairs-only"] and doc["comparable"] is True


def test_same_kernel_pairs_by_mangled_name(profiles):
    doc = compared(profiles, V1, V2)
    [m] = doc["matched"]
    assert m["paired_by"] == "mangled" and m["key"] == m["run_key"] == profiles(V1).kernels["demangled_name"][0]
    assert doc["warnings"] == [] and doc["comparable"] is True


def test_instantiations_are_paired_and_shown_apart(profiles, samples_dir):
    kernels, _ = sqlite_kernels(sample(samples_dir, DLPROF))
    doc = compared(profiles, DLPROF, DLPROF)
    assert {m["key"] for m in doc["matched"]} == set(kernels)
    assert {m["paired_by"] for m in doc["matched"]} == {"mangled"}
    for m in doc["matched"]:
        assert m["base_ns"] == pytest.approx(sum(kernels[m["key"]][1]))
    # Every instantiation of the FFT template shows with its template arguments, each once.
    fft = [d for d, (short, _) in kernels.items() if short == "fft2d_r2c_32x32"]
    labels = [m["base_name"] for m in doc["matched"] if m["base_name"].startswith("fft2d_r2c_32x32")]
    assert len(fft) > 1 and sorted(labels) == sorted(set(labels)) and len(labels) == len(fft)
    for label in labels:
        assert any(d.startswith("void " + label + "(") for d in fft), label


def test_unrelated_programs_say_so_above_the_totals(profiles, samples_dir):
    """The issue's '6096.90x in green without a word': two programs on two GPUs, nothing paired."""
    base_kernels, _ = sqlite_kernels(sample(samples_dir, ANNIKOLA))
    run_kernels, _ = sqlite_kernels(sample(samples_dir, DLPROF))
    doc = compared(profiles, ANNIKOLA, DLPROF)
    base_ns = sum(sum(d) for _, d in base_kernels.values())
    run_ns = sum(sum(d) for _, d in run_kernels.values())
    assert doc["totals"]["speedup"] == pytest.approx(base_ns / run_ns)
    assert doc["matched"] == [] and doc["comparable"] is False
    assert [w["id"] for w in doc["warnings"]] == ["no-common-kernel", "different-devices"]
    assert doc["warnings"][0]["text"] == "no kernel in common: the totals compare different programs"
    assert {o["key"] for o in doc["only_in_base"]} == set(base_kernels)
    assert {o["key"] for o in doc["only_in_run"]} == set(run_kernels)
    # Only-in lists: the FFT instantiations each under a label of its own.
    fft = [doc["labels"]["run"].get(o["key"], o["name"]) for o in doc["only_in_run"] if o["name"] == "fft2d_r2c_32x32"]
    assert len(fft) == len([d for d, (s, _) in run_kernels.items() if s == "fft2d_r2c_32x32"]) > 1
    assert len(set(fft)) == len(fft)


def test_no_kernel_in_common_on_one_gpu(profiles):
    doc = compared(profiles, "ncu/lakshya_gtx1660s_full_2024.1.1.ncu-rep", "ncu/raytracer_gtx1660s_2021.1.0.ncu-rep")
    assert doc["matched"] == [] and [w["id"] for w in doc["warnings"]] == ["no-common-kernel"]
    assert doc["comparable"] is False


def test_launch_configuration_alone_suggests_a_pair_and_never_makes_one(profiles, samples_dir, capsys):
    """The dlprof kernels against themselves renamed: the name stages find nothing.  Each instantiation
    whose one launch configuration is unique in the run is suggested with its renamed self, not paired
    (issue 32: different kernels of one grid were paired and "sped up 43.90x"); --pair confirms it."""
    kernels = profiles(DLPROF).kernels
    renamed = kernels.assign(**{c: "renamed_" + kernels[c] for c in ("name", "demangled_name", "mangled_name")})
    doc = compare.compare_kernels(kernels, renamed)
    _, configs = sqlite_kernels(sample(samples_dir, DLPROF))
    single = {d: next(iter(c)) for d, c in configs.items() if len(c) == 1}
    counts = pd.Series(list(single.values())).value_counts()
    expected = {d for d, c in single.items() if counts[c] == 1}
    assert expected and doc["matched"] == []
    assert {s["base_key"] for s in doc["suggested_pairs"]} == expected
    assert all(s["run_key"] == "renamed_" + s["base_key"] for s in doc["suggested_pairs"])
    first = doc["suggested_pairs"][0]
    confirmed = compare.compare_kernels(kernels, renamed, [(first["base_key"], first["run_key"])])
    assert [(m["key"], m["paired_by"]) for m in confirmed["matched"]] == [(first["base_key"], "user")]
    from tb_hwprof.app.compare_cli import render_text
    from types import SimpleNamespace
    side = SimpleNamespace(path="x", info=compare.RunInfo())
    text = render_text(doc, side, side, None, 0, False)
    assert f"--pair '{first['base_key']}:{first['run_key']}'" in text


def test_user_pairs_come_first_and_names_with_colons_resolve(profiles):
    base, run = compare.kernel_set(profiles(HTA_CONTROL).kernels), compare.kernel_set(profiles(HTA_TEST).kernels)
    b_key = next(k for k in base.keys if "::" in k and k in run.groups)
    r_key = next(k for k in run.keys if "::" in k and k != b_key)
    chosen = compare.resolve_choice(base, run, f"{b_key}:{r_key}")
    assert chosen == (b_key, r_key)
    doc = compare.compare_sets(base, run, [chosen])
    [m] = [m for m in doc["matched"] if m["key"] == b_key]
    assert m["run_key"] == r_key and m["paired_by"] == "user"
    with pytest.raises(ValueError, match="BASELINE_KERNEL:RUN_KERNEL"):
        compare.resolve_choice(base, run, "no_such_kernel:other")


@pytest.mark.parametrize("base, run", [(HTA_CONTROL, HTA_TEST), (RN50, RN50_WORKERS4)])
def test_pytorch_traces_pair_by_name_against_the_trace_json(profiles, samples_dir, base, run):
    b_totals, b_gpus = trace_kernels(sample(samples_dir, base))
    r_totals, r_gpus = trace_kernels(sample(samples_dir, run))
    doc = compared(profiles, base, run)
    by_name = {m["key"]: m for m in doc["matched"] if m["paired_by"] == "demangled"}
    assert set(by_name) == set(b_totals) & set(r_totals)
    for name, m in by_name.items():
        assert m["base_ns"] == pytest.approx(b_totals[name]) and m["run_ns"] == pytest.approx(r_totals[name])
    assert doc["totals"]["base_ns"] == pytest.approx(sum(b_totals.values()))
    assert doc["totals"]["run_ns"] == pytest.approx(sum(r_totals.values()))
    differ = b_gpus != r_gpus
    assert ("different-devices" in {w["id"] for w in doc["warnings"]}) == differ
    assert doc["comparable"] is not differ


def test_cross_tool_pairs_show_both_times_and_flag_the_ratio(profiles, samples_dir, ncu_report_module):
    db = sqlite3.connect(f"file:{sample(samples_dir, NSYS_T4)}?mode=ro", uri=True)
    nsys = [float(d) for (d,) in db.execute("SELECT [end] - start FROM CUPTI_ACTIVITY_KIND_KERNEL")]
    db.close()
    ncu = [ns for _, ns, _ in ncu_launches(ncu_report_module, samples_dir / V1)]
    base, run = compare.kernel_set(profiles(NSYS_T4).kernels), compare.kernel_set(profiles(V1).kernels)
    chosen = [compare.resolve_choice(base, run, "vecAdd:matrix_addition2D")]
    doc = compare.compare_sets(base, run, chosen, info(profiles(NSYS_T4)), info(profiles(V1)))
    [m] = doc["matched"]
    assert m["paired_by"] == "user"
    check = m["cross_tool"]
    assert check["ncu_ns_per_launch"] == pytest.approx(sum(ncu) / len(ncu))
    assert check["trace_ns_per_launch"] == pytest.approx(sum(nsys) / len(nsys))
    ratio = (sum(ncu) / len(ncu)) / (sum(nsys) / len(nsys))
    assert check["ratio"] == pytest.approx(ratio)
    assert check["flagged"] == (max(ratio, 1 / ratio) > compare.CROSS_TOOL_RATIO_LIMIT)
    summary = doc["cross_tool"]
    assert summary["ncu_side"] == "run" and summary["trace_tool"] == "nsys"
    assert "--clock-control base" in summary["causes"] and "--cache-control all" in summary["causes"]
    assert "different-tools" in {w["id"] for w in doc["warnings"]} and doc["comparable"] is False


# -- one pair in detail ---------------------------------------------------------------------------
def test_pair_detail_shows_which_metrics_moved(profiles, samples_dir, ncu_report_module):
    [(_, _, b_raw)] = ncu_launches(ncu_report_module, samples_dir / V1)
    [(_, _, r_raw)] = ncu_launches(ncu_report_module, samples_dir / V8)
    b, r = profiles(V1), profiles(V8)
    bset, rset = compare.kernel_set(b.kernels), compare.kernel_set(r.kernels)
    detail = compare.pair_detail(bset, rset, bset.keys[0], rset.keys[0], b.kernels.iloc[0], r.kernels.iloc[0],
                                 b.raw_metrics[0], r.raw_metrics[0])
    rows = {(x["source"], x["name"]): x for x in detail["rows"]}
    shared = {n for n in b_raw if n in r_raw}
    numeric = {n for n in shared if ("raw", n) in rows}
    assert len(numeric) > 500
    for name in numeric:
        row = rows[("raw", name)]
        assert (row["base"], row["run"]) == (pytest.approx(b_raw[name]), pytest.approx(r_raw[name]))
    grid = rows[("raw", "launch__grid_dim_x")]
    assert (grid["base"], grid["run"]) == (b_raw["launch__grid_dim_x"], r_raw["launch__grid_dim_x"]) == (63, 3907)
    assert grid["relative"] == pytest.approx((3907 - 63) / 63)
    duration = rows[("table", "duration_ns")]
    assert duration["diff"] == r_raw["gpu__time_duration.sum"] - b_raw["gpu__time_duration.sum"]
    # Largest relative change first, unchanged last.
    ranked = [abs(x["relative"]) for x in detail["rows"] if x["relative"]]
    assert ranked == sorted(ranked, reverse=True)
    assert detail["rows"][-1]["diff"] in (0.0, None)
    assert detail["base"]["bound"] == b.kernels["bound"][0] and detail["run"]["bound_reason"] == r.kernels["bound_reason"][0]


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, samples_dir, ncu_report_module):
    path = tmp_path_factory.mktemp("compare") / "logs"
    path.mkdir()
    for name, relative in (("v1", V1), ("v8", V8), ("t4_nsys", NSYS_T4)):
        tb_hwprof.export(sample(samples_dir, relative), path, name)
    return path


def entries(logdir, *runs):
    runs_store = store.RunStore(str(logdir))
    return [runs_store.entry(r, runs_store.run_dir(r)) for r in runs]


def test_plugin_compare_and_pair_detail(logdir, samples_dir, ncu_report_module):
    base, run = entries(logdir, "v1", "v8")
    doc = views.compare_runs(base, run)
    [m] = doc["matched"]
    assert m["paired_by"] == "only-one-left"
    detail = views.compare_pair(base, run, m["key"], m["run_key"])
    [(_, _, b_raw)] = ncu_launches(ncu_report_module, samples_dir / V1)
    row = next(x for x in detail["rows"] if x["name"] == "dram__bytes_read.sum")
    assert row["base"] == pytest.approx(b_raw["dram__bytes_read.sum"])
    with pytest.raises(store.HttpError) as e:
        views.compare_pair(base, run, "nope", m["run_key"])
    assert e.value.code == 404
    with pytest.raises(store.HttpError) as e:
        views.pair_choices(base, run, ["nope:matrix_addition1D_stripped"])
    assert e.value.code == 400 and "BASELINE_KERNEL:RUN_KERNEL" in e.value.message
    assert views.pair_choices(base, run, ["matrix_addition2D:matrix_addition1D_stripped"]) == [(m["key"], m["run_key"])]


def test_plugin_compare_warns_on_tools_and_checks_cross_tool(logdir):
    base, run = entries(logdir, "t4_nsys", "v1")
    doc = views.compare_runs(base, run)
    assert {w["id"] for w in doc["warnings"]} >= {"different-tools"} and doc["comparable"] is False
    assert doc["cross_tool"]["threshold"] == compare.CROSS_TOOL_RATIO_LIMIT


# -- tb-hwprof compare ----------------------------------------------------------------------------
def test_cli_table_of_exported_runs(logdir, capsys, samples_dir, ncu_report_module):
    [(_, b_ns, _)] = ncu_launches(ncu_report_module, samples_dir / V1)
    [(_, r_ns, _)] = ncu_launches(ncu_report_module, samples_dir / V8)
    assert main(["compare", str(logdir / "v1"), str(logdir / "v8")]) == 0
    out = capsys.readouterr().out
    assert "matrix_addition2D -> matrix_addition1D_stripped" in out and "only-one-left" in out
    assert f"speed-up {b_ns / r_ns:.2f}x" in out
    assert "WARNING: no kernel name in common" in out


def test_cli_text_cuts_long_kernel_names_and_markdown_keeps_them(capsys, samples_dir):
    """ResNet-50's templated kernel names run to hundreds of characters: the terminal table shows the
    start of each (as the plugin's tables do), so no row is padded to the longest; markdown keeps them."""
    from tb_hwprof.app.compare_cli import NAME_WIDTH
    base, run = str(sample(samples_dir, RN50)), str(sample(samples_dir, RN50_WORKERS4))
    names = set(trace_kernels(samples_dir / RN50)[0]) | set(trace_kernels(samples_dir / RN50_WORKERS4)[0])
    assert max(map(len, names)) > 3 * NAME_WIDTH
    assert main(["compare", base, run, "--limit", "0"]) == 0
    section = capsys.readouterr().out.split("paired kernels (")[1].split("\n\n")[0].splitlines()[2:]
    assert section and max(map(len, section)) < NAME_WIDTH + 60
    assert main(["compare", base, run, "--format", "json"]) == 0
    pairs = [m["base_name"] if m["base_name"] == m["run_name"] else f"{m['base_name']} -> {m['run_name']}"
             for m in json.loads(capsys.readouterr().out)["matched"]]
    cut = [line[:NAME_WIDTH] for line in section if line[NAME_WIDTH - 3:NAME_WIDTH] == "..."]
    assert len(cut) == sum(len(p) > NAME_WIDTH for p in pairs) > 0
    assert all(any(p.startswith(c[:-3]) for p in pairs) for c in cut)
    assert main(["compare", base, run, "--limit", "0", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert all(f"| {p} |" in out for p in pairs)


def test_cli_json_of_reports_read_on_the_fly(capsys, samples_dir):
    assert main(["compare", str(sample(samples_dir, RN50)), str(sample(samples_dir, RN50_WORKERS4)), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    b_totals, _ = trace_kernels(samples_dir / RN50)
    steps = profiler_steps(samples_dir / RN50)  # both traces: ProfilerStep#5..10, compared per step
    assert {k: doc["basis"][k] for k in ("per_step", "steps", "text")} == {
        "per_step": True, "steps": [steps, steps], "text": "per step: baseline 6 steps, run 6 steps"}
    assert doc["basis"]["whole_ns"][0] == pytest.approx(sum(b_totals.values()))
    assert doc["totals"]["base_ns"] == pytest.approx(sum(b_totals.values()) / steps)
    assert doc["gate"] is None and doc["matched"] and all(m["paired_by"] == "demangled" for m in doc["matched"])


def test_cli_fails_if_slower_naming_what_regressed(logdir, capsys, samples_dir, ncu_report_module):
    [(_, v1_ns, _)] = ncu_launches(ncu_report_module, samples_dir / V1)
    [(_, v8_ns, _)] = ncu_launches(ncu_report_module, samples_dir / V8)
    slower = (v1_ns - v8_ns) / v8_ns * 100  # v8 -> v1 is this much slower
    assert main(["compare", str(logdir / "v8"), str(logdir / "v1"), "--fail-if-slower", f"{slower - 1:.3f}",
                 "--format", "markdown"]) == 1
    out = capsys.readouterr().out
    assert "REGRESSED: total" in out and "REGRESSED: matrix_addition1D_stripped -> matrix_addition2D" in out
    assert f"+{slower:.1f}% worse" in out
    assert main(["compare", str(logdir / "v8"), str(logdir / "v1"), "--fail-if-slower", f"{slower + 1:.3f}"]) == 0
    assert "PASSED" in capsys.readouterr().out
    # Below --min-time-us a kernel is not gated (the total still is).
    assert main(["compare", str(logdir / "v8"), str(logdir / "v1"), "--fail-if-slower", "1", "--min-time-us", "1000"]) == 1
    out = capsys.readouterr().out
    assert "REGRESSED: total" in out and "REGRESSED: matrix_addition1D" not in out


def test_cli_gates_on_another_metric_with_its_direction(logdir, capsys, samples_dir, ncu_report_module):
    [(_, _, b_raw)] = ncu_launches(ncu_report_module, samples_dir / V1)
    [(_, _, r_raw)] = ncu_launches(ncu_report_module, samples_dir / V8)
    b, r = b_raw["lts__t_sector_hit_rate.pct"], r_raw["lts__t_sector_hit_rate.pct"]
    assert r < b  # the L2 hit rate fell from v1 to v8: worse for a higher-is-better metric
    code = main(["compare", str(logdir / "v1"), str(logdir / "v8"), "--fail-if-slower", "5", "--metric", "l2_hit_rate_pct"])
    out = capsys.readouterr().out
    assert code == 1 and "l2_hit_rate_pct (higher is better)" in out
    assert f"({(b - r) / b * 100:+.1f}% worse)" in out
    assert main(["compare", str(logdir / "v1"), str(logdir / "v8"), "--fail-if-slower", "5", "--metric", "grid"]) == 1
    assert "not a numeric column" in capsys.readouterr().err


def test_cli_missing_input_is_one_line(tmp_path, capsys, logdir):
    assert main(["compare", str(tmp_path / "nope"), str(logdir / "v1")]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "nope" in err and "exported run folder" in err


def test_cli_prints_nvtx_phases_both_runs_have(capsys, samples_dir):
    """Both sides one NVTX-annotated capture: every range name paired, each at speed-up 1.00x."""
    path = sample(samples_dir, DLPROF)
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    [(ranges,)] = db.execute("SELECT count(DISTINCT coalesce(n.text, s.value)) FROM NVTX_EVENTS n "
                             "LEFT JOIN StringIds s ON s.id = n.textId WHERE n.[end] IS NOT NULL").fetchall()
    db.close()
    assert main(["compare", str(path), str(path), "--limit", "0"]) == 0
    out = capsys.readouterr().out
    assert f"NVTX phases matched by name ({ranges})" in out
    section = out.split("NVTX phases matched by name")[1].split("\n\n")[0].splitlines()[2:]
    assert len(section) == ranges and all("1.00x" in line for line in section)


def test_routes_take_pairs_and_serve_a_pair(logdir):
    from support_plugin import P, App, body
    app = App(logdir)
    response = app.client.get(f"{P}/compare?base=v1&run=t4_nsys&pair=matrix_addition2D:vecAdd",
                              headers={"Accept-Encoding": "gzip"})
    doc = json.loads(body(response))
    [m] = doc["matched"]
    assert response.status_code == 200 and m["paired_by"] == "user"
    assert app.json("/compare", expect=400, base="v1", run="v8", pair="nope:nothing")["error"].startswith("pair 'nope:nothing'")
    detail = app.json("/compare_pair", base="v1", run="v8", base_key=m["key"],
                      run_key=app.json("/compare", base="v1", run="v8")["matched"][0]["run_key"])
    assert {r["name"] for r in detail["rows"]} >= {"duration_ns", "launch__grid_dim_x"}
    app.json("/compare_pair", expect=404, base="v1", run="v8", base_key="nope", run_key="nope")


def test_a_cpu_profile_has_nothing_to_compare(profiles):
    doc = compared(profiles, "vtune/amplxe2015_hotspots_openmp.csv", V1)
    assert [w["id"] for w in doc["warnings"]] == ["no-kernels", "different-tools"]
    assert "baseline holds no GPU kernels" in doc["warnings"][0]["text"] and doc["comparable"] is False
    assert doc["matched"] == [] and [o["name"] for o in doc["only_in_run"]] == ["matrix_addition2D"]


def test_the_command_line_starts_without_pandas():
    """Registering `compare` must not make every command (`--help`, `export`'s parser) import pandas."""
    import subprocess
    import sys
    code = "import sys; from tb_hwprof.app.cli import build_parser; build_parser(); print('pandas' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"
