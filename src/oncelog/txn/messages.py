"""The transaction coordinator's replies and its one effect besides log appends.

See ``oncelog.txn.coordinator`` for the protocol and ``oncelog.coordinator.runtime`` for the
shared step vocabulary (``Step``, ``Append``, ``Pending``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from oncelog.coordinator.runtime import Step
from oncelog.txn.metadata import TopicPartition


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One COMMIT/ABORT control batch of a producer's transaction."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int


@dataclass(frozen=True, slots=True)
class WriteMarkers:
    """Write a COMMIT/ABORT control batch for ``producer_id``/``producer_epoch`` to every
    partition (retrying until each is written or no longer exists), then call
    ``on_markers_written(transactional_id, now_ms=...)``."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]
    coordinator_epoch: int

    @property
    def marker(self) -> TxnMarker:
        return TxnMarker(self.producer_id, self.producer_epoch, self.commit, self.coordinator_epoch)


@dataclass(frozen=True, slots=True)
class Reply:
    """The answer to one request. ``partition_errors`` is set only for verify-only
    AddPartitionsToTxn; otherwise ``error`` applies to every partition of the request."""

    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1
    partition_errors: Mapping[TopicPartition, ErrorCode] | None = None
    # InitProducerId v6 keepPreparedTxn (KIP-939): the identity the kept transaction was
    # written under; -1 when no transaction was kept.
    ongoing_producer_id: int = -1
    ongoing_producer_epoch: int = -1

    @property
    def ok(self) -> bool:
        return self.error is ErrorCode.none


TxnStep = Step[Reply, WriteMarkers]
