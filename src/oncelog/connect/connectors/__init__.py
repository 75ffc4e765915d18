"""Built-in connectors: Verifiable and PostgreSQL source/sink.

The FileStream connectors (``file_stream``) are not among them: like Kafka since 3.2,
which keeps ``connect-file`` off the default plugin path, they read and write any file
the worker may, on a REST caller's word, so they load only when ``plugin.path`` names
their module.
"""

from oncelog.connect.connectors.postgres_sink import PostgresSinkConnector
from oncelog.connect.connectors.postgres_source import PostgresSourceConnector
from oncelog.connect.connectors.verifiable import VerifiableSinkConnector, VerifiableSourceConnector

BUILTIN_CONNECTORS: list[type] = [
    VerifiableSourceConnector,
    VerifiableSinkConnector,
    PostgresSourceConnector,
    PostgresSinkConnector,
]

__all__ = [
    "BUILTIN_CONNECTORS",
    "PostgresSinkConnector",
    "PostgresSourceConnector",
    "VerifiableSinkConnector",
    "VerifiableSourceConnector",
]
