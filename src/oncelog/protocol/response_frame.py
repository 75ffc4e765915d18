"""A response frame made of bytes and file ranges, sent without copying the ranges.

A Fetch response is mostly record bytes that already sit in segment files. Encoding
them through kio copies every byte twice (into the encoder's buffer, then out of it),
and reading them copies once more; a ``ResponseFrame`` instead keeps the encoded
headers as small ``bytes`` and each record range as a ``FileRange``, which the
connection sends with ``os.sendfile`` (see ``FrameProtocol.send``) or, on TLS, reads
just before writing it.

A ``FileRange`` owns a duplicate of the segment's file descriptor: the segment may be
deleted (retention, compaction swap) and its descriptor closed, or even reused for
another file, while the response waits behind earlier ones; the duplicate keeps the
original file readable until the range is sent or dropped.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterable

from oncelog.pread import pread_exact


class FileRange:
    """``length`` bytes at ``position`` of a file, via a descriptor this object owns."""

    __slots__ = ("fd", "position", "length")

    def __init__(self, fd: int, position: int, length: int) -> None:
        self.fd = os.dup(fd)
        self.position = position
        self.length = length

    def read(self) -> bytes:
        return pread_exact(self.fd, self.position, self.length)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:  # a response dropped unsent (its connection closed)
        self.close()


Part = bytes | FileRange


class ResponseFrame:
    """A whole size-prefixed response frame: ``parts`` in order, ``size`` bytes in all."""

    __slots__ = ("parts", "size")

    def __init__(self, parts: list[Part]) -> None:
        self.parts = parts
        self.size = sum(len(p) if isinstance(p, bytes) else p.length for p in parts)

    def ranges(self) -> Iterable[FileRange]:
        return (p for p in self.parts if isinstance(p, FileRange))

    def to_bytes(self) -> bytes:
        """The frame in one piece (tests, and the copying fallback)."""
        return b"".join(p if isinstance(p, bytes) else p.read() for p in self.parts)

    def close(self) -> None:
        for r in self.ranges():
            r.close()


class EncodesItself(ABC):
    """A handler's answer that encodes its own frame (instead of a kio response)."""

    __slots__ = ()

    @abstractmethod
    def frame(self, correlation_id: int) -> ResponseFrame:
        """The size-prefixed response frame; the answer's file ranges move into it."""

    @abstractmethod
    def close(self) -> None:
        """Release the file ranges of an answer that will never be sent."""
