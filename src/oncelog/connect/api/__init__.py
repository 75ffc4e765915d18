"""The plugin API: what a connector author implements, as Kafka Connect's
``connect-api`` module (``import oncelog.connect.api``).

The package re-exports the names a plugin needs; each lives in one module here:
``connector`` (connectors, tasks, contexts), ``records``, ``data`` (schemas and
structs), ``config`` (``ConfigDef``), ``converters``, ``transforms`` (the
``Transformation`` and ``Predicate`` interfaces) and ``errors``.
"""

from oncelog.connect.api.connector import (
    Config,
    ConfigDef,
    ConnectException,
    Connector,
    ConnectorContext,
    ConnectorTransactionBoundaries,
    ConnectRecord,
    DataException,
    ErrantRecordReporter,
    ExactlyOnceSupport,
    Header,
    Headers,
    OffsetStorageReader,
    RecordMetadata,
    RetriableException,
    Schema,
    SchemaAndValue,
    SchemaType,
    SinkConnector,
    SinkRecord,
    SinkTask,
    SinkTaskContext,
    SourceConnector,
    SourceRecord,
    SourceTask,
    SourceTaskContext,
    Struct,
    Task,
    TopicPartition,
    TransactionContext,
    partition_key,
)
from oncelog.connect.api.transforms import Predicate, Transformation

__all__ = [
    "Config",
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
    "Predicate",
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
    "Transformation",
    "partition_key",
]
