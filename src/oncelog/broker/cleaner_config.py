"""The log cleaner's broker settings (Kafka's ``CleanerConfig`` names and defaults).

Declared here, apart from the cleaner's threads (``log_cleaner``), so the broker's config
and the cleaner both import them and neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass

from oncelog.config.config_def import ConfigType, Importance
from oncelog.config.typed import setting
from oncelog.config.validators import Between, Range

LONG_MAX = 2**63 - 1
DOUBLE_MAX = 1.7976931348623157e308
_G = "cleaner"


@dataclass(frozen=True, slots=True)
class CleanerSettings:
    enabled: bool = setting(
        "log.cleaner.enable",
        True,
        "Run the log cleaner (compaction of cleanup.policy=compact logs).",
        group=_G,
    )
    threads: int = setting(
        "log.cleaner.threads",
        1,
        "Cleaner threads; each cleans one log at a time (0 runs one).",
        validator=Range.at_least(0),
        group=_G,
    )
    backoff_ms: int = setting(
        "log.cleaner.backoff.ms",
        15000,
        "How long a cleaner thread sleeps when no log needs cleaning.",
        type=ConfigType.LONG,
        validator=Range.at_least(0),
        group=_G,
    )
    dedupe_buffer_bytes: int = setting(
        "log.cleaner.dedupe.buffer.size",
        134217728,
        "Memory for the key map of a cleaning pass, shared by the threads.",
        type=ConfigType.LONG,
        group=_G,
    )
    io_buffer_size: int = setting(
        "log.cleaner.io.buffer.size",
        524288,
        "Kafka's cleaner I/O buffer: accepted (passes read segments whole).",
        importance=Importance.LOW,
        group=_G,
    )
    io_buffer_load_factor: float = setting(
        "log.cleaner.io.buffer.load.factor",
        0.9,
        "Kafka's key map load factor: accepted.",
        importance=Importance.LOW,
        group=_G,
    )
    io_max_bytes_per_second: float = setting(
        "log.cleaner.io.max.bytes.per.second",
        DOUBLE_MAX,
        "The cleaners' combined read and write rate, in bytes per second.",
        group=_G,
    )
    min_cleanable_ratio: float = setting(
        "log.cleaner.min.cleanable.ratio",
        0.5,
        "Broker-wide min.cleanable.dirty.ratio: the dirty share of a log that makes it due.",
        validator=Between(0, 1),
        group=_G,
    )
    delete_retention_ms: int = setting(
        "log.cleaner.delete.retention.ms",
        86400000,
        "Broker-wide delete.retention.ms: how long tombstones survive cleaning.",
        type=ConfigType.LONG,
        validator=Range.at_least(0),
        group=_G,
    )
    min_compaction_lag_ms: int = setting(
        "log.cleaner.min.compaction.lag.ms",
        0,
        "Broker-wide min.compaction.lag.ms: records younger than this are not compacted.",
        type=ConfigType.LONG,
        validator=Range.at_least(0),
        group=_G,
    )
    max_compaction_lag_ms: int = setting(
        "log.cleaner.max.compaction.lag.ms",
        LONG_MAX,
        "Broker-wide max.compaction.lag.ms: a log with records older than this is due.",
        validator=Range.at_least(1),
        group=_G,
    )

    @property
    def thread_count(self) -> int:
        """Threads that run: ``log.cleaner.threads``, at least one."""
        return max(1, self.threads)

    def topic_defaults(self) -> dict[str, str]:
        """The topic configs the cleaner's broker configs seed (Kafka's synonyms)."""
        return {
            "delete.retention.ms": str(self.delete_retention_ms),
            "min.compaction.lag.ms": str(self.min_compaction_lag_ms),
            "max.compaction.lag.ms": str(self.max_compaction_lag_ms),
            "min.cleanable.dirty.ratio": str(self.min_cleanable_ratio),
        }
