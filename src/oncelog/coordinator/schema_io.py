"""Kafka's generated-message encoding, as the internal topics' records use it.

Records of ``__consumer_offsets`` and ``__transaction_state`` are Kafka "data" messages
written with ``MessageUtil.toVersionPrefixedBytes``: an ``i16`` version, then the fields of
that version. Non-flexible versions use ``i16``-length strings and ``i32``-length bytes and
arrays; flexible versions use compact forms (unsigned varint length + 1, 0 = null) and end
every struct with tagged fields (``uvarint count | per field: uvarint tag | uvarint size |
data``, in increasing tag order).

The reader is strict (short buffers, bad UTF-8, nulls where none are allowed and trailing
bytes raise the caller's error type), so a record of another layout never half-decodes.
"""

from __future__ import annotations

import struct
import uuid

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

# Tags oncelog adds to Kafka's schemas for state Kafka keeps elsewhere or not at all. Kafka
# allocates its own tags from 0 upwards, so ours start far above them.
ONCELOG_TAG_BASE = 10_000


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class SchemaWriter:
    __slots__ = ("buf",)

    def __init__(self, version: int) -> None:
        self.buf = bytearray(_I16.pack(version))

    def i8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def i16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def i32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def i64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def string(self, s: str | None) -> None:
        """``i16 length | utf-8`` (length -1 = null)."""
        if s is None:
            self.buf += _I16.pack(-1)
            return
        data = s.encode("utf-8")
        if len(data) > 0x7FFF:
            raise ValueError(f"string of {len(data)} bytes is longer than Kafka's 32767")
        self.buf += _I16.pack(len(data))
        self.buf += data

    def bytes_(self, b: bytes) -> None:
        self.buf += _I32.pack(len(b))
        self.buf += b

    def compact_string(self, s: str | None) -> None:
        if s is None:
            self.buf += b"\x00"
            return
        data = s.encode("utf-8")
        self.buf += uvarint(len(data) + 1)
        self.buf += data

    def compact_bytes(self, b: bytes) -> None:
        self.buf += uvarint(len(b) + 1)
        self.buf += b

    def compact_length(self, n: int | None) -> None:
        """The length of a compact array (``None``: a null array)."""
        self.buf += uvarint(0 if n is None else n + 1)

    def uuid(self, u: uuid.UUID) -> None:
        self.buf += u.bytes

    def tagged(self, fields: dict[int, bytes]) -> None:
        self.buf += uvarint(len(fields))
        for tag in sorted(fields):
            self.buf += uvarint(tag)
            self.buf += uvarint(len(fields[tag]))
            self.buf += fields[tag]

    def done(self) -> bytes:
        return bytes(self.buf)


class SchemaReader:
    """Reads one record; every failure raises ``error`` (the caller's codec error type)."""

    __slots__ = ("buf", "error", "pos")

    def __init__(self, data: bytes, error: type[ValueError]) -> None:
        self.buf = memoryview(data)
        self.pos = 0
        self.error = error

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise self.error("record truncated")
        v = self.buf[self.pos : self.pos + n]
        self.pos += n
        return v

    def _unpack(self, s: struct.Struct) -> int:
        value: int = s.unpack(self.take(s.size))[0]
        return value

    def i8(self) -> int:
        return self._unpack(_I8)

    def i16(self) -> int:
        return self._unpack(_I16)

    def u16(self) -> int:
        return self._unpack(_U16)

    def i32(self) -> int:
        return self._unpack(_I32)

    def i64(self) -> int:
        return self._unpack(_I64)

    def uvarint(self) -> int:
        n = shift = 0
        while True:
            (b,) = self.take(1)
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7
            if shift > 28:
                raise self.error("varint longer than 5 bytes")

    def text(self, n: int) -> str:
        """``n`` bytes of UTF-8."""
        try:
            return str(self.take(n), "utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(f"invalid utf-8: {exc}") from exc

    def nullable_string(self) -> str | None:
        n = self.i16()
        return None if n == -1 else self.text(n)

    def string(self) -> str:
        return self._required(self.nullable_string())

    def bytes_(self) -> bytes:
        n = self.i32()
        if n < 0:
            raise self.error("null where bytes are required")
        return bytes(self.take(n))

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self.text(n - 1)

    def compact_string(self) -> str:
        return self._required(self.compact_nullable_string())

    def compact_bytes(self) -> bytes:
        n = self.uvarint()
        if n == 0:
            raise self.error("null where bytes are required")
        return bytes(self.take(n - 1))

    def array_length(self) -> int | None:
        """An ``i32`` array length (``None``: null)."""
        n = self.i32()
        if n < -1:
            raise self.error(f"negative array length {n}")
        return None if n == -1 else n

    def compact_length(self) -> int | None:
        n = self.uvarint()
        return None if n == 0 else n - 1

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self.take(16)))

    def tagged(self) -> dict[int, memoryview]:
        """A struct's tagged fields, by tag (unknown ones are the caller's to ignore)."""
        fields: dict[int, memoryview] = {}
        last = -1
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            if tag <= last:
                raise self.error(f"tagged field {tag} out of order")
            last = tag
            fields[tag] = self.take(self.uvarint())
        return fields

    def tagged_i64(self, fields: dict[int, memoryview], tag: int, default: int) -> int:
        raw = fields.get(tag)
        if raw is None:
            return default
        if len(raw) != _I64.size:
            raise self.error(f"tagged field {tag} is not an int64")
        value: int = _I64.unpack(raw)[0]
        return value

    def tagged_i16(self, fields: dict[int, memoryview], tag: int, default: int) -> int:
        raw = fields.get(tag)
        if raw is None:
            return default
        if len(raw) != _I16.size:
            raise self.error(f"tagged field {tag} is not an int16")
        value: int = _I16.unpack(raw)[0]
        return value

    def done(self) -> None:
        if self.pos != len(self.buf):
            raise self.error(f"{len(self.buf) - self.pos} trailing bytes")

    def _required(self, s: str | None) -> str:
        if s is None:
            raise self.error("null where a string is required")
        return s


def pack_i64(v: int) -> bytes:
    return _I64.pack(v)


def pack_i16(v: int) -> bytes:
    return _I16.pack(v)
