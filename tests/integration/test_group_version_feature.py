"""The ``group.version`` feature and ``group.coordinator.rebalance.protocols`` gate the
consumer group protocol (KIP-848) as in Kafka 4.x: at group.version 0, or without "consumer"
among the protocols, ConsumerGroupHeartbeat and ConsumerGroupDescribe answer
UNSUPPORTED_VERSION, and ApiVersions no longer finalizes group.version; classic groups keep
working."""

from __future__ import annotations

import datetime
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError
from kio.schema.api_versions.v4 import request as av4
from kio.schema.consumer_group_describe.v0 import request as cgd
from kio.schema.consumer_group_heartbeat.v0 import request as cgh
from kio.schema.errors import ErrorCode

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic, produce
from .test_consumer_protocol import consumer as consumer_protocol_consumer


def join(c: WireClient, group: str, topic: str) -> cgh.ConsumerGroupHeartbeatRequest:
    return c.request(
        cgh.ConsumerGroupHeartbeatRequest(
            group_id=group,
            member_id=str(uuid.uuid4()),
            member_epoch=0,
            rebalance_timeout=datetime.timedelta(minutes=5),
            subscribed_topic_names=(topic,),
            topic_partitions=(),
        )
    )


def classic_read(bootstrap: str, topic: str, group: str, n: int) -> list[bytes]:
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    )
    values: list[bytes] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(values) < n and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                values.append(m.value())
    finally:
        c.close()
    return values


def finalized(c: WireClient) -> list[tuple[str, int]]:
    resp = c.request(av4.ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    return [(f.name, f.max_version_level) for f in resp.finalized_features]


@pytest.mark.parametrize(
    ("settings", "levels"),
    [
        ({"oncelog.feature.group.version": "0"}, [("transaction.version", 2)]),
        (
            {"group.coordinator.rebalance.protocols": "classic"},
            [("group.version", 1), ("transaction.version", 2)],
        ),
    ],
    ids=["group.version=0", "protocols=classic"],
)
def test_the_consumer_protocol_can_be_turned_off(
    tmp_path: Path, settings: dict[str, str], levels: list[tuple[str, int]]
) -> None:
    with EmbeddedBroker(tmp_path / "data", settings=settings) as b:
        create_topic(b.bootstrap, "t", 2)
        with WireClient(b.bootstrap) as c:
            assert finalized(c) == levels
            reply = join(c, "g", "t")
            assert (reply.error_code, reply.error_message, reply.member_id) == (
                ErrorCode.unsupported_version,
                None,
                None,
            )
            described = c.request(
                cgd.ConsumerGroupDescribeRequest(
                    group_ids=("g", "h"), include_authorized_operations=False
                )
            )
            assert [(g.group_id, g.error_code) for g in described.groups] == [
                ("g", ErrorCode.unsupported_version),
                ("h", ErrorCode.unsupported_version),
            ]
        # librdkafka with group.protocol=consumer stops with the broker's refusal ...
        c2 = consumer_protocol_consumer(b.bootstrap, "g")
        refusal = None
        try:
            c2.subscribe(["t"])
            deadline = time.monotonic() + 30
            while refusal is None and time.monotonic() < deadline:
                m = c2.poll(0.2)
                if m is not None and m.error():
                    refusal = m.error()
        finally:
            c2.close()
        assert refusal is not None and refusal.code() == KafkaError._FATAL
        assert "ConsumerGroupHeartbeat fatal error: Broker: API version not supported" in str(
            refusal
        )
        # ... and the classic protocol still serves the same group id.
        produce(b.bootstrap, "t", [(None, b"%d" % i, i % 2) for i in range(10)])
        assert sorted(classic_read(b.bootstrap, "t", "g", 10)) == sorted(
            b"%d" % i for i in range(10)
        )


def test_by_default_the_consumer_protocol_is_served(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "data") as b:
        create_topic(b.bootstrap, "t", 2)
        with WireClient(b.bootstrap) as c:
            assert finalized(c) == [("group.version", 1), ("transaction.version", 2)]
            reply = join(c, "g", "t")
            assert reply.error_code == ErrorCode.none and reply.member_epoch == 1
