from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from oncelog.storage.config import (
    KNOWN_TOPIC_CONFIGS,
    LONG_MAX,
    TOPIC_CONFIG_DEFAULTS,
    ConfigError,
    LogConfig,
)
from oncelog.storage.partition_dir import (
    iter_partition_dirs,
    parse_partition_dir_name,
    partition_dir,
)


def test_defaults_match_kafka() -> None:
    cfg = LogConfig()
    assert cfg.segment_bytes == 1073741824
    assert cfg.segment_ms == 604800000
    assert cfg.segment_index_bytes == 10485760
    assert cfg.index_interval_bytes == 4096
    assert cfg.retention_ms == 604800000 and cfg.retention_bytes == -1
    assert cfg.flush_messages == cfg.flush_ms == LONG_MAX
    assert cfg.message_timestamp_type == "CreateTime" and not cfg.log_append_time
    assert cfg.max_message_bytes == 1048588
    assert cfg.cleanup_policy == ("delete",) and cfg.delete_enabled
    assert cfg.file_delete_delay_ms == 60000 and cfg.min_insync_replicas == 1
    assert cfg.message_timestamp_before_max_ms == LONG_MAX
    assert cfg.message_timestamp_after_max_ms == 3600000
    assert LogConfig.from_props({}) == cfg
    assert LogConfig.from_props(TOPIC_CONFIG_DEFAULTS).to_props() == TOPIC_CONFIG_DEFAULTS


def test_defaults_table() -> None:
    assert TOPIC_CONFIG_DEFAULTS["segment.bytes"] == "1073741824"
    assert TOPIC_CONFIG_DEFAULTS["cleanup.policy"] == "delete"
    assert TOPIC_CONFIG_DEFAULTS["compression.type"] == "producer"
    assert TOPIC_CONFIG_DEFAULTS["flush.messages"] == str(LONG_MAX)
    assert "message.format.version" not in TOPIC_CONFIG_DEFAULTS  # accepted, not listed
    assert "message.format.version" in KNOWN_TOPIC_CONFIGS
    assert set(TOPIC_CONFIG_DEFAULTS) <= KNOWN_TOPIC_CONFIGS


def test_overrides_and_layering() -> None:
    base = LogConfig.from_props({"retention.ms": "1000", "segment.bytes": "2048"})
    cfg = LogConfig.from_props(
        {
            "flush.messages": "1",
            "message.timestamp.type": "LogAppendTime",
            "cleanup.policy": "compact, delete",
            "compression.type": "zstd",
            "unclean.leader.election.enable": "TRUE",
        },
        base,
    )
    assert (cfg.retention_ms, cfg.segment_bytes, cfg.flush_messages) == (1000, 2048, 1)
    assert cfg.log_append_time
    assert cfg.cleanup_policy == ("compact", "delete") and cfg.delete_enabled
    assert cfg.extra == {"compression.type": "zstd", "unclean.leader.election.enable": "true"}
    props = cfg.to_props()
    assert props["compression.type"] == "zstd"
    assert props["cleanup.policy"] == "compact,delete"
    assert props["retention.ms"] == "1000"
    assert props["preallocate"] == "false"
    assert not LogConfig.from_props({"cleanup.policy": "compact"}).delete_enabled


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("no.such.config", "1"),
        ("segment.bytes", "abc"),
        ("segment.bytes", "13"),
        ("segment.bytes", str(1 << 31)),
        ("segment.ms", "0"),
        ("retention.ms", "-2"),
        ("flush.messages", "0"),
        ("message.timestamp.type", "createtime"),
        ("cleanup.policy", "delete,remove"),
        ("min.insync.replicas", "0"),
        ("compression.type", "brotli"),
        ("preallocate", "yes"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("compression.gzip.level", "0"),
        ("max.message.bytes", "-1"),
        ("message.timestamp.after.max.ms", "-1"),
    ],
)
def test_invalid_values(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as err:
        LogConfig.from_props({name: value})
    assert err.value.name == name
    assert err.value.error_code == ErrorCode.invalid_config


def test_deprecated_names_accepted() -> None:
    cfg = LogConfig.from_props(
        {"message.format.version": "2.8", "message.downconversion.enable": "false"}
    )
    assert cfg.extra["message.format.version"] == "2.8"
    assert cfg.to_props()["message.downconversion.enable"] == "false"


def test_partition_dirs(tmp_path: Path) -> None:
    assert partition_dir(tmp_path, "my-topic", 3) == tmp_path / "my-topic-3"
    assert parse_partition_dir_name("my-topic-3") == ("my-topic", 3)
    assert parse_partition_dir_name("meta") is None
    assert parse_partition_dir_name("t-01") is None
    assert parse_partition_dir_name("-1") is None
    (tmp_path / "a-0").mkdir()
    (tmp_path / "a-b-12").mkdir()
    (tmp_path / "meta").mkdir()
    (tmp_path / "x-1").write_text("file, not dir")
    assert [(t, p) for t, p, _ in iter_partition_dirs(tmp_path)] == [("a", 0), ("a-b", 12)]
