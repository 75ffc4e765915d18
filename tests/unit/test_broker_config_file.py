"""Broker config files: Java .properties syntax, a stock Kafka server.properties, ignored
cluster-only keys, unknown keys and range checks (all reported at once)."""

from __future__ import annotations

from pathlib import Path

import pytest

from oncelog.broker.config import BrokerConfig, BrokerConfigError, parse_properties
from oncelog.broker.listeners import parse_listeners

STOCK = Path(__file__).resolve().parents[1] / "data" / "kafka-kraft-server.properties"


def test_properties_are_parsed_as_java_does() -> None:
    text = (
        "# comment\n"
        "! also a comment\n"
        "a=1\n"
        "b: 2\n"
        "c 3\n"
        "  d   =   spaced value  \n"
        "e = one, \\\n"
        "    two\n"
        "f\\ key=x\\ty\n"
        "g=\\u0041\n"
        "h\n"
    )
    assert parse_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "spaced value  ",
        "e": "one, two",
        "f key": "x\ty",
        "g": "A",
        "h": "",
    }


def test_a_stock_kafka_server_properties_is_accepted_with_its_cluster_keys_ignored(
    tmp_path: Path,
) -> None:
    cfg = BrokerConfig.build(STOCK)
    assert list(cfg.ignored) == [
        "process.roles",
        "node.id",
        "controller.quorum.voters",
        "inter.broker.listener.name",
        "controller.listener.names",
        "share.coordinator.state.topic.replication.factor",
        "share.coordinator.state.topic.min.isr",
    ]
    assert cfg.ignored_warning() == (
        "ignoring 7 settings of a multi-node Kafka cluster (oncelog is a single node): "
        "process.roles, node.id, controller.quorum.voters, inter.broker.listener.name, "
        "controller.listener.names, share.coordinator.state.topic.replication.factor, "
        "share.coordinator.state.topic.min.isr"
    )
    assert cfg.data_dir == Path("/tmp/kraft-combined-logs")
    assert cfg.settings.log_retention_hours == 168
    # The CONTROLLER listener serves a KRaft quorum: only PLAINTEXT is served here.
    [listener] = parse_listeners(cfg)
    assert (listener.name, listener.port, listener.advertised_host) == (
        "PLAINTEXT",
        9092,
        "localhost",
    )
    assert BrokerConfig.build().ignored_warning() is None


def test_every_key_of_the_stock_file_is_known_or_ignored() -> None:
    keys = parse_properties(STOCK.read_text())
    cfg = BrokerConfig.build(STOCK)
    assert set(keys) == (cfg.explicit | set(cfg.ignored))


def test_unknown_keys_and_bad_values_are_all_reported_at_once(tmp_path: Path) -> None:
    path = tmp_path / "bad.properties"
    path.write_text(
        "num.partitions=-5\nfoo.bar=1\nbaz 2\nlog.message.timestamp.type=Later\n"
        "log.cleaner.min.cleanable.ratio=1.5\nmessage.max.bytes=lots\n"
    )
    with pytest.raises(BrokerConfigError) as info:
        BrokerConfig.build(path)
    assert str(info.value) == (
        "unknown broker configs: foo.bar, baz; "
        "Invalid value -5 for configuration num.partitions: Value must be at least 1; "
        "Invalid value Later for configuration log.message.timestamp.type: "
        "String must be one of: CreateTime, LogAppendTime; "
        "Invalid value 1.5 for configuration log.cleaner.min.cleanable.ratio: "
        "Value must be no less than 0 and no more than 1; "
        "Invalid value lots for configuration message.max.bytes: "
        "Not an integer"
    )


@pytest.mark.parametrize(
    ("key", "value", "ok"),
    [
        ("num.partitions", "1", True),
        ("num.partitions", "0", False),
        ("offsets.topic.num.partitions", "0", False),
        ("transaction.max.timeout.ms", "0", False),
        ("log.segment.bytes", "13", False),
        ("log.segment.bytes", "14", True),
        ("fetch.max.bytes", "1023", False),
        ("log.cleanup.policy", "compact,delete", True),
        ("ssl.client.auth", "maybe", False),
        ("min.insync.replicas", " 2 ", True),
        ("oncelog.feature.transaction.version", "2", True),
        ("oncelog.feature.transaction.version", "0", True),
        ("oncelog.feature.transaction.version", "7", False),
        ("oncelog.feature.group.version", "0", True),
        ("oncelog.feature.group.version", "2", False),
        ("group.coordinator.rebalance.protocols", "classic", True),
        ("group.coordinator.rebalance.protocols", "classic, consumer", True),
        ("group.coordinator.rebalance.protocols", "consumer", False),
        ("group.coordinator.rebalance.protocols", "classic,consmer", False),
        ("group.consumer.session.timeout.ms", "0", False),
        ("group.consumer.heartbeat.interval.ms", "0", False),
        ("group.consumer.migration.policy", "disabled", True),
        ("group.consumer.migration.policy", "Upgrade", True),  # case-insensitive, as Kafka
        ("group.consumer.migration.policy", "BIDIRECTIONAL", True),
        ("group.consumer.migration.policy", "sideways", False),
        ("group.consumer.max.size", "0", False),
        # Booleans: true/false in any case, nothing else (Kafka's ConfigDef BOOLEAN).
        ("oncelog.flush.on.ack", "TRUE", True),
        ("oncelog.flush.on.ack", " false ", True),
        ("oncelog.flush.on.ack", "yes", False),
        ("auto.create.topics.enable", "1", False),
        ("log.cleaner.enable", "0", False),
        ("oncelog.debug.group.load.fail", "1:2,3", True),
        ("oncelog.debug.group.load.fail", "abc", False),
    ],
)
def test_values_are_range_checked_as_kafka_does(key: str, value: str, ok: bool) -> None:
    if ok:
        BrokerConfig.build(overrides={key: value})
    else:
        with pytest.raises(
            BrokerConfigError, match=f"Invalid value {value} for configuration {key}"
        ):
            BrokerConfig.build(overrides={key: value})


def test_cluster_keys_given_with_set_are_ignored_too() -> None:
    cfg = BrokerConfig.build(
        overrides={"zookeeper.connect": "zk:2181", "replica.lag.time.max.ms": "1"}
    )
    assert cfg.ignored == {"zookeeper.connect": "zk:2181", "replica.lag.time.max.ms": "1"}


def test_a_negative_loop_stall_threshold_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.properties"
    path.write_text("oncelog.loop.stall.warn.ms=-5\n")
    with pytest.raises(
        BrokerConfigError, match="oncelog.loop.stall.warn.ms: Value must be at least 0"
    ):
        BrokerConfig.build(path)
