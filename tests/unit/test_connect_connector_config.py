"""Connector config validation in Kafka's ConfigInfos shape (the REST validate output)."""

from __future__ import annotations

from typing import Any

import pytest

from oncelog.connect.api.errors import ConfigException
from oncelog.connect.runtime.connector_validation import validate_connector_config
from oncelog.connect.runtime.plugins import FILE_STREAM_PLUGIN, PluginRegistry

REGISTRY = PluginRegistry.discover([FILE_STREAM_PLUGIN], entry_points=False)


def _errors(result: dict[str, Any]) -> dict[str, list[str]]:
    return {
        c["value"]["name"]: c["value"]["errors"] for c in result["configs"] if c["value"]["errors"]
    }


def test_valid_source_config() -> None:
    result = validate_connector_config(
        {
            "name": "src",
            "connector.class": "FileStreamSource",
            "topic": "t",
            "file": "/tmp/x",
            "tasks.max": "1",
        },
        REGISTRY,
    )
    assert result["name"] == "oncelog.connect.connectors.file_stream.FileStreamSourceConnector"
    assert result["error_count"] == 0
    assert result["groups"] == [
        "Common",
        "Transforms",
        "Predicates",
        "Error Handling",
        "Exactly Once Support",
        "Offsets Topic",
    ]
    names = [c["definition"]["name"] for c in result["configs"]]
    assert names[:3] == ["name", "connector.class", "tasks.max"]
    assert {"file", "topic", "batch.size", "errors.tolerance"} <= set(names)
    tasks_max = next(c for c in result["configs"] if c["definition"]["name"] == "tasks.max")
    assert tasks_max["definition"]["default_value"] == "1" and tasks_max["value"]["value"] == "1"


def test_invalid_values_are_reported_per_field() -> None:
    result = validate_connector_config(
        {
            "name": "",
            "connector.class": "VerifiableSource",
            "tasks.max": "0",
            "throughput": "fast",
            "errors.tolerance": "some",
            "transforms": "route,bad,noType",
            "transforms.route.type": "RegexRouter",
            "transforms.route.regex": "(",
            "transforms.route.predicate": "missing",
            "transforms.bad.type": "NoSuchTransform",
            "producer.override.linger.ms": "5",
        },
        REGISTRY,
        override_policy="None",
    )
    errors = _errors(result)
    assert errors == {
        "name": ["Invalid value  for configuration name: String may not be empty"],
        "tasks.max": ["Invalid value 0 for configuration tasks.max: Value must be at least 1"],
        "errors.tolerance": [
            "Invalid value some for configuration errors.tolerance: String must be one of: none, all"
        ],
        "transforms.route.regex": [
            "Invalid value ( for configuration transforms.route.regex: Invalid regex: missing ), unterminated subpattern at position 0"
        ],
        "transforms.route.replacement": [
            'Missing required configuration "transforms.route.replacement" which has no default value.'
        ],
        "transforms.route.predicate": [
            "Invalid value missing for configuration transforms.route.predicate: Predicate alias missing is not defined in 'predicates'"
        ],
        "transforms.bad.type": [
            "Invalid value NoSuchTransform for configuration transforms.bad.type: Class NoSuchTransform could not be found."
        ],
        "transforms.noType.type": [
            'Missing required configuration "transforms.noType.type" which has no default value.'
        ],
        "topic": ['Missing required configuration "topic" which has no default value.'],
        "throughput": [
            "Invalid value fast for configuration throughput: Not a number of type LONG"
        ],
        "producer.override.linger.ms": [
            "The 'None' policy does not allow 'linger.ms' to be overridden in the connector configuration."
        ],
    }
    assert result["error_count"] == 11
    assert "Transforms: route" in result["groups"]


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({}, {"topics": ["Must configure one of topics or topics.regex"], "topics.regex": ["Must configure one of topics or topics.regex"]}),
        ({"topics": "a", "topics.regex": "a.*"}, {
            "topics": ["topics and topics.regex are mutually exclusive options, but both are set."],
            "topics.regex": ["topics and topics.regex are mutually exclusive options, but both are set."],
        }),
        ({"topics": "a,dlq", "errors.deadletterqueue.topic.name": "dlq"}, {
            "errors.deadletterqueue.topic.name": ["The DLQ topic 'dlq' may not be included in the list of topics ('topics=a,dlq') to be consumed."],
        }),
        ({"topics": "a", "insert.mode": "upsert"}, {"pk.mode": ["pk.mode must not be none when insert.mode is upsert"]}),
    ],
)  # fmt: skip
def test_sink_topic_rules(extra: dict[str, str], expected: dict[str, list[str]]) -> None:
    config = {
        "name": "snk",
        "connector.class": "PostgresSink",
        "connection.url": "postgresql://h/db",
        **extra,
    }
    assert _errors(validate_connector_config(config, REGISTRY)) == expected


def test_unknown_or_missing_class_raises() -> None:
    with pytest.raises(ConfigException, match="contains no connector type"):
        validate_connector_config({"name": "x"}, REGISTRY)
    with pytest.raises(
        ConfigException,
        match="Invalid value Nope for configuration connector.class: Class Nope could not be found.",
    ):
        validate_connector_config({"name": "x", "connector.class": "Nope"}, REGISTRY)
