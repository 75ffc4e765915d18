"""Group coordinator settings, with Kafka's broker config names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GroupConfig:
    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    offsets_retention_ms: int = 10_080 * 60_000  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    offsets_topic_num_partitions: int = 50  # offsets.topic.num.partitions
    # Kafka's constant: a new member's parked JoinGroup is dropped after this long, since
    # it cannot heartbeat yet and its socket is muted (a retry simply joins again).
    new_member_join_timeout_ms: int = 300_000

    @classmethod
    def from_properties(cls, values: Mapping[str, object]) -> GroupConfig:
        """Build from broker settings (Kafka names); missing keys keep the defaults."""
        d = cls()

        def get(name: str, default: int) -> int:
            v = values.get(name)
            return default if v is None else int(v)  # type: ignore[call-overload]

        return cls(
            min_session_timeout_ms=get("group.min.session.timeout.ms", d.min_session_timeout_ms),
            max_session_timeout_ms=get("group.max.session.timeout.ms", d.max_session_timeout_ms),
            initial_rebalance_delay_ms=get(
                "group.initial.rebalance.delay.ms", d.initial_rebalance_delay_ms
            ),
            offsets_retention_ms=get("offsets.retention.minutes", d.offsets_retention_ms // 60_000)
            * 60_000,
            offsets_retention_check_interval_ms=get(
                "offsets.retention.check.interval.ms", d.offsets_retention_check_interval_ms
            ),
            offset_metadata_max_bytes=get("offset.metadata.max.bytes", d.offset_metadata_max_bytes),
            offsets_topic_num_partitions=get(
                "offsets.topic.num.partitions", d.offsets_topic_num_partitions
            ),
        )
