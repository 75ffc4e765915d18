"""Decoders for oncelog's own ``__consumer_offsets`` layout, written before the Kafka
layout (offsets_codec): data dirs from older oncelog versions still hold such records.

Big-endian; a string is ``i32 length | utf-8`` (length -1 = null), bytes are
``i32 length | raw``. Every key and value starts with an ``i16``:

Keys (the i16 is the record type):
  offset commit (1): ``group | topic | i32 partition``
  group metadata (2): ``group``
Values (the i16 is the value version, always 1):
  offset commit: ``i64 offset | i32 leader_epoch | metadata | i64 commit_ts | i64 expire_ts``
  group metadata: ``protocol_type? | i32 generation | protocol_name? | leader? |
      i64 state_ts (-1 none) | i32 member count | per member: member_id | instance_id? |
      client_id | client_host | i32 rebalance_timeout | i32 session_timeout |
      bytes subscription | bytes assignment``

How a legacy key is told from a Kafka one: keys are tried as Kafka's first. A legacy key
never parses as Kafka's: its first string length is an ``i32`` whose high half is 0 (names
are far shorter than 64 KiB), which Kafka's ``i16`` length reads as an empty string, after
which Kafka's strict parse always ends with trailing bytes (the 4-byte partition and the
topic for an offset key, the group name for a group key). The value of a record is then
read in the layout of its key: both were written together.
"""

from __future__ import annotations

from oncelog.coordinator.schema_io import SchemaReader
from oncelog.group.offsets_records import (
    GroupKey,
    GroupValue,
    Key,
    MemberValue,
    OffsetKey,
    OffsetsCodecError,
    OffsetValue,
)

LEGACY_OFFSET_COMMIT_KEY = 1
LEGACY_GROUP_METADATA_KEY = 2
LEGACY_VALUE_VERSION = 1


def _opt_string(r: SchemaReader) -> str | None:
    n = r.i32()  # the legacy layout's strings had i32 lengths
    return None if n == -1 else r.text(n)


def _string(r: SchemaReader) -> str:
    s = _opt_string(r)
    if s is None:
        raise OffsetsCodecError("null where a string is required")
    return s


def _raw(r: SchemaReader) -> bytes:
    return bytes(r.take(r.i32()))


def decode_legacy_key(data: bytes) -> Key:
    r = SchemaReader(data, OffsetsCodecError)
    kind = r.i16()
    key: Key
    if kind == LEGACY_OFFSET_COMMIT_KEY:
        key = OffsetKey(_string(r), _string(r), r.i32(), legacy=True)
    elif kind == LEGACY_GROUP_METADATA_KEY:
        key = GroupKey(_string(r), legacy=True)
    else:
        raise OffsetsCodecError(f"unknown legacy __consumer_offsets key type {kind}")
    r.done()
    return key


def _check_version(r: SchemaReader) -> None:
    version = r.i16()
    if version != LEGACY_VALUE_VERSION:
        raise OffsetsCodecError(f"unsupported legacy __consumer_offsets value version {version}")


def decode_legacy_offset_value(data: bytes) -> OffsetValue:
    r = SchemaReader(data, OffsetsCodecError)
    _check_version(r)
    offset, epoch = r.i64(), r.i32()
    metadata = _string(r)
    commit_ts, expire_ts = r.i64(), r.i64()
    r.done()
    return OffsetValue(offset, epoch, metadata, commit_ts, None if expire_ts == -1 else expire_ts)


def decode_legacy_group_value(data: bytes) -> GroupValue:
    r = SchemaReader(data, OffsetsCodecError)
    _check_version(r)
    protocol_type = _opt_string(r)
    generation = r.i32()
    protocol_name = _opt_string(r)
    leader = _opt_string(r)
    state_ts = r.i64()
    count = r.i32()
    if count < 0:
        raise OffsetsCodecError(f"negative member count {count}")
    members = []
    for _ in range(count):
        member_id = _string(r)
        instance_id = _opt_string(r)
        client_id = _string(r)
        client_host = _string(r)
        rebalance_ms, session_ms = r.i32(), r.i32()
        subscription = _raw(r)
        assignment = _raw(r)
        members.append(
            MemberValue(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_ms,
                session_ms,
                subscription,
                assignment,
            )
        )
    r.done()
    return GroupValue(
        protocol_type,
        generation,
        protocol_name,
        leader,
        None if state_ts == -1 else state_ts,
        tuple(members),
    )
