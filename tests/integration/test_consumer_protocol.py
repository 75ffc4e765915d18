"""The KIP-848 consumer group protocol with librdkafka (``group.protocol=consumer``):
rebalancing, exactly-once consume-transform-produce, KIP-447 zombie fencing by member
epoch, and ConsumerGroupDescribe through the AdminClient."""

from __future__ import annotations

import json
import random
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient
from typer.testing import CliRunner

from oncelog.cli.main import app
from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic, produce
from .test_groups import assert_exactly_once_copy, start_app
from .test_transactions import read_all, txn_producer

# Short heartbeats make reconciliation (several heartbeat round trips) quick.
FAST = {"group.consumer.heartbeat.interval.ms": "300"}


@pytest.fixture
def fast_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    b = EmbeddedBroker(tmp_path / "data", settings=FAST).start(timeout=60)
    try:
        yield b
    finally:
        b.stop()


def consumer(bootstrap: str, group: str, **conf: object) -> Consumer:
    # librdkafka refuses the classic settings (session.timeout.ms, heartbeat.interval.ms,
    # partition.assignment.strategy) with this protocol: the broker decides them.
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **conf,
        }
    )


def wait_until(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def poll_one(c: Consumer, timeout: float = 0.1) -> Message | None:
    m = c.poll(timeout)
    if m is None:
        return None
    assert not m.error(), m.error()
    return m


def test_two_members_share_six_partitions_and_each_record_is_consumed_once(
    fast_broker: EmbeddedBroker, topic_name: str
) -> None:
    bs = fast_broker.bootstrap
    create_topic(bs, topic_name, 6)
    produce(bs, topic_name, [(None, str(i).encode(), i % 6) for i in range(600)])
    seen: list[tuple[str, int]] = []

    def consume_from(c: Consumer, name: str, limit: int) -> int:
        # Commit each record before the next poll: a revocation (served inside poll)
        # then finds every processed record committed.
        m = poll_one(c)
        if m is None or limit <= 0:
            return 0
        seen.append((name, int(m.value())))
        c.commit(message=m, asynchronous=False)
        return 1

    a = consumer(bs, "g-rebalance")
    a.subscribe([topic_name])
    while len(seen) < 150:
        consume_from(a, "a", 1)
    b = consumer(bs, "g-rebalance")
    b.subscribe([topic_name])

    def both_assigned() -> bool:
        consume_from(a, "a", 450 - len(seen))
        consume_from(b, "b", 450 - len(seen))
        return len(a.assignment()) == 3 and len(b.assignment()) == 3

    wait_until(both_assigned, 30, "a 3/3 split")
    while len(seen) < 450:
        consume_from(a, "a", 1)
        consume_from(b, "b", 1)
    a.close()  # leaves with member epoch -1: b takes over all six partitions
    wait_until(lambda: consume_from(b, "b", 1) >= 0 and len(seen) == 600, 30, "b to finish")
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:  # nothing is delivered twice afterwards either
        consume_from(b, "b", 1)
    assert len(b.assignment()) == 6
    b.close()
    values = [v for _, v in seen]
    assert sorted(values) == list(range(600))
    assert {name for name, _ in seen} == {"a", "b"}


def test_consume_transform_produce_exactly_once(
    fast_broker: EmbeddedBroker, topic_name: str
) -> None:
    bs = fast_broker.bootstrap
    out_topic = topic_name + "-out"
    create_topic(bs, topic_name, 3)
    create_topic(bs, out_topic, 3)
    produce(bs, topic_name, [(None, str(i).encode(), i % 3) for i in range(300)])
    c = consumer(bs, "g-eos", **{"isolation.level": "read_committed"})
    c.subscribe([topic_name])
    p = txn_producer(bs, "eos-848")
    done = 0
    aborted_once = False
    deadline = time.monotonic() + 60
    while done < 300 and time.monotonic() < deadline:
        msgs = [m for m in c.consume(50, 0.3) if not m.error()]
        if not msgs:
            continue
        p.begin_transaction()
        for m in msgs:
            p.produce(out_topic, (b"x" + m.value()), partition=m.partition())
        p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata())
        if not aborted_once:
            # The first batch is aborted: output and offsets vanish; rewind and redo.
            p.flush()
            p.abort_transaction()
            aborted_once = True
            for m in msgs:
                c.seek(TopicPartition(m.topic(), m.partition(), m.offset()))
            for tp in c.committed(c.assignment()):
                c.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
            continue
        p.commit_transaction()
        done += len(msgs)
    c.close()
    assert done == 300
    values = sorted(int(m.value()[1:]) for m in read_all(bs, out_topic, 3, "read_committed"))
    assert values == list(range(300))
    check = consumer(bs, "g-eos")
    committed = check.committed([TopicPartition(topic_name, p) for p in range(3)], timeout=10)
    check.close()
    assert sum(tp.offset for tp in committed) == 300


def test_zombie_with_a_stale_member_epoch_is_fenced(
    fast_broker: EmbeddedBroker, topic_name: str
) -> None:
    """KIP-447 with KIP-848: TxnOffsetCommit carries the member epoch; an old instance's
    group metadata (taken before a rebalance moved its member epoch on) is refused."""
    bs = fast_broker.bootstrap
    create_topic(bs, topic_name, 2)
    produce(bs, topic_name, [(None, b"v", i % 2) for i in range(4)])
    a = consumer(bs, "g-zombie")
    a.subscribe([topic_name])
    wait_until(lambda: poll_one(a) is not None or len(a.assignment()) == 2, 30, "assignment")
    stale = a.consumer_group_metadata()  # member epoch 1
    b = consumer(bs, "g-zombie")
    b.subscribe([topic_name])

    def rebalanced() -> bool:
        poll_one(a, 0.05)
        poll_one(b, 0.05)
        return len(a.assignment()) == 1 and len(b.assignment()) == 1

    wait_until(rebalanced, 30, "the 1/1 split")
    fresh = a.consumer_group_metadata()
    p = txn_producer(bs, "zombie-848")
    p.begin_transaction()
    offsets = [TopicPartition(topic_name, a.assignment()[0].partition, 1)]
    with pytest.raises(KafkaException) as fenced:
        p.send_offsets_to_transaction(offsets, stale)
    assert fenced.value.args[0].code() == KafkaError.STALE_MEMBER_EPOCH
    p.abort_transaction()
    p.begin_transaction()
    p.send_offsets_to_transaction(offsets, fresh)
    p.commit_transaction()
    committed = a.committed(offsets, timeout=10)
    assert [tp.offset for tp in committed] == [1]
    a.close()
    b.close()


def test_describe_consumer_groups_through_the_admin_client(
    fast_broker: EmbeddedBroker, topic_name: str
) -> None:
    bs = fast_broker.bootstrap
    create_topic(bs, topic_name, 4)
    a = consumer(bs, "g-describe", **{"client.id": "member-a", "group.remote.assignor": "range"})
    a.subscribe([topic_name])
    wait_until(lambda: poll_one(a, 0.05) is None and len(a.assignment()) == 4, 30, "assignment")
    admin = AdminClient({"bootstrap.servers": bs})
    described = admin.describe_consumer_groups(["g-describe"])["g-describe"].result(30)
    assert described.type.name == "CONSUMER"
    assert described.state.name == "STABLE"
    assert described.partition_assignor == "range"  # the member's group.remote.assignor
    assert len(described.members) == 1
    member = described.members[0]
    assert member.client_id == "member-a"
    assert sorted(tp.partition for tp in member.assignment.topic_partitions) == [0, 1, 2, 3]
    assert sorted(tp.partition for tp in member.target_assignment.topic_partitions) == [0, 1, 2, 3]
    listed = admin.list_consumer_groups().result(30)
    kinds = {g.group_id: g.type.name for g in listed.valid}
    assert kinds["g-describe"] == "CONSUMER"
    # The CLI lists the group's protocol and describes its members' partitions.
    cli = CliRunner()
    listing = cli.invoke(app, ["groups", "list", "-b", bs, "-o", "json"])
    assert listing.exit_code == 0, listing.stderr
    assert {"group": "g-describe", "state": "Stable", "type": "consumer"} in json.loads(
        listing.stdout
    )
    shown = cli.invoke(app, ["groups", "describe", "-g", "g-describe", "-b", bs, "-o", "json"])
    assert shown.exit_code == 0, shown.stderr
    rows = json.loads(shown.stdout)["partitions"]
    assert sorted(r["partition"] for r in rows) == [0, 1, 2, 3]
    assert {r["consumer_id"] for r in rows} == {member.member_id}
    a.close()


def test_group_survives_a_broker_restart_without_a_rebalance(
    fast_broker: EmbeddedBroker, topic_name: str
) -> None:
    bs = fast_broker.bootstrap
    create_topic(bs, topic_name, 4)
    produce(bs, topic_name, [(None, b"before", i % 4) for i in range(8)])
    a = consumer(bs, "g-restart")
    try:
        _survive_a_restart(fast_broker, topic_name, a)
    finally:
        # Never left to the garbage collector: librdkafka's destroy of a consumer that
        # was not closed can spin forever (seen once, after this test failed).
        a.close()


def _survive_a_restart(fast_broker: EmbeddedBroker, topic_name: str, a: Consumer) -> None:
    bs = fast_broker.bootstrap
    a.subscribe([topic_name])
    got: list[bytes] = []

    def drain() -> bool:
        m = a.poll(0.05)
        if m is not None and m.error() is not None:
            # While the broker is down librdkafka reports it (_TRANSPORT,
            # _ALL_BROKERS_DOWN): informational, the consumer carries on.
            assert not m.error().fatal(), m.error()
        elif m is not None:
            got.append(m.value())
            a.commit(message=m, asynchronous=False)
        return len(got) >= 8

    wait_until(drain, 30, "the first records")
    admin = AdminClient({"bootstrap.servers": bs})
    before = admin.describe_consumer_groups(["g-restart"])["g-restart"].result(30)
    fast_broker.stop()
    fast_broker.start(timeout=60)
    produce(bs, topic_name, [(None, b"after", i % 4) for i in range(8)])
    wait_until(lambda: drain() and len(got) >= 16, 60, "the records produced after the restart")
    # A fresh admin client: the old one lost every broker during the outage, and
    # librdkafka 2.16's re-bootstrap then sometimes sends the describe to the broker
    # handle it is decommissioning, which never connects (its debug log: "Handle is
    # terminating in state TRY_CONNECT" until the 30 s timeout).
    admin = AdminClient({"bootstrap.servers": bs})
    after = admin.describe_consumer_groups(["g-restart"])["g-restart"].result(30)
    assert got.count(b"before") == 8 and got.count(b"after") == 8
    assert len(after.members) == 1
    assert after.members[0].member_id == before.members[0].member_id
    assert len(after.members[0].assignment.topic_partitions) == 4


def test_kip447_app_with_the_consumer_protocol_survives_kills_and_rebalances(
    tmp_path: Path,
) -> None:
    """The consume-transform-produce app (three instances, two SIGKILLed and restarted
    mid-run) copies every record exactly once with group.protocol=consumer."""
    n, parts = 12_000, 6
    settings = {**FAST, "group.consumer.session.timeout.ms": "6000"}
    b = EmbeddedBroker(tmp_path / "data", settings=settings).start(timeout=60)
    apps: dict[str, subprocess.Popen[bytes]] = {}
    kip848 = ("--group-protocol", "consumer", "--txn-sleep", "0.2")
    try:
        create_topic(b.bootstrap, "in", parts)
        create_topic(b.bootstrap, "out", parts)
        produce(b.bootstrap, "in", [(None, b"%d" % i, i % parts) for i in range(n)])
        for i in range(3):
            apps[f"eos-{i}"] = start_app(b.bootstrap, f"eos-{i}", tmp_path, *kip848)
        rng = random.Random(848)
        kills = 0
        next_kill = time.monotonic() + 3
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            for name, proc in list(apps.items()):
                if proc.poll() is not None:
                    apps[name] = start_app(b.bootstrap, name, tmp_path, *kip848)
            if kills < 2 and time.monotonic() >= next_kill:
                victim = rng.choice(sorted(apps))
                apps[victim].kill()  # mid-transaction: the restart fences and aborts it
                apps[victim].wait()
                kills += 1
                apps[victim] = start_app(b.bootstrap, victim, tmp_path, *kip848)
                next_kill = time.monotonic() + rng.uniform(2, 5)
            elif (
                kills == 2
                and len(read_all(b.bootstrap, "out", parts, "read_committed", idle=0.5)) >= n
            ):
                break
            time.sleep(0.2)
        assert kills == 2
        time.sleep(2)
        assert_exactly_once_copy(b.bootstrap, n, parts)
    finally:
        for proc in apps.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        b.stop()


def test_a_regex_subscription_is_resolved_by_the_broker_and_follows_new_topics(
    fast_broker: EmbeddedBroker,
) -> None:
    """librdkafka sends a ``^``-pattern as KIP-848's SubscribedTopicRegex; the broker
    matches it (RE2) against its topics, including one created later, and never
    against the others."""
    bs = fast_broker.bootstrap
    for name in ("rx-a", "rx-b", "other"):
        create_topic(bs, name, 2)
        produce(bs, name, [(None, name.encode(), p) for p in range(2)])
    c = consumer(bs, "g-regex")
    c.subscribe(["^rx-.*"])
    got: list[tuple[str, bytes]] = []

    def drain(count: int) -> bool:
        m = poll_one(c, 0.05)
        if m is not None:
            got.append((m.topic(), m.value()))
        return len(got) >= count

    wait_until(lambda: drain(4), 60, "the records of rx-a and rx-b")
    create_topic(bs, "rx-c", 1)
    produce(bs, "rx-c", [(None, b"rx-c", 0)])
    produce(bs, "other", [(None, b"other", 0)])
    wait_until(lambda: drain(5), 60, "the record of rx-c, created after the subscription")
    end = time.monotonic() + 2  # nothing of "other" arrives meanwhile either
    while time.monotonic() < end:
        drain(99)
    assert sorted(got) == [
        ("rx-a", b"rx-a"),
        ("rx-a", b"rx-a"),
        ("rx-b", b"rx-b"),
        ("rx-b", b"rx-b"),
        ("rx-c", b"rx-c"),
    ]
    c.close()
