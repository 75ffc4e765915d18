"""Transaction coordinator settings, with Kafka's broker config names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from oncelog.config.typed import build, setting
from oncelog.config.validators import OneOf, Range
from oncelog.coordinator.internal_topics import (
    DEFAULT_INTERNAL_PARTITIONS,
    DEFAULT_INTERNAL_SEGMENT_BYTES,
)


@dataclass(frozen=True, slots=True)
class TxnConfig:
    max_timeout_ms: int = setting(
        "transaction.max.timeout.ms",
        900_000,
        "Longest transaction.timeout.ms a producer may ask for (InitProducerId answers INVALID_TRANSACTION_TIMEOUT beyond).",
        group="transactions",
        validator=Range.at_least(1),
    )
    id_expiration_ms: int = setting(
        "transactional.id.expiration.ms",
        604_800_000,
        "A transactional id with no transaction for this long is forgotten.",
        group="transactions",
        validator=Range.at_least(1),
    )
    # Both periodic jobs (timed-out transactions, expired ids) run at this interval.
    abort_check_interval_ms: int = setting(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        10_000,
        "How often timed-out transactions are aborted and expired ids removed.",
        group="transactions",
        validator=Range.at_least(1),
    )
    txn_log_partitions: int = setting(
        "transaction.state.log.num.partitions",
        DEFAULT_INTERNAL_PARTITIONS,
        "Partitions of __transaction_state when it is created.",
        group="transactions",
        validator=Range.at_least(1),
    )
    offsets_partitions: int = setting(
        "offsets.topic.num.partitions",
        DEFAULT_INTERNAL_PARTITIONS,
        "Partitions of __consumer_offsets when it is created.",
        group="transactions",
        validator=Range.at_least(1),
    )
    # Used only when __transaction_state is created (an existing topic keeps its configs).
    txn_log_segment_bytes: int = setting(
        "transaction.state.log.segment.bytes",
        DEFAULT_INTERNAL_SEGMENT_BYTES,
        "segment.bytes of __transaction_state when it is created.",
        group="transactions",
        validator=Range.at_least(1),
    )
    # Blocking begin: block AddPartitionsToTxn/AddOffsetsToTxn while the previous transaction's
    # markers are in flight instead of answering CONCURRENT_TRANSACTIONS ...
    blocking_begin: bool = setting(
        "oncelog.txn.blocking.begin",
        True,
        "A new transaction's AddPartitionsToTxn / AddOffsetsToTxn waits for the previous one's markers instead of answering CONCURRENT_TRANSACTIONS.",
        group="transactions",
    )
    # ... but for at most this long (then CONCURRENT_TRANSACTIONS, and the client retries).
    blocking_max_wait_ms: int = setting(
        "oncelog.txn.blocking.begin.max.wait.ms",
        5_000,
        "The longest such wait (then CONCURRENT_TRANSACTIONS, and the client retries).",
        group="transactions",
    )
    # The finalized ``transaction.version`` feature level ApiVersions advertises (Kafka sets
    # it with kafka-features / kafka-storage format). At 2, clients that know KIP-890 part 2
    # use EndTxn v5 and Produce v12's implicit add; below, they stay on transaction version 1.
    # The request versions are served either way, as Kafka does.
    transaction_version: int = setting(
        "oncelog.feature.transaction.version",
        2,
        "The finalized transaction.version feature level ApiVersions advertises (2: KIP-890 part 2).",
        group="transactions",
        validator=OneOf("0", "1", "2"),
    )
    # KIP-939: may producers open two-phase-commit transactions (InitProducerId enable2Pc),
    # which never time out? Off by default, as in Kafka.
    two_phase_commit_enable: bool = setting(
        "transaction.two.phase.commit.enable",
        False,
        "Producers may open two-phase-commit transactions (KIP-939), which never time out.",
        group="transactions",
    )
    # A request for an id whose __transaction_state partition still loads waits this long
    # for it before COORDINATOR_LOAD_IN_PROGRESS (as oncelog.group.load.wait.ms does for
    # groups): the transaction log loads in the background, and clients must not see
    # errors a start-up before it did not give them.
    load_wait_ms: int = 5_000

    @classmethod
    def from_properties(cls, values: Mapping[str, object]) -> TxnConfig:
        """Build from broker settings (Kafka names); missing keys keep the defaults."""
        return build(cls, values)
