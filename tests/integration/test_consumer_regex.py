"""KIP-848 regex subscriptions are resolved after the heartbeat that brings them, as in
Kafka (GroupMetadataManager.maybeUpdateRegularExpressions): that heartbeat is answered
without the regex's matches, the resolution bumps the group epoch, and a later heartbeat
assigns them. librdkafka's test 0045 (resubscribe with a regex and a topic name) expects
the named topic's partitions in one assignment and the matches in the next."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from kio.schema.consumer_group_heartbeat.v1 import request as cgh
from kio.schema.errors import ErrorCode

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic
from .test_consumer_protocol import consumer, wait_until
from .test_topic_ids_wire import topic_id

pytestmark = pytest.mark.xdist_group("timing")

SETTINGS = {"group.consumer.heartbeat.interval.ms": "300"}
Assignment = dict[uuid.UUID, tuple[int, ...]]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    b = EmbeddedBroker(tmp_path / "data", settings=SETTINGS).start(timeout=60)
    try:
        yield b
    finally:
        b.stop()


def test_resubscribing_with_a_regex_and_a_name_assigns_the_name_first(
    broker: EmbeddedBroker,
) -> None:
    """librdkafka 0045's resubscribe_with_regex, last step: after subscribing to a name
    (2 partitions) and leaving, subscribe to the name and a regex matching two topics of
    4 partitions: one assignment of the 2, then one of the 8, then all 10 held."""
    bs = broker.bootstrap
    create_topic(bs, "topic_a", 2)
    create_topic(bs, "topic_regex1", 4)
    create_topic(bs, "topic_regex2", 4)
    assigned: list[list[tuple[str, int]]] = []
    revoked: list[list[tuple[str, int]]] = []

    def on_assign(c: Consumer, parts: list[TopicPartition]) -> None:
        if parts:
            assigned.append(sorted((p.topic, p.partition) for p in parts))

    def on_revoke(c: Consumer, parts: list[TopicPartition]) -> None:
        revoked.append(sorted((p.topic, p.partition) for p in parts))

    c = consumer(bs, "g-resubscribe-regex")
    try:
        c.subscribe(["topic_a"], on_assign=on_assign, on_revoke=on_revoke)
        wait_until(lambda: c.poll(0.05) is None and len(c.assignment()) == 2, 30, "topic_a")
        assert assigned == [[("topic_a", 0), ("topic_a", 1)]]
        c.unsubscribe()
        wait_until(lambda: c.poll(0.05) is None and not c.assignment(), 30, "the revocation")
        assigned.clear()
        c.subscribe(["^.*topic_regex.*", "topic_a"], on_assign=on_assign, on_revoke=on_revoke)
        wait_until(lambda: c.poll(0.05) is None and len(c.assignment()) == 10, 30, "all 10")
        regex_parts = [(t, p) for t in ("topic_regex1", "topic_regex2") for p in range(4)]
        assert assigned == [[("topic_a", 0), ("topic_a", 1)], regex_parts]
    finally:
        c.close()


def beat(
    c: WireClient,
    member: str,
    epoch: int,
    owned: Assignment,
    *,
    regex: str | None = None,
) -> cgh.ConsumerGroupHeartbeatRequest:
    """A full heartbeat (rebalance timeout, names, owned partitions): Kafka answers each
    with the member's whole assignment."""
    reply = c.request(
        cgh.ConsumerGroupHeartbeatRequest(
            group_id="g-regex-epochs",
            member_id=member,
            member_epoch=epoch,
            rebalance_timeout=datetime.timedelta(seconds=30),
            subscribed_topic_names=("lit",),
            subscribed_topic_regex=regex,
            topic_partitions=tuple(
                cgh.TopicPartitions(topic_id=t, partitions=ps) for t, ps in owned.items()
            ),
        )
    )
    assert reply.error_code == ErrorCode.none, reply
    assert reply.assignment is not None
    return reply


def parts(reply: object) -> Assignment:
    assignment = reply.assignment  # type: ignore[attr-defined]
    return {tp.topic_id: tuple(sorted(tp.partitions)) for tp in assignment.topic_partitions}


def test_the_heartbeat_bringing_a_regex_keeps_its_epoch_and_a_later_one_assigns_it(
    broker: EmbeddedBroker,
) -> None:
    """Exact epochs on the wire: names only (epoch 1) -> the same names plus a regex: epoch
    1, the named topic only -> after the resolution: epoch 2 with the matches. A matching
    topic created later is assigned at epoch 3, once a heartbeat comes 10 s after the
    last resolution (Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS)."""
    bs = broker.bootstrap
    for name, n in (("lit", 2), ("rx-a", 3), ("rx-b", 3), ("other", 1)):
        create_topic(bs, name, n)
    member = str(uuid.uuid4())
    with WireClient(bs) as c:
        ids = {name: topic_id(c, name) for name in ("lit", "rx-a", "rx-b")}
        first = beat(c, member, 0, {})
        assert (first.member_epoch, parts(first)) == (1, {ids["lit"]: (0, 1)})
        held = parts(first)
        asked_at = time.monotonic()  # the resolution comes after this heartbeat
        with_regex = beat(c, member, 1, held, regex="rx-.*")
        assert (with_regex.member_epoch, parts(with_regex)) == (1, {ids["lit"]: (0, 1)})
        deadline = time.monotonic() + 10
        reply = with_regex
        while reply.member_epoch == 1 and time.monotonic() < deadline:
            time.sleep(0.05)
            reply = beat(c, member, 1, held, regex="rx-.*")
        assert reply.member_epoch == 2
        assert parts(reply) == {
            ids["lit"]: (0, 1),
            ids["rx-a"]: (0, 1, 2),
            ids["rx-b"]: (0, 1, 2),
        }
        held = parts(reply)

        create_topic(bs, "rx-c", 1)
        ids["rx-c"] = topic_id(c, "rx-c")
        reply = beat(c, member, 2, held, regex="rx-.*")
        assert (reply.member_epoch, parts(reply)) == (2, held)  # within the 10 s
        deadline = time.monotonic() + 30
        while reply.member_epoch == 2 and time.monotonic() < deadline:
            time.sleep(0.2)
            reply = beat(c, member, 2, held, regex="rx-.*")
        assert time.monotonic() - asked_at >= 10
        assert reply.member_epoch == 3
        assert parts(reply) == {**held, ids["rx-c"]: (0,)}
