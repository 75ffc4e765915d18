"""Record batch v2 header: parse, validate and patch without touching records.

Layout (big-endian), offsets into the batch:
  0 baseOffset i64 | 8 batchLength i32 | 12 partitionLeaderEpoch i32 | 16 magic i8
  17 crc u32 | 21 attributes i16 | 23 lastOffsetDelta i32 | 27 baseTimestamp i64
  35 maxTimestamp i64 | 43 producerId i64 | 51 producerEpoch i16 | 53 baseSequence i32
  57 recordsCount i32 | 61 records...
The CRC-32C covers bytes [21, end), so the broker may rewrite baseOffset and
partitionLeaderEpoch without recomputing it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted in batchLength
MAGIC_V2 = 2
CRC_START = 21

OFFSET_BASE = 0
OFFSET_LENGTH = 8
OFFSET_LEADER_EPOCH = 12
OFFSET_MAGIC = 16
OFFSET_CRC = 17
OFFSET_ATTRIBUTES = 21
OFFSET_MAX_TIMESTAMP = 35

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

_HEADER = struct.Struct(">qiibIhiqqqhii")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")


class CorruptRecordError(Exception):
    """The bytes are not a well-formed v2 batch (maps to CORRUPT_MESSAGE)."""


class InvalidRecordError(Exception):
    """A well-formed batch that breaks a rule (maps to INVALID_RECORD)."""


@dataclass(slots=True, frozen=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the batch occupies on disk and on the wire."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % 0x80000000


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the fixed header at ``pos``. Raises CorruptRecordError if too short."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError("record batch shorter than its header")
    return BatchHeader(*_HEADER.unpack_from(buf, pos))


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    return crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + size])


def validate_batch(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Check one batch starting at ``pos``: length, magic and CRC-32C.

    The batch must fill the rest of ``buf`` exactly or be followed by others.
    """
    header = parse_header(buf, pos)
    if header.magic != MAGIC_V2:
        raise CorruptRecordError(f"unsupported record batch magic {header.magic}")
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"record batch length {header.batch_length} too small")
    if pos + header.size > len(buf):
        raise CorruptRecordError("record batch length exceeds the data")
    if compute_crc(buf, pos, header.size) != header.crc:
        raise CorruptRecordError("record batch CRC-32C mismatch")
    if header.records_count < 0 or header.last_offset_delta < 0:
        raise CorruptRecordError("negative record count or offset delta")
    return header


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    _I64.pack_into(buf, pos + OFFSET_BASE, base_offset)


def set_log_append_time(buf: bytearray | memoryview, pos: int, size: int, timestamp: int) -> None:
    """Stamp LogAppendTime: sets the attribute bit and maxTimestamp, then re-CRCs."""
    (attrs,) = _I16.unpack_from(buf, pos + OFFSET_ATTRIBUTES)
    _I16.pack_into(buf, pos + OFFSET_ATTRIBUTES, attrs | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buf, pos + OFFSET_MAX_TIMESTAMP, timestamp)
    _U32.pack_into(buf, pos + OFFSET_CRC, compute_crc(buf, pos, size))
