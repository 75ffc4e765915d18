"""EndTxn and AddPartitionsToTxn responses coded by hand (the per-transaction answers).

Why: every transaction answers one or two AddPartitionsToTxn and one EndTxn, and each
response is a handful of bytes. Building it as a kio dataclass through ``make`` and
encoding it with kio's entity writer cost about as much broker CPU as the coordinator
work behind it (docs/perf-notes/transactions.md, "EndTxn latency"). Here the body is packed with
``struct``; ``encode_response`` adds the header as for Produce's hand-encoded answers.

The Hypothesis tests in ``tests/unit/test_txn_wire.py`` hold every version byte-equal to
kio's encoding. AddPartitionsToTxn v4+ (the batched form brokers send) still goes
through kio: clients do not send it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from kio.schema.errors import ErrorCode

from oncelog.protocol.produce_wire import EncodedResponse, put_count, put_string

END_TXN_FIRST_FLEXIBLE = 3
END_TXN_FIRST_IDENTITY = 5  # v5 (KIP-890 part 2) returns the next producer id and epoch
ADD_PARTITIONS_FIRST_FLEXIBLE = 3
ADD_PARTITIONS_LAST_UNBATCHED = 3

_THROTTLE_ERROR = struct.Struct(">ih")  # throttle_time_ms (always 0 here), error code
_IDENTITY = struct.Struct(">qh")  # producer id, producer epoch
_PARTITION = struct.Struct(">ih")  # partition index, error code


class SmallResponse(EncodedResponse):
    """A hand-encoded response that may carry a top-level error: request metrics read
    ``error_code`` as they read it on a kio response (None: the API has none)."""

    __slots__ = ("error_code",)

    def __init__(self, body: bytes, flexible: bool, error_code: ErrorCode | None) -> None:
        super().__init__(body, flexible)
        self.error_code = error_code


def encode_end_txn(
    version: int, error_code: ErrorCode, producer_id: int, producer_epoch: int
) -> SmallResponse:
    """The EndTxnResponse body (no throttle), as kio encodes it; v0-4 drop the identity."""
    flexible = version >= END_TXN_FIRST_FLEXIBLE
    body = _THROTTLE_ERROR.pack(0, error_code)
    if version >= END_TXN_FIRST_IDENTITY:
        body += _IDENTITY.pack(producer_id, producer_epoch)
    if flexible:
        body += b"\x00"
    return SmallResponse(body, flexible, error_code)


TopicResults = Sequence[tuple[str, Sequence[tuple[int, int]]]]  # name, (partition, error)


def encode_add_partitions_v3_and_below(version: int, topics: TopicResults) -> SmallResponse:
    """The AddPartitionsToTxnResponse body of v0-3 (``results_by_topic_v3_and_below``,
    no throttle), as kio encodes it. It has no top-level error code."""
    if not 0 <= version <= ADD_PARTITIONS_LAST_UNBATCHED:
        raise ValueError(f"AddPartitionsToTxn v{version} is batched: encode it with kio")
    flexible = version >= ADD_PARTITIONS_FIRST_FLEXIBLE
    out = bytearray(b"\x00\x00\x00\x00")  # throttle_time_ms
    put_count(out, len(topics), flexible)
    for name, parts in topics:
        put_string(out, name, flexible)
        put_count(out, len(parts), flexible)
        for index, code in parts:
            out += _PARTITION.pack(index, code)
            if flexible:
                out += b"\x00"
        if flexible:
            out += b"\x00"
    if flexible:
        out += b"\x00"
    return SmallResponse(bytes(out), flexible, None)
