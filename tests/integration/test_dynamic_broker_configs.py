"""Dynamic broker configs (Kafka's DynamicBrokerConfig) through confluent-kafka's
AdminClient: set at run time, applied without a restart, kept across one."""

from __future__ import annotations

import json
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from oncelog.client.admin import Admin
from oncelog.client.config import ClientConfig
from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic, produce

SET, DELETE, APPEND = AlterConfigOpType.SET, AlterConfigOpType.DELETE, AlterConfigOpType.APPEND


def alter(
    admin: AdminClient, name: str, entries: list[ConfigEntry], *, validate_only: bool = False
) -> KafkaError | None:
    """IncrementalAlterConfigs of BROKER ``name``: None, or the broker's error."""
    res = ConfigResource(ResourceType.BROKER, name, incremental_configs=entries)
    try:
        admin.incremental_alter_configs([res], validate_only=validate_only)[res].result(10)
    except KafkaException as exc:
        err: KafkaError = exc.args[0]
        return err
    return None


def describe(admin: AdminClient, rtype: ResourceType, name: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(rtype, name)
    return dict(admin.describe_configs([res])[res].result(10))


def low_watermark(bootstrap: str, topic: str, until: float) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "w"})
    try:
        low = 0
        while time.monotonic() < until:
            low, _ = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
            if low > 0:
                break
            time.sleep(0.2)
        return int(low)
    finally:
        c.close()


def test_lowered_retention_default_deletes_old_segments_and_survives_restart(
    tmp_path: Path, topic_name: str
) -> None:
    settings = {"log.retention.check.interval.ms": "200", "log.flush.scheduler.interval.ms": "100"}
    b = EmbeddedBroker(tmp_path / "data", settings=settings).start()
    try:
        # No retention.ms of its own: the topic follows the broker's default (7 days).
        create_topic(b.bootstrap, topic_name, 1, config={"segment.bytes": "3000"})
        for _ in range(5):
            produce(b.bootstrap, topic_name, [(None, b"x" * 100, 0) for _ in range(20)])
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        assert low_watermark(b.bootstrap, topic_name, time.monotonic() + 1.5) == 0
        assert (
            alter(admin, "0", [ConfigEntry("log.retention.ms", "500", incremental_operation=SET)])
            is None
        )
        # Retention deletes the rolled segments without a restart.
        assert 0 < low_watermark(b.bootstrap, topic_name, time.monotonic() + 10) <= 100
        topic = describe(admin, ResourceType.TOPIC, topic_name)["retention.ms"]
        assert (topic.value, topic.source) == ("500", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        # The cluster-wide default level (resource name ""), which librdkafka cannot name.
        Admin(ClientConfig(b.bootstrap)).alter_configs(
            "broker", "", {"log.retention.bytes": "123456"}
        )
    finally:
        b.stop()
    path = tmp_path / "data" / "meta" / "dynamic_broker_configs.json"
    assert json.loads(path.read_text()) == {
        "broker": {"log.retention.ms": "500"},
        "default": {"log.retention.bytes": "123456"},
        "version": 1,
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    b = EmbeddedBroker(tmp_path / "data", settings=settings).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        broker = describe(admin, ResourceType.BROKER, "0")
        ms, size = broker["log.retention.ms"], broker["log.retention.bytes"]
        assert (ms.value, ms.source) == ("500", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        assert not ms.is_read_only
        assert (size.value, size.source) == (
            "123456",
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
        )
        topic = describe(admin, ResourceType.TOPIC, topic_name)
        assert topic["retention.ms"].value == "500"
        assert topic["retention.bytes"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        defaults = Admin(ClientConfig(b.bootstrap)).describe_configs("broker", "")
        assert [(c.name, c.value, c.source) for c in defaults] == [
            ("log.retention.bytes", "123456", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        ]
        # DELETE: back to the static value, at once.
        assert (
            alter(admin, "0", [ConfigEntry("log.retention.ms", None, incremental_operation=DELETE)])
            is None
        )
        ms = describe(admin, ResourceType.BROKER, "0")["log.retention.ms"]
        assert (ms.value, ms.source) == ("-2", ConfigSource.DEFAULT_CONFIG.value)
        assert describe(admin, ResourceType.TOPIC, topic_name)["retention.ms"].value == "604800000"
    finally:
        b.stop()


def test_refusals_and_validate_only(broker: EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    # Kafka's DynamicBrokerConfig.validateConfigs, answered as ConfigAdminManager does.
    err = alter(admin, "0", [ConfigEntry("log.dirs", "/elsewhere", incremental_operation=SET)])
    assert err is not None and err.code() == KafkaError.INVALID_REQUEST
    assert err.str() == "Cannot update these configs dynamically: Set(log.dirs)"
    err = alter(admin, "0", [ConfigEntry("log.retention.hours", "1", incremental_operation=SET)])
    assert err is not None and err.str() == (
        "Cannot update these configs dynamically: Set(log.retention.hours)"
    )
    err = alter(admin, "0", [ConfigEntry("message.max.bytes", "-5", incremental_operation=SET)])
    assert err is not None and err.code() == KafkaError.INVALID_REQUEST
    assert (
        err.str()
        == "Invalid value -5 for configuration message.max.bytes: Value must be at least 0"
    )
    err = alter(admin, "0", [ConfigEntry("ssl.keystore.location", "/k", incremental_operation=SET)])
    assert err is not None and err.str() == (
        "These security configs can be dynamically updated only per-listener using the "
        "listener prefix: Set(ssl.keystore.location)"
    )
    # validate_only: accepted, nothing changes, nothing is written.
    entry = ConfigEntry("log.retention.ms", "1000", incremental_operation=SET)
    assert alter(admin, "0", [entry], validate_only=True) is None
    ms = describe(admin, ResourceType.BROKER, "0")["log.retention.ms"]
    assert (ms.value, ms.source) == ("-2", ConfigSource.DEFAULT_CONFIG.value)
    assert not (broker.data_dir / "meta" / "dynamic_broker_configs.json").exists()
    # What librdkafka's 0081 sets: a thread pool and a list append, then the reverse.
    ops = [
        ConfigEntry("background.threads", "9", incremental_operation=SET),
        ConfigEntry("log.cleanup.policy", "compact", incremental_operation=APPEND),
    ]
    assert alter(admin, "0", ops) is None
    cfg = describe(admin, ResourceType.BROKER, "0")
    assert cfg["log.cleanup.policy"].value == "delete,compact"
    assert cfg["background.threads"].value == "9"
    ops = [
        ConfigEntry("background.threads", None, incremental_operation=DELETE),
        ConfigEntry(
            "log.cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SUBTRACT
        ),
    ]
    assert alter(admin, "0", ops) is None
    assert describe(admin, ResourceType.BROKER, "0")["log.cleanup.policy"].value == "delete"
    # Legacy AlterConfigs replaces the whole per-broker layer.
    res = ConfigResource(ResourceType.BROKER, "0", set_config={"log.retention.bytes": "99999"})
    admin.alter_configs([res])[res].result(10)
    assert json.loads((broker.data_dir / "meta" / "dynamic_broker_configs.json").read_text())[
        "broker"
    ] == {"log.retention.bytes": "99999"}


def test_message_max_bytes_and_max_connections_apply_at_once(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    produce(broker.bootstrap, topic_name, [(None, b"y" * 5000, 0)])
    assert (
        alter(admin, "0", [ConfigEntry("message.max.bytes", "2000", incremental_operation=SET)])
        is None
    )
    p = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "message.send.max.retries": 0}
    )
    errors: list[KafkaError] = []
    p.produce(topic_name, value=b"y" * 5000, partition=0, on_delivery=lambda e, _: errors.append(e))
    p.flush(10)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    # max.connections: the broker already holds the admin's and the producer's; one more
    # than the new limit is closed at once.
    assert (
        alter(admin, "0", [ConfigEntry("max.connections", "3", incremental_operation=SET)]) is None
    )
    host, port = broker.bootstrap.rsplit(":", 1)
    extra = [socket.create_connection((host, int(port)), timeout=5) for _ in range(3)]
    try:
        closed = 0
        for s in extra:
            s.settimeout(2)
            try:
                closed += s.recv(1) == b""
            except TimeoutError:
                pass
        assert closed >= 1
    finally:
        for s in extra:
            s.close()


def test_cli_alters_the_broker_and_its_defaults(broker: EmbeddedBroker) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "oncelog.cli.main", "configs", *args, "-b", broker.bootstrap],
            capture_output=True,
            text=True,
            timeout=60,
        )

    out = cli("alter", "--broker", "0", "--add-config", "log.retention.ms=3600000")
    assert out.returncode == 0, out.stderr
    out = cli(
        "alter",
        "--entity-type",
        "brokers",
        "--entity-default",
        "--add-config",
        "log.segment.bytes=2000000",
    )
    assert out.returncode == 0, out.stderr
    shown = cli("describe", "--broker", "0").stdout
    assert "log.retention.ms" in shown and "DYNAMIC_BROKER_CONFIG" in shown
    shown = cli("describe", "--broker-defaults").stdout
    assert "log.segment.bytes" in shown and "DYNAMIC_DEFAULT_BROKER_CONFIG" in shown
    out = cli("alter", "--broker", "0", "--add-config", "log.dirs=/x")
    assert out.returncode != 0 and "Cannot update these configs dynamically" in out.stderr


def test_synonyms(broker: EmbeddedBroker) -> None:
    """librdkafka asks for synonyms: each definition of a setting is listed."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entry = ConfigEntry("log.retention.ms", "7000", incremental_operation=SET)
    assert alter(admin, "0", [entry]) is None
    entry = describe(admin, ResourceType.BROKER, "0")["log.retention.ms"]
    # confluent-kafka keys synonyms by name, so the highest-precedence one per name shows.
    assert entry.synonyms["log.retention.hours"].value == "168"
