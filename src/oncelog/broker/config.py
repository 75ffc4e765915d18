"""Broker configuration with Kafka's names and defaults.

Sources, lowest precedence first: defaults, a Java-style properties file,
``--set key=value`` overrides, then the dedicated CLI flags.

A stock Kafka ``server.properties`` starts the broker: the settings of a multi-node KRaft
cluster (``process.roles``, ``controller.*``, ...) are accepted and ignored, all named in one
warning; unknown keys and out-of-range values are rejected, all of them in one error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from oncelog.broker.log_cleaner import CLEANER_CONFIGS, cleaner_topic_defaults
from oncelog.coordinator.settings import parse_bool, property_defaults
from oncelog.group.config import GroupConfig, parse_load_failures
from oncelog.txn.config import TxnConfig

LONG_MAX = 2**63 - 1


class BrokerConfigError(ValueError):
    pass


# name -> (parser, default). Only settings the broker acts on, plus a few
# accepted for compatibility with existing server.properties files.
_SCHEMA: dict[str, tuple[object, object]] = {
    "broker.id": (int, 0),
    "listeners": (str, "PLAINTEXT://127.0.0.1:9092"),
    "advertised.listeners": (str, ""),
    "log.dirs": (str, "/tmp/oncelog-data"),
    "log.dir": (str, ""),
    "num.partitions": (int, 1),
    "default.replication.factor": (int, 1),
    "auto.create.topics.enable": (parse_bool, True),
    "delete.topic.enable": (parse_bool, True),
    "socket.request.max.bytes": (int, 104857600),
    "queued.max.requests": (int, 500),
    "queued.max.request.bytes": (int, -1),
    # oncelog's own: the most partitions one broker holds (each keeps ~4 files open)
    "oncelog.max.partitions": (int, 4000),
    "message.max.bytes": (int, 1048588),
    "log.segment.bytes": (int, 1073741824),
    "log.roll.ms": (int, -1),
    "log.roll.hours": (int, 168),
    "log.index.size.max.bytes": (int, 10485760),
    "log.index.interval.bytes": (int, 4096),
    "log.retention.ms": (int, -2),
    "log.retention.minutes": (int, -2),
    "log.retention.hours": (int, 168),
    "log.retention.bytes": (int, -1),
    "log.retention.check.interval.ms": (int, 300000),
    # How long a segment removed by retention or replaced by the cleaner stays on disk
    # (as *.deleted) for reads already under way: the topic's file.delete.delay.ms.
    "log.segment.delete.delay.ms": (int, 60000),
    "log.flush.interval.messages": (int, LONG_MAX),
    "log.flush.interval.ms": (int, -1),
    "log.flush.scheduler.interval.ms": (int, 1000),
    "log.message.timestamp.type": (str, "CreateTime"),
    "log.cleanup.policy": (str, "delete"),
    "producer.id.expiration.ms": (int, 86400000),
    "producer.id.expiration.check.interval.ms": (int, 600000),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (int, 3600000),
    "fetch.max.bytes": (int, 57671680),
    "max.incremental.fetch.session.cache.slots": (int, 1000),
    # DescribeTopicPartitions (KIP-966): most partitions one response carries.
    "max.request.partition.size.limit": (int, 2000),
    "cluster.id": (str, "oncelog-cluster-0000000"),
    # Java thread pools and socket buffers: accepted, no meaning for one asyncio process.
    "num.network.threads": (int, 3),
    "num.io.threads": (int, 8),
    "num.recovery.threads.per.data.dir": (int, 2),
    "background.threads": (int, 10),
    "socket.send.buffer.bytes": (int, 102400),
    "socket.receive.buffer.bytes": (int, 102400),
    "offsets.topic.replication.factor": (int, 1),
    "transaction.state.log.replication.factor": (int, 1),
    "transaction.state.log.min.isr": (int, 1),
    "min.insync.replicas": (int, 1),
    # -- security: listeners, TLS, SASL, authorization (Kafka's names) --------
    "listener.security.protocol.map": (
        str,
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
    ),
    "ssl.keystore.type": (str, "PEM"),
    "ssl.keystore.location": (str, ""),
    "ssl.keystore.password": (str, ""),
    "ssl.keystore.certificate.chain": (str, ""),
    "ssl.keystore.key": (str, ""),
    "ssl.key.password": (str, ""),
    "ssl.truststore.type": (str, "PEM"),
    "ssl.truststore.location": (str, ""),
    "ssl.truststore.password": (str, ""),
    "ssl.truststore.certificates": (str, ""),
    "ssl.client.auth": (str, "none"),
    "ssl.principal.mapping.rules": (str, "DEFAULT"),
    "ssl.enabled.protocols": (str, "TLSv1.2,TLSv1.3"),
    "ssl.cipher.suites": (str, ""),
    "ssl.endpoint.identification.algorithm": (str, "https"),
    "sasl.enabled.mechanisms": (str, "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"),
    "sasl.jaas.config": (str, ""),
    "sasl.server.max.receive.size": (int, 524288),
    # Kafka's GSSAPI (Kerberos) settings: accepted, tuning nothing, as on a Kafka broker
    # without GSSAPI (oncelog offers PLAIN and SCRAM only).
    "sasl.kerberos.service.name": (str, ""),
    "sasl.kerberos.kinit.cmd": (str, "/usr/bin/kinit"),
    "sasl.kerberos.ticket.renew.window.factor": (float, 0.8),
    "sasl.kerberos.ticket.renew.jitter": (float, 0.05),
    "sasl.kerberos.min.time.before.relogin": (int, 60000),
    "sasl.kerberos.principal.to.local.rules": (str, "DEFAULT"),
    "connections.max.reauth.ms": (int, 0),
    "connection.failed.authentication.delay.ms": (int, 100),
    # Kafka's connection limits and idle expiry (broker.connection_quotas).
    "connections.max.idle.ms": (int, 600000),
    "max.connections": (int, 2**31 - 1),
    "max.connections.per.ip": (int, 2**31 - 1),
    "max.connections.per.ip.overrides": (str, ""),
    "max.connection.creation.rate": (int, 2**31 - 1),
    # The sensor window of max.connection.creation.rate (Kafka's QuotaConfig; oncelog has
    # no client quotas, so here they shape only the connection rate).
    "quota.window.num": (int, 11),
    "quota.window.size.seconds": (int, 1),
    "authorizer.class.name": (str, ""),
    "super.users": (str, ""),
    "allow.everyone.if.no.acl.found": (parse_bool, False),
    **CLEANER_CONFIGS,
    # Kafka's other coordinator-log settings, accepted so server.properties files work; a
    # single node loads its logs whole and appends with acks=all semantics anyway.
    "offsets.load.buffer.size": (int, 5242880),
    "offsets.commit.timeout.ms": (int, 5000),
    "offsets.commit.required.acks": (int, -1),
    "offsets.topic.compression.codec": (int, 0),
    "transaction.state.log.load.buffer.size": (int, 5242880),
    # The HTTP listener (docs/metrics.md): Prometheus metrics at /metrics and the web
    # console at /, e.g. http://127.0.0.1:9404; empty: off.
    "metrics.listener": (str, ""),
    # Lets the console abort hanging transactions (POST /console/abort is 403 otherwise).
    "console.allow.abort": (parse_bool, False),
    # Host names the HTTP listener answers to besides its own and loopback's (DNS
    # rebinding defence): comma-separated.
    "metrics.listener.allowed.hosts": (str, ""),
    # Who the HTTP listener's callers are: none (anyone who reaches it, as
    # User:ANONYMOUS), or basic (HTTP basic authentication as one of the users the
    # broker's SASL listeners accept, PLAIN or SCRAM). With an authorizer, what a caller
    # sees and may abort follows that principal's ACLs.
    "metrics.listener.authentication": (str, "none"),
    # Durable acknowledgements (README, Durability): acks=all produces, coordinator records
    # and transaction markers are answered only after an fdatasync of what they wrote.
    "oncelog.flush.on.ack": (parse_bool, False),
    # Test hook: while this file exists, every such fdatasync waits.
    "oncelog.debug.flush.hold.file": (str, ""),
    # The event-loop watchdog (broker/loop_watchdog.py): a loop held this long is logged
    # with the stack that holds it; 0: no watchdog thread (lag and GC figures still kept).
    "oncelog.loop.stall.warn.ms": (int, 500),
}
# The coordinators' settings: names and defaults come from their typed configs.
for _typed in (TxnConfig, GroupConfig):
    for _key, _default in property_defaults(_typed).items():
        _parse = parse_bool if isinstance(_default, bool) else type(_default)
        _SCHEMA[_key] = (_parse, _default)

# Settings of a multi-node (KRaft or ZooKeeper) cluster, or of features a single node has no
# use for: accepted and ignored, with one warning. Exact names, then prefixes.
CLUSTER_ONLY_KEYS = frozenset(
    {
        "process.roles",
        "node.id",
        "broker.rack",
        "broker.id.generation.enable",
        "reserved.broker.max.id",
        "early.start.listeners",
        "num.replica.fetchers",
        "num.replica.alter.log.dirs.threads",
        "unclean.leader.election.enable",
        "auto.leader.rebalance.enable",
        "eligible.leader.replicas.enable",
        "initial.broker.registration.timeout.ms",
        "broker.heartbeat.interval.ms",
        "broker.session.timeout.ms",
        "sasl.mechanism.inter.broker.protocol",
        "sasl.mechanism.controller.protocol",
        "security.inter.broker.protocol",
    }
)
CLUSTER_ONLY_PREFIXES = (
    "controller.",
    "inter.broker.",
    "zookeeper.",
    "metadata.",
    "replica.",
    "leader.imbalance.",
    "controlled.shutdown.",
    "share.coordinator.",
    "group.share.",
)


def schema_default(key: str) -> object | None:
    """A setting's default (None: not a declared setting)."""
    entry = _SCHEMA.get(key)
    return None if entry is None else entry[1]


def cluster_only(key: str) -> bool:
    return key in CLUSTER_ONLY_KEYS or key.startswith(CLUSTER_ONLY_PREFIXES)


# Kafka's validators (ConfigDef.Range.atLeast / between / ValidString.in) for the
# settings the broker acts on: name -> check returning the reason a value is wrong.
Check = Callable[[object], str | None]


def at_least(low: float) -> Check:
    def check(v: object) -> str | None:
        return None if v >= low else f"Value must be at least {low}"  # type: ignore[operator]

    return check


def between(low: float, high: float) -> Check:
    def check(v: object) -> str | None:
        if low <= v <= high:  # type: ignore[operator]
            return None
        return f"Value must be no less than {low} and no more than {high}"

    return check


def one_of(*allowed: str, many: bool = False, ignore_case: bool = False) -> Check:
    def check(v: object) -> str | None:
        items = [x.strip() for x in str(v).split(",")] if many else [str(v)]
        fold = (lambda x: x.lower()) if ignore_case else (lambda x: x)
        known = {fold(a) for a in allowed}
        bad = [x for x in items if fold(x) not in known]
        return f"String must be one of: {', '.join(allowed)}" if bad else None

    return check


def must_list(required: str) -> Check:
    def check(v: object) -> str | None:
        items = {x.strip() for x in str(v).split(",")}
        return None if required in items else f"'{required}' must be included"

    return check


def all_of(*checks: Check) -> Check:
    def check(v: object) -> str | None:
        return next((e for c in checks if (e := c(v)) is not None), None)

    return check


def _load_failures(value: object) -> str | None:
    try:
        parse_load_failures(str(value))
    except ValueError as exc:
        return str(exc)
    return None


_CHECKS: dict[str, Check] = {
    "oncelog.debug.group.load.fail": _load_failures,
    "num.partitions": at_least(1),
    "oncelog.loop.stall.warn.ms": at_least(0),
    "oncelog.group.load.wait.ms": at_least(0),
    "default.replication.factor": at_least(1),
    "socket.request.max.bytes": at_least(1),
    "message.max.bytes": at_least(0),
    "log.segment.bytes": at_least(14),  # a legacy record's overhead, as Kafka checks
    "log.roll.hours": at_least(1),
    "log.index.size.max.bytes": at_least(4),
    "log.index.interval.bytes": at_least(0),
    "log.retention.check.interval.ms": at_least(1),
    "log.segment.delete.delay.ms": at_least(0),
    "log.flush.interval.messages": at_least(1),
    "log.message.timestamp.type": one_of("CreateTime", "LogAppendTime"),
    "log.cleanup.policy": one_of("delete", "compact", many=True),
    "producer.id.expiration.ms": at_least(1),
    "producer.id.expiration.check.interval.ms": at_least(1),
    "transaction.remove.expired.transaction.cleanup.interval.ms": at_least(1),
    "transaction.max.timeout.ms": at_least(1),
    "transactional.id.expiration.ms": at_least(1),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": at_least(1),
    "transaction.state.log.num.partitions": at_least(1),
    "transaction.state.log.segment.bytes": at_least(1),
    "transaction.state.log.replication.factor": at_least(1),
    "transaction.state.log.min.isr": at_least(1),
    "offsets.topic.num.partitions": at_least(1),
    "offsets.topic.segment.bytes": at_least(1),
    "offsets.topic.replication.factor": at_least(1),
    "offsets.retention.minutes": at_least(1),
    "offsets.retention.check.interval.ms": at_least(1),
    "offsets.load.buffer.size": at_least(1),
    "offsets.commit.timeout.ms": at_least(1),
    "transaction.state.log.load.buffer.size": at_least(1),
    "group.min.session.timeout.ms": at_least(0),
    "group.initial.rebalance.delay.ms": at_least(0),
    "min.insync.replicas": at_least(1),
    "fetch.max.bytes": at_least(1024),
    "max.incremental.fetch.session.cache.slots": at_least(0),
    "num.network.threads": at_least(1),
    "num.io.threads": at_least(1),
    "num.recovery.threads.per.data.dir": at_least(1),
    "background.threads": at_least(1),
    "connection.failed.authentication.delay.ms": at_least(0),
    "connections.max.idle.ms": at_least(-1),
    "max.connections": at_least(0),
    "max.connections.per.ip": at_least(0),
    "max.connection.creation.rate": at_least(0),
    "quota.window.num": at_least(1),
    "quota.window.size.seconds": at_least(1),
    "ssl.client.auth": one_of("required", "requested", "none"),
    "metrics.listener.authentication": one_of("none", "basic"),
    "log.cleaner.threads": at_least(0),
    "log.cleaner.backoff.ms": at_least(0),
    "log.cleaner.min.cleanable.ratio": between(0, 1),
    "log.cleaner.delete.retention.ms": at_least(0),
    "log.cleaner.min.compaction.lag.ms": at_least(0),
    "log.cleaner.max.compaction.lag.ms": at_least(1),
    # the finalized level must be one this broker supports (ApiVersions: 0-2)
    "oncelog.feature.transaction.version": one_of("0", "1", "2"),
    "oncelog.feature.group.version": one_of("0", "1"),
    "group.coordinator.rebalance.protocols": all_of(
        one_of("classic", "consumer", many=True), must_list("classic")
    ),
    "group.consumer.session.timeout.ms": at_least(1),
    "group.consumer.heartbeat.interval.ms": at_least(1),
    # Kafka: ConfigDef.CaseInsensitiveValidString over ConsumerGroupMigrationPolicy
    "group.consumer.migration.policy": one_of(
        "disabled", "upgrade", "downgrade", "bidirectional", ignore_case=True
    ),
    "group.consumer.max.size": at_least(1),
    "group.max.size": at_least(1),
}

# Per-listener (``listener.name.<name>.<key>``) and per-mechanism
# (``<mechanism>.sasl.jaas.config``) settings are free-form strings, as in Kafka.
_LISTENER_PREFIX = "listener.name."
_JAAS_SUFFIX = ".sasl.jaas.config"


def _free_form(key: str) -> bool:
    return key.startswith(_LISTENER_PREFIX) or key.endswith(_JAAS_SUFFIX)


def parse_properties(text: str) -> dict[str, str]:
    """A .properties text parsed exactly as java.util.Properties does (``key=value``,
    ``key: value``, ``key value``, ``\\`` continuations, escapes, # and ! comments)."""
    import javaproperties  # only with a config file: its XML support imports urllib, email...

    return dict(javaproperties.loads(text))


@dataclass
class BrokerConfig:
    values: dict[str, object] = field(default_factory=dict)
    explicit: set[str] = field(default_factory=set)
    # cluster-only settings that were given, and ignored (CLUSTER_ONLY_KEYS)
    ignored: dict[str, str] = field(default_factory=dict)

    @classmethod
    def build(
        cls, file: Path | None = None, overrides: dict[str, str] | None = None
    ) -> BrokerConfig:
        raw: dict[str, str] = {}
        if file is not None:
            try:
                raw.update(parse_properties(file.read_text()))
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) else str(exc)
                raise BrokerConfigError(f"cannot read config file {file}: {reason}") from exc
        raw.update(overrides or {})
        cfg = cls({k: d for k, (_, d) in _SCHEMA.items()})
        unknown: list[str] = []
        invalid: list[str] = []
        for key, value in raw.items():
            if cluster_only(key):
                cfg.ignored[key] = value
            elif not _free_form(key) and key not in _SCHEMA:
                unknown.append(key)
            else:
                try:
                    cfg.set(key, value)
                except BrokerConfigError as exc:
                    invalid.append(str(exc))
        problems = []
        if unknown:
            problems.append(f"unknown broker configs: {', '.join(unknown)}")
        problems += invalid
        if problems:
            raise BrokerConfigError("; ".join(problems))
        return cfg

    def set(self, key: str, value: str) -> None:
        if _free_form(key):
            self.values[key] = value
            self.explicit.add(key)
            return
        if key not in _SCHEMA:
            raise BrokerConfigError(f"unknown broker config {key!r}")
        parser, _ = _SCHEMA[key]
        try:
            parsed = parser(value.strip())  # type: ignore[operator]
        except ValueError as exc:
            # Kafka's words (ConfigDef: "Not a number of type INT"), not Python's int() message.
            reason = {int: "Not an integer", float: "Not a number"}.get(parser, str(exc))  # type: ignore[call-overload]
            raise BrokerConfigError(
                f"Invalid value {value} for configuration {key}: {reason}"
            ) from exc
        check = _CHECKS.get(key)
        reason = check(parsed) if check else None
        if reason:
            raise BrokerConfigError(f"Invalid value {value} for configuration {key}: {reason}")
        self.values[key] = parsed
        self.explicit.add(key)

    def ignored_warning(self) -> str | None:
        """The one warning naming every ignored cluster-only setting, if any was given."""
        if not self.ignored:
            return None
        return (
            f"ignoring {len(self.ignored)} settings of a multi-node Kafka cluster "
            f"(oncelog is a single node): {', '.join(self.ignored)}"
        )

    def non_default_summary(self) -> str:
        """``key=value, ...`` of every explicitly set setting, secrets masked."""
        parts = []
        for key in sorted(self.explicit):
            secret = "password" in key or key.endswith("jaas.config") or key.endswith(".key")
            parts.append(f"{key}={'[hidden]' if secret else self.values[key]}")
        return ", ".join(parts) or "(none)"

    @property
    def controller_listener_names(self) -> frozenset[str]:
        """Listeners a KRaft file declares for its controller quorum: not served here."""
        names = self.ignored.get("controller.listener.names", "")
        return frozenset(n.strip().upper() for n in names.split(",") if n.strip())

    def __getitem__(self, key: str) -> object:
        return self.values[key]

    def get_int(self, key: str) -> int:
        v = self.values[key]
        assert isinstance(v, int)
        return v

    def get_bool(self, key: str) -> bool:
        return bool(self.values[key])

    def get_str(self, key: str) -> str:
        return str(self.values[key])

    def for_listener(self, listener: str, key: str) -> str:
        """``listener.name.<listener>.<key>`` if set, else the broker-wide ``key``."""
        prefixed = f"{_LISTENER_PREFIX}{listener.lower()}.{key}"
        if prefixed in self.values:
            return str(self.values[prefixed])
        return str(self.values.get(key, ""))

    def jaas_config(self, listener: str, mechanism: str) -> str:
        """The JAAS text for one listener and mechanism, most specific first."""
        mech = mechanism.lower()
        for key in (
            f"{_LISTENER_PREFIX}{listener.lower()}.{mech}{_JAAS_SUFFIX}",
            f"{mech}{_JAAS_SUFFIX}",
            f"{_LISTENER_PREFIX}{listener.lower()}.sasl.jaas.config",
            "sasl.jaas.config",
        ):
            if self.values.get(key):
                return str(self.values[key])
        return ""

    @property
    def node_id(self) -> int:
        return self.get_int("broker.id")

    @property
    def data_dir(self) -> Path:
        return Path(self.get_str("log.dir") or self.get_str("log.dirs").split(",")[0])

    def retention_ms(self) -> int:
        if self.get_int("log.retention.ms") != -2:
            return self.get_int("log.retention.ms")
        if self.get_int("log.retention.minutes") != -2:
            return self.get_int("log.retention.minutes") * 60_000
        return self.get_int("log.retention.hours") * 3_600_000

    def roll_ms(self) -> int:
        if self.get_int("log.roll.ms") != -1:
            return self.get_int("log.roll.ms")
        return self.get_int("log.roll.hours") * 3_600_000

    def topic_defaults(self) -> dict[str, str]:
        """Broker-level values that seed every topic's config (Kafka's synonyms)."""
        flush_ms = self.get_int("log.flush.interval.ms")
        return {
            "segment.bytes": str(self.get_int("log.segment.bytes")),
            "segment.ms": str(self.roll_ms()),
            "segment.index.bytes": str(self.get_int("log.index.size.max.bytes")),
            "index.interval.bytes": str(self.get_int("log.index.interval.bytes")),
            "retention.ms": str(self.retention_ms()),
            "retention.bytes": str(self.get_int("log.retention.bytes")),
            "file.delete.delay.ms": str(self.get_int("log.segment.delete.delay.ms")),
            "flush.messages": str(self.get_int("log.flush.interval.messages")),
            "flush.ms": str(LONG_MAX if flush_ms < 0 else flush_ms),
            "message.timestamp.type": self.get_str("log.message.timestamp.type"),
            "max.message.bytes": str(self.get_int("message.max.bytes")),
            "cleanup.policy": self.get_str("log.cleanup.policy"),
            "min.insync.replicas": str(self.get_int("min.insync.replicas")),
            **cleaner_topic_defaults(self),
        }


def parse_host_port(value: str, default_host: str = "") -> tuple[str, int]:
    """Accepts HOST:PORT, :PORT, or PLAINTEXT://HOST:PORT. An empty host stays empty: a
    listener then binds every interface, as Kafka's ``SocketServer`` does."""
    if "://" in value:
        value = value.split("://", 1)[1]
    host, sep, port = value.rpartition(":")
    if not sep:
        raise BrokerConfigError(f"expected HOST:PORT, got {value!r}")
    host = host.strip("[]") or default_host
    try:
        port_n = int(port)
    except ValueError as exc:
        raise BrokerConfigError(f"invalid port in {value!r}") from exc
    if not 0 <= port_n <= 65535:
        raise BrokerConfigError(f"port out of range in {value!r}")
    return host, port_n
