"""KIP-848 online migration with real librdkafka consumers: a live classic group
(``group.protocol=classic``) is upgraded when a ``group.protocol=consumer`` member joins,
its classic members keep consuming inside the consumer group, and the group turns classic
again when that member leaves (``group.consumer.migration.policy``, Kafka 4.x's
bidirectional default); with the policy disabled the consumer-protocol member is refused
(GROUP_ID_NOT_FOUND) as before."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from kio.schema.consumer_group_describe.v0 import request as cgd
from kio.schema.consumer_group_heartbeat.v0 import request as cgh
from kio.schema.describe_groups.v5 import request as dg
from kio.schema.errors import ErrorCode

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic, produce
from .test_consumer_protocol import consumer as consumer_protocol_consumer
from .test_consumer_protocol import wait_until
from .test_transactions import txn_producer

pytestmark = pytest.mark.xdist_group("timing")

SETTINGS = {
    "group.consumer.heartbeat.interval.ms": "300",
    "group.initial.rebalance.delay.ms": "0",
}
GROUP = "g-migrate"
PARTS = 6


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    b = EmbeddedBroker(tmp_path / "data", settings=SETTINGS).start(timeout=60)
    try:
        yield b
    finally:
        b.stop()


def classic(bootstrap: str, client_id: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "client.id": client_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 300,
        }
    )


class Consumers:
    """Polls a set of consumers, committing each record before the next poll (so a
    revocation, served inside poll, finds everything processed committed)."""

    def __init__(self) -> None:
        self.members: dict[str, Consumer] = {}
        self.seen: list[tuple[str, int]] = []
        self.errors: list[str] = []

    def add(self, name: str, c: Consumer, topic: str) -> None:
        c.subscribe([topic])
        self.members[name] = c

    def close(self, name: str) -> None:
        self.members.pop(name).close()

    def poll_all(self) -> None:
        for name, c in list(self.members.items()):
            m: Message | None = c.poll(0.05)
            if m is None:
                continue
            if m.error():
                self.errors.append(f"{name}: {m.error()}")
                continue
            self.seen.append((name, int(m.value())))
            c.commit(message=m, asynchronous=False)

    def until(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        def step() -> bool:
            self.poll_all()
            return predicate()

        try:
            wait_until(step, timeout, what)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; {self.state()}") from None

    def state(self) -> str:
        counts = {n: sum(1 for x, _ in self.seen if x == n) for n in self.members}
        owned = {n: sorted(tp.partition for tp in c.assignment()) for n, c in self.members.items()}
        return f"seen {len(self.seen)} {counts}, assignments {owned}, errors {self.errors[:3]}"

    def assigned(self, name: str) -> int:
        return len(self.members[name].assignment())


def consumer_describe(bootstrap: str) -> tuple[int, int, list[str]]:
    with WireClient(bootstrap) as c:
        r = c.request(
            cgd.ConsumerGroupDescribeRequest(
                group_ids=(GROUP,), include_authorized_operations=False
            )
        )
    g = r.groups[0]
    return g.error_code, g.group_epoch, sorted(m.member_id for m in g.members)


def classic_describe(bootstrap: str) -> tuple[str, str, str, int]:
    with WireClient(bootstrap) as c:
        r = c.request(
            dg.DescribeGroupsRequest(groups=(GROUP,), include_authorized_operations=False)
        )
    g = r.groups[0]
    return g.group_state, g.protocol_type, g.protocol_data, len(g.members)


def test_upgrade_to_a_mixed_group_then_downgrade_consumes_each_record_once(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    bs = broker.bootstrap
    create_topic(bs, topic_name, PARTS)
    produce(bs, topic_name, [(None, str(i).encode(), i % PARTS) for i in range(600)])
    group = Consumers()
    group.add("a", classic(bs, "a"), topic_name)
    group.add("b", classic(bs, "b"), topic_name)
    group.until(
        lambda: group.assigned("a") == 3 and group.assigned("b") == 3 and len(group.seen) >= 150,
        60,
        "the classic 3/3 split",
    )
    assert classic_describe(bs)[:3] == ("Stable", "consumer", "range")
    # A consumer-protocol member joins the live classic group: the group is upgraded.
    group.add("c", consumer_protocol_consumer(bs, GROUP), topic_name)

    def by(name: str) -> int:
        return sum(1 for n, _ in group.seen if n == name)

    group.until(
        lambda: (
            all(group.assigned(n) >= 1 for n in "abc")
            and sum(group.assigned(n) for n in "abc") == PARTS
            and by("c") >= 10
        ),
        60,
        "every member of the mixed group to own partitions and c to consume",
    )
    error, _, members = consumer_describe(bs)
    assert error == ErrorCode.none and len(members) == 3
    group.until(lambda: len(group.seen) >= 600, 60, "the first 600 records")
    before = {n: by(n) for n in "abc"}
    assert before["a"] > 0 and before["b"] > 0
    # The consumer-protocol member leaves: only classic members remain, so the group
    # turns classic again and they rebalance the classic way.
    group.close("c")
    group.until(
        lambda: group.assigned("a") + group.assigned("b") == PARTS,
        60,
        "the classic members to take over",
    )
    assert consumer_describe(bs)[0] == ErrorCode.group_id_not_found
    state, ptype, _, n = classic_describe(bs)
    assert (state, ptype, n) == ("Stable", "consumer", 2)
    produce(bs, topic_name, [(None, str(i).encode(), i % PARTS) for i in range(600, 900)])
    group.until(lambda: len(group.seen) >= 900, 60, "the records produced afterwards")
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:  # nothing is delivered twice afterwards either
        group.poll_all()
    for name in list(group.members):
        group.close(name)
    assert group.errors == []
    assert {n for n, _ in group.seen[600:]} == {"a", "b"}
    values = [v for _, v in group.seen]
    assert sorted(values) == list(range(900)), "a record was lost or delivered twice"


def test_disabled_policy_refuses_the_consumer_member_as_before(tmp_path: Path) -> None:
    settings = {**SETTINGS, "group.consumer.migration.policy": "disabled"}
    with EmbeddedBroker(tmp_path / "data", settings=settings) as b:
        create_topic(b.bootstrap, "t", 2)
        a = classic(b.bootstrap, "a")
        try:
            a.subscribe(["t"])
            wait_until(lambda: a.poll(0.05) is None and len(a.assignment()) == 2, 30, "a")
            for _ in range(2):
                with WireClient(b.bootstrap) as c:
                    reply = c.request(
                        cgh.ConsumerGroupHeartbeatRequest(
                            group_id=GROUP,
                            member_id=str(uuid.uuid4()),
                            member_epoch=0,
                            rebalance_timeout=datetime.timedelta(minutes=5),
                            subscribed_topic_names=("t",),
                            topic_partitions=(),
                        )
                    )
                assert reply.error_code == ErrorCode.group_id_not_found
            assert consumer_describe(b.bootstrap)[0] == ErrorCode.group_id_not_found
            assert classic_describe(b.bootstrap)[:2] == ("Stable", "consumer")
            time.sleep(1)
            a.poll(0.1)
            assert len(a.assignment()) == 2  # the classic member was not disturbed
        finally:
            a.close()


def test_a_mixed_group_survives_a_broker_restart(broker: EmbeddedBroker, topic_name: str) -> None:
    bs = broker.bootstrap
    create_topic(bs, topic_name, PARTS)
    produce(bs, topic_name, [(None, str(i).encode(), i % PARTS) for i in range(300)])
    group = Consumers()
    group.add("a", classic(bs, "a"), topic_name)
    group.until(lambda: group.assigned("a") == PARTS, 60, "a to own everything")
    group.add("c", consumer_protocol_consumer(bs, GROUP), topic_name)
    group.until(
        lambda: (
            group.assigned("a") >= 1
            and group.assigned("c") >= 1
            and group.assigned("a") + group.assigned("c") == PARTS
            and len(group.seen) >= 300
        ),
        60,
        "the mixed group to settle",
    )
    error, epoch, before = consumer_describe(bs)
    assert error == ErrorCode.none and len(before) == 2
    broker.stop()
    broker.start(timeout=60)
    # The group comes back mixed, with the same members and epoch.
    error, epoch_after, after = consumer_describe(bs)
    assert (error, after) == (ErrorCode.none, before)
    assert epoch_after == epoch
    produce(bs, topic_name, [(None, str(i).encode(), i % PARTS) for i in range(300, 600)])
    group.until(lambda: len(group.seen) >= 600, 90, "the records produced after the restart")
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        group.poll_all()
    assert consumer_describe(bs)[2] == before  # nobody was fenced by the restart
    for name in list(group.members):
        group.close(name)
    values = [v for _, v in group.seen]
    assert sorted(values) == list(range(600)), "a record was lost or delivered twice"


def test_a_classic_zombie_in_a_consumer_group_is_fenced_by_its_generation(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    """KIP-447 inside a mixed group: a classic member's TxnOffsetCommit carries its
    generation, which is its member epoch; metadata taken before the upgrade moved its
    epoch on is refused (ILLEGAL_GENERATION, as Kafka answers a classic member)."""
    bs = broker.bootstrap
    create_topic(bs, topic_name, 2)
    produce(bs, topic_name, [(None, b"%d" % i, i % 2) for i in range(4)])
    group = Consumers()
    group.add("a", classic(bs, "a"), topic_name)
    group.until(lambda: group.assigned("a") == 2, 60, "a to own both partitions")
    stale = group.members["a"].consumer_group_metadata()
    group.add("c", consumer_protocol_consumer(bs, GROUP), topic_name)
    group.until(lambda: group.assigned("a") == 1 and group.assigned("c") == 1, 60, "the 1/1 split")
    fresh = group.members["a"].consumer_group_metadata()
    mine = group.members["a"].assignment()[0].partition
    offsets = [TopicPartition(topic_name, mine, 1)]
    p = txn_producer(bs, "zombie-migration")
    p.begin_transaction()
    with pytest.raises(KafkaException) as fenced:
        p.send_offsets_to_transaction(offsets, stale)
    assert fenced.value.args[0].code() == KafkaError.ILLEGAL_GENERATION
    p.abort_transaction()
    p.begin_transaction()
    p.send_offsets_to_transaction(offsets, fresh)
    p.commit_transaction()
    committed = group.members["c"].committed(offsets, timeout=10)
    assert [tp.offset for tp in committed] == [1]
    for name in list(group.members):
        group.close(name)
