"""oncelog.testing.raw_txn's producer against the broker: the TV2 semantics the copier and
the benchmark rely on, with exact epochs and offsets."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from oncelog.client.config import ClientConfig
from oncelog.client.errors import ClientError
from oncelog.client.transactions import TxnAdmin
from oncelog.embedded import EmbeddedBroker
from oncelog.testing.raw_txn import RawTransactionalProducer, is_fatal

from .helpers import create_topic
from .test_transactions import READ_COMMITTED, end_offsets, read_all
from .test_txn_v2_wire import wait_for


def committed_offset(bootstrap: str, group: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return int(c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset)
    finally:
        c.close()


def test_epoch_bumps_per_transaction_and_offsets_commit_with_it(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, 2)
    group = f"g-{topic_name}"
    with (
        RawTransactionalProducer(broker.bootstrap, "tv2-p") as p,
        TxnAdmin(ClientConfig(broker.bootstrap)) as admin,
    ):
        pid, epoch = p.init_transactions()
        p.begin_transaction()
        assert p.send(topic_name, 0, [(b"k", b"a"), (None, b"b")]) == 0  # base offsets
        assert p.send(topic_name, 1, [(None, b"c")]) == 0
        assert p.send(topic_name, 0, [(None, b"d")]) == 2  # sequence 2 on partition 0
        p.send_offsets_to_transaction({(topic_name, 0): 7}, group)
        d = admin.describe_txn("tv2-p")
        assert (d.transaction_state, d.producer_epoch) == ("Ongoing", epoch)
        # Both partitions and the group's offsets partition were added implicitly.
        added = {t.topic: sorted(t.partitions) for t in d.topics}
        assert sorted(added) == ["__consumer_offsets", topic_name]
        assert added[topic_name] == [0, 1] and len(added["__consumer_offsets"]) == 1
        assert p.commit_transaction() == (pid, epoch + 1)
        wait_for(lambda: end_offsets(broker.bootstrap, topic_name, 2, READ_COMMITTED) == [4, 2])
        wait_for(lambda: committed_offset(broker.bootstrap, group, topic_name) == 7)

        # Aborted: records and offsets never show; the abort bumps too.
        p.begin_transaction()
        p.send(topic_name, 0, [(None, b"x")])  # sequence restarts at 0 with the new epoch
        p.send_offsets_to_transaction({(topic_name, 0): 9}, group)
        assert p.abort_transaction() == (pid, epoch + 2)
        wait_for(lambda: end_offsets(broker.bootstrap, topic_name, 2, READ_COMMITTED) == [6, 2])
        assert committed_offset(broker.bootstrap, group, topic_name) == 7

        # A transaction that sent nothing completes locally: no EndTxn, no bump.
        p.begin_transaction()
        assert p.commit_transaction() == (pid, epoch + 2)
        assert p.history == [(pid, epoch), (pid, epoch + 1), (pid, epoch + 2)]
        d = admin.describe_txn("tv2-p")
        assert (d.transaction_state, d.producer_epoch) == ("CompleteAbort", epoch + 2)
    values = sorted(
        (m.partition(), m.value())
        for m in read_all(broker.bootstrap, topic_name, 2, "read_committed", idle=1.0)
    )
    assert values == [(0, b"a"), (0, b"b"), (0, b"d"), (1, b"c")]


def test_a_new_instance_fences_the_old_one(broker: EmbeddedBroker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    with (
        RawTransactionalProducer(broker.bootstrap, "tv2-z") as old,
        RawTransactionalProducer(broker.bootstrap, "tv2-z") as new,
    ):
        pid, epoch = old.init_transactions()
        old.begin_transaction()
        old.send(topic_name, 0, [(None, b"zombie")])
        # The new instance aborts the open transaction: + 1 for the fence, + 1 for the
        # TV2 abort (so the zombie's EndTxn cannot pass for a retry), + 1 for the new
        # instance on its retry of InitProducerId (CONCURRENT_TRANSACTIONS meanwhile).
        assert new.init_transactions() == (pid, epoch + 3)
        new_epoch = epoch + 3
        with pytest.raises(ClientError) as err:
            old.send(topic_name, 0, [(None, b"zombie-2")])
        assert is_fatal(err.value), err.value.error_code
        with pytest.raises(ClientError) as err:
            old.commit_transaction()
        assert err.value.error_code == ErrorCode.producer_fenced
        new.begin_transaction()
        new.send(topic_name, 0, [(None, b"live")])
        assert new.commit_transaction() == (pid, new_epoch + 1)
    wait_for(lambda: end_offsets(broker.bootstrap, topic_name, 1, READ_COMMITTED)[0] >= 4)
    committed = read_all(broker.bootstrap, topic_name, 1, "read_committed", idle=1.0)
    assert [m.value() for m in committed] == [b"live"]


def test_refuses_a_broker_that_finalizes_tv1(tmp_path: Path, topic_name: str) -> None:
    settings = {"oncelog.feature.transaction.version": "1"}
    with (
        EmbeddedBroker(tmp_path / "data", settings=settings) as b,
        RawTransactionalProducer(b.bootstrap, "tv2-on-tv1") as p,
    ):
        started = time.monotonic()
        with pytest.raises(ClientError) as err:
            p.init_transactions()
        assert err.value.error_code == ErrorCode.unsupported_version
        assert "transaction.version=1" in str(err.value)
        assert time.monotonic() - started < 5  # not retried
        assert p.history == []


def test_transaction_version_1_keeps_the_epoch(broker: EmbeddedBroker, topic_name: str) -> None:
    """The same producer on TV1 (the benchmark's A/B): AddPartitionsToTxn and
    AddOffsetsToTxn, EndTxn v4 without a bump, sequences carrying on across transactions."""
    create_topic(broker.bootstrap, topic_name, 1)
    group = f"g-{topic_name}"
    with RawTransactionalProducer(broker.bootstrap, "tv1-p", transaction_version=1) as p:
        pid, epoch = p.init_transactions()
        for offset in (3, 5):
            p.begin_transaction()
            p.send(topic_name, 0, [(None, b"%d" % offset)])
            p.send_offsets_to_transaction({(topic_name, 0): offset}, group)
            assert p.commit_transaction() == (pid, epoch)
        p.begin_transaction()
        p.send(topic_name, 0, [(None, b"aborted")])
        assert p.abort_transaction() == (pid, epoch)
        assert p.history == [(pid, epoch)]
    wait_for(lambda: end_offsets(broker.bootstrap, topic_name, 1, READ_COMMITTED) == [6])
    wait_for(lambda: committed_offset(broker.bootstrap, group, topic_name) == 5)
    committed = read_all(broker.bootstrap, topic_name, 1, "read_committed", idle=1.0)
    assert [m.value() for m in committed] == [b"3", b"5"]
