"""ConfigDef parsing, validators and the Kafka-shaped validation output."""

from __future__ import annotations

import pytest

from oncelog.connect.api.config import (
    NO_DEFAULT_VALUE,
    AbstractConfig,
    ConfigDef,
    ConfigType,
    Importance,
    Password,
    config_infos,
    parse_type,
)
from oncelog.connect.api.config_validators import Range, ValidString
from oncelog.connect.api.errors import ConfigException


def _definition() -> ConfigDef:
    return (
        ConfigDef()
        .define("topic", ConfigType.STRING, NO_DEFAULT_VALUE, None, Importance.HIGH, "The topic.", group="Common", order_in_group=1)
        .define("batch.size", ConfigType.INT, 2000, Range.at_least(1), Importance.LOW, "Max records per poll.", group="Common", order_in_group=2)
        .define("mode", ConfigType.STRING, "poll", ValidString("poll", "interval"), Importance.MEDIUM, "Boundary.")
        .define("enabled", ConfigType.BOOLEAN, False, None, Importance.LOW, "Switch.")
        .define("topics", ConfigType.LIST, [], None, Importance.HIGH, "Topics.")
        .define("secret", ConfigType.PASSWORD, None, None, Importance.LOW, "Secret.")
        .define("ratio", ConfigType.DOUBLE, 0.5, None, Importance.LOW, "Ratio.")
        .define("size", ConfigType.LONG, 2**40, None, Importance.LOW, "Size.")
    )  # fmt: skip


def test_parse_applies_types_and_defaults() -> None:
    values = _definition().parse(
        {
            "topic": "t",
            "batch.size": " 7 ",
            "enabled": "TRUE",
            "topics": "a, b ,c",
            "secret": "pw",
            "size": "-5",
        }
    )
    assert values == {
        "topic": "t",
        "batch.size": 7,
        "mode": "poll",
        "enabled": True,
        "topics": ["a", "b", "c"],
        "secret": Password("pw"),
        "ratio": 0.5,
        "size": -5,
    }
    assert str(values["secret"]) == "[hidden]"
    assert values["secret"].value() == "pw"


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({}, 'Missing required configuration "topic" which has no default value.'),
        (
            {"topic": "t", "batch.size": "x"},
            "Invalid value x for configuration batch.size: Not a number of type INT",
        ),
        (
            {"topic": "t", "batch.size": "0"},
            "Invalid value 0 for configuration batch.size: Value must be at least 1",
        ),
        (
            {"topic": "t", "batch.size": "2147483648"},
            "Invalid value 2147483648 for configuration batch.size: Not a number of type INT",
        ),
        (
            {"topic": "t", "mode": "never"},
            "Invalid value never for configuration mode: String must be one of: poll, interval",
        ),
        (
            {"topic": "t", "enabled": "yes"},
            "Invalid value yes for configuration enabled: Expected value to be either true or false",
        ),
        (
            {"topic": "t", "ratio": "half"},
            "Invalid value half for configuration ratio: Not a number of type DOUBLE",
        ),
    ],
)
def test_parse_errors_name_the_key(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigException) as err:
        _definition().parse(props)
    assert str(err.value) == message


def test_empty_list_and_case_insensitive_valid_string() -> None:
    assert parse_type("x", "", ConfigType.LIST) == []
    check = ValidString("BASE64", "NUMERIC", case_sensitive=False)
    check("decimal.format", "numeric")
    with pytest.raises(
        ConfigException, match=r"String must be one of \(case insensitive\): BASE64, NUMERIC"
    ):
        check("decimal.format", "hex")


def test_invalid_default_is_rejected_at_definition() -> None:
    with pytest.raises(ConfigException, match="Value must be at least 1"):
        ConfigDef().define("n", ConfigType.INT, 0, Range.at_least(1))


def test_validation_output_has_kafkas_shape() -> None:
    definition = _definition()
    result = config_infos(
        "FileStreamSource",
        definition,
        definition.validate({"batch.size": "-1", "mode": "x", "secret": "s"}),
    )
    assert result["name"] == "FileStreamSource"
    assert result["error_count"] == 3
    assert result["groups"] == ["Common"]
    by_name = {c["definition"]["name"]: c for c in result["configs"]}
    assert list(by_name) == definition.names()
    topic = by_name["topic"]
    assert topic["definition"] == {
        "name": "topic",
        "type": "STRING",
        "required": True,
        "default_value": None,
        "importance": "HIGH",
        "documentation": "The topic.",
        "group": "Common",
        "width": "NONE",
        "display_name": "topic",
        "dependents": [],
        "order": 1,
    }
    assert topic["value"] == {
        "name": "topic",
        "value": None,
        "recommended_values": [],
        "errors": ['Missing required configuration "topic" which has no default value.'],
        "visible": True,
    }
    assert by_name["batch.size"]["definition"]["default_value"] == "2000"
    assert by_name["batch.size"]["value"]["errors"] == [
        "Invalid value -1 for configuration batch.size: Value must be at least 1"
    ]
    assert by_name["batch.size"]["value"]["value"] == "-1"
    assert by_name["mode"]["value"]["errors"] == [
        "Invalid value x for configuration mode: String must be one of: poll, interval"
    ]
    assert by_name["enabled"]["value"] == {
        "name": "enabled",
        "value": "false",
        "recommended_values": [],
        "errors": [],
        "visible": True,
    }
    assert by_name["secret"]["value"]["value"] == "[hidden]"
    assert by_name["topics"]["definition"]["default_value"] == ""


def test_abstract_config_getters_and_prefixes() -> None:
    config = AbstractConfig(
        _definition(), {"topic": "t", "producer.acks": "all", "producer.linger.ms": "5"}
    )
    assert config.get_int("batch.size") == 2000
    assert config.get_list("topics") == []
    assert config.originals_with_prefix("producer.") == {"acks": "all", "linger.ms": "5"}
    with pytest.raises(ConfigException, match="Unknown configuration 'nope'"):
        config.get("nope")


def test_merge_refuses_duplicate_keys() -> None:
    with pytest.raises(ConfigException, match="Configuration topic is defined twice."):
        _definition().merge(ConfigDef().define("topic", ConfigType.STRING, None))
