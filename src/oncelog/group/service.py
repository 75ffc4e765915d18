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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TypeVar

from kio.schema.errors import ErrorCode

from oncelog.clock import Clock, now_ms
from oncelog.coordinator.internal_topics import (
    CONSUMER_OFFSETS_TOPIC,
    CoordinatorLog,
    InternalTopics,
    internal_topic_config,
    skip_undecodable,
)
from oncelog.coordinator.runtime import (
    Append,
    CoordinatorRuntime,
    Pending,
    client_error,
)
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
    ResolveRegexes,
    SyncGroupReply,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
    failed_replies,
)
from oncelog.group.offsets import commit_errors
from oncelog.group.offsets_codec import OffsetsCodecError
from oncelog.group.partitioned import PartitionedGroups
from oncelog.group.topic_regex import resolve_topic_regexes
from oncelog.storage.group_sync import GroupSync
from oncelog.storage.replay import LogBatch

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
        self.coordinator = PartitionedGroups(config)
        # Per group with a regex resolution pending, who may see which topic: the
        # principal of the heartbeat that asked for it (the core schedules one at a time).
        self._regex_viewers: dict[str, Callable[[str], bool]] = {}
        self.skipped_records = 0  # undecodable __consumer_offsets records seen at load
        self.migrated_records = 0  # legacy-layout keys rewritten in Kafka's layout at start
        # Called once a background load is done (the broker's run freezes the loaded
        # state out of the garbage collector's full passes, as it does for what its start
        # loaded).
        self.on_loaded: list[Callable[[], None]] = []
        self._timer_started = False
        self._started_up = False
        # The last load of each partition: keyed records loaded (undecodable ones not),
        # undecodable records skipped, and legacy-layout keys (-> their latest record is a
        # value).
        self._records: dict[int, int] = {}
        self._skipped: dict[int, int] = {}
        self._legacy_keys: dict[int, dict[bytes, bool]] = {}
        self.runtime: CoordinatorRuntime[Reply, ResolveRegexes] = CoordinatorRuntime(
            name="group coordinator",
            topic=CONSUMER_OFFSETS_TOPIC,
            partitions=topics,
            feedback=self,
            clock=clock,
            durable=durable,
            playback=self,
            served="groups",
        )

    # -- lifecycle ---------------------------------------------------------------------

    def start(self, *, background: bool = False) -> None:
        """Create/load ``__consumer_offsets`` and start the coordinator's timers.

        ``background`` (the broker's start): the runtime's loader loads each partition on
        the event loop while the broker serves, as Kafka loads each coordinator partition;
        a partition's groups get COORDINATOR_LOAD_IN_PROGRESS until it is loaded, and
        NOT_COORDINATOR while its load has failed (see ``coordinator.loader``). Otherwise
        the load runs to completion here (and a failure raises)."""
        parts = self._ensure_topic()
        self.coordinator = PartitionedGroups(self.config)  # every partition loading
        self._records, self._skipped, self._legacy_keys = {}, {}, {}
        if background:
            self._start_timer()  # loaded partitions' timers run while the others load
        self.runtime.loader.start(parts, background=background)

    def _ensure_topic(self) -> Sequence[CoordinatorLog]:
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
        """Every ``__consumer_offsets`` partition is loaded."""
        return self.coordinator.loaded

    @property
    def load_progress(self) -> tuple[int, int]:
        """(records replayed, offsets to replay) of the load under way or last done."""
        return self.runtime.loader.progress

    @property
    def load_time_s(self) -> float:
        """How long the load of ``__consumer_offsets`` under way or last done took."""
        return self.runtime.loader.load_time_s

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition of ``group_id``."""
        return self.coordinator.partition_for(group_id)

    async def _await_load(self, group_id: str) -> None:
        """Kafka answers a request for a group whose partition is loading with
        COORDINATOR_LOAD_IN_PROGRESS, and the client retries; here it first waits for the
        load, at most ``oncelog.group.load.wait.ms`` (see ``coordinator.loader``)."""
        partition = self.coordinator.partition_for(group_id)
        await self.runtime.loader.until_loaded(partition, self.config.load_wait_ms / 1000)

    # -- the loader's playback -------------------------------------------------------------

    def begin_load(self, partition: int) -> _GroupReplay:
        self._records[partition] = self._skipped[partition] = 0
        self._legacy_keys[partition] = {}
        return _GroupReplay(self, partition, GroupCoordinator(self.config))

    def mark_loading(self, partition: int) -> None:
        self.coordinator.mark_loading(partition)

    def mark_failed(self, partition: int) -> None:
        self.coordinator.mark_failed(partition)

    def all_loaded(self) -> None:
        """Every partition is loaded: the "loaded" line, timers run, and (at start-up, not
        after a reload) legacy-layout records are rewritten."""
        self.skipped_records = sum(self._skipped.values())
        log.info(
            "loaded %d groups from %d records (%d undecodable, skipped) in %.3fs",
            len(self.coordinator.groups()),
            sum(self._records.values()),
            self.skipped_records,
            self.load_time_s,
        )
        self._start_timer()
        if not self._started_up:
            self._started_up = True
            self._migrate_legacy_layout()  # a failed append reloads; the next start retries
        callbacks, self.on_loaded = self.on_loaded, []
        for callback in callbacks:
            callback()

    def _start_timer(self) -> None:
        if self._timer_started:  # a reload after a failed append: the timer runs on
            return
        self._timer_started = True
        # Through self: a failed append replaces the coordinator.
        self.runtime.start_timer(
            lambda now: self.coordinator.tick(now),
            max_wait_ms=self.config.tick_max_ms,
            next_deadline=lambda: self.coordinator.next_deadline(),
        )

    def _replay(
        self,
        coordinator: GroupCoordinator,
        index: int,
        batch: LogBatch,
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
        self._skipped[index] += len(bad)
        legacy = self._legacy_keys[index]
        keyed = 0
        for i, (_, key, value) in enumerate(records):
            if key is None:
                continue
            if key[2:4] == b"\x00\x00" and (not bad or i not in bad) and maybe_legacy_key(key):
                legacy[key] = value is not None
            keyed += 1
        self._records[index] += keyed - len(bad)

    def _migrate_legacy_layout(self) -> None:
        """Rewrite the records a pre-Kafka-layout oncelog left (see layout_migration)."""
        live = {p: keys for p, keys in self._legacy_keys.items() if any(keys.values())}
        if not live:
            return
        step, count = self.coordinator.migrate_legacy(live)
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
        await self._await_load(req.group_id)
        step = self.coordinator.join_group(req, self._clock(), self._topic_metadata())
        return await self._call(step, JoinGroupReply)

    async def sync(self, req: SyncGroupRequest) -> SyncGroupReply:
        await self._await_load(req.group_id)
        return await self._call(self.coordinator.sync_group(req, self._clock()), SyncGroupReply)

    async def heartbeat(self, req: HeartbeatRequest) -> HeartbeatReply:
        return await self._call(self.coordinator.heartbeat(req, self._clock()), HeartbeatReply)

    async def leave(self, req: LeaveGroupRequest) -> LeaveGroupReply:
        await self._await_load(req.group_id)
        return await self._call(self.coordinator.leave_group(req, self._clock()), LeaveGroupReply)

    async def consumer_heartbeat(
        self, req: ConsumerHeartbeatRequest, *, describable: Callable[[str], bool] | None = None
    ) -> ConsumerHeartbeatReply:
        """``describable``: may the sender DESCRIBE this topic? A regex resolution the
        heartbeat triggers matches only such topics, as Kafka's (KAFKA-18813) resolves
        with the triggering request's principal; None: every topic."""
        await self._await_load(req.group_id)
        step = self.coordinator.consumer_heartbeat(req, self._topic_metadata(), self._clock())
        if step.effects:  # a resolution: it sees what this heartbeat's sender may see
            if describable is None:
                self._regex_viewers.pop(req.group_id, None)
            else:
                self._regex_viewers[req.group_id] = describable
        return await self._call(step, ConsumerHeartbeatReply)

    def consumer_group_describe(self, group_ids: Iterable[str]) -> list[DescribedConsumerGroup]:
        return self.coordinator.consumer_group_describe(group_ids)

    # -- offsets -----------------------------------------------------------------------

    async def commit_offsets(self, req: OffsetCommitRequest) -> CommitReply:
        await self._await_load(req.group_id)
        return await self._call(self.coordinator.offset_commit(req, self._clock()), CommitReply)

    async def txn_commit_offsets(
        self, req: TxnOffsetCommitRequest, *, fenced: ErrorCode = ErrorCode.producer_fenced
    ) -> CommitReply:
        """TxnOffsetCommit (KIP-98): the producer must hold an Ongoing transaction that
        added the group's offsets partition (AddOffsetsToTxn). ``fenced``: the error for a
        stale epoch in the caller's API version."""
        await self._await_load(req.group_id)
        unavailable = self.coordinator.unavailable(req.group_id)
        if unavailable is not None:  # as the core would answer, before asking the txn one
            return commit_errors(req.topics, unavailable)
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

    async def fetch_offsets(self, req: OffsetFetchRequest) -> OffsetFetchReply:
        await self._await_load(req.group_id)
        return self.coordinator.offset_fetch(req)

    def committed_offsets(self, req: OffsetFetchRequest) -> OffsetFetchReply:
        """OffsetFetch as the coordinator stands, without waiting for a load (inspection)."""
        return self.coordinator.offset_fetch(req)

    async def delete_offsets(self, req: OffsetDeleteRequest) -> OffsetDeleteReply:
        await self._await_load(req.group_id)
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
        """The cores of the partitions this step had yet to write (the one whose append
        failed, and those of the appends after it) are ahead of their logs: answer the
        step's replies and those partitions' parked requests with the error, then rebuild
        those cores from what their logs hold, as Kafka reloads a failed coordinator shard.
        The other partitions' groups go on undisturbed."""
        code = client_error(error)
        out: GroupStep = GroupStep(rest.reply if isinstance(rest.reply, Pending) else None)
        for token, reply in failed_replies(rest, code):
            if token is None:
                out.reply = reply
            else:
                out.resolved.append((token, reply))
        stale = sorted({append.partition, *(a.partition for a in rest.appends)})
        out.resolved.extend(self.coordinator.abandon(code, stale))
        self._reload(stale)
        return out

    def _reload(self, partitions: Sequence[int]) -> None:
        """Rebuild the cores of ``partitions`` from the log after a failed append (the
        runtime's loader: in the background when the event loop runs)."""
        self.runtime.loader.reload(partitions, self._ensure_topic())

    def perform(self, effect: ResolveRegexes) -> None:
        """Resolve a group's regexes after the step that asked for it, as Kafka's offloaded
        task does (GroupMetadataManager.maybeUpdateRegularExpressions): the heartbeat that
        brought a new regex is answered before its matches count, and the resolution's
        epoch bump is assigned on a later heartbeat."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self._resolve_regexes(effect)  # no event loop (tests of the service): at once
            return
        self.runtime.spawn(self._resolve_regexes_later(effect))

    async def _resolve_regexes_later(self, effect: ResolveRegexes) -> None:
        await asyncio.sleep(0)  # a task of its own: never inside the step that asked
        self._resolve_regexes(effect)

    def _resolve_regexes(self, effect: ResolveRegexes) -> None:
        topics = self._topic_metadata()
        now = self._clock()
        describable = self._regex_viewers.pop(effect.group_id, None)
        visible = topics if describable is None else [t for t in topics if describable(t)]
        resolved = resolve_topic_regexes(effect.regexes, visible)
        self.runtime.run(self.coordinator.regexes_resolved(effect.group_id, resolved, topics, now))


class _GroupReplay:
    """One load of one ``__consumer_offsets`` partition into a fresh core."""

    def __init__(self, service: GroupService, partition: int, core: GroupCoordinator) -> None:
        self._service = service
        self._partition = partition
        self._core = core

    def replay(self, batch: LogBatch) -> None:
        self._service._replay(self._core, self._partition, batch)

    def complete(self) -> None:
        self._core.finish_load(self._service._clock())
        self._service.coordinator.install(self._partition, self._core)
