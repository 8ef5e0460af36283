"""tb_hwprof.torch.trace_handler with the real (CPU) torch: a model profiled with a schedule gives a
run that both torch-tb-profiler and tb-hwprof list; PyTorch run folders exported beside their
traces, which stay untouched."""
import hashlib
import json
import time
from pathlib import Path

import pytest

from support_plugin import App, body

import tb_hwprof
from tb_hwprof.core.errors import RunExists
from tb_hwprof.torch import export_folder, folder_exports, trace_handler

torch = pytest.importorskip("torch")


def _profile_small_model(handler, steps: int = 6) -> None:
    from torch.profiler import ProfilerActivity, profile, schedule

    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                 on_trace_ready=handler, record_shapes=True) as prof:
        for _ in range(steps):
            optimiser.zero_grad()
            model(torch.randn(16, 32)).sum().backward()
            optimiser.step()
            prof.step()


def test_trace_handler_gives_a_run_both_plugins_list(tmp_path):
    _profile_small_model(trace_handler(tmp_path, run="exp", worker="worker0"))
    run_dir = tmp_path / "exp"
    traces = sorted(run_dir.glob("*.pt.trace.json.gz"))
    assert len(traces) == 1 and traces[0].name.startswith("worker0.")
    assert (run_dir / "plugins" / "tb_hwprof" / "profile.json").is_file()
    assert list(run_dir.glob("events.out.tfevents.*.tb-hwprof"))

    # What the run holds: the active steps the schedule recorded, the model's operators.
    profile = tb_hwprof.read(traces[0])
    assert sorted(profile.torch.steps["step"]) == [2, 3]
    assert "aten::addmm" in set(profile.torch.ops["name"])

    from torch_tb_profiler.plugin import TorchProfilerPlugin
    app = App(tmp_path, extra_plugins=[TorchProfilerPlugin])
    ours = app.json("/runs")
    assert "exp" in [r["run"] for r in ours["runs"]], ours
    deadline = time.monotonic() + 120
    while True:  # torch-tb-profiler loads runs on a thread of its own
        listed = json.loads(body(app.get("/data/plugin/pytorch_profiler/runs")))
        if "exp" in listed.get("runs", []) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert "exp" in listed["runs"], listed


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_run_folder_exported_beside_its_trace(samples_dir, tmp_path):
    src = samples_dir / "torch" / "tracelens_h100_bert_small.json.gz"
    run_dir = tmp_path / "exp1"
    run_dir.mkdir()
    trace = run_dir / "w0.1700000000000.pt.trace.json.gz"
    trace.write_bytes(src.read_bytes())
    before = _digest(trace)
    assert folder_exports(run_dir, tmp_path) == [(trace, "exp1", True)]
    export_folder(run_dir, tmp_path)
    assert (run_dir / "plugins" / "tb_hwprof" / "profile.json").is_file()
    with pytest.raises(RunExists):
        export_folder(run_dir, tmp_path)
    export_folder(run_dir, tmp_path, overwrite=True)
    assert _digest(trace) == before  # the user's trace is never touched
    assert len(list(run_dir.glob("events.out.tfevents.*.tb-hwprof"))) == 1  # the previous one replaced
    assert tb_hwprof.load_run(run_dir).provenance.source_format == "pytorch-trace"


def test_folder_of_several_traces_gets_a_run_per_trace(samples_dir, tmp_path):
    run_dir = tmp_path / "ddp"
    run_dir.mkdir()
    for rank in (0, 1):
        (run_dir / f"rank{rank}.1.pt.trace.json.gz").write_bytes(
            (samples_dir / "torch" / f"hta_sampled_2rank_rank{rank}.json.gz").read_bytes())
    plan = folder_exports(run_dir, tmp_path)
    assert [(name, beside) for _, name, beside in plan] == [("ddp/rank0.1", False), ("ddp/rank1.1", False)]
    export_folder(run_dir, tmp_path)
    for rank in (0, 1):
        run = tb_hwprof.load_run(run_dir / f"rank{rank}.1")
        assert run.provenance.source_path.endswith(f"rank{rank}.1.pt.trace.json.gz")
