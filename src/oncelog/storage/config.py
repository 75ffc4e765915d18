"""Per-topic log configuration under Kafka's topic-config names.

Only the settings the log acts on become typed fields; every other real Kafka
topic config is validated like Kafka does and kept as a string in ``extra`` so
CreateTopics/AlterConfigs/DescribeConfigs round-trip them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

LONG_MAX = (1 << 63) - 1
LONG_MIN = -(1 << 63)
INT_MAX = (1 << 31) - 1
INT_MIN = -(1 << 31)

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


class ConfigError(Exception):
    """A topic config Kafka would refuse with INVALID_CONFIG."""

    error_code = ErrorCode.invalid_config

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000  # -1: keep forever
    retention_bytes: int = -1
    # flush.messages=1 fsyncs every append: the setting for single-node durability,
    # since there is no replica to recover from. The defaults leave it to the OS.
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    message_timestamp_type: str = CREATE_TIME
    max_message_bytes: int = 1048588
    cleanup_policy: tuple[str, ...] = ("delete",)
    file_delete_delay_ms: int = 60000
    min_insync_replicas: int = 1
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3600000
    # Compaction (cleanup.policy=compact): see storage/cleaner.py.
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    # Accepted Kafka topic configs the log does not act on, as normalised strings.
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def delete_enabled(self) -> bool:
        """Time/size retention applies (compaction itself is out of scope)."""
        return "delete" in self.cleanup_policy

    @property
    def compact_enabled(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """Roll time: a compacted log also rolls by max.compaction.lag.ms, so no record
        waits in the (never cleaned) active segment longer than that (Kafka's maxSegmentMs)."""
        if self.compact_enabled and self.max_compaction_lag_ms > 0:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms

    @property
    def max_offset_index_entries(self) -> int:
        return self.segment_index_bytes // 8

    @property
    def max_time_index_entries(self) -> int:
        return self.segment_index_bytes // 12

    @classmethod
    def from_props(cls, props: Mapping[str, str], defaults: LogConfig | None = None) -> LogConfig:
        """Apply Kafka-style string overrides on top of ``defaults`` (or Kafka's defaults)."""
        base = defaults if defaults is not None else cls()
        updates: dict[str, object] = {}
        extra = dict(base.extra)
        for name, raw in props.items():
            spec = _SPECS.get(name)
            if spec is None:
                raise ConfigError(name, "unknown topic config")
            if raw is None:
                raise ConfigError(name, "null value")
            value = spec.parse(name, str(raw))
            if spec.attr is None:
                extra[name] = _to_string(value)
            else:
                updates[spec.attr] = value
        return dataclasses.replace(base, extra=extra, **updates)  # type: ignore[arg-type]

    def to_props(self) -> dict[str, str]:
        """Every current topic config value as Kafka prints it (for DescribeConfigs)."""
        out = dict(TOPIC_CONFIG_DEFAULTS)
        for name, spec in _SPECS.items():
            if spec.attr is not None:
                out[name] = _to_string(getattr(self, spec.attr))
        out.update(self.extra)
        return out


def _to_string(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


# -- parsing ------------------------------------------------------------------------------


def _integer(lo: int, hi: int, at_least: int | None = None) -> Callable[[str, str], object]:
    def parse(name: str, raw: str) -> object:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigError(name, f"value {raw!r} is not a number") from None
        if not lo <= value <= hi:
            raise ConfigError(name, f"value {value} is out of range")
        if at_least is not None and value < at_least:
            raise ConfigError(name, f"value {value} must be at least {at_least}")
        return value

    return parse


def _long(at_least: int | None = None) -> Callable[[str, str], object]:
    return _integer(LONG_MIN, LONG_MAX, at_least)


def _int(at_least: int | None = None, at_most: int | None = None) -> Callable[[str, str], object]:
    inner = _integer(INT_MIN, INT_MAX if at_most is None else at_most, at_least)
    return inner


def _boolean(name: str, raw: str) -> object:
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(name, f"value {raw!r} is not a boolean")
    return text == "true"


def _one_of(*choices: str) -> Callable[[str, str], object]:
    def parse(name: str, raw: str) -> object:
        value = raw.strip()
        if value not in choices:
            raise ConfigError(name, f"value {raw!r} must be one of {', '.join(choices)}")
        return value

    return parse


def _policy(name: str, raw: str) -> object:
    items = tuple(p.strip() for p in raw.split(",") if p.strip())
    for item in items:
        if item not in ("compact", "delete"):
            raise ConfigError(name, f"value {item!r} must be compact or delete")
    if len(set(items)) != len(items):
        raise ConfigError(name, "duplicate values")
    return items


def _ratio(name: str, raw: str) -> object:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ConfigError(name, f"value {raw!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise ConfigError(name, f"value {value} must be between 0 and 1")
    return value


def _any_string(name: str, raw: str) -> object:
    return raw.strip()


def _gzip_level(name: str, raw: str) -> object:
    value = _int()(name, raw)
    if value != -1 and not 1 <= value <= 9:  # type: ignore[operator]
        raise ConfigError(name, f"value {value} must be -1 or between 1 and 9")
    return value


@dataclass(frozen=True, slots=True)
class _Spec:
    default: str
    parse: Callable[[str, str], object]
    attr: str | None = None  # LogConfig field it sets; None = kept in ``extra``
    listed: bool = True  # in TOPIC_CONFIG_DEFAULTS (deprecated names are accepted only)


_L = str(LONG_MAX)

# segment.bytes keeps Kafka 3.x's tiny minimum (14) so tests can roll small segments.
_SPECS: dict[str, _Spec] = {
    "segment.bytes": _Spec("1073741824", _int(14), "segment_bytes"),
    "segment.ms": _Spec("604800000", _long(1), "segment_ms"),
    "segment.index.bytes": _Spec("10485760", _int(4), "segment_index_bytes"),
    "index.interval.bytes": _Spec("4096", _int(0), "index_interval_bytes"),
    "retention.ms": _Spec("604800000", _long(-1), "retention_ms"),
    "retention.bytes": _Spec("-1", _long(), "retention_bytes"),
    "flush.messages": _Spec(_L, _long(1), "flush_messages"),
    "flush.ms": _Spec(_L, _long(0), "flush_ms"),
    "message.timestamp.type": _Spec(
        CREATE_TIME, _one_of(CREATE_TIME, LOG_APPEND_TIME), "message_timestamp_type"
    ),
    "max.message.bytes": _Spec("1048588", _int(0), "max_message_bytes"),
    "cleanup.policy": _Spec("delete", _policy, "cleanup_policy"),
    "file.delete.delay.ms": _Spec("60000", _long(0), "file_delete_delay_ms"),
    "min.insync.replicas": _Spec("1", _int(1), "min_insync_replicas"),
    "message.timestamp.before.max.ms": _Spec(_L, _long(0), "message_timestamp_before_max_ms"),
    "message.timestamp.after.max.ms": _Spec("3600000", _long(0), "message_timestamp_after_max_ms"),
    "delete.retention.ms": _Spec("86400000", _long(0), "delete_retention_ms"),
    "min.compaction.lag.ms": _Spec("0", _long(0), "min_compaction_lag_ms"),
    "max.compaction.lag.ms": _Spec(_L, _long(1), "max_compaction_lag_ms"),
    "min.cleanable.dirty.ratio": _Spec("0.5", _ratio, "min_cleanable_dirty_ratio"),
    # Accepted and stored, not acted on.
    "compression.type": _Spec("producer", _one_of(*COMPRESSION_TYPES)),
    "compression.gzip.level": _Spec("-1", _gzip_level),
    "compression.lz4.level": _Spec("9", _int(1, 17)),
    "compression.zstd.level": _Spec("3", _int(-131072, 22)),
    "segment.jitter.ms": _Spec("0", _long(0)),
    "unclean.leader.election.enable": _Spec("false", _boolean),
    "preallocate": _Spec("false", _boolean),
    "leader.replication.throttled.replicas": _Spec("", _any_string),
    "follower.replication.throttled.replicas": _Spec("", _any_string),
    "remote.storage.enable": _Spec("false", _boolean),
    "local.retention.ms": _Spec("-2", _long(-2)),
    "local.retention.bytes": _Spec("-2", _long(-2)),
    "remote.log.copy.disable": _Spec("false", _boolean),
    "remote.log.delete.on.disable": _Spec("false", _boolean),
    # Removed in Kafka 4.0; older clients and tools still send them.
    "message.format.version": _Spec("3.0-IV1", _any_string, listed=False),
    "message.timestamp.difference.max.ms": _Spec(_L, _long(0), listed=False),
    "message.downconversion.enable": _Spec("true", _boolean, listed=False),
}

KNOWN_TOPIC_CONFIGS: frozenset[str] = frozenset(_SPECS)

TOPIC_CONFIG_DEFAULTS: dict[str, str] = {
    name: spec.default for name, spec in _SPECS.items() if spec.listed
}
