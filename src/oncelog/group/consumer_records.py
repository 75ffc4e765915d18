"""``__consumer_offsets`` records of consumer-protocol groups, in Kafka's layouts.

Keys start with the record type as Kafka numbers it (so they never collide with the
offset/group keys 0..2): 3 group metadata, 4 subscribed topics' metadata, 5 member
metadata, 6 target assignment metadata, 7 a member's target assignment, 8 a member's
current assignment, 16 a subscribed regex's resolution. Key fields are classic strings
(``i16 length | utf-8``): the group id, plus the member id for 5, 7 and 8, the regex for 16. Values are ``i16 version (0)`` then a flexible body
(compact strings and arrays, 16-byte uuids, an empty tagged-field section per struct),
following Kafka 4.x's ``ConsumerGroup*Value`` schemas. A ``None`` value is a tombstone.

``group_records`` renders a group's whole durable state as key -> value; the coordinator
writes the difference from what it wrote last, so a heartbeat that changes nothing writes
nothing. ``ConsumerGroupImage`` rebuilds groups from records replayed in log order.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from oncelog.coordinator.schema_io import SchemaReader, SchemaWriter
from oncelog.group.consumer_state import (
    ClassicMeta,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    Partitions,
    ResolvedRegex,
    TopicInfo,
)
from oncelog.group.offsets_codec import OffsetsCodecError

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_MEMBER = 8
REGULAR_EXPRESSION = 16  # ConsumerGroupRegularExpressionKey/Value
CLASSIC_MEMBER_TAG = 0  # ConsumerGroupMemberMetadataValue.ClassicMemberMetadata
CONSUMER_KEY_TYPES = frozenset((*range(GROUP_METADATA, CURRENT_MEMBER + 1), REGULAR_EXPRESSION))
_MEMBER_KEYS = frozenset({MEMBER_METADATA, TARGET_MEMBER, CURRENT_MEMBER})

# Kafka's MemberState byte values.
_STATE_CODES = {
    MemberState.STABLE: 1,
    MemberState.UNREVOKED_PARTITIONS: 2,
    MemberState.UNRELEASED_PARTITIONS: 3,
}
_STATES = {v: k for k, v in _STATE_CODES.items()}

_I16 = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class ConsumerKey:
    kind: int
    group_id: str
    member_id: str | None = None
    regex: str | None = None  # REGULAR_EXPRESSION keys


def is_consumer_key(key: bytes) -> bool:
    return len(key) >= 2 and _I16.unpack_from(key, 0)[0] in CONSUMER_KEY_TYPES


def encode_key(k: ConsumerKey) -> bytes:
    w = SchemaWriter(k.kind)  # the key's version is its record type
    w.string(k.group_id)
    if k.kind in _MEMBER_KEYS:
        w.string(k.member_id or "")
    elif k.kind == REGULAR_EXPRESSION:
        w.string(k.regex or "")
    return w.done()


def decode_key(key: bytes) -> ConsumerKey:
    r = SchemaReader(key, OffsetsCodecError)
    kind = r.i16()
    if kind not in CONSUMER_KEY_TYPES:
        raise OffsetsCodecError(f"not a consumer group key type: {kind}")
    group_id = r.string()
    member_id = r.string() if kind in _MEMBER_KEYS else None
    regex = r.string() if kind == REGULAR_EXPRESSION else None
    r.done()
    return ConsumerKey(kind, group_id, member_id, regex)


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
    for regex, resolved in cg.resolved_regexes.items():
        out[encode_key(ConsumerKey(REGULAR_EXPRESSION, gid, regex=regex))] = _regex_value(resolved)
    out[encode_key(ConsumerKey(PARTITION_METADATA, gid))] = _partition_metadata(cg.topics)
    out[encode_key(ConsumerKey(TARGET_METADATA, gid))] = _value(
        lambda w: w.i32(cg.assignment_epoch)
    )
    out[encode_key(ConsumerKey(GROUP_METADATA, gid))] = _value(lambda w: w.i32(cg.group_epoch))
    return out


def _member_value(m: ConsumerMember) -> bytes:
    def body(w: SchemaWriter) -> None:
        w.compact_string(m.instance_id)
        w.compact_string(m.rack_id)
        w.compact_string(m.client_id)
        w.compact_string(m.client_host)
        w.compact_length(len(m.subscribed_topic_names))
        for name in m.subscribed_topic_names:
            w.compact_string(name)
        w.compact_string(m.subscribed_topic_regex)
        w.i32(m.rebalance_timeout_ms)
        w.compact_string(m.server_assignor)

    w = SchemaWriter(0)
    body(w)
    tags = {} if m.classic is None else {CLASSIC_MEMBER_TAG: _classic_value(m.classic)}
    w.tagged(tags)
    return w.done()


def _classic_value(c: ClassicMeta) -> bytes:
    """The tagged nullable struct ClassicMemberMetadata: Kafka's generator writes a
    presence varint (1) before a non-null struct."""
    w = SchemaWriter(0)
    w.buf = bytearray(b"\x01")
    w.i32(c.session_timeout_ms)
    w.compact_length(len(c.protocols))
    for name, metadata in c.protocols:
        w.compact_string(name)
        w.compact_bytes(metadata)
        w.tagged({})
    w.tagged({})
    return w.done()


def _target_value(target: Partitions) -> bytes:
    def body(w: SchemaWriter) -> None:
        _topic_partitions(w, target)

    return _value(body)


def _current_value(m: ConsumerMember) -> bytes:
    def body(w: SchemaWriter) -> None:
        w.i32(m.member_epoch)
        w.i32(m.previous_member_epoch)
        w.i8(_STATE_CODES[m.state])
        _topic_partitions(w, m.assigned)
        _topic_partitions(w, m.pending_revocation)

    return _value(body)


def _partition_metadata(topics: dict[str, TopicInfo]) -> bytes:
    def body(w: SchemaWriter) -> None:
        w.compact_length(len(topics))
        for name, info in sorted(topics.items()):
            w.uuid(info.topic_id)
            w.compact_string(name)
            w.i32(info.partitions)
            w.compact_length(0)  # no per-partition rack metadata
            w.tagged({})

    return _value(body)


def _regex_value(resolved: ResolvedRegex) -> bytes:
    def body(w: SchemaWriter) -> None:
        w.compact_length(len(resolved.topics))
        for name in sorted(resolved.topics):
            w.compact_string(name)
        w.i64(resolved.version)
        w.i64(resolved.timestamp_ms)

    return _value(body)


def _topic_partitions(w: SchemaWriter, parts: Partitions) -> None:
    w.compact_length(len(parts))
    for t, ps in sorted(parts.items(), key=lambda i: str(i[0])):
        w.uuid(t)
        w.compact_length(len(ps))
        for p in sorted(ps):
            w.i32(p)
        w.tagged({})


def _value(body: Callable[[SchemaWriter], None]) -> bytes:
    w = SchemaWriter(0)  # every value is version 0 (flexible)
    body(w)
    w.tagged({})
    return w.done()


# -- replay ----------------------------------------------------------------------------


@dataclass(slots=True)
class _GroupImage:
    records: dict[int, bytes] = field(default_factory=dict)  # key type -> value
    members: dict[str, dict[int, bytes]] = field(default_factory=dict)
    regexes: dict[str, bytes] = field(default_factory=dict)  # regex -> value
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
        if k.regex is not None:
            if value is None:
                g.regexes.pop(k.regex, None)
                g.raw.pop(key, None)
            else:
                g.regexes[k.regex] = value
                g.raw[key] = value
            if not g.records and not g.members and not g.regexes:
                del self._groups[k.group_id]
            return
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
        if not g.records and not g.members and not g.regexes:
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
            for regex, value in g.regexes.items():
                cg.resolved_regexes[regex] = _decode_regex(value)
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
    elif kind == REGULAR_EXPRESSION:
        _decode_regex(value)


def _epoch(value: bytes) -> int:
    r = _value_reader(value)
    epoch = r.i32()
    r.tagged()
    r.done()
    return epoch


def _decode_topics(value: bytes) -> dict[str, TopicInfo]:
    r = _value_reader(value)
    topics = {}
    for _ in range(_length(r)):
        tid = r.uuid()
        name = r.compact_nullable_string() or ""
        n = r.i32()
        for _ in range(_length(r)):
            r.i32()
            for _ in range(_length(r)):
                r.compact_nullable_string()
            r.tagged()
        r.tagged()
        topics[name] = TopicInfo(tid, n)
    r.tagged()
    r.done()
    return topics


def _decode_member(member_id: str, value: bytes) -> ConsumerMember:
    r = _value_reader(value)
    m = ConsumerMember(member_id)
    m.instance_id = r.compact_nullable_string()
    m.rack_id = r.compact_nullable_string()
    m.client_id = r.compact_nullable_string() or ""
    m.client_host = r.compact_nullable_string() or ""
    m.subscribed_topic_names = tuple(r.compact_nullable_string() or "" for _ in range(_length(r)))
    m.subscribed_topic_regex = r.compact_nullable_string()
    m.rebalance_timeout_ms = r.i32()
    m.server_assignor = r.compact_nullable_string()
    classic = r.tagged().get(CLASSIC_MEMBER_TAG)
    r.done()
    if classic is not None:
        m.classic = _decode_classic(bytes(classic))
    return m


def _decode_classic(raw: bytes) -> ClassicMeta | None:
    r = SchemaReader(raw, OffsetsCodecError)
    if r.uvarint() == 0:
        return None  # written as null
    session = r.i32()
    protocols = []
    for _ in range(_length(r)):
        name = r.compact_string()
        metadata = r.compact_bytes()
        r.tagged()
        protocols.append((name, metadata))
    r.tagged()
    r.done()
    if not protocols:
        raise OffsetsCodecError("a classic member without protocols")
    return ClassicMeta(session, tuple(protocols))


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
    r.tagged()
    r.done()


def _decode_regex(value: bytes) -> ResolvedRegex:
    r = _value_reader(value)
    topics = frozenset(r.compact_string() for _ in range(_length(r)))
    r.i64()  # Kafka's metadata image offset, ours a per-process count: unknown after a load
    timestamp = r.i64()
    r.tagged()
    r.done()
    # Version -1: topics created while the broker was down make the next heartbeat
    # resolve again.
    return ResolvedRegex(topics, -1, timestamp)


def _decode_target(value: bytes) -> Partitions:
    r = _value_reader(value)
    parts = _read_partitions(r)
    r.tagged()
    r.done()
    return parts


def _read_partitions(r: SchemaReader) -> Partitions:
    parts: Partitions = {}
    for _ in range(_length(r)):
        tid = r.uuid()
        ps = frozenset(r.i32() for _ in range(_length(r)))
        r.tagged()
        if ps:
            parts[tid] = ps
    return parts


def _value_reader(value: bytes) -> SchemaReader:
    r = SchemaReader(value, OffsetsCodecError)
    version = r.i16()
    if version != 0:
        raise OffsetsCodecError(f"unknown consumer group value version {version}")
    return r


def _length(r: SchemaReader) -> int:
    """A compact array's length; these records have no nullable arrays."""
    n = r.compact_length()
    if n is None:
        raise OffsetsCodecError("null array in a consumer group record")
    return n
