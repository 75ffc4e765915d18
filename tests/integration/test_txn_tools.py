"""KIP-664 tooling: the CLI finds and aborts a hanging transaction."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.admin import KafkaAdminClient
from kio.schema.errors import ErrorCode
from kio.schema.offset_commit.v8 import request as oc
from kio.schema.offset_fetch.v7 import request as of

from oncelog.client.config import ClientConfig
from oncelog.client.transactions import TxnAdmin
from oncelog.client.wire import WireClient
from oncelog.coordinator.placement import partition_for
from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic, produce
from .test_transactions import READ_COMMITTED, READ_UNCOMMITTED, end_offsets, read_all, txn_producer


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oncelog.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_find_and_abort_hanging_transaction(tmp_path: Path, topic_name: str) -> None:
    b = EmbeddedBroker(tmp_path / "data").start()
    try:
        create_topic(b.bootstrap, topic_name, 1)
        p = txn_producer(b.bootstrap, "lost")
        p.begin_transaction()
        p.produce(topic_name, value=b"hanging")
        p.flush()
        other = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True})
        other.produce(topic_name, value=b"stuck-behind")
        other.flush()
        b.kill()
        # Lose the coordinator's memory of the transaction: the partition still holds it open.
        for d in (tmp_path / "data").glob("__transaction_state-*"):
            shutil.rmtree(d)
        b.start()
        assert end_offsets(b.bootstrap, topic_name, 1, READ_COMMITTED) == [0]
        out = cli(
            "transactions",
            "find-hanging",
            "-b",
            b.bootstrap,
            "--topic",
            topic_name,
            "--max-transaction-timeout-ms",
            "0",
            "-o",
            "json",
        )
        assert out.returncode == 0, out.stderr
        [row] = json.loads(out.stdout)
        assert (row["topic"], row["start_offset"], row["kind"]) == (topic_name, 0, "orphaned")
        with TxnAdmin(ClientConfig(b.bootstrap)) as admin:
            hanging = admin.find_hanging([topic_name], max_timeout_ms=0)
        assert len(hanging) == 1 and hanging[0].current_txn_start_offset == 0
        out = cli(
            "transactions",
            "abort",
            "-b",
            b.bootstrap,
            "--topic",
            topic_name,
            "--partition",
            "0",
            "--producer-id",
            str(hanging[0].producer_id),
        )
        assert out.returncode == 0, out.stderr
        assert (
            end_offsets(b.bootstrap, topic_name, 1, READ_COMMITTED)
            == end_offsets(b.bootstrap, topic_name, 1, READ_UNCOMMITTED)
            == [3]
        )
        assert [m.value() for m in read_all(b.bootstrap, topic_name, 1, "read_committed")] == [
            b"stuck-behind"
        ]
        metrics = json.loads(cli("transactions", "metrics", "-b", b.bootstrap).stdout)
        assert metrics["partitions"][f"{topic_name}-0"]["lso_lag"] == 0
    finally:
        b.stop()


def test_cli_list_describe_and_abort_by_id(broker: EmbeddedBroker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 2)
    p = txn_producer(broker.bootstrap, "cli-open")
    p.begin_transaction()
    p.produce(topic_name, value=b"x", partition=1)
    p.flush()
    out = cli("transactions", "list", "-b", broker.bootstrap, "--state", "Ongoing")
    assert "cli-open" in out.stdout and "Ongoing" in out.stdout
    out = cli("transactions", "describe", "cli-open", "-b", broker.bootstrap)
    assert "Ongoing" in out.stdout and f"{topic_name}: 1" in out.stdout
    out = cli("transactions", "describe", "no-such-id", "-b", broker.bootstrap)
    assert out.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in out.stderr.upper()
    out = cli("transactions", "abort", "-b", broker.bootstrap, "--transactional-id", "cli-open")
    assert out.returncode == 0, out.stderr
    assert end_offsets(broker.bootstrap, topic_name, 2, READ_COMMITTED) == [0, 2]
    assert read_all(broker.bootstrap, topic_name, 2, "read_committed", idle=1.0) == []
    out = cli("transactions", "abort", "-b", broker.bootstrap)
    assert out.returncode == 2


def _stable_fetch(bootstrap: str, group: str, topic: str) -> tuple[int, int]:
    """OffsetFetch(require_stable) at the wire: (partition error code, committed offset)."""
    with WireClient(bootstrap) as c:
        resp = c.request(
            of.OffsetFetchRequest(
                group_id=group,
                topics=(of.OffsetFetchRequestTopic(name=topic, partition_indexes=(0,)),),
                require_stable=True,
            )
        )
    part = resp.topics[0].partitions[0]
    return part.error_code, part.committed_offset


def test_admin_abort_on_offsets_partition_releases_pending_txn_offsets(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    """An abandoned TxnOffsetCommit aborted by partition (WriteTxnMarkers on the group's
    ``__consumer_offsets`` partition) must drop the group's pending offsets at once."""
    group = "abandoned-group"
    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, [(None, b"x", 0) for _ in range(10)])
    with WireClient(broker.bootstrap) as c:
        committed = c.request(
            oc.OffsetCommitRequest(
                group_id=group,
                member_id="",
                topics=(
                    oc.OffsetCommitRequestTopic(
                        name=topic_name,
                        partitions=(
                            oc.OffsetCommitRequestPartition(
                                partition_index=0, committed_offset=3, committed_metadata=None
                            ),
                        ),
                    ),
                ),
            )
        )
    assert committed.topics[0].partitions[0].error_code == ErrorCode.none
    group_consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    p = txn_producer(broker.bootstrap, "abandoned-offsets", **{"transaction.timeout.ms": 600_000})
    p.begin_transaction()
    p.send_offsets_to_transaction(
        [TopicPartition(topic_name, 0, 7)], group_consumer.consumer_group_metadata(), 10
    )
    group_consumer.close()
    # The producer is abandoned here: it never commits nor aborts (and its timeout is long).
    assert _stable_fetch(broker.bootstrap, group, topic_name) == (
        ErrorCode.unstable_offset_commit,
        -1,
    )
    with TxnAdmin(ClientConfig(broker.bootstrap)) as admin:
        pid = admin.describe_txn("abandoned-offsets").producer_id
    offsets_partition = partition_for(group, 50)
    out = cli(
        "transactions",
        "abort",
        "-b",
        broker.bootstrap,
        "--topic",
        "__consumer_offsets",
        "--partition",
        str(offsets_partition),
        "--producer-id",
        str(pid),
    )
    assert out.returncode == 0, out.stderr
    # The abort dropped the pending offset 7: the last plain commit (3) is stable again.
    assert _stable_fetch(broker.bootstrap, group, topic_name) == (ErrorCode.none, 3)
    del p


def test_describe_reports_minus_one_start_for_a_transaction_not_started(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    """Kafka sends TransactionStartTimeMs -1 until a transaction begins; kafka-python reads
    it as is, our client (whose kio decoder refuses negative timestamps) as None."""
    create_topic(broker.bootstrap, topic_name, 1)
    p = txn_producer(broker.bootstrap, "not-started")  # InitProducerId only: Empty
    kafka_admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        empty = kafka_admin.describe_transactions(["not-started"])["not-started"]
        assert (empty.state.value, empty.transaction_start_time_ms) == ("Empty", -1)
        with TxnAdmin(ClientConfig(bootstrap=broker.bootstrap)) as admin:
            ours = admin.describe_txn("not-started")
            assert ours is not None
            assert (ours.transaction_state, ours.transaction_start_time_ms) == ("Empty", -1)
            assert ours.transaction_start_time is None
            out = cli("transactions", "describe", "not-started", "-b", broker.bootstrap)
            assert out.returncode == 0, out.stderr
            assert "Empty" in out.stdout and "started           -" in out.stdout
            p.begin_transaction()
            p.produce(topic_name, value=b"x")
            p.flush()
            ongoing = admin.describe_txn("not-started")
            assert ongoing is not None and ongoing.transaction_state == "Ongoing"
            started = ongoing.transaction_start_time
            assert started is not None and ongoing.transaction_start_time_ms > 0
            assert int(started.timestamp() * 1000) == ongoing.transaction_start_time_ms
        described = kafka_admin.describe_transactions(["not-started"])["not-started"]
        assert described.transaction_start_time_ms == ongoing.transaction_start_time_ms
        p.abort_transaction()
    finally:
        kafka_admin.close()
