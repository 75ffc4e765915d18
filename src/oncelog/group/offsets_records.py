"""What ``__consumer_offsets`` records mean, whatever their byte layout: the decoded keys
and values the group coordinator replays and writes."""

from __future__ import annotations

from dataclasses import dataclass, field


class OffsetsCodecError(ValueError):
    """A ``__consumer_offsets`` key or value that does not decode."""


class UnknownRecordType(OffsetsCodecError):
    """A key version (record type) this broker does not know, e.g. a KIP-848 consumer group
    record written by a newer broker: skipped and counted at load, never fatal."""


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group_id: str
    topic: str
    partition: int
    # Read from oncelog's pre-Kafka layout (see offsets_codec_legacy); not part of identity.
    legacy: bool = field(default=False, compare=False)


@dataclass(frozen=True, slots=True)
class GroupKey:
    group_id: str
    legacy: bool = field(default=False, compare=False)


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int  # -1: none
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None  # only set by OffsetCommit v2-v4 retention_time


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes  # the member's metadata for the group's selected protocol
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str | None
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    state_timestamp_ms: int | None
    members: tuple[MemberValue, ...] = ()


Key = OffsetKey | GroupKey
