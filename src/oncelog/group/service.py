"""GroupService: the classic group coordinator behind plain async methods.

It owns the sans-IO ``GroupCoordinator`` and a ``CoordinatorRuntime`` that performs its
steps. Calls are serialized by construction: each coordinator call runs to completion (its
records appended to ``__consumer_offsets``) before the event loop runs anything else, which
is the ordering the coordinator's step protocol needs. The clock is read here, never in the
API layer.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from kio.schema.errors import ErrorCode

from oncelog.clock import Clock, now_ms
from oncelog.coordinator.internal_topics import (
    CONSUMER_OFFSETS_TOPIC,
    InternalTopics,
    internal_topic_config,
    skip_undecodable,
)
from oncelog.coordinator.runtime import Append, CoordinatorRuntime, Pending, client_error
from oncelog.coordinator.txn_verifier import TxnVerifier
from oncelog.group.config import GroupConfig
from oncelog.group.consumer_state import TopicInfo
from oncelog.group.coordinator import GroupCoordinator
from oncelog.group.layout_migration import maybe_legacy_key
from oncelog.group.messages import (
    CommitReply,
    ConsumerHeartbeatReply,
    ConsumerHeartbeatRequest,
    DeleteGroupsReply,
    DescribedConsumerGroup,
    DescribedGroup,
    GroupStep,
    HeartbeatReply,
    HeartbeatRequest,
    JoinGroupReply,
    JoinGroupRequest,
    LeaveGroupReply,
    LeaveGroupRequest,
    ListGroupsReply,
    OffsetCommitRequest,
    OffsetDeleteReply,
    OffsetDeleteRequest,
    OffsetFetchReply,
    OffsetFetchRequest,
    Reply,
    SyncGroupReply,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
    failed_replies,
)
from oncelog.group.offsets import commit_errors
from oncelog.group.offsets_codec import OffsetsCodecError
from oncelog.storage.group_sync import GroupSync
from oncelog.storage.replay import iter_log

log = logging.getLogger(__name__)

R = TypeVar("R", bound=Reply)


class GroupService:
    def __init__(
        self,
        config: GroupConfig,
        *,
        topics: InternalTopics,
        verify_txn: TxnVerifier,
        clock: Clock = now_ms,
        durable: GroupSync | None = None,
        topic_metadata: Callable[[], Mapping[str, TopicInfo]] = dict,
    ) -> None:
        """``topic_metadata``: the broker's non-internal topics (name -> id, partition
        count), read for each ConsumerGroupHeartbeat."""
        self.config = config
        self._topic_metadata = topic_metadata
        self._topics = topics
        self._verify_txn = verify_txn
        self._clock = clock
        self.coordinator = GroupCoordinator(config)
        self.skipped_records = 0  # undecodable __consumer_offsets records seen at load
        self.migrated_records = 0  # legacy-layout keys rewritten in Kafka's layout at start
        self._legacy_keys: dict[bytes, bool] = {}
        self.load_time_s = 0.0  # how long the start-up load of __consumer_offsets took
        self.runtime: CoordinatorRuntime[Reply] = CoordinatorRuntime(
            name="group coordinator",
            topic=CONSUMER_OFFSETS_TOPIC,
            partitions=topics,
            feedback=self,
            clock=clock,
            durable=durable,
        )

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Create/load ``__consumer_offsets`` and start the coordinator's timers."""
        self._load()
        self._migrate_legacy_layout()
        # Through self: a failed append replaces the coordinator.
        self.runtime.start_timer(
            lambda now: self.coordinator.tick(now),
            max_wait_ms=self.config.tick_max_ms,
            next_deadline=lambda: self.coordinator.next_deadline(),
        )

    def _load(self) -> None:
        started = time.monotonic()
        parts = self._topics.ensure_internal_topic(
            CONSUMER_OFFSETS_TOPIC,
            self.config.offsets_topic_num_partitions,
            internal_topic_config(self.config.offsets_segment_bytes),
        )
        if len(parts) != self.config.offsets_topic_num_partitions:
            # Groups are placed by hash % the topic's real partition count.
            self.config = dataclasses.replace(self.config, offsets_topic_num_partitions=len(parts))
        coordinator = GroupCoordinator(self.config)
        records = skipped = 0
        legacy: dict[bytes, bool] = {}  # legacy-layout key -> its latest record is a value
        for index, part in enumerate(parts):
            for entry in iter_log(part):
                if entry.marker_commit is not None:
                    coordinator.load_marker(entry.producer_id, entry.marker_commit, index)
                elif entry.key is not None:
                    pid = entry.producer_id if entry.transactional else -1
                    try:
                        coordinator.load([(entry.key, entry.value)], pid)
                    except OffsetsCodecError as exc:
                        skip_undecodable(log, CONSUMER_OFFSETS_TOPIC, index, entry.offset, exc)
                        skipped += 1
                        continue
                    records += 1
                    if maybe_legacy_key(entry.key):
                        legacy[entry.key] = entry.value is not None
        coordinator.finish_load(self._clock())
        self.coordinator = coordinator
        self.skipped_records = skipped
        self._legacy_keys = legacy
        self.load_time_s = time.monotonic() - started
        log.info(
            "loaded %d groups from %d records (%d undecodable, skipped) in %.3fs",
            len(coordinator.groups()),
            records,
            skipped,
            self.load_time_s,
        )

    def _migrate_legacy_layout(self) -> None:
        """Rewrite the records a pre-Kafka-layout oncelog left (see layout_migration)."""
        if not any(self._legacy_keys.values()):
            return
        step, count = self.coordinator.migrate_legacy(self._legacy_keys)
        self._legacy_keys = {}
        self.runtime.run(step)  # a failed append reloads; the next start-up tries again
        self.migrated_records = count
        log.info("rewrote %d legacy-layout __consumer_offsets keys in Kafka's layout", count)

    async def stop(self) -> None:
        await self.runtime.stop()

    def on_offsets_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """A COMMIT/ABORT marker reached a ``__consumer_offsets`` partition."""
        self.coordinator.complete_txn(producer_id, commit, partition)

    # -- membership --------------------------------------------------------------------

    async def join(self, req: JoinGroupRequest) -> JoinGroupReply:
        step = self.coordinator.join_group(req, self._clock(), self._topic_metadata())
        return await self._call(step, JoinGroupReply)

    async def sync(self, req: SyncGroupRequest) -> SyncGroupReply:
        return await self._call(self.coordinator.sync_group(req, self._clock()), SyncGroupReply)

    async def heartbeat(self, req: HeartbeatRequest) -> HeartbeatReply:
        return await self._call(self.coordinator.heartbeat(req, self._clock()), HeartbeatReply)

    async def leave(self, req: LeaveGroupRequest) -> LeaveGroupReply:
        return await self._call(self.coordinator.leave_group(req, self._clock()), LeaveGroupReply)

    async def consumer_heartbeat(self, req: ConsumerHeartbeatRequest) -> ConsumerHeartbeatReply:
        step = self.coordinator.consumer_heartbeat(req, self._topic_metadata(), self._clock())
        return await self._call(step, ConsumerHeartbeatReply)

    def consumer_group_describe(self, group_ids: Iterable[str]) -> list[DescribedConsumerGroup]:
        return self.coordinator.consumer_group_describe(group_ids)

    # -- offsets -----------------------------------------------------------------------

    async def commit_offsets(self, req: OffsetCommitRequest) -> CommitReply:
        return await self._call(self.coordinator.offset_commit(req, self._clock()), CommitReply)

    async def txn_commit_offsets(
        self, req: TxnOffsetCommitRequest, *, fenced: ErrorCode = ErrorCode.producer_fenced
    ) -> CommitReply:
        """TxnOffsetCommit (KIP-98): the producer must hold an Ongoing transaction that
        added the group's offsets partition (AddOffsetsToTxn). ``fenced``: the error for a
        stale epoch in the caller's API version."""
        offsets_partition = (CONSUMER_OFFSETS_TOPIC, self.coordinator.partition_for(req.group_id))
        error = self._verify_txn(
            req.transactional_id,
            req.producer_id,
            req.producer_epoch,
            offsets_partition,
            fenced=fenced,
        )
        if error is not ErrorCode.none:
            return commit_errors(req.topics, error)
        step = self.coordinator.txn_offset_commit(req, self._clock())
        return await self._call(step, CommitReply)

    def fetch_offsets(self, req: OffsetFetchRequest) -> OffsetFetchReply:
        return self.coordinator.offset_fetch(req)

    async def delete_offsets(self, req: OffsetDeleteRequest) -> OffsetDeleteReply:
        step = self.coordinator.offset_delete(req, self._clock())
        return await self._call(step, OffsetDeleteReply)

    # -- admin -------------------------------------------------------------------------

    def list_groups(
        self, states_filter: Iterable[str] = (), types_filter: Iterable[str] = ()
    ) -> ListGroupsReply:
        return self.coordinator.list_groups(states_filter, types_filter)

    def describe_groups(self, group_ids: Iterable[str], api_version: int) -> list[DescribedGroup]:
        return self.coordinator.describe_groups(group_ids, api_version)

    async def delete_groups(self, group_ids: Iterable[str]) -> DeleteGroupsReply:
        step = self.coordinator.delete_groups(group_ids, self._clock())
        return await self._call(step, DeleteGroupsReply)

    async def _call(self, step: GroupStep, kind: type[R]) -> R:
        reply = await self.runtime.call(step)
        assert isinstance(reply, kind)
        return reply

    # -- the runtime's feedback ----------------------------------------------------------

    def appended(self, append: Append, now_ms: int) -> None:
        return None  # the group core applied the step's change already

    def append_failed(
        self, append: Append, error: ErrorCode, rest: GroupStep, now_ms: int
    ) -> GroupStep:
        """The core is ahead of the log: answer the step's replies and every parked request
        with the error, then rebuild the core from what the log really holds (as Kafka
        reloads a partition)."""
        code = client_error(error)
        out: GroupStep = GroupStep(rest.reply if isinstance(rest.reply, Pending) else None)
        for token, reply in failed_replies(rest, code):
            if token is None:
                out.reply = reply
            else:
                out.resolved.append((token, reply))
        out.resolved.extend(self.coordinator.abandon(code))
        self._load()
        return out

    def perform(self, effect: object) -> None:
        raise AssertionError(f"the group coordinator has no effect {effect!r}")
