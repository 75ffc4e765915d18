"""Round trips and strictness of the ``__consumer_offsets`` record codec."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oncelog.group.offsets_codec import (
    GROUP_METADATA_KEY,
    OFFSET_COMMIT_KEY,
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetsCodecError,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    decode_record,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
text = st.text(max_size=20)
opt_text = st.none() | text

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
    opt_text,
    i32,
    opt_text,
    opt_text,
    st.none() | st.integers(0, 2**63 - 1),
    st.lists(members, max_size=4).map(tuple),
)


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
    assert decode_key(encode_offset_key(group, topic, partition)) == OffsetKey(
        group, topic, partition
    )


@given(text)
def test_group_key_property(group: str) -> None:
    assert decode_key(encode_group_key(group)) == GroupKey(group)


@given(offset_values)
def test_offset_value_property(v: OffsetValue) -> None:
    assert decode_offset_value(encode_offset_value(v)) == v


@given(group_values)
def test_group_value_property(v: GroupValue) -> None:
    assert decode_group_value(encode_group_value(v)) == v


def test_keys_of_different_types_never_collide() -> None:
    assert encode_group_key("g") != encode_offset_key("g", "", 0)[: len(encode_group_key("g"))]


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        struct.pack(">h", 9) + b"\x00\x00\x00\x00",  # unknown key type
        encode_group_key("g") + b"x",  # trailing bytes
        encode_offset_key("g", "t", 0)[:-1],  # truncated
        struct.pack(">hi", GROUP_METADATA_KEY, -1),  # null group id
        struct.pack(">hi", GROUP_METADATA_KEY, 1) + b"\xff",  # invalid utf-8
    ],
)
def test_bad_keys_are_rejected(data: bytes) -> None:
    with pytest.raises(OffsetsCodecError):
        decode_key(data)


def test_bad_values_are_rejected() -> None:
    good = encode_offset_value(OffsetValue(1, -1, "", 0, None))
    with pytest.raises(OffsetsCodecError, match="version"):
        decode_offset_value(struct.pack(">h", 2) + good[2:])
    with pytest.raises(OffsetsCodecError):
        decode_offset_value(good + b"\x00")
    with pytest.raises(OffsetsCodecError):
        decode_offset_value(good[:-3])
    group = encode_group_value(GroupValue(None, 0, None, None, None))
    with pytest.raises(OffsetsCodecError, match="member count"):
        decode_group_value(group[:-4] + struct.pack(">i", -1))
