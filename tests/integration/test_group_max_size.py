"""``group.max.size`` with real librdkafka consumers: a classic group at its limit refuses
a further member with GROUP_MAX_SIZE_REACHED while its members keep consuming, and takes
it once a member leaves."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError

from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic, produce

pytestmark = pytest.mark.xdist_group("timing")

TOPIC = "max-size"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    settings = {"group.max.size": "1", "group.initial.rebalance.delay.ms": "0"}
    with EmbeddedBroker(tmp_path / "data", settings=settings) as b:
        yield b


def consumer(bootstrap: str, client_id: str) -> Consumer:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "g-max",
            "client.id": client_id,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
        }
    )
    c.subscribe([TOPIC])
    return c


def test_a_full_classic_group_refuses_a_member_until_one_leaves(broker: EmbeddedBroker) -> None:
    create_topic(broker.bootstrap, TOPIC, partitions=2)
    produce(broker.bootstrap, TOPIC, [(None, str(i).encode(), i % 2) for i in range(200)])
    a = consumer(broker.bootstrap, "a")
    seen_a: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(seen_a) < 200 and time.monotonic() < deadline:
        m = a.poll(0.2)
        if m is not None and not m.error():
            seen_a.append(m.value())
    assert len(seen_a) == 200
    a.commit(asynchronous=False)

    b = consumer(broker.bootstrap, "b")
    refused: list[int] = []
    deadline = time.monotonic() + 20
    while not refused and time.monotonic() < deadline:
        m = b.poll(0.2)
        if m is not None and m.error():
            refused.append(m.error().code())
        a.poll(0.05)  # a keeps its membership with heartbeats
    assert refused == [KafkaError.GROUP_MAX_SIZE_REACHED]
    assert b.assignment() == []
    assert len(a.assignment()) == 2  # the member keeps everything; no rebalance took it away

    a.close()  # room again: b joins and takes both partitions
    deadline = time.monotonic() + 30
    while len(b.assignment()) < 2 and time.monotonic() < deadline:
        b.poll(0.2)
    assert len(b.assignment()) == 2
    b.close()
