"""Event-file framing written by tb_hwprof.logdir.records is TensorBoard's own, byte for byte."""
import io
import random

import pytest
from tensorboard.summary.writer.record_writer import RecordWriter

from tb_hwprof.logdir import records


def test_crc32c_check_value():
    assert records.crc32c(b"123456789") == 0xE3069283  # the standard CRC-32C check value


@pytest.mark.parametrize("data", [b"", b"x", b"brain.Event:2" * 100, random.Random(7).randbytes(70_000)])
def test_records_equal_tensorboards_record_writer(data):
    theirs, ours = io.BytesIO(), io.BytesIO()
    RecordWriter(theirs).write(data)
    records.write_record(ours, data)
    assert ours.getvalue() == theirs.getvalue()
