"""``__consumer_offsets`` records of consumer-protocol groups, in Kafka's layouts.

Keys start with the record type as Kafka numbers it (so they never collide with the
offset/group keys 0..2): 3 group metadata, 4 subscribed topics' metadata, 5 member
metadata, 6 target assignment metadata, 7 a member's target assignment, 8 a member's
current assignment. Key fields are classic strings (``i16 length | utf-8``): the group id,
plus the member id for 5, 7 and 8. Values are ``i16 version (0)`` then a flexible body
(compact strings and arrays, 16-byte uuids, an empty tagged-field section per struct),
following Kafka 4.x's ``ConsumerGroup*Value`` schemas. A ``None`` value is a tombstone.

``group_records`` renders a group's whole durable state as key -> value; the coordinator
writes the difference from what it wrote last, so a heartbeat that changes nothing writes
nothing. ``ConsumerGroupImage`` rebuilds groups from records replayed in log order.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from oncelog.group.consumer_state import (
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    Partitions,
    TopicInfo,
)
from oncelog.group.offsets_codec import OffsetsCodecError

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_MEMBER = 8
CONSUMER_KEY_TYPES = range(GROUP_METADATA, CURRENT_MEMBER + 1)
_MEMBER_KEYS = frozenset({MEMBER_METADATA, TARGET_MEMBER, CURRENT_MEMBER})

# Kafka's MemberState byte values.
_STATE_CODES = {
    MemberState.STABLE: 1,
    MemberState.UNREVOKED_PARTITIONS: 2,
    MemberState.UNRELEASED_PARTITIONS: 3,
}
_STATES = {v: k for k, v in _STATE_CODES.items()}

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I8 = struct.Struct(">b")


@dataclass(frozen=True, slots=True)
class ConsumerKey:
    kind: int
    group_id: str
    member_id: str | None = None


def is_consumer_key(key: bytes) -> bool:
    return len(key) >= 2 and _I16.unpack_from(key, 0)[0] in CONSUMER_KEY_TYPES


def encode_key(k: ConsumerKey) -> bytes:
    buf = bytearray(_I16.pack(k.kind))
    _classic_string(buf, k.group_id)
    if k.kind in _MEMBER_KEYS:
        _classic_string(buf, k.member_id or "")
    return bytes(buf)


def decode_key(key: bytes) -> ConsumerKey:
    r = _Reader(key)
    kind = r.i16()
    if kind not in CONSUMER_KEY_TYPES:
        raise OffsetsCodecError(f"not a consumer group key type: {kind}")
    group_id = r.classic_string()
    member_id = r.classic_string() if kind in _MEMBER_KEYS else None
    r.end()
    return ConsumerKey(kind, group_id, member_id)


# -- rendering -------------------------------------------------------------------------


def group_records(cg: ConsumerGroup) -> dict[bytes, bytes]:
    """The group's durable state as records (key -> value)."""
    gid = cg.group_id
    out: dict[bytes, bytes] = {}
    for m in cg.members.values():
        mid = m.member_id
        out[encode_key(ConsumerKey(MEMBER_METADATA, gid, mid))] = _member_value(m)
        target = cg.target.get(mid, {})
        out[encode_key(ConsumerKey(TARGET_MEMBER, gid, mid))] = _target_value(target)
        out[encode_key(ConsumerKey(CURRENT_MEMBER, gid, mid))] = _current_value(m)
    out[encode_key(ConsumerKey(PARTITION_METADATA, gid))] = _partition_metadata(cg.topics)
    out[encode_key(ConsumerKey(TARGET_METADATA, gid))] = _value(
        lambda w: w.i32(cg.assignment_epoch)
    )
    out[encode_key(ConsumerKey(GROUP_METADATA, gid))] = _value(lambda w: w.i32(cg.group_epoch))
    return out


def _member_value(m: ConsumerMember) -> bytes:
    def body(w: _Writer) -> None:
        w.compact_string(m.instance_id)
        w.compact_string(m.rack_id)
        w.compact_string(m.client_id)
        w.compact_string(m.client_host)
        w.uvarint(len(m.subscribed_topic_names) + 1)
        for name in m.subscribed_topic_names:
            w.compact_string(name)
        w.compact_string(m.subscribed_topic_regex)
        w.i32(m.rebalance_timeout_ms)
        w.compact_string(m.server_assignor)

    return _value(body)


def _target_value(target: Partitions) -> bytes:
    def body(w: _Writer) -> None:
        _topic_partitions(w, target)

    return _value(body)


def _current_value(m: ConsumerMember) -> bytes:
    def body(w: _Writer) -> None:
        w.i32(m.member_epoch)
        w.i32(m.previous_member_epoch)
        w.buf += _I8.pack(_STATE_CODES[m.state])
        _topic_partitions(w, m.assigned)
        _topic_partitions(w, m.pending_revocation)

    return _value(body)


def _partition_metadata(topics: dict[str, TopicInfo]) -> bytes:
    def body(w: _Writer) -> None:
        w.uvarint(len(topics) + 1)
        for name, info in sorted(topics.items()):
            w.uuid(info.topic_id)
            w.compact_string(name)
            w.i32(info.partitions)
            w.uvarint(1)  # no per-partition rack metadata
            w.tags()

    return _value(body)


def _topic_partitions(w: _Writer, parts: Partitions) -> None:
    w.uvarint(len(parts) + 1)
    for t, ps in sorted(parts.items(), key=lambda i: str(i[0])):
        w.uuid(t)
        w.uvarint(len(ps) + 1)
        for p in sorted(ps):
            w.i32(p)
        w.tags()


def _value(body: Callable[[_Writer], None]) -> bytes:
    w = _Writer()
    w.buf += _I16.pack(0)
    body(w)
    w.tags()
    return bytes(w.buf)


# -- replay ----------------------------------------------------------------------------


@dataclass(slots=True)
class _GroupImage:
    records: dict[int, bytes] = field(default_factory=dict)  # key type -> value
    members: dict[str, dict[int, bytes]] = field(default_factory=dict)
    raw: dict[bytes, bytes] = field(default_factory=dict)  # the live records, as logged


class ConsumerGroupImage:
    """Consumer-group records replayed in log order; ``build`` makes the groups."""

    def __init__(self) -> None:
        self._groups: dict[str, _GroupImage] = {}

    def apply(self, key: bytes, value: bytes | None) -> None:
        """Take one record; raises OffsetsCodecError for a corrupt key or value, so the
        loader skips and counts it rather than failing in ``build`` at the end."""
        k = decode_key(key)
        if value is not None:
            _check_value(k.kind, value)
        g = self._groups.setdefault(k.group_id, _GroupImage())
        if k.member_id is not None:
            records = g.members.setdefault(k.member_id, {})
        else:
            records = g.records
        if value is None:
            records.pop(k.kind, None)
            g.raw.pop(key, None)
        else:
            records[k.kind] = value
            g.raw[key] = value
        if k.member_id is not None and not records:
            del g.members[k.member_id]
        if not g.records and not g.members:
            del self._groups[k.group_id]

    def build(self) -> dict[str, tuple[ConsumerGroup, dict[bytes, bytes]]]:
        """group id -> (group, its live records: what later writes are compared with)."""
        out: dict[str, tuple[ConsumerGroup, dict[bytes, bytes]]] = {}
        for gid, g in self._groups.items():
            if GROUP_METADATA not in g.records:
                continue  # deleted: only stray records remain
            cg = ConsumerGroup(gid)
            cg.group_epoch = _epoch(g.records[GROUP_METADATA])
            if TARGET_METADATA in g.records:
                cg.assignment_epoch = _epoch(g.records[TARGET_METADATA])
            if PARTITION_METADATA in g.records:
                cg.topics = _decode_topics(g.records[PARTITION_METADATA])
            for mid, records in g.members.items():
                if MEMBER_METADATA not in records:
                    continue
                member = _decode_member(mid, records[MEMBER_METADATA])
                if CURRENT_MEMBER in records:
                    _decode_current(member, records[CURRENT_MEMBER])
                cg.members[mid] = member
                if member.instance_id is not None:
                    cg.static_members[member.instance_id] = mid
                target = records.get(TARGET_MEMBER)
                cg.target[mid] = {} if target is None else _decode_target(target)
            out[gid] = (cg, dict(g.raw))
        return out


def _check_value(kind: int, value: bytes) -> None:
    if kind in (GROUP_METADATA, TARGET_METADATA):
        _epoch(value)
    elif kind == PARTITION_METADATA:
        _decode_topics(value)
    elif kind == MEMBER_METADATA:
        _decode_member("", value)
    elif kind == CURRENT_MEMBER:
        _decode_current(ConsumerMember(""), value)
    elif kind == TARGET_MEMBER:
        _decode_target(value)


def _epoch(value: bytes) -> int:
    r = _value_reader(value)
    epoch = r.i32()
    r.tags()
    r.end()
    return epoch


def _decode_topics(value: bytes) -> dict[str, TopicInfo]:
    r = _value_reader(value)
    topics = {}
    for _ in range(r.compact_len()):
        tid = r.uuid()
        name = r.compact_string() or ""
        n = r.i32()
        for _ in range(r.compact_len()):
            r.i32()
            for _ in range(r.compact_len()):
                r.compact_string()
            r.tags()
        r.tags()
        topics[name] = TopicInfo(tid, n)
    r.tags()
    r.end()
    return topics


def _decode_member(member_id: str, value: bytes) -> ConsumerMember:
    r = _value_reader(value)
    m = ConsumerMember(member_id)
    m.instance_id = r.compact_string()
    m.rack_id = r.compact_string()
    m.client_id = r.compact_string() or ""
    m.client_host = r.compact_string() or ""
    m.subscribed_topic_names = tuple(r.compact_string() or "" for _ in range(r.compact_len()))
    m.subscribed_topic_regex = r.compact_string()
    m.rebalance_timeout_ms = r.i32()
    m.server_assignor = r.compact_string()
    r.tags()
    r.end()
    return m


def _decode_current(m: ConsumerMember, value: bytes) -> None:
    r = _value_reader(value)
    m.member_epoch = r.i32()
    m.previous_member_epoch = r.i32()
    code = r.i8()
    if code not in _STATES:
        raise OffsetsCodecError(f"unknown member state {code}")
    m.state = _STATES[code]
    m.assigned = _read_partitions(r)
    m.pending_revocation = _read_partitions(r)
    r.tags()
    r.end()


def _decode_target(value: bytes) -> Partitions:
    r = _value_reader(value)
    parts = _read_partitions(r)
    r.tags()
    r.end()
    return parts


def _read_partitions(r: _Reader) -> Partitions:
    parts: Partitions = {}
    for _ in range(r.compact_len()):
        tid = r.uuid()
        ps = frozenset(r.i32() for _ in range(r.compact_len()))
        r.tags()
        if ps:
            parts[tid] = ps
    return parts


def _value_reader(value: bytes) -> _Reader:
    r = _Reader(value)
    version = r.i16()
    if version != 0:
        raise OffsetsCodecError(f"unknown consumer group value version {version}")
    return r


# -- wire primitives -------------------------------------------------------------------


def _classic_string(buf: bytearray, s: str) -> None:
    data = s.encode("utf-8")
    buf += _I16.pack(len(data))
    buf += data


class _Writer:
    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def i32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def uvarint(self, v: int) -> None:
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)

    def compact_string(self, s: str | None) -> None:
        if s is None:
            self.uvarint(0)
            return
        data = s.encode("utf-8")
        self.uvarint(len(data) + 1)
        self.buf += data

    def uuid(self, u: uuid.UUID) -> None:
        self.buf += u.bytes

    def tags(self) -> None:
        self.uvarint(0)


def _utf8(raw: memoryview) -> str:
    try:
        return str(raw, "utf-8")
    except UnicodeDecodeError as exc:
        raise OffsetsCodecError(f"invalid UTF-8 in a consumer group record: {exc}") from None


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = memoryview(buf)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise OffsetsCodecError("truncated consumer group record")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def i8(self) -> int:
        return int(_I8.unpack(self._take(1))[0])

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise OffsetsCodecError("varint too long")

    def compact_len(self) -> int:
        n = self.uvarint() - 1
        if n < 0:
            raise OffsetsCodecError("null array")
        return n

    def compact_string(self) -> str | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        return _utf8(self._take(n))

    def classic_string(self) -> str:
        n = self.i16()
        return _utf8(self._take(n))

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self._take(16)))

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())  # skip unknown tagged fields

    def end(self) -> None:
        if self.pos != len(self.buf):
            raise OffsetsCodecError("trailing bytes in consumer group record")
