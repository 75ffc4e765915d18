"""Topic administration, offsets by time, DeleteRecords and retention through real clients."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
)
from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v7 import request as lo

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker

from .helpers import consume, create_topic, produce


def list_offset(bootstrap: str, topic: str, timestamp: int) -> tuple[int, int, int]:
    with WireClient(bootstrap) as c:
        r = c.request(
            lo.ListOffsetsRequest(
                replica_id=-1,
                isolation_level=0,
                topics=(
                    lo.ListOffsetsTopic(
                        name=topic,
                        partitions=(
                            lo.ListOffsetsPartition(
                                partition_index=0, current_leader_epoch=-1, timestamp=timestamp
                            ),
                        ),
                    ),
                ),
            )
        )
    p = r.topics[0].partitions[0]
    return p.error_code, p.offset, p.timestamp


def test_offsets_by_timestamp_and_max_timestamp(broker: EmbeddedBroker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    base = 1_700_000_000_000
    stamps = [base + 10 * i for i in range(50)]
    stamps[30] = base + 100_000  # the max is in the middle
    for i, ts in enumerate(stamps):
        p.produce(topic_name, value=b"%d" % i, timestamp=ts)
        if i % 10 == 9:
            p.flush()
    p.flush()
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"})
    found = c.offsets_for_times([TopicPartition(topic_name, 0, base + 95)], timeout=10)
    c.close()
    assert found[0].offset == 10  # first record with ts >= target
    assert list_offset(broker.bootstrap, topic_name, base + 10_000_000) == (ErrorCode.none, -1, -1)
    assert list_offset(broker.bootstrap, topic_name, -3) == (ErrorCode.none, 30, base + 100_000)
    assert list_offset(broker.bootstrap, topic_name, -2)[1] == 0
    assert list_offset(broker.bootstrap, topic_name, -1)[1] == 50


def test_delete_records_and_create_partitions(broker: EmbeddedBroker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, [(None, b"%d" % i, 0) for i in range(100)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = admin.delete_records([TopicPartition(topic_name, 0, 40)])
    out = list(res.values())[0].result(10)
    assert out.low_watermark == 40
    msgs = consume(broker.bootstrap, topic_name, 1, 60)
    assert [m.offset() for m in msgs] == list(range(40, 100))
    admin.create_partitions([NewPartitions(topic_name, 4)])[topic_name].result(10)
    md = admin.list_topics(topic_name, timeout=10)
    assert len(md.topics[topic_name].partitions) == 4
    acked = produce(broker.bootstrap, topic_name, [(None, b"new", 3)])
    assert (acked[0].partition, acked[0].offset) == (3, 0)
    bad = admin.create_partitions([NewPartitions(topic_name, 2)])[topic_name]
    try:
        bad.result(10)
        raise AssertionError("shrinking partitions must fail")
    except Exception as exc:
        assert "INVALID_PARTITIONS" in str(exc).upper()


def test_retention_moves_log_start(tmp_path: Path, topic_name: str) -> None:
    with EmbeddedBroker(
        tmp_path / "data",
        settings={
            "log.retention.check.interval.ms": "200",
            "log.flush.scheduler.interval.ms": "100",
        },
    ) as b:
        create_topic(b.bootstrap, topic_name, 1, config={"segment.bytes": "3000"})
        for _ in range(5):
            produce(b.bootstrap, topic_name, [(None, b"x" * 100, 0) for _ in range(20)])
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        res = ConfigResource(
            "topic",
            topic_name,
            incremental_configs=[
                ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        admin.incremental_alter_configs([res])[res].result(10)
        deadline = time.monotonic() + 10
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "w"})
        low = 0
        while time.monotonic() < deadline:
            low, high = c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=5)
            if low > 0:
                break
            time.sleep(0.2)
        c.close()
        assert 0 < low <= 100


def test_topics_cli(broker: EmbeddedBroker, topic_name: str) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "oncelog.cli.main", "topics", *args, "-b", broker.bootstrap],
            capture_output=True,
            text=True,
            timeout=60,
        )

    out = cli("create", topic_name, "--partitions", "3", "-c", "retention.ms=1234")
    assert out.returncode == 0 and "created" in out.stdout
    assert topic_name in cli("list").stdout.split()
    desc = cli("describe", topic_name)
    assert desc.returncode == 0 and "retention.ms=1234" in desc.stdout
    dup = cli("create", topic_name)
    assert dup.returncode == 1 and "already exists" in dup.stderr
    bad = cli("create", "bad/name")
    assert bad.returncode == 1 and "illegal" in bad.stderr
    badcfg = cli("create", topic_name + "x", "-c", "retention.ms=banana")
    assert badcfg.returncode == 1 and "retention.ms" in badcfg.stderr
    assert cli("delete", topic_name).returncode == 0
    assert topic_name not in cli("list").stdout.split()
    missing = cli("describe", topic_name)
    assert missing.returncode == 1 and "unknown topic" in missing.stderr
