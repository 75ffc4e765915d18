"""``__consumer_offsets`` records: Kafka's layouts byte for byte, round trips, strictness, and
the legacy (pre-Kafka) oncelog layout still read and never confused with Kafka's."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oncelog.group.layout_migration import maybe_legacy_key
from oncelog.group.offsets_codec import (
    GROUP_METADATA_KEY,
    OFFSET_COMMIT_KEY,
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetsCodecError,
    OffsetValue,
    UnknownRecordType,
    decode_group_value,
    decode_key,
    decode_offset_value,
    decode_record,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)

from ..legacy_layouts import (
    legacy_group_key,
    legacy_group_value,
    legacy_offset_key,
    legacy_offset_value,
)

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
text = st.text(max_size=20)
opt_text = st.none() | text
# Kafka's protocolType is a non-nullable string; "" stands for none (JoinGroup refuses "").
protocol_types = st.none() | st.text(min_size=1, max_size=20)

offset_values = st.builds(OffsetValue, i64, i32, text, i64, st.none() | st.integers(0, 2**63 - 1))
members = st.builds(
    MemberValue,
    text,
    opt_text,
    text,
    text,
    i32,
    i32,
    st.binary(max_size=40),
    st.binary(max_size=40),
)
group_values = st.builds(
    GroupValue,
    protocol_types,
    i32,
    opt_text,
    opt_text,
    st.none() | st.integers(0, 2**63 - 1),
    st.lists(members, max_size=4).map(tuple),
)

TS = bytes.fromhex("0000018bcfe56800")  # 1_700_000_000_000


# -- golden bytes, laid out by hand from Kafka's schemas --------------------------------------


def test_offset_commit_key_golden() -> None:
    # group-coordinator/src/main/resources/common/message/OffsetCommitKey.json: version 1
    # (the record type Kafka writes), string group, string topic, int32 partition.
    assert encode_offset_key("grp", "orders", 3) == (
        b"\x00\x01" + b"\x00\x03grp" + b"\x00\x06orders" + b"\x00\x00\x00\x03"
    )


def test_group_metadata_key_golden() -> None:
    # GroupMetadataKey.json: version 2, string group.
    assert encode_group_key("grp") == b"\x00\x02\x00\x03grp"


def test_offset_commit_value_v3_golden() -> None:
    # OffsetCommitValue.json v3: int64 offset, int32 leaderEpoch, string metadata,
    # int64 commitTimestamp.
    raw = encode_offset_value(OffsetValue(42, 5, "m", 1_700_000_000_000, None))
    assert raw == (b"\x00\x03" + struct.pack(">q", 42) + b"\x00\x00\x00\x05" + b"\x00\x01m" + TS)
    assert decode_offset_value(raw) == OffsetValue(42, 5, "m", 1_700_000_000_000, None)


def test_offset_commit_value_v1_golden() -> None:
    # OffsetCommitValue.json v1 (what Kafka writes for an explicit retention): int64 offset,
    # string metadata, int64 commitTimestamp, int64 expireTimestamp; no leader epoch.
    raw = encode_offset_value(OffsetValue(42, -1, "", 1_700_000_000_000, 1_700_000_000_000))
    assert raw == b"\x00\x01" + struct.pack(">q", 42) + b"\x00\x00" + TS + TS


def test_offset_commit_value_v4_keeps_an_expiry_next_to_an_epoch() -> None:
    # v4 is flexible: compact string metadata (length + 1) and trailing tagged fields; the
    # expiry goes in oncelog's tag 10000 (uvarint 0x90 0x4e).
    v = OffsetValue(1, 2, "m", 1_700_000_000_000, 1_700_000_000_000)
    raw = encode_offset_value(v)
    assert raw == (
        b"\x00\x04"
        + struct.pack(">q", 1)
        + b"\x00\x00\x00\x02"
        + b"\x02m"
        + TS
        + b"\x01\x90\x4e\x08"
        + TS
    )
    assert decode_offset_value(raw) == v


def test_older_offset_value_versions_decode() -> None:
    # v0 and v2: int64 offset, string metadata, int64 commitTimestamp.
    for version in (0, 2):
        raw = struct.pack(">hq", version, 9) + b"\x00\x02md" + TS
        assert decode_offset_value(raw) == OffsetValue(9, -1, "md", 1_700_000_000_000, None)
    # v4 with no tagged fields.
    raw = b"\x00\x04" + struct.pack(">qi", 9, 3) + b"\x01" + TS + b"\x00"
    assert decode_offset_value(raw) == OffsetValue(9, 3, "", 1_700_000_000_000, None)


def test_group_metadata_value_v3_golden() -> None:
    # GroupMetadataValue.json v3: string protocolType, int32 generation, nullable string
    # protocol, nullable string leader, int64 currentStateTimestamp, []MemberMetadata (int32
    # count; memberId, nullable groupInstanceId, clientId, clientHost, int32
    # rebalanceTimeout, int32 sessionTimeout, bytes subscription, bytes assignment).
    v = GroupValue(
        "consumer",
        7,
        "range",
        "m-1",
        123,
        (MemberValue("m-1", None, "c", "/h", 300_000, 45_000, b"sub", b"asg"),),
    )
    raw = encode_group_value(v)
    assert raw == (
        b"\x00\x03"
        + b"\x00\x08consumer"
        + b"\x00\x00\x00\x07"
        + b"\x00\x05range"
        + b"\x00\x03m-1"
        + struct.pack(">q", 123)
        + b"\x00\x00\x00\x01"
        + b"\x00\x03m-1"
        + b"\xff\xff"
        + b"\x00\x01c"
        + b"\x00\x02/h"
        + b"\x00\x04\x93\xe0"
        + b"\x00\x00\xaf\xc8"
        + b"\x00\x00\x00\x03sub"
        + b"\x00\x00\x00\x03asg"
    )
    assert decode_group_value(raw) == v
    # No protocol type is Kafka's "" on the wire.
    empty = encode_group_value(GroupValue(None, 8, None, None, None))
    assert empty == b"\x00\x03\x00\x00" + struct.pack(">i", 8) + b"\xff\xff" * 2 + (
        b"\xff" * 8 + b"\x00" * 4
    )
    assert decode_group_value(empty) == GroupValue(None, 8, None, None, None)


def test_older_group_value_versions_decode() -> None:
    # v0: no state timestamp, no instance id, no rebalance timeout (Kafka then uses the
    # session timeout as the rebalance timeout).
    member_v0 = (
        b"\x00\x01m"
        + b"\x00\x01c"
        + b"\x00\x01h"
        + struct.pack(">i", 10)
        + (b"\x00\x00\x00\x00" * 2)
    )
    raw = b"\x00\x00\x00\x01p" + struct.pack(">i", 1) + b"\xff\xff\xff\xff"
    raw += struct.pack(">i", 1) + member_v0
    assert decode_group_value(raw) == GroupValue(
        "p", 1, None, None, None, (MemberValue("m", None, "c", "h", 10, 10, b"", b""),)
    )
    # v4 (flexible): compact strings/bytes/arrays and tagged fields per member and at the end.
    raw = b"\x00\x04" + b"\x02p" + struct.pack(">i", 2) + b"\x02r" + b"\x00"
    raw += struct.pack(">q", 5) + b"\x02"  # one member
    raw += b"\x02m" + b"\x00" + b"\x02c" + b"\x02h" + struct.pack(">ii", 7, 8) + b"\x02s\x01"
    raw += b"\x00" + b"\x00"
    assert decode_group_value(raw) == GroupValue(
        "p", 2, "r", None, 5, (MemberValue("m", None, "c", "h", 7, 8, b"s", b""),)
    )


# -- round trips ------------------------------------------------------------------------------


def test_offset_record_round_trip() -> None:
    key = encode_offset_key("grp", "orders", 3)
    value = encode_offset_value(OffsetValue(42, 5, "meta\u00e9", 1_700_000_000_000, None))
    assert key[:2] == struct.pack(">h", OFFSET_COMMIT_KEY)
    assert decode_record(key, value) == (
        OffsetKey("grp", "orders", 3),
        OffsetValue(42, 5, "meta\u00e9", 1_700_000_000_000, None),
    )
    assert decode_record(key, None) == (OffsetKey("grp", "orders", 3), None)


def test_group_record_round_trip() -> None:
    v = GroupValue(
        "consumer",
        7,
        "range",
        "m-1",
        123,
        (
            MemberValue("m-1", None, "client", "/10.0.0.1", 300_000, 45_000, b"sub", b"asg"),
            MemberValue("m-2", "instance-2", "client", "/10.0.0.2", 300_000, 45_000, b"", b""),
        ),
    )
    key = encode_group_key("grp")
    assert key[:2] == struct.pack(">h", GROUP_METADATA_KEY)
    assert decode_record(key, encode_group_value(v)) == (GroupKey("grp"), v)
    empty = GroupValue("consumer", 8, None, None, 456)
    assert decode_group_value(encode_group_value(empty)) == empty
    assert decode_record(key, None) == (GroupKey("grp"), None)


@given(text, text, i32)
def test_offset_key_property(group: str, topic: str, partition: int) -> None:
    key = decode_key(encode_offset_key(group, topic, partition))
    assert key == OffsetKey(group, topic, partition)
    assert not key.legacy


@given(text)
def test_group_key_property(group: str) -> None:
    key = decode_key(encode_group_key(group))
    assert key == GroupKey(group)
    assert not key.legacy


@given(offset_values)
def test_offset_value_property(v: OffsetValue) -> None:
    assert decode_offset_value(encode_offset_value(v)) == v


@given(group_values)
def test_group_value_property(v: GroupValue) -> None:
    assert decode_group_value(encode_group_value(v)) == v


def test_keys_of_different_types_never_collide() -> None:
    assert encode_group_key("g") != encode_offset_key("g", "", 0)[: len(encode_group_key("g"))]


# -- the legacy layout ------------------------------------------------------------------------


@given(text, text, i32, offset_values)
def test_legacy_offset_records_decode_as_legacy(
    group: str, topic: str, partition: int, v: OffsetValue
) -> None:
    raw_key = legacy_offset_key(group, topic, partition)
    key, value = decode_record(raw_key, legacy_offset_value(v))
    assert key == OffsetKey(group, topic, partition) and key.legacy
    assert value == v
    assert maybe_legacy_key(raw_key)
    assert not maybe_legacy_key(encode_offset_key(group, topic, partition))


@given(text, group_values)
def test_legacy_group_records_decode_as_legacy(group: str, v: GroupValue) -> None:
    raw_key = legacy_group_key(group)
    key, value = decode_record(raw_key, legacy_group_value(v))
    assert key == GroupKey(group) and key.legacy
    assert value == v
    assert decode_record(raw_key, None) == (GroupKey(group), None)
    assert maybe_legacy_key(raw_key)
    assert not maybe_legacy_key(encode_group_key(group))


# -- strictness -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [3, 4, 5, 6, 7, 8, 9, 10, 127, -1])
def test_unknown_key_versions_are_unknown_record_types(version: int) -> None:
    # 3+ are KIP-848 consumer group (and share group) records in Kafka: skipped, not fatal.
    with pytest.raises(UnknownRecordType):
        decode_key(struct.pack(">h", version) + b"\x00\x01g")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        encode_group_key("g") + b"x",  # trailing bytes
        encode_offset_key("g", "t", 0)[:-1],  # truncated
        struct.pack(">hh", GROUP_METADATA_KEY, -1),  # null group id
        struct.pack(">hh", GROUP_METADATA_KEY, 1) + b"\xff",  # invalid utf-8
        legacy_group_key("g") + b"x",  # legacy, trailing bytes
        struct.pack(">hi", GROUP_METADATA_KEY, 1) + b"\xff",  # legacy, invalid utf-8
    ],
)
def test_bad_keys_are_rejected(data: bytes) -> None:
    with pytest.raises(OffsetsCodecError):
        decode_key(data)


def test_bad_values_are_rejected() -> None:
    good = encode_offset_value(OffsetValue(1, -1, "", 0, None))
    with pytest.raises(OffsetsCodecError, match="version"):
        decode_offset_value(struct.pack(">h", 5) + good[2:])
    with pytest.raises(OffsetsCodecError):
        decode_offset_value(good + b"\x00")
    with pytest.raises(OffsetsCodecError):
        decode_offset_value(good[:-3])
    group = encode_group_value(GroupValue(None, 0, None, None, None))
    with pytest.raises(OffsetsCodecError, match="array length"):
        decode_group_value(group[:-4] + struct.pack(">i", -2))
    with pytest.raises(OffsetsCodecError, match="null member array"):
        decode_group_value(group[:-4] + struct.pack(">i", -1))
    # A legacy key's value is read in the legacy layout, strictly too.
    with pytest.raises(OffsetsCodecError, match="legacy"):
        decode_record(legacy_offset_key("g", "t", 0), good)
