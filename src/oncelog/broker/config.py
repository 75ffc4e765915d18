"""Broker configuration with Kafka's names and defaults.

Sources, lowest precedence first: defaults, a Java-style properties file,
``--set key=value`` overrides, then the dedicated CLI flags.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from oncelog.broker.log_cleaner import CLEANER_CONFIGS, cleaner_topic_defaults
from oncelog.coordinator.settings import parse_bool, property_defaults
from oncelog.group.config import GroupConfig
from oncelog.txn.config import TxnConfig

LONG_MAX = 2**63 - 1


class BrokerConfigError(ValueError):
    pass


# name -> (parser, default). Only settings the broker acts on, plus a few
# accepted for compatibility with existing server.properties files.
_SCHEMA: dict[str, tuple[object, object]] = {
    "node.id": (int, 0),
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
    "cluster.id": (str, "oncelog-cluster-0000000"),
    "process.roles": (str, "broker,controller"),
    "num.network.threads": (int, 3),
    "num.io.threads": (int, 8),
    "offsets.topic.replication.factor": (int, 1),
    "transaction.state.log.replication.factor": (int, 1),
    "transaction.state.log.min.isr": (int, 1),
    "min.insync.replicas": (int, 1),
    # -- security: listeners, TLS, SASL, authorization (Kafka's names) --------
    "listener.security.protocol.map": (
        str,
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
    ),
    "inter.broker.listener.name": (str, ""),
    "controller.listener.names": (str, ""),
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
    "sasl.mechanism.inter.broker.protocol": (str, "PLAIN"),
    "sasl.jaas.config": (str, ""),
    "sasl.server.max.receive.size": (int, 524288),
    "connections.max.reauth.ms": (int, 0),
    "connection.failed.authentication.delay.ms": (int, 100),
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
    # Durable acknowledgements (README, Durability): acks=all produces, coordinator records
    # and transaction markers are answered only after an fdatasync of what they wrote.
    "oncelog.flush.on.ack": (parse_bool, False),
    # Test hook: while this file exists, every such fdatasync waits.
    "oncelog.debug.flush.hold.file": (str, ""),
}
# The coordinators' settings: names and defaults come from their typed configs.
for _typed in (TxnConfig, GroupConfig):
    for _key, _default in property_defaults(_typed).items():
        _SCHEMA[_key] = (parse_bool if isinstance(_default, bool) else int, _default)

# Per-listener (``listener.name.<name>.<key>``) and per-mechanism
# (``<mechanism>.sasl.jaas.config``) settings are free-form strings, as in Kafka.
_LISTENER_PREFIX = "listener.name."
_JAAS_SUFFIX = ".sasl.jaas.config"


def _free_form(key: str) -> bool:
    return key.startswith(_LISTENER_PREFIX) or key.endswith(_JAAS_SUFFIX)


def parse_properties(text: str) -> dict[str, str]:
    """A Java .properties subset: key=value or key: value, # and ! comments."""
    out: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                key, value = line.split(sep, 1)
                out[key.strip()] = value.strip()
                break
        else:
            raise BrokerConfigError(f"line {lineno}: expected key=value, got {raw!r}")
    return out


@dataclass
class BrokerConfig:
    values: dict[str, object] = field(default_factory=dict)
    explicit: set[str] = field(default_factory=set)

    @classmethod
    def build(
        cls, file: Path | None = None, overrides: dict[str, str] | None = None
    ) -> BrokerConfig:
        raw: dict[str, str] = {}
        if file is not None:
            try:
                raw.update(parse_properties(file.read_text()))
            except OSError as exc:
                raise BrokerConfigError(f"cannot read config file {file}: {exc}") from exc
        raw.update(overrides or {})
        cfg = cls({k: d for k, (_, d) in _SCHEMA.items()})
        for key, value in raw.items():
            cfg.set(key, value)
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
            self.values[key] = parser(value)  # type: ignore[operator]
        except ValueError as exc:
            raise BrokerConfigError(f"invalid value for {key}: {value!r} ({exc})") from exc
        self.explicit.add(key)

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
        return self.get_int("node.id") if "node.id" in self.explicit else self.get_int("broker.id")

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


def parse_host_port(value: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """Accepts HOST:PORT, :PORT, or PLAINTEXT://HOST:PORT."""
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
