"""Group coordinator settings, with Kafka's broker config names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from oncelog.config.typed import build, setting
from oncelog.config.validators import AllOf, Includes, OneOf, Range
from oncelog.coordinator.internal_topics import (
    DEFAULT_INTERNAL_PARTITIONS,
    DEFAULT_INTERNAL_SEGMENT_BYTES,
)


@dataclass(frozen=True, slots=True)
class GroupConfig:
    min_session_timeout_ms: int = setting(
        "group.min.session.timeout.ms",
        6_000,
        "Shortest session timeout a classic group member may ask for.",
        group="groups",
        validator=Range.at_least(0),
    )
    max_session_timeout_ms: int = setting(
        "group.max.session.timeout.ms",
        1_800_000,
        "Longest session timeout a classic group member may ask for.",
        group="groups",
    )
    initial_rebalance_delay_ms: int = setting(
        "group.initial.rebalance.delay.ms",
        3_000,
        "How long the first rebalance of an empty classic group waits for more members.",
        group="groups",
        validator=Range.at_least(0),
    )
    offsets_retention_ms: int = setting(
        "offsets.retention.minutes",
        10_080 * 60_000,
        "Committed offsets of an empty group are kept this long.",
        group="groups",
        unit=60_000,
        validator=Range.at_least(1),
    )
    offsets_retention_check_interval_ms: int = setting(
        "offsets.retention.check.interval.ms",
        600_000,
        "How often expired offsets are removed.",
        group="groups",
        validator=Range.at_least(1),
    )
    offset_metadata_max_bytes: int = setting(
        "offset.metadata.max.bytes",
        4096,
        "Largest metadata string of a committed offset.",
        group="groups",
    )
    offsets_topic_num_partitions: int = setting(
        "offsets.topic.num.partitions",
        DEFAULT_INTERNAL_PARTITIONS,
        "Partitions of __consumer_offsets when it is created.",
        group="groups",
        validator=Range.at_least(1),
    )
    # Used only when __consumer_offsets is created (an existing topic keeps its configs).
    offsets_segment_bytes: int = setting(
        "offsets.topic.segment.bytes",
        DEFAULT_INTERNAL_SEGMENT_BYTES,
        "segment.bytes of __consumer_offsets when it is created.",
        group="groups",
        validator=Range.at_least(1),
    )
    # The consumer group protocol (KIP-848) is served when the finalized ``group.version``
    # feature is 1 or more (Kafka 4.x finalizes 1; set with kafka-features) and "consumer"
    # is among the enabled rebalance protocols; otherwise ConsumerGroupHeartbeat and
    # ConsumerGroupDescribe answer UNSUPPORTED_VERSION, as Kafka does.
    group_version: int = setting(
        "oncelog.feature.group.version",
        1,
        "The finalized group.version feature level (1: the consumer group protocol, KIP-848).",
        group="groups",
        validator=OneOf("0", "1"),
    )
    rebalance_protocols: str = setting(
        "group.coordinator.rebalance.protocols",
        "classic,consumer",
        "Rebalance protocols served: classic, and consumer (KIP-848).",
        group="groups",
        validator=AllOf(OneOf("classic", "consumer", many=True), Includes("classic")),
    )
    consumer_session_timeout_ms: int = setting(
        "group.consumer.session.timeout.ms",
        45_000,
        "Session timeout of a consumer-protocol member.",
        group="groups",
        validator=Range.at_least(1),
    )
    consumer_heartbeat_interval_ms: int = setting(
        "group.consumer.heartbeat.interval.ms",
        5_000,
        "Heartbeat interval given to consumer-protocol members.",
        group="groups",
        validator=Range.at_least(1),
    )
    # The bounds of a group's own consumer.* configs (Kafka's GroupConfig.validateValues).
    consumer_min_session_timeout_ms: int = setting(
        "group.consumer.min.session.timeout.ms",
        45_000,
        "Lower bound of a group's consumer.session.timeout.ms.",
        group="groups",
    )
    consumer_max_session_timeout_ms: int = setting(
        "group.consumer.max.session.timeout.ms",
        60_000,
        "Upper bound of a group's consumer.session.timeout.ms.",
        group="groups",
    )
    consumer_min_heartbeat_interval_ms: int = setting(
        "group.consumer.min.heartbeat.interval.ms",
        5_000,
        "Lower bound of a group's consumer.heartbeat.interval.ms.",
        group="groups",
    )
    consumer_max_heartbeat_interval_ms: int = setting(
        "group.consumer.max.heartbeat.interval.ms",
        15_000,
        "Upper bound of a group's consumer.heartbeat.interval.ms.",
        group="groups",
    )
    # KIP-848 online migration of non-empty groups between the classic and the consumer
    # protocol: disabled | upgrade | downgrade | bidirectional (Kafka 4.x's default;
    # GroupCoordinatorConfig.CONSUMER_GROUP_MIGRATION_POLICY_CONFIG, case-insensitive).
    consumer_migration_policy: str = setting(
        "group.consumer.migration.policy",
        "bidirectional",
        "Online migration of non-empty groups between the classic and consumer protocols: disabled, upgrade, downgrade or bidirectional.",
        group="groups",
        validator=OneOf("disabled", "upgrade", "downgrade", "bidirectional", ignore_case=True),
    )
    consumer_max_size: int = setting(
        "group.consumer.max.size",
        2**31 - 1,
        "Most members of a consumer-protocol group.",
        group="groups",
        validator=Range.at_least(1),
    )
    # Subscribed regexes are resolved again on a heartbeat once their resolution is this
    # old (GroupCoordinatorConfig.CONSUMER_GROUP_REGEX_REFRESH_INTERVAL_MS, internal) ...
    consumer_regex_refresh_interval_ms: int = setting(
        "group.consumer.regex.refresh.interval.ms",
        600_000,
        "Subscribed regexes are resolved again once their resolution is this old.",
        group="groups",
    )
    # ... and never within this long of the last one, whatever asks for it: new topics or
    # a new regex (GroupMetadataManager.REGEX_BATCH_REFRESH_MIN_INTERVAL_MS, a constant).
    consumer_regex_refresh_min_interval_ms: int = 10_000
    # Classic groups: a JoinGroup beyond this many members gets GROUP_MAX_SIZE_REACHED, and a
    # consumer group this large is not downgraded (GroupCoordinatorConfig.GROUP_MAX_SIZE).
    classic_max_size: int = setting(
        "group.max.size",
        2**31 - 1,
        "Most members of a classic group (beyond: GROUP_MAX_SIZE_REACHED).",
        group="groups",
        validator=Range.at_least(1),
    )
    # Kafka's constant: a new member's parked JoinGroup is dropped after this long, since
    # it cannot heartbeat yet and its socket is muted (a retry simply joins again).
    new_member_join_timeout_ms: int = 300_000
    # A request for a group whose __consumer_offsets partition is still loading waits this
    # long for the load (and that partition loads next) before it is answered
    # COORDINATOR_LOAD_IN_PROGRESS. Kafka answers at once; librdkafka then retries a commit
    # only twice (100-300 ms), so a consumer committing just after a restart would fail.
    # 0: answer at once, as Kafka does.
    load_wait_ms: int = setting(
        "oncelog.group.load.wait.ms",
        5_000,
        "A request for a group whose __consumer_offsets partition is loading waits this long before COORDINATOR_LOAD_IN_PROGRESS (0: at once, as Kafka).",
        group="groups",
        validator=Range.at_least(0),
    )
    # How long the shell may sleep between timer checks when no deadline is near.
    tick_max_ms: int = 500

    @property
    def consumer_protocol_enabled(self) -> bool:
        enabled = {p.strip() for p in self.rebalance_protocols.split(",")}
        return self.group_version >= 1 and "consumer" in enabled

    @property
    def upgrade_enabled(self) -> bool:
        """A live classic group may become a consumer group (Kafka's isUpgradeEnabled)."""
        return self.consumer_migration_policy.strip().lower() in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        """A consumer group left with only classic members may turn classic again."""
        return self.consumer_migration_policy.strip().lower() in ("downgrade", "bidirectional")

    @classmethod
    def from_properties(cls, values: Mapping[str, object]) -> GroupConfig:
        """Build from broker settings (Kafka names); missing keys keep the defaults."""
        return build(cls, values)
