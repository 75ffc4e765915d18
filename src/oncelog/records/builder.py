"""Build complete v2 batches and decode them back into records."""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

from .batch import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    OFFSET_CRC,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    CorruptRecordError,
    compute_crc,
    parse_header,
    validate_batch,
)
from .compression import CompressionType, compress, decompress
from .record import Buf, DecodedRecord, Header, Record, decode_fields

# Same layout as batch.py's header; crc is patched in after the bytes exist.
_HEADER = struct.Struct(">qiibIhiqqqhii")
_U32 = struct.Struct(">I")

# (key, value, headers, timestamp) with an absolute timestamp.
RecordTuple = tuple[bytes | None, bytes | None, Sequence[Header] | None, int]


def build_batch(
    records: Sequence[Record | RecordTuple],
    *,
    base_offset: int = 0,
    base_timestamp: int | None = None,
    compression: int = CompressionType.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    log_append_time: bool = False,
    partition_leader_epoch: int = -1,
) -> bytes:
    """Encode ``records`` as one CRC-correct v2 batch.

    Tuples get offset delta = their index and a timestamp delta from the base
    timestamp, which (as in Kafka's builder) defaults to the first tuple's
    timestamp. ``Record`` objects keep their own deltas and need
    ``base_timestamp`` (0 if omitted). maxTimestamp is the largest record
    timestamp; with ``log_append_time`` the records should carry the append
    time (or stamp it later with ``batch.set_log_append_time``).
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    if base_timestamp is None:
        first = records[0]
        base_timestamp = 0 if isinstance(first, Record) else first[3]
    payload = bytearray()
    max_delta = None
    last_offset_delta = -1
    for i, item in enumerate(records):
        if isinstance(item, Record):
            rec = item
        else:
            key, value, headers, timestamp = item
            rec = Record(i, timestamp - base_timestamp, key, value, tuple(headers or ()))
        if rec.offset_delta <= last_offset_delta:
            raise ValueError("record offset deltas must increase")
        last_offset_delta = rec.offset_delta
        if max_delta is None or rec.timestamp_delta > max_delta:
            max_delta = rec.timestamp_delta
        rec.write(payload)
    assert max_delta is not None

    body = compress(compression, payload) if compression else payload
    attributes = compression & COMPRESSION_MASK
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK

    size = HEADER_SIZE + len(body)
    out = bytearray(HEADER_SIZE)
    _HEADER.pack_into(
        out, 0,
        base_offset, size - LOG_OVERHEAD, partition_leader_epoch, MAGIC_V2, 0, attributes,
        last_offset_delta, base_timestamp, base_timestamp + max_delta,
        producer_id, producer_epoch, base_sequence, len(records),
    )  # fmt: skip
    out += body
    _U32.pack_into(out, OFFSET_CRC, compute_crc(out, 0, size))
    return bytes(out)


def decode_batch(
    buf: Buf, pos: int = 0, *, verify: bool = True
) -> tuple[BatchHeader, list[DecodedRecord]]:
    """Decode every record of the batch at ``pos`` with absolute offsets/timestamps.

    ``verify`` checks magic, length and CRC first (skip it only for bytes
    already validated, e.g. read back from our own log).
    """
    header = validate_batch(buf, pos) if verify else _checked_header(buf, pos)
    start = pos + HEADER_SIZE
    data = decompress(header.compression, memoryview(buf)[start : pos + header.size])
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    fixed_ts = header.max_timestamp if header.is_log_append_time else None
    out: list[DecodedRecord] = []
    p = 0
    for _ in range(header.records_count):
        if p >= len(data):
            raise CorruptRecordError(
                f"batch declares {header.records_count} records, has {len(out)}"
            )
        off_delta, ts_delta, key, value, headers, p = decode_fields(data, p)
        ts = base_ts + ts_delta if fixed_ts is None else fixed_ts
        out.append(DecodedRecord(base_offset + off_delta, ts, key, value, headers))
    if p != len(data):
        raise CorruptRecordError("bytes left over after the declared records")
    return header, out


def iter_batches_kv(
    buf: Buf, pos: int = 0
) -> Iterator[tuple[BatchHeader, list[tuple[int, bytes | None, bytes | None]]]]:
    """``iter_batches(verify=False)`` for replaying a log already validated: each record
    as ``(offset, key, value)`` (no timestamps or record objects: a coordinator load
    decodes millions of them)."""
    end = len(buf)
    while pos < end:
        if end - pos < HEADER_SIZE or pos + parse_header(buf, pos).size > end:
            return
        header = _checked_header(buf, pos)
        data = decompress(
            header.compression, memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
        )
        base_offset = header.base_offset
        out: list[tuple[int, bytes | None, bytes | None]] = []
        p = 0
        for _ in range(header.records_count):
            if p >= len(data):
                raise CorruptRecordError(
                    f"batch declares {header.records_count} records, has {len(out)}"
                )
            off_delta, _, key, value, _, p = decode_fields(data, p)
            out.append((base_offset + off_delta, key, value))
        if p != len(data):
            raise CorruptRecordError("bytes left over after the declared records")
        yield header, out
        pos += header.size


def iter_batches(
    buf: Buf, pos: int = 0, *, verify: bool = True, allow_partial: bool = True
) -> Iterator[tuple[BatchHeader, list[DecodedRecord]]]:
    """Decode consecutive batches from ``pos`` to the end of ``buf``.

    With ``allow_partial`` a truncated last batch is skipped silently, as a
    fetch response may end mid-batch; otherwise it raises CorruptRecordError.
    """
    end = len(buf)
    while pos < end:
        if end - pos < HEADER_SIZE or pos + parse_header(buf, pos).size > end:
            if allow_partial:
                return
            raise CorruptRecordError("truncated record batch")
        header, records = decode_batch(buf, pos, verify=verify)
        yield header, records
        pos += header.size


def iter_records(
    buf: Buf, pos: int = 0, *, verify: bool = True, allow_partial: bool = True
) -> Iterator[DecodedRecord]:
    """Every record of consecutive batches (control batches included)."""
    for _, records in iter_batches(buf, pos, verify=verify, allow_partial=allow_partial):
        yield from records


def _checked_header(buf: Buf, pos: int) -> BatchHeader:
    """validate_batch without the CRC."""
    header = parse_header(buf, pos)
    if header.magic != MAGIC_V2:
        raise CorruptRecordError(f"unsupported record batch magic {header.magic}")
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size > len(buf):
        raise CorruptRecordError("record batch length does not fit the data")
    return header
