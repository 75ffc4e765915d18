"""The classic consumer's embedded protocol (Kafka's ``ConsumerProtocol``): the JoinGroup
subscription and the SyncGroup assignment bytes of protocol type "consumer".

Subscription v0: ``i16 version | [string topic] | nullable bytes user_data``; v1 adds
``[string topic, [i32 partition]]`` owned partitions; v2 ``i32 generation_id``; v3
``nullable string rack_id``. Assignment (every version alike): ``i16 version |
[string topic, [i32 partition]] | nullable bytes user_data``. Arrays and strings use the
classic (non-flexible) encoding. A newer version than this reads is read as its known
prefix, as Kafka does.

The coordinator needs them once a classic member is inside a consumer-protocol group
(KIP-848's online migration): its subscription then feeds the server-side assignor, and
its assignment is computed by the coordinator and handed back in SyncGroup.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

MAX_ASSIGNMENT_VERSION = 3


class EmbeddedProtocolError(ValueError):
    """Malformed consumer protocol bytes."""


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    owned: dict[str, frozenset[int]]  # empty before v1
    rack_id: str | None = None


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, data: bytes) -> None:
        self.buf = memoryview(data)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise EmbeddedProtocolError("truncated consumer protocol bytes")
        v = self.buf[self.pos : self.pos + n]
        self.pos += n
        return v

    def i16(self) -> int:
        value: int = _I16.unpack(self._take(2))[0]
        return value

    def i32(self) -> int:
        value: int = _I32.unpack(self._take(4))[0]
        return value

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        try:
            return str(self._take(n), "utf-8")
        except UnicodeDecodeError as exc:
            raise EmbeddedProtocolError(str(exc)) from exc

    def count(self) -> int:
        n = self.i32()
        return max(n, 0)  # a null array reads as empty

    def skip_bytes(self) -> None:
        n = self.i32()
        if n > 0:
            self._take(n)

    def at_end(self) -> bool:
        return self.pos >= len(self.buf)

    def partitions(self) -> dict[str, frozenset[int]]:
        out: dict[str, frozenset[int]] = {}
        for _ in range(self.count()):
            topic = self.string() or ""
            ps = frozenset(self.i32() for _ in range(self.count()))
            out[topic] = out.get(topic, frozenset()) | ps
        return out


def version(data: bytes) -> int:
    """The version the bytes start with (Kafka's ``ConsumerProtocol.deserializeVersion``)."""
    v = _Reader(data).i16()
    if v < 0:
        raise EmbeddedProtocolError(f"negative consumer protocol version {v}")
    return v


def decode_subscription(data: bytes) -> Subscription:
    r = _Reader(data)
    v = r.i16()
    if v < 0:
        raise EmbeddedProtocolError(f"negative subscription version {v}")
    topics = tuple(r.string() or "" for _ in range(r.count()))
    r.skip_bytes()
    owned: dict[str, frozenset[int]] = {}
    rack: str | None = None
    if v >= 1 and not r.at_end():
        owned = r.partitions()
    if v >= 2 and not r.at_end():
        r.i32()  # generation id
    if v >= 3 and not r.at_end():
        rack = r.string()
    return Subscription(v, topics, owned, rack)


def decode_assignment(data: bytes) -> dict[str, frozenset[int]]:
    """A member's assigned partitions by topic name; empty bytes (a member that never got
    an assignment) are no partitions."""
    if not data:
        return {}
    r = _Reader(data)
    if r.i16() < 0:
        raise EmbeddedProtocolError("negative assignment version")
    return r.partitions()


def encode_assignment(parts: Mapping[str, frozenset[int]], subscription_version: int) -> bytes:
    """An assignment in the member's own version (that of its subscription, at most 3);
    no user data."""
    v = min(max(subscription_version, 0), MAX_ASSIGNMENT_VERSION)
    out = bytearray(_I16.pack(v))
    topics = sorted((t, ps) for t, ps in parts.items() if ps)
    out += _I32.pack(len(topics))
    for topic, ps in topics:
        raw = topic.encode()
        out += _I16.pack(len(raw)) + raw
        out += _I32.pack(len(ps))
        for p in sorted(ps):
            out += _I32.pack(p)
    out += _I32.pack(-1)  # null user data
    return bytes(out)


def encode_subscription(
    topics: tuple[str, ...],
    owned: Mapping[str, frozenset[int]] | None = None,
    *,
    subscription_version: int = 1,
    rack_id: str | None = None,
) -> bytes:
    """A subscription (for tests and tools): v0 topics only, v1 owned partitions, v2 a
    generation of -1, v3 the rack."""
    v = subscription_version
    out = bytearray(_I16.pack(v))
    out += _I32.pack(len(topics))
    for t in topics:
        raw = t.encode()
        out += _I16.pack(len(raw)) + raw
    out += _I32.pack(-1)  # null user data
    if v >= 1:
        items = sorted((owned or {}).items())
        out += _I32.pack(len(items))
        for topic, ps in items:
            raw = topic.encode()
            out += _I16.pack(len(raw)) + raw
            out += _I32.pack(len(ps))
            for p in sorted(ps):
                out += _I32.pack(p)
    if v >= 2:
        out += _I32.pack(-1)
    if v >= 3:
        if rack_id is None:
            out += _I16.pack(-1)
        else:
            raw = rack_id.encode()
            out += _I16.pack(len(raw)) + raw
    return bytes(out)
