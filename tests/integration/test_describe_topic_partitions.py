"""DescribeTopicPartitions (KIP-966): kafka-python's admin pages through the topics with
the cursor; raw requests get Kafka's error codes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafka.admin import KafkaAdminClient
from kio.schema.describe_topic_partitions.v0 import request as dtp
from kio.schema.errors import ErrorCode

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic

# Every topic operation (READ .. ALTER_CONFIGS: bits 3-8, 10, 11), as Kafka's
# authorizedOperations reports without an authorizer.
ALL_TOPIC_OPS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


def describe(
    c: WireClient, names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None
) -> Any:
    return c.request(
        dtp.DescribeTopicPartitionsRequest(
            topics=tuple(dtp.TopicRequest(name=n) for n in names),
            response_partition_limit=limit,
            cursor=None
            if cursor is None
            else dtp.Cursor(topic_name=cursor[0], partition_index=cursor[1]),
        )
    )


def test_kafka_python_pages_through_every_partition(tmp_path: Path) -> None:
    b = EmbeddedBroker(
        tmp_path / "data", settings={"max.request.partition.size.limit": "4"}
    ).start()
    try:
        for name, count in (("dtp-a", 3), ("dtp-b", 2), ("dtp-c", 1)):
            create_topic(b.bootstrap, name, count)
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            names = ["dtp-c", "dtp-a", "dtp-b", "dtp-missing"]
            first = admin.describe_topic_partitions(names, response_partition_limit=100)
            # The broker's limit (4) wins over the request's (100).
            assert first["next_cursor"] == {"topic_name": "dtp-b", "partition_index": 1}
            assert [
                (t["name"], t["error_code"], [p["partition_index"] for p in t["partitions"]])
                for t in first["topics"]
            ] == [("dtp-a", 0, [0, 1, 2]), ("dtp-b", 0, [0])]
            a = first["topics"][0]
            assert a["topic_id"].int != 0 and a["is_internal"] is False
            assert a["topic_authorized_operations"] == ALL_TOPIC_OPS
            assert a["partitions"][0] == {
                "error_code": 0,
                "partition_index": 0,
                "leader_id": 0,
                "leader_epoch": 0,
                "replica_nodes": [0],
                "isr_nodes": [0],
                "eligible_leader_replicas": None,  # kafka-python shows the empty list as None
                "last_known_elr": None,
                "offline_replicas": [],
            }
            second = admin.describe_topic_partitions(
                names, response_partition_limit=100, cursor=first["next_cursor"]
            )
            assert second["next_cursor"] is None
            assert [
                (t["name"], t["error_code"], [p["partition_index"] for p in t["partitions"]])
                for t in second["topics"]
            ] == [
                ("dtp-b", 0, [1]),
                ("dtp-c", 0, [0]),
                ("dtp-missing", ErrorCode.unknown_topic_or_partition.value, []),
            ]
            # All topics (an empty list): internal ones included, missing ones not invented.
            everything = admin.describe_topic_partitions([], response_partition_limit=1)
            assert everything["topics"][0]["name"] == "__consumer_offsets"
            assert everything["topics"][0]["is_internal"] is True
            assert everything["next_cursor"] == {
                "topic_name": "__consumer_offsets",
                "partition_index": 1,
            }
        finally:
            admin.close()
    finally:
        b.stop()


def test_invalid_cursors_and_names(broker: EmbeddedBroker) -> None:
    create_topic(broker.bootstrap, "dtp-x", 2)
    with WireClient(broker.bootstrap) as c:
        # The cursor's topic must be one of the requested topics...
        outside = describe(c, ["dtp-x"], cursor=("dtp-y", 0))
        assert [(t.name, t.error_code, t.partitions) for t in outside.topics] == [
            ("dtp-x", ErrorCode.invalid_request, ())
        ]
        # ... and its partition not negative.
        negative = describe(c, ["dtp-x"], cursor=("dtp-x", -1))
        assert [(t.name, t.error_code) for t in negative.topics] == [
            ("dtp-x", ErrorCode.invalid_request)
        ]
        # Topics before the cursor are left out; the cursor's partition is where it resumes.
        resumed = describe(c, ["dtp-a-before", "dtp-x"], cursor=("dtp-x", 1))
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in resumed.topics] == [
            ("dtp-x", [1])
        ]
        # A limit below 1 still returns one partition.
        one = describe(c, ["dtp-x"], limit=0)
        assert [p.partition_index for p in one.topics[0].partitions] == [0]
        assert (one.next_cursor.topic_name, one.next_cursor.partition_index) == ("dtp-x", 1)
        illegal = describe(c, ["bad name!"])
        assert [(t.name, t.error_code) for t in illegal.topics] == [
            ("bad name!", ErrorCode.invalid_topic_exception)
        ]
