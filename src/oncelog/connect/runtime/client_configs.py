"""Kafka client settings for a connector's tasks, assembled as Kafka Connect does.

Precedence, lowest first: the worker's shared client settings (bootstrap servers,
security), the framework's defaults for that client, the worker's ``producer.*`` /
``consumer.*`` / ``admin.*`` settings, then the connector's ``producer.override.*``
/ ``consumer.override.*`` / ``admin.override.*`` settings, which the worker's
``connector.client.config.override.policy`` must allow (Kafka's KIP-458 policies:
``None``, ``Principal``, ``All``).

Settings keep Kafka's (Java client) names; the client layer maps them to its
library. The names used as defaults here mean the same in librdkafka.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from oncelog.connect.api.config import ConfigValue
from oncelog.connect.runtime.worker_config import WorkerConfig

log = logging.getLogger(__name__)

PRODUCER_OVERRIDE = "producer.override."
CONSUMER_OVERRIDE = "consumer.override."
ADMIN_OVERRIDE = "admin.override."
OVERRIDE_PREFIXES = (PRODUCER_OVERRIDE, CONSUMER_OVERRIDE, ADMIN_OVERRIDE)

# What the Principal policy lets a connector choose: its own identity.
PRINCIPAL_KEYS = frozenset({"sasl.jaas.config", "sasl.mechanism", "security.protocol"})


def validate_overrides(policy: str, connector_config: Mapping[str, str]) -> dict[str, ConfigValue]:
    """A :class:`ConfigValue` with an error for each override the policy forbids."""
    result: dict[str, ConfigValue] = {}
    for key, value in connector_config.items():
        prefix = next((p for p in OVERRIDE_PREFIXES if key.startswith(p)), None)
        if prefix is None:
            continue
        client_key = key[len(prefix) :]
        config_value = ConfigValue(key, value)
        allowed = policy == "All" or (policy == "Principal" and client_key in PRINCIPAL_KEYS)
        if not allowed:
            config_value.add_error(
                f"The '{policy}' policy does not allow '{client_key}' to be overridden in the connector configuration."
            )
        result[key] = config_value
    return result


def _overrides(connector_config: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix) :]: v for k, v in connector_config.items() if k.startswith(prefix)}


def source_producer_config(
    worker: WorkerConfig, connector: str, task: int, connector_config: Mapping[str, str]
) -> dict[str, str]:
    """The producer of a source task: idempotent, acks=all, retried without a deadline."""
    config = worker.shared_client_config()
    config.update(
        {
            "enable.idempotence": "true",
            "acks": "all",
            # Idempotence keeps order with up to 5 requests in flight.
            "max.in.flight.requests.per.connection": "5",
            "delivery.timeout.ms": str(2**31 - 1),
            "client.id": f"connector-producer-{connector}-{task}",
        }
    )
    config.update({k: str(v) for k, v in worker.originals_with_prefix("producer.").items()})
    config.update(_overrides(connector_config, PRODUCER_OVERRIDE))
    return config


def sink_consumer_config(
    worker: WorkerConfig, connector: str, task: int, connector_config: Mapping[str, str]
) -> dict[str, str]:
    """The consumer of a sink task: group ``connect-<connector>``, manual commits."""
    config = worker.shared_client_config()
    config.update(
        {
            "group.id": f"connect-{connector}",
            "enable.auto.commit": "false",
            "auto.offset.reset": "earliest",
            "client.id": f"connector-consumer-{connector}-{task}",
        }
    )
    config.update({k: str(v) for k, v in worker.originals_with_prefix("consumer.").items()})
    config.update(_overrides(connector_config, CONSUMER_OVERRIDE))
    return config


def connector_admin_config(
    worker: WorkerConfig, connector: str, connector_config: Mapping[str, str]
) -> dict[str, str]:
    config = worker.shared_client_config()
    config["client.id"] = f"connector-adminclient-{connector}"
    admin = worker.originals_with_prefix("admin.")
    # admin.listeners is the REST admin listener, not a client setting.
    config.update({k: str(v) for k, v in admin.items() if not k.startswith("listeners")})
    config.update(_overrides(connector_config, ADMIN_OVERRIDE))
    return config


def transactional_id(group_id: str, connector: str, task: int) -> str:
    """KIP-618: ``${groupId}-${connector}-${taskId}``."""
    return f"{group_id}-{connector}-{task}"


def _forced(
    config: dict[str, str], key: str, value: str, user: Mapping[str, str], why: str
) -> None:
    if key in user and user[key].strip().lower() != value.lower():
        log.warning(
            "Ignoring the user-supplied value '%s' for %s: %s; using '%s'",
            user[key],
            key,
            why,
            value,
        )
    config[key] = value


def exactly_once_producer_config(
    worker: WorkerConfig, connector: str, task: int, connector_config: Mapping[str, str]
) -> dict[str, str]:
    """The transactional producer of an exactly-once source task: the at-least-once
    producer's settings with the transactional id and idempotence forced."""
    config = source_producer_config(worker, connector, task, connector_config)
    user = {k: str(v) for k, v in worker.originals_with_prefix("producer.").items()}
    user.update(_overrides(connector_config, PRODUCER_OVERRIDE))
    why = "exactly-once source tasks need it"
    _forced(config, "transactional.id", transactional_id(worker.group_id, connector, task), user,
            "exactly-once source tasks use ${groupId}-${connector}-${taskId}")  # fmt: skip
    _forced(config, "enable.idempotence", "true", user, why)
    if "delivery.timeout.ms" not in user and "message.timeout.ms" not in user:
        # A transactional producer's delivery deadline may not exceed its transaction timeout.
        config["delivery.timeout.ms"] = config.get("transaction.timeout.ms", "60000")
    # Offsets-topic keys must land where Java's producer puts them (murmur2).
    config.setdefault("partitioner", "murmur2_random")
    return config


def producer_bootstrap_servers(
    worker: WorkerConfig, connector_config: Mapping[str, str]
) -> str | None:
    """The cluster a connector's producer writes to, when not the worker's: the
    connector's ``producer.override.bootstrap.servers``, else the worker's
    ``producer.bootstrap.servers`` (Kafka's ``Worker.sameOffsetTopicAsWorker`` looks at
    the effective producer config)."""
    override = connector_config.get(PRODUCER_OVERRIDE + "bootstrap.servers")
    if override:
        return override
    worker_level = worker.originals_with_prefix("producer.").get("bootstrap.servers")
    return str(worker_level) if worker_level else None


def _producer_cluster(
    worker: WorkerConfig, connector_config: Mapping[str, str], config: dict[str, str]
) -> dict[str, str]:
    # A separate offsets topic lives on the cluster the connector's producer writes to.
    producer = producer_bootstrap_servers(worker, connector_config)
    if producer:
        config["bootstrap.servers"] = producer
    return config


def offsets_admin_config(
    worker: WorkerConfig, connector: str, connector_config: Mapping[str, str]
) -> dict[str, str]:
    """The admin client creating a connector's separate offsets topic."""
    return _producer_cluster(
        worker, connector_config, connector_admin_config(worker, connector, connector_config)
    )


def offsets_consumer_config(
    worker: WorkerConfig, connector: str, connector_config: Mapping[str, str]
) -> dict[str, str]:
    """The consumer reading a connector's separate offsets topic (on the cluster its
    producer writes to): read_committed, so offsets of aborted transactions are never
    seen."""
    config = worker.shared_client_config()
    config["client.id"] = f"connector-offsets-consumer-{connector}"
    user = {k: str(v) for k, v in worker.originals_with_prefix("consumer.").items()}
    user.update(_overrides(connector_config, CONSUMER_OVERRIDE))
    config.update(user)
    for key in ("group.id", "enable.auto.commit", "auto.offset.reset"):
        config.pop(key, None)
    _forced(config, "isolation.level", "read_committed", user,
            "offsets are read with read_committed")  # fmt: skip
    return _producer_cluster(worker, connector_config, config)
