"""Structural check of a request frame before kio's native decoder sees it.

kio's Rust decoder preallocates arrays from the length prefix, so a forged
count (say 2**32) aborts the whole broker process with a failed allocation.
This walker follows the same schema, only reading length prefixes and
skipping bytes, and rejects any length or count that exceeds what is left in
the frame. Walkers are compiled once per schema into closures.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from functools import cache
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)


class FrameShapeError(Exception):
    pass


Frame = bytes | bytearray | memoryview
Walker = Callable[[Frame, int], int]
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_FIXED = {
    "int8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}  # fmt: skip


def _uvarint(buf: Frame, pos: int) -> tuple[int, int]:
    value = shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise FrameShapeError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise FrameShapeError("varint too long")


def _need(buf: Frame, pos: int, n: int) -> int:
    end = pos + n
    if n < 0 or end > len(buf):
        raise FrameShapeError(f"length {n} exceeds the {len(buf) - pos} bytes left")
    return end


def _fixed(n: int) -> Walker:
    return lambda buf, pos: _need(buf, pos, n)


def _varint(buf: Frame, pos: int) -> int:
    return _uvarint(buf, pos)[1]


def _compact_bytes(buf: Frame, pos: int) -> int:
    n, pos = _uvarint(buf, pos)
    return pos if n == 0 else _need(buf, pos, n - 1)


def _legacy_string(buf: Frame, pos: int) -> int:
    _need(buf, pos, 2)
    (n,) = _I16.unpack_from(buf, pos)
    return pos + 2 if n < 0 else _need(buf, pos + 2, n)


def _legacy_bytes(buf: Frame, pos: int) -> int:
    _need(buf, pos, 4)
    (n,) = _I32.unpack_from(buf, pos)
    return pos + 4 if n < 0 else _need(buf, pos + 4, n)


def _primitive(kafka_type: str, flexible: bool) -> Walker:
    if kafka_type in _FIXED:
        return _fixed(_FIXED[kafka_type])
    if kafka_type in ("varint", "varlong", "uvarint", "uvarlong"):
        return _varint
    if kafka_type in ("string", "bytes", "records"):
        if flexible:
            return _compact_bytes
        return _legacy_string if kafka_type == "string" else _legacy_bytes
    raise TypeError(f"unknown kafka type {kafka_type}")


def _array(item: Walker, flexible: bool) -> Walker:
    def walk(buf: Frame, pos: int) -> int:
        if flexible:
            n, pos = _uvarint(buf, pos)
            n -= 1
        else:
            _need(buf, pos, 4)
            (n,) = _I32.unpack_from(buf, pos)
            pos += 4
        if n > len(buf) - pos:  # every element takes at least one byte
            raise FrameShapeError(f"array of {n} elements in {len(buf) - pos} bytes")
        for _ in range(n):
            pos = item(buf, pos)
        return pos

    return walk


def _tagged_section(buf: Frame, pos: int) -> int:
    count, pos = _uvarint(buf, pos)
    if count > len(buf) - pos:
        raise FrameShapeError("too many tagged fields")
    for _ in range(count):
        _, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        pos = _need(buf, pos, size)
    return pos


@cache
def entity_walker(cls: type, *, is_header: bool = False) -> Walker:
    flexible = bool(getattr(cls, "__flexible__", False))
    steps: list[Walker] = []
    for f in dataclasses.fields(cls):
        if "tag" in f.metadata:
            continue  # lives in the tagged section, bounded by its size prefix
        if is_header and f.name == "client_id":
            steps.append(_legacy_string)  # Kafka keeps this legacy in every header version
            continue
        kind = classify_field(f)
        if isinstance(kind, EntityTupleField):
            steps.append(_array(entity_walker(kind.type_), flexible))
        elif isinstance(kind, EntityField):
            inner = entity_walker(kind.type_)
            steps.append(_nullable_entity(inner) if is_optional(f) else inner)
        elif isinstance(kind, PrimitiveTupleField):
            steps.append(_array(_primitive(f.metadata["kafka_type"], flexible), flexible))
        else:
            steps.append(_primitive(f.metadata["kafka_type"], flexible))
    if flexible:
        steps.append(_tagged_section)

    def walk(buf: Frame, pos: int) -> int:
        for step in steps:
            pos = step(buf, pos)
        return pos

    return walk


def _nullable_entity(inner: Walker) -> Walker:
    def walk(buf: Frame, pos: int) -> int:
        _need(buf, pos, 1)
        return pos + 1 if buf[pos] == 0xFF else inner(buf, pos + 1)

    return walk


def check_request(header_cls: Any, body_cls: Any, frame: Frame) -> None:
    """Raise FrameShapeError unless header and body fit in ``frame``.

    Trailing bytes are tolerated, as Kafka does: librdkafka's Metadata v12
    carries a stray field and a tag after the body.
    """
    pos = entity_walker(header_cls, is_header=True)(frame, 0)
    entity_walker(body_cls)(frame, pos)
