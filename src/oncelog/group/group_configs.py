"""Per-group configs (Kafka 4.0's GroupConfig and GroupConfigManager), pure.

DescribeConfigs / IncrementalAlterConfigs / AlterConfigs on a GROUP resource read and set
them; the broker keeps them in ``meta/group_configs.json`` and passes a group's resolved
session timeout and heartbeat interval in with each ConsumerGroupHeartbeat, so the core
never reads them itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from oncelog.config.config_def import ConfigDef, ConfigKey, ConfigType, Importance
from oncelog.config.errors import ConfigException
from oncelog.config.validators import Range
from oncelog.group.config import GroupConfig

CONSUMER_SESSION_TIMEOUT = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"
SHARE_SESSION_TIMEOUT = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL = "share.heartbeat.interval.ms"
SHARE_RECORD_LOCK_DURATION = "share.record.lock.duration.ms"
NAMES = (
    CONSUMER_HEARTBEAT_INTERVAL,
    CONSUMER_SESSION_TIMEOUT,
    SHARE_HEARTBEAT_INTERVAL,
    SHARE_RECORD_LOCK_DURATION,
    SHARE_SESSION_TIMEOUT,
)
# Share groups are not served here; their settings keep Kafka's broker defaults and bounds
# (GroupCoordinatorConfig / ShareGroupConfig) so that they are described and checked alike.
_SHARE_DEFAULTS = {
    SHARE_SESSION_TIMEOUT: 45_000,
    SHARE_HEARTBEAT_INTERVAL: 5_000,
    SHARE_RECORD_LOCK_DURATION: 30_000,
}
_SHARE_BOUNDS = {
    SHARE_HEARTBEAT_INTERVAL: ((5_000, "group.share.min.heartbeat.interval.ms"),
                               (15_000, "group.share.max.heartbeat.interval.ms")),
    SHARE_SESSION_TIMEOUT: ((45_000, "group.share.min.session.timeout.ms"),
                            (60_000, "group.share.max.session.timeout.ms")),
    SHARE_RECORD_LOCK_DURATION: ((15_000, "group.share.min.record.lock.duration.ms"),
                                 (60_000, "group.share.max.record.lock.duration.ms")),
}  # fmt: skip


def _key(name: str, default: int, doc: str, at_least: int = 1) -> ConfigKey:
    return ConfigKey(
        name, ConfigType.INT, default, Importance.MEDIUM, doc, Range.at_least(at_least)
    )


_BROKER = GroupConfig()
# Kafka's GroupConfig ConfigDef: INT, atLeast(1) (atLeast(1000) for the record lock
# duration); the defaults shown are the broker settings' defaults, which a group without
# its own value follows.
GROUP_CONFIG_DEF = ConfigDef(
    [
        _key(
            CONSUMER_HEARTBEAT_INTERVAL,
            _BROKER.consumer_heartbeat_interval_ms,
            "The group's heartbeat interval for consumer-protocol members "
            "(default: group.consumer.heartbeat.interval.ms).",
        ),
        _key(
            CONSUMER_SESSION_TIMEOUT,
            _BROKER.consumer_session_timeout_ms,
            "The group's session timeout for consumer-protocol members "
            "(default: group.consumer.session.timeout.ms).",
        ),
        _key(
            SHARE_HEARTBEAT_INTERVAL,
            _SHARE_DEFAULTS[SHARE_HEARTBEAT_INTERVAL],
            "Share groups' heartbeat interval: described and checked (share groups are not served).",
        ),
        _key(
            SHARE_RECORD_LOCK_DURATION,
            _SHARE_DEFAULTS[SHARE_RECORD_LOCK_DURATION],
            "Share groups' record lock duration: described and checked (share groups are not served).",
            at_least=1000,
        ),
        _key(
            SHARE_SESSION_TIMEOUT,
            _SHARE_DEFAULTS[SHARE_SESSION_TIMEOUT],
            "Share groups' session timeout: described and checked (share groups are not served).",
        ),
    ]
)


class GroupConfigError(ValueError):
    """A refused group config (Kafka: InvalidConfigurationException, INVALID_CONFIG)."""


def defaults(cfg: GroupConfig) -> dict[str, int]:
    """Kafka's GroupCoordinatorConfig.extractGroupConfigMap: the broker's values."""
    return {
        CONSUMER_SESSION_TIMEOUT: cfg.consumer_session_timeout_ms,
        CONSUMER_HEARTBEAT_INTERVAL: cfg.consumer_heartbeat_interval_ms,
        **_SHARE_DEFAULTS,
    }


def validate(props: Mapping[str, str], cfg: GroupConfig) -> dict[str, int]:
    """Kafka's GroupConfigManager.validate (GroupConfig.validateNames, parse, and
    validateValues) of ``props`` over the broker's defaults; the parsed overrides."""
    for name in props:
        if name not in GROUP_CONFIG_DEF:
            raise GroupConfigError(f"Unknown group config name: {name}")
    parsed: dict[str, int] = {}
    for name, text in props.items():
        try:
            parsed[name] = GROUP_CONFIG_DEF.parse_one(name, text)
        except ConfigException as exc:
            raise GroupConfigError(str(exc)) from None
    v = defaults(cfg) | parsed
    bounds = {
        CONSUMER_HEARTBEAT_INTERVAL: (
            (cfg.consumer_min_heartbeat_interval_ms, "group.consumer.min.heartbeat.interval.ms"),
            (cfg.consumer_max_heartbeat_interval_ms, "group.consumer.max.heartbeat.interval.ms"),
        ),
        CONSUMER_SESSION_TIMEOUT: (
            (cfg.consumer_min_session_timeout_ms, "group.consumer.min.session.timeout.ms"),
            (cfg.consumer_max_session_timeout_ms, "group.consumer.max.session.timeout.ms"),
        ),
        **_SHARE_BOUNDS,
    }
    # GroupConfig.validateValues, in its order
    for name in (
        CONSUMER_HEARTBEAT_INTERVAL,
        CONSUMER_SESSION_TIMEOUT,
        SHARE_HEARTBEAT_INTERVAL,
        SHARE_SESSION_TIMEOUT,
        SHARE_RECORD_LOCK_DURATION,
    ):
        (low, low_name), (high, high_name) = bounds[name]
        if v[name] < low:
            raise GroupConfigError(f"{name} must be greater than or equal to {low_name}")
        if v[name] > high:
            raise GroupConfigError(f"{name} must be less than or equal to {high_name}")
    for session, interval in (
        (CONSUMER_SESSION_TIMEOUT, CONSUMER_HEARTBEAT_INTERVAL),
        (SHARE_SESSION_TIMEOUT, SHARE_HEARTBEAT_INTERVAL),
    ):
        if v[session] <= v[interval]:
            raise GroupConfigError(f"{session} must be greater than {interval}")
    return parsed


@dataclass
class GroupConfigs:
    """Every group's overrides (Kafka's GroupConfigManager), over the broker's defaults."""

    cfg: GroupConfig
    overrides: dict[str, dict[str, str]] = field(default_factory=dict)

    def of(self, group_id: str) -> dict[str, str]:
        return dict(self.overrides.get(group_id, {}))

    def set(self, group_id: str, props: Mapping[str, str]) -> None:
        """Replace a group's overrides (validated first with ``validate``)."""
        if props:
            self.overrides[group_id] = dict(props)
        else:
            self.overrides.pop(group_id, None)

    def effective(self, group_id: str) -> dict[str, int]:
        return defaults(self.cfg) | {k: int(v) for k, v in self.overrides.get(group_id, {}).items()}

    def session_timeout_ms(self, group_id: str) -> int | None:
        """The group's own consumer.session.timeout.ms (None: the broker's)."""
        value = self.overrides.get(group_id, {}).get(CONSUMER_SESSION_TIMEOUT)
        return None if value is None else int(value)

    def heartbeat_interval_ms(self, group_id: str) -> int | None:
        value = self.overrides.get(group_id, {}).get(CONSUMER_HEARTBEAT_INTERVAL)
        return None if value is None else int(value)

    def to_json(self) -> bytes:
        return json.dumps(
            {"version": 1, "groups": self.overrides}, indent=1, sort_keys=True
        ).encode()

    def load_json(self, data: bytes) -> list[str]:
        """Read stored overrides; those no longer valid (the broker's bounds changed) are
        dropped, and their groups returned (Kafka logs and ignores them too)."""
        dropped = []
        for group_id, props in dict(json.loads(data).get("groups", {})).items():
            props = {str(k): str(v) for k, v in dict(props).items()}
            try:
                validate(props, self.cfg)
            except GroupConfigError:
                dropped.append(group_id)
                continue
            self.overrides[group_id] = props
        return dropped
