"""Records of the compacted ``__consumer_offsets`` topic (our own layout, not Kafka's).

Big-endian throughout. A string is ``i32 length | utf-8`` (length -1 = null), bytes are
``i32 length | raw``. Every key and value starts with an ``i16``:

Keys (the leading i16 is the record type, so compaction keys never collide):
  offset commit (1): ``group | topic | i32 partition``
  group metadata (2): ``group``

Values (the leading i16 is the value version, currently 1):
  offset commit: ``i64 offset | i32 leader_epoch (-1 none) | metadata | i64 commit_ts |
      i64 expire_ts (-1 none)``
  group metadata: ``protocol_type? | i32 generation | protocol_name? | leader? |
      i64 state_ts (-1 none) | i32 member count | per member: member_id | instance_id? |
      client_id | client_host | i32 rebalance_timeout | i32 session_timeout |
      bytes subscription | bytes assignment``

A ``None`` value is a tombstone. Decoders are strict: an unknown type or version, a short
buffer or trailing bytes raise ``OffsetsCodecError``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

OFFSET_COMMIT_KEY = 1
GROUP_METADATA_KEY = 2
VALUE_VERSION = 1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_OFFSET_HEAD = struct.Struct(">qi")  # offset, leader epoch
_TIMES = struct.Struct(">qq")  # commit ts, expire ts
_TIMEOUTS = struct.Struct(">ii")  # rebalance, session


class OffsetsCodecError(ValueError):
    """A ``__consumer_offsets`` key or value that does not decode."""


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int  # -1: none
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None  # only set by OffsetCommit v2-v4 retention_time


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes  # the member's metadata for the group's selected protocol
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str | None
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    state_timestamp_ms: int | None
    members: tuple[MemberValue, ...] = ()


Key = OffsetKey | GroupKey


class _Writer:
    __slots__ = ("buf",)

    def __init__(self, head: int) -> None:
        self.buf = bytearray(_I16.pack(head))

    def i32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def i64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def string(self, s: str | None) -> None:
        if s is None:
            self.buf += _I32.pack(-1)
        else:
            data = s.encode("utf-8")
            self.buf += _I32.pack(len(data))
            self.buf += data

    def raw(self, b: bytes) -> None:
        self.buf += _I32.pack(len(b))
        self.buf += b


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = memoryview(buf)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise OffsetsCodecError("record truncated")
        v = self.buf[self.pos : self.pos + n]
        self.pos += n
        return v

    def unpack(self, s: struct.Struct) -> tuple[int, ...]:
        return s.unpack(self._take(s.size))

    def i16(self) -> int:
        return self.unpack(_I16)[0]

    def i32(self) -> int:
        return self.unpack(_I32)[0]

    def i64(self) -> int:
        return self.unpack(_I64)[0]

    def opt_string(self) -> str | None:
        n = self.i32()
        if n == -1:
            return None
        try:
            return str(self._take(n), "utf-8")
        except UnicodeDecodeError as exc:
            raise OffsetsCodecError(f"invalid utf-8: {exc}") from exc

    def string(self) -> str:
        s = self.opt_string()
        if s is None:
            raise OffsetsCodecError("null where a string is required")
        return s

    def raw(self) -> bytes:
        return bytes(self._take(self.i32()))

    def done(self) -> None:
        if self.pos != len(self.buf):
            raise OffsetsCodecError(f"{len(self.buf) - self.pos} trailing bytes")


def encode_offset_key(group_id: str, topic: str, partition: int) -> bytes:
    w = _Writer(OFFSET_COMMIT_KEY)
    w.string(group_id)
    w.string(topic)
    w.i32(partition)
    return bytes(w.buf)


def encode_group_key(group_id: str) -> bytes:
    w = _Writer(GROUP_METADATA_KEY)
    w.string(group_id)
    return bytes(w.buf)


def decode_key(data: bytes) -> Key:
    r = _Reader(data)
    kind = r.i16()
    key: Key
    if kind == OFFSET_COMMIT_KEY:
        key = OffsetKey(r.string(), r.string(), r.i32())
    elif kind == GROUP_METADATA_KEY:
        key = GroupKey(r.string())
    else:
        raise OffsetsCodecError(f"unknown __consumer_offsets key type {kind}")
    r.done()
    return key


def encode_offset_value(v: OffsetValue) -> bytes:
    w = _Writer(VALUE_VERSION)
    w.buf += _OFFSET_HEAD.pack(v.offset, v.leader_epoch)
    w.string(v.metadata)
    expire = -1 if v.expire_timestamp_ms is None else v.expire_timestamp_ms
    w.buf += _TIMES.pack(v.commit_timestamp_ms, expire)
    return bytes(w.buf)


def decode_offset_value(data: bytes) -> OffsetValue:
    r = _Reader(data)
    _check_version(r.i16())
    offset, epoch = r.unpack(_OFFSET_HEAD)
    metadata = r.string()
    commit_ts, expire_ts = r.unpack(_TIMES)
    r.done()
    return OffsetValue(offset, epoch, metadata, commit_ts, None if expire_ts == -1 else expire_ts)


def encode_group_value(v: GroupValue) -> bytes:
    w = _Writer(VALUE_VERSION)
    w.string(v.protocol_type)
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
        w.buf += _TIMEOUTS.pack(m.rebalance_timeout_ms, m.session_timeout_ms)
        w.raw(m.subscription)
        w.raw(m.assignment)
    return bytes(w.buf)


def decode_group_value(data: bytes) -> GroupValue:
    r = _Reader(data)
    _check_version(r.i16())
    protocol_type = r.opt_string()
    generation = r.i32()
    protocol_name = r.opt_string()
    leader = r.opt_string()
    state_ts = r.i64()
    count = r.i32()
    if count < 0:
        raise OffsetsCodecError(f"negative member count {count}")
    members = []
    for _ in range(count):
        member_id = r.string()
        instance_id = r.opt_string()
        client_id = r.string()
        client_host = r.string()
        rebalance_ms, session_ms = r.unpack(_TIMEOUTS)
        members.append(
            MemberValue(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_ms,
                session_ms,
                r.raw(),
                r.raw(),
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


def decode_record(
    key: bytes, value: bytes | None
) -> tuple[OffsetKey, OffsetValue | None] | tuple[GroupKey, GroupValue | None]:
    """One ``__consumer_offsets`` record; a ``None`` value stays ``None`` (tombstone)."""
    k = decode_key(key)
    if isinstance(k, OffsetKey):
        return k, None if value is None else decode_offset_value(value)
    return k, None if value is None else decode_group_value(value)


def _check_version(version: int) -> None:
    if version != VALUE_VERSION:
        raise OffsetsCodecError(f"unsupported __consumer_offsets value version {version}")
