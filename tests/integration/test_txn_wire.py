"""Transaction protocol details at the wire: markers only where written and
KIP-890's produce verification, with exact error codes."""

from __future__ import annotations

import datetime
import time
from collections.abc import Sequence

from kio.schema.add_partitions_to_txn.v3 import request as ap
from kio.schema.end_txn.v3 import request as et
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4 import request as ip
from kio.schema.produce.v9 import request as pr

from oncelog.client.config import ClientConfig
from oncelog.client.transactions import TxnAdmin
from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker
from oncelog.records.builder import build_batch

from .helpers import create_topic
from .test_transactions import READ_UNCOMMITTED, end_offsets

T = datetime.timedelta(seconds=30)


def txn_produce(
    c: WireClient,
    txn_id: str,
    topic: str,
    partition: int,
    pid: int,
    epoch: int,
    seq: int,
    values: Sequence[bytes] = (b"v",),
):  # type: ignore[no-untyped-def]
    """One transactional batch of ``values`` (acks=-1); the partition's response."""
    now = int(time.time() * 1000)
    batch = build_batch(
        [(None, v, None, now) for v in values],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )
    req = pr.ProduceRequest(
        transactional_id=txn_id,
        acks=-1,
        timeout=T,
        topic_data=(
            pr.TopicProduceData(
                name=topic,
                partition_data=(pr.PartitionProduceData(index=partition, records=batch),),
            ),
        ),
    )
    return c.request(req).responses[0].partition_responses[0]


def test_markers_only_where_written_and_produce_outside_txn_rejected(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, 3)
    with WireClient(broker.bootstrap) as c:
        init = c.request(
            ip.InitProducerIdRequest(
                transactional_id="wire-txn",
                transaction_timeout=T,
                producer_id=-1,
                producer_epoch=-1,
            )
        )
        pid, epoch = init.producer_id, init.producer_epoch
        # KIP-890 part 1: nothing is added yet, so a transactional produce is refused.
        assert (
            txn_produce(c, "wire-txn", topic_name, 0, pid, epoch, 0).error_code
            == ErrorCode.invalid_txn_state
        )
        added = c.request(
            ap.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id="wire-txn",
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=(
                    ap.AddPartitionsToTxnTopic(name=topic_name, partitions=(0, 1)),
                ),
            )
        )
        assert all(
            p.partition_error_code == ErrorCode.none
            for t in added.results_by_topic_v3_and_below
            for p in t.results_by_partition
        )
        assert txn_produce(c, "wire-txn", topic_name, 0, pid, epoch, 0).error_code == ErrorCode.none
        # partition 2 was never added
        assert (
            txn_produce(c, "wire-txn", topic_name, 2, pid, epoch, 0).error_code
            == ErrorCode.invalid_txn_state
        )
        ended = c.request(
            et.EndTxnRequest(
                transactional_id="wire-txn", producer_id=pid, producer_epoch=epoch, committed=True
            )
        )
        assert ended.error_code == ErrorCode.none
    deadline = time.monotonic() + 5
    while (
        end_offsets(broker.bootstrap, topic_name, 3, READ_UNCOMMITTED) != [2, 0, 0]
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    # Partition 0: record + COMMIT marker. Partition 1 was added but never written: no marker.
    assert end_offsets(broker.bootstrap, topic_name, 3, READ_UNCOMMITTED) == [2, 0, 0]
    with TxnAdmin(ClientConfig(broker.bootstrap)) as admin:
        assert admin.describe_txn("wire-txn").transaction_state == "CompleteCommit"


def test_end_txn_errors(broker: EmbeddedBroker) -> None:
    with WireClient(broker.bootstrap) as c:
        r = c.request(
            et.EndTxnRequest(
                transactional_id="nobody", producer_id=5, producer_epoch=0, committed=True
            )
        )
        assert r.error_code == ErrorCode.invalid_producer_id_mapping
        init = c.request(
            ip.InitProducerIdRequest(
                transactional_id="t-errs", transaction_timeout=T, producer_id=-1, producer_epoch=-1
            )
        )
        r = c.request(
            et.EndTxnRequest(
                transactional_id="t-errs",
                producer_id=init.producer_id,
                producer_epoch=init.producer_epoch,
                committed=True,
            )
        )
        assert r.error_code == ErrorCode.invalid_txn_state  # nothing to commit: Empty
        r = c.request(
            et.EndTxnRequest(
                transactional_id="t-errs",
                producer_id=init.producer_id,
                producer_epoch=init.producer_epoch + 1,
                committed=True,
            )
        )
        assert r.error_code == ErrorCode.producer_fenced
        too_long = datetime.timedelta(milliseconds=900_001)
        r = c.request(
            ip.InitProducerIdRequest(
                transactional_id="t-errs",
                transaction_timeout=too_long,
                producer_id=-1,
                producer_epoch=-1,
            )
        )
        assert r.error_code == ErrorCode.invalid_transaction_timeout
