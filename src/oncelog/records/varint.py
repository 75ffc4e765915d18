"""Protobuf-style varints as Kafka uses them.

Records use zigzag-encoded signed varints (32-bit) and varlongs (64-bit);
flexible protocol versions use unsigned varints. Decoders take ``(buf, pos)``
and return ``(value, next_pos)``; writers append to a caller's bytearray so a
whole record or batch is built in one buffer.
"""

from __future__ import annotations

from collections.abc import Callable

from .batch import CorruptRecordError

Buf = bytes | bytearray | memoryview

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_U32 = 0xFFFFFFFF
_U64 = 0xFFFFFFFFFFFFFFFF

# Every one-byte encoding, so the common small values need no new object.
_ONE_BYTE = [bytes((i,)) for i in range(0x80)]


def write_uvarint(out: bytearray, value: int) -> None:
    """Append an unsigned varint (value must already be non-negative)."""
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_varint(out: bytearray, value: int) -> None:
    """Append a zigzag varint of a signed 32-bit value."""
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    write_uvarint(out, ((value << 1) ^ (value >> 63)) & _U32)


def write_varlong(out: bytearray, value: int) -> None:
    """Append a zigzag varint of a signed 64-bit value."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    write_uvarint(out, ((value << 1) ^ (value >> 63)) & _U64)


def encode_uvarint(value: int) -> bytes:
    if value < 0 or value > _U32:
        raise ValueError(f"unsigned varint out of range: {value}")
    if value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    write_uvarint(out, value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    if -64 <= value < 64:
        return _ONE_BYTE[(value << 1) ^ (value >> 63)]
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


def encode_varlong(value: int) -> bytes:
    if -64 <= value < 64:
        return _ONE_BYTE[(value << 1) ^ (value >> 63)]
    out = bytearray()
    write_varlong(out, value)
    return bytes(out)


def _read_raw(buf: Buf, pos: int, max_bytes: int) -> tuple[int, int]:
    result = 0
    shift = 0
    end = pos + max_bytes
    try:
        while pos < end:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result, pos
            shift += 7
    except IndexError:
        raise CorruptRecordError("truncated varint") from None
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes")


# The decoders inline the 1- and 2-byte cases (nearly every length and delta in
# a record): a helper call costs more than the decoding itself.


def decode_uvarint(buf: Buf, pos: int = 0) -> tuple[int, int]:
    """Read an unsigned 32-bit varint (at most 5 bytes)."""
    try:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
        b2 = buf[pos + 1]
        if b2 < 0x80:
            return (b & 0x7F) | (b2 << 7), pos + 2
    except IndexError:
        raise CorruptRecordError("truncated varint") from None
    raw, pos = _read_raw(buf, pos, 5)
    return raw & _U32, pos


def _zigzag_decoder(
    name: str, max_bytes: int, mask: int, doc: str
) -> Callable[[Buf, int], tuple[int, int]]:
    """A zigzag decoder reading at most ``max_bytes`` and keeping the bits of ``mask``.

    A closure rather than a shared helper so the fast path stays one call deep.
    """

    def decode(buf: Buf, pos: int = 0) -> tuple[int, int]:
        try:
            b = buf[pos]
            if b < 0x80:
                return (b >> 1) ^ -(b & 1), pos + 1
            b2 = buf[pos + 1]
            if b2 < 0x80:
                raw = (b & 0x7F) | (b2 << 7)
                return (raw >> 1) ^ -(raw & 1), pos + 2
        except IndexError:
            raise CorruptRecordError("truncated varint") from None
        # Java keeps only the low bits of the last byte (32 of 35, 64 of 70); do the same.
        raw, pos = _read_raw(buf, pos, max_bytes)
        raw &= mask
        return (raw >> 1) ^ -(raw & 1), pos

    decode.__name__ = decode.__qualname__ = name
    decode.__doc__ = doc
    return decode


decode_varint = _zigzag_decoder(
    "decode_varint", 5, _U32, "Read a zigzag varint into a signed 32-bit value."
)
decode_varlong = _zigzag_decoder(
    "decode_varlong", 10, _U64, "Read a zigzag varint into a signed 64-bit value."
)


def size_of_uvarint(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)


def size_of_varint(value: int) -> int:
    return size_of_uvarint(((value << 1) ^ (value >> 63)) & _U32)


def size_of_varlong(value: int) -> int:
    return size_of_uvarint(((value << 1) ^ (value >> 63)) & _U64)
