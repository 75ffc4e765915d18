"""The group coordinator of every ``__consumer_offsets`` partition, one core each.

Kafka runs one coordinator shard per ``__consumer_offsets`` partition and loads, serves and
fails each on its own: while a partition loads, only its groups get
COORDINATOR_LOAD_IN_PROGRESS; once its load failed, only they get NOT_COORDINATOR; the
groups of loaded partitions are served meanwhile. ``PartitionedGroups`` does the same with
one sans-IO ``GroupCoordinator`` per partition: a request goes to the core of its group's
partition, and the calls over many groups (ListGroups, DescribeGroups, DeleteGroups, the
timers) are split among the cores and their answers merged. Like the cores, it does no I/O;
the shell replays a partition into a fresh core and ``install``s it when done.

ListGroups follows Kafka's GroupCoordinatorService: COORDINATOR_LOAD_IN_PROGRESS while any
partition loads; a partition whose load failed (NOT_COORDINATOR) lists nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kio.schema.errors import ErrorCode

from oncelog.group.config import GroupConfig
from oncelog.group.consumer_protocol import TopicMetadata
from oncelog.group.coordinator import GroupCoordinator
from oncelog.group.core import partition_for
from oncelog.group.messages import (
    ConsumerHeartbeatRequest,
    DeleteGroupsReply,
    DescribedConsumerGroup,
    DescribedGroup,
    GroupStep,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListedGroup,
    ListGroupsReply,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchReply,
    OffsetFetchRequest,
    Reply,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
)
from oncelog.group.state import Group

E = ErrorCode


class PartitionedGroups:
    def __init__(self, config: GroupConfig) -> None:
        """Every partition starts loading (its core unloaded)."""
        self.config = config
        self.cores = [GroupCoordinator(config) for _ in range(config.offsets_topic_num_partitions)]

    # -- partitions -----------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        """Every partition is loaded."""
        return all(core.loaded for core in self.cores)

    def loading(self) -> list[int]:
        """The partitions still loading (neither loaded nor failed)."""
        return [i for i, c in enumerate(self.cores) if not c.loaded and not c.failed]

    def failed(self) -> list[int]:
        return [i for i, c in enumerate(self.cores) if c.failed]

    def install(self, partition: int, core: GroupCoordinator) -> None:
        """``core`` holds ``partition`` loaded to the end of its log: serve it."""
        if not core.loaded:
            raise RuntimeError(f"install() of an unloaded coordinator for partition {partition}")
        self.cores[partition] = core

    def mark_loading(self, partition: int) -> None:
        """``partition`` loads (again): its groups get COORDINATOR_LOAD_IN_PROGRESS."""
        self.cores[partition] = GroupCoordinator(self.config)

    def mark_failed(self, partition: int) -> None:
        """The load of ``partition`` failed: its groups get NOT_COORDINATOR."""
        core = GroupCoordinator(self.config)
        core.mark_failed()
        self.cores[partition] = core

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, len(self.cores))

    def core(self, group_id: str) -> GroupCoordinator:
        return self.cores[self.partition_for(group_id)]

    def unavailable(self, group_id: str) -> ErrorCode | None:
        """The error a request for ``group_id`` gets before reaching its group (None: its
        partition is loaded)."""
        return self.core(group_id).unavailable

    def group(self, group_id: str) -> Group | None:
        return self.core(group_id).group(group_id)

    def groups(self) -> list[Group]:
        return [g for core in self.cores for g in core.groups()]

    # -- requests of one group ------------------------------------------------------------

    def join_group(
        self, req: JoinGroupRequest, now_ms: int, topics: TopicMetadata | None = None
    ) -> GroupStep:
        return self.core(req.group_id).join_group(req, now_ms, topics)

    def sync_group(self, req: SyncGroupRequest, now_ms: int) -> GroupStep:
        return self.core(req.group_id).sync_group(req, now_ms)

    def heartbeat(self, req: HeartbeatRequest, now_ms: int) -> GroupStep:
        return self.core(req.group_id).heartbeat(req, now_ms)

    def leave_group(self, req: LeaveGroupRequest, now_ms: int) -> GroupStep:
        return self.core(req.group_id).leave_group(req, now_ms)

    def consumer_heartbeat(
        self, req: ConsumerHeartbeatRequest, topics: TopicMetadata, now_ms: int
    ) -> GroupStep:
        return self.core(req.group_id).consumer_heartbeat(req, topics, now_ms)

    def regexes_resolved(
        self,
        group_id: str,
        resolved: Mapping[str, frozenset[str]],
        topics: TopicMetadata,
        now_ms: int,
    ) -> GroupStep:
        return self.core(group_id).regexes_resolved(group_id, resolved, topics, now_ms)

    def offset_commit(self, req: OffsetCommitRequest, now_ms: int) -> GroupStep:
        return self.core(req.group_id).offset_commit(req, now_ms)

    def txn_offset_commit(self, req: TxnOffsetCommitRequest, now_ms: int) -> GroupStep:
        return self.core(req.group_id).txn_offset_commit(req, now_ms)

    def offset_fetch(self, req: OffsetFetchRequest) -> OffsetFetchReply:
        return self.core(req.group_id).offset_fetch(req)

    def offset_delete(self, req: OffsetDeleteRequest, now_ms: int) -> GroupStep:
        return self.core(req.group_id).offset_delete(req, now_ms)

    def complete_txn(self, producer_id: int, commit: bool, partition: int | None = None) -> None:
        """A COMMIT/ABORT marker reached ``partition`` (None: every partition). A partition
        still loading ignores it: its load reads the marker from the log."""
        cores = self.cores if partition is None else [self.cores[partition]]
        for core in cores:
            if core.loaded:
                core.complete_txn(producer_id, commit, partition)

    # -- requests over many groups --------------------------------------------------------

    def consumer_group_describe(self, group_ids: Iterable[str]) -> list[DescribedConsumerGroup]:
        return [self.core(g).consumer_group_describe([g])[0] for g in group_ids]

    def describe_groups(
        self, group_ids: Iterable[str], api_version: int = 5
    ) -> list[DescribedGroup]:
        return [self.core(g).describe_groups([g], api_version)[0] for g in group_ids]

    def list_groups(
        self, states_filter: Iterable[str] = (), types_filter: Iterable[str] = ()
    ) -> ListGroupsReply:
        if self.loading():
            return ListGroupsReply(E.coordinator_load_in_progress, ())
        states, types = tuple(states_filter), tuple(types_filter)
        listed: list[ListedGroup] = []
        for core in self.cores:
            if core.loaded:
                listed.extend(core.list_groups(states, types).groups)
        return ListGroupsReply(E.none, tuple(listed))

    def delete_groups(self, group_ids: Iterable[str], now_ms: int) -> GroupStep:
        """Each partition's groups by its core; the results in the order asked."""
        ids = list(dict.fromkeys(group_ids))
        by_partition: dict[int, list[str]] = {}
        for gid in ids:
            by_partition.setdefault(self.partition_for(gid), []).append(gid)
        results: dict[str, ErrorCode] = {}
        merged = GroupStep()
        for partition, gids in by_partition.items():
            step = self.cores[partition].delete_groups(gids, now_ms)
            assert isinstance(step.reply, DeleteGroupsReply)
            results.update(step.reply.results)
            _extend(merged, step)
        merged.reply = DeleteGroupsReply(tuple((g, results[g]) for g in ids))
        return merged

    # -- time and recovery ----------------------------------------------------------------

    def tick(self, now_ms: int) -> GroupStep:
        merged = GroupStep()
        for core in self.cores:
            if core.loaded:
                _extend(merged, core.tick(now_ms))
        return merged

    def next_deadline(self) -> int | None:
        return min(
            (d for core in self.cores if (d := core.next_deadline()) is not None), default=None
        )

    def abandon(
        self, error: ErrorCode = E.not_coordinator, partitions: Iterable[int] | None = None
    ) -> list[tuple[int, Reply]]:
        """Answer every parked request of ``partitions`` (None: all) with ``error``; their
        cores must then be replaced."""
        indexes = range(len(self.cores)) if partitions is None else partitions
        return [r for i in indexes for r in self.cores[i].abandon(error)]

    def migrate_legacy(
        self, live_legacy_keys: Mapping[int, Mapping[bytes, bool]]
    ) -> tuple[GroupStep, int]:
        """``live_legacy_keys``: per partition, as ``GroupCoordinator.migrate_legacy``."""
        merged, count = GroupStep(), 0
        for partition, keys in live_legacy_keys.items():
            step, n = self.cores[partition].migrate_legacy(keys)
            _extend(merged, step)
            count += n
        return merged, count


def _extend(merged: GroupStep, step: GroupStep) -> None:
    merged.appends.extend(step.appends)
    merged.resolved.extend(step.resolved)
    merged.effects.extend(step.effects)
