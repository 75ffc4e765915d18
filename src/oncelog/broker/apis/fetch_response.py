"""The Fetch response, encoded by hand around the record ranges it serves.

Why by hand: kio encodes ``records`` by copying them into its output buffer, and the
frame is copied again on the way out; at hundreds of MB/s those copies (and reading
the ranges into ``bytes`` first) were most of the broker's CPU per GB fetched. Here the
headers of every version the broker serves (4-17) are packed with ``struct`` into small
``bytes``, and each partition's records stay a ``FileRange`` of its segment file, which
the connection sends with ``os.sendfile`` (``FrameProtocol.send``).

``kio_response`` builds the same response as kio dataclasses: the straightforward path,
used for any version outside ``HAND_BUILT`` and, in the tests, as the reference the
hand-built bytes must equal.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.fetch_sessions import PartitionKey
from oncelog.protocol.messages import encode_response, make, response_module
from oncelog.protocol.response_frame import EncodesItself, FileRange, Part, ResponseFrame
from oncelog.records.varint import encode_uvarint

FETCH = 1
HAND_BUILT = range(4, 18)  # the versions ``_encode`` knows; others go through kio
FLEXIBLE_VERSION = 12  # compact arrays/strings and tagged fields from here
TOPIC_IDS_VERSION = 13

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_SIZE_AND_ID = struct.Struct(">ii")
_TOP = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id (v7+)
_PARTITION = struct.Struct(">ihqqq")  # index, error, high watermark, LSO, log start
_PARTITION_V4 = struct.Struct(">ihqq")  # no log start offset before v5
_ABORTED = struct.Struct(">qq")  # producer_id, first_offset
_NO_TAGS = b"\x00"


@dataclass(slots=True)
class PartitionResult:
    """One partition's answer: offsets, the aborted list (read_committed) and records."""

    key: PartitionKey
    error_code: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileRange | None = None
    aborted: tuple[tuple[int, int], ...] | None = None

    @property
    def size(self) -> int:
        return 0 if self.records is None else self.records.length


@dataclass(slots=True)
class TopicResults:
    ref: str | uuid.UUID  # the name up to v12, the topic id from v13
    partitions: list[PartitionResult]


@dataclass(slots=True)
class FetchAnswer(EncodesItself):
    """A Fetch handler's answer; the connection encodes it with ``frame``.

    ``error_code`` and ``responses`` (topics with ``partitions`` carrying
    ``error_code``) have the shape of kio's response, for the request metrics."""

    version: int
    error_code: ErrorCode
    session_id: int
    responses: list[TopicResults]

    def frame(self, correlation_id: int) -> ResponseFrame:
        if self.version in HAND_BUILT:
            return ResponseFrame(_encode(self, correlation_id))
        try:
            response = kio_response(self)
        finally:
            self.close()
        return ResponseFrame([encode_response(FETCH, self.version, correlation_id, response)])

    def close(self) -> None:
        for topic in self.responses:
            for p in topic.partitions:
                if p.records is not None:
                    p.records.close()


def kio_response(answer: FetchAnswer) -> Any:
    """The answer as kio's FetchResponse of its version (records read into bytes)."""
    r = response_module(FETCH, answer.version)
    return make(
        r.FetchResponse,
        error_code=answer.error_code,
        session_id=answer.session_id,
        responses=tuple(
            make(
                r.FetchableTopicResponse,
                topic=t.ref,
                topic_id=t.ref,
                partitions=tuple(
                    make(
                        r.PartitionData,
                        partition_index=p.key[1],
                        error_code=p.error_code,
                        high_watermark=p.high_watermark,
                        last_stable_offset=p.last_stable_offset,
                        log_start_offset=p.log_start_offset,
                        aborted_transactions=None
                        if p.aborted is None
                        else tuple(
                            make(r.AbortedTransaction, producer_id=pid, first_offset=first)
                            for pid, first in p.aborted
                        ),
                        preferred_read_replica=-1,
                        records=b"" if p.records is None else p.records.read(),
                    )
                    for p in t.partitions
                ),
            )
            for t in answer.responses
        ),
    )


def _array_length(n: int, flexible: bool) -> bytes:
    return encode_uvarint(n + 1) if flexible else _I32.pack(n)


def _encode(answer: FetchAnswer, correlation_id: int) -> list[Part]:
    """Frame parts: the size prefix, header and body as bytes, records as ranges."""
    v = answer.version
    flexible = v >= FLEXIBLE_VERSION
    parts: list[Part] = []
    head = bytearray()
    if v >= 7:
        head += _TOP.pack(0, answer.error_code, answer.session_id)
    else:
        head += _I32.pack(0)
    head += _array_length(len(answer.responses), flexible)
    for topic in answer.responses:
        head += _topic_ref(topic.ref, v)
        head += _array_length(len(topic.partitions), flexible)
        for p in topic.partitions:
            if v >= 5:
                head += _PARTITION.pack(
                    p.key[1],
                    p.error_code,
                    p.high_watermark,
                    p.last_stable_offset,
                    p.log_start_offset,
                )
            else:
                head += _PARTITION_V4.pack(
                    p.key[1], p.error_code, p.high_watermark, p.last_stable_offset
                )
            _aborted(head, p.aborted, flexible)
            if v >= 11:
                head += _I32.pack(-1)  # preferred_read_replica
            size = p.size
            head += encode_uvarint(size + 1) if flexible else _I32.pack(size)
            if p.records is not None and size:
                parts.append(bytes(head))
                parts.append(p.records)
                head = bytearray()
            if flexible:
                head += _NO_TAGS  # partition
        if flexible:
            head += _NO_TAGS  # topic
    if flexible:
        head += _NO_TAGS  # response
    parts.append(bytes(head))
    header_size = 5 if flexible else 4  # correlation id (+ no tags: response header v1)
    body = sum(len(x) if isinstance(x, bytes) else x.length for x in parts)
    prefix = _SIZE_AND_ID.pack(header_size + body, correlation_id)
    first = parts[0]
    assert isinstance(first, bytes)  # the body begins with headers, never records
    parts[0] = prefix + (_NO_TAGS if flexible else b"") + first
    return parts


def _topic_ref(ref: str | uuid.UUID, version: int) -> bytes:
    if version >= TOPIC_IDS_VERSION:
        assert isinstance(ref, uuid.UUID)
        return ref.bytes
    assert isinstance(ref, str)
    name = ref.encode()
    if version >= FLEXIBLE_VERSION:
        return encode_uvarint(len(name) + 1) + name
    return _I16.pack(len(name)) + name


def _aborted(head: bytearray, aborted: Sequence[tuple[int, int]] | None, flexible: bool) -> None:
    if aborted is None:
        head += b"\x00" if flexible else _I32.pack(-1)
        return
    head += _array_length(len(aborted), flexible)
    for pid, first in aborted:
        head += _ABORTED.pack(pid, first)
        if flexible:
            head += _NO_TAGS
