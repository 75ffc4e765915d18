"""Dynamic broker configs, as Kafka's ``DynamicBrokerConfig``.

AlterConfigs / IncrementalAlterConfigs on the BROKER resource set them at run time: per
broker (resource name ``"0"``, the broker id) or as the cluster-wide default (resource
name ``""``). They live in ``<data-dir>/meta/dynamic_broker_configs.json`` (replaced
atomically), are read at start before any log is opened, and take precedence as in
Kafka: DYNAMIC_BROKER_CONFIG over DYNAMIC_DEFAULT_BROKER_CONFIG over STATIC_BROKER_CONFIG
(the file and ``--set``) over DEFAULT_CONFIG.

Only the settings Kafka marks dynamic *and* oncelog applies without a restart are
accepted (``DYNAMIC``); ``Broker.reconfigure`` applies each group. Everything else gets
Kafka's "Cannot update these configs dynamically" (a listener or SSL setting, for
instance, which Kafka reconfigures but oncelog reads only at start).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from oncelog.broker.config import BrokerConfig, BrokerConfigError, schema_default
from oncelog.broker.connection_quotas import CreationRates
from oncelog.broker.settings import BrokerSettings
from oncelog.storage.config import ConfigError, LogConfig
from oncelog.storage.fsutil import atomic_write

log = logging.getLogger(__name__)

# Kafka's DynamicLogConfig.ReconfigurableConfigs (the first broker synonym of each topic
# config, ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS) that oncelog's schema has. Not
# log.retention.hours/minutes nor log.roll.hours: Kafka refuses those at run time too.
LOG_CONFIGS = frozenset(
    {
        "log.segment.bytes",
        "log.roll.ms",
        "log.index.size.max.bytes",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.retention.bytes",
        "log.retention.ms",
        "message.max.bytes",
        "log.index.interval.bytes",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms",
        "log.segment.delete.delay.ms",
        "log.cleaner.min.cleanable.ratio",
        "log.cleanup.policy",
        "min.insync.replicas",
        "log.message.timestamp.type",
    }
)
# Kafka's LogCleaner.ReconfigurableConfigs: the cleaner threads restart with them.
CLEANER_CONFIGS = frozenset(
    {
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "message.max.bytes",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.backoff.ms",
    }
)
# Kafka's SocketServer.ReconfigurableConfigs: connection limits, read per connection.
SOCKET_CONFIGS = frozenset(
    {
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "max.connections",
        "max.connection.creation.rate",
    }
)
# Kafka's DynamicThreadPool.ReconfigurableConfigs (num.replica.fetchers aside: a cluster
# setting here) and num.network.threads (DataPlaneAcceptor): Java thread pools, accepted
# statically with no meaning for one asyncio process, and so dynamically.
THREAD_POOL_CONFIGS = frozenset(
    {
        "num.io.threads",
        "num.recovery.threads.per.data.dir",
        "background.threads",
        "num.network.threads",
    }
)
# Kafka's DynamicProducerStateManagerConfig (transaction.partition.verification.enable is
# always on here).
PRODUCER_STATE_CONFIGS = frozenset({"producer.id.expiration.ms"})
# Kafka's DynamicListenerConfig Kerberos settings: per broker. GSSAPI is not offered (a
# listener enabling it fails to start), so, as on a Kafka broker without GSSAPI, they tune
# nothing; accepted so that admin tools setting them succeed.
KERBEROS_CONFIGS = frozenset(
    {
        "sasl.kerberos.service.name",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.principal.to.local.rules",
    }
)
DYNAMIC = (
    LOG_CONFIGS
    | CLEANER_CONFIGS
    | SOCKET_CONFIGS
    | THREAD_POOL_CONFIGS
    | PRODUCER_STATE_CONFIGS
    | KERBEROS_CONFIGS
)
# Kafka's DynamicBrokerConfig.PerBrokerConfigs (listener settings but the cluster-level
# max.connections, max.connection.creation.rate and num.network.threads).
PER_BROKER = KERBEROS_CONFIGS
# listener.name.<l>.<key>: the listener overrides oncelog applies at run time (Kafka's
# SocketServer.ListenerReconfigurableConfigs, max.connections aside: oncelog has no
# per-listener connection limit).
LISTENER_DYNAMIC = frozenset({"max.connection.creation.rate"})
_LISTENER_CONFIG = re.compile(r"listener\.name\.([^.]*)\.(.*)")
# Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: dynamic only under a listener prefix.
SSL_RECONFIGURABLE = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.truststore.certificates",
    }
)
# Kafka's brokerConfigSynonyms: names for one setting, highest precedence first.
SYNONYMS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(
        ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
        ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ),
    **dict.fromkeys(("log.roll.ms", "log.roll.hours"), ("log.roll.ms", "log.roll.hours")),
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
}
# Kafka's ServerTopicConfigSynonyms.ALL_TOPIC_CONFIG_SYNONYMS, for the topic configs
# oncelog seeds from broker configs: a topic without its own value shows the source of
# the broker setting it follows.
TOPIC_SYNONYMS: dict[str, tuple[str, ...]] = {
    "segment.bytes": ("log.segment.bytes",),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "segment.index.bytes": ("log.index.size.max.bytes",),
    "flush.messages": ("log.flush.interval.messages",),
    "flush.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    "retention.bytes": ("log.retention.bytes",),
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "max.message.bytes": ("message.max.bytes",),
    "index.interval.bytes": ("log.index.interval.bytes",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms",),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms",),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio",),
    "cleanup.policy": ("log.cleanup.policy",),
    "min.insync.replicas": ("min.insync.replicas",),
    "message.timestamp.type": ("log.message.timestamp.type",),
}
# oncelog's "not set" sentinels for settings whose Kafka default is null (no DEFAULT_CONFIG
# synonym is listed for them).
_UNSET: dict[str, object] = {"log.retention.ms": -2, "log.retention.minutes": -2, "log.roll.ms": -1}
# Kafka's LIST-typed broker configs: IncrementalAlterConfigs may APPEND/SUBTRACT them.
LIST_CONFIGS = frozenset({"log.cleanup.policy"})

SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5


class DynamicConfigError(Exception):
    """A refused change: Kafka answers INVALID_REQUEST with this message
    (ConfigAdminManager.validateBrokerConfigChange)."""


def scala_set(names: Iterable[str]) -> str:
    """A name set as Kafka's messages print it (Scala's ``Set.toString``)."""
    items = sorted(names)
    return f"{'Set' if len(items) <= 4 else 'HashSet'}({', '.join(items)})"


def _dynamic(name: str, listeners: frozenset[str]) -> bool:
    m = _LISTENER_CONFIG.fullmatch(name)
    if m is not None:
        return m.group(1) in listeners and m.group(2) in LISTENER_DYNAMIC
    return name in DYNAMIC


def _thread_count_problem(name: str, old: int, new: int) -> str | None:
    """Kafka's DynamicThreadPool.validateReconfiguration."""
    if new == old:
        return None
    msg = f"Dynamic thread count update validation failed for {name}={new}"
    if new <= 0:
        return f"{msg}, value should be at least 1"
    if new < old / 2:
        return f"{msg}, value should be at least half the current value {old}"
    if new > old * 2:
        return f"{msg}, value should not be greater than double the current value {old}"
    return None


@dataclass
class DynamicBrokerConfigs:
    """The two dynamic layers over a snapshot of the static config."""

    path: Path
    static: BrokerConfig
    listeners: frozenset[str]  # lower-case listener names, for listener.name.<l>.*
    per_broker: dict[str, str] = field(default_factory=dict)
    default: dict[str, str] = field(default_factory=dict)

    @classmethod
    def over(cls, config: BrokerConfig, listeners: Iterable[str]) -> DynamicBrokerConfigs:
        static = BrokerConfig(dict(config.values), set(config.explicit), dict(config.ignored))
        return cls(
            config.data_dir / "meta" / "dynamic_broker_configs.json",
            static,
            frozenset(name.lower() for name in listeners),
        )

    # -- persistence -----------------------------------------------------------------------
    def load(self) -> None:
        """Read the file; entries no longer valid are dropped with an error, as Kafka's
        ``fromPersistentProps`` drops non-dynamic or invalid stored configs."""
        if not self.path.exists():
            return
        doc = json.loads(self.path.read_text())
        for per_broker, key in ((False, "default"), (True, "broker")):
            layer = {str(k): str(v) for k, v in dict(doc.get(key, {})).items()}
            kept = {}
            for name, value in layer.items():
                try:
                    self._validate({name: value}, per_broker)
                    kept[name] = value
                except DynamicConfigError as exc:
                    log.error("ignoring stored dynamic broker config %s: %s", name, exc)
            self.layer(per_broker).update(kept)

    def data(self) -> bytes:
        doc = {"version": 1, "broker": self.per_broker, "default": self.default}
        return json.dumps(doc, indent=1, sort_keys=True).encode()

    def save(self, data: bytes) -> None:
        # 0600: Kafka keeps password-typed configs here too (oncelog refuses them today).
        atomic_write(self.path, data, mode=0o600)

    # -- layers ----------------------------------------------------------------------------
    def layer(self, per_broker: bool) -> dict[str, str]:
        return self.per_broker if per_broker else self.default

    def effective(
        self, per_broker: Mapping[str, str] | None = None, default: Mapping[str, str] | None = None
    ) -> BrokerConfig:
        """The static config with the default layer, then the per-broker layer, over it."""
        cfg = BrokerConfig(dict(self.static.values), set(self.static.explicit), self.static.ignored)
        for layer in (
            self.default if default is None else default,
            self.per_broker if per_broker is None else per_broker,
        ):
            for name, value in layer.items():
                cfg.set(name, value)
        cfg.explicit = set(self.static.explicit)  # sources come from ``source``
        return cfg

    def may_alter(self, name: str) -> bool:
        """Whether ``name`` may be set at run time (else DescribeConfigs: read-only)."""
        return _dynamic(name, self.listeners)

    def source(self, name: str) -> int:
        if name in self.per_broker:
            return SOURCE_DYNAMIC_BROKER
        if name in self.default:
            return SOURCE_DYNAMIC_DEFAULT_BROKER
        return SOURCE_STATIC_BROKER if name in self.static.explicit else SOURCE_DEFAULT

    def synonyms(self, name: str) -> list[tuple[str, str, int]]:
        """(name, value, source) of every definition of ``name`` and its synonyms, in
        Kafka's order of precedence (DynamicBrokerConfig / ConfigHelper)."""
        out = []
        for syn in SYNONYMS.get(name, (name,)):
            if syn in self.per_broker:
                out.append((syn, self.per_broker[syn], SOURCE_DYNAMIC_BROKER))
            if syn in self.default:
                out.append((syn, self.default[syn], SOURCE_DYNAMIC_DEFAULT_BROKER))
            if syn in self.static.explicit:
                out.append((syn, _text(self.static.values[syn]), SOURCE_STATIC_BROKER))
            if syn in self.static.values:
                default = schema_default(syn)
                if default is not None and _UNSET.get(syn) != default:
                    out.append((syn, _text(default), SOURCE_DEFAULT))
        return out

    def topic_default_source(self, topic_config: str) -> int | None:
        """The dynamic source of a topic config seeded from a broker setting, if any."""
        for syn in TOPIC_SYNONYMS.get(topic_config, ()):
            if syn in self.per_broker:
                return SOURCE_DYNAMIC_BROKER
            if syn in self.default:
                return SOURCE_DYNAMIC_DEFAULT_BROKER
        return None

    # -- a change --------------------------------------------------------------------------
    def check(
        self,
        props: Mapping[str, str],
        per_broker: bool,
        current: BrokerConfig,
        topic_overrides: Iterable[Mapping[str, str]] = (),
    ) -> BrokerConfig:
        """Validate ``props`` as the new layer; the effective config it would give.
        Raises DynamicConfigError with Kafka's message."""
        self._validate(props, per_broker)
        new = self.effective(per_broker=props) if per_broker else self.effective(default=props)
        # Kafka's processReconfiguration: each reconfigurable validates the new config;
        # a failure is wrapped as ConfigException("Invalid dynamic configuration", e).
        problem = self._reconfiguration_problem(current, new, topic_overrides)
        if problem is not None:
            raise DynamicConfigError(
                "Invalid value org.apache.kafka.common.config.ConfigException: "
                f"{problem} for configuration Invalid dynamic configuration"
            )
        return new

    def _validate(self, props: Mapping[str, str], per_broker: bool) -> None:
        """Kafka's DynamicBrokerConfig.validateConfigs, in its order."""
        names = set(props)
        non_dynamic = {n for n in names if not _dynamic(n, self.listeners)}
        unprefixed_ssl = non_dynamic & SSL_RECONFIGURABLE
        if non_dynamic - unprefixed_ssl:
            raise DynamicConfigError(
                f"Cannot update these configs dynamically: {scala_set(non_dynamic - unprefixed_ssl)}"
            )
        if unprefixed_ssl:
            raise DynamicConfigError(
                "These security configs can be dynamically updated only per-listener using "
                f"the listener prefix: {scala_set(unprefixed_ssl)}"
            )
        # validateConfigTypes: each value through the static config's parser and validator
        probe = BrokerConfig(dict(self.static.values))
        for name, value in props.items():
            try:
                probe.set(name, value)
            except BrokerConfigError as exc:
                raise DynamicConfigError(str(exc)) from exc
        if not per_broker and names & PER_BROKER:
            raise DynamicConfigError(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {scala_set(names & PER_BROKER)}"
            )

    def _reconfiguration_problem(
        self, current: BrokerConfig, new: BrokerConfig, topic_overrides: Iterable[Mapping[str, str]]
    ) -> str | None:
        now, then = _thread_counts(current.settings), _thread_counts(new.settings)
        for name in sorted(THREAD_POOL_CONFIGS):
            problem = _thread_count_problem(name, now[name], then[name])
            if problem:
                return problem
        try:
            CreationRates.from_config(new, self.listeners)
        except BrokerConfigError as exc:
            return str(exc)
        defaults = new.topic_defaults()
        try:  # Kafka's DynamicLogConfig: every log's config is rebuilt from the defaults
            LogConfig.from_props(defaults)
            for overrides in topic_overrides:
                LogConfig.from_props({**defaults, **overrides})
        except ConfigError as exc:
            return str(exc)
        return None


def _thread_counts(s: BrokerSettings) -> dict[str, int]:
    """The THREAD_POOL_CONFIGS' values."""
    return {
        "num.io.threads": s.num_io_threads,
        "num.recovery.threads.per.data.dir": s.num_recovery_threads_per_data_dir,
        "background.threads": s.background_threads,
        "num.network.threads": s.num_network_threads,
    }


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
