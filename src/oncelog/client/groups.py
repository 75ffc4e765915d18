"""Consumer groups through confluent-kafka's AdminClient (ListGroups, DescribeGroups,
OffsetFetch, OffsetCommit, DeleteGroups) and OffsetDelete through the protocol client,
which librdkafka does not expose: typed results and ClientErrors, as :mod:`.admin`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from oncelog.client.admin import Admin, Offsets, TopicPartition
from oncelog.client.errors import ClientError, check, from_kafka_error
from oncelog.client.protocol import ProtocolClient


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    state: str  # Stable, Empty, PreparingRebalance, CompletingRebalance, Dead
    simple: bool
    group_type: str = "classic"  # or "consumer" (KIP-848)


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol: str
    coordinator: int
    members: tuple[Member, ...]


_STATES = {
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
    "STABLE": "Stable",
    "DEAD": "Dead",
    "EMPTY": "Empty",
    "UNKNOWN": "Unknown",
}


def _state(value: object) -> str:
    name = getattr(value, "name", str(value))
    return _STATES.get(name, name)


def _type(value: object) -> str:
    name = getattr(value, "name", None)
    return name.lower() if isinstance(name, str) and name != "UNKNOWN" else "classic"


class OffsetCommitError(ClientError):
    """Some partitions' offsets were not committed: ``failed`` holds each one's error; the
    message (and code) are the first's."""

    def __init__(self, failed: dict[TopicPartition, ClientError]) -> None:
        first = next(iter(failed.values()))
        super().__init__(
            f"{first.what}: {first.detail}",
            first.error_code,
            local_code=first.local_code,
            name=first.name,
            detail=first.detail,
        )
        self.failed = failed


class GroupAdmin:
    """Group operations of one cluster; shares the Admin's client and retry policy."""

    def __init__(self, admin: Admin) -> None:
        self.admin = admin

    def list_groups(self) -> list[GroupListing]:
        result = self.admin.await_result(
            self.admin.client.list_consumer_groups(request_timeout=self.admin.timeout),
            "ListGroups",
        )
        if result.errors:
            raise ClientError(f"ListGroups: {result.errors[0]}")
        return sorted(
            (
                GroupListing(
                    g.group_id,
                    _state(g.state),
                    bool(g.is_simple_consumer_group),
                    _type(getattr(g, "type", None)),
                )
                for g in result.valid
            ),
            key=lambda g: g.group_id,
        )

    def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        ids = sorted(set(group_ids))
        if not ids:
            return {}
        futures = self.admin.client.describe_consumer_groups(
            ids, request_timeout=self.admin.timeout
        )
        out = {}
        for gid in ids:
            d = self.admin.await_result(futures[gid], f"DescribeGroups {gid!r}")
            members = tuple(
                Member(
                    m.member_id,
                    m.client_id,
                    m.host,
                    tuple(sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions)),
                )
                for m in d.members
            )
            out[gid] = GroupDescription(
                gid, _state(d.state), d.partition_assignor or "", d.coordinator.id, members
            )
        return out

    def committed(self, group_id: str) -> Offsets:
        """The group's committed offsets (OffsetFetch of every partition)."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        fut = self.admin.client.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group_id)], request_timeout=self.admin.timeout
        )[group_id]
        res = self.admin.await_result(fut, f"OffsetFetch {group_id!r}")
        return {
            (tp.topic, tp.partition): tp.offset
            for tp in res.topic_partitions
            if tp.offset >= 0 and tp.error is None
        }

    def alter_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` for the group (which must have no active members)."""
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka import TopicPartition as KTP

        tps = [KTP(t, p, o) for (t, p), o in sorted(offsets.items())]
        fut = self.admin.client.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group_id, tps)], request_timeout=self.admin.timeout
        )[group_id]
        res = self.admin.await_result(fut, f"OffsetCommit {group_id!r}")
        failed = {
            (tp.topic, tp.partition): from_kafka_error(
                tp.error, f"OffsetCommit {group_id!r} {tp.topic}-{tp.partition}"
            )
            for tp in res.topic_partitions
            if tp.error is not None
        }
        if failed:
            raise OffsetCommitError(failed)

    def delete_groups(self, group_ids: Iterable[str]) -> None:
        ids = sorted(set(group_ids))
        futures = self.admin.client.delete_consumer_groups(ids, request_timeout=self.admin.timeout)
        for gid in ids:
            self.admin.await_result(futures[gid], f"DeleteGroups {gid!r}")

    def delete_offsets(self, group_id: str, tps: Iterable[TopicPartition]) -> None:
        """OffsetDelete (KIP-496): drop the group's committed offsets of ``tps``; refused
        (GROUP_SUBSCRIBED_TO_TOPIC) while a member consumes the topic."""
        with ProtocolClient(self.admin.config, timeout=self.admin.timeout) as client:
            errors = client.offset_delete(group_id, tps)
        for (topic, partition), code in sorted(errors.items()):
            check(code, f"OffsetDelete {group_id!r} {topic}-{partition}")
