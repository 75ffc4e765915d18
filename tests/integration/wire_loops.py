"""Fast raw-protocol loops that fill the internal topics (test_internal_topics_bounded.py
and bench/txn_log_bound.py): one connection, one request at a time, no client library
in between, so 10,000 transactions take seconds."""

from __future__ import annotations

import datetime
import time
from pathlib import Path
from typing import Any

from kio.schema.add_partitions_to_txn.v3 import request as ap
from kio.schema.end_txn.v3 import request as et
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4 import request as ip
from kio.schema.offset_commit.v2 import request as oc
from kio.schema.produce.v9 import request as pr

from oncelog.client.wire import WireClient
from oncelog.records.builder import build_batch

TIMEOUT = datetime.timedelta(seconds=30)


def topic_bytes(data_dir: Path, topic: str) -> int:
    """Bytes of every file (``*.deleted`` ones included) in every partition directory of
    ``topic``: what the topic takes on disk."""
    return sum(
        f.stat().st_size
        for d in data_dir.iterdir()
        if d.is_dir() and d.name.rpartition("-")[0] == topic
        for f in d.iterdir()
        if f.is_file()
    )


def init_producer_id(c: WireClient, txn_id: str) -> Any:
    return c.request(
        ip.InitProducerIdRequest(
            transactional_id=txn_id, transaction_timeout=TIMEOUT, producer_id=-1, producer_epoch=-1
        )
    )


def add_partition(c: WireClient, txn_id: str, pid: int, epoch: int, topic: str) -> ErrorCode:
    """AddPartitionsToTxn of ``topic``-0; retried while the previous transaction's markers
    are still being written (CONCURRENT_TRANSACTIONS, as clients retry)."""
    request = ap.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=(ap.AddPartitionsToTxnTopic(name=topic, partitions=(0,)),),
    )
    while True:
        r = c.request(request)
        err: ErrorCode = (
            r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
        )
        if err != ErrorCode.concurrent_transactions:
            return err
        time.sleep(0.001)


def run_transactions(c: WireClient, txn_id: str, topic: str, count: int) -> tuple[int, int]:
    """``count`` committed transactions of ``txn_id``, one keyed record each in ``topic``-0;
    returns the producer id and epoch they used."""
    init = init_producer_id(c, txn_id)
    assert init.error_code == ErrorCode.none, init
    pid, epoch = init.producer_id, init.producer_epoch
    end = et.EndTxnRequest(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=True
    )
    for seq in range(count):
        assert add_partition(c, txn_id, pid, epoch, topic) == ErrorCode.none
        batch = build_batch(
            [(b"k", b"v", None, int(time.time() * 1000))],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            transactional=True,
        )
        produced = c.request(
            pr.ProduceRequest(
                transactional_id=txn_id,
                acks=-1,
                timeout=TIMEOUT,
                topic_data=(
                    pr.TopicProduceData(
                        name=topic,
                        partition_data=(pr.PartitionProduceData(index=0, records=batch),),
                    ),
                ),
            )
        )
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.none, produced
        assert c.request(end).error_code == ErrorCode.none
    return pid, epoch


def commit_offsets(c: WireClient, group: str, topic: str, offsets: range) -> None:
    """One OffsetCommit (simple group: no generation, no member) per offset, partition 0."""
    for offset in offsets:
        r = c.request(
            oc.OffsetCommitRequest(
                group_id=group,
                generation_id_or_member_epoch=-1,
                member_id="",
                retention_time=datetime.timedelta(milliseconds=-1),
                topics=(
                    oc.OffsetCommitRequestTopic(
                        name=topic,
                        partitions=(
                            oc.OffsetCommitRequestPartition(
                                partition_index=0, committed_offset=offset, committed_metadata=None
                            ),
                        ),
                    ),
                ),
            )
        )
        assert r.topics[0].partitions[0].error_code == ErrorCode.none, r
