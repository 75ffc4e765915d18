"""What the sans-IO transaction coordinator hands back to its async shell.

See ``oncelog.txn.coordinator`` for the protocol; these are its plain-data vocabulary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from oncelog.txn.metadata import TopicPartition, TxnState

TRANSACTION_STATE_TOPIC = "__transaction_state"
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"


@dataclass(frozen=True, slots=True)
class AppendTxnLog:
    """Append ``key``/``value`` to ``__transaction_state``-``partition`` durably, then call
    ``on_log_appended(transactional_id, now_ms=..., error=...)``."""

    transactional_id: str
    partition: int
    key: bytes
    value: bytes | None  # None = tombstone (the id expired)
    state: TxnState | None  # the state ``value`` records (None for a tombstone); for logs/tests


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


Action = AppendTxnLog | WriteMarkers


@dataclass(frozen=True, slots=True)
class Reply:
    """The answer to one request. ``partition_errors`` is set only for verify-only
    AddPartitionsToTxn; otherwise ``error`` applies to every partition of the request."""

    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1
    partition_errors: Mapping[TopicPartition, ErrorCode] | None = None

    @property
    def ok(self) -> bool:
        return self.error is ErrorCode.none


@dataclass(frozen=True, slots=True)
class Pending:
    """The reply will arrive later, in some ``Step.resolved[token]``."""

    token: int


@dataclass(slots=True)
class Step:
    """Outcome of one call into the coordinator.

    ``reply``: for request methods, the immediate ``Reply`` or a ``Pending`` token; ``None``
    for feedback/timer calls. ``actions``: side effects to perform, in order per id.
    ``resolved``: replies now ready for earlier ``Pending`` tokens.
    """

    reply: Reply | Pending | None = None
    actions: list[Action] = field(default_factory=list)
    resolved: dict[int, Reply] = field(default_factory=dict)


def map_append_error(error: ErrorCode) -> ErrorCode:
    """The error a client sees when the ``__transaction_state`` append failed (as Kafka)."""
    if error in (
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
    ):
        return ErrorCode.coordinator_not_available
    if error in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return ErrorCode.not_coordinator
    if error in (ErrorCode.message_too_large, ErrorCode.record_list_too_large):
        return ErrorCode.unknown_server_error
    return error
