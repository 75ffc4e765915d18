"""The leader's transactional config-topic writes (KIP-618): a newer leader's claim
fences the older one, whose next write fails and leaves nothing in the topic."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from oncelog.connect.api.target_state import TargetState
from oncelog.connect.kafka_io.internal_topics import TopicWriter, TransactionalTopicWriter
from oncelog.connect.storage.config_state import ConfigState
from oncelog.connect.storage.config_writer import ConfigWriter, PrivilegedWriteError
from oncelog.embedded import EmbeddedBroker

from ..helpers import create_topic

TOPIC = "writer-configs"
LEADER_ID = "connect-cluster-g"


def _keys(bootstrap: str, isolation: str) -> list[tuple[str, object]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"r-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    end = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)[1]
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    out: list[tuple[str, object]] = []
    deadline = time.monotonic() + 20
    # The position passes transaction markers, which no message reports.
    while consumer.position([TopicPartition(TOPIC, 0)])[0].offset < end:
        assert time.monotonic() < deadline, "config topic read stalled"
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            out.append((msg.key().decode(), json.loads(msg.value())))
    consumer.close()
    return out


def _writer(bootstrap: str, failures: list[str], name: str) -> ConfigWriter:
    config = {"bootstrap.servers": bootstrap}
    return ConfigWriter(
        TopicWriter(config, TOPIC),
        lambda: TransactionalTopicWriter(config, TOPIC, LEADER_ID),
        lambda: None,
        ConfigState().snapshot,
        on_write_failure=lambda: failures.append(name),
        timeout_s=15,
    )


def test_a_newer_leader_fences_the_older_ones_writes(broker: EmbeddedBroker) -> None:
    create_topic(broker.bootstrap, TOPIC, 1, {"cleanup.policy": "compact"})
    failures: list[str] = []
    old, new = (
        _writer(broker.bootstrap, failures, "old"),
        _writer(broker.bootstrap, failures, "new"),
    )
    with pytest.raises(PrivilegedWriteError, match="without write privileges"):
        old.put_connector("a", {"connector.class": "X"})  # never claimed
    old.claim()
    assert old.claimed
    old.put_connector("a", {"connector.class": "X"})

    new.claim()  # InitProducerId: the old leader's producer is fenced
    new.set_target_state("a", TargetState.PAUSED)
    with pytest.raises(PrivilegedWriteError, match="Failed to write to the config topic"):
        old.write_task_count("a", 3)
    assert failures == ["old"] and not old.claimed
    with pytest.raises(PrivilegedWriteError, match="without write privileges"):
        old.write_task_count("a", 3)
    new.write_task_count("a", 1)

    expected = [
        ("connector-a", {"properties": {"connector.class": "X"}}),
        ("target-state-a", {"state": "PAUSED", "state.v2": "PAUSED"}),
        ("tasks-fencing-a", {"task-count": 1}),
    ]
    assert _keys(broker.bootstrap, "read_committed") == expected
    # The fenced write never reached the log, not even as an aborted record.
    assert [k for k, _ in _keys(broker.bootstrap, "read_uncommitted")] == [k for k, _ in expected]
    new.relinquish()
    assert not new.claimed
