"""Produce requests and responses coded by hand for the shapes clients send (v3-v10).

Why: a Produce frame is almost all record bytes. kio's decoder copies each partition's
records into a ``bytes`` object, and its encoder builds the response from dataclasses:
at ~1 MB per request that copy and the writer's second one, with the page faults of
their fresh buffers, were about half of the broker's CPU per GB. Here the
request envelope is walked with ``struct`` and each partition's records stay a
``memoryview`` into the received frame, writable when the frame is a ``bytearray``, so
the log can assign offsets in place and ``pwrite`` the very bytes that came off the
socket.

Only the plain shapes are taken: every length in bounds, valid UTF-8, no null topic or
records, no tagged fields. Anything else returns ``None`` and the caller decodes with
kio, which gives malformed and odd frames exactly the answer they had before. The
Hypothesis tests in ``tests/unit/test_produce_wire.py`` hold both paths equal on random
requests and random corruptions of them.
"""

from __future__ import annotations

import datetime
import struct
from collections.abc import Sequence

from oncelog.protocol.api_keys import ApiKey
from oncelog.records.varint import write_uvarint

FIRST_FLEXIBLE = 9  # Produce v9 (KIP-482): compact strings/arrays and tagged fields
# v11 and v12 (KIP-890) have v10's layout; only what the broker does differs
MIN_VERSION, MAX_VERSION = 3, 12

_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_I32_PAIR = struct.Struct(">ii")


class _Odd(Exception):
    """The frame leaves the common shape: let kio decode it."""


class ProducePartition:
    """One partition's data, named as kio names it (``index``, ``records``)."""

    __slots__ = ("index", "records")

    def __init__(self, index: int, records: memoryview) -> None:
        self.index = index
        self.records = records


class ProduceTopic:
    __slots__ = ("name", "partition_data")

    def __init__(self, name: str, partition_data: tuple[ProducePartition, ...]) -> None:
        self.name = name
        self.partition_data = partition_data


class ProduceRequestView:
    """What the Produce handler reads of a request, as kio's ProduceRequest names it."""

    __slots__ = ("acks", "timeout_ms", "topic_data", "transactional_id")

    def __init__(
        self,
        transactional_id: str | None,
        acks: int,
        timeout_ms: int,
        topic_data: tuple[ProduceTopic, ...],
    ) -> None:
        self.transactional_id = transactional_id
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.topic_data = topic_data

    @property
    def timeout(self) -> datetime.timedelta:
        return datetime.timedelta(milliseconds=self.timeout_ms)


def decode_produce(
    frame: bytes | bytearray | memoryview,
) -> tuple[int, str | None, ProduceRequestView] | None:
    """(correlation id, client id, request) of a Produce v3-v10 frame in the common shape,
    or None: then decode it with kio."""
    view = memoryview(frame)
    try:
        return _decode(view)
    except (_Odd, struct.error, UnicodeDecodeError):
        return None


def _decode(view: memoryview) -> tuple[int, str | None, ProduceRequestView]:
    end = len(view)
    if end < _HEADER.size:
        raise _Odd
    api_key, version, correlation_id, n = _HEADER.unpack_from(view, 0)
    if api_key != ApiKey.PRODUCE or not MIN_VERSION <= version <= MAX_VERSION:
        raise _Odd
    pos = _HEADER.size
    client_id: str | None = None
    if n >= 0:  # the header's client id stays a legacy string in every version
        client_id, pos = _text(view, pos, n, end)
    elif n != -1:
        raise _Odd
    flexible = version >= FIRST_FLEXIBLE
    if flexible:
        pos = _no_tags(view, pos, end)
        n, pos = _uvarint(view, pos, end)
        n -= 1  # compact: 0 is null
    else:
        (n,) = _I16.unpack_from(view, pos)
        pos += 2
    transactional_id: str | None = None
    if n >= 0:
        transactional_id, pos = _text(view, pos, n, end)
    elif n != -1:
        raise _Odd
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(view, pos)
    pos += _ACKS_TIMEOUT.size
    count, pos = _count(view, pos, end, flexible)
    topics = []
    for _ in range(count):
        if flexible:
            n, pos = _uvarint(view, pos, end)
            n -= 1
        else:
            (n,) = _I16.unpack_from(view, pos)
            pos += 2
        if n < 0:
            raise _Odd  # a null topic name: kio's path answers INVALID_REQUEST
        name, pos = _text(view, pos, n, end)
        parts_count, pos = _count(view, pos, end, flexible)
        parts = []
        for _ in range(parts_count):
            if flexible:
                (index,) = _I32.unpack_from(view, pos)
                size, pos = _uvarint(view, pos + 4, end)
                size -= 1
            else:
                index, size = _I32_PAIR.unpack_from(view, pos)
                pos += 8
            if size < 0 or pos + size > end:
                raise _Odd  # null records (the handler's INVALID_RECORD) or out of bounds
            parts.append(ProducePartition(index, view[pos : pos + size]))
            pos += size
            if flexible:
                pos = _no_tags(view, pos, end)
        topics.append(ProduceTopic(name, tuple(parts)))
        if flexible:
            pos = _no_tags(view, pos, end)
    if flexible:
        _no_tags(view, pos, end)
    # Trailing bytes after the body are tolerated, as on kio's path.
    return (
        correlation_id,
        client_id,
        ProduceRequestView(transactional_id, acks, timeout_ms, tuple(topics)),
    )


def _text(view: memoryview, pos: int, n: int, end: int) -> tuple[str, int]:
    stop = pos + n
    if stop > end:
        raise _Odd
    return str(view[pos:stop], "utf-8"), stop


def _uvarint(view: memoryview, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 28:
            raise _Odd
        b = view[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _count(view: memoryview, pos: int, end: int, flexible: bool) -> tuple[int, int]:
    if flexible:
        n, pos = _uvarint(view, pos, end)
        n -= 1
    else:
        (n,) = _I32.unpack_from(view, pos)
        pos += 4
    if n < 0 or n > end - pos:  # null, or more entries than bytes left
        raise _Odd
    return n, pos


def _no_tags(view: memoryview, pos: int, end: int) -> int:
    if pos >= end or view[pos] != 0:
        raise _Odd  # tagged fields: kio knows which ones exist
    return pos + 1


# -- responses -------------------------------------------------------------------------


class EncodedResponse:
    """A response body encoded already; ``encode_response`` adds the size and header.
    It carries no error (only all-success answers take this path), so request metrics
    find none in it."""

    __slots__ = ("body", "flexible")

    def __init__(self, body: bytes, flexible: bool) -> None:
        self.body = body
        self.flexible = flexible

    def frame(self, correlation_id: int) -> bytes:
        header = _I32_PAIR.pack(len(self.body) + (5 if self.flexible else 4), correlation_id)
        return header + b"\x00" + self.body if self.flexible else header + self.body


PartitionResult = tuple[int, int, int, int]  # index, base offset, log append time, log start


def encode_produce_success(
    version: int, topics: Sequence[tuple[str, Sequence[PartitionResult]]]
) -> EncodedResponse:
    """The ProduceResponse body for partitions that all succeeded (error code 0, no
    record errors, no message, no throttle), as kio would encode it."""
    flexible = version >= FIRST_FLEXIBLE
    out = bytearray()
    put_count(out, len(topics), flexible)
    for name, parts in topics:
        put_string(out, name, flexible)
        put_count(out, len(parts), flexible)
        for index, base_offset, log_append_time, log_start_offset in parts:
            out += _PARTITION.pack(index, 0, base_offset, log_append_time)
            if version >= 5:
                out += _I64.pack(log_start_offset)
            if version >= 8:
                # record_errors: empty array; error_message: null
                out += b"\x01\x00" if flexible else b"\x00\x00\x00\x00\xff\xff"
            if flexible:
                out += b"\x00"
        if flexible:
            out += b"\x00"
    out += b"\x00\x00\x00\x00"  # throttle_time_ms
    if flexible:
        out += b"\x00"
    return EncodedResponse(bytes(out), flexible)


_PARTITION = struct.Struct(">ihqq")  # index, error code, base offset, log append time
_I64 = struct.Struct(">q")


def put_count(out: bytearray, n: int, flexible: bool) -> None:
    """An array length: compact (n + 1 as a varint) in flexible versions, else int32."""
    if flexible:
        write_uvarint(out, n + 1)
    else:
        out += _I32.pack(n)


def put_string(out: bytearray, text: str, flexible: bool) -> None:
    """A non-null string: compact length in flexible versions, else int16."""
    raw = text.encode()
    if flexible:
        write_uvarint(out, len(raw) + 1)
    else:
        out += _I16.pack(len(raw))
    out += raw
