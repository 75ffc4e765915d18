"""One record inside a v2 batch.

length varint | attributes i8 (unused, 0) | timestampDelta varlong
offsetDelta varint | keyLength varint (-1 = null) | key
valueLength varint (-1 = null) | value | headerCount varint
headers: keyLength varint | key utf8 | valueLength varint (-1 = null) | value
"""

from __future__ import annotations

from dataclasses import dataclass

from .batch import CorruptRecordError
from .varint import decode_varint, decode_varlong, write_varint, write_varlong

Buf = bytes | bytearray | memoryview
Header = tuple[str, bytes | None]

# Java decodes header keys leniently (bad UTF-8 becomes U+FFFD) and so accepts
# any bytes; surrogateescape accepts them too and re-encodes them unchanged.
_KEY_ERRORS = "surrogateescape"


@dataclass(slots=True, frozen=True)
class Record:
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()

    def write(self, out: bytearray) -> None:
        """Append the encoded record (with its length prefix) to ``out``."""
        body = bytearray(b"\x00")  # attributes
        write_varlong(body, self.timestamp_delta)
        write_varint(body, self.offset_delta)
        _write_bytes(body, self.key)
        _write_bytes(body, self.value)
        write_varint(body, len(self.headers))
        for hkey, hvalue in self.headers:
            _write_bytes(body, hkey.encode("utf-8", _KEY_ERRORS))
            _write_bytes(body, hvalue)
        write_varint(out, len(body))
        out += body

    def encode(self) -> bytes:
        out = bytearray()
        self.write(out)
        return bytes(out)

    @classmethod
    def decode(cls, buf: Buf, pos: int = 0) -> tuple[Record, int]:
        """Decode the record at ``pos``; returns it and the position after it."""
        offset_delta, timestamp_delta, key, value, headers, end = decode_fields(buf, pos)
        return cls(offset_delta, timestamp_delta, key, value, headers), end


def decode_fields(
    buf: Buf, pos: int
) -> tuple[int, int, bytes | None, bytes | None, tuple[Header, ...], int]:
    """(offset_delta, timestamp_delta, key, value, headers, next_pos) of one record.

    Tuple-returning so batch decoding builds one object per record, not two.
    """
    length, pos = decode_varint(buf, pos)
    end = pos + length
    if length < 1 or end > len(buf):
        raise CorruptRecordError(f"record length {length} exceeds the data")
    pos += 1  # attributes: unused in v2
    timestamp_delta, pos = decode_varlong(buf, pos)
    offset_delta, pos = decode_varint(buf, pos)
    key, pos = _read_bytes(buf, pos, end)
    value, pos = _read_bytes(buf, pos, end)
    count, pos = decode_varint(buf, pos)
    headers: tuple[Header, ...] = ()
    if count:
        if count < 0:
            raise CorruptRecordError(f"negative record header count {count}")
        items: list[Header] = []
        for _ in range(count):
            hkey, pos = _read_bytes(buf, pos, end)
            if hkey is None:
                raise CorruptRecordError("null record header key")
            hvalue, pos = _read_bytes(buf, pos, end)
            items.append((hkey.decode("utf-8", _KEY_ERRORS), hvalue))
        headers = tuple(items)
    if pos != end:
        raise CorruptRecordError(f"record length {length} does not match its fields")
    return offset_delta, timestamp_delta, key, value, headers, end


@dataclass(slots=True, frozen=True)
class DecodedRecord:
    """A record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out.append(1)  # zigzag(-1)
    else:
        write_varint(out, len(data))
        out += data


def _read_bytes(buf: Buf, pos: int, end: int) -> tuple[bytes | None, int]:
    size, pos = decode_varint(buf, pos)
    if size < 0:
        return None, pos
    if pos + size > end:
        raise CorruptRecordError("record field runs past the record")
    return bytes(buf[pos : pos + size]), pos + size
