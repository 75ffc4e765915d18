"""The shared settings type (oncelog.config, Kafka's ConfigDef) and Connect's view of it."""

from __future__ import annotations

import pytest

from oncelog.config import ConfigDef, ConfigException, ConfigType, Importance
from oncelog.config.validators import Range
from oncelog.connect.api import config as connect_config
from oncelog.connect.api.errors import ConfigException as ConnectConfigException
from oncelog.connect.api.errors import ConnectException


def _define(definition: ConfigDef) -> ConfigDef:
    return definition.define("n", ConfigType.INT, 1, Range.at_least(0), Importance.HIGH, "n")


def test_shared_errors_are_not_connect_errors_as_in_kafka() -> None:
    with pytest.raises(ConfigException) as err:
        _define(ConfigDef()).parse({"n": "-1"})
    assert str(err.value) == "Invalid value -1 for configuration n: Value must be at least 0"
    assert not isinstance(err.value, ConnectException)


def test_connect_definitions_fail_with_connects_config_exception() -> None:
    with pytest.raises(ConnectConfigException) as err:
        _define(connect_config.ConfigDef()).parse({"n": "x"})
    assert str(err.value) == "Invalid value x for configuration n: Not a number of type INT"
    assert isinstance(err.value, ConnectException) and isinstance(err.value, ConfigException)
    with pytest.raises(ConnectConfigException, match='Missing required configuration "m"'):
        connect_config.ConfigDef().define("m", ConfigType.STRING).parse({})


def test_not_a_number_wording_and_merging_shared_keys() -> None:
    definition = ConfigDef(not_a_number={ConfigType.INT: "Not an integer"})
    with pytest.raises(
        ConfigException, match="^Invalid value lots for configuration n: Not an integer$"
    ):
        _define(definition).parse({"n": "lots"})
    merged = _define(ConfigDef()).merge(_define(ConfigDef()))
    assert merged.names() == ["n"]
    with pytest.raises(ConfigException, match="defined twice"):
        _define(ConfigDef()).merge(ConfigDef().define("n", ConfigType.LONG, 2))


def test_typed_settings_are_built_once_from_their_declarations() -> None:
    from oncelog.broker.config import BROKER_CONFIG_DEF, BrokerConfig, BrokerConfigError
    from oncelog.group.config import GroupConfig

    assert all(key.documentation for key in BROKER_CONFIG_DEF.keys())
    assert BROKER_CONFIG_DEF["offsets.retention.minutes"].default == 10_080
    assert GroupConfig.from_properties({"offsets.retention.minutes": "2"}).offsets_retention_ms == (
        120_000
    )
    config = BrokerConfig.build(overrides={"num.partitions": "3", "log.cleaner.threads": "0"})
    assert config.settings is config.settings  # built once, not per read
    assert (config.settings.num_partitions, config.cleaner.thread_count) == (3, 1)
    config.set("num.partitions", "4")
    assert config.settings.num_partitions == 4
    with pytest.raises(
        BrokerConfigError,
        match="^Invalid value 2.5 for configuration num.partitions: Not an integer$",
    ):
        config.set("num.partitions", "2.5")
