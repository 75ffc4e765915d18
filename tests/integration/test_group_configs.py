"""Group configs (Kafka 4.0): described, altered and validated as Kafka does, kept across
a restart, and followed by a KIP-848 member's session timeout and heartbeat interval."""

from __future__ import annotations

import datetime
import time
import uuid
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from kio.schema.consumer_group_describe.v0 import request as cgd
from kio.schema.consumer_group_heartbeat.v0 import request as cgh
from kio.schema.errors import ErrorCode

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic

SET = AlterConfigOpType.SET
# Bounds low enough for a short session timeout (Kafka's defaults: 45 s to 60 s).
SETTINGS = {
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "100",
}


def describe(admin: AdminClient, group: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(ResourceType.GROUP, group)
    return dict(admin.describe_configs([res])[res].result(10))


def alter(
    admin: AdminClient, group: str, entries: list[ConfigEntry], *, validate_only: bool = False
) -> KafkaError | None:
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    try:
        admin.incremental_alter_configs([res], validate_only=validate_only)[res].result(10)
    except KafkaException as exc:
        err: KafkaError = exc.args[0]
        return err
    return None


def members(bootstrap: str, group: str) -> list[str]:
    with WireClient(bootstrap) as c:
        r = c.request(
            cgd.ConsumerGroupDescribeRequest(
                group_ids=(group,), include_authorized_operations=False
            )
        )
    return [m.member_id for m in r.groups[0].members]


def test_a_group_config_is_described_altered_and_followed_by_a_member(
    tmp_path: Path, topic_name: str
) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    b = EmbeddedBroker(tmp_path / "data", settings=SETTINGS).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        cfg = describe(admin, group)
        assert sorted(cfg) == [
            "consumer.heartbeat.interval.ms",
            "consumer.session.timeout.ms",
            "share.heartbeat.interval.ms",
            "share.record.lock.duration.ms",
            "share.session.timeout.ms",
        ]
        session = cfg["consumer.session.timeout.ms"]
        assert (session.value, session.source) == ("45000", ConfigSource.DEFAULT_CONFIG.value)
        assert not session.is_read_only
        # GroupConfig.validateValues against the broker's group.consumer.* bounds.
        err = alter(
            admin,
            group,
            [ConfigEntry("consumer.session.timeout.ms", "500", incremental_operation=SET)],
        )
        assert err is not None and err.code() == KafkaError.INVALID_CONFIG
        assert err.str() == (
            "consumer.session.timeout.ms must be greater than or equal to "
            "group.consumer.min.session.timeout.ms"
        )
        err = alter(
            admin, group, [ConfigEntry("session.timeout.ms", "5000", incremental_operation=SET)]
        )
        assert err is not None and err.code() == KafkaError.INVALID_CONFIG
        assert err.str() == "Unknown group config name: session.timeout.ms"
        err = alter(
            admin,
            group,
            [ConfigEntry("consumer.heartbeat.interval.ms", "50000", incremental_operation=SET)],
        )
        assert err is not None and err.str() == (
            "consumer.heartbeat.interval.ms must be less than or equal to "
            "group.consumer.max.heartbeat.interval.ms"
        )
        entry = ConfigEntry("consumer.session.timeout.ms", "6000", incremental_operation=SET)
        assert alter(admin, group, [entry], validate_only=True) is None
        assert describe(admin, group)["consumer.session.timeout.ms"].value == "45000"
        entries = [
            ConfigEntry("consumer.session.timeout.ms", "2000", incremental_operation=SET),
            ConfigEntry("consumer.heartbeat.interval.ms", "400", incremental_operation=SET),
        ]
        assert alter(admin, group, entries) is None
        session = describe(admin, group)["consumer.session.timeout.ms"]
        assert (session.value, session.source) == ("2000", ConfigSource.GROUP_CONFIG.value)

        # A KIP-848 member joins, is told the group's heartbeat interval, then goes quiet:
        # fenced after the group's 2 s, not the broker's 45 s.
        create_topic(b.bootstrap, topic_name, 2)
        with WireClient(b.bootstrap) as c:
            reply = c.request(
                cgh.ConsumerGroupHeartbeatRequest(
                    group_id=group,
                    member_id=str(uuid.uuid4()),
                    member_epoch=0,
                    rebalance_timeout=datetime.timedelta(seconds=30),
                    subscribed_topic_names=(topic_name,),
                    topic_partitions=(),
                )
            )
        assert reply.error_code == ErrorCode.none
        assert reply.heartbeat_interval == datetime.timedelta(milliseconds=400)
        silent_since = time.monotonic()
        assert members(b.bootstrap, group) == [reply.member_id]
        while members(b.bootstrap, group) and time.monotonic() - silent_since < 20:
            time.sleep(0.1)
        fenced_after = time.monotonic() - silent_since
        assert members(b.bootstrap, group) == []
        assert 1.5 < fenced_after < 6, fenced_after
    finally:
        b.stop()
    b = EmbeddedBroker(tmp_path / "data", settings=SETTINGS).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        cfg = describe(admin, group)
        assert cfg["consumer.session.timeout.ms"].value == "2000"
        assert cfg["consumer.heartbeat.interval.ms"].source == ConfigSource.GROUP_CONFIG.value
        delete = ConfigEntry(
            "consumer.session.timeout.ms", None, incremental_operation=AlterConfigOpType.DELETE
        )
        err = alter(admin, group, [delete])
        # 45000 with the group's 400 ms interval is valid: back to the broker's default.
        assert err is None
        session = describe(admin, group)["consumer.session.timeout.ms"]
        assert (session.value, session.source) == ("45000", ConfigSource.DEFAULT_CONFIG.value)
    finally:
        b.stop()


def test_concurrent_group_config_changes_all_survive_a_restart(tmp_path: Path) -> None:
    """AlterConfigs from several connections at once: each change is saved, none is lost
    to a write of an older state or a clash over the temp file (the protocol fuzz found
    both: 'No such file or directory: group_configs.json.tmp')."""
    import concurrent.futures

    groups = [f"cg-{i:02d}" for i in range(24)]
    b = EmbeddedBroker(tmp_path / "data", settings=SETTINGS).start()
    try:
        admins = [AdminClient({"bootstrap.servers": b.bootstrap}) for _ in range(4)]

        def set_timeout(i: int) -> KafkaError | None:
            entry = ConfigEntry(
                "consumer.session.timeout.ms", str(10_000 + i), incremental_operation=SET
            )
            return alter(admins[i % 4], groups[i], [entry])

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            assert list(pool.map(set_timeout, range(len(groups)))) == [None] * len(groups)
    finally:
        b.stop()
    assert "Traceback" not in b.log_path.read_text()
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        got = [describe(admin, g)["consumer.session.timeout.ms"].value for g in groups]
        assert got == [str(10_000 + i) for i in range(len(groups))]
    finally:
        b.stop()
