"""The client layer against a real broker: offsets with an isolation level, transactions of
other producers, the retry policy across a broker restart, and errors by code."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode

from oncelog.client.admin import EARLIEST, LATEST, Admin
from oncelog.client.config import ClientConfig
from oncelog.client.errors import ClientError
from oncelog.client.retry import RetryPolicy
from oncelog.client.transactions import TxnAdmin
from oncelog.embedded import EmbeddedBroker


def open_txn(bootstrap: str, topic: str, tid: str, records: int) -> Producer:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": tid,
            "enable.sparse.connections": False,
        }
    )
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(records):
        p.produce(topic, value=b"%d" % i, partition=0)
    assert p.flush(30) == 0
    return p


def test_offsets_and_foreign_transactions(broker: EmbeddedBroker, topic_name: str) -> None:
    cfg = ClientConfig(broker.bootstrap)
    with Admin(cfg) as admin, TxnAdmin(cfg) as txns:
        admin.create_topics([topic_name], 2)
        admin.create_topics([topic_name], 2)  # exist_ok
        with pytest.raises(ClientError) as info:
            admin.create_topics([topic_name], 2, exist_ok=False)
        assert info.value.error_code == ErrorCode.topic_already_exists
        producer = open_txn(broker.bootstrap, topic_name, "foreign", 5)
        tps = [(topic_name, 0), (topic_name, 1)]
        assert admin.list_offsets(tps, LATEST, read_committed=False) == {
            (topic_name, 0): 5,
            (topic_name, 1): 0,
        }
        assert admin.list_offsets(tps, LATEST, read_committed=True) == {
            (topic_name, 0): 0,
            (topic_name, 1): 0,
        }
        assert admin.list_offsets(tps, EARLIEST) == {(topic_name, 0): 0, (topic_name, 1): 0}

        states = txns.describe_many(["foreign", "nobody"])
        assert states["nobody"] is None
        st = states["foreign"]
        assert st.transaction_state == "Ongoing" and [t.topic for t in st.topics] == [topic_name]
        # Fatal answers come back at once, as codes, never retried.
        started = time.monotonic()
        assert (
            txns.end_txn("foreign", st.producer_id, st.producer_epoch + 1, commit=True)
            == ErrorCode.producer_fenced
        )
        assert time.monotonic() - started < 2
        # Completing it on the producer's behalf.
        assert (
            txns.end_txn("foreign", st.producer_id, st.producer_epoch, commit=True)
            == ErrorCode.none
        )
        deadline = time.monotonic() + 10
        while (
            admin.list_offsets(tps[:1], LATEST, read_committed=True)[tps[0]] != 6
            and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        assert admin.list_offsets(tps[:1], LATEST, read_committed=True) == {
            tps[0]: 6
        }  # 5 records + marker
        # Fencing bumps the epoch.
        pid, epoch = txns.fence("foreign")
        assert (pid, epoch) == (st.producer_id, st.producer_epoch + 1)
        with pytest.raises(ClientError) as info:
            txns.fence("nobody")
        assert (
            info.value.error_code == ErrorCode.transactional_id_not_found
            and not info.value.retriable
        )
        del producer


def test_unknown_partition_is_retried_until_the_deadline(broker: EmbeddedBroker) -> None:
    admin = Admin(
        ClientConfig(broker.bootstrap),
        policy=RetryPolicy(deadline_s=1.5, initial_backoff_s=0.05, max_backoff_s=0.2),
    )
    started = time.monotonic()
    with pytest.raises(ClientError) as info:
        admin.list_offsets([("no-such-topic", 0)], LATEST)
    elapsed = time.monotonic() - started
    assert 1.0 <= elapsed < 1.5 + 1.0, elapsed
    assert (
        info.value.retriable and info.value.error_code is None and info.value.local_code is not None
    )


def test_protocol_client_rides_out_a_broker_restart(tmp_path: Path) -> None:
    b = EmbeddedBroker(tmp_path / "data").start()
    try:
        txns = TxnAdmin(ClientConfig(b.bootstrap), policy=RetryPolicy(deadline_s=30))
        assert txns.list_transactions() == []
        b.kill()
        restarter = threading.Timer(1.0, b.start)
        restarter.start()
        started = time.monotonic()
        assert txns.list_transactions() == []  # the old connection is dead: reconnect and retry
        assert time.monotonic() - started >= 0.5
        restarter.join()
        txns.close()
    finally:
        b.stop()


def test_unreachable_cluster_is_a_network_exception() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        txns = TxnAdmin(
            ClientConfig(f"127.0.0.1:{port}"),
            policy=RetryPolicy(deadline_s=0.5, initial_backoff_s=0.05),
        )
        started = time.monotonic()
        with pytest.raises(ClientError, match="cannot reach any bootstrap server") as info:
            txns.list_transactions()
    assert info.value.error_code == ErrorCode.network_exception
    assert time.monotonic() - started < 1.5
