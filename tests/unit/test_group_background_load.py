"""GroupService's background load of ``__consumer_offsets``: every group API answers
COORDINATOR_LOAD_IN_PROGRESS until the load is done (the unloaded core's answers), the
load yields to the event loop, a transaction marker written to an offsets partition while
the load runs is applied once (by the load's last pass), timers start only after it, and
a stop during the load ends it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kio.schema.errors import ErrorCode

from oncelog.broker.notifier import AppendNotifier
from oncelog.broker.producer_ids import ProducerIdAllocator
from oncelog.broker.topics import TopicRegistry
from oncelog.coordinator.internal_topics import CONSUMER_OFFSETS_TOPIC
from oncelog.group import service as group_service
from oncelog.group.config import GroupConfig
from oncelog.group.coordinator import GroupCoordinator
from oncelog.group.messages import (
    CommitPartition,
    ConsumerHeartbeatRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
)
from oncelog.group.service import GroupService
from oncelog.txn.config import TxnConfig
from oncelog.txn.marker_writer import MarkerWriter
from oncelog.txn.messages import TxnMarker
from oncelog.txn.service import TransactionService

E = ErrorCode
LOADING = E.coordinator_load_in_progress
PARTS = 3
TXN = "bg-txn"


def group_on(partition: int) -> str:
    core = GroupCoordinator(GroupConfig(offsets_topic_num_partitions=PARTS))
    return next(g for i in range(1000) if core.partition_for(g := f"g{i}") == partition)


def open_topics(path: Path) -> TopicRegistry:
    topics = TopicRegistry(path, {}, producer_id_expiration_ms=86_400_000)
    topics.load()
    return topics


def new_groups(topics: TopicRegistry, txn: TransactionService | None = None) -> GroupService:
    def no_txn(*args: object, **kwargs: object) -> ErrorCode:
        return E.none

    return GroupService(
        GroupConfig(offsets_topic_num_partitions=PARTS),
        topics=topics,
        verify_txn=no_txn if txn is None else txn.verify_in_transaction,
    )


def commit(group: str, partition: int, offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(group, (("t", (CommitPartition(partition, offset),)),))


def write_history(path: Path, group: str, commits: int) -> tuple[int, int]:
    """``commits`` plain commits for ``group`` (one batch each) and a transaction with a
    pending TxnOffsetCommit (offset 777 of t-0) and no marker yet; returns (pid, epoch)."""
    topics = open_topics(path)
    topics.create("t", 4, {})
    pids = ProducerIdAllocator(path / "meta" / "producer_ids.json")
    pids.load()
    markers = MarkerWriter(topics, AppendNotifier())
    txn = TransactionService(
        TxnConfig(txn_log_partitions=PARTS, offsets_partitions=PARTS),
        topics=topics,
        markers=markers,
        allocate_producer_id=pids.allocate,
        epoch_path=path / "meta" / "epoch.json",
    )
    groups = new_groups(topics, txn)
    markers.offsets_listener = groups.on_offsets_marker

    async def scenario() -> tuple[int, int]:
        groups.start()
        txn.start()
        for i in range(commits):
            reply = await groups.commit_offsets(commit(group, i % 4, i))
            assert reply.topics == (("t", ((i % 4, E.none),)),)
        init = await txn.init_producer_id(TXN, 60_000)
        pid, epoch = init.producer_id, init.producer_epoch
        assert (await txn.add_offsets(TXN, pid, epoch, group)).error is E.none
        req = TxnOffsetCommitRequest(TXN, group, pid, epoch, (("t", (CommitPartition(0, 777),)),))
        assert (await groups.txn_commit_offsets(req)).topics == (("t", ((0, E.none),)),)
        await txn.stop()
        await groups.stop()
        return pid, epoch

    try:
        return asyncio.run(scenario())
    finally:
        topics.close()


def fetch(groups: GroupService, group: str) -> dict[int, tuple[int, ErrorCode]]:
    reply = groups.fetch_offsets(OffsetFetchRequest(group, None, require_stable=True))
    assert reply.error is E.none
    return {p.partition: (p.offset, p.error) for _, parts in reply.topics for p in parts}


def test_a_marker_written_during_the_load_is_applied_once(tmp_path: Path) -> None:
    group = group_on(0)  # partition 0 is read first: the marker lands past its end
    pid, epoch = write_history(tmp_path, group, 40)
    topics = open_topics(tmp_path)
    try:
        groups = new_groups(topics)
        markers = MarkerWriter(topics, AppendNotifier(), groups.on_offsets_marker)
        parts = groups._ensure_topic()
        steps = groups._load_steps(parts)
        next(steps)  # one batch of partition 0 replayed, its end fixed
        assert not groups.loaded
        marker = TxnMarker(pid, epoch, commit=True, coordinator_epoch=0)
        assert markers.write(CONSUMER_OFFSETS_TOPIC, 0, marker, now_ms=1) is E.none
        for _ in steps:
            pass
        assert groups.loaded
        # 40 commits over 4 partitions (the last of each wins), then the committed
        # transaction's 777 for partition 0.
        assert fetch(groups, group) == {
            0: (777, E.none),
            1: (37, E.none),
            2: (38, E.none),
            3: (39, E.none),
        }
        assert groups.load_progress[0] == 41  # 40 commits and the transactional one
    finally:
        topics.close()


def test_apis_answer_load_in_progress_until_the_background_load_is_done(
    tmp_path: Path, monkeypatch: object
) -> None:
    group = group_on(1)
    write_history(tmp_path, group, 300)
    # Slices of no work at all: the load yields after every batch (300+ times).
    monkeypatch.setattr(group_service, "LOAD_SLICE_S", 0.0)  # type: ignore[attr-defined]
    topics = open_topics(tmp_path)

    async def scenario() -> None:
        groups = new_groups(topics)
        groups.start(background=True)
        assert not groups.loaded
        assert groups.fetch_offsets(OffsetFetchRequest(group, None)).error is LOADING
        assert (await groups.commit_offsets(commit(group, 0, 1))).topics == (
            ("t", ((0, LOADING),)),
        )
        txn_req = TxnOffsetCommitRequest(TXN, group, 1, 0, (("t", (CommitPartition(0, 1),)),))
        assert (await groups.txn_commit_offsets(txn_req)).topics == (("t", ((0, LOADING),)),)
        join = JoinGroupRequest(group, "", "consumer", (("range", b""),), 10_000)
        assert (await groups.join(join)).error is LOADING
        assert (await groups.sync(SyncGroupRequest(group, 1, "m"))).error is LOADING
        assert (await groups.heartbeat(HeartbeatRequest(group, 1, "m"))).error is LOADING
        assert (await groups.leave(LeaveGroupRequest(group, (("m", None),)))).error is LOADING
        assert groups.list_groups().error is LOADING
        assert [d.error for d in groups.describe_groups([group], 5)] == [LOADING]
        assert (await groups.delete_groups([group])).results == ((group, LOADING),)
        deleted = await groups.delete_offsets(OffsetDeleteRequest(group, (("t", (0,)),)))
        assert deleted.error is LOADING
        assert groups.config.consumer_protocol_enabled  # the default: KIP-848 APIs too
        beat = ConsumerHeartbeatRequest(group, "m", 0, subscribed_topic_names=("t",))
        assert (await groups.consumer_heartbeat(beat)).error is LOADING
        assert [d.error for d in groups.consumer_group_describe([group])] == [LOADING]
        seen_loading = 0
        while not groups.loaded:
            seen_loading += 1
            await asyncio.sleep(0)  # the event loop runs between the load's slices
        assert seen_loading > 10
        # t-0 waits for the open transaction's marker (require_stable).
        assert fetch(groups, group) == {
            0: (-1, E.unstable_offset_commit),
            1: (297, E.none),
            2: (298, E.none),
            3: (299, E.none),
        }
        assert groups.load_time_s > 0
        assert (await groups.commit_offsets(commit(group, 0, 1000))).topics == (
            ("t", ((0, E.none),)),
        )
        await groups.stop()

    try:
        asyncio.run(scenario())
    finally:
        topics.close()


def test_a_stop_during_the_load_ends_it(tmp_path: Path, monkeypatch: object) -> None:
    write_history(tmp_path, group_on(2), 200)
    monkeypatch.setattr(group_service, "LOAD_SLICE_S", 0.0)  # type: ignore[attr-defined]
    topics = open_topics(tmp_path)

    async def scenario() -> None:
        groups = new_groups(topics)
        groups.start(background=True)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        await groups.stop()
        assert not groups.loaded
        assert not groups.runtime._tasks

    try:
        asyncio.run(scenario())
    finally:
        topics.close()


class OffsetsGoneAway:
    """The broker's topics, except that while ``gone`` the ``__consumer_offsets``
    partitions cannot be found (an append fails with UNKNOWN_TOPIC_OR_PARTITION, which
    clients see as COORDINATOR_NOT_AVAILABLE)."""

    def __init__(self, topics: TopicRegistry) -> None:
        self.topics = topics
        self.gone = False

    def partition(self, name: str, index: int) -> object:
        if self.gone and name == CONSUMER_OFFSETS_TOPIC:
            return None
        return self.topics.partition(name, index)

    def ensure_internal_topic(self, *args: object, **kwargs: object) -> object:
        return self.topics.ensure_internal_topic(*args, **kwargs)  # type: ignore[arg-type]

    def partition_count(self, name: str) -> int | None:
        return self.topics.partition_count(name)


def test_a_failed_append_reloads_in_the_background(tmp_path: Path, monkeypatch: object) -> None:
    group = group_on(1)
    write_history(tmp_path, group, 200)
    monkeypatch.setattr(group_service, "LOAD_SLICE_S", 0.0)  # type: ignore[attr-defined]
    topics = open_topics(tmp_path)
    lookup = OffsetsGoneAway(topics)

    async def scenario() -> None:
        groups = GroupService(
            GroupConfig(offsets_topic_num_partitions=PARTS),
            topics=lookup,  # type: ignore[arg-type]
            verify_txn=lambda *a, **k: E.none,
        )
        groups.start(background=True)
        try:
            await failed_append_and_reload(groups)
        finally:
            await groups.stop()

    async def failed_append_and_reload(groups: GroupService) -> None:
        while not groups.loaded:
            await asyncio.sleep(0)
        lookup.gone = True
        failed = await groups.commit_offsets(commit(group, 1, 5000))
        assert failed.topics == (("t", ((1, E.coordinator_not_available),)),)
        lookup.gone = False
        # The core is rebuilt from the log in the background, not at once.
        assert not groups.loaded
        assert groups.fetch_offsets(OffsetFetchRequest(group, None)).error is LOADING
        while not groups.loaded:
            await asyncio.sleep(0)
        assert fetch(groups, group)[1] == (197, E.none)  # the failed commit is not there
        assert (await groups.commit_offsets(commit(group, 1, 5001))).topics == (
            ("t", ((1, E.none),)),
        )
        assert fetch(groups, group)[1] == (5001, E.none)
        for _ in range(3):
            await asyncio.sleep(0)  # the reload task ends after installing the core
        assert len(groups.runtime._tasks) == 1  # one timer: the reload started no other

    try:
        asyncio.run(scenario())
    finally:
        topics.close()
