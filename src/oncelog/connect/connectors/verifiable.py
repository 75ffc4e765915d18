"""``VerifiableSource`` / ``VerifiableSink``, like Kafka's tools connectors.

Each source task ``n`` emits ``{"task": n, "seqno": k, "time_ms": …}`` values with key
``n`` at ``throughput`` records per second (``-1``: unthrottled). Its source partition
is ``{"id": n}`` and its offset ``{"seqno": k}``; a restarted task continues at the
stored seqno + 1, so a reader can check for gaps and count duplicates per task.

The sink appends one JSON line per record it is given to ``file`` (and keeps them in
memory without one): ``{"task", "topic", "partition", "offset", "key", "value"}``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import IO, Any

from oncelog.connect.api.config import ConfigDef, ConfigType, Importance
from oncelog.connect.api.config_validators import Range, non_empty_string
from oncelog.connect.api.connector import (
    Config,
    ExactlyOnceSupport,
    SinkConnector,
    SinkRecord,
    SinkTask,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
    TopicPartition,
)
from oncelog.connect.api.data import INT32_SCHEMA
from oncelog.connect.api.errors import ConfigException
from oncelog.connect.api.version import VERSION

TOPIC_CONFIG = "topic"
THROUGHPUT_CONFIG = "throughput"
BATCH_SIZE_CONFIG = "batch.size"
ID_CONFIG = "id"
FILE_CONFIG = "file"
ID_FIELD = "id"
SEQNO_FIELD = "seqno"


def _source_config_def() -> ConfigDef:
    return (
        ConfigDef()
        .define(TOPIC_CONFIG, ConfigType.STRING, validator=lambda n, v: non_empty_string(n, v),
                importance=Importance.HIGH, documentation="The topic to produce records to.")
        .define(THROUGHPUT_CONFIG, ConfigType.LONG, validator=_throughput, importance=Importance.HIGH,
                documentation="Records per second each task produces; -1 for no limit.")
        .define(BATCH_SIZE_CONFIG, ConfigType.INT, 100, Range.at_least(1), Importance.LOW,
                "The most records one poll returns (an oncelog addition; Kafka's task returns one).")
    )  # fmt: skip


def _throughput(name: str, value: Any) -> None:
    if value == 0 or value < -1:
        raise ConfigException(name, value, "Must be positive, or -1 for no limit")


def _with_task_ids(config: Config, max_tasks: int) -> list[Config]:
    return [{**config, ID_CONFIG: str(i)} for i in range(max_tasks)]


class VerifiableSourceConnector(SourceConnector):
    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConfigDef:
        return _source_config_def()

    def start(self, config: Config) -> None:
        _source_config_def().parse(config)
        self._config = dict(config)

    def task_class(self) -> type[Task]:
        return VerifiableSourceTask

    def task_configs(self, max_tasks: int) -> list[Config]:
        return _with_task_ids(self._config, max_tasks)

    def stop(self) -> None:
        return None

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED  # one partition per task, resumed from its offset

    def alter_offsets(
        self, config: Mapping[str, str], offsets: Mapping[Any, Mapping[str, Any] | None]
    ) -> bool:
        return True


class Throttle:
    """How many records may be sent by now to hold ``per_second`` since ``start``."""

    def __init__(self, per_second: int, clock: Callable[[], float]) -> None:
        self.per_second = per_second
        self.clock = clock
        self.start = clock()
        self.sent = 0

    def allowed(self) -> int:
        if self.per_second < 0:
            return 1 << 30
        return max(0, int((self.clock() - self.start) * self.per_second) + 1 - self.sent)

    def seconds_until_next(self) -> float:
        if self.per_second < 0:
            return 0.0
        return max(0.0, self.start + self.sent / self.per_second - self.clock())


class VerifiableSourceTask(SourceTask):
    def __init__(
        self, clock: Callable[[], float] = time.monotonic, wall_ms: Callable[[], int] | None = None
    ) -> None:
        self._clock = clock
        self._wall_ms = wall_ms or (lambda: time.time_ns() // 1_000_000)
        self._stopping = threading.Event()

    def version(self) -> str:
        return VERSION

    def start(self, config: Config) -> None:
        values = _source_config_def().parse(config)
        self.topic: str = values[TOPIC_CONFIG]
        self.batch_size: int = values[BATCH_SIZE_CONFIG]
        self.task_id = int(config.get(ID_CONFIG, "0"))
        self.partition = {ID_FIELD: self.task_id}
        previous = self.context.offset_storage_reader().offset(self.partition)
        self.seqno = int(previous[SEQNO_FIELD]) + 1 if previous is not None else 0
        self.throttle = Throttle(values[THROUGHPUT_CONFIG], self._clock)
        self._stopping.clear()

    def poll(self) -> list[SourceRecord] | None:
        count = min(self.batch_size, self.throttle.allowed())
        if count == 0:
            if self._stopping.wait(self.throttle.seconds_until_next()):
                return None
            count = min(self.batch_size, self.throttle.allowed())
        now = self._wall_ms()
        records = []
        for _ in range(count):
            records.append(
                SourceRecord.create(
                    self.partition,
                    {SEQNO_FIELD: self.seqno},
                    self.topic,
                    {"task": self.task_id, "seqno": self.seqno, "time_ms": now},
                    key=self.task_id,
                    key_schema=INT32_SCHEMA,
                    timestamp=now,
                )
            )
            self.seqno += 1
        self.throttle.sent += count
        return records or None

    def stop(self) -> None:
        self._stopping.set()


class VerifiableSinkConnector(SinkConnector):
    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConfigDef:
        return ConfigDef().define(FILE_CONFIG, ConfigType.STRING, None, None, Importance.MEDIUM,
                                  "File that receives one JSON line per record seen.")  # fmt: skip

    def start(self, config: Config) -> None:
        self._config = dict(config)

    def task_class(self) -> type[Task]:
        return VerifiableSinkTask

    def task_configs(self, max_tasks: int) -> list[Config]:
        return _with_task_ids(self._config, max_tasks)

    def stop(self) -> None:
        return None

    def alter_offsets(
        self, config: Mapping[str, str], offsets: Mapping[TopicPartition, int | None]
    ) -> bool:
        return True


class VerifiableSinkTask(SinkTask):
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self._out: IO[str] | None = None

    def version(self) -> str:
        return VERSION

    def start(self, config: Config) -> None:
        self.task_id = int(config.get(ID_CONFIG, "0"))
        filename = config.get(FILE_CONFIG)
        self._out = open(filename, "a", encoding="utf-8") if filename else None  # noqa: SIM115

    def put(self, records: list[SinkRecord]) -> None:
        for record in records:
            entry = {
                "task": self.task_id,
                "topic": record.topic,
                "partition": record.kafka_partition,
                "offset": record.kafka_offset,
                "key": record.key,
                "value": record.value,
            }
            self.seen.append(entry)
            if self._out is not None:
                self._out.write(json.dumps(entry, default=str) + "\n")

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        if self._out is not None:
            self._out.flush()
            os.fsync(self._out.fileno())

    def stop(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
