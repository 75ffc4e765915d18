"""KIP-618's ``Admin.fenceProducers``: ``Admin.fence_producers`` and
``oncelog producers fence`` bump each id's epoch and abort what it has open, so the
fenced producer's next transaction fails with PRODUCER_FENCED and a read_committed
reader never sees its open records."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import KafkaError, KafkaException
from kio.schema.errors import ErrorCode

from oncelog.client.admin import Admin
from oncelog.client.config import ClientConfig
from oncelog.client.errors import ClientError
from oncelog.client.retry import RetryPolicy
from oncelog.client.transactions import TxnAdmin
from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic
from .test_transactions import READ_COMMITTED, end_offsets, read_all, txn_producer


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oncelog.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=90,
    )


def _fenced_on_commit(producer, topic: str, *, begin: bool = True) -> KafkaError:  # type: ignore[no-untyped-def]
    """The error a fenced producer gets when it commits (a new transaction, or with
    ``begin=False`` the one it had open when it was fenced)."""
    with pytest.raises(KafkaException) as info:
        if begin:
            producer.begin_transaction()
        producer.produce(topic, value=b"zombie")
        producer.flush(10)
        producer.commit_transaction(10)
    error: KafkaError = info.value.args[0]
    return error


def test_fence_producers_bumps_epochs_and_aborts_open_transactions(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    config = ClientConfig.of(broker.bootstrap)
    idle = txn_producer(broker.bootstrap, "fence-idle")
    idle.begin_transaction()
    idle.produce(topic_name, value=b"committed")
    idle.commit_transaction(10)
    busy = txn_producer(broker.bootstrap, "fence-busy")
    busy.begin_transaction()
    busy.produce(topic_name, value=b"open")
    busy.flush(10)
    with TxnAdmin(config) as txns:
        before = {t: txns.describe_txn(t) for t in ("fence-idle", "fence-busy")}
    assert before["fence-busy"].transaction_state == "Ongoing"

    with Admin(config) as admin:
        fenced = admin.fence_producers(["fence-idle", "fence-busy"])

    # One bump for the new "instance"; an open transaction costs one more, as in Kafka: the
    # coordinator aborts it with a bumped epoch (CONCURRENT_TRANSACTIONS meanwhile, retried).
    assert fenced == {
        "fence-idle": (before["fence-idle"].producer_id, before["fence-idle"].producer_epoch + 1),
        "fence-busy": (before["fence-busy"].producer_id, before["fence-busy"].producer_epoch + 2),
    }
    with TxnAdmin(config) as txns:
        after = {t: txns.describe_txn(t) for t in ("fence-idle", "fence-busy")}
    # Both ids now belong to the fencing "instance", with nothing open; the open
    # transaction was aborted (its record is not visible and the LSO moved past its marker).
    assert {t: s.transaction_state for t, s in after.items()} == {
        "fence-idle": "Empty",
        "fence-busy": "Empty",
    }
    assert [m.value() for m in read_all(broker.bootstrap, topic_name, 1, "read_committed")] == [
        b"committed"
    ]
    assert end_offsets(broker.bootstrap, topic_name, 1, READ_COMMITTED) == [
        4
    ]  # 2 records, 2 markers
    for producer, begin in ((idle, True), (busy, False)):
        error = _fenced_on_commit(producer, topic_name, begin=begin)
        # librdkafka turns the broker's PRODUCER_FENCED into its fatal local _FENCED.
        assert error.fatal(), error
        assert error.code() == KafkaError._FENCED, error
    # On the wire: the old epoch is refused with PRODUCER_FENCED.
    with TxnAdmin(config) as txns:
        code = txns.end_txn(
            "fence-idle",
            before["fence-idle"].producer_id,
            before["fence-idle"].producer_epoch,
            True,
        )
    assert code == ErrorCode.producer_fenced
    # Nothing the fenced producers tried after the fencing became visible.
    assert [m.value() for m in read_all(broker.bootstrap, topic_name, 1, "read_committed")] == [
        b"committed"
    ]


def test_fence_producers_of_an_unknown_id_creates_it_at_epoch_zero(broker: EmbeddedBroker) -> None:
    with Admin(ClientConfig.of(broker.bootstrap)) as admin:
        ((pid, epoch),) = admin.fence_producers(["never-used"]).values()
        assert pid >= 0 and epoch == 0
        assert admin.fence_producers(["never-used"]) == {"never-used": (pid, 1)}
        assert admin.fence_producers([]) == {}


def test_fence_producers_unreachable_cluster_fails_with_network_error() -> None:
    admin = Admin(ClientConfig.of("127.0.0.1:1"), policy=RetryPolicy(deadline_s=1.0))
    with pytest.raises(ClientError) as info:
        admin.fence_producers(["x"])
    assert info.value.error_code is not None and info.value.error_code.name == "network_exception"


def test_producers_fence_cli(broker: EmbeddedBroker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    producer = txn_producer(broker.bootstrap, "cli-fenced")
    producer.begin_transaction()
    producer.produce(topic_name, value=b"open")
    producer.flush(10)
    with TxnAdmin(ClientConfig.of(broker.bootstrap)) as txns:
        state = txns.describe_txn("cli-fenced")

    out = cli("producers", "fence", "cli-fenced", "cli-other", "-b", broker.bootstrap)

    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == (
        f"fenced cli-fenced: producer id {state.producer_id}, epoch {state.producer_epoch + 2}"
    )
    assert lines[1].startswith("fenced cli-other: producer id ") and lines[1].endswith(", epoch 0")
    assert len(lines) == 2
    error = _fenced_on_commit(producer, topic_name, begin=False)
    assert error.fatal() and error.code() == KafkaError._FENCED, error
    assert read_all(broker.bootstrap, topic_name, 1, "read_committed") == []


def test_producers_fence_cli_errors_are_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = cli("producers", "fence", "x", "-b", "127.0.0.1:1")
    assert out.returncode == 1
    assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1, out.stderr
    assert "NETWORK_EXCEPTION" in out.stderr or "cannot reach" in out.stderr
    bad = tmp_path / "client.properties"
    bad.write_text("ssl.keystore.type=JKS\nssl.keystore.location=/x.jks\n")
    out = cli("producers", "fence", "x", "-b", "127.0.0.1:1", "--command-config", str(bad))
    assert out.returncode == 2
    assert out.stderr.startswith(f"error: --command-config {bad}: ") and out.stderr.count("\n") == 1
    out = cli("producers", "fence")
    assert out.returncode == 2  # a transactional id is required


def test_fence_producers_attempts_every_id_and_names_each_failure(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """As Kafka's ``FenceProducersResult``: one outcome per id. A principal allowed to
    fence ``ok-*`` but not ``denied`` fences both ``ok`` ids and names ``denied``."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    from oncelog.client.admin import FenceProducersError

    from .security import PLAIN_USERS, confluent_sasl, plain_jaas

    settings = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "transaction.state.log.num.partitions": "4",
    }
    with EmbeddedBroker(tmp_path / "data", settings=settings) as broker:
        bootstrap = broker.bootstrap_for("SASL_PLAINTEXT")
        admin = AdminClient(
            {
                "bootstrap.servers": bootstrap,
                **confluent_sasl("SASL_PLAINTEXT", "PLAIN", "admin", PLAIN_USERS["admin"]),
            }
        )
        acls = [
            AclBinding(ResourceType.TRANSACTIONAL_ID, "ok-", ResourcePatternType.PREFIXED, "User:bob",
                       "*", op, AclPermissionType.ALLOW)
            for op in (AclOperation.WRITE, AclOperation.DESCRIBE)
        ]  # fmt: skip
        for future in admin.create_acls(acls).values():
            future.result(15)
        bob = ClientConfig.of(
            bootstrap,
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
             "sasl.username": "bob", "sasl.password": PLAIN_USERS["bob"]},
        )  # fmt: skip
        with Admin(bob, policy=RetryPolicy(deadline_s=20.0)) as fencer:
            with pytest.raises(FenceProducersError) as info:
                fencer.fence_producers(["ok-2", "denied", "ok-1"])
        failure = info.value
        assert sorted(failure.fenced) == ["ok-1", "ok-2"]
        assert sorted(failure.failed) == ["denied"]
        assert failure.error_code == ErrorCode.transactional_id_authorization_failed
        assert "'denied'" in str(failure) and "'ok-1'" not in str(failure)
        # The ok ids were fenced: their epochs were bumped (0 on creation, 1 now).
        with Admin(ClientConfig.of(bootstrap, {"security.protocol": "SASL_PLAINTEXT",
                   "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                   "sasl.password": PLAIN_USERS["admin"]})) as super_admin:  # fmt: skip
            again = super_admin.fence_producers(["ok-1", "ok-2"])
        assert {tid: epoch for tid, (_, epoch) in again.items()} == {"ok-1": 1, "ok-2": 1}
