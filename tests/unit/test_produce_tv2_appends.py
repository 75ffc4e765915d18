"""A transaction-version-2 Produce (v12) for partitions its transaction does not hold
yet adds them first, then appends each partition's batch once (Kafka's
AddPartitionsToTxnManager runs before the append, not after a refused one)."""

from __future__ import annotations

import asyncio
import datetime
import time
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.produce.v12 import request as pr

from oncelog.broker import partition_writer
from oncelog.broker.apis.produce import produce
from oncelog.broker.broker import Broker
from oncelog.broker.config import BrokerConfig
from oncelog.broker.request import Deferred, RequestContext
from oncelog.protocol.messages import RequestHeader
from oncelog.protocol.produce_wire import EncodedResponse
from oncelog.records.builder import build_batch
from oncelog.storage.unified_log import UnifiedLog
from oncelog.txn.metadata import TV_2

T = datetime.timedelta(seconds=30)


def _request(topic: str, partitions: range, pid: int, epoch: int, seq: int) -> Any:
    def batch(p: int) -> bytes:
        return build_batch(
            [(None, b"v%d" % p, None, int(time.time() * 1000))],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            transactional=True,
        )

    return pr.ProduceRequest(
        transactional_id="tv2",
        acks=-1,
        timeout=T,
        topic_data=(
            pr.TopicProduceData(
                name=topic,
                partition_data=tuple(
                    pr.PartitionProduceData(index=p, records=batch(p)) for p in partitions
                ),
            ),
        ),
    )


async def _errors(ctx: RequestContext, request: Any) -> list[ErrorCode]:
    answer = produce(ctx, request)
    if isinstance(answer, Deferred):
        answer = await answer.response
    if isinstance(answer, EncodedResponse):  # the all-success answer, encoded by hand
        return [ErrorCode.none] * sum(len(t.partition_data) for t in request.topic_data)
    return [p.error_code for t in answer.responses for p in t.partition_responses]


def test_a_tv2_produce_appends_each_partition_once(tmp_path: Path, monkeypatch: Any) -> None:
    appends: list[UnifiedLog] = []
    validations: list[int] = []
    real_validate = partition_writer.validate_produce_batch

    def counting_validate(*args: Any, **kwargs: Any) -> Any:
        validations.append(1)
        return real_validate(*args, **kwargs)

    watched: set[int] = set()  # the topic's logs (the coordinator appends to its own too)
    real_append = UnifiedLog.append

    def counting_append(self: UnifiedLog, *args: Any, **kwargs: Any) -> Any:
        if id(self) in watched:
            appends.append(self)
        return real_append(self, *args, **kwargs)

    async def run() -> None:
        config = BrokerConfig.build(overrides={"log.dirs": str(tmp_path / "data")})
        broker = Broker(config, listen=("127.0.0.1", 0))
        await broker.start()
        try:
            broker.topics.create("t", 3, {})
            watched.update(id(broker.topics.partition("t", p)) for p in range(3))
            while not broker.txn.loaded:
                await asyncio.sleep(0.01)
            init = await broker.txn.init_producer_id("tv2", 60_000)
            assert init.error is ErrorCode.none
            ctx = RequestContext(broker, RequestHeader(0, 12, 1, "test"), 1, "test")
            monkeypatch.setattr(UnifiedLog, "append", counting_append)
            monkeypatch.setattr(partition_writer, "validate_produce_batch", counting_validate)
            first = _request("t", range(3), init.producer_id, init.producer_epoch, 0)
            assert await _errors(ctx, first) == [ErrorCode.none] * 3
            # One validation and one append per partition: the implicit add came first,
            # not after a refused attempt.
            assert len(validations) == 3
            assert len(appends) == 3 and len(set(map(id, appends))) == 3, appends
            # The partitions are in the transaction now: a second batch appends at once.
            second = _request("t", range(3), init.producer_id, init.producer_epoch, 1)
            assert not isinstance(produce(ctx, second), Deferred)
            assert len(appends) == 6 and len(validations) == 6
            described = broker.txn.list_transactions()
            assert [m.transactional_id for m in described] == ["tv2"]
            assert described[0].client_transaction_version == TV_2
            assert described[0].partitions == {("t", 0), ("t", 1), ("t", 2)}
        finally:
            monkeypatch.undo()
            await broker.stop()

    asyncio.run(run())
