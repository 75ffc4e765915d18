"""The group coordinator loads ``__consumer_offsets`` in the background (as Kafka does):
after a restart over a few hundred thousand offset commits the broker is ready before the
load is done, OffsetFetch answers COORDINATOR_LOAD_IN_PROGRESS until the group's partition
is loaded, and afterwards every committed offset reads back exactly; a consumer resumes
from its group's offsets, and a transaction's sendOffsetsToTransaction counts if it
committed, not if it aborted."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from kio.schema.errors import ErrorCode
from kio.schema.offset_commit.v8 import request as oc
from kio.schema.offset_fetch.v1 import request as of1
from kio.schema.offset_fetch.v7 import request as of

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic, produce
from .test_transactions import txn_producer

GROUPS = 30
REQUESTS = 300  # of 1,000 partitions each: 300,000 offset commits
# Offsets are committed only for partitions that exist (Kafka's KafkaApis): one topic
# holds them all.
BULK_TOPIC = "bulk-topic"
PARTITIONS_PER_REQUEST = 1000
LOADED = re.compile(r"loaded (\d+) groups from (\d+) records .* in ([0-9.]+)s")


def bulk_offset(request: int, partition: int) -> int:
    return request * 1_000_003 + partition


def bulk_commits(bootstrap: str) -> dict[str, dict[tuple[str, int], int]]:
    """REQUESTS raw OffsetCommits (pipelined), each of BULK_TOPIC's 1,000 partitions, over
    GROUPS groups; returns what each group committed last."""
    create_topic(bootstrap, BULK_TOPIC, PARTITIONS_PER_REQUEST)
    expected: dict[str, dict[tuple[str, int], int]] = {f"bulk-{g}": {} for g in range(GROUPS)}
    with WireClient(bootstrap, timeout=120) as client:
        pending = []
        for i in range(REQUESTS):
            group, topic = f"bulk-{i % GROUPS}", BULK_TOPIC
            request = oc.OffsetCommitRequest(
                group_id=group,
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                topics=(
                    oc.OffsetCommitRequestTopic(
                        name=topic,
                        partitions=tuple(
                            oc.OffsetCommitRequestPartition(
                                partition_index=p,
                                committed_offset=bulk_offset(i, p),
                                committed_leader_epoch=-1,
                                committed_metadata=None,
                            )
                            for p in range(PARTITIONS_PER_REQUEST)
                        ),
                    ),
                ),
            )
            for p in range(PARTITIONS_PER_REQUEST):
                expected[group][(topic, p)] = bulk_offset(i, p)
            pending.append((request, client.send(request)))
            if len(pending) >= 20:
                for req, corr in pending:
                    reply = client.receive(req, corr)
                    assert {p.error_code for t in reply.topics for p in t.partitions} == {
                        ErrorCode.none
                    }
                pending.clear()
        for req, corr in pending:
            reply = client.receive(req, corr)
            assert {p.error_code for t in reply.topics for p in t.partitions} == {ErrorCode.none}
    return expected


def fetch_all(client: WireClient, group: str) -> tuple[ErrorCode, dict[tuple[str, int], int]]:
    reply = client.request(of.OffsetFetchRequest(group_id=group, topics=None, require_stable=True))
    offsets = {
        (t.name, p.partition_index): p.committed_offset
        for t in reply.topics
        for p in t.partitions
        if p.error_code == ErrorCode.none
    }
    return reply.error_code, offsets


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], 30)
        return [tp.offset for tp in tps]
    finally:
        c.close()


def transaction_with_offsets(
    bootstrap: str, txn_id: str, group: str, topic: str, commit: bool
) -> None:
    """A transaction writing one record and sending offsets 11 and 12 (topic partitions 0
    and 1) for ``group``; committed or aborted."""
    meta_consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    p = txn_producer(bootstrap, txn_id)
    try:
        p.begin_transaction()
        p.produce(topic, b"in-txn", partition=0)
        p.send_offsets_to_transaction(
            [TopicPartition(topic, 0, 11), TopicPartition(topic, 1, 12)],
            meta_consumer.consumer_group_metadata(),
            15,
        )
        if commit:
            p.commit_transaction(15)
        else:
            p.abort_transaction(15)
    finally:
        meta_consumer.close()


@pytest.mark.xdist_group("timing")
def test_restart_serves_while_offsets_load(tmp_path: Path, topic_name: str) -> None:
    b = EmbeddedBroker(tmp_path / "data").start()
    try:
        create_topic(b.bootstrap, topic_name, 2)
        produce(b.bootstrap, topic_name, [(None, f"m{i}".encode(), i % 2) for i in range(20)])
        resumer = Consumer(
            {"bootstrap.servers": b.bootstrap, "group.id": "resumer", "enable.auto.commit": False}
        )
        resumer.commit(
            offsets=[TopicPartition(topic_name, 0, 7), TopicPartition(topic_name, 1, 3)],
            asynchronous=False,
        )
        resumer.close()
        expected = bulk_commits(b.bootstrap)
        transaction_with_offsets(b.bootstrap, "bg-commit", "txn-committed", topic_name, True)
        transaction_with_offsets(b.bootstrap, "bg-abort", "txn-aborted", topic_name, False)
        assert committed(b.bootstrap, "txn-committed", topic_name, 2) == [11, 12]
        assert committed(b.bootstrap, "txn-aborted", topic_name, 2) == [-1001, -1001]
    finally:
        b.stop()

    log_start = len(b.log_path.read_text().splitlines())
    b.settings["oncelog.group.load.wait.ms"] = "0"  # Kafka's answers while loading
    started = time.monotonic()
    b.start(timeout=120)
    ready_s = time.monotonic() - started
    try:
        loading_answers = 0
        with WireClient(b.bootstrap, timeout=60) as client:
            # v1 has no group-level error: each requested partition carries it.
            v1 = client.request(
                of1.OffsetFetchRequest(
                    group_id="bulk-0",
                    topics=(
                        of1.OffsetFetchRequestTopic(name=BULK_TOPIC, partition_indexes=(0, 1)),
                    ),
                )
            )
            error, _ = fetch_all(client, "bulk-0")
            first_error = error
            assert [(p.partition_index, p.error_code) for t in v1.topics for p in t.partitions] == [
                (0, ErrorCode.coordinator_load_in_progress),
                (1, ErrorCode.coordinator_load_in_progress),
            ]
            deadline = time.monotonic() + 120
            while error == ErrorCode.coordinator_load_in_progress and time.monotonic() < deadline:
                loading_answers += 1
                time.sleep(0.05)
                error, _ = fetch_all(client, "bulk-0")
            loaded_after_s = time.monotonic() - started
            assert error == ErrorCode.none
            # The broker was ready (and answering) before the offsets were loaded.
            assert first_error == ErrorCode.coordinator_load_in_progress
            assert loading_answers >= 1
            for group, offsets in expected.items():
                # Each __consumer_offsets partition is served once it is loaded: a group
                # on a partition after bulk-0's may still be loading.
                error, got = fetch_all(client, group)
                while error == ErrorCode.coordinator_load_in_progress:
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
                    error, got = fetch_all(client, group)
                assert error == ErrorCode.none
                assert got == offsets, group
        lines = b.log_path.read_text().splitlines()[log_start:]
        [loaded] = [m for line in lines if (m := LOADED.search(line))]
        # 300,000 bulk commits, resumer's 2, the committed transaction's 2 (the aborted
        # transaction's 2 records are replayed too, then dropped by its marker).
        assert int(loaded.group(2)) == REQUESTS * PARTITIONS_PER_REQUEST + 6
        print(
            f"ready after {ready_s:.2f}s; bulk-0 served after {loaded_after_s:.2f}s "
            f"(load {float(loaded.group(3)):.2f}s, {loading_answers} LOAD_IN_PROGRESS answers)"
        )
        assert committed(b.bootstrap, "txn-committed", topic_name, 2) == [11, 12]
        assert committed(b.bootstrap, "txn-aborted", topic_name, 2) == [-1001, -1001]
        consumer = Consumer(
            {
                "bootstrap.servers": b.bootstrap,
                "group.id": "resumer",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe([topic_name])
        first: dict[int, int] = {}
        deadline = time.monotonic() + 60
        try:
            while len(first) < 2 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None or msg.error() is not None:
                    continue
                first.setdefault(msg.partition(), msg.offset())
        finally:
            consumer.close()
        assert first == {0: 7, 1: 3}
    finally:
        b.stop()

    # By default (oncelog.group.load.wait.ms) a request for a loading group waits for its
    # partition, which loads next, instead of getting COORDINATOR_LOAD_IN_PROGRESS.
    del b.settings["oncelog.group.load.wait.ms"]
    last = sorted(expected)[-1]
    log_start = len(b.log_path.read_text().splitlines())
    b.start(timeout=120)
    try:
        with WireClient(b.bootstrap, timeout=60) as client:
            asked = time.monotonic()
            error, got = fetch_all(client, last)
            waited_s = time.monotonic() - asked
            assert (error, got) == (ErrorCode.none, expected[last])
        lines = b.log_path.read_text().splitlines()[log_start:]
        assert not [line for line in lines if LOADED.search(line)]  # the others still load
        print(f"{last}'s OffsetFetch waited {waited_s:.2f}s for its partition")
    finally:
        b.stop()
