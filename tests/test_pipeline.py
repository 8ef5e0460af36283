"""The one pipeline (tb_hwprof/app/export.py over tb_hwprof/analysis/pipeline.py): read -> window -> analyse -> write.

For a real sample of every tool, the Analysis computed from the report equals the one a written run
gives back (load_analysis): findings, headline scalars, roofs per device, summary tables.  The CLI
and tb_hwprof.export write the same run; a run written before findings were typed still loads; a
summary step added to STEPS is written and read back as the analysis', not the reader's.
"""
import dataclasses
import gzip
import json

import numpy as np
import pandas as pd
import pytest

import tb_hwprof
from tb_hwprof.analysis import pipeline
from tb_hwprof.app import export
from tb_hwprof.core.findings import Finding
from tb_hwprof.app.cli import main as cli_main
from tb_hwprof.core.errors import HwprofError
from tb_hwprof.logdir import metadata, reader, tables

from conftest import sample

# One real sample per tool (ncu needs NVIDIA's ncu_report module: its own test below).
SAMPLES = {
    "nsys": "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite",
    "rocprof-trace": "rocprof/v3_rocpd_mi300x_ck_bmm_results.db",
    "rocprof-compute": "rocprof/rocprof-compute_bmm1_mi300x",
    "vtune": "vtune/amplxe2015_hotspots_openmp.csv",
}
NCU = "ncu/lakshya_gtx1660s_full_2024.1.1.ncu-rep"


def json_form(analysis):
    """An Analysis as the manifest holds it (NaN -> None, tuples -> lists, numpy -> Python)."""
    return {"findings": [tables.clean(f.to_dict()) for f in analysis.findings],
            "scalars": tables.clean(analysis.scalars),
            "roofline": tables.clean(analysis.roofline)}


def assert_same_analysis(computed, loaded):
    assert json_form(loaded) == json_form(computed)
    assert all(isinstance(f, Finding) for f in loaded.findings)
    assert set(loaded.summaries) == set(computed.summaries)
    for name, frame in computed.summaries.items():
        pd.testing.assert_frame_equal(loaded.summaries[name], frame)


def report(samples_dir, name):
    """A sample file, or a rocprof-compute workload folder (conftest's sample() takes files only)."""
    path = samples_dir / name
    return path if path.is_dir() else sample(samples_dir, name)


def exported_and_computed(path, tmp_path):
    profile = tb_hwprof.read(path)
    computed = tb_hwprof.analyse(profile)
    run_dir = tb_hwprof.export(path, tmp_path, "r")
    return profile, computed, run_dir


@pytest.mark.parametrize("tool", sorted(SAMPLES))
def test_load_analysis_gives_back_what_analyse_computed(tool, samples_dir, tmp_path):
    profile, computed, run_dir = exported_and_computed(report(samples_dir, SAMPLES[tool]), tmp_path)
    assert_same_analysis(computed, tb_hwprof.load_analysis(run_dir))
    back = tb_hwprof.load_run(run_dir)
    pd.testing.assert_frame_equal(back.kernels, profile.kernels)
    assert set(back.summaries) == set(profile.summaries)
    manifest = reader.read_manifest(run_dir)
    assert manifest["summary"] == tables.clean(computed.scalars)  # what the Scalars tab plots
    assert manifest["roofline"] == {str(d.id): tables.clean(computed.roofline[d.id]) for d in profile.devices}


def test_load_analysis_of_an_ncu_report(samples_dir, tmp_path, ncu_report_module):
    profile, computed, run_dir = exported_and_computed(sample(samples_dir, NCU), tmp_path)
    assert_same_analysis(computed, tb_hwprof.load_analysis(run_dir))
    # Roofs and ridge points from the report's own peaks, recomputed here.
    device = profile.devices[0]
    roofs = {k: p.value for k, p in device.peaks.items()}
    assert computed.roofline[device.id]["roofs"] == roofs
    for precision, levels in computed.roofline[device.id]["ridge_points"].items():
        for level, ridge in levels.items():
            assert ridge == pytest.approx(roofs[f"flop_per_s_{precision}"] / roofs[f"bytes_per_s_{level}"])
    assert computed.scalars["kernel_launches"] == len(profile.kernels)


def test_findings_of_every_tool_with_advice(samples_dir):
    """The VTune OpenMP sample and the DLProf trace carry findings; both come out typed."""
    vtune = tb_hwprof.analyse(tb_hwprof.read(sample(samples_dir, SAMPLES["vtune"])))
    nsys = tb_hwprof.analyse(tb_hwprof.read(sample(samples_dir, SAMPLES["nsys"])))
    assert [f.id for f in vtune.findings] == ["cpu.spin"]
    assert {f.id for f in nsys.findings} == {"gpu.sync_stalls", "gpu.idle", "gpu.pageable_copies"}


def file_content(path):
    """What a file holds, without the write time that gzip headers and zip entries carry."""
    if path.suffix == ".gz":
        return gzip.decompress(path.read_bytes())
    if path.suffix == ".npz":
        with np.load(path) as z:
            return {k: z[k].tolist() for k in z.files}
    return path.read_bytes()


def test_cli_and_api_write_the_same_run(samples_dir, tmp_path):
    path = sample(samples_dir, SAMPLES["nsys"])
    api = tb_hwprof.export(path, tmp_path / "api", "r", nvtx_range=None, trace="never")
    assert cli_main(["export", str(path), "--logdir", str(tmp_path / "cli"), "--run", "r", "--trace", "never",
                     "--quiet"]) == 0
    cli = tmp_path / "cli" / "r"

    def content(run_dir):
        assets = reader.asset_dir(run_dir)
        manifest = reader.read_manifest(run_dir)
        manifest["provenance"].pop("export_time")
        files = {p.relative_to(assets).as_posix(): file_content(p) for p in assets.rglob("*")
                 if p.is_file() and p.name != metadata.MANIFEST}
        return manifest, files
    assert content(api) == content(cli)
    assert reader.read_manifest(api)["timeline"]["trace_written"] is False


def test_window_and_trace_mode_are_arguments(samples_dir, tmp_path):
    """--nvtx-range through tb_hwprof.export: the manifest records the window; the model has no
    export fields."""
    from tb_hwprof.core.model import Timeline
    assert not {f.name for f in dataclasses.fields(Timeline)} & {"window", "trace_json"}
    path = sample(samples_dir, SAMPLES["nsys"])
    profile = tb_hwprof.read(path)
    nvtx = profile.timeline.slices["cat"] == 4
    name = profile.timeline.names[int(profile.timeline.slices["name"][nvtx][0])]
    run_dir = tb_hwprof.export(path, tmp_path, "w", nvtx_range=name, trace="always")
    info = reader.read_manifest(run_dir)["timeline"]
    first = profile.timeline.slices["start"][nvtx & (profile.timeline.slices["name"] ==
                                                     profile.timeline.names.index(name))].min()
    assert info["window"]["start_ns"] == first and info["trace_written"] is True
    assert info["kept_events"] + info["dropped_events"] == len(profile.timeline)
    with pytest.raises(HwprofError, match="trace mode"):
        tb_hwprof.export(path, tmp_path, "x", trace="sometimes")
    assert not (tmp_path / "x").exists()


def test_runs_written_before_findings_were_typed_still_load(samples_dir, tmp_path):
    """A format-2 run whose advice has the shape written before findings were typed ({id, severity,
    title, evidence, values, suggestion}) loads as Findings with the same words and numbers."""
    run_dir = tb_hwprof.export(sample(samples_dir, SAMPLES["nsys"]), tmp_path, "old")
    path = reader.asset_dir(run_dir) / metadata.MANIFEST
    manifest = json.loads(path.read_text())
    typed = manifest["advice"]
    manifest["advice"] = [{"id": f["id"], "severity": f["severity"], "title": f["title"], "evidence": f["text"],
                           "values": {k: v["value"] for k, v in f["figures"].items()}, "suggestion": f["remedy"]}
                          for f in typed]
    path.write_text(json.dumps(manifest))
    loaded = tb_hwprof.load_analysis(run_dir).findings
    assert len(loaded) == len(typed) > 0
    for new, old in zip(loaded, manifest["advice"]):
        assert (new.id, new.severity, new.title, new.text, new.remedy) == (
            old["id"], old["severity"], old["title"], old["evidence"], old["suggestion"])
        assert {k: f.value for k, f in new.figures.items()} == old["values"]


def kernel_totals(profile, analysis):
    """A derived table from the real kernels table: launches and time per kernel name."""
    k = profile.kernels
    analysis.summaries["kernel_name_totals"] = (k.groupby("name", sort=True)["duration_ns"].agg(["count", "sum"])
                                                .reset_index().rename(columns={"sum": "total_ns"}))


def test_a_summary_step_is_one_line(samples_dir, tmp_path, monkeypatch):
    steps = list(pipeline.STEPS)
    steps.insert(2, pipeline.Step(kernel_totals, makes=("kernel_name_totals",)))
    monkeypatch.setattr(pipeline, "STEPS", tuple(steps))
    monkeypatch.setattr(pipeline, "ANALYSIS_SUMMARIES", pipeline.ANALYSIS_SUMMARIES + ("kernel_name_totals",))
    path = sample(samples_dir, SAMPLES["nsys"])
    profile, computed, run_dir = exported_and_computed(path, tmp_path)
    table = computed.summaries["kernel_name_totals"]
    by_hand = {}
    for name, d in zip(profile.kernels["name"], profile.kernels["duration_ns"]):
        by_hand[name] = (by_hand.get(name, (0, 0))[0] + 1, by_hand.get(name, (0, 0))[1] + d)
    assert {n: (c, t) for n, c, t in zip(table["name"], table["count"], table["total_ns"])} == by_hand
    assert (reader.asset_dir(run_dir) / "summary_kernel_name_totals.json.gz").is_file()
    assert_same_analysis(computed, tb_hwprof.load_analysis(run_dir))
    assert "kernel_name_totals" not in tb_hwprof.load_run(run_dir).summaries  # the analysis', not the reader's


def test_a_failing_analysis_leaves_the_logdir_as_it_was(samples_dir, tmp_path, monkeypatch):
    """Runs are staged (their timeline files written on a background thread) before the analysis; when
    the analysis of any input fails, every staged folder is removed: no run, no hidden leftover."""
    trace = sample(samples_dir, "nsys/dlprof_rtx2070s_nvtx_2022.1.3.sqlite")
    other = sample(samples_dir, "nsys/annikola_gtx1050_2024.5.1.sqlite")
    real = export.analyse
    calls = []

    def second_fails(profile, **options):
        calls.append(profile.provenance.source_path)
        if len(calls) == 2:
            raise HwprofError("analysis failed on purpose")
        return real(profile, **options)
    monkeypatch.setattr(export, "analyse", second_fails)
    logdir = tmp_path / "logs"
    with pytest.raises(HwprofError, match="on purpose"):
        export.export_reports([trace, other], logdir, ["a", "b"])
    assert len(calls) == 2
    assert not logdir.exists() or list(logdir.rglob("*")) == []
    monkeypatch.setattr(export, "analyse", real)
    export.export_reports([trace, other], logdir, ["a", "b"])  # and the same export then goes through
    assert sorted(p.name for p in logdir.iterdir()) == ["a", "b"]
    assert reader.read_manifest(logdir / "a")["timeline"]["trace_written"] is True
