"""The C walk of .ncu-rep launch records (readers/nvidia/_ncu_rep_scan.c) against the Python one
(ncu_rep.metric_name_ids_py, the reference): the same answer on every launch record of every real
report and of the damaged reproducers, and on records damaged here (bytes flipped, cut, inserted),
ValueError messages included.  The records come from the real files, cut out by the reader's own
container walk."""
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tb_hwprof.readers.nvidia import ncu_rep as reader

from conftest import repro_path, samples_path

scan = pytest.importorskip("tb_hwprof.readers.nvidia._ncu_rep_scan", reason="the C walk was not built (no compiler)")


def launch_records(path: Path) -> list:
    """The launch records of a report, as check_container cuts them out of its blocks."""
    records = []

    class Collect(reader.Container):
        def add_launch(self, record: bytes) -> None:
            records.append(record)
            super().add_launch(record)
    real = reader.Container
    reader.Container = Collect
    try:
        reader.check_container(path, path.read_bytes())
    except Exception:  # noqa: BLE001  (a damaged container: the records cut out before the damage)
        pass
    finally:
        reader.Container = real
    return records


def outcome(walk, record: bytes):
    """The walk's answer, or its ValueError's message."""
    try:
        return walk(record)
    except ValueError as e:
        return f"ValueError: {e}"


def reference(record: bytes):
    return outcome(reader.metric_name_ids_py, record)


def native(record: bytes):
    """The C walk's answer; where it hands the record back (None), the Python walk's, as the reader does."""
    found = outcome(scan.metric_name_ids, record)
    return reference(record) if found is None else found


def sample_reports() -> list:
    return sorted((samples_path() / "ncu").rglob("*.ncu-rep")) + sorted(repro_path().rglob("*.ncu-rep"))


def all_records() -> list:
    return [record for path in sample_reports() for record in launch_records(path)]


RECORDS = all_records() if samples_path().is_dir() else []


def test_every_real_record_walks_the_same(ncu_rep):
    records = launch_records(ncu_rep)
    assert records
    for i, record in enumerate(records):
        expected = reference(record)
        assert not isinstance(expected, str), (ncu_rep.name, i, expected)  # real records parse whole
        assert scan.metric_name_ids(record) == expected, (ncu_rep.name, i)


def test_damaged_reproducers_walk_the_same():
    reports = sorted(repro_path().rglob("*.ncu-rep"))
    if not reports:
        pytest.skip(f"no .ncu-rep reproducers under {repro_path()}")
    for path in reports:
        for i, record in enumerate(launch_records(path)):
            assert native(record) == reference(record), (path.name, i)


def test_reader_uses_the_c_walk():
    assert reader._ncu_rep_scan is scan


@st.composite
def damaged_records(draw):
    record = bytearray(draw(st.sampled_from(RECORDS)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, max(len(record) - 1, 0)))
        how = draw(st.sampled_from(["flip", "set", "cut", "insert", "drop"]))
        if how == "flip" and record:
            record[at] ^= 1 << draw(st.integers(0, 7))
        elif how == "set" and record:
            record[at] = draw(st.sampled_from([0x00, 0x08, 0x6a, 0x7f, 0x80, 0xff, 0x0b, 0x0e, 0x0f]))
        elif how == "cut":
            del record[at:]
        elif how == "insert":
            record[at:at] = draw(st.binary(min_size=1, max_size=12))
        elif how == "drop" and record:
            del record[at:at + draw(st.integers(1, 8))]
    return bytes(record)


@pytest.mark.skipif(not RECORDS, reason="no real .ncu-rep records to damage")
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(damaged_records())
def test_damaged_records_walk_the_same(record):
    assert native(record) == reference(record)


def result(name_id: int, body: bytes = b"\x11" + bytes(8)) -> bytes:
    """One metric result: tag, length, NameId (varint), then `body`."""
    inner = b"\x08" + varint(name_id) + body
    return b"\x6a" + varint(len(inner)) + inner


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


@pytest.mark.parametrize("record", [
    b"",
    result(5) + result(6) + result(5),  # a result repeated byte for byte: not damage
    result(5) + result(6) + result(5, b"\x11" + bytes(7) + b"\x01"),  # id 5 given to two results
    result(300) + result(20000) + result(300, b"\x22"),  # two-byte ids (fast path), a three-byte id (slow path)
    result(1 << 40) + result(1 << 40, b"\x01"),  # a wide id, shared
    b"\x08\x96\x01" + result(7),  # a varint field first
    b"\x6a\x01\x08",  # a result whose id is cut
    b"\x6a\x00" + result(3),  # an empty result
    b"\x0b\x00",  # wire type 3
    b"\x07",  # field number 0
    b"\x6a\x80",  # its length cut
    result(3) + b"\x6a\x05\x08\x01",  # its body cut
    b"\x08" + b"\xff" * 9 + b"\x01",  # a 10-byte varint: handed to the Python walk
    b"\x0d\x01\x02\x03\x04\x09" + bytes(8),  # fixed32, fixed64
    b"\x09\x01",  # fixed64 cut
])
def test_edge_records_walk_the_same(record):
    assert native(record) == reference(record)


def test_a_wide_varint_is_handed_back():
    assert scan.metric_name_ids(b"\x08" + b"\xff" * 9 + b"\x01") is None
    assert reader.metric_name_ids(b"\x08" + b"\xff" * 9 + b"\x01") == reader.metric_name_ids_py(b"\x08" + b"\xff" * 9 + b"\x01")


def test_container_check_is_the_same_without_the_c_walk(ncu_rep, monkeypatch):
    """check_container (what the reader judges damage by) with the C walk and with the Python one."""
    data = ncu_rep.read_bytes()
    with_c = reader.check_container(ncu_rep, data)
    monkeypatch.setattr(reader, "_ncu_rep_scan", None)
    without = reader.check_container(ncu_rep, data)
    assert (with_c.launches, with_c.damaged, with_c.name_ids) == (without.launches, without.damaged, without.name_ids)
