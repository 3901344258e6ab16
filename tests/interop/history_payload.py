"""The self-checking payload of `baton_broker::history` (`payload`/`parse_payload`),
for the Python tools that produce or check records of the Rust tests.

A payload of record `id` with `filler` bytes is: the id (8 bytes, big-endian), a
CRC-32C of the id and the filler (4 bytes, big-endian), then the filler, whose
byte `i` is `(id + 31 * i) % 256`.
"""

import struct


def _table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _table()


def crc32c(data):
    """CRC-32C (Castagnoli) of `data`."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def payload(record_id, filler):
    """The payload of `record_id` with `filler` filler bytes."""
    head = struct.pack(">Q", record_id)
    fill = bytes((record_id + i * 31) & 0xFF for i in range(filler))
    return head + struct.pack(">I", crc32c(head + fill)) + fill


def parse(value):
    """The id of an intact payload, or -1 (too short, or its checksum fails)."""
    if value is None or len(value) < 12:
        return -1
    record_id, stored = struct.unpack(">QI", value[:12])
    if crc32c(value[:8] + value[12:]) != stored:
        return -1
    return record_id
