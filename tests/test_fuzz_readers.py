"""Mutation fuzzing of every reader and of the logdir reader (issue 13).  Mutants are seeded, so a
failing id (e.g. test_mutant[rocprof_v3_csv-4]) reproduces; the count is TB_HWPROF_FUZZ_MUTANTS per
format (and TB_HWPROF_FUZZ_EXAMPLES hypothesis examples), modest by default so `pytest tests` stays
bounded; CI's fuzz step runs more.  Any outcome but an export (whose run reads back) or a one-line
HwprofError naming the input fails: crashes, hangs, multi-line or anonymous errors."""
import random
import shutil

import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

import fuzzing
from fuzzing import SEEDS, SEEDS_BY_NAME

pytestmark = pytest.mark.fuzz


@pytest.fixture(scope="module")
def warm(samples_dir):
    fuzzing.warm_up(samples_dir)
    return samples_dir


def _seed_sample(seed, samples_dir, request):
    """The seed's sample; skips when it is absent, or for .ncu-rep when NVIDIA's reader is."""
    path = samples_dir / seed.sample
    if not path.exists():
        pytest.skip(f"{seed.sample} not in the samples")
    if seed.sample.endswith(".ncu-rep"):
        request.getfixturevalue("ncu_report_module")
    return path


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: s.name)
def test_seed_exports(seed, warm, request, tmp_path):
    """The unmutated seeds export: what their mutants do is measured against a working read."""
    path = _seed_sample(seed, warm, request)
    if seed.needs_tool and not shutil.which(seed.needs_tool):
        pytest.skip(f"{seed.sample} needs {seed.needs_tool} on PATH to export")
    outcome = fuzzing.export_outcome(path, tmp_path)
    assert outcome.kind == "exported", f"{seed.sample}: {outcome}"


MUTANTS = [pytest.param(s.name, i, id=f"{s.name}-{i}") for s in SEEDS for i in range(fuzzing.MUTANTS)]


@pytest.mark.parametrize("seed_name, index", MUTANTS)
def test_mutant(seed_name, index, warm, request, tmp_path):
    seed = SEEDS_BY_NAME[seed_name]
    _seed_sample(seed, warm, request)
    path, mutation = fuzzing.write_mutant(warm, seed, fuzzing.numbered_mutant(seed, index), tmp_path / "in")
    outcome = fuzzing.export_outcome(path, tmp_path / "logdir", fuzzing.MUTANT_TIME_LIMIT_S)
    assert not fuzzing.problems_with(outcome, path), f"{seed.sample} mutant {index} ({mutation}): {outcome}"


def _steps(seed):
    """1-3 mutations in turn, each (which mutation, its random seed)."""
    step = st.tuples(st.integers(0, len(seed.mutations) - 1), st.integers(0, 2 ** 32 - 1))
    return st.lists(step, min_size=1, max_size=3)


# Derandomized and unshrunk: the same examples every run, and a failure costs one export, not a search.
FUZZ_SETTINGS = settings(max_examples=fuzzing.EXAMPLES, deadline=None, derandomize=True, database=None,
                         phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: s.name)
def test_stacked_mutations(seed, warm, request, tmp_path_factory):
    _seed_sample(seed, warm, request)

    @FUZZ_SETTINGS
    @given(steps=_steps(seed))
    def export_mutant(steps):
        folder = tmp_path_factory.mktemp(seed.name)
        path, mutation = fuzzing.write_mutant(warm, seed, steps, folder / "in")
        outcome = fuzzing.export_outcome(path, folder / "logdir", fuzzing.MUTANT_TIME_LIMIT_S)
        shutil.rmtree(folder, ignore_errors=True)
        assert not fuzzing.problems_with(outcome, path), f"{seed.sample} ({mutation}): {outcome}"
    export_mutant()


# -- damaged runs: the logdir reader --------------------------------------------------------------------
# Runs of every kind of table a run holds: launch details (ncu), summaries and a timeline (nsys),
# CPU hotspots (VTune), operator tables and a timeline (PyTorch), a kernel trace (rocprof).
RUN_SOURCES = {"ncu": "ncu/esmm_a10g_cli_metrics_ncu-csv.csv", "nsys": "nsys/kmeans_rtx3080_openacc_2020.5.1.sqlite",
               "vtune": "vtune/amplxe2015_hotspots_openmp.csv", "torch": "torch/kineto_h100_cuda129_small.json",
               "rocprof": "rocprof/v3_docs_kernel_trace_newer.csv"}
RUN_NAME = "damaged_run"  # errors must name it (every file of the run is under this folder)


@pytest.fixture(scope="module")
def written_runs(warm, tmp_path_factory):
    """Each source exported once, in a child like every other export here: {kind: run folder}."""
    runs = {}
    for kind, sample in RUN_SOURCES.items():
        if not (warm / sample).is_file():
            continue
        outcome = fuzzing.export_outcome(warm / sample, tmp_path_factory.mktemp(kind))
        assert outcome.kind == "exported", f"{sample}: {outcome}"
        runs[kind] = outcome.detail
    return runs


DAMAGED_RUNS = [pytest.param(kind, i, id=f"{kind}-{i}") for kind in RUN_SOURCES for i in range(fuzzing.MUTANTS)]


@pytest.mark.parametrize("kind, index", DAMAGED_RUNS)
def test_damaged_run_loads_or_fails_in_one_line(kind, index, written_runs, tmp_path):
    if kind not in written_runs:
        pytest.skip(f"{RUN_SOURCES[kind]} not in the samples")
    run_dir = tmp_path / RUN_NAME
    shutil.copytree(written_runs[kind], run_dir)
    damage = fuzzing.damage_run(run_dir, random.Random(f"run:{kind}:{index}"), index)
    outcome = fuzzing.load_outcome(run_dir, fuzzing.MUTANT_TIME_LIMIT_S)
    assert not fuzzing.problems_with(outcome, run_dir, "loaded"), f"{kind} run, {damage}: {outcome}"


# -- valid variants read the same: a CSV saved on Windows, with a BOM, without its last newline -----------
EQUIVALENTS = {"crlf": lambda data: data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"),
               "bom": lambda data: b"\xef\xbb\xbf" + data,
               "no_final_newline": lambda data: data.rstrip(b"\r\n")}
CSV_SEEDS = [s for s in SEEDS if s.sample.endswith(".csv")]


def _loaded(path, logdir):
    import tb_hwprof
    outcome = fuzzing.export_outcome(path, logdir)
    assert outcome.kind == "exported", f"{path.name} is valid input: {outcome}"
    return tb_hwprof.load_run(outcome.detail)


@pytest.mark.parametrize("variant", sorted(EQUIVALENTS))
@pytest.mark.parametrize("seed", CSV_SEEDS, ids=lambda s: s.name)
def test_equivalent_csv_reads_the_same(seed, variant, warm, request, tmp_path):
    import pandas.testing as pdt
    source = _seed_sample(seed, warm, request)
    variant_path = tmp_path / "in" / source.name
    variant_path.parent.mkdir()
    variant_path.write_bytes(EQUIVALENTS[variant](source.read_bytes()))
    original, read = _loaded(source, tmp_path / "a"), _loaded(variant_path, tmp_path / "b")
    pdt.assert_frame_equal(read.kernels, original.kernels)
    assert sorted(read.summaries) == sorted(original.summaries)
    for name, table in original.summaries.items():
        pdt.assert_frame_equal(read.summaries[name], table, obj=name)


# -- a damaged launch shape is refused or read as written, never turned into another shape --------------
SHAPE_EDITS = [("gridX", -1), ("gridX", -(2 ** 63)), ("gridY", 65536), ("gridZ", 0), ("blockY", 0), ("blockX", -5)]


@pytest.mark.parametrize("column, value", SHAPE_EDITS, ids=[f"{c}={v}" for c, v in SHAPE_EDITS])
def test_nsys_launch_shape_is_refused_or_read_as_written(column, value, warm, tmp_path):
    """CUDA's dims are 1..2^31-1 (gridX) and 1..65535 (the others); one outside that in the kernel
    table must not come out as a different, plausible shape (or silently as no shape)."""
    import sqlite3
    import tb_hwprof
    path = tmp_path / "in" / "kernels.sqlite"
    path.parent.mkdir()
    shutil.copyfile(warm / "nsys/kmeans_rtx3080_openacc_2020.5.1.sqlite", path)
    with sqlite3.connect(path) as db:
        rowid, *written = db.execute("SELECT rowid, gridX, gridY, gridZ, blockX, blockY, blockZ FROM "
                                     "CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start LIMIT 1").fetchone()
        db.execute(f'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "{column}" = ? WHERE rowid = ?', (value, rowid))
    written[["gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ"].index(column)] = value
    outcome = fuzzing.export_outcome(path, tmp_path / "logdir")
    assert not fuzzing.problems_with(outcome, path), f"{column} = {value}: {outcome}"
    if outcome.kind == "exported":
        first = tb_hwprof.load_run(outcome.detail).kernels.sort_values("start_ns").iloc[0]
        expected = (f"({written[0]}, {written[1]}, {written[2]})", f"({written[3]}, {written[4]}, {written[5]})")
        assert (first["grid"], first["block"]) == expected, f"{column} = {value} read as another shape"
