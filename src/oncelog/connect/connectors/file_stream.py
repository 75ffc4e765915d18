"""``FileStreamSource`` / ``FileStreamSink``, Kafka's file connectors.

The source reads a file line by line and publishes each line to ``topic``; its source
partition is ``{"filename": <file>}`` and its offset ``{"position": <byte position
after the line>}``, so a restarted task resumes at the next unread line. Without
``file`` it reads standard input and tracks no offsets. The sink appends each
record's value as a line to ``file`` (standard output without it).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Mapping
from typing import IO, Any

from oncelog.connect.api.config import ConfigDef, ConfigType, Importance
from oncelog.connect.api.config_validators import Range, non_empty_string
from oncelog.connect.api.connector import (
    Config,
    ConnectorTransactionBoundaries,
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
from oncelog.connect.api.data import STRING_SCHEMA
from oncelog.connect.api.errors import ConnectException
from oncelog.connect.api.version import VERSION

FILE_CONFIG = "file"
TOPIC_CONFIG = "topic"
BATCH_SIZE_CONFIG = "batch.size"
FILENAME_FIELD = "filename"
POSITION_FIELD = "position"
# How long an idle poll waits for the file to grow (Kafka's task waits one second).
IDLE_WAIT_S = 1.0


def _source_config_def() -> ConfigDef:
    return (
        ConfigDef()
        .define(FILE_CONFIG, ConfigType.STRING, None, None, Importance.HIGH,
                "Source filename. If not specified, the standard input will be used")
        .define(TOPIC_CONFIG, ConfigType.STRING, validator=lambda n, v: non_empty_string(n, v),
                importance=Importance.HIGH, documentation="The topic to publish data to")
        .define(BATCH_SIZE_CONFIG, ConfigType.INT, 2000, Range.at_least(1), Importance.LOW,
                "The maximum number of records the source task can read from the file each time it is polled")
    )  # fmt: skip


class FileStreamSourceConnector(SourceConnector):
    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConfigDef:
        return _source_config_def()

    def start(self, config: Config) -> None:
        self._config = dict(config)
        self._config_def_values = self.config_def().parse(config)

    def task_class(self) -> type[Task]:
        return FileStreamSourceTask

    def task_configs(self, max_tasks: int) -> list[Config]:
        # One file, one reader: a single task whatever tasks.max says.
        return [dict(self._config)]

    def stop(self) -> None:
        return None

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        # Positions in a named file are replayable; standard input is not.
        return (
            ExactlyOnceSupport.SUPPORTED
            if config.get(FILE_CONFIG)
            else ExactlyOnceSupport.UNSUPPORTED
        )

    def can_define_transaction_boundaries(
        self, config: Mapping[str, str]
    ) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.UNSUPPORTED

    def alter_offsets(
        self, config: Mapping[str, str], offsets: Mapping[Any, Mapping[str, Any] | None]
    ) -> bool:
        for partition, offset in offsets.items():
            partition_map = dict(partition) if isinstance(partition, tuple) else partition
            if not isinstance(partition_map, Mapping) or FILENAME_FIELD not in partition_map:
                raise ConnectException(
                    f"Partition objects for source connector must contain the '{FILENAME_FIELD}' key"
                )
            if offset is None:
                continue
            position = offset.get(POSITION_FIELD)
            if position is None:
                raise ConnectException(
                    f"Offset objects for source connector must contain the '{POSITION_FIELD}' key"
                )
            if isinstance(position, bool) or not isinstance(position, int) or position < 0:
                raise ConnectException(
                    f"The value for the '{POSITION_FIELD}' key in the offset must be a non-negative integer, was: {position!r}"
                )
        return True


class FileStreamSourceTask(SourceTask):
    def __init__(self) -> None:
        self._stopping = threading.Event()
        self._stream: IO[bytes] | None = None
        self._buffer = b""
        self._position = 0  # byte position of the first unread line

    def version(self) -> str:
        return VERSION

    def start(self, config: Config) -> None:
        values = _source_config_def().parse(config)
        self.filename: str | None = values[FILE_CONFIG] or None
        self.topic: str = values[TOPIC_CONFIG]
        self.batch_size: int = values[BATCH_SIZE_CONFIG]
        self._stopping.clear()

    def _open(self) -> IO[bytes] | None:
        if self.filename is None:
            return sys.stdin.buffer
        try:
            stream = open(self.filename, "rb")  # noqa: SIM115 - kept open across polls
        except FileNotFoundError:
            return None
        offset = self.context.offset_storage_reader().offset({FILENAME_FIELD: self.filename})
        if offset is not None:
            position = offset.get(POSITION_FIELD)
            if not isinstance(position, int):
                raise ConnectException(
                    f"Offset position is the incorrect type: {type(position).__name__}"
                )
            stream.seek(position)
            self._position = position
        return stream

    def poll(self) -> list[SourceRecord] | None:
        if self._stream is None:
            self._stream = self._open()
            if self._stream is None:
                self._stopping.wait(IDLE_WAIT_S)  # the file may not exist yet
                return None
        records = self._read_lines()
        if not records:
            self._stopping.wait(IDLE_WAIT_S if self.filename is None else 0.1)
            return None
        return records

    def _read_lines(self) -> list[SourceRecord]:
        assert self._stream is not None
        records: list[SourceRecord] = []
        while len(records) < self.batch_size:
            newline = self._buffer.find(b"\n")
            if newline < 0:
                chunk = (
                    self._stream.read1(65536)
                    if hasattr(self._stream, "read1")
                    else self._stream.read(65536)
                )
                if not chunk:
                    break
                self._buffer += chunk
                continue
            raw, self._buffer = self._buffer[:newline], self._buffer[newline + 1 :]
            self._position += newline + 1
            line = raw[:-1] if raw.endswith(b"\r") else raw
            partition = {FILENAME_FIELD: self.filename} if self.filename is not None else None
            offset = {POSITION_FIELD: self._position} if self.filename is not None else None
            records.append(
                SourceRecord.create(
                    partition, offset, self.topic, line.decode("utf-8"), value_schema=STRING_SCHEMA
                )
            )
        return records

    def stop(self) -> None:
        self._stopping.set()
        if self._stream is not None and self._stream is not sys.stdin.buffer:
            self._stream.close()
        self._stream = None


def _sink_config_def() -> ConfigDef:
    return ConfigDef().define(FILE_CONFIG, ConfigType.STRING, None, None, Importance.HIGH,
                              "Destination filename. If not specified, the standard output will be used")  # fmt: skip


class FileStreamSinkConnector(SinkConnector):
    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConfigDef:
        return _sink_config_def()

    def start(self, config: Config) -> None:
        self._config = dict(config)
        _sink_config_def().parse(config)

    def task_class(self) -> type[Task]:
        return FileStreamSinkTask

    def task_configs(self, max_tasks: int) -> list[Config]:
        return [dict(self._config)]

    def stop(self) -> None:
        return None

    def alter_offsets(
        self, config: Mapping[str, str], offsets: Mapping[TopicPartition, int | None]
    ) -> bool:
        return True  # the file keeps no offsets of its own


def render_value(value: Any) -> str:
    """A record value as one line of text."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, dict | list | int | float | bool) or value is None:
        return json.dumps(value, separators=(",", ":"), default=str)
    return str(value)


class FileStreamSinkTask(SinkTask):
    def version(self) -> str:
        return VERSION

    def start(self, config: Config) -> None:
        filename = _sink_config_def().parse(config)[FILE_CONFIG]
        self.filename: str | None = filename or None
        self._out: IO[str] = open(filename, "a", encoding="utf-8") if filename else sys.stdout  # noqa: SIM115

    def put(self, records: list[SinkRecord]) -> None:
        for record in records:
            self._out.write(render_value(record.value) + "\n")
        # Lines reach the file as they are put, as Kafka's sink (a PrintStream over an
        # unbuffered file stream) writes them; flush() makes them durable at commit.
        self._out.flush()

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        self._out.flush()
        if self.filename is not None:
            os.fsync(self._out.fileno())

    def stop(self) -> None:
        # stop() also follows a start() that failed (as in Kafka): nothing may be open yet.
        out: IO[str] | None = getattr(self, "_out", None)
        if out is not None and out is not sys.stdout and not out.closed:
            out.close()
