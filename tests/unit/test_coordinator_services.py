"""TransactionService and GroupService wired as the broker wires them, over real partition
logs (no sockets): the async API, the one "in this transaction?" rule with Kafka's codes,
and one EndTxn from the transaction log through the markers to the group's offsets."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from oncelog.broker.notifier import AppendNotifier
from oncelog.broker.producer_ids import ProducerIdAllocator
from oncelog.broker.topics import TopicRegistry
from oncelog.coordinator.internal_topics import CONSUMER_OFFSETS_TOPIC
from oncelog.group.config import GroupConfig
from oncelog.group.messages import CommitPartition, OffsetFetchRequest, TxnOffsetCommitRequest
from oncelog.group.service import GroupService
from oncelog.txn.config import TxnConfig
from oncelog.txn.marker_writer import MarkerWriter
from oncelog.txn.service import TransactionService

E = ErrorCode
TXN, GROUP = "svc-txn", "svc-group"


@dataclass
class Services:
    topics: TopicRegistry
    txn: TransactionService
    groups: GroupService


@pytest.fixture
def wired(tmp_path: Path) -> Iterator[Services]:
    topics = TopicRegistry(tmp_path, {}, producer_id_expiration_ms=86_400_000)
    topics.load()
    topics.create("out", 2, {})
    pids = ProducerIdAllocator(tmp_path / "meta" / "producer_ids.json")
    pids.load()
    markers = MarkerWriter(topics, AppendNotifier())
    txn = TransactionService(
        TxnConfig(txn_log_partitions=3, offsets_partitions=3),
        topics=topics,
        markers=markers,
        allocate_producer_id=pids.allocate,
        epoch_path=tmp_path / "meta" / "epoch.json",
    )
    groups = GroupService(
        GroupConfig(offsets_topic_num_partitions=3),
        topics=topics,
        verify_txn=txn.verify_in_transaction,
    )
    markers.offsets_listener = groups.on_offsets_marker
    yield Services(topics, txn, groups)
    topics.close()


def commit_request(pid: int, epoch: int, offset: int) -> TxnOffsetCommitRequest:
    return TxnOffsetCommitRequest(TXN, GROUP, pid, epoch, (("out", (CommitPartition(0, offset),)),))


def test_in_transaction_rule_and_end_txn_through_markers_to_group_offsets(wired: Services) -> None:
    txn, groups = wired.txn, wired.groups
    offsets_tp = (CONSUMER_OFFSETS_TOPIC, groups.coordinator.partition_for(GROUP))
    fetch = OffsetFetchRequest(GROUP, (("out", (0,)),), require_stable=True)

    async def scenario() -> None:
        groups.start()
        txn.start()
        init = await txn.init_producer_id(TXN, 60_000)
        pid, epoch = init.producer_id, init.producer_epoch
        assert (await txn.init_producer_id(None, 60_000)).producer_id == pid + 1  # idempotent
        assert (
            txn.verify_in_transaction("nobody", pid, epoch, ("out", 0))
            is E.invalid_producer_id_mapping
        )
        assert txn.verify_in_transaction(None, pid, epoch, ("out", 0)) is E.invalid_txn_state
        assert (await txn.add_partitions(TXN, pid, epoch, [("out", 0)])).error is E.none
        assert txn.verify_in_transaction(TXN, pid, epoch, ("out", 0)) is E.none
        assert txn.verify_in_transaction(TXN, pid, epoch, ("out", 1)) is E.invalid_txn_state
        assert txn.verify_in_transaction(TXN, pid, epoch + 1, ("out", 0)) is E.producer_fenced
        stale = txn.verify_in_transaction(
            TXN, pid, epoch + 1, ("out", 0), fenced=E.invalid_producer_epoch
        )
        assert stale is E.invalid_producer_epoch
        unknown = await txn.add_partitions(TXN, pid, epoch, [("out", 0), ("gone", 0)])
        assert unknown.partition_errors == {
            ("out", 0): E.operation_not_attempted,
            ("gone", 0): E.unknown_topic_or_partition,
        }
        # TxnOffsetCommit checks the same rule: the offsets partition is not added yet.
        early = await groups.txn_commit_offsets(commit_request(pid, epoch, 5))
        assert early.topics == (("out", ((0, E.invalid_txn_state),)),)
        fenced = await groups.txn_commit_offsets(
            commit_request(pid, epoch + 1, 5), fenced=E.invalid_producer_epoch
        )
        assert fenced.topics == (("out", ((0, E.invalid_producer_epoch),)),)
        assert (await txn.add_offsets(TXN, pid, epoch, GROUP)).error is E.none
        assert txn.verify_in_transaction(TXN, pid, epoch, offsets_tp) is E.none
        ok = await groups.txn_commit_offsets(commit_request(pid, epoch, 5))
        assert ok.topics == (("out", ((0, E.none),)),)
        [part] = (await groups.fetch_offsets(fetch)).topics[0][1]
        assert part.error is E.unstable_offset_commit
        assert (await txn.end_txn(TXN, pid, epoch, True)).error is E.none
        for _ in range(100):  # markers are written after the EndTxn reply
            if txn.coordinator.describe(TXN).state.kafka_name == "CompleteCommit":  # type: ignore[union-attr]
                break
            await asyncio.sleep(0.01)
        [part] = (await groups.fetch_offsets(fetch)).topics[0][1]
        assert (part.error, part.offset) == (E.none, 5)
        [(_, meta)] = txn.describe_transactions([TXN])
        assert meta is not None and meta.partitions == set()
        assert [m.transactional_id for m in txn.list_transactions(["CompleteCommit"])] == [TXN]
        await txn.stop()
        await groups.stop()

    asyncio.run(scenario())
    # The COMMIT marker landed in the offsets partition after the transactional offset batch.
    offsets_log = wired.topics.partition(*offsets_tp)
    assert (
        offsets_log is not None
        and offsets_log.last_stable_offset == offsets_log.log_end_offset == 2
    )


def test_markers_of_transactions_ended_together_and_a_failed_marker_write(
    wired: Services,
) -> None:
    """Two transactions end in the same loop iteration: one callback writes both sets of
    markers. A storage error on one marker retries that transaction alone (after a
    back-off); the other completes at once, and each partition gets exactly one marker."""
    from oncelog.records.batch import parse_header
    from oncelog.records.builder import build_batch

    txn = wired.txn
    real_write = txn._markers.write
    failures: list[tuple[str, int]] = []

    def flaky_write(topic: str, partition: int, *args: object, **kwargs: object) -> ErrorCode:
        if (topic, partition) == ("out", 0) and not failures:
            failures.append((topic, partition))
            raise OSError(5, "injected EIO")
        return real_write(topic, partition, *args, **kwargs)  # type: ignore[arg-type]

    txn._markers.write = flaky_write  # type: ignore[method-assign]

    def state(txn_id: str) -> str:
        meta = txn.coordinator.describe(txn_id)
        assert meta is not None
        return meta.state.kafka_name

    async def scenario() -> None:
        txn.start()
        ids = {}
        for index, txn_id in enumerate(["ta", "tb"]):
            init = await txn.init_producer_id(txn_id, 60_000)
            pid, epoch = init.producer_id, init.producer_epoch
            ids[txn_id] = (pid, epoch)
            assert (await txn.add_partitions(txn_id, pid, epoch, [("out", index)])).error is E.none
            raw = bytearray(
                build_batch(
                    [(None, b"v", None, 1)],
                    producer_id=pid,
                    producer_epoch=epoch,
                    base_sequence=0,
                    transactional=True,
                )
            )
            part = wired.topics.partition("out", index)
            assert part is not None
            part.append(raw, parse_header(raw), now_ms=1)
        replies = await asyncio.gather(
            *(txn.end_txn(t, *ids[t], True) for t in ("ta", "tb"))  # ta's marker fails once
        )
        assert [r.error for r in replies] == [E.none, E.none]
        await asyncio.sleep(0.02)  # well within the retry back-off (0.1 s)
        assert failures == [("out", 0)]
        assert (state("ta"), state("tb")) == ("PrepareCommit", "CompleteCommit")
        for _ in range(100):
            if state("ta") == "CompleteCommit":
                break
            await asyncio.sleep(0.01)
        assert state("ta") == "CompleteCommit"
        await txn.stop()

    asyncio.run(scenario())
    for index in (0, 1):
        log = wired.topics.partition("out", index)
        assert log is not None
        # the data batch and exactly one COMMIT marker; nothing left open
        assert log.last_stable_offset == log.log_end_offset == 2
