"""A lost Produce response must never lose committed data (the exact wire sequence).

librdkafka, after a Produce whose response was lost and an abort, sends a *different* batch
with the sequence it had already used. A broker that answers DUPLICATE_SEQUENCE_NUMBER (46)
makes the client count that batch delivered, and the commit then succeeds without it.
Apache Kafka answers OUT_OF_ORDER_SEQUENCE_NUMBER (45): a batch is a duplicate only when it
matches a cached batch exactly (ProducerStateEntry.findDuplicateBatch), and any other
sequence that is not last + 1 fails ProducerAppendInfo.checkSequence.
"""

from __future__ import annotations

import time

from kio.schema.end_txn.v3 import request as et
from kio.schema.errors import ErrorCode

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker

from . import wire_loops
from .helpers import consume, create_topic
from .test_txn_wire import txn_produce

TXN_ID = "lost-response"


def produce(c: WireClient, topic: str, pid: int, seq: int, values: list[bytes]):  # type: ignore[no-untyped-def]
    return txn_produce(c, TXN_ID, topic, 0, pid, 0, seq, values)


def add_partition(c: WireClient, topic: str, pid: int) -> None:
    assert wire_loops.add_partition(c, TXN_ID, pid, 0, topic) == ErrorCode.none


def end_txn(c: WireClient, pid: int, *, commit: bool) -> ErrorCode:
    for _ in range(100):  # the previous transaction's markers may still be in flight
        code = c.request(
            et.EndTxnRequest(
                transactional_id=TXN_ID, producer_id=pid, producer_epoch=0, committed=commit
            )
        ).error_code
        if code != ErrorCode.concurrent_transactions:
            return code
        time.sleep(0.05)
    raise AssertionError("EndTxn kept answering CONCURRENT_TRANSACTIONS")


def test_reused_sequence_after_abort_is_out_of_order_and_never_committed(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name)
    committed = [b"c%d" % i for i in range(22)]
    with WireClient(broker.bootstrap) as c:
        init = wire_loops.init_producer_id(c, TXN_ID)
        assert (init.error_code, init.producer_epoch) == (ErrorCode.none, 0)
        pid = init.producer_id
        # Transaction 1 commits sequences 0..21.
        add_partition(c, topic_name, pid)
        assert produce(c, topic_name, pid, 0, committed).error_code == ErrorCode.none
        assert end_txn(c, pid, commit=True) == ErrorCode.none
        # Transaction 2: base sequence 22, two records, appended at offset 23 (22 records and
        # a marker before it); the client never sees this answer. Then it aborts.
        add_partition(c, topic_name, pid)
        lost = produce(c, topic_name, pid, 22, [b"aborted-1", b"aborted-2"])
        assert (lost.error_code, lost.base_offset) == (ErrorCode.none, 23)
        assert end_txn(c, pid, commit=False) == ErrorCode.none
        # Transaction 3: a different batch (one record) reusing base sequence 22.
        add_partition(c, topic_name, pid)
        reused = produce(c, topic_name, pid, 22, [b"must-not-vanish"])
        assert reused.error_code == ErrorCode.out_of_order_sequence_number
        assert reused.base_offset == -1
        # A batch of the same size reusing the aborted batch's sequences (22..23) is no
        # duplicate either: its transaction ended. (Kafka would answer it with the aborted
        # batch's offsets, and the client would count these records delivered.)
        same_size = produce(c, topic_name, pid, 22, [b"must-not-vanish-1", b"-2"])
        assert (same_size.error_code, same_size.base_offset) == (
            ErrorCode.out_of_order_sequence_number,
            -1,
        )
        # Whatever the client does next, that batch is in no log: a commit commits nothing.
        assert end_txn(c, pid, commit=True) == ErrorCode.none
    seen = [m.value() for m in consume(broker.bootstrap, topic_name, 1, 22,
                                       timeout=15, **{"isolation.level": "read_committed"})]  # fmt: skip
    assert seen == committed
    everything = [m.value() for m in consume(broker.bootstrap, topic_name, 1, 24,
                                             timeout=15, **{"isolation.level": "read_uncommitted"})]  # fmt: skip
    assert everything == [*committed, b"aborted-1", b"aborted-2"]
    log = broker.log_path.read_text()
    assert (
        f"produce to {topic_name}-0 from " in log
        and f"producer {pid} epoch 0 sent sequences 22..22: expected sequence 24 after 23" in log
    ), broker.tail_log()
