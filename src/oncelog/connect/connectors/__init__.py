"""Built-in connectors: FileStream, Verifiable and PostgreSQL source/sink."""

from oncelog.connect.connectors.file_stream import (
    FileStreamSinkConnector,
    FileStreamSourceConnector,
)
from oncelog.connect.connectors.postgres_sink import PostgresSinkConnector
from oncelog.connect.connectors.postgres_source import PostgresSourceConnector
from oncelog.connect.connectors.verifiable import VerifiableSinkConnector, VerifiableSourceConnector

BUILTIN_CONNECTORS: list[type] = [
    FileStreamSourceConnector,
    FileStreamSinkConnector,
    VerifiableSourceConnector,
    VerifiableSinkConnector,
    PostgresSourceConnector,
    PostgresSinkConnector,
]

__all__ = [
    "BUILTIN_CONNECTORS",
    "FileStreamSinkConnector",
    "FileStreamSourceConnector",
    "PostgresSinkConnector",
    "PostgresSourceConnector",
    "VerifiableSinkConnector",
    "VerifiableSourceConnector",
]
