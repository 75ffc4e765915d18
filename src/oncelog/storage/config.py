"""Per-topic log configuration under Kafka's topic-config names (Kafka's ``LogConfig``).

Every topic config is declared once with :mod:`oncelog.config`: the settings the log
acts on as the typed fields of :class:`LogConfig`, every other real Kafka topic config
as a key that is validated like Kafka does and kept as a string in ``extra``, so
CreateTopics/AlterConfigs/DescribeConfigs round-trip them. :data:`TOPIC_CONFIG_DEF`
holds them all. A refused value is an INVALID_CONFIG :class:`ConfigError` whose message
names the config and the reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.config.config_def import (
    ConfigDef,
    ConfigKey,
    ConfigType,
    Importance,
    convert_to_string,
)
from oncelog.config.errors import ConfigException
from oncelog.config.typed import definition, field_names, setting

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


# -- validation, with the wording of the INVALID_CONFIG messages ---------------------------
# Each check raises ConfigException(name, value, reason); ``from_props`` answers the reason
# as ConfigError(name, reason).


class _Bounds:
    """At least ``low`` (its own message) and at most ``high`` (out of range)."""

    def __init__(self, low: int | None = None, high: int | None = None) -> None:
        self.low = low
        self.high = high

    def __call__(self, name: str, value: Any) -> None:
        if self.high is not None and value > self.high:
            raise ConfigException(name, value, f"value {value} is out of range")
        if self.low is not None and value < self.low:
            raise ConfigException(name, value, f"value {value} must be at least {self.low}")

    def __str__(self) -> str:
        low = "..." if self.low is None else self.low
        return f"[{low},...]" if self.high is None else f"[{low},...,{self.high}]"


class _OneOf:
    def __init__(self, *choices: str) -> None:
        self.choices = choices

    def __call__(self, name: str, value: Any) -> None:
        if value not in self.choices:
            raise ConfigException(
                name, value, f"value {value!r} must be one of {', '.join(self.choices)}"
            )

    def __str__(self) -> str:
        return "[" + ", ".join(self.choices) + "]"


def _policy(name: str, value: Any) -> None:
    for item in value:
        if item not in ("compact", "delete"):
            raise ConfigException(name, value, f"value {item!r} must be compact or delete")
    if len(set(value)) != len(value):
        raise ConfigException(name, value, "duplicate values")


def _ratio(name: str, value: Any) -> None:
    if not 0.0 <= value <= 1.0:
        raise ConfigException(name, value, f"value {value} must be between 0 and 1")


def _gzip_level(name: str, value: Any) -> None:
    if value != -1 and not 1 <= value <= 9:
        raise ConfigException(name, value, f"value {value} must be -1 or between 1 and 9")


_RANGES = {ConfigType.INT: (INT_MIN, INT_MAX), ConfigType.LONG: (LONG_MIN, LONG_MAX)}


def _parse(key: ConfigKey, raw: str) -> object:
    """``raw`` as ``key``'s type, then checked; ConfigError with the reason if refused."""
    name = key.name
    value: object
    if key.type in _RANGES:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigError(name, f"value {raw!r} is not a number") from None
        low, high = _RANGES[key.type]
        if not low <= value <= high:
            raise ConfigError(name, f"value {value} is out of range")
    elif key.type is ConfigType.DOUBLE:
        try:
            value = float(raw.strip())
        except ValueError:
            raise ConfigError(name, f"value {raw!r} is not a number") from None
    elif key.type is ConfigType.BOOLEAN:
        text = raw.strip().lower()
        if text not in ("true", "false"):
            raise ConfigError(name, f"value {raw!r} is not a boolean")
        value = text == "true"
    elif key.type is ConfigType.LIST:
        value = tuple(p.strip() for p in raw.split(",") if p.strip())
    else:
        value = raw.strip()
    if key.validator is not None:
        try:
            key.validator(name, value)
        except ConfigException as exc:
            raise ConfigError(name, exc.reason or str(exc)) from None
    return value


LONG = ConfigType.LONG
_T = "topic"


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = setting(
        "segment.bytes",
        1073741824,
        "Size at which a segment rolls. The minimum is Kafka 3.x's 14, so tests can roll tiny segments.",
        validator=_Bounds(14),
        importance=Importance.HIGH,
        group=_T,
    )
    segment_ms: int = setting(
        "segment.ms",
        604800000,
        "Age at which a segment rolls.",
        type=LONG,
        validator=_Bounds(1),
        group=_T,
    )
    segment_index_bytes: int = setting(
        "segment.index.bytes",
        10485760,
        "Largest offset or time index of a segment.",
        validator=_Bounds(4),
        group=_T,
    )
    index_interval_bytes: int = setting(
        "index.interval.bytes",
        4096,
        "Bytes of records between two offset index entries.",
        validator=_Bounds(0),
        group=_T,
    )
    retention_ms: int = setting(
        "retention.ms",
        604800000,
        "How long records are kept before their segment is deleted (-1: forever).",
        type=LONG,
        validator=_Bounds(-1),
        importance=Importance.HIGH,
        group=_T,
    )
    retention_bytes: int = setting(
        "retention.bytes",
        -1,
        "Most bytes a partition keeps before its oldest segments are deleted (-1: no limit).",
        type=LONG,
        importance=Importance.HIGH,
        group=_T,
    )
    # flush.messages=1 fsyncs every append: the setting for single-node durability,
    # since there is no replica to recover from. The defaults leave it to the OS.
    flush_messages: int = setting(
        "flush.messages",
        LONG_MAX,
        "Records appended between two fsyncs (1: every append, single-node durability).",
        validator=_Bounds(1),
        importance=Importance.HIGH,
        group=_T,
    )
    flush_ms: int = setting(
        "flush.ms",
        LONG_MAX,
        "Longest time records wait before an fsync.",
        validator=_Bounds(0),
        group=_T,
    )
    message_timestamp_type: str = setting(
        "message.timestamp.type",
        CREATE_TIME,
        "CreateTime (the producer's timestamps) or LogAppendTime (the broker's).",
        validator=_OneOf(CREATE_TIME, LOG_APPEND_TIME),
        group=_T,
    )
    max_message_bytes: int = setting(
        "max.message.bytes",
        1048588,
        "Largest record batch the topic accepts.",
        validator=_Bounds(0),
        group=_T,
    )
    cleanup_policy: tuple[str, ...] = setting(
        "cleanup.policy",
        ("delete",),
        "delete, compact, or both: what happens to old segments.",
        type=ConfigType.LIST,
        validator=_policy,
        importance=Importance.HIGH,
        group=_T,
    )
    file_delete_delay_ms: int = setting(
        "file.delete.delay.ms",
        60000,
        "How long a removed segment stays on disk for reads already under way.",
        type=LONG,
        validator=_Bounds(0),
        group=_T,
    )
    min_insync_replicas: int = setting(
        "min.insync.replicas",
        1,
        "Accepted and described (one node is the only replica).",
        validator=_Bounds(1),
        group=_T,
    )
    message_timestamp_before_max_ms: int = setting(
        "message.timestamp.before.max.ms",
        LONG_MAX,
        "How far in the past a CreateTime timestamp may be.",
        validator=_Bounds(0),
        group=_T,
    )
    message_timestamp_after_max_ms: int = setting(
        "message.timestamp.after.max.ms",
        3600000,
        "How far in the future a CreateTime timestamp may be.",
        type=LONG,
        validator=_Bounds(0),
        group=_T,
    )
    # Compaction (cleanup.policy=compact): see storage/cleaner.py.
    delete_retention_ms: int = setting(
        "delete.retention.ms",
        86400000,
        "How long tombstones survive cleaning.",
        type=LONG,
        validator=_Bounds(0),
        group=_T,
    )
    min_compaction_lag_ms: int = setting(
        "min.compaction.lag.ms",
        0,
        "Records younger than this are not compacted.",
        type=LONG,
        validator=_Bounds(0),
        group=_T,
    )
    max_compaction_lag_ms: int = setting(
        "max.compaction.lag.ms",
        LONG_MAX,
        "A log with records older than this is due for cleaning.",
        validator=_Bounds(1),
        group=_T,
    )
    min_cleanable_dirty_ratio: float = setting(
        "min.cleanable.dirty.ratio",
        0.5,
        "The dirty share of a log that makes it due for cleaning.",
        validator=_ratio,
        group=_T,
    )
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

    @classmethod
    def from_props(cls, props: Mapping[str, str], defaults: LogConfig | None = None) -> LogConfig:
        """Apply Kafka-style string overrides on top of ``defaults`` (or Kafka's defaults)."""
        base = defaults if defaults is not None else cls()
        updates: dict[str, object] = {}
        extra = dict(base.extra)
        for name, raw in props.items():
            if name not in TOPIC_CONFIG_DEF:
                raise ConfigError(name, "unknown topic config")
            if raw is None:
                raise ConfigError(name, "null value")
            value = _parse(TOPIC_CONFIG_DEF[name], str(raw))
            attr = _FIELDS.get(name)
            if attr is None:
                extra[name] = _to_string(value)
            else:
                updates[attr] = value
        return dataclasses.replace(base, extra=extra, **updates)  # type: ignore[arg-type]

    def to_props(self) -> dict[str, str]:
        """Every current topic config value as Kafka prints it (for DescribeConfigs)."""
        out = dict(TOPIC_CONFIG_DEFAULTS)
        for name, attr in _FIELDS.items():
            out[name] = _to_string(getattr(self, attr))
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


def _stored(
    name: str, type_: ConfigType, default: object, doc: str, validator: Any = None
) -> ConfigKey:
    return ConfigKey(name, type_, default, Importance.LOW, doc, validator, _T, display_name=name)


_B, _I, _S = ConfigType.BOOLEAN, ConfigType.INT, ConfigType.STRING
# Accepted and stored, not acted on.
_STORED = ConfigDef(
    [
        _stored(
            "compression.type",
            _S,
            "producer",
            "Accepted and stored: batches are kept as the producer compressed them.",
            _OneOf(*COMPRESSION_TYPES),
        ),
        _stored("compression.gzip.level", _I, -1, "Accepted and stored.", _gzip_level),
        _stored("compression.lz4.level", _I, 9, "Accepted and stored.", _Bounds(1, 17)),
        _stored("compression.zstd.level", _I, 3, "Accepted and stored.", _Bounds(-131072, 22)),
        _stored("segment.jitter.ms", LONG, 0, "Accepted and stored.", _Bounds(0)),
        _stored("unclean.leader.election.enable", _B, False, "Accepted and stored (one node)."),
        _stored("preallocate", _B, False, "Accepted and stored."),
        _stored("leader.replication.throttled.replicas", _S, "", "Accepted and stored (one node)."),
        _stored(
            "follower.replication.throttled.replicas", _S, "", "Accepted and stored (one node)."
        ),
        _stored("remote.storage.enable", _B, False, "Accepted and stored (no tiered storage)."),
        _stored(
            "local.retention.ms", LONG, -2, "Accepted and stored (no tiered storage).", _Bounds(-2)
        ),
        _stored(
            "local.retention.bytes",
            LONG,
            -2,
            "Accepted and stored (no tiered storage).",
            _Bounds(-2),
        ),
        _stored("remote.log.copy.disable", _B, False, "Accepted and stored (no tiered storage)."),
        _stored(
            "remote.log.delete.on.disable", _B, False, "Accepted and stored (no tiered storage)."
        ),
        # Removed in Kafka 4.0; older clients and tools still send them.
        _stored(
            "message.format.version",
            _S,
            "3.0-IV1",
            "Removed in Kafka 4.0: accepted from older tools.",
        ),
        _stored(
            "message.timestamp.difference.max.ms",
            LONG,
            LONG_MAX,
            "Removed in Kafka 4.0: accepted from older tools.",
            _Bounds(0),
        ),
        _stored(
            "message.downconversion.enable",
            _B,
            True,
            "Removed in Kafka 4.0: accepted from older tools.",
        ),
    ]
)
# Accepted only, never listed (Kafka 4.0 removed them).
_UNLISTED = frozenset(
    {
        "message.format.version",
        "message.timestamp.difference.max.ms",
        "message.downconversion.enable",
    }
)

TOPIC_CONFIG_DEF: ConfigDef = definition(LogConfig).merge(_STORED)
"""Every topic config: LogConfig's typed fields, then those only stored."""
_FIELDS = field_names(LogConfig)

KNOWN_TOPIC_CONFIGS: frozenset[str] = frozenset(TOPIC_CONFIG_DEF.names())

TOPIC_CONFIG_DEFAULTS: dict[str, str] = {
    key.name: convert_to_string(key.default, key.type) or ""
    for key in TOPIC_CONFIG_DEF.keys()
    if key.name not in _UNLISTED
}
