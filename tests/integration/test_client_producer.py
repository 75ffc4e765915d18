"""oncelog's transactional producer (oncelog.client.producer) against a real broker: a
two-phase-commit transaction (KIP-939) prepared with many batches and completed by another
client as its own producer, the refusal when 2PC is off, transaction version 1
(AddPartitionsToTxn), a resend after a lost answer (same sequences: no duplicate), Java's
partitioner compared with librdkafka's, and SASL_SSL through the client configuration."""

from __future__ import annotations

import datetime
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import ScramMechanism
from kio.schema.errors import ErrorCode

from oncelog.client.config import ClientConfig
from oncelog.client.producer import (
    ProducerSettings,
    TransactionalProducer,
    TwoPhaseCommitUnavailable,
)
from oncelog.client.transactions import TxnAdmin, is_two_phase
from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic
from .security import TlsFiles, confluent_sasl, make_tls, secured_settings
from .test_sasl import add_scram_user
from .test_transactions import READ_COMMITTED, READ_UNCOMMITTED, end_offsets, read_all
from .test_txn_2pc_wire import NO_TIMEOUT, TWO_PC, tpc_broker

SMALL = ProducerSettings(batch_size=4096)  # many batches per partition


__all__ = ["tpc_broker"]  # fixtures


def values_of(msgs: list[Any]) -> Counter[bytes]:
    return Counter(m.value() for m in msgs)


def test_a_prepared_two_phase_transaction_is_completed_by_another_client(
    tpc_broker: EmbeddedBroker, topic_name: str
) -> None:
    b = tpc_broker.bootstrap
    create_topic(b, topic_name, 3)
    tid = f"p-{topic_name}"
    sent = [b"value-%05d" % i for i in range(3000)]
    with TransactionalProducer(b, tid, two_phase=True, settings=SMALL) as p:
        pid, epoch = p.init_transactions()
        assert p.tv2 and p.versions is not None and p.versions.transaction_version == 2
        p.begin_transaction()
        for i, value in enumerate(sent):
            p.send(
                topic_name, 2 if i % 10 == 0 else None, b"key-%d" % i, value, (("i", b"%d" % i),)
            )
        assert p.prepare() == (pid, epoch)
        assert p.acknowledged == 3000
        assert (
            p.requests >= 3000 * 30 // 4096 // 3
        )  # batches of 4 KB, one per partition per request
    # Closed without ending: the broker holds a 2PC transaction (no timeout) with it all.
    with TxnAdmin(ClientConfig(b)) as admin:
        state = admin.describe_txn(tid)
        assert (state.transaction_state, state.producer_id, state.producer_epoch) == (
            "Ongoing",
            pid,
            epoch,
        )
        assert is_two_phase(state)
        assert int(state.transaction_timeout.total_seconds() * 1000) == NO_TIMEOUT
        assert sorted(p for t in state.topics for p in t.partitions) == [0, 1, 2]
        assert end_offsets(b, topic_name, 3, READ_COMMITTED) == [0, 0, 0]
        assert sum(end_offsets(b, topic_name, 3, READ_UNCOMMITTED)) == 3000
        # Another client (the Spark driver's path) completes it as its own producer.
        assert admin.complete_prepared(tid, pid, epoch, True) == ErrorCode.none
        assert admin.describe_txn(tid).transaction_state == "CompleteCommit"
    msgs = read_all(b, topic_name, 3, "read_committed")
    assert values_of(msgs) == Counter(sent)
    by_value = {m.value(): m for m in msgs}
    assert all(by_value[b"value-%05d" % i].partition() == 2 for i in range(0, 3000, 10))
    assert by_value[b"value-00007"].headers() == [("i", b"7")]
    assert by_value[b"value-00007"].key() == b"key-7"


def test_keys_land_where_librdkafka_puts_them(broker: EmbeddedBroker, topic_name: str) -> None:
    """Java's murmur2 partitioner, as librdkafka's murmur2_random (the sink's other path)."""
    b = broker.bootstrap
    create_topic(b, topic_name, 5)
    keys = [b"k-%d" % i for i in range(200)] + [uuid.uuid4().bytes for _ in range(100)]
    rd = Producer({"bootstrap.servers": b, "partitioner": "murmur2_random", "linger.ms": 5})
    placed: dict[bytes, int] = {}

    def report(err: Any, msg: Any) -> None:
        assert err is None
        placed[msg.key()] = msg.partition()

    for k in keys:
        rd.produce(topic_name, b"rd", k, on_delivery=report)
    assert rd.flush(20) == 0
    with TransactionalProducer(b, f"keys-{topic_name}") as p:
        p.init_transactions()
        p.begin_transaction()
        for k in keys:
            p.send(topic_name, None, k, b"ours")
        p.commit_transaction()
    ours = {
        m.key(): m.partition()
        for m in read_all(b, topic_name, 5, "read_committed")
        if m.value() == b"ours"
    }
    assert len(ours) == len(keys) and ours == placed


def test_two_phase_commit_is_refused_when_the_broker_disables_it(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    b = broker.bootstrap
    create_topic(b, topic_name, 1)
    tid = f"no2pc-{topic_name}"
    with TransactionalProducer(b, tid, two_phase=True) as p:
        with pytest.raises(TwoPhaseCommitUnavailable) as info:
            p.init_transactions()
        assert info.value.error_code == ErrorCode.transactional_id_authorization_failed
        assert "transaction.two.phase.commit.enable" in str(info.value)
        assert p.history == []
    with TxnAdmin(ClientConfig(b)) as admin:
        assert admin.describe_txn(tid) is None  # the refusal changed nothing
    # The same id without 2PC: an ordinary TV2 transaction.
    with TransactionalProducer(b, tid) as p:
        pid, epoch = p.init_transactions()
        p.begin_transaction()
        p.send(topic_name, 0, None, b"plain")
        assert p.commit_transaction() == (pid, epoch + 1)
    assert [m.value() for m in read_all(b, topic_name, 1, "read_committed")] == [b"plain"]


def test_transaction_version_1_adds_partitions_explicitly(tmp_path: Path, topic_name: str) -> None:
    b = EmbeddedBroker(
        tmp_path / "data", settings={"oncelog.feature.transaction.version": "1"}
    ).start()
    try:
        create_topic(b.bootstrap, topic_name, 2)
        with TransactionalProducer(b.bootstrap, f"tv1-{topic_name}", settings=SMALL) as p:
            pid, epoch = p.init_transactions()
            assert not p.tv2
            for n, commit in enumerate((True, False, True)):
                p.begin_transaction()
                for i in range(500):
                    p.send(topic_name, i % 2, None, b"%d-%03d" % (n, i))
                if commit:
                    assert p.commit_transaction() == (pid, epoch)  # TV1: no bump
                else:
                    p.flush()
                    assert p.abort_transaction() == (pid, epoch)
        got = values_of(read_all(b.bootstrap, topic_name, 2, "read_committed"))
        assert got == Counter(b"%d-%03d" % (n, i) for n in (0, 2) for i in range(500))
    finally:
        b.stop()


class LosingProducer(TransactionalProducer):
    """The answers to its first Produce round are lost: the broker wrote the batches (its
    answers arrive), then the connection drops before the producer has read them."""

    lost = 0

    def _exchange(self, by_leader: Any) -> Any:
        if self.lost == 0:
            self.lost += 1
            conns = []
            for node, group in by_leader.items():
                conn = self.protocol.node(node)
                conn.send(self._produce_request(group))
                conns.append(conn)
                self.requests += 1
            for conn in conns:
                conn.recv_frame()  # the answer, dropped on the floor
            self.protocol.close()
            raise ConnectionResetError("answer lost (test)")
        return super()._exchange(by_leader)


def test_a_resend_after_a_lost_answer_is_not_duplicated(
    tpc_broker: EmbeddedBroker, topic_name: str
) -> None:
    b = tpc_broker.bootstrap
    create_topic(b, topic_name, 2)
    with LosingProducer(b, f"lose-{topic_name}", two_phase=True, settings=SMALL) as p:
        p.init_transactions()
        p.begin_transaction()
        for i in range(400):
            p.send(topic_name, i % 2, None, b"r-%03d" % i)
        p.commit_transaction()
        assert p.lost == 1 and p.acknowledged == 400
    # The first round reached the broker twice; it kept one copy of each batch.
    assert sum(end_offsets(b, topic_name, 2, READ_UNCOMMITTED)) == 400 + 2  # + COMMIT markers
    assert values_of(read_all(b, topic_name, 2, "read_committed")) == Counter(
        b"r-%03d" % i for i in range(400)
    )


@pytest.fixture
def tls(tmp_path: Path) -> TlsFiles:
    return make_tls(tmp_path / "tls")


def test_sasl_ssl_through_the_client_configuration(
    tmp_path: Path, tls: TlsFiles, topic_name: str
) -> None:
    b = EmbeddedBroker(tmp_path / "data", settings=secured_settings(tls, **TWO_PC)).start()
    try:
        add_scram_user(
            b.bootstrap_for("PLAINTEXT"), "carol", "carol-secret", ScramMechanism.SCRAM_SHA_512
        )
        create_topic(b.bootstrap_for("PLAINTEXT"), topic_name, 1)
        conf = confluent_sasl("SASL_SSL", "SCRAM-SHA-512", "carol", "carol-secret", tls)
        config = ClientConfig.of(b.bootstrap_for("SASL_SSL"), {k: str(v) for k, v in conf.items()})
        tid = f"sasl-{topic_name}"
        with TransactionalProducer(
            config, tid, two_phase=True, transaction_timeout=datetime.timedelta(seconds=10)
        ) as p:
            pid, epoch = p.init_transactions()
            p.begin_transaction()
            p.send(topic_name, 0, b"k", b"over SASL_SSL")
            p.prepare()
        with TxnAdmin(config) as admin:
            assert admin.complete_prepared(tid, pid, epoch, True) == ErrorCode.none
        got = read_all(b.bootstrap_for("PLAINTEXT"), topic_name, 1, "read_committed")
        assert [m.value() for m in got] == [b"over SASL_SSL"]
    finally:
        b.stop()
