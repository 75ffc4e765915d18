"""Batch payload codecs, by the attribute id Kafka puts in the low 3 bits.

Wire formats are what the Java client writes, so every client can read ours:
gzip is a gzip stream, lz4 an LZ4 *frame* with independent blocks (Java's
reader rejects linked blocks), zstd a standard frame, and snappy the xerial
block framing of snappy-java's SnappyOutputStream. Decompression also takes
raw snappy, which librdkafka produces.
"""

from __future__ import annotations

import struct
from enum import IntEnum

import cramjam

from .batch import CorruptRecordError

Buf = bytes | bytearray | memoryview


class CompressionType(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class UnsupportedCompressionError(CorruptRecordError):
    """Unknown codec id (Kafka: UNSUPPORTED_COMPRESSION_TYPE, else CORRUPT_MESSAGE)."""


XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, min compatible 1
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default, which Kafka keeps
_I32 = struct.Struct(">i")

_ZSTD_LEVEL = 3  # zstd's (and Kafka's) default; cramjam's own default is much slower


def _snappy_compress(data: Buf) -> bytes:
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER)
    for i in range(0, len(view), _XERIAL_BLOCK):
        block = cramjam.snappy.compress_raw(view[i : i + _XERIAL_BLOCK])
        out += _I32.pack(len(block))
        out += block
    return bytes(out)


def _snappy_decompress(data: Buf) -> bytes:
    view = memoryview(data)
    if view[:8] != XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    if len(view) < 16:
        raise CorruptRecordError("truncated xerial snappy header")
    out = bytearray()
    pos, end = 16, len(view)
    while pos < end:
        # snappy-java also reads concatenated streams, each with its own header
        if view[pos : pos + 8] == XERIAL_MAGIC:
            pos += 16
            continue
        if end - pos < 4:
            raise CorruptRecordError("truncated xerial snappy block length")
        (size,) = _I32.unpack_from(view, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise CorruptRecordError("bad xerial snappy block length")
        out += cramjam.snappy.decompress_raw(view[pos : pos + size])
        pos += size
    return bytes(out)


def _lz4_compress(data: Buf) -> bytes:
    c = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
    c.compress(data if isinstance(data, bytes) else bytes(data))  # it takes bytes only
    return bytes(c.finish())


def compress(codec: int, data: Buf) -> bytes:
    if codec == CompressionType.NONE:
        return bytes(data)
    if codec == CompressionType.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == CompressionType.SNAPPY:
        return _snappy_compress(data)
    if codec == CompressionType.LZ4:
        return _lz4_compress(data)
    if codec == CompressionType.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=_ZSTD_LEVEL))
    raise UnsupportedCompressionError(f"unknown compression type id {codec}")


def decompress(codec: int, data: Buf) -> bytes:
    """Inflate a batch payload; garbage raises CorruptRecordError."""
    try:
        if codec == CompressionType.NONE:
            return bytes(data)
        if codec == CompressionType.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == CompressionType.SNAPPY:
            return _snappy_decompress(data)
        if codec == CompressionType.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == CompressionType.ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"cannot decompress {CompressionType(codec).name}: {exc}") from exc
    raise UnsupportedCompressionError(f"unknown compression type id {codec}")
