"""Client settings for librdkafka through the client layer, and the translation of
producer transaction errors (the client layer's ClientError) into ConnectException."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, NoReturn

from kio.schema.errors import ErrorCode

from oncelog.client.config import ClientConfig
from oncelog.client.errors import LOCAL_FENCED, ClientError
from oncelog.client.java_config import librdkafka_settings
from oncelog.client.reach import check_cluster
from oncelog.client.security import ClientConfigError
from oncelog.connect.api.errors import ConnectException, ProducerFencedError
from oncelog.connect.runtime.worker_config import WorkerConfig

log = logging.getLogger(__name__)
# librdkafka's own log lines (a broker that refused a connection, say) go through the
# worker's logging, as a Java worker's clients log through log4j, rather than raw
# "%3|1795496097.473|FAIL|..." lines on stderr. They reach Python when the client is polled.
CLIENT_LOGGER = logging.getLogger("oncelog.connect.clients")

# Java-client settings librdkafka does not know; the framework sets them for Java's
# producer and consumer, librdkafka's defaults mean the same.
_JAVA_ONLY = frozenset(
    {"key.serializer", "value.serializer", "key.deserializer", "value.deserializer"}
)


def librdkafka_conf(config: Mapping[str, Any]) -> dict[str, str]:
    """A client config with Kafka's security names (``sasl.jaas.config``, PEM
    ``ssl.truststore.location``, ...) translated for librdkafka; a Java-only setting
    (a JKS store, say) raises ConnectException naming the key."""
    try:
        return librdkafka_settings({k: str(v) for k, v in config.items()})
    except ClientConfigError as exc:
        raise ConnectException(f"Invalid client settings: {exc}") from None


def client_config(config: Mapping[str, Any]) -> ClientConfig:
    """The client layer's connection settings (bootstrap, TLS, SASL) of a client config;
    raises ConnectException for invalid security settings."""
    conf = librdkafka_conf(config)
    try:
        cfg = ClientConfig.of(str(conf["bootstrap.servers"]), conf)
    except (ClientError, ValueError) as exc:
        raise ConnectException(f"Invalid client settings: {exc}") from None
    logged: dict[str, Any] = {**cfg.conf, "logger": CLIENT_LOGGER}  # for its admin clients
    return ClientConfig(cfg.bootstrap, logged)


def check_worker_client_settings(worker: WorkerConfig) -> None:
    """Fail at start, naming the key, when the worker's shared or ``producer.`` /
    ``consumer.`` / ``admin.`` client settings cannot be honoured: a worker never
    connects with less security than it was configured with."""
    _worker_client_configs(worker)


def _worker_client_configs(worker: WorkerConfig) -> dict[str, ClientConfig]:
    """The client layer's config of the worker's shared, ``producer.``, ``consumer.`` and
    ``admin.`` client settings, by prefix."""
    shared = worker.shared_client_config()
    out = {}
    for prefix in ("", "producer.", "consumer.", "admin."):
        own = {k: str(v) for k, v in worker.originals_with_prefix(prefix).items()} if prefix else {}
        own.pop("listeners", None)
        try:
            conf = librdkafka_settings({**shared, **own})
            out[prefix] = ClientConfig.of(str(conf["bootstrap.servers"]), conf)
        except (ClientError, ValueError) as exc:
            where = f" (with the worker's {prefix}* settings)" if prefix else ""
            raise ConnectException(f"Invalid worker client settings{where}: {exc}") from None
    return out


def check_worker_connection(worker: WorkerConfig, timeout_s: float) -> None:
    """Fail at start with one precise message when the cluster cannot be reached within
    ``timeout_s`` seconds, or refuses the TLS/SASL handshake of any of the worker's client
    settings (each distinct one is tried once): a wrong password is
    SASL_AUTHENTICATION_FAILED at once, not librdkafka's "Broker transport failure"."""
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for prefix, config in _worker_client_configs(worker).items():
        key = (config.bootstrap, tuple(sorted(config.conf.items())))
        if key in seen:
            continue
        seen.add(key)
        try:
            check_cluster(config, timeout_s)
        except ClientError as exc:
            where = f" (with the worker's {prefix}* settings)" if prefix else ""
            raise ConnectException(f"Cannot connect to the Kafka cluster{where}: {exc}") from None


def librdkafka(config: Mapping[str, Any]) -> dict[str, Any]:
    """A confluent-kafka configuration built by the client layer: its connection
    settings, then this client's own."""
    conf = librdkafka_conf(config)
    own = {k: v for k, v in conf.items() if k not in _JAVA_ONLY and k != "bootstrap.servers"}
    return client_config(conf).librdkafka(**own, logger=CLIENT_LOGGER)


# The producer was fenced out: by the broker (a newer epoch) or, locally, by librdkafka.
FENCED_CODES = frozenset({ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch})


def raise_transaction_error(what: str, error: ClientError) -> NoReturn:
    """A task producer's transaction call failed: raise it as Connect does, decided by the
    client layer's one mapping of the error (its Kafka code, or librdkafka's local code),
    which is the cause."""
    message = f"{what} failed: {error.reason}"
    if error.error_code in FENCED_CODES or error.local_code == LOCAL_FENCED:
        out: ConnectException = ProducerFencedError(
            f"{what} failed: the producer was fenced out (a newer instance of this task, or "
            f"a round of zombie fencing, took over its transactional id): {message}"
        )
    else:
        out = ConnectException(message)
    raise out from error
