"""The distributed worker's configuration: Kafka Connect's key names and defaults.

Loaded from a ``worker.properties`` file (Java properties syntax) plus ``--set``
overrides. Unlike Kafka, which only logs unknown keys, an unknown key or an
invalid value stops the worker at start with a message naming the key (and a
close match, for typos). Client settings pass through under the ``producer.``,
``consumer.`` and ``admin.`` prefixes, and the security keys (``security.protocol``,
``ssl.*``, ``sasl.*``) apply to every client, as in Kafka.
"""

from __future__ import annotations

import difflib
import enum
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

import javaproperties

from oncelog.connect.api.config import AbstractConfig, ConfigDef, ConfigType, Importance
from oncelog.connect.api.config_validators import Range, ValidString, non_empty_string
from oncelog.connect.api.errors import ConfigException

# Keys of the distributed worker (WorkerConfig + DistributedConfig).
BOOTSTRAP_SERVERS = "bootstrap.servers"
GROUP_ID = "group.id"
CONFIG_TOPIC = "config.storage.topic"
CONFIG_REPLICATION = "config.storage.replication.factor"
OFFSET_TOPIC = "offset.storage.topic"
OFFSET_PARTITIONS = "offset.storage.partitions"
OFFSET_REPLICATION = "offset.storage.replication.factor"
STATUS_TOPIC = "status.storage.topic"
STATUS_PARTITIONS = "status.storage.partitions"
STATUS_REPLICATION = "status.storage.replication.factor"
LISTENERS = "listeners"
ACCESS_CONTROL_ALLOW_ORIGIN = "access.control.allow.origin"
REST_ADVERTISED_HOST = "rest.advertised.host.name"
REST_ADVERTISED_PORT = "rest.advertised.port"
REST_ADVERTISED_LISTENER = "rest.advertised.listener"
REST_EXTENSION_CLASSES = "rest.extension.classes"
REST_BASIC_AUTH_CREDENTIALS_FILE = "rest.basic.auth.credentials.file"
# Kafka's basic-auth REST extension: the one extension a config may name (it maps to
# REST_BASIC_AUTH_CREDENTIALS_FILE); oncelog loads no class a config names.
BASIC_AUTH_EXTENSION = (
    "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"
)
OFFSET_FLUSH_INTERVAL_MS = "offset.flush.interval.ms"
OFFSET_FLUSH_TIMEOUT_MS = "offset.flush.timeout.ms"
TASK_SHUTDOWN_TIMEOUT_MS = "task.shutdown.graceful.timeout.ms"
SCHEDULED_REBALANCE_MAX_DELAY_MS = "scheduled.rebalance.max.delay.ms"
SESSION_TIMEOUT_MS = "session.timeout.ms"
HEARTBEAT_INTERVAL_MS = "heartbeat.interval.ms"
REBALANCE_TIMEOUT_MS = "rebalance.timeout.ms"
WORKER_SYNC_TIMEOUT_MS = "worker.sync.timeout.ms"
WORKER_UNSYNC_BACKOFF_MS = "worker.unsync.backoff.ms"
CONNECT_PROTOCOL = "connect.protocol"
KEY_CONVERTER = "key.converter"
VALUE_CONVERTER = "value.converter"
HEADER_CONVERTER = "header.converter"
PLUGIN_PATH = "plugin.path"
OVERRIDE_POLICY = "connector.client.config.override.policy"
EXACTLY_ONCE_SOURCE_SUPPORT = "exactly.once.source.support"
TOPIC_CREATION_ENABLE = "topic.creation.enable"
TRANSACTIONAL_ID = "transactional.id"  # ignored with a warning (KIP-618)
TOPIC_TRACKING_ENABLE = "topic.tracking.enable"
TOPIC_TRACKING_ALLOW_RESET = "topic.tracking.allow.reset"
KEY_ALGORITHM = "inter.worker.key.generation.algorithm"
KEY_SIZE = "inter.worker.key.size"
KEY_TTL_MS = "inter.worker.key.ttl.ms"
SIGNATURE_ALGORITHM = "inter.worker.signature.algorithm"
VERIFICATION_ALGORITHMS = "inter.worker.verification.algorithms"

# Partition counts Kafka Connect creates its internal topics with (the config topic
# must have exactly one partition, so it has no setting).
CONFIG_TOPIC_PARTITIONS = 1

CLIENT_PREFIXES = ("producer.", "consumer.", "admin.")
# Free-form settings under these prefixes belong to a plugin or a client.
OPEN_PREFIXES = (
    *CLIENT_PREFIXES,
    "key.converter.",
    "value.converter.",
    "header.converter.",
    "config.providers.",
    "listeners.https.",
    "admin.listeners.https.",
    "ssl.",
    "sasl.",
    "metrics.context.",
)
# Client settings that Kafka lets the worker config set for all of its clients.
SHARED_CLIENT_KEYS = frozenset(
    {
        "security.protocol",
        "client.dns.lookup",
        "metadata.max.age.ms",
        "request.timeout.ms",
        "retry.backoff.ms",
        "retry.backoff.max.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "connections.max.idle.ms",
        "send.buffer.bytes",
        "receive.buffer.bytes",
        "socket.connection.setup.timeout.ms",
        "socket.connection.setup.timeout.max.ms",
        "client.id",
    }
)


log = logging.getLogger(__name__)


def _replication_factor(name: str, value: Any) -> None:
    if value is not None and value != -1 and value < 1:
        raise ConfigException(
            name, value, "Replication factor must be positive or -1 to use the broker's default"
        )


def _partitions(name: str, value: Any) -> None:
    if value is not None and value != -1 and value < 1:
        raise ConfigException(
            name, value, "Number of partitions must be positive, or -1 to use the broker's default"
        )


def _listeners(name: str, value: Any) -> None:
    for listener in value or []:
        parts = urlsplit(listener)
        if parts.scheme not in ("http", "https"):
            raise ConfigException(
                name, ",".join(value), f"Listener {listener} must use the http or https protocol"
            )
        try:
            parts.port  # noqa: B018 - raises on a malformed port
        except ValueError:
            raise ConfigException(
                name, ",".join(value), f"Listener {listener} has an invalid port"
            ) from None


def _rest_extensions(name: str, value: Any) -> None:
    for cls in value or []:
        if cls not in (BASIC_AUTH_EXTENSION, BASIC_AUTH_EXTENSION.rsplit(".", 1)[-1]):
            raise ConfigException(
                name,
                ",".join(value),
                f"Unknown REST extension {cls}: oncelog loads no class named in a "
                f"configuration; the one extension it knows is {BASIC_AUTH_EXTENSION} "
                f"(set {REST_BASIC_AUTH_CREDENTIALS_FILE})",
            )


def _policy(name: str, value: Any) -> None:
    if policy_name(value) is None:
        raise ConfigException(
            name, value, "Must be one of None, Principal, All (or Kafka's policy class names)"
        )


def policy_name(value: str | None) -> str | None:
    """``None`` / ``Principal`` / ``All`` for Kafka's short or full policy names."""
    if value is None:
        return None
    simple = value.rsplit(".", 1)[-1]
    for name in ("None", "Principal", "All"):
        if simple in (name, f"{name}ConnectorClientConfigOverridePolicy"):
            return name
    return None


def worker_config_def() -> ConfigDef:
    d = ConfigDef()
    common, storage, rest, group = "Common", "Internal topics", "REST", "Group membership"
    d.define(
        BOOTSTRAP_SERVERS,
        ConfigType.LIST,
        "localhost:9092",
        None,
        Importance.HIGH,
        "host:port pairs of the Kafka cluster the worker uses.",
        group=common,
    )
    d.define(
        GROUP_ID,
        ConfigType.STRING,
        validator=lambda n, v: non_empty_string(n, v),
        importance=Importance.HIGH,
        documentation="The Connect cluster this worker belongs to.",
        group=group,
    )
    d.define(
        KEY_CONVERTER,
        ConfigType.CLASS,
        importance=Importance.HIGH,
        group=common,
        documentation="Converter between Connect data and the bytes of record keys, e.g. JsonConverter.",
    )
    d.define(
        VALUE_CONVERTER,
        ConfigType.CLASS,
        importance=Importance.HIGH,
        group=common,
        documentation="Converter between Connect data and the bytes of record values.",
    )
    d.define(
        HEADER_CONVERTER,
        ConfigType.CLASS,
        "org.apache.kafka.connect.storage.SimpleHeaderConverter",
        None,
        Importance.LOW,
        "Converter for header values (headers are passed through as bytes for now).",
        group=common,
    )
    d.define(
        CONFIG_TOPIC,
        ConfigType.STRING,
        validator=lambda n, v: non_empty_string(n, v),
        importance=Importance.HIGH,
        documentation="Topic storing connector and task configurations.",
        group=storage,
    )
    d.define(
        CONFIG_REPLICATION,
        ConfigType.SHORT,
        3,
        _replication_factor,
        Importance.LOW,
        "Replication factor of the config topic (-1: broker default).",
        group=storage,
    )
    d.define(
        OFFSET_TOPIC,
        ConfigType.STRING,
        validator=lambda n, v: non_empty_string(n, v),
        importance=Importance.HIGH,
        documentation="Topic storing source connector offsets.",
        group=storage,
    )
    d.define(
        OFFSET_PARTITIONS,
        ConfigType.INT,
        25,
        _partitions,
        Importance.LOW,
        "Partitions of the offsets topic (-1: broker default).",
        group=storage,
    )
    d.define(
        OFFSET_REPLICATION,
        ConfigType.SHORT,
        3,
        _replication_factor,
        Importance.LOW,
        "Replication factor of the offsets topic (-1: broker default).",
        group=storage,
    )
    d.define(
        STATUS_TOPIC,
        ConfigType.STRING,
        validator=lambda n, v: non_empty_string(n, v),
        importance=Importance.HIGH,
        documentation="Topic storing connector and task statuses.",
        group=storage,
    )
    d.define(
        STATUS_PARTITIONS,
        ConfigType.INT,
        5,
        _partitions,
        Importance.LOW,
        "Partitions of the status topic (-1: broker default).",
        group=storage,
    )
    d.define(
        STATUS_REPLICATION,
        ConfigType.SHORT,
        3,
        _replication_factor,
        Importance.LOW,
        "Replication factor of the status topic (-1: broker default).",
        group=storage,
    )
    d.define(
        TOPIC_TRACKING_ENABLE,
        ConfigType.BOOLEAN,
        True,
        None,
        Importance.LOW,
        "Record the topics each connector uses in the status topic (KIP-558).",
        group=common,
    )
    d.define(
        TOPIC_TRACKING_ALLOW_RESET,
        ConfigType.BOOLEAN,
        True,
        None,
        Importance.LOW,
        "Allow PUT /connectors/{c}/topics/reset (KIP-558).",
        group=common,
    )
    d.define(
        TOPIC_CREATION_ENABLE,
        ConfigType.BOOLEAN,
        True,
        None,
        Importance.LOW,
        "Whether source connectors may create their topics (KIP-158).",
        group=common,
    )
    d.define(
        LISTENERS,
        ConfigType.LIST,
        ["http://127.0.0.1:8083"],
        _listeners,
        Importance.LOW,
        "REST listeners. The default binds loopback only; an empty host (http://:8083) "
        "binds every interface.",
        group=rest,
    )
    d.define(
        REST_ADVERTISED_HOST,
        ConfigType.STRING,
        None,
        None,
        Importance.LOW,
        "Host name other workers use to reach this one.",
        group=rest,
    )
    d.define(
        REST_ADVERTISED_PORT,
        ConfigType.INT,
        None,
        None,
        Importance.LOW,
        "Port other workers use to reach this one.",
        group=rest,
    )
    d.define(
        REST_ADVERTISED_LISTENER,
        ConfigType.STRING,
        None,
        ValidString("http", "https", case_sensitive=False),
        Importance.LOW,
        "Protocol advertised to other workers.",
        group=rest,
    )
    d.define(
        ACCESS_CONTROL_ALLOW_ORIGIN,
        ConfigType.STRING,
        "",
        None,
        Importance.LOW,
        "CORS origins.",
        group=rest,
    )
    d.define(
        "access.control.allow.methods",
        ConfigType.STRING,
        "",
        None,
        Importance.LOW,
        "CORS methods.",
        group=rest,
    )
    d.define(
        "admin.listeners",
        ConfigType.LIST,
        None,
        None,
        Importance.LOW,
        "Admin REST listeners.",
        group=rest,
    )
    d.define(
        REST_EXTENSION_CLASSES,
        ConfigType.LIST,
        [],
        _rest_extensions,
        Importance.LOW,
        "REST extensions: only Kafka's BasicAuthSecurityRestExtension, which needs "
        f"{REST_BASIC_AUTH_CREDENTIALS_FILE}.",
        group=rest,
    )
    d.define(
        REST_BASIC_AUTH_CREDENTIALS_FILE,
        ConfigType.STRING,
        None,
        None,
        Importance.MEDIUM,
        "A Java properties file of user=password lines. When set, every REST request "
        "but the internal ones (signed under connect.protocol=sessioned) needs HTTP basic "
        "authentication as one of these users (Kafka's BasicAuthSecurityRestExtension with "
        "the PropertyFileLoginModule file option).",
        group=rest,
    )
    d.define(
        "response.http.headers.config",
        ConfigType.STRING,
        "",
        None,
        Importance.LOW,
        "Extra HTTP headers.",
        group=rest,
    )
    d.define(
        OFFSET_FLUSH_INTERVAL_MS,
        ConfigType.LONG,
        60000,
        Range.at_least(0),
        Importance.LOW,
        "How often source offsets are committed.",
        group=common,
    )
    d.define(
        OFFSET_FLUSH_TIMEOUT_MS,
        ConfigType.LONG,
        5000,
        Range.at_least(0),
        Importance.LOW,
        "How long an offset commit waits for outstanding records before it is cancelled.",
        group=common,
    )
    d.define(
        TASK_SHUTDOWN_TIMEOUT_MS,
        ConfigType.LONG,
        5000,
        Range.at_least(0),
        Importance.LOW,
        "How long a task is given to stop before it is abandoned.",
        group=common,
    )
    d.define(
        SESSION_TIMEOUT_MS,
        ConfigType.INT,
        10000,
        Range.at_least(1),
        Importance.HIGH,
        "Group session timeout.",
        group=group,
    )
    d.define(
        HEARTBEAT_INTERVAL_MS,
        ConfigType.INT,
        3000,
        Range.at_least(1),
        Importance.HIGH,
        "Heartbeat interval.",
        group=group,
    )
    d.define(
        REBALANCE_TIMEOUT_MS,
        ConfigType.INT,
        60000,
        Range.at_least(1),
        Importance.HIGH,
        "How long a member may take to rejoin during a rebalance.",
        group=group,
    )
    d.define(
        WORKER_SYNC_TIMEOUT_MS,
        ConfigType.INT,
        3000,
        Range.at_least(0),
        Importance.MEDIUM,
        "How long to wait to catch up with the config topic before leaving the group.",
        group=group,
    )
    d.define(
        WORKER_UNSYNC_BACKOFF_MS,
        ConfigType.INT,
        300000,
        Range.at_least(0),
        Importance.MEDIUM,
        "Back-off before rejoining after failing to catch up.",
        group=group,
    )
    d.define(
        SCHEDULED_REBALANCE_MAX_DELAY_MS,
        ConfigType.INT,
        300000,
        Range.at_least(0),
        Importance.LOW,
        "How long the leader keeps a departed worker's work unassigned, waiting for it to return.",
        group=group,
    )
    d.define(
        CONNECT_PROTOCOL,
        ConfigType.STRING,
        "sessioned",
        ValidString("eager", "compatible", "sessioned"),
        Importance.LOW,
        "Group sub-protocol: eager, compatible or sessioned (incremental cooperative).",
        group=group,
    )
    d.define(
        KEY_ALGORITHM,
        ConfigType.STRING,
        "HmacSHA256",
        ValidString("HmacSHA256", "HmacSHA384", "HmacSHA512"),
        Importance.LOW,
        "Session key algorithm.",
        group=group,
    )
    d.define(
        KEY_SIZE,
        ConfigType.INT,
        None,
        None,
        Importance.LOW,
        "Session key size in bits.",
        group=group,
    )
    d.define(
        KEY_TTL_MS,
        ConfigType.INT,
        3600000,
        Range.between(0, 2**31 - 1),
        Importance.LOW,
        "Session key lifetime.",
        group=group,
    )
    d.define(
        SIGNATURE_ALGORITHM,
        ConfigType.STRING,
        "HmacSHA256",
        ValidString("HmacSHA256", "HmacSHA384", "HmacSHA512"),
        Importance.LOW,
        "Request signing algorithm.",
        group=group,
    )
    d.define(
        VERIFICATION_ALGORITHMS,
        ConfigType.LIST,
        ["HmacSHA256"],
        None,
        Importance.LOW,
        "Accepted request signing algorithms.",
        group=group,
    )
    d.define(
        PLUGIN_PATH,
        ConfigType.LIST,
        None,
        None,
        Importance.LOW,
        "Python modules, .py files or directories of modules holding plugins.",
        group=common,
    )
    d.define(
        "plugin.discovery",
        ConfigType.STRING,
        "hybrid_warn",
        ValidString(
            "only_scan", "hybrid_warn", "hybrid_fail", "service_load", case_sensitive=False
        ),
        Importance.LOW,
        "Accepted for compatibility; Python plugins are always scanned.",
        group=common,
    )
    d.define(
        "config.providers",
        ConfigType.LIST,
        [],
        None,
        Importance.LOW,
        "Config providers.",
        group=common,
    )
    d.define(
        OVERRIDE_POLICY,
        ConfigType.STRING,
        "All",
        _policy,
        Importance.MEDIUM,
        "Which client settings connectors may override: None, Principal or All.",
        group=common,
    )
    d.define(
        EXACTLY_ONCE_SOURCE_SUPPORT,
        ConfigType.STRING,
        "disabled",
        ValidString("disabled", "preparing", "enabled", case_sensitive=False),
        Importance.HIGH,
        "Whether to enable exactly-once support for source connectors in the cluster by "
        "writing source records and their offsets in a Kafka transaction, and by proactively "
        "fencing out old task generations before bringing up new ones. Permitted values are "
        '"disabled", "preparing", and "enabled". To enable it safely, first roll every worker '
        'to "preparing", then to "enabled". Distributed mode only.',
        group=common,
    )
    d.define(
        "metrics.sample.window.ms",
        ConfigType.LONG,
        30000,
        Range.at_least(0),
        Importance.LOW,
        "Metrics window.",
    )
    d.define(
        "metrics.num.samples",
        ConfigType.INT,
        2,
        Range.at_least(1),
        Importance.LOW,
        "Metrics samples.",
    )
    d.define(
        "metrics.recording.level",
        ConfigType.STRING,
        "INFO",
        ValidString("INFO", "DEBUG"),
        Importance.LOW,
        "Metrics level.",
    )
    d.define("metric.reporters", ConfigType.LIST, [], None, Importance.LOW, "Metric reporters.")
    d.define(
        "auto.include.jmx.reporter",
        ConfigType.BOOLEAN,
        True,
        None,
        Importance.LOW,
        "Ignored (no JMX).",
    )
    for key in sorted(SHARED_CLIENT_KEYS):
        d.define(
            key,
            ConfigType.STRING,
            None,
            None,
            Importance.LOW,
            "Applied to every client of the worker.",
            group="Clients",
        )
    return d  # fmt: skip


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """The worker settings the runtime reads, typed, built once from a validated
    :class:`WorkerConfig` (the definitions stay in :func:`worker_config_def`)."""

    group_id: str
    connect_protocol: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    heartbeat_interval_ms: int
    worker_sync_timeout_ms: int
    worker_unsync_backoff_ms: int
    scheduled_rebalance_max_delay_ms: int
    offset_flush_interval_ms: int
    offset_flush_timeout_ms: int
    task_shutdown_timeout_ms: int
    topic_tracking_enable: bool
    topic_tracking_allow_reset: bool
    exactly_once_source_support: str
    access_control_allow_origin: str
    rest_advertised_host: str | None
    rest_advertised_port: int | None
    rest_advertised_listener: str | None
    rest_basic_auth_credentials_file: str | None
    key_generation_algorithm: str
    key_size: int | None
    key_ttl_ms: int
    signature_algorithm: str
    verification_algorithms: tuple[str, ...]

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> WorkerSettings:
        """From the parsed values of :func:`worker_config_def`."""
        return cls(
            group_id=str(values[GROUP_ID]),
            connect_protocol=str(values[CONNECT_PROTOCOL]),
            session_timeout_ms=values[SESSION_TIMEOUT_MS],
            rebalance_timeout_ms=values[REBALANCE_TIMEOUT_MS],
            heartbeat_interval_ms=values[HEARTBEAT_INTERVAL_MS],
            worker_sync_timeout_ms=values[WORKER_SYNC_TIMEOUT_MS],
            worker_unsync_backoff_ms=values[WORKER_UNSYNC_BACKOFF_MS],
            scheduled_rebalance_max_delay_ms=values[SCHEDULED_REBALANCE_MAX_DELAY_MS],
            offset_flush_interval_ms=values[OFFSET_FLUSH_INTERVAL_MS],
            offset_flush_timeout_ms=values[OFFSET_FLUSH_TIMEOUT_MS],
            task_shutdown_timeout_ms=values[TASK_SHUTDOWN_TIMEOUT_MS],
            topic_tracking_enable=bool(values[TOPIC_TRACKING_ENABLE]),
            topic_tracking_allow_reset=bool(values[TOPIC_TRACKING_ALLOW_RESET]),
            exactly_once_source_support=str(values[EXACTLY_ONCE_SOURCE_SUPPORT]),
            access_control_allow_origin=str(values[ACCESS_CONTROL_ALLOW_ORIGIN] or ""),
            rest_advertised_host=values[REST_ADVERTISED_HOST],
            rest_advertised_port=values[REST_ADVERTISED_PORT],
            rest_advertised_listener=values[REST_ADVERTISED_LISTENER],
            rest_basic_auth_credentials_file=values[REST_BASIC_AUTH_CREDENTIALS_FILE],
            key_generation_algorithm=str(values[KEY_ALGORITHM]),
            key_size=values[KEY_SIZE],
            key_ttl_ms=values[KEY_TTL_MS],
            signature_algorithm=str(values[SIGNATURE_ALGORITHM]),
            verification_algorithms=tuple(values[VERIFICATION_ALGORITHMS] or ()),
        )


class WorkerConfig(AbstractConfig):
    """A validated worker configuration; ``settings`` is its typed view."""

    def __init__(self, props: Mapping[str, str]) -> None:
        definition = worker_config_def()
        if TRANSACTIONAL_ID in props:
            # KIP-618: the leader's config-topic producer always uses
            # connect-cluster-${group.id}; a user value is ignored with a warning.
            log.warning(
                "The worker's %s (%r) is ignored: the leader writes the config topic with "
                "the transactional id connect-cluster-<group.id>",
                TRANSACTIONAL_ID,
                props[TRANSACTIONAL_ID],
            )
            props = {k: v for k, v in props.items() if k != TRANSACTIONAL_ID}
        check_known_keys(props, definition)
        super().__init__(definition, props)
        if self.get_list(REST_EXTENSION_CLASSES) and not self.get(REST_BASIC_AUTH_CREDENTIALS_FILE):
            raise ConfigException(
                REST_EXTENSION_CLASSES,
                ",".join(self.get_list(REST_EXTENSION_CLASSES)),
                f"BasicAuthSecurityRestExtension needs {REST_BASIC_AUTH_CREDENTIALS_FILE}, the "
                "file its PropertyFileLoginModule reads in Kafka's JAAS configuration",
            )
        self.settings = WorkerSettings.of(self.values)

    @classmethod
    def load(cls, path: str | Path | None, overrides: Iterable[str] = ()) -> Self:
        """Read ``path`` (Java properties) and apply ``key=value`` overrides (``--set``)."""
        props: dict[str, str] = {}
        if path is not None:
            props.update(read_properties(path))
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigException(f"--set expects key=value, got '{item}'")
            props[key.strip()] = value
        return cls(props)

    @property
    def group_id(self) -> str:
        return str(self.get(GROUP_ID))

    def plugin_path(self) -> list[str]:
        return self.get_list(PLUGIN_PATH)

    def listener_urls(self) -> list[str]:
        return self.get_list(LISTENERS)

    def internal_topics(self) -> dict[str, tuple[str, int, int]]:
        """name -> (topic, partitions, replication factor) of the config, offsets and status topics."""
        return {
            "config": (
                str(self.get(CONFIG_TOPIC)),
                CONFIG_TOPIC_PARTITIONS,
                self.get_int(CONFIG_REPLICATION),
            ),
            "offsets": (
                str(self.get(OFFSET_TOPIC)),
                self.get_int(OFFSET_PARTITIONS),
                self.get_int(OFFSET_REPLICATION),
            ),
            "status": (
                str(self.get(STATUS_TOPIC)),
                self.get_int(STATUS_PARTITIONS),
                self.get_int(STATUS_REPLICATION),
            ),
        }

    def shared_client_config(self) -> dict[str, str]:
        """Settings every client of the worker gets: bootstrap servers and security."""
        out = {BOOTSTRAP_SERVERS: ",".join(self.get_list(BOOTSTRAP_SERVERS))}
        for key, value in self.originals.items():
            if key in SHARED_CLIENT_KEYS or key.startswith(("ssl.", "sasl.")):
                out[key] = str(value)
        return out

    def exactly_once_source_enabled(self) -> bool:
        return exactly_once_source_support(self).enabled

    def override_policy(self) -> str:
        name = policy_name(self.get_str(OVERRIDE_POLICY))
        assert name is not None
        return name


def check_known_keys(props: Mapping[str, Any], definition: ConfigDef) -> None:
    names = definition.names()
    for key in props:
        if key in definition or key.startswith(OPEN_PREFIXES):
            continue
        close = difflib.get_close_matches(key, names, n=1)
        hint = f' (did you mean "{close[0]}"?)' if close else ""
        raise ConfigException(f'Unknown worker configuration "{key}"{hint}')
    # A prefix with nothing after it is always a mistake (e.g. "producer.=x").
    for key in props:
        for prefix in CLIENT_PREFIXES:
            if key == prefix:
                raise ConfigException(
                    key, props[key], "A client setting needs a name after the prefix"
                )


def read_properties(path: str | Path) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as fh:
            return dict(javaproperties.load(fh))
    except FileNotFoundError:
        raise ConfigException(f"Worker configuration file {path} does not exist") from None


class ExactlyOnceSourceSupport(enum.Enum):
    DISABLED = "disabled"
    PREPARING = "preparing"
    ENABLED = "enabled"

    @property
    def transactional_leader(self) -> bool:
        """The leader writes the config topic transactionally from ``preparing`` on, so
        that during the rolling upgrade no zombie leader can write either."""
        return self is not ExactlyOnceSourceSupport.DISABLED

    @property
    def enabled(self) -> bool:
        return self is ExactlyOnceSourceSupport.ENABLED


def exactly_once_source_support(config: WorkerConfig) -> ExactlyOnceSourceSupport:
    """The worker's ``exactly.once.source.support`` (validated by the worker config)."""
    return ExactlyOnceSourceSupport(str(config.get(EXACTLY_ONCE_SOURCE_SUPPORT)).lower())
