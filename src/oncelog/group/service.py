"""GroupService: the classic group coordinator behind plain async methods.

It owns the sans-IO ``GroupCoordinator`` and a ``CoordinatorRuntime`` that performs its
steps. Calls are serialized by construction: each coordinator call runs to completion (its
records appended to ``__consumer_offsets``) before the event loop runs anything else, which
is the ordering the coordinator's step protocol needs. The clock is read here, never in the
API layer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
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
from oncelog.storage.log import PartitionLog
from oncelog.storage.replay import LogBatch, iter_log_batches

log = logging.getLogger(__name__)

R = TypeVar("R", bound=Reply)

LOAD_SLICE_S = 0.005  # a background load gives the event loop back after this much work
LOAD_RETRY_MIN_S, LOAD_RETRY_MAX_S = 1.0, 30.0


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
        # (records replayed, offsets to replay) of the load under way or last done
        self.load_progress = (0, 0)
        # Called once a background load is done (the broker's run freezes the loaded
        # state out of the garbage collector's full passes, as it does for what its start
        # loaded).
        self.on_loaded: list[Callable[[], None]] = []
        self._timer_started = False
        self.runtime: CoordinatorRuntime[Reply] = CoordinatorRuntime(
            name="group coordinator",
            topic=CONSUMER_OFFSETS_TOPIC,
            partitions=topics,
            feedback=self,
            clock=clock,
            durable=durable,
        )

    # -- lifecycle ---------------------------------------------------------------------

    def start(self, *, background: bool = False) -> None:
        """Create/load ``__consumer_offsets`` and start the coordinator's timers.

        ``background`` (the broker's start): load on the event loop in slices of at most
        ``LOAD_SLICE_S`` of work, as Kafka loads a coordinator partition while the broker
        serves; until the load is done every group API answers COORDINATOR_LOAD_IN_PROGRESS
        (the unloaded core's answer). Otherwise the load runs to completion here."""
        parts = self._ensure_topic()
        self.coordinator = GroupCoordinator(self.config)  # unloaded: LOAD_IN_PROGRESS
        if not background:
            self._load(parts)
            self._after_load()
            return
        self.runtime.spawn(self._load_in_background(parts))

    def _ensure_topic(self) -> Sequence[PartitionLog]:
        parts = self._topics.ensure_internal_topic(
            CONSUMER_OFFSETS_TOPIC,
            self.config.offsets_topic_num_partitions,
            internal_topic_config(self.config.offsets_segment_bytes),
        )
        if len(parts) != self.config.offsets_topic_num_partitions:
            # Groups are placed by hash % the topic's real partition count.
            self.config = dataclasses.replace(self.config, offsets_topic_num_partitions=len(parts))
        return parts

    @property
    def loaded(self) -> bool:
        return self.coordinator.loaded

    async def _load_in_background(self, parts: Sequence[PartitionLog]) -> None:
        delay = LOAD_RETRY_MIN_S
        while True:
            try:
                steps = self._load_steps(parts)
                deadline = time.monotonic() + LOAD_SLICE_S
                for _ in steps:
                    if time.monotonic() >= deadline:
                        await asyncio.sleep(0)  # let the other clients in
                        deadline = time.monotonic() + LOAD_SLICE_S
            except Exception:
                # Kafka marks the partition failed; we keep answering LOAD_IN_PROGRESS
                # (retriable) and try again from the start.
                log.exception("loading %s failed; retrying in %.0fs", CONSUMER_OFFSETS_TOPIC, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, LOAD_RETRY_MAX_S)
                continue
            break
        self._after_load()
        callbacks, self.on_loaded = self.on_loaded, []
        for callback in callbacks:
            callback()

    def _after_load(self) -> None:
        if self._timer_started:  # a reload after a failed append: all this is done
            return
        self._timer_started = True
        self._migrate_legacy_layout()  # a failed append reloads; the next start tries again
        # Through self: a failed append replaces the coordinator.
        self.runtime.start_timer(
            lambda now: self.coordinator.tick(now),
            max_wait_ms=self.config.tick_max_ms,
            next_deadline=lambda: self.coordinator.next_deadline(),
        )

    def _load(self, parts: Sequence[PartitionLog] | None = None) -> None:
        """Load ``__consumer_offsets`` to the end, at once."""
        for _ in self._load_steps(self._ensure_topic() if parts is None else parts):
            pass

    def _load_steps(self, parts: Sequence[PartitionLog]) -> Iterator[None]:
        """Replay every partition into a new core, yielding after each batch; installs the
        core when done. What is appended while it yields (transaction markers written to
        ``__consumer_offsets``: the unloaded core ignores them) is read by a last pass that
        does not yield, so the core takes over exactly where the log ends: no record is
        missed or applied twice."""
        started = time.monotonic()
        coordinator = GroupCoordinator(self.config)
        self.load_progress = (0, sum(max(0, p.high_watermark - p.log_start_offset) for p in parts))
        counts = [0, 0]  # records loaded, undecodable records skipped
        legacy: dict[bytes, bool] = {}  # legacy-layout key -> its latest record is a value
        positions = [p.log_start_offset for p in parts]
        for index, part in enumerate(parts):
            end = part.high_watermark
            for batch in iter_log_batches(part, positions[index], end):
                self._replay(coordinator, index, batch, counts, legacy)
                yield
            positions[index] = end
        for index, part in enumerate(parts):  # what came in meanwhile, without yielding
            for batch in iter_log_batches(part, positions[index]):
                self._replay(coordinator, index, batch, counts, legacy)
        coordinator.finish_load(self._clock())
        self.coordinator = coordinator
        self.skipped_records = counts[1]
        self._legacy_keys = legacy
        self.load_time_s = time.monotonic() - started
        log.info(
            "loaded %d groups from %d records (%d undecodable, skipped) in %.3fs",
            len(coordinator.groups()),
            counts[0],
            counts[1],
            self.load_time_s,
        )

    def _replay(
        self,
        coordinator: GroupCoordinator,
        index: int,
        batch: LogBatch,
        counts: list[int],
        legacy: dict[bytes, bool],
    ) -> None:
        if batch.marker_commit is not None:
            coordinator.load_marker(batch.producer_id, batch.marker_commit, index)
            return
        records = batch.records
        pid = batch.producer_id if batch.transactional else -1
        at = [0]  # the record load() is on: where to go on after an undecodable one

        def pairs(start: int) -> Iterator[tuple[bytes, bytes | None]]:
            for i in range(start, len(records)):
                at[0] = i
                _, key, value = records[i]
                if key is not None:
                    yield key, value

        start = 0
        bad: list[int] = []
        while start < len(records):
            try:
                coordinator.load(pairs(start), pid)
                break
            except OffsetsCodecError as exc:
                skip_undecodable(log, CONSUMER_OFFSETS_TOPIC, index, records[at[0]][0], exc)
                bad.append(at[0])
                start = at[0] + 1
        counts[1] += len(bad)
        for i, (_, key, value) in enumerate(records):
            if key is None:
                continue
            if key[2:4] == b"\x00\x00" and (not bad or i not in bad) and maybe_legacy_key(key):
                legacy[key] = value is not None
            counts[0] += 1
        counts[0] -= len(bad)
        loaded, total = self.load_progress
        self.load_progress = (loaded + len(records), total)

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
        if not self.coordinator.loaded:  # as the core would answer, before asking the txn one
            return commit_errors(req.topics, ErrorCode.coordinator_load_in_progress)
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
        self._reload()
        return out

    def _reload(self) -> None:
        """Rebuild the core from the log after a failed append: in the background when the
        event loop runs (requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS, as while
        Kafka reloads a partition), else at once."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self._load()
            return
        parts = self._ensure_topic()
        self.coordinator = GroupCoordinator(self.config)  # unloaded: LOAD_IN_PROGRESS
        self.runtime.spawn(self._load_in_background(parts))

    def perform(self, effect: object) -> None:
        raise AssertionError(f"the group coordinator has no effect {effect!r}")
