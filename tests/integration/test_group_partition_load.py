"""The group coordinator loads, serves and fails each ``__consumer_offsets`` partition on
its own, as Kafka's coordinator shards do, against a real broker and real clients:

* while a partition loads, only its groups get COORDINATOR_LOAD_IN_PROGRESS (Heartbeat:
  NONE, as Kafka's "blindly respond"); the groups of loaded partitions are served;
* a partition whose load fails answers NOT_COORDINATOR (Kafka's FAILED state); the broker
  loads it again after a back-off, and a client that asked meanwhile gets its offsets;
* by default a request for a loading group waits for its partition, which loads next
  (``oncelog.group.load.wait.ms``): librdkafka fails a synchronous commit after two quick
  retries of COORDINATOR_LOAD_IN_PROGRESS, Kafka's answer.

The load is made slow or failing with the broker's test hooks
``oncelog.debug.group.load.partition.delay.ms`` and ``oncelog.debug.group.load.fail``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4 import request as hb
from kio.schema.offset_fetch.v7 import request as of

from oncelog.client.wire import WireClient
from oncelog.coordinator.placement import partition_for
from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic, produce

PARTITIONS = 3  # of __consumer_offsets
SETTINGS = {"offsets.topic.num.partitions": str(PARTITIONS)}
E = ErrorCode


def group_on(partition: int) -> str:
    return next(g for i in range(1000) if partition_for(g := f"pl-{i}", PARTITIONS) == partition)


def commit(bootstrap: str, group: str, topic: str, offsets: list[int]) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = [TopicPartition(topic, p, o) for p, o in enumerate(offsets)]
        c.commit(offsets=tps, asynchronous=False)
    finally:
        c.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], 60)
        return [tp.offset for tp in tps]
    finally:
        c.close()


def first_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The first offset a subscribed consumer of ``group`` reads from each partition."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    first: dict[int, int] = {}
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(first) < 2 and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                first.setdefault(msg.partition(), msg.offset())
    finally:
        c.close()
    return first


def fetch_error(client: WireClient, group: str) -> ErrorCode:
    reply = client.request(of.OffsetFetchRequest(group_id=group, topics=None, require_stable=True))
    return ErrorCode(reply.error_code)


def heartbeat_error(client: WireClient, group: str) -> ErrorCode:
    request = hb.HeartbeatRequest(
        group_id=group, generation_id=1, member_id="nobody", group_instance_id=None
    )
    return ErrorCode(client.request(request).error_code)


def history(tmp_path: Path, topic: str, groups: dict[str, list[int]]) -> EmbeddedBroker:
    """A stopped broker whose groups committed ``groups[group]`` (offset per partition)."""
    b = EmbeddedBroker(tmp_path / "data", settings=dict(SETTINGS)).start()
    try:
        create_topic(b.bootstrap, topic, 2)
        produce(b.bootstrap, topic, [(None, f"m{i}".encode(), i % 2) for i in range(20)])
        for group, offsets in groups.items():
            commit(b.bootstrap, group, topic, offsets)
    finally:
        b.stop()
    return b


@pytest.mark.xdist_group("timing")
def test_loaded_partitions_are_served_while_a_later_one_loads(
    tmp_path: Path, topic_name: str
) -> None:
    first, last = group_on(0), group_on(2)
    b = history(tmp_path, topic_name, {first: [5, 6], last: [7, 8]})
    # Each partition waits 2s before it loads: 0 is served after ~2s, 2 after ~6s.
    b.settings["oncelog.debug.group.load.partition.delay.ms"] = "2000"
    b.settings["oncelog.group.load.wait.ms"] = "0"  # answer at once, as Kafka does
    started = time.monotonic()
    b.start(timeout=60)
    try:
        with WireClient(b.bootstrap, timeout=30) as client:
            assert fetch_error(client, last) == E.coordinator_load_in_progress
            assert heartbeat_error(client, last) == E.none  # blindly, as Kafka
            deadline = time.monotonic() + 30
            while fetch_error(client, first) != E.none and time.monotonic() < deadline:
                time.sleep(0.05)
            first_served_s = time.monotonic() - started
            # Partition 0 is served; partition 2 is still loading.
            assert fetch_error(client, first) == E.none
            assert heartbeat_error(client, first) == E.unknown_member_id
            assert fetch_error(client, last) == E.coordinator_load_in_progress
            assert heartbeat_error(client, last) == E.none
            assert committed(b.bootstrap, first, topic_name, 2) == [5, 6]
            assert fetch_error(client, last) == E.coordinator_load_in_progress
        # A real client asking for the loading group's offsets gets them once loaded.
        assert committed(b.bootstrap, last, topic_name, 2) == [7, 8]
        last_served_s = time.monotonic() - started
        print(f"partition 0 served after {first_served_s:.2f}s, 2 after {last_served_s:.2f}s")
        assert last_served_s - first_served_s > 2
    finally:
        b.stop()


@pytest.mark.xdist_group("timing")
def test_a_failed_partition_answers_not_coordinator_until_it_is_loaded_again(
    tmp_path: Path, topic_name: str
) -> None:
    ok, broken = group_on(0), group_on(1)
    b = history(tmp_path, topic_name, {ok: [1, 2], broken: [3, 4]})
    # Partition 1's first two loads fail: retried after 1s, then 2s more.
    b.settings["oncelog.debug.group.load.fail"] = "1:2"
    log_start = len(b.log_path.read_text().splitlines())
    started = time.monotonic()
    b.start(timeout=60)
    try:
        with WireClient(b.bootstrap, timeout=30) as client:
            deadline = time.monotonic() + 30
            while fetch_error(client, broken) != E.not_coordinator:
                assert time.monotonic() < deadline
                time.sleep(0.01)
            assert heartbeat_error(client, broken) == E.not_coordinator
            assert fetch_error(client, ok) == E.none  # the other partitions are served
            assert committed(b.bootstrap, ok, topic_name, 2) == [1, 2]
            # A consumer of the group that subscribes now looks for its coordinator again
            # (NOT_COORDINATOR) until partition 1 loads, then resumes from its offsets.
            assert first_offsets(b.bootstrap, broken, topic_name) == {0: 3, 1: 4}
            served_s = time.monotonic() - started
            assert fetch_error(client, broken) == E.none
        lines = b.log_path.read_text().splitlines()[log_start:]
        failures = [line for line in lines if "loading __consumer_offsets-1 failed" in line]
        assert len(failures) == 2
        assert all("its groups answer NOT_COORDINATOR" in line for line in failures)
        assert "(attempt 1)" in failures[0] and "(attempt 2)" in failures[1]
        assert any("loaded __consumer_offsets-1 after 2 failed attempts" in line for line in lines)
        print(f"partition 1 served after {served_s:.2f}s (2 failed loads)")
        assert served_s > 2.5  # 1s then 2s of back-off
    finally:
        b.stop()


@pytest.mark.xdist_group("timing")
def test_a_commit_right_after_a_restart_waits_for_the_load_instead_of_failing(
    tmp_path: Path, topic_name: str
) -> None:
    late = group_on(2)
    b = history(tmp_path, topic_name, {late: [1, 2]})
    # Partition 2 loads after ~6s: far longer than librdkafka's retries of a commit.
    b.settings["oncelog.debug.group.load.partition.delay.ms"] = "2000"
    b.settings["oncelog.group.load.wait.ms"] = "0"  # Kafka's answer: the commit fails
    b.start(timeout=60)
    try:
        with pytest.raises(KafkaException) as failed:
            commit(b.bootstrap, late, topic_name, [3, 4])
        assert failed.value.args[0].code() == E.coordinator_load_in_progress.value
    finally:
        b.stop()
    del b.settings["oncelog.group.load.wait.ms"]  # the default: the commit waits
    # Partition 2 goes next: loaded ~2s after the start, well within the 5s wait.
    b.settings["oncelog.debug.group.load.partition.delay.ms"] = "1000"
    started = time.monotonic()
    b.start(timeout=60)
    try:
        commit(b.bootstrap, late, topic_name, [5, 6])
        waited_s = time.monotonic() - started
        assert committed(b.bootstrap, late, topic_name, 2) == [5, 6]
        print(f"the commit waited {waited_s:.2f}s for partition 2's load")
    finally:
        b.stop()
