"""The plugin API: what a connector author implements (re-exported by ``oncelog.connect.api``).

Close to Kafka Connect's Java API in Python idiom: a :class:`Connector` validates its
configuration and splits the work into task configurations; the framework runs one
:class:`SourceTask` or :class:`SinkTask` per configuration, handing it a context.
Configurations are ``dict[str, str]``, as they are stored in the config topic.

Exactly-once support (KIP-618) hooks are present with Kafka's defaults so a
connector can declare them today; the runtime acts on them once exactly-once
source support lands.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Iterable, Mapping
from typing import Any

from oncelog.connect.api.config import ConfigDef, ConfigValue
from oncelog.connect.api.data import (
    Schema,
    SchemaAndValue,
    SchemaType,
    Struct,
)
from oncelog.connect.api.errors import ConnectException, DataException, RetriableException
from oncelog.connect.api.records import (
    ConnectRecord,
    Header,
    Headers,
    RecordMetadata,
    SinkRecord,
    SourceRecord,
    TopicPartition,
)

__all__ = [
    "ConfigDef",
    "ConnectException",
    "ConnectRecord",
    "Connector",
    "ConnectorContext",
    "ConnectorTransactionBoundaries",
    "DataException",
    "ErrantRecordReporter",
    "ExactlyOnceSupport",
    "Header",
    "Headers",
    "OffsetStorageReader",
    "RecordMetadata",
    "RetriableException",
    "Schema",
    "SchemaAndValue",
    "SchemaType",
    "SinkConnector",
    "SinkRecord",
    "SinkTask",
    "SinkTaskContext",
    "SourceConnector",
    "SourceRecord",
    "SourceTask",
    "SourceTaskContext",
    "Struct",
    "Task",
    "TopicPartition",
    "TransactionContext",
]

Config = dict[str, str]


class ExactlyOnceSupport(enum.Enum):
    """Whether a source connector can deliver exactly once with a configuration (KIP-618)."""

    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class ConnectorTransactionBoundaries(enum.Enum):
    """Whether a source connector can define its own transaction boundaries (KIP-618)."""

    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


# --- contexts (implemented by the runtime) ---------------------------------------------


class ConnectorContext(abc.ABC):
    """Given to a connector instance by the worker."""

    @abc.abstractmethod
    def request_task_reconfiguration(self) -> None:
        """Ask the framework to call ``task_configs`` again (the input changed)."""

    @abc.abstractmethod
    def raise_error(self, error: BaseException) -> None:
        """Fail the connector from a background thread of the connector."""


class OffsetStorageReader(abc.ABC):
    """Reads the source offsets committed for the task's connector."""

    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        return self.offsets([partition]).get(_freeze(partition))

    @abc.abstractmethod
    def offsets(self, partitions: Iterable[Mapping[str, Any]]) -> dict[Any, dict[str, Any]]:
        """Offsets keyed by :func:`partition_key` of each partition that has one."""


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def partition_key(partition: Mapping[str, Any]) -> Any:
    """A hashable key for a source partition map (for :meth:`OffsetStorageReader.offsets`)."""
    return _freeze(partition)


class TransactionContext(abc.ABC):
    """Lets a source task define its transaction boundaries (KIP-618, connector boundary)."""

    @abc.abstractmethod
    def commit_transaction(self, record: SourceRecord | None = None) -> None:
        """Commit after ``record`` (or after the next poll batch when None)."""

    @abc.abstractmethod
    def abort_transaction(self, record: SourceRecord | None = None) -> None:
        """Abort after ``record`` (or the next poll batch when None)."""


class SourceTaskContext(abc.ABC):
    @abc.abstractmethod
    def configs(self) -> Config:
        """The task's configuration."""

    @abc.abstractmethod
    def offset_storage_reader(self) -> OffsetStorageReader: ...

    def transaction_context(self) -> TransactionContext | None:
        """Non-None only when exactly-once is enabled with ``transaction.boundary=connector``."""
        return None


class ErrantRecordReporter(abc.ABC):
    """Sends a sink record that failed in the task to the dead-letter queue."""

    @abc.abstractmethod
    def report(self, record: SinkRecord, error: BaseException) -> None: ...


class SinkTaskContext(abc.ABC):
    @abc.abstractmethod
    def configs(self) -> Config: ...

    @abc.abstractmethod
    def offset(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Reset consumer positions (e.g. to offsets the sink system stores itself)."""

    @abc.abstractmethod
    def timeout(self, timeout_ms: int) -> None:
        """After a RetriableException from ``put``, retry after this long."""

    @abc.abstractmethod
    def assignment(self) -> set[TopicPartition]: ...

    @abc.abstractmethod
    def pause(self, *partitions: TopicPartition) -> None: ...

    @abc.abstractmethod
    def resume(self, *partitions: TopicPartition) -> None: ...

    @abc.abstractmethod
    def request_commit(self) -> None:
        """Ask for an offset commit as soon as possible."""

    def errant_record_reporter(self) -> ErrantRecordReporter | None:
        """Set when the connector configures a dead-letter queue or error tolerance."""
        return None


# --- connectors ------------------------------------------------------------------------


class Connector(abc.ABC):
    """Splits a job into task configurations. One instance runs per connector in the
    cluster, on the worker the leader assigned it to."""

    context: ConnectorContext | None = None

    def initialize(
        self, context: ConnectorContext, task_configs: list[Config] | None = None
    ) -> None:
        self.context = context

    @abc.abstractmethod
    def version(self) -> str: ...

    @abc.abstractmethod
    def config_def(self) -> ConfigDef:
        """The connector-specific keys (Kafka's ``config()``)."""

    def validate(self, config: Mapping[str, str]) -> dict[str, ConfigValue]:
        """Per-key validation of the connector's own keys; override to add cross-key checks."""
        return self.config_def().validate(config)

    @abc.abstractmethod
    def start(self, config: Config) -> None: ...

    @abc.abstractmethod
    def task_class(self) -> type[Task]: ...

    @abc.abstractmethod
    def task_configs(self, max_tasks: int) -> list[Config]: ...

    @abc.abstractmethod
    def stop(self) -> None: ...

    def reconfigure(self, config: Config) -> None:
        self.stop()
        self.start(config)


class SourceConnector(Connector):
    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        """None means "unknown", which a ``required`` exactly-once config rejects."""
        return None

    def can_define_transaction_boundaries(
        self, config: Mapping[str, str]
    ) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.UNSUPPORTED

    def alter_offsets(
        self, config: Mapping[str, str], offsets: Mapping[Any, Mapping[str, Any] | None]
    ) -> bool:
        """KIP-875: accept (True), not validate (False, the default) or reject (raise) an
        offset change. Keys are :func:`partition_key` values; None values reset."""
        return False


class SinkConnector(Connector):
    TOPICS_CONFIG = "topics"
    TOPICS_REGEX_CONFIG = "topics.regex"

    def alter_offsets(
        self, config: Mapping[str, str], offsets: Mapping[TopicPartition, int | None]
    ) -> bool:
        """KIP-875 hook for sink offset changes; see :meth:`SourceConnector.alter_offsets`."""
        return False


# --- tasks -----------------------------------------------------------------------------


class Task(abc.ABC):
    @abc.abstractmethod
    def version(self) -> str: ...

    @abc.abstractmethod
    def start(self, config: Config) -> None: ...

    @abc.abstractmethod
    def stop(self) -> None:
        """Called from another thread than ``poll``/``put``: must make them return soon."""


class SourceTask(Task):
    context: SourceTaskContext

    def initialize(self, context: SourceTaskContext) -> None:
        self.context = context

    @abc.abstractmethod
    def poll(self) -> list[SourceRecord] | None:
        """New records, or None when there are none right now. May block briefly."""

    def commit(self) -> None:
        """Called after the offsets of a batch of records have been committed."""

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        """Called when ``record`` was acknowledged (metadata) or dropped by a transform
        or error tolerance (None)."""


class SinkTask(Task):
    context: SinkTaskContext

    def initialize(self, context: SinkTaskContext) -> None:
        self.context = context

    @abc.abstractmethod
    def put(self, records: list[SinkRecord]) -> None: ...

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        """Make everything ``put`` so far durable."""

    def pre_commit(
        self, current_offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        """The offsets safe to commit; by default ``flush`` then everything consumed.

        Offsets are the *next* offset to consume, as Kafka commits them.
        """
        self.flush(current_offsets)
        return dict(current_offsets)

    def open(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions newly assigned to this task."""

    def close(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions taken away from this task (after a final commit)."""
