"""GroupService's background load of ``__consumer_offsets``: every group API answers
COORDINATOR_LOAD_IN_PROGRESS (Heartbeat: NONE, as Kafka's) until the group's partition is
loaded (the unloaded core's answers), the groups of loaded partitions are served
meanwhile, a partition whose load fails answers NOT_COORDINATOR until a retry loads it, the
load yields to the event loop, a transaction marker written to an offsets partition while
the load runs is applied once (by the load's last pass), and a stop during the load ends
it."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from pathlib import Path

from kio.schema.errors import ErrorCode

from oncelog import hooks
from oncelog.broker.debug_settings import DebugSettings
from oncelog.broker.notifier import AppendNotifier
from oncelog.broker.producer_ids import ProducerIdAllocator
from oncelog.broker.topics import TopicRegistry
from oncelog.coordinator import loader as coordinator_loader
from oncelog.coordinator.internal_topics import CONSUMER_OFFSETS_TOPIC
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


def groups_on(partition: int, n: int) -> list[str]:
    core = GroupCoordinator(GroupConfig(offsets_topic_num_partitions=PARTS))
    ids = (f"g{i}" for i in range(10_000))
    return [g for g in ids if core.partition_for(g) == partition][:n]


def open_topics(path: Path) -> TopicRegistry:
    topics = TopicRegistry(path, {}, producer_id_expiration_ms=86_400_000)
    topics.load()
    return topics


def new_groups(
    topics: TopicRegistry,
    txn: TransactionService | None = None,
    *,
    load_wait_ms: int = 0,
    **config: object,
) -> GroupService:
    """``load_wait_ms`` 0 by default: requests are answered at once while loading, as
    Kafka's are. ``config``: other GroupConfig fields."""

    def no_txn(*args: object, **kwargs: object) -> ErrorCode:
        return E.none

    return GroupService(
        GroupConfig(offsets_topic_num_partitions=PARTS, load_wait_ms=load_wait_ms, **config),  # type: ignore[arg-type]
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
    reply = groups.committed_offsets(OffsetFetchRequest(group, None, require_stable=True))
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
        loader = groups.runtime.loader
        loader._begin(parts)
        steps = loader._load_steps(0)
        next(steps)  # one batch of partition 0 replayed, its end fixed
        assert not groups.loaded
        marker = TxnMarker(pid, epoch, commit=True, coordinator_epoch=0)
        assert markers.write(CONSUMER_OFFSETS_TOPIC, 0, marker, now_ms=1) is E.none
        for _ in steps:
            pass
        for index in (1, 2):
            for _ in loader._load_steps(index):
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
    monkeypatch.setattr(coordinator_loader, "LOAD_SLICE_S", 0.0)  # type: ignore[attr-defined]
    topics = open_topics(tmp_path)

    async def scenario() -> None:
        groups = new_groups(topics)
        groups.start(background=True)
        assert not groups.loaded
        assert (await groups.fetch_offsets(OffsetFetchRequest(group, None))).error is LOADING
        assert (await groups.commit_offsets(commit(group, 0, 1))).topics == (
            ("t", ((0, LOADING),)),
        )
        txn_req = TxnOffsetCommitRequest(TXN, group, 1, 0, (("t", (CommitPartition(0, 1),)),))
        assert (await groups.txn_commit_offsets(txn_req)).topics == (("t", ((0, LOADING),)),)
        join = JoinGroupRequest(group, "", "consumer", (("range", b""),), 10_000)
        assert (await groups.join(join)).error is LOADING
        assert (await groups.sync(SyncGroupRequest(group, 1, "m"))).error is LOADING
        # Kafka's Heartbeat answers NONE while the group's partition loads ("blindly").
        assert (await groups.heartbeat(HeartbeatRequest(group, 1, "m"))).error is E.none
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
    monkeypatch.setattr(coordinator_loader, "LOAD_SLICE_S", 0.0)  # type: ignore[attr-defined]
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
        self.gone_partitions: set[int] = set()  # only these, while ``gone`` is False

    def partition(self, name: str, index: int) -> object:
        if name == CONSUMER_OFFSETS_TOPIC and (self.gone or index in self.gone_partitions):
            return None
        return self.topics.partition(name, index)

    def ensure_internal_topic(self, *args: object, **kwargs: object) -> object:
        return self.topics.ensure_internal_topic(*args, **kwargs)  # type: ignore[arg-type]

    def partition_count(self, name: str) -> int | None:
        return self.topics.partition_count(name)


def test_a_failed_append_reloads_in_the_background(tmp_path: Path, monkeypatch: object) -> None:
    group = group_on(1)
    write_history(tmp_path, group, 200)
    monkeypatch.setattr(coordinator_loader, "LOAD_SLICE_S", 0.0)  # type: ignore[attr-defined]
    topics = open_topics(tmp_path)
    lookup = OffsetsGoneAway(topics)

    async def scenario() -> None:
        groups = new_groups(lookup)  # type: ignore[arg-type]
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
        assert (await groups.fetch_offsets(OffsetFetchRequest(group, None))).error is LOADING
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


def write_commits(path: Path, commits: dict[str, int]) -> None:
    """``commits[group]`` plain commits for each group (one batch each): the last one of
    t-p is ``commits - 4 + p`` for each p < 4."""
    topics = open_topics(path)
    if topics.partition_count("t") is None:
        topics.create("t", 4, {})
    groups = new_groups(topics)

    async def scenario() -> None:
        groups.start()
        for group, n in commits.items():
            for i in range(n):
                reply = await groups.commit_offsets(commit(group, i % 4, i))
                assert reply.topics == (("t", ((i % 4, E.none),)),)
        await groups.stop()

    try:
        asyncio.run(scenario())
    finally:
        topics.close()


def last_commits(n: int) -> dict[int, tuple[int, ErrorCode]]:
    return {p: (n - 4 + p, E.none) for p in range(4)}


def test_a_loaded_partition_is_served_while_another_loads(
    tmp_path: Path, monkeypatch: object
) -> None:
    """Kafka gates each __consumer_offsets partition on its own load: the groups of
    partition 0 (loaded first) are served while partition 2 (300 batches) still loads."""
    first, last = group_on(0), group_on(2)
    write_commits(tmp_path, {first: 8, last: 300})
    monkeypatch.setattr(coordinator_loader, "LOAD_SLICE_S", 0.0)  # type: ignore[attr-defined]
    topics = open_topics(tmp_path)

    async def scenario() -> None:
        groups = new_groups(topics)
        groups.start(background=True)
        try:
            await served_while_loading(groups)
        finally:
            await groups.stop()

    async def served_while_loading(groups: GroupService) -> None:
        while (await groups.fetch_offsets(OffsetFetchRequest(first, None))).error is LOADING:
            await asyncio.sleep(0)
        assert not groups.loaded
        assert groups.coordinator.loading() == [2]
        # Served: partition 0's group ...
        assert fetch(groups, first) == last_commits(8)
        assert (await groups.commit_offsets(commit(first, 0, 1000))).topics == (
            ("t", ((0, E.none),)),
        )
        beat = await groups.heartbeat(HeartbeatRequest(first, 1, "nobody"))
        assert beat.error is E.unknown_member_id
        join = JoinGroupRequest(first, "", "consumer", (("range", b""),), 10_000)
        assert (await groups.join(join)).error is E.member_id_required
        # ... not partition 2's, still loading (Heartbeat: NONE, "blindly", as Kafka).
        assert (await groups.fetch_offsets(OffsetFetchRequest(last, None))).error is LOADING
        assert (await groups.commit_offsets(commit(last, 0, 1))).topics == (("t", ((0, LOADING),)),)
        assert (await groups.heartbeat(HeartbeatRequest(last, 1, "nobody"))).error is E.none
        assert [d.error for d in groups.describe_groups([last, first], 5)] == [LOADING, E.none]
        absent = next(g for g in groups_on(0, 2) if g != first)
        assert (await groups.delete_groups([last, absent])).results == (
            (last, LOADING),
            (absent, E.group_id_not_found),
        )
        assert groups.list_groups().error is LOADING  # as Kafka: any partition loading
        while not groups.loaded:
            await asyncio.sleep(0)
        assert fetch(groups, first)[0] == (1000, E.none)
        assert fetch(groups, last) == last_commits(300)
        assert {g.group_id for g in groups.list_groups().groups} == {first, last}

    try:
        asyncio.run(scenario())
    finally:
        topics.close()


def test_a_failed_partition_answers_not_coordinator_until_a_retry_loads_it(
    tmp_path: Path, monkeypatch: object, caplog: object
) -> None:
    """Kafka answers NOT_COORDINATOR for a partition whose load failed; one node has no
    other broker to move it to, so the load is retried (after a back-off) until it works.
    The other partitions are served meanwhile."""
    ok, broken = group_on(0), group_on(1)
    write_commits(tmp_path, {ok: 8, broken: 12})
    monkeypatch.setattr(coordinator_loader, "LOAD_RETRY_MIN_S", 0.05)  # type: ignore[attr-defined]
    caplog.set_level(logging.INFO, logger=coordinator_loader.__name__)  # type: ignore[attr-defined]
    topics = open_topics(tmp_path)
    NOT_COORDINATOR = E.not_coordinator

    async def scenario() -> None:
        groups = GroupService(
            GroupConfig(offsets_topic_num_partitions=PARTS),
            topics=topics,
            verify_txn=lambda *a, **k: E.none,
        )
        with hooks.installed(DebugSettings(group_load_fail="1:2").hooks()):
            groups.start(background=True)
            try:
                await failed_then_retried(groups)
            finally:
                await groups.stop()

    async def failed_then_retried(groups: GroupService) -> None:
        while groups.coordinator.failed() != [1] or groups.coordinator.loading():
            await asyncio.sleep(0)
        assert (
            await groups.fetch_offsets(OffsetFetchRequest(broken, None))
        ).error is NOT_COORDINATOR
        assert (await groups.commit_offsets(commit(broken, 0, 1))).topics == (
            ("t", ((0, NOT_COORDINATOR),)),
        )
        txn_req = TxnOffsetCommitRequest(TXN, broken, 1, 0, (("t", (CommitPartition(0, 1),)),))
        assert (await groups.txn_commit_offsets(txn_req)).topics == (
            ("t", ((0, NOT_COORDINATOR),)),
        )
        beat = await groups.heartbeat(HeartbeatRequest(broken, 1, "m"))
        assert beat.error is NOT_COORDINATOR  # only a loading partition answers NONE
        join = JoinGroupRequest(broken, "", "consumer", (("range", b""),), 10_000)
        assert (await groups.join(join)).error is NOT_COORDINATOR
        assert fetch(groups, ok) == last_commits(8)
        # As Kafka: a failed partition lists nothing, the others list their groups.
        listed = groups.list_groups()
        assert (listed.error, [g.group_id for g in listed.groups]) == (E.none, [ok])
        while not groups.loaded:
            await asyncio.sleep(0.01)
        assert fetch(groups, broken) == last_commits(12)
        assert (await groups.commit_offsets(commit(broken, 0, 99))).topics == (
            ("t", ((0, E.none),)),
        )

    try:
        asyncio.run(scenario())
    finally:
        topics.close()
    messages = [r.getMessage() for r in caplog.records]  # type: ignore[attr-defined]
    failed = [m for m in messages if m.startswith("loading __consumer_offsets-1 failed")]
    assert [m.split(" (")[1].split(")")[0] for m in failed] == ["attempt 1", "attempt 2"]
    assert all("its groups answer NOT_COORDINATOR" in m for m in failed)
    assert "loaded __consumer_offsets-1 after 2 failed attempts; its groups are served" in messages


def test_a_failed_append_reloads_only_its_partition_while_another_loads(
    tmp_path: Path, monkeypatch: object
) -> None:
    """A failed append to a loaded partition while a later one still loads: only the failed
    partition's core is rebuilt from its log (the load under way goes on), and the failed
    commit is not there."""
    first, last = group_on(0), group_on(2)
    write_commits(tmp_path, {first: 8, last: 300})
    monkeypatch.setattr(coordinator_loader, "LOAD_SLICE_S", 0.0)  # type: ignore[attr-defined]
    topics = open_topics(tmp_path)
    lookup = OffsetsGoneAway(topics)

    async def scenario() -> None:
        groups = new_groups(lookup)  # type: ignore[arg-type]
        groups.start(background=True)
        try:
            await fail_while_loading(groups)
        finally:
            await groups.stop()

    async def fail_while_loading(groups: GroupService) -> None:
        while (await groups.fetch_offsets(OffsetFetchRequest(first, None))).error is LOADING:
            await asyncio.sleep(0)
        assert groups.coordinator.loading() == [2]
        lookup.gone = True
        failed = await groups.commit_offsets(commit(first, 1, 5000))
        assert failed.topics == (("t", ((1, E.coordinator_not_available),)),)
        lookup.gone = False
        assert groups.coordinator.loading() == [0, 2]
        while not groups.loaded:
            await asyncio.sleep(0)
        assert fetch(groups, first) == last_commits(8)
        assert fetch(groups, last) == last_commits(300)
        for _ in range(3):
            await asyncio.sleep(0)  # the loader ends
        assert len(groups.runtime._tasks) == 1  # the timer
        assert groups.load_progress == (308, 308)

    try:
        asyncio.run(scenario())
    finally:
        topics.close()


def test_a_failed_append_leaves_the_other_partitions_parked_requests_alone(
    tmp_path: Path,
) -> None:
    """A JoinGroup parked in partition 1's rebalance is answered normally although an
    append to partition 0 failed meanwhile (it used to be failed along with every core)."""
    broken, healthy = group_on(0), group_on(1)
    write_commits(tmp_path, {broken: 4})
    topics = open_topics(tmp_path)
    lookup = OffsetsGoneAway(topics)

    async def scenario() -> None:
        groups = new_groups(lookup, initial_rebalance_delay_ms=300)  # type: ignore[arg-type]
        groups.start()
        try:
            first = JoinGroupRequest(healthy, "", "consumer", (("range", b""),), 10_000)
            required = await groups.join(first)
            assert required.error is E.member_id_required
            rejoin = dataclasses.replace(first, member_id=required.member_id)
            parked = asyncio.ensure_future(groups.join(rejoin))
            await asyncio.sleep(0.05)
            assert not parked.done()  # waiting out group.initial.rebalance.delay.ms
            lookup.gone_partitions = {0}
            failed = await groups.commit_offsets(commit(broken, 1, 5000))
            assert failed.topics == (("t", ((1, E.coordinator_not_available),)),)
            lookup.gone_partitions = set()
            assert groups.coordinator.loading() == [0]
            joined = await asyncio.wait_for(parked, 10)
            assert (joined.error, joined.generation_id) == (E.none, 1)
            while not groups.loaded:
                await asyncio.sleep(0.01)
            assert fetch(groups, broken) == last_commits(4)
        finally:
            await groups.stop()

    try:
        asyncio.run(scenario())
    finally:
        topics.close()


def test_a_request_waits_for_its_partition_which_loads_next(
    tmp_path: Path, monkeypatch: object
) -> None:
    """``oncelog.group.load.wait.ms``: a request for a group whose partition is still
    loading waits for the load instead of getting COORDINATOR_LOAD_IN_PROGRESS (librdkafka
    fails a commit after two quick retries), and its partition is loaded next."""
    first, middle, last = group_on(0), group_on(1), group_on(2)
    write_commits(tmp_path, {first: 200, middle: 200, last: 200})
    monkeypatch.setattr(coordinator_loader, "LOAD_SLICE_S", 0.0)  # type: ignore[attr-defined]
    topics = open_topics(tmp_path)

    async def scenario() -> None:
        groups = new_groups(topics, load_wait_ms=60_000)
        groups.start(background=True)
        try:
            assert groups.coordinator.loading() == [0, 1, 2]
            reply = await groups.commit_offsets(commit(last, 0, 1000))
            assert reply.topics == (("t", ((0, E.none),)),)
            # Partition 2 went before partition 1, which still loads.
            assert 1 in groups.coordinator.loading()
            assert 2 not in groups.coordinator.loading()
            assert fetch(groups, last)[0] == (1000, E.none)
            fetched = await groups.fetch_offsets(OffsetFetchRequest(middle, None))
            assert fetched.error is E.none
            assert {p.offset for _, parts in fetched.topics for p in parts} == {196, 197, 198, 199}
        finally:
            await groups.stop()

    try:
        asyncio.run(scenario())
    finally:
        topics.close()


def test_a_request_waits_at_most_the_load_wait(tmp_path: Path) -> None:
    """A load slower than ``oncelog.group.load.wait.ms`` gets Kafka's answer after it."""
    group = group_on(0)
    write_commits(tmp_path, {group: 4})
    topics = open_topics(tmp_path)

    async def scenario() -> None:
        groups = new_groups(topics, load_wait_ms=50)
        debug = DebugSettings(group_load_partition_delay_ms=10_000)
        with hooks.installed(debug.hooks()):
            groups.start(background=True)
            await waits_at_most_the_load_wait(groups)

    async def waits_at_most_the_load_wait(groups: GroupService) -> None:
        try:
            started = time.monotonic()
            reply = await groups.commit_offsets(commit(group, 0, 9))
            waited = time.monotonic() - started
            assert reply.topics == (("t", ((0, LOADING),)),)
            assert 0.05 <= waited < 5
            assert groups.runtime.loader._waiters.get(0, []) == []  # the timed-out waiter is gone
        finally:
            await groups.stop()

    try:
        asyncio.run(scenario())
    finally:
        topics.close()


def test_a_waiting_request_gets_not_coordinator_when_the_load_fails(tmp_path: Path) -> None:
    broken = group_on(0)
    write_commits(tmp_path, {broken: 4})
    topics = open_topics(tmp_path)

    async def scenario() -> None:
        groups = new_groups(topics, load_wait_ms=5_000)
        with hooks.installed(DebugSettings(group_load_fail="0:1").hooks()):
            groups.start(background=True)
            await not_coordinator_when_the_load_fails(groups)

    async def not_coordinator_when_the_load_fails(groups: GroupService) -> None:
        try:
            started = time.monotonic()
            join = JoinGroupRequest(broken, "", "consumer", (("range", b""),), 10_000)
            assert (await groups.join(join)).error is E.not_coordinator
            assert time.monotonic() - started < 0.9  # woken by the failure, not the retry
        finally:
            await groups.stop()

    try:
        asyncio.run(scenario())
    finally:
        topics.close()
