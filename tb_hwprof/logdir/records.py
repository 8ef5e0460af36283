"""TFRecord framing of event files, written here instead of through tensorboard.summary.writer.

Importing `tensorboard.summary.writer.record_writer` imports all of `tensorboard.summary` (the v1/v2
summary APIs and the TensorFlow stub): ~0.25 s of every export for a few lines of framing.  Each
record is: uint64 length, uint32 masked CRC-32C of the length, the data, uint32 masked CRC-32C of
the data (all little-endian), as TensorFlow's record writer frames them.
"""
from __future__ import annotations

import struct
from typing import BinaryIO, List

_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected


def _table() -> List[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _POLY if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def write_record(f: BinaryIO, data: bytes) -> None:
    header = struct.pack("<Q", len(data))
    f.write(header + struct.pack("<I", masked_crc32c(header)) + data + struct.pack("<I", masked_crc32c(data)))
