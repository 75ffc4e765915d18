"""Connector-level configuration and its validation (what ``POST /connectors`` and
``PUT /connector-plugins/{plugin}/config/validate`` report).

The framework's keys are Kafka Connect's (``name``, ``connector.class``,
``tasks.max``, converters, ``transforms``/``predicates``, ``errors.*``; for sinks
``topics``/``topics.regex`` and the dead-letter queue). Validation "enriches" the
definition with each configured transformation's and predicate's own keys under
their prefix, adds the connector's own keys, the client override policy's verdict,
and returns Kafka's ``ConfigInfos`` shape.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from oncelog.connect.api.config import ConfigDef, ConfigType, Importance
from oncelog.connect.api.config_validators import Range, ValidString, non_empty_string, unique_list
from oncelog.connect.api.errors import ConfigException

log = logging.getLogger(__name__)

NAME = "name"
CONNECTOR_CLASS = "connector.class"
TASKS_MAX = "tasks.max"
TRANSFORMS = "transforms"
PREDICATES = "predicates"
ERRORS_TOLERANCE = "errors.tolerance"
ERRORS_LOG_ENABLE = "errors.log.enable"
ERRORS_LOG_INCLUDE_MESSAGES = "errors.log.include.messages"
ERRORS_RETRY_TIMEOUT = "errors.retry.timeout"
ERRORS_RETRY_MAX_DELAY = "errors.retry.delay.max.ms"
TOPICS = "topics"
TOPICS_REGEX = "topics.regex"
DLQ_TOPIC = "errors.deadletterqueue.topic.name"
DLQ_REPLICATION = "errors.deadletterqueue.topic.replication.factor"
DLQ_HEADERS = "errors.deadletterqueue.context.headers.enable"
EXACTLY_ONCE_SUPPORT = "exactly.once.support"
TRANSACTION_BOUNDARY = "transaction.boundary"
TRANSACTION_BOUNDARY_INTERVAL_MS = "transaction.boundary.interval.ms"
OFFSETS_STORAGE_TOPIC = "offsets.storage.topic"

COMMON_GROUP = "Common"
TRANSFORMS_GROUP = "Transforms"
PREDICATES_GROUP = "Predicates"
ERROR_GROUP = "Error Handling"
EXACTLY_ONCE_GROUP = "Exactly Once Support"
OFFSETS_TOPIC_GROUP = "Offsets Topic"


def _name(name: str, value: Any) -> None:
    if value is None or not str(value).strip():
        raise ConfigException(name, value, "String may not be empty")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in value):
        raise ConfigException(name, value, "String may not contain control sequences")


def _regex(name: str, value: Any) -> None:
    if value:
        try:
            re.compile(value)
        except re.error as exc:
            raise ConfigException(name, value, f"Invalid regex: {exc}") from None


def base_connector_config_def() -> ConfigDef:
    d = ConfigDef()
    d.define(
        NAME,
        ConfigType.STRING,
        validator=_name,
        importance=Importance.HIGH,
        group=COMMON_GROUP,
        order_in_group=1,
        display_name="Connector name",
        documentation="Globally unique name to use for this connector.",
    )
    d.define(
        CONNECTOR_CLASS,
        ConfigType.STRING,
        importance=Importance.HIGH,
        group=COMMON_GROUP,
        order_in_group=2,
        display_name="Connector class",
        documentation="Name or alias of the class for this connector.",
    )
    d.define(
        TASKS_MAX,
        ConfigType.INT,
        1,
        Range.at_least(1),
        Importance.HIGH,
        "Maximum number of tasks to use for this connector.",
        group=COMMON_GROUP,
        order_in_group=3,
        display_name="Tasks max",
    )
    d.define(
        "key.converter",
        ConfigType.CLASS,
        None,
        None,
        Importance.LOW,
        "Overrides the worker's key.converter.",
        group=COMMON_GROUP,
        order_in_group=4,
        display_name="Key converter class",
    )
    d.define(
        "value.converter",
        ConfigType.CLASS,
        None,
        None,
        Importance.LOW,
        "Overrides the worker's value.converter.",
        group=COMMON_GROUP,
        order_in_group=5,
        display_name="Value converter class",
    )
    d.define(
        "header.converter",
        ConfigType.CLASS,
        None,
        None,
        Importance.LOW,
        "Overrides the worker's header.converter.",
        group=COMMON_GROUP,
        order_in_group=6,
        display_name="Header converter class",
    )
    d.define(
        "config.action.reload",
        ConfigType.STRING,
        "restart",
        ValidString("none", "restart", case_sensitive=False),
        Importance.LOW,
        "What to do when external configuration providers change a value.",
        group=COMMON_GROUP,
        order_in_group=7,
        display_name="Reload Action",
    )
    d.define(
        TRANSFORMS,
        ConfigType.LIST,
        [],
        unique_list,
        Importance.LOW,
        "Aliases for the transformations to be applied to records.",
        group=TRANSFORMS_GROUP,
        order_in_group=1,
        display_name="Transforms",
    )
    d.define(
        PREDICATES,
        ConfigType.LIST,
        [],
        unique_list,
        Importance.LOW,
        "Aliases for the predicates used by transformations.",
        group=PREDICATES_GROUP,
        order_in_group=1,
        display_name="Predicates",
    )
    d.define(
        ERRORS_RETRY_TIMEOUT,
        ConfigType.LONG,
        0,
        None,
        Importance.MEDIUM,
        "Maximum duration in milliseconds that a failed operation will be reattempted (-1: forever).",
        group=ERROR_GROUP,
        order_in_group=1,
        display_name="Retry Timeout for Errors",
    )
    d.define(
        ERRORS_RETRY_MAX_DELAY,
        ConfigType.LONG,
        60000,
        Range.at_least(0),
        Importance.MEDIUM,
        "Maximum delay in milliseconds between consecutive retry attempts.",
        group=ERROR_GROUP,
        order_in_group=2,
        display_name="Maximum Delay Between Retries for Errors",
    )
    d.define(
        ERRORS_TOLERANCE,
        ConfigType.STRING,
        "none",
        ValidString("none", "all"),
        Importance.MEDIUM,
        "none: any error fails the task; all: problematic records are skipped.",
        group=ERROR_GROUP,
        order_in_group=3,
        display_name="Error Tolerance",
    )
    d.define(
        ERRORS_LOG_ENABLE,
        ConfigType.BOOLEAN,
        False,
        None,
        Importance.MEDIUM,
        "Log each failed operation and problematic record.",
        group=ERROR_GROUP,
        order_in_group=4,
        display_name="Log Errors",
    )
    d.define(
        ERRORS_LOG_INCLUDE_MESSAGES,
        ConfigType.BOOLEAN,
        False,
        None,
        Importance.MEDIUM,
        "Include the record in the error log.",
        group=ERROR_GROUP,
        order_in_group=5,
        display_name="Log Error Details",
    )
    return d  # fmt: skip


def sink_connector_config_def() -> ConfigDef:
    d = base_connector_config_def()
    d.define(
        TOPICS,
        ConfigType.LIST,
        [],
        None,
        Importance.HIGH,
        "List of topics to consume, separated by commas",
        group=COMMON_GROUP,
        order_in_group=4,
        display_name="Topics",
    )
    d.define(
        TOPICS_REGEX,
        ConfigType.STRING,
        "",
        _regex,
        Importance.HIGH,
        "Regular expression giving topics to consume.",
        group=COMMON_GROUP,
        order_in_group=4,
        display_name="Topics regex",
    )
    d.define(
        DLQ_TOPIC,
        ConfigType.STRING,
        "",
        None,
        Importance.MEDIUM,
        "Topic receiving records that failed in this sink connector (with errors.tolerance=all).",
        group=ERROR_GROUP,
        order_in_group=6,
        display_name="Dead Letter Queue Topic Name",
    )
    d.define(
        DLQ_REPLICATION,
        ConfigType.SHORT,
        3,
        None,
        Importance.MEDIUM,
        "Replication factor of the dead letter queue topic when it is created.",
        group=ERROR_GROUP,
        order_in_group=7,
        display_name="Dead Letter Queue Topic Replication Factor",
    )
    d.define(
        DLQ_HEADERS,
        ConfigType.BOOLEAN,
        False,
        None,
        Importance.MEDIUM,
        "Add headers with the error context to records sent to the dead letter queue.",
        group=ERROR_GROUP,
        order_in_group=8,
        display_name="Enable Error Context Headers",
    )
    return d  # fmt: skip


def _non_negative_or_null(name: str, value: Any) -> None:
    if value is not None and value < 0:
        raise ConfigException(name, value, "Value must be at least 0")


def source_connector_config_def() -> ConfigDef:
    """The base keys plus KIP-618's: exactly-once support, transaction boundaries and a
    separate offsets topic (accepted whatever the worker's exactly-once setting)."""
    d = base_connector_config_def()
    d.define(
        EXACTLY_ONCE_SUPPORT,
        ConfigType.STRING,
        "requested",
        ValidString("requested", "required", case_sensitive=False),
        Importance.MEDIUM,
        'Permitted values are "requested" and "required". If set to "required", forces a '
        "preflight check for the connector to ensure that it can provide exactly-once delivery "
        "with the given configuration. Some connectors may be capable of providing exactly-once "
        "delivery but not signal to Connect that they support this; in that case, documentation "
        "for the connector should be consulted carefully before creating it, and the value for "
        'this property should be set to "requested". Additionally, if the value is set to '
        '"required" but the worker that performs preflight validation does not have exactly-once '
        "support enabled for source connectors, requests to create or validate the connector "
        "will fail.",
        group=EXACTLY_ONCE_GROUP,
        order_in_group=1,
        display_name="Exactly once support",
    )
    d.define(
        TRANSACTION_BOUNDARY,
        ConfigType.STRING,
        "poll",
        ValidString("poll", "interval", "connector", case_sensitive=False),
        Importance.MEDIUM,
        'Permitted values are "poll", "interval", and "connector". If set to "poll", a new '
        "producer transaction will be started and committed for every batch of records that "
        'each task from this connector provides to Connect. If set to "connector", relies on '
        "connector-defined transaction boundaries; note that not all connectors are capable of "
        "defining their own transaction boundaries, and in that case, attempts to instantiate a "
        'connector with this value will fail. Finally, if set to "interval", commits '
        "transactions only after a user-defined time interval has passed.",
        group=EXACTLY_ONCE_GROUP,
        order_in_group=2,
        display_name="Transaction Boundary",
    )
    d.define(
        TRANSACTION_BOUNDARY_INTERVAL_MS,
        ConfigType.LONG,
        None,
        _non_negative_or_null,
        Importance.LOW,
        'If "transaction.boundary" is set to "interval", determines the interval for producer '
        "transaction commits by connector tasks. If unset, defaults to the value of the "
        'worker-level "offset.flush.interval.ms" property. It has no effect if a different '
        "transaction boundary is used.",
        group=EXACTLY_ONCE_GROUP,
        order_in_group=3,
        display_name="Transaction boundary interval",
    )
    d.define(
        OFFSETS_STORAGE_TOPIC,
        ConfigType.STRING,
        None,
        non_empty_string,  # Kafka's SourceConnectorConfig: NonEmptyString
        Importance.LOW,
        "The name of a separate offsets topic to use for this connector. If empty or not "
        "specified, the worker's global offsets topic name will be used. If specified, the "
        "offsets topic will be created if it does not already exist on the Kafka cluster "
        "targeted by this connector (which may be different from the one used for the worker's "
        "global offsets topic if the bootstrap.servers property of the connector's producer has "
        "been overridden from the worker's).",
        group=OFFSETS_TOPIC_GROUP,
        order_in_group=1,
        display_name="Offsets topic",
    )
    return d
