"""Damaged Nsight Compute reports (issue 13): refused with one line naming the file and the launch,
or with --salvage exported without the damaged launches, which the run's notes list.

The reproducers (../shared/repro/ncu_rep_silent, fuzz/02_crash_TypeError) used to export with exit 0
(kernel name '', metrics lost or renamed) or crash with a SWIG TypeError.  Expected values come from
NVIDIA's ncu_report reading the ORIGINAL sample, never from our own reader."""
import math
import struct
from pathlib import Path

import pytest

import tb_hwprof
from tb_hwprof.app import cli
from tb_hwprof.readers.nvidia import ncu_rep as reader

from conftest import ncu_actions, repro, repro_path, sample

ORIGINAL = "ncu/darrenlu_rtx3050l_basic_2025.1.0.ncu-rep"  # the seed of the single-launch reproducers
MULTI = "ncu/kprattis_gtx1650_basic_2022.4.1.ncu-rep"  # 6 launches: one is damaged for --salvage
TYPE_ERROR = "fuzz/02_crash_TypeError/darrenlu_rtx3050l_basic_2025.1.0.ncu-rep"


def silent_reproducers(damage: str):
    """ncu_rep_silent's reproducers of one kind: "metric" (a name in the name table overwritten) or
    the others (the launch's record itself damaged: no kernel name, a record that does not parse)."""
    folder = repro_path() / "ncu_rep_silent"
    names = sorted(p.name for p in folder.glob("*.ncu-rep")) if folder.is_dir() else []
    return [f"ncu_rep_silent/{n}" for n in names if n.startswith("metric_") == (damage == "metric")]


def damaged_reports():
    """Reproducers whose only launch is damaged in its bytes: refused."""
    return silent_reproducers("record")


def damaged_metric_names():
    """Reproducers with one metric name overwritten by bytes that are not text: the metric is dropped
    and listed, the launch kept."""
    return silent_reproducers("metric") + [TYPE_ERROR]


def dropped_names(notes):
    """The metric names the run's note says were left out as damaged ("metric NAME (why)")."""
    return [n for n in notes if "damaged metric(s) left out" in n]


def ncu_launches(ncu_report, path: Path):
    """[(kernel name, {metric: value})] per launch, straight from NVIDIA's module."""
    out = []
    for action in ncu_actions(ncu_report, path):
        values = {}
        for name in action.metric_names():
            metric = action.metric_by_name(name)
            values[name] = None if metric is None else metric.value()
        out.append((action.name(), values))
    return out


def export(capfd, path: Path, logdir: Path, *flags):
    """(exit status, stderr lines) of `tb-hwprof export` in this process."""
    rc = cli.main(["export", str(path), "--logdir", str(logdir), "--run", "r", "--quiet", *flags])
    return rc, capfd.readouterr().err.splitlines()


@pytest.mark.parametrize("name", damaged_reports())
def test_damaged_report_is_refused_naming_file_and_launch(name, tmp_path, capfd, ncu_report_module):
    path = repro(name)
    rc, err = export(capfd, path, tmp_path)
    assert rc == 1
    assert len(err) == 1, err  # one line: no library noise (absl/protobuf) around it
    assert err[0].startswith(f"tb-hwprof: error: {path}: damaged Nsight Compute report")
    assert "launch" in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("name", damaged_reports())
def test_salvage_of_a_single_launch_report_keeps_nothing(name, tmp_path, capfd, ncu_report_module):
    """Each reproducer holds one launch, and it is the damaged one: nothing sound to export."""
    path = repro(name)
    rc, err = export(capfd, path, tmp_path, "--salvage")
    assert rc == 1 and len(err) == 1
    assert f"{path}: damaged Nsight Compute report, no sound launch in it:" in err[0]
    assert "launch 0 (" in err[0] or "1 of its 1 launches unreadable" in err[0]


@pytest.mark.parametrize("name", damaged_metric_names())
def test_a_name_that_is_not_text_costs_only_its_metric(name, samples_dir, tmp_path, capfd, ncu_report_module):
    """The reproducer's launch has every other metric as the original holds it (ncu_report reading
    the original sample), the damaged one is left out, and the run's notes (and the export's output)
    name it."""
    path = repro(name)
    rc, err = export(capfd, path, tmp_path)
    assert rc == 0, err
    run = tb_hwprof.load_run(tmp_path / "r")
    (note,) = dropped_names(run.notes)
    listed = list(next(ncu_actions(ncu_report_module, path)).metric_names())  # values: SWIG may refuse the name
    (damaged,) = [n for n in listed if not n.isprintable()]
    assert note.startswith("1 damaged metric(s) left out, their launches kept: launch 0: metric ")
    assert repr(damaged)[:80] in note and "is not readable text" in note
    (original_name, original), = ncu_launches(ncu_report_module, sample(samples_dir, ORIGINAL))
    lost = set(original) - set(listed)
    assert len(lost) == 1  # the name the damage overwrote
    assert run.kernels["name"].tolist() == [original_name]
    values = {name: value for name, (value, _unit) in run.raw_metrics[0].items()}
    assert values.keys() == original.keys() - lost
    for metric, value in values.items():
        assert value == original[metric] or (value is None and original[metric] != original[metric]), metric


@pytest.mark.parametrize("name", damaged_reports() + damaged_metric_names())
def test_the_reproducers_really_differ_from_their_original(name, samples_dir, ncu_report_module, capfd):
    """What the refusals guard against: ncu_report itself reads a launch different from the seed's."""
    original = ncu_launches(ncu_report_module, sample(samples_dir, ORIGINAL if "darrenlu" in name
                                                       else "ncu/lakshya_gtx1660s_basic_2024.1.1.ncu-rep"))
    try:
        damaged = ncu_launches(ncu_report_module, repro(name))
    except TypeError:  # fuzz/02: a metric name SWIG cannot pass back
        damaged = None
    assert damaged != original


def varint(buf, i):
    value = shift = 0
    while True:
        value |= (buf[i] & 0x7F) << shift
        shift += 7
        i += 1
        if buf[i - 1] < 0x80:
            return value, i


def fields(buf, start=0, end=None):
    """[(field number, wire type, start of its value, value or length)] of one protobuf message."""
    out, i, end = [], start, len(buf) if end is None else end
    while i < end:
        key, i = varint(buf, i)
        wire = key & 7
        value, j = varint(buf, i) if wire in (0, 2) else (None, i + (4 if wire == 5 else 8))
        out.append((key >> 3, wire, j if wire == 2 else i, value))
        i = j + value if wire == 2 else j
    return out


def launch_record(data, launch: int):
    """(start, end) of launch `launch`'s record (0-based).

    Container: 'NVR\\0', u32 header size, header, then blocks: u32 size, block header (protobuf:
    field 1 = session records, field 2 = launch records, field 5 = payload size), payload of u32-sized
    records, the session's first."""
    i = 8 + struct.unpack_from("<I", data, 4)[0]
    seen = 0
    while i < len(data):
        size = struct.unpack_from("<I", data, i)[0]
        header = {f: v for f, wire, _, v in fields(data, i + 4, i + 4 + size) if wire == 0}
        j = i + 4 + size
        for k in range(header.get(1, 0) + header.get(2, 0)):
            record = struct.unpack_from("<I", data, j)[0]
            if k >= header.get(1, 0):
                if seen == launch:
                    return j + 4, j + 4 + record
                seen += 1
            j += 4 + record
        i += 4 + size + header.get(5, 0)
    raise AssertionError(f"no launch {launch} in the report")


def break_launch_record(data: bytearray, launch: int) -> None:
    """Make the launch's record unparsable: its first tag becomes field 0, wire type 7."""
    data[launch_record(data, launch)[0]] = 0x07


def share_name_id(data: bytearray, launch: int) -> None:
    """Give one metric result (ProfileResult field 13) of the launch the NameId (its field 1) of the
    first, whose value differs: what a flipped bit in a name id does."""
    start, end = launch_record(data, launch)
    results = [(at, bytes(data[at + 2:at + size])) for f, wire, at, size in fields(data, start, end)
               if f == 13 and wire == 2 and data[at] == 0x08 and data[at + 1] < 0x80]  # NameId first, one byte
    first, value = results[0]
    other = next(at for at, rest in results[1:] if rest != value)
    data[other + 1] = data[first + 1]


@pytest.fixture
def one_launch_damaged(samples_dir, tmp_path):
    original = sample(samples_dir, MULTI)
    data = bytearray(original.read_bytes())
    break_launch_record(data, 2)
    damaged = tmp_path / "damaged.ncu-rep"
    damaged.write_bytes(bytes(data))
    return original, damaged


def test_damaged_launch_of_many_is_named(one_launch_damaged, tmp_path, capfd, ncu_report_module):
    _, damaged = one_launch_damaged
    rc, err = export(capfd, damaged, tmp_path / "logs")
    assert rc == 1 and len(err) == 1
    assert f"{damaged}: damaged Nsight Compute report: launch 2 (" in err[0]
    assert "pass --salvage to keep the sound launches" in err[0]


def test_salvage_keeps_the_sound_launches_as_the_original_has_them(one_launch_damaged, tmp_path, capfd,
                                                                   ncu_report_module):
    original, damaged = one_launch_damaged
    rc, err = export(capfd, damaged, tmp_path, "--salvage")
    assert rc == 0, err
    run = tb_hwprof.load_run(tmp_path / "r")
    salvage_notes = [n for n in run.notes if "--salvage" in n]
    assert len(salvage_notes) == 1 and "launch 2 (" in salvage_notes[0]
    assert not any(f"launch {i} (" in salvage_notes[0] for i in (0, 1, 3, 4, 5))

    from support_plugin import App  # the plugin's Overview shows the run's notes
    assert salvage_notes[0] in App(tmp_path).json("/overview", run="r")["notes"]

    expected = ncu_launches(ncu_report_module, original)
    sound = [0, 1, 3, 4, 5]
    assert list(run.kernels["launch_id"]) == sound
    assert list(run.kernels["name"]) == [expected[i][0] for i in sound]
    for raw, i in zip(run.raw_metrics, sound):
        values = {name: value for name, (value, _unit) in raw.items()}
        assert values.keys() == expected[i][1].keys()
        for name, value in expected[i][1].items():
            if isinstance(value, float) and math.isnan(value):
                assert values[name] is None
            else:
                assert values[name] == value, (i, name)


def test_the_python_api_salvages_as_the_cli_does(one_launch_damaged, tmp_path, ncu_report_module):
    """tb_hwprof.export(..., salvage=True) is the CLI's --salvage: the same sound launches, the same note."""
    original, damaged = one_launch_damaged
    with pytest.raises(tb_hwprof.core.errors.InputError, match="launch 2"):
        tb_hwprof.export(damaged, tmp_path / "refused", "r")
    run = tb_hwprof.load_run(tb_hwprof.export(damaged, tmp_path / "kept", "r", salvage=True))
    expected = ncu_launches(ncu_report_module, original)
    assert list(run.kernels["name"]) == [expected[i][0] for i in (0, 1, 3, 4, 5)]
    assert [n for n in run.notes if "--salvage" in n and "launch 2 (" in n]


def test_every_sample_declares_the_launches_ncu_report_reads(ncu_rep, ncu_report_module):
    """The container's own launch count (block headers) agrees with ncu_report on every real report,
    and none of them has a launch flagged as damaged."""
    container = reader.check_container(ncu_rep, ncu_rep.read_bytes())
    assert container.launches == len(ncu_launches(ncu_report_module, ncu_rep))
    assert container.damaged == {}
    assert tb_hwprof.read(ncu_rep).notes == []


def test_library_noise_is_not_data_and_other_output_is_passed_on(capsys):
    lines = [reader.ABSL_PREAMBLE,
             'E0000 00:00:1796151780.195094   15865 message_lite.cc:195] Can\'t parse message of type "X"',
             "something else"]
    assert reader.library_errors(lines) == ['Can\'t parse message of type "X"']
    assert capsys.readouterr().err == "something else\n"


def test_an_unforeseen_crash_names_the_file(samples_dir, tmp_path, capfd, monkeypatch):
    path = sample(samples_dir, MULTI)  # never read: the reader is replaced by one that crashes

    def crash(*args, **kwargs):
        raise TypeError("in method 'X', argument 2 of type 'char const *'")
    from tb_hwprof.readers import detect
    monkeypatch.setattr(detect, "detect", lambda p: ("boom", type("M", (), {"read": staticmethod(crash)})))
    rc, err = export(capfd, path, tmp_path)
    assert rc == 1 and len(err) == 1
    assert err[0] == (f"tb-hwprof: error: {path}: unexpected TypeError: in method 'X', argument 2 of type "
                      f"'char const *' (a bug or a damage we did not foresee; rerun with --debug and report "
                      f"it with the file)")


def test_a_crash_in_the_analysis_names_the_file(samples_dir, tmp_path, capfd, monkeypatch, ncu_report_module):
    path = sample(samples_dir, MULTI)
    from tb_hwprof.app import export as pipeline

    def crash(profile, **kwargs):
        raise ValueError("cannot reshape")
    monkeypatch.setattr(pipeline, "analyse", crash)
    rc, err = export(capfd, path, tmp_path)
    assert rc == 1 and len(err) == 1
    assert err[0].startswith(f"tb-hwprof: error: {path}: unexpected ValueError: cannot reshape")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("real, renamed, why", [
    (b".pct_of_peak_sustained_elapsed", b".pct_of_peak_susteined_elapsed", "has a word no Nsight Compute uses there (susteined)"),
    (b"launch__grid_size", b"launch__gRid_size", "is not shaped as a Nsight Compute metric name")])
def test_a_renamed_metric_is_dropped_and_listed(real, renamed, why, samples_dir, tmp_path, capfd, ncu_report_module):
    """A byte flipped in the metric name table renames a metric (its value would be lost under its
    real name): a suffix word made of parts no Nsight Compute enum has and no other name of the
    report uses, or a unit__counter that is not snake case, is damage.  It costs that metric: the
    launch exports with every other metric, and the notes name the damaged one."""
    original = sample(samples_dir, ORIGINAL)
    data = original.read_bytes()
    at = data.index(real)  # the first one is in the launches' name table
    damaged = tmp_path / "renamed.ncu-rep"
    damaged.write_bytes(data[:at] + renamed + data[at + len(real):])
    (bad,) = [n for n in ncu_launches(ncu_report_module, damaged)[0][1] if renamed.decode() in n]
    rc, err = export(capfd, damaged, tmp_path / "logs")
    assert rc == 0, err
    run = tb_hwprof.load_run(tmp_path / "logs" / "r")
    assert dropped_names(run.notes) == [f"1 damaged metric(s) left out, their launches kept: launch 0: metric {bad} "
                                        f"(its name {why})"]
    expected = ncu_launches(ncu_report_module, damaged)[0][1]
    assert set(run.raw_metrics[0]) == set(expected) - {bad}


def test_a_newer_nsight_compute_vocabulary_is_data(tmp_path):
    """Suffix words whose parts no enum of the installed ncu_report has are accepted where two or more
    names of the report use them (a newer tool's vocabulary spans counters; a flipped byte renames one
    name), and a name has as many suffix words as the tool writes (2025.3: three)."""
    grammar = reader.MetricGrammar(frozenset({"avg", "sum", "peak", "sustained", "elapsed", "per", "second"}))
    names = ["sm__a.avg.peak_sustained_elapsed.per_second", "sm__b.sum.peak_burst", "dram__c.avg.peak_burst.per_second",
             "lts__d.sum.per_glitch"]
    follows = lambda name: grammar.unknown_parts(name) == set()  # noqa: E731 (a sound name: nothing unknown)
    assert follows(names[0])
    assert not follows(names[1]) and not follows(names[3])
    grammar.attest(names)
    assert follows(names[1]) and follows(names[2])
    assert grammar.unknown_parts(names[3]) == {"glitch"}  # used once: damage
    assert grammar.unknown_parts("sm__x.Avg") is None and grammar.unknown_parts("sm__x.a-b") is None


def test_two_metric_results_under_one_name_id_are_refused(samples_dir, tmp_path, capfd, ncu_report_module):
    """A damaged name id makes ncu_report list one metric fewer and read one value under the wrong
    name, silently; the record's own results show it."""
    original = sample(samples_dir, MULTI)
    data = bytearray(original.read_bytes())
    share_name_id(data, 3)
    damaged = tmp_path / "shared.ncu-rep"
    damaged.write_bytes(bytes(data))
    before, after = ncu_launches(ncu_report_module, original), ncu_launches(ncu_report_module, damaged)
    assert len(after[3][1]) == len(before[3][1]) - 1 and after[3][0] == before[3][0]
    rc, err = export(capfd, damaged, tmp_path / "logs")
    assert rc == 1 and len(err) == 1
    assert f"{damaged}: damaged Nsight Compute report: launch 3 (two different metric results carry name id" in err[0]


@pytest.mark.parametrize("text, readable", [
    ("void gemm<float, 128>(float*, int)", True), ("tab\tand\nnewlines\r\n", True), ("ünïcödé ✓ 😀", True),
    ("bell\x07", False), ("nul\x00", False), ("esc\x1b[31m", False), ("lone \udc80 surrogate", False),
    ("\ud800", False), ("unit separator \x1f", False), ("DEL \x7f is printable enough", True)])
def test_readable_text_is_what_the_character_rule_says(text, readable):
    """The regex agrees, character by character, with the rule: no control character but tab and
    newlines, no lone surrogate."""
    by_rule = not any((c < " " and c not in "\t\n\r") or "\ud800" <= c <= "\udfff" for c in text)
    assert reader.readable_text(text) is by_rule is readable


def reference_metric_name_ids(record: bytes):
    """The plain walk the reader's fast one must equal: every field read by the varint rules, each
    metric result (field 13 opening with its NameId) copied and compared whole."""
    results, shared, i, end = {}, None, 0, len(record)
    while i < end:
        key, i = reader._varint(record, i)
        wire = key & 7
        if key >> 3 == 0:
            raise ValueError("field number 0")
        if wire == 2:
            length, i = reader._varint(record, i)
            if key == reader.METRIC_RESULT and length and i < end and record[i] == reader.NAME_ID:
                entry = record[i:i + length]
                name_id = reader._varint(entry, 1)[0]
                if results.setdefault(name_id, entry) != entry:
                    shared = name_id
            i += length
        elif wire == 0:
            i = reader._varint(record, i)[1]
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            raise ValueError(f"wire type {wire}")
        if i > end:
            raise ValueError("field past the end of its message")
    return len(results), shared


def test_the_fast_record_walk_equals_the_plain_one(samples_dir, monkeypatch):
    """On every launch record of every real report, and on seeded byte flips and cuts of them."""
    import random
    records = []
    add = reader.Container.add_launch
    monkeypatch.setattr(reader.Container, "add_launch", lambda self, record: (records.append(record), add(self, record)))
    for path in sorted(samples_dir.glob("ncu/**/*.ncu-rep")):
        reader.check_container(path, path.read_bytes())
    assert len(records) > 100

    def outcome(walk, record):
        try:
            return walk(record)
        except ValueError:
            return "damaged"
    rng = random.Random(13)
    for record in records:
        assert outcome(reader.metric_name_ids, record) == outcome(reference_metric_name_ids, record)
        for _ in range(5):
            mutant = bytearray(record)
            mutant[rng.randrange(len(mutant))] = rng.randrange(256)
            mutant = bytes(mutant[:rng.randrange(len(mutant))] if rng.random() < 0.3 else mutant)
            assert outcome(reader.metric_name_ids, mutant) == outcome(reference_metric_name_ids, mutant)
