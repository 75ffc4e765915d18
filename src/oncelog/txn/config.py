"""Transaction coordinator settings, with Kafka's broker config names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from oncelog.coordinator.internal_topics import (
    DEFAULT_INTERNAL_PARTITIONS,
    DEFAULT_INTERNAL_SEGMENT_BYTES,
)
from oncelog.coordinator.settings import from_properties, setting


@dataclass(frozen=True, slots=True)
class TxnConfig:
    max_timeout_ms: int = setting("transaction.max.timeout.ms", 900_000)
    id_expiration_ms: int = setting("transactional.id.expiration.ms", 604_800_000)
    # Both periodic jobs (timed-out transactions, expired ids) run at this interval.
    abort_check_interval_ms: int = setting(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms", 10_000
    )
    txn_log_partitions: int = setting(
        "transaction.state.log.num.partitions", DEFAULT_INTERNAL_PARTITIONS
    )
    offsets_partitions: int = setting("offsets.topic.num.partitions", DEFAULT_INTERNAL_PARTITIONS)
    # Used only when __transaction_state is created (an existing topic keeps its configs).
    txn_log_segment_bytes: int = setting(
        "transaction.state.log.segment.bytes", DEFAULT_INTERNAL_SEGMENT_BYTES
    )
    # Blocking begin: block AddPartitionsToTxn/AddOffsetsToTxn while the previous transaction's
    # markers are in flight instead of answering CONCURRENT_TRANSACTIONS ...
    blocking_begin: bool = setting("oncelog.txn.blocking.begin", True)
    # ... but for at most this long (then CONCURRENT_TRANSACTIONS, and the client retries).
    blocking_max_wait_ms: int = setting("oncelog.txn.blocking.begin.max.wait.ms", 5_000)
    # The finalized ``transaction.version`` feature level ApiVersions advertises (Kafka sets
    # it with kafka-features / kafka-storage format). At 2, clients that know KIP-890 part 2
    # use EndTxn v5 and Produce v12's implicit add; below, they stay on transaction version 1.
    # The request versions are served either way, as Kafka does.
    transaction_version: int = setting("oncelog.feature.transaction.version", 2)
    # KIP-939: may producers open two-phase-commit transactions (InitProducerId enable2Pc),
    # which never time out? Off by default, as in Kafka.
    two_phase_commit_enable: bool = setting("transaction.two.phase.commit.enable", False)
    # Test hook: hold end-txn markers back this long, to crash in PrepareCommit/PrepareAbort.
    marker_delay_ms: int = setting("oncelog.debug.marker.delay.ms", 0)

    @classmethod
    def from_properties(cls, values: Mapping[str, object]) -> TxnConfig:
        """Build from broker settings (Kafka names); missing keys keep the defaults."""
        return from_properties(cls, values)
