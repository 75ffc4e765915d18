"""Transactions end to end with real clients (KIP-98): visibility, LSO, fencing,
timeouts and broker crashes in every transaction state."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kio.schema.list_offsets.v7 import request as lo

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic

READ_COMMITTED, READ_UNCOMMITTED = 1, 0


def end_offsets(bootstrap: str, topic: str, partitions: int, isolation: int) -> list[int]:
    """ListOffsets latest: the LSO under read_committed, the high watermark otherwise."""
    with WireClient(bootstrap) as c:
        resp = c.request(
            lo.ListOffsetsRequest(
                replica_id=-1,
                isolation_level=isolation,
                topics=(
                    lo.ListOffsetsTopic(
                        name=topic,
                        partitions=tuple(
                            lo.ListOffsetsPartition(
                                partition_index=p, current_leader_epoch=-1, timestamp=-1
                            )
                            for p in range(partitions)
                        ),
                    ),
                ),
            )
        )
    return [p.offset for p in resp.topics[0].partitions]


def read_all(
    bootstrap: str, topic: str, partitions: int, isolation: str, *, idle: float = 1.5
) -> list:  # type: ignore[type-arg]
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    last = time.monotonic()
    try:
        while time.monotonic() - last < idle:
            msgs = c.consume(1000, 0.2)
            for m in msgs:
                assert not m.error(), m.error()
                out.append(m)
            if msgs:
                last = time.monotonic()
    finally:
        c.close()
    return out


def txn_producer(bootstrap: str, txn_id: str, **conf: object) -> Producer:
    p = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 2, **conf}
    )
    p.init_transactions(15)
    return p


def test_visibility_two_interleaved_producers(broker: EmbeddedBroker, topic_name: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    create_topic(broker.bootstrap, topic_name, 2)
    a = txn_producer(broker.bootstrap, "vis-a")
    b = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="vis-b")
    b.init_transactions()
    committed, aborted = set(), set()
    for n in range(10):
        a.begin_transaction()
        b.begin_transaction()
        for i in range(50):
            va, vb = b"a-%d-%d" % (n, i), b"b-%d-%d" % (n, i)
            a.produce(topic_name, value=va, partition=i % 2)
            b.send(topic_name, value=vb, partition=(i + 1) % 2)
        a.flush()
        b.flush()
        batch_a = {b"a-%d-%d" % (n, i) for i in range(50)}
        batch_b = {b"b-%d-%d" % (n, i) for i in range(50)}
        if n % 3 == 1:
            a.abort_transaction(10)
            aborted |= batch_a
        else:
            a.commit_transaction(10)
            committed |= batch_a
        if n % 2 == 0:
            b.abort_transaction()
            aborted |= batch_b
        else:
            b.commit_transaction()
            committed |= batch_b
    b.close()
    rc = read_all(broker.bootstrap, topic_name, 2, "read_committed")
    values = [m.value() for m in rc]
    assert len(values) == len(set(values))
    assert set(values) == committed
    ru = {m.value() for m in read_all(broker.bootstrap, topic_name, 2, "read_uncommitted")}
    assert ru == committed | aborted
    # a second, independent client implementation agrees
    kc = KafkaConsumer(
        topic_name,
        bootstrap_servers=broker.bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        consumer_timeout_ms=3000,
        enable_auto_commit=False,
    )
    kvalues = [m.value for m in kc]
    kc.close()
    assert sorted(kvalues) == sorted(committed)
    hw = end_offsets(broker.bootstrap, topic_name, 2, READ_UNCOMMITTED)
    assert end_offsets(broker.bootstrap, topic_name, 2, READ_COMMITTED) == hw


def test_open_transaction_holds_lso_until_commit(broker: EmbeddedBroker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    p = txn_producer(broker.bootstrap, "lso")
    other = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    other.produce(topic_name, value=b"before")
    other.flush()
    p.begin_transaction()
    for i in range(5):
        p.produce(topic_name, value=b"txn-%d" % i)
    p.flush()
    for i in range(5):
        other.produce(topic_name, value=b"after-%d" % i)
    other.flush()
    assert end_offsets(broker.bootstrap, topic_name, 1, READ_UNCOMMITTED) == [11]
    assert end_offsets(broker.bootstrap, topic_name, 1, READ_COMMITTED) == [
        1
    ]  # first offset of the open txn
    assert [
        m.value() for m in read_all(broker.bootstrap, topic_name, 1, "read_committed", idle=1.0)
    ] == [b"before"]
    p.commit_transaction(10)
    deadline = time.monotonic() + 5
    while (
        end_offsets(broker.bootstrap, topic_name, 1, READ_COMMITTED) != [12]
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert end_offsets(broker.bootstrap, topic_name, 1, READ_COMMITTED) == [
        12
    ]  # 11 records + marker
    values = [m.value() for m in read_all(broker.bootstrap, topic_name, 1, "read_committed")]
    assert values == [b"before"] + [b"txn-%d" % i for i in range(5)] + [
        b"after-%d" % i for i in range(5)
    ]


def test_second_instance_fences_the_first(broker: EmbeddedBroker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    first = txn_producer(broker.bootstrap, "fence-me")
    first.begin_transaction()
    first.produce(topic_name, value=b"zombie")
    first.flush()
    second = txn_producer(broker.bootstrap, "fence-me")  # aborts the zombie's transaction
    second.begin_transaction()
    second.produce(topic_name, value=b"live")
    second.commit_transaction(10)
    with pytest.raises(KafkaException) as info:
        first.produce(topic_name, value=b"zombie-2")
        first.commit_transaction(10)
    assert info.value.args[0].fatal() or "fenced" in str(info.value).lower()
    assert [m.value() for m in read_all(broker.bootstrap, topic_name, 1, "read_committed")] == [
        b"live"
    ]


def test_coordinator_aborts_timed_out_transaction(tmp_path: Path, topic_name: str) -> None:
    settings = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}
    with EmbeddedBroker(tmp_path / "data", settings=settings) as b:
        create_topic(b.bootstrap, topic_name, 1)
        p = txn_producer(b.bootstrap, "sleepy", **{"transaction.timeout.ms": 1500})
        p.begin_transaction()
        for i in range(3):
            p.produce(topic_name, value=b"stale-%d" % i)
        p.flush()
        assert end_offsets(b.bootstrap, topic_name, 1, READ_COMMITTED) == [0]
        deadline = time.monotonic() + 10
        while (
            end_offsets(b.bootstrap, topic_name, 1, READ_COMMITTED) != [4]
            and time.monotonic() < deadline
        ):
            time.sleep(0.1)
        assert end_offsets(b.bootstrap, topic_name, 1, READ_COMMITTED) == [
            4
        ]  # aborted: 3 records + marker
        with pytest.raises(KafkaException):
            p.commit_transaction(10)
        assert read_all(b.bootstrap, topic_name, 1, "read_committed", idle=1.0) == []


@pytest.mark.parametrize("state", ["Ongoing", "PrepareCommit", "PrepareAbort"])
def test_broker_sigkill_in_each_transaction_state(
    tmp_path: Path, topic_name: str, state: str
) -> None:
    delay = {"oncelog.debug.marker.delay.ms": "60000"} if state != "Ongoing" else {}
    common = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}
    b = EmbeddedBroker(tmp_path / "data", settings={**common, **delay}).start()
    try:
        create_topic(b.bootstrap, topic_name, 2)
        p = txn_producer(b.bootstrap, f"crash-{state}", **{"transaction.timeout.ms": 2000})
        p.begin_transaction()
        for i in range(20):
            p.produce(topic_name, value=b"v-%d" % i, partition=i % 2)
        p.flush()
        if state == "PrepareCommit":
            p.commit_transaction(10)  # returns once PrepareCommit is logged; markers are held back
        elif state == "PrepareAbort":
            p.abort_transaction(10)
        with WireClient(b.bootstrap) as c:
            from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest

            desc = c.request(DescribeTransactionsRequest(transactional_ids=(f"crash-{state}",)))
            assert desc.transaction_states[0].transaction_state == state
        b.kill()
        b.settings = dict(common)
        b.start()
        expect_visible = state == "PrepareCommit"
        deadline = time.monotonic() + 15
        hw = end_offsets(b.bootstrap, topic_name, 2, READ_UNCOMMITTED)
        while time.monotonic() < deadline:
            lso = end_offsets(b.bootstrap, topic_name, 2, READ_COMMITTED)
            hw = end_offsets(b.bootstrap, topic_name, 2, READ_UNCOMMITTED)
            if lso == hw == [11, 11]:
                break
            time.sleep(0.1)
        assert hw == [11, 11]  # 10 records + one marker per partition
        assert end_offsets(b.bootstrap, topic_name, 2, READ_COMMITTED) == hw
        values = sorted(m.value() for m in read_all(b.bootstrap, topic_name, 2, "read_committed"))
        assert values == (sorted(b"v-%d" % i for i in range(20)) if expect_visible else [])
    finally:
        b.stop()
