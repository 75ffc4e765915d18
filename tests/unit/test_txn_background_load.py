"""TransactionService's background load of ``__transaction_state`` by the runtime's loader:
an id gets COORDINATOR_LOAD_IN_PROGRESS until its partition is loaded (also from the
"in this transaction?" check a Produce makes), the ids of loaded partitions are served
meanwhile, a request may wait for its partition (which loads next), and a loaded id keeps
its producer id and epoch."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kio.schema.errors import ErrorCode

from oncelog.broker.notifier import AppendNotifier
from oncelog.broker.producer_ids import ProducerIdAllocator
from oncelog.broker.topics import TopicRegistry
from oncelog.coordinator import loader as coordinator_loader
from oncelog.coordinator.placement import partition_for
from oncelog.txn.config import TxnConfig
from oncelog.txn.marker_writer import MarkerWriter
from oncelog.txn.service import TransactionService

E = ErrorCode
LOADING = E.coordinator_load_in_progress
PARTS = 3


def id_on(partition: int, n: int = 0) -> str:
    ids = (f"t{i}" for i in range(10_000))
    return [t for t in ids if partition_for(t, PARTS) == partition][n]


def new_txn(path: Path, topics: TopicRegistry, **config: object) -> TransactionService:
    pids = ProducerIdAllocator(path / "meta" / "producer_ids.json")
    pids.load()
    return TransactionService(
        TxnConfig(txn_log_partitions=PARTS, offsets_partitions=PARTS, **config),  # type: ignore[arg-type]
        topics=topics,
        markers=MarkerWriter(topics, AppendNotifier()),
        allocate_producer_id=pids.allocate,
        epoch_path=path / "meta" / "epoch.json",
    )


def open_topics(path: Path) -> TopicRegistry:
    topics = TopicRegistry(path, {}, producer_id_expiration_ms=86_400_000)
    topics.load()
    return topics


def write_ids(path: Path, per_partition: dict[int, int]) -> dict[str, tuple[int, int]]:
    """``per_partition[p]`` InitProducerIds of one id on partition p (the last one's
    (producer id, epoch) is returned per id)."""
    topics = open_topics(path)
    txn = new_txn(path, topics)

    async def scenario() -> dict[str, tuple[int, int]]:
        txn.start()
        out = {}
        for partition, n in per_partition.items():
            txn_id = id_on(partition)
            for _ in range(n):
                reply = await txn.init_producer_id(txn_id, 60_000)
                assert reply.error is E.none
                out[txn_id] = (reply.producer_id, reply.producer_epoch)
        await txn.stop()
        return out

    try:
        return asyncio.run(scenario())
    finally:
        topics.close()


def test_ids_are_served_as_their_partition_loads(tmp_path: Path, monkeypatch: object) -> None:
    written = write_ids(tmp_path, {0: 2, 2: 300})
    first, last = id_on(0), id_on(2)
    monkeypatch.setattr(coordinator_loader, "LOAD_SLICE_S", 0.0)  # type: ignore[attr-defined]
    topics = open_topics(tmp_path)

    async def scenario() -> None:
        txn = new_txn(tmp_path, topics, load_wait_ms=0)
        txn.start(background=True)
        try:
            assert not txn.loaded
            assert (await txn.init_producer_id(last, 60_000)).error is LOADING
            pid, epoch = written[last]
            assert txn.verify_in_transaction(last, pid, epoch, ("out", 0)) is LOADING
            while not txn.runtime.loader.is_loaded(0):
                await asyncio.sleep(0)
            assert not txn.loaded  # partition 2's 300 records still load
            # Served: partition 0's id, with its epoch bumped from the loaded state.
            reply = await txn.init_producer_id(first, 60_000)
            assert (reply.error, reply.producer_id) == (E.none, written[first][0])
            assert reply.producer_epoch == written[first][1] + 1
            assert (await txn.end_txn(last, pid, epoch, True)).error is LOADING
            while not txn.loaded:
                await asyncio.sleep(0)
            assert txn.coordinator.num_transactional_ids == 2
            reply = await txn.init_producer_id(last, 60_000)
            assert (reply.producer_id, reply.producer_epoch) == (pid, epoch + 1)
        finally:
            await txn.stop()

    try:
        asyncio.run(scenario())
    finally:
        topics.close()


def test_a_request_waits_for_its_partition_which_loads_next(
    tmp_path: Path, monkeypatch: object
) -> None:
    written = write_ids(tmp_path, {0: 200, 1: 200, 2: 200})
    monkeypatch.setattr(coordinator_loader, "LOAD_SLICE_S", 0.0)  # type: ignore[attr-defined]
    topics = open_topics(tmp_path)

    async def scenario() -> None:
        txn = new_txn(tmp_path, topics)  # the default wait
        txn.start(background=True)
        try:
            last = id_on(2)
            reply = await txn.init_producer_id(last, 60_000)
            assert (reply.error, reply.producer_id) == (E.none, written[last][0])
            assert not txn.runtime.loader.is_loaded(1)  # partition 2 went before it
        finally:
            await txn.stop()

    try:
        asyncio.run(scenario())
    finally:
        topics.close()
