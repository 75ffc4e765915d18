"""Sequence and epoch rules at the wire (KIP-98, KIP-192), with exact error codes."""

from __future__ import annotations

import datetime
import time

from kio.schema.delete_records.v2 import request as dr
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4 import request as ip
from kio.schema.produce.v9 import request as pr

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker
from oncelog.records.builder import build_batch

from .helpers import create_topic

T = datetime.timedelta(seconds=5)


def send(c: WireClient, topic: str, pid: int, epoch: int, seq: int, n: int = 1):  # type: ignore[no-untyped-def]
    now = int(time.time() * 1000)
    batch = build_batch(
        [(None, b"v%d" % (seq + i), None, now) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )
    req = pr.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=T,
        topic_data=(
            pr.TopicProduceData(
                name=topic, partition_data=(pr.PartitionProduceData(index=0, records=batch),)
            ),
        ),
    )
    return c.request(req).responses[0].partition_responses[0]


def test_sequence_rules(broker: EmbeddedBroker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    with WireClient(broker.bootstrap) as c:
        pid = c.request(
            ip.InitProducerIdRequest(
                transactional_id=None, transaction_timeout=T, producer_id=-1, producer_epoch=-1
            )
        ).producer_id
        offsets = []
        for seq in range(0, 30, 5):  # six batches of five
            r = send(c, topic_name, pid, 0, seq, 5)
            assert r.error_code == ErrorCode.none
            offsets.append(r.base_offset)
        assert offsets == [0, 5, 10, 15, 20, 25]
        # A retry of one of the last five batches: success with the original offset.
        r = send(c, topic_name, pid, 0, 10, 5)
        assert (r.error_code, r.base_offset) == (ErrorCode.none, 10)
        # An older batch no longer cached (the first one): out of order, as current Kafka
        # answers (its brokers no longer send KIP-192's DUPLICATE_SEQUENCE_NUMBER).
        assert (
            send(c, topic_name, pid, 0, 0, 5).error_code == ErrorCode.out_of_order_sequence_number
        )
        # A gap.
        assert (
            send(c, topic_name, pid, 0, 31, 1).error_code == ErrorCode.out_of_order_sequence_number
        )
        # Nothing was appended by the rejected or duplicate batches.
        r = send(c, topic_name, pid, 0, 30, 1)
        assert (r.error_code, r.base_offset) == (ErrorCode.none, 30)
        # A newer epoch must start at sequence 0; then the old epoch is stale.
        assert (
            send(c, topic_name, pid, 1, 5, 1).error_code == ErrorCode.out_of_order_sequence_number
        )
        assert send(c, topic_name, pid, 1, 0, 1).error_code == ErrorCode.none
        assert send(c, topic_name, pid, 0, 31, 1).error_code == ErrorCode.invalid_producer_epoch
        # A producer the partition has never seen, mid-sequence: accepted (KIP-360), and from
        # then on the sequence rules hold for it.
        r = send(c, topic_name, pid + 1000, 0, 7, 1)
        assert (r.error_code, r.base_offset) == (ErrorCode.none, 32)
        assert (
            send(c, topic_name, pid + 1000, 0, 9, 1).error_code
            == ErrorCode.out_of_order_sequence_number
        )
        r = send(c, topic_name, pid + 1000, 0, 7, 1)  # a retry is still deduplicated
        assert (r.error_code, r.base_offset) == (ErrorCode.none, 32)


def test_producer_continues_after_delete_records_removed_its_state(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, config={"segment.bytes": "1024"})
    with WireClient(broker.bootstrap) as c:
        pid = c.request(
            ip.InitProducerIdRequest(
                transactional_id=None, transaction_timeout=T, producer_id=-1, producer_epoch=-1
            )
        ).producer_id
        for seq in range(0, 20, 2):
            assert send(c, topic_name, pid, 0, seq, 2).error_code == ErrorCode.none
        resp = c.request(
            dr.DeleteRecordsRequest(
                topics=(
                    dr.DeleteRecordsTopic(
                        name=topic_name,
                        partitions=(dr.DeleteRecordsPartition(partition_index=0, offset=-1),),
                    ),
                ),
                timeout=T,
            )
        )
        low = resp.topics[0].partitions[0].low_watermark
        assert (resp.topics[0].partitions[0].error_code, low) == (ErrorCode.none, 20)
        r = send(c, topic_name, pid, 0, 20, 2)
        # The producer's state went with its records; KIP-360 lets it continue (Kafka >= 2.5)
        # and the response still carries the log start offset (KIP-192).
        assert (r.error_code, r.base_offset, r.log_start_offset) == (ErrorCode.none, 20, 20)
        r = send(c, topic_name, pid, 0, 20, 2)  # its retry is a duplicate, not a second copy
        assert (r.error_code, r.base_offset) == (ErrorCode.none, 20)
        assert send(c, topic_name, pid, 0, 22, 1).base_offset == 22
