"""Records of the compacted ``__consumer_offsets`` topic, in Kafka's layout.

The schemas are Kafka's ``group-coordinator/src/main/resources/common/message/``
``OffsetCommitKey.json``, ``OffsetCommitValue.json``, ``GroupMetadataKey.json`` and
``GroupMetadataValue.json`` (see coordinator/schema_io.py for the encoding), so Kafka's
``GroupMetadataMessageFormatter`` reads what we write.

Keys: the leading ``i16`` (the key version) is the record type, as in Kafka:
  0, 1 offset commit: ``string group | string topic | i32 partition`` (we write 1)
  2 group metadata: ``string group``
  anything else (KIP-848's 3+, ...): ``UnknownRecordType``, skipped and counted at load.
Values (leading ``i16`` version; we write what Kafka 3.x/4.x writes):
  offset commit v3 (no expiry): ``i64 offset | i32 leaderEpoch | string metadata |
      i64 commitTimestamp``; v1 (an expiry, from OffsetCommit v2-v4 retention_time):
      ``i64 offset | string metadata | i64 commitTimestamp | i64 expireTimestamp``; v0, v2
      and the flexible v4 are read too. An expiry with a leader epoch (never sent by
      clients: no OffsetCommit version has both) is written as v4 with the expiry in
      oncelog's tagged field, so nothing is lost.
  group metadata v3: ``string protocolType ("" = none) | i32 generation | string? protocol |
      string? leader | i64 currentStateTimestamp (-1 none) | i32 count | per member:
      string memberId | string? groupInstanceId | string clientId | string clientHost |
      i32 rebalanceTimeout | i32 sessionTimeout | bytes subscription | bytes assignment``;
      v0-v2 and the flexible v4 are read too.
A ``None`` value is a tombstone.

Records written by oncelog before this layout are recognised by their key and decoded by
offsets_codec_legacy (its docstring explains why the two never mix up).
"""

from __future__ import annotations

import struct

from oncelog.coordinator.schema_io import (
    ONCELOG_TAG_BASE,
    SchemaReader,
    SchemaWriter,
    pack_i64,
)
from oncelog.group.offsets_codec_legacy import (
    decode_legacy_group_value,
    decode_legacy_key,
    decode_legacy_offset_value,
)
from oncelog.group.offsets_records import (
    GroupKey,
    GroupValue,
    Key,
    MemberValue,
    OffsetKey,
    OffsetsCodecError,
    OffsetValue,
    UnknownRecordType,
)

__all__ = [
    "GROUP_METADATA_KEY",
    "OFFSET_COMMIT_KEY",
    "GroupKey",
    "GroupValue",
    "Key",
    "MemberValue",
    "OffsetKey",
    "OffsetValue",
    "OffsetsCodecError",
    "UnknownRecordType",
    "decode_group_value",
    "decode_key",
    "decode_offset_value",
    "decode_record",
    "decode_record_schema",
    "encode_group_key",
    "encode_group_value",
    "encode_offset_key",
    "encode_offset_value",
]

OFFSET_COMMIT_KEY = 1  # the key version Kafka writes for offset commits (0 is read too)
GROUP_METADATA_KEY = 2
GROUP_METADATA_VALUE_VERSION = 3
# oncelog's tagged field of OffsetCommitValue v4: an expiry next to a leader epoch.
EXPIRE_TIMESTAMP_TAG = ONCELOG_TAG_BASE


def encode_offset_key(group_id: str, topic: str, partition: int) -> bytes:
    w = SchemaWriter(OFFSET_COMMIT_KEY)
    w.string(group_id)
    w.string(topic)
    w.i32(partition)
    return w.done()


def encode_group_key(group_id: str) -> bytes:
    w = SchemaWriter(GROUP_METADATA_KEY)
    w.string(group_id)
    return w.done()


def _decode_kafka_key(data: bytes) -> Key:
    r = SchemaReader(data, OffsetsCodecError)
    version = r.i16()
    key: Key
    if version in (0, 1):
        key = OffsetKey(r.string(), r.string(), r.i32())
    elif version == GROUP_METADATA_KEY:
        key = GroupKey(r.string())
    else:
        raise UnknownRecordType(f"unknown __consumer_offsets key version {version}")
    r.done()
    return key


def decode_key(data: bytes) -> Key:
    """A key in Kafka's layout or, failing that, oncelog's legacy one (``key.legacy``)."""
    try:
        return _decode_kafka_key(data)
    except UnknownRecordType:
        raise
    except OffsetsCodecError as kafka_error:
        try:
            return decode_legacy_key(data)
        except OffsetsCodecError:
            raise kafka_error from None


def encode_offset_value(v: OffsetValue) -> bytes:
    if v.expire_timestamp_ms is None:
        w = SchemaWriter(3)
        w.i64(v.offset)
        w.i32(v.leader_epoch)
        w.string(v.metadata)
        w.i64(v.commit_timestamp_ms)
    elif v.leader_epoch == -1:
        w = SchemaWriter(1)
        w.i64(v.offset)
        w.string(v.metadata)
        w.i64(v.commit_timestamp_ms)
        w.i64(v.expire_timestamp_ms)
    else:
        w = SchemaWriter(4)
        w.i64(v.offset)
        w.i32(v.leader_epoch)
        w.compact_string(v.metadata)
        w.i64(v.commit_timestamp_ms)
        w.tagged({EXPIRE_TIMESTAMP_TAG: pack_i64(v.expire_timestamp_ms)})
    return w.done()


def decode_offset_value(data: bytes) -> OffsetValue:
    r = SchemaReader(data, OffsetsCodecError)
    version = r.i16()
    if not 0 <= version <= 4:
        raise OffsetsCodecError(f"unsupported OffsetCommitValue version {version}")
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.compact_string() if version >= 4 else r.string()
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else -1
    if version >= 4:
        expire_ts = r.tagged_i64(r.tagged(), EXPIRE_TIMESTAMP_TAG, -1)
    r.done()
    return OffsetValue(offset, epoch, metadata, commit_ts, None if expire_ts == -1 else expire_ts)


def encode_group_value(v: GroupValue) -> bytes:
    w = SchemaWriter(GROUP_METADATA_VALUE_VERSION)
    w.string(v.protocol_type or "")  # non-nullable in Kafka's schema: "" means none
    w.i32(v.generation_id)
    w.string(v.protocol_name)
    w.string(v.leader_id)
    w.i64(-1 if v.state_timestamp_ms is None else v.state_timestamp_ms)
    w.i32(len(v.members))
    for m in v.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.i32(m.rebalance_timeout_ms)
        w.i32(m.session_timeout_ms)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return w.done()


def decode_group_value(data: bytes) -> GroupValue:
    r = SchemaReader(data, OffsetsCodecError)
    version = r.i16()
    if not 0 <= version <= 4:
        raise OffsetsCodecError(f"unsupported GroupMetadataValue version {version}")
    flexible = version >= 4
    string = r.compact_string if flexible else r.string
    opt_string = r.compact_nullable_string if flexible else r.nullable_string
    raw = r.compact_bytes if flexible else r.bytes_
    protocol_type = string()
    generation = r.i32()
    protocol_name = opt_string()
    leader = opt_string()
    state_ts = r.i64() if version >= 2 else -1
    count = r.compact_length() if flexible else r.array_length()
    if count is None:
        raise OffsetsCodecError("null member array")
    members = []
    for _ in range(count):
        member_id = string()
        instance_id = opt_string() if version >= 3 else None
        client_id = string()
        client_host = string()
        rebalance_ms = r.i32() if version >= 1 else None
        session_ms = r.i32()
        # Kafka's rule for v0, which had no rebalance timeout: the session timeout.
        rebalance_ms = session_ms if rebalance_ms is None else rebalance_ms
        subscription = raw()
        assignment = raw()
        if flexible:
            r.tagged()
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
    if flexible:
        r.tagged()
    r.done()
    return GroupValue(
        protocol_type or None,
        generation,
        protocol_name,
        leader,
        None if state_ts == -1 else state_ts,
        tuple(members),
    )


def decode_record_schema(
    key: bytes, value: bytes | None
) -> tuple[OffsetKey, OffsetValue | None] | tuple[GroupKey, GroupValue | None]:
    """``decode_record`` through the strict schema reader only (the reference the fast
    path is tested against)."""
    k = decode_key(key)
    if isinstance(k, OffsetKey):
        if value is None:
            return k, None
        return k, decode_legacy_offset_value(value) if k.legacy else decode_offset_value(value)
    if value is None:
        return k, None
    return k, decode_legacy_group_value(value) if k.legacy else decode_group_value(value)


# -- the fast path ------------------------------------------------------------------------
#
# A start-up load replays every record of ``__consumer_offsets`` (millions after a long
# run), nearly all of them offset commits. These decode the common layouts with a few
# ``struct`` calls; anything they are not sure of (another record type, a null or
# non-UTF-8 string, a length that does not fit exactly, a multi-byte varint, tagged
# fields) returns ``None`` and the record goes through the strict schema reader, so the
# outcome (value or exception) is always the schema reader's.

_HH = struct.Struct(">hh")
_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_QH = struct.Struct(">qh")
_QIH = struct.Struct(">qih")
_QI = struct.Struct(">qi")
_QQ = struct.Struct(">qq")


def offset_key_fields(key: bytes) -> tuple[str, str, int] | None:
    """``(group, topic, partition)`` of an offset-commit key v0/v1, or None (not sure:
    ``decode_record`` through the schema reader decides). For the core's load loop: no
    key object."""
    n = len(key)
    if n < 10:
        return None
    version, glen = _HH.unpack_from(key, 0)
    if version not in (0, 1) or glen < 0:
        return None
    tpos = 4 + glen
    if tpos + 6 > n:
        return None
    (tlen,) = _H.unpack_from(key, tpos)
    end = tpos + 2 + tlen
    if tlen < 0 or end + 4 != n:
        return None
    try:
        group = key[4:tpos].decode("utf-8")
        topic = key[tpos + 2 : end].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return group, topic, _I.unpack_from(key, end)[0]


def _fast_offset_key(key: bytes) -> OffsetKey | None:
    fields = offset_key_fields(key)
    return None if fields is None else OffsetKey(*fields)


def decode_offset_value_fast(data: bytes) -> OffsetValue:
    """``decode_offset_value``, the common layouts without the schema reader."""
    v = _fast_offset_value(data)
    return decode_offset_value(data) if v is None else v


def _fast_offset_value(data: bytes) -> OffsetValue | None:
    """An OffsetCommitValue v0-v4 (v4 without tagged fields), or None."""
    n = len(data)
    if n < 20:  # the shortest: v0/v2 with an empty metadata (2 + 8 + 2 + 8)
        return None
    (version,) = _H.unpack_from(data, 0)
    if version == 3:
        offset, epoch, mlen = _QIH.unpack_from(data, 2)
        pos = 16
    elif 0 <= version <= 2:
        offset, mlen = _QH.unpack_from(data, 2)
        epoch, pos = -1, 12
    elif version == 4:
        offset, epoch = _QI.unpack_from(data, 2)
        mlen = data[14] - 1  # compact length + 1; one byte only
        if mlen < 0 or data[14] & 0x80:
            return None
        pos = 15
    else:
        return None
    mend = pos + mlen
    if mlen < 0:
        return None
    if version == 1:
        if mend + 16 != n:
            return None
        commit_ts, expire_ts = _QQ.unpack_from(data, mend)
    elif version == 4:
        if mend + 9 != n or data[mend + 8] != 0:  # no tagged fields
            return None
        (commit_ts,) = _Q.unpack_from(data, mend)
        expire_ts = -1
    else:
        if mend + 8 != n:
            return None
        (commit_ts,) = _Q.unpack_from(data, mend)
        expire_ts = -1
    try:
        metadata = data[pos:mend].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return OffsetValue(offset, epoch, metadata, commit_ts, None if expire_ts == -1 else expire_ts)


def decode_record(
    key: bytes, value: bytes | None
) -> tuple[OffsetKey, OffsetValue | None] | tuple[GroupKey, GroupValue | None]:
    """One ``__consumer_offsets`` record, its value read in its key's layout; a ``None``
    value stays ``None`` (tombstone). Offset commits take the fast path above; the result,
    or the exception, is always ``decode_record_schema``'s."""
    k = _fast_offset_key(key)
    if k is not None:
        if value is None:
            return k, None
        return k, decode_offset_value_fast(value)
    return decode_record_schema(key, value)
