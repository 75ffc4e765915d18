"""Broker configuration with Kafka's names and defaults.

Sources, lowest precedence first: defaults, a Java-style properties file,
``--set key=value`` overrides, then the dedicated CLI flags.

A stock Kafka ``server.properties`` starts the broker: the settings of a multi-node KRaft
cluster (``process.roles``, ``controller.*``, ...) are accepted and ignored, all named in one
warning; unknown keys and out-of-range values are rejected, all of them in one error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from oncelog.broker.cleaner_config import CleanerSettings
from oncelog.broker.debug_settings import DebugSettings
from oncelog.broker.settings import LONG_MAX, BrokerSettings
from oncelog.config.config_def import ConfigDef, ConfigType
from oncelog.config.errors import ConfigException
from oncelog.config.typed import build, definition
from oncelog.group.config import GroupConfig
from oncelog.txn.config import TxnConfig

T = TypeVar("T")


class BrokerConfigError(ValueError):
    pass


# Every broker setting: the broker's own, the cleaner's and the coordinators' (their typed
# configs declare them). A number that does not parse keeps the broker's long-standing
# wording rather than ConfigDef's "Not a number of type INT".
BROKER_CONFIG_DEF: ConfigDef = definition(
    BrokerSettings,
    CleanerSettings,
    TxnConfig,
    GroupConfig,
    DebugSettings,
    not_a_number={
        ConfigType.INT: "Not an integer",
        ConfigType.LONG: "Not an integer",
        ConfigType.DOUBLE: "Not a number",
    },
)
_DEFAULTS: dict[str, object] = {key.name: key.default for key in BROKER_CONFIG_DEF.keys()}

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
    return _DEFAULTS.get(key)


def cluster_only(key: str) -> bool:
    return key in CLUSTER_ONLY_KEYS or key.startswith(CLUSTER_ONLY_PREFIXES)


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
    # The typed views (BrokerSettings, the coordinators' configs, ...), built once from
    # ``values`` and again only when a value changes (set, adopt).
    _typed: dict[type, Any] = field(default_factory=dict, repr=False, compare=False)

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
        cfg = cls(dict(_DEFAULTS))
        unknown: list[str] = []
        invalid: list[str] = []
        for key, value in raw.items():
            if cluster_only(key):
                cfg.ignored[key] = value
            elif not _free_form(key) and key not in BROKER_CONFIG_DEF:
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
        self._typed.clear()
        if _free_form(key):
            self.values[key] = value
            self.explicit.add(key)
            return
        if key not in BROKER_CONFIG_DEF:
            raise BrokerConfigError(f"unknown broker config {key!r}")
        try:
            parsed = BROKER_CONFIG_DEF.parse_one(key, value.strip())
        except ConfigException as exc:
            raise BrokerConfigError(str(exc)) from None
        self.values[key] = parsed
        self.explicit.add(key)

    def adopt(self, new: BrokerConfig) -> None:
        """Take ``new``'s values (a dynamic change); the typed views follow."""
        self.values.clear()
        self.values.update(new.values)
        self._typed.clear()

    def typed(self, cls: type[T]) -> T:
        """The typed settings object ``cls`` (a dataclass of declared settings)."""
        view = self._typed.get(cls)
        if view is None:
            view = self._typed[cls] = build(cls, self.values)
        return view  # type: ignore[no-any-return]

    @property
    def settings(self) -> BrokerSettings:
        return self.typed(BrokerSettings)

    @property
    def cleaner(self) -> CleanerSettings:
        return self.typed(CleanerSettings)

    @property
    def txn(self) -> TxnConfig:
        return self.typed(TxnConfig)

    @property
    def group(self) -> GroupConfig:
        return self.typed(GroupConfig)

    @property
    def debug(self) -> DebugSettings:
        return self.typed(DebugSettings)

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
        return self.settings.broker_id

    @property
    def data_dir(self) -> Path:
        s = self.settings
        return Path(s.log_dir or s.log_dirs.split(",")[0])

    def retention_ms(self) -> int:
        s = self.settings
        if s.log_retention_ms != -2:
            return s.log_retention_ms
        if s.log_retention_minutes != -2:
            return s.log_retention_minutes * 60_000
        return s.log_retention_hours * 3_600_000

    def roll_ms(self) -> int:
        s = self.settings
        return s.log_roll_ms if s.log_roll_ms != -1 else s.log_roll_hours * 3_600_000

    def topic_defaults(self) -> dict[str, str]:
        """Broker-level values that seed every topic's config (Kafka's synonyms)."""
        s = self.settings
        flush_ms = s.log_flush_interval_ms
        return {
            "segment.bytes": str(s.log_segment_bytes),
            "segment.ms": str(self.roll_ms()),
            "segment.index.bytes": str(s.log_index_size_max_bytes),
            "index.interval.bytes": str(s.log_index_interval_bytes),
            "retention.ms": str(self.retention_ms()),
            "retention.bytes": str(s.log_retention_bytes),
            "file.delete.delay.ms": str(s.log_segment_delete_delay_ms),
            "flush.messages": str(s.log_flush_interval_messages),
            "flush.ms": str(LONG_MAX if flush_ms < 0 else flush_ms),
            "message.timestamp.type": s.log_message_timestamp_type,
            "max.message.bytes": str(s.message_max_bytes),
            "cleanup.policy": s.log_cleanup_policy,
            "min.insync.replicas": str(s.min_insync_replicas),
            **self.cleaner.topic_defaults(),
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
