"""A standalone worker's configuration (Kafka's ``StandaloneConfig``)."""

from __future__ import annotations

from collections.abc import Mapping

from oncelog.connect.api.errors import ConfigException
from oncelog.connect.runtime.worker_config import (
    CONFIG_TOPIC,
    EXACTLY_ONCE_SOURCE_SUPPORT,
    GROUP_ID,
    OFFSET_TOPIC,
    STATUS_TOPIC,
    WorkerConfig,
)

OFFSET_STORAGE_FILE = "offset.storage.file.filename"
# Settings of a distributed worker that a standalone worker has no use for.
DISTRIBUTED_ONLY = (GROUP_ID, CONFIG_TOPIC, OFFSET_TOPIC, STATUS_TOPIC)


class StandaloneConfig(WorkerConfig):
    """A standalone worker's configuration (Kafka's ``StandaloneConfig``): the worker
    settings without a group or internal topics, plus ``offset.storage.file.filename``
    (required). Exactly-once source support is a distributed-mode feature (KIP-618)."""

    def __init__(self, props: Mapping[str, str]) -> None:
        props = dict(props)
        offsets_file = props.pop(OFFSET_STORAGE_FILE, "").strip()
        if not offsets_file:
            raise ConfigException(
                f'Missing required configuration "{OFFSET_STORAGE_FILE}" which has no default value.'
            )
        support = props.get(EXACTLY_ONCE_SOURCE_SUPPORT, "disabled").strip().lower()
        if support != "disabled":
            raise ConfigException(
                EXACTLY_ONCE_SOURCE_SUPPORT,
                support,
                "Exactly-once source support is only available in distributed mode",
            )
        for key in DISTRIBUTED_ONLY:
            props.pop(key, None)  # unused in standalone mode, as in Kafka
        super().__init__(
            {
                **props,
                GROUP_ID: "connect-standalone",
                CONFIG_TOPIC: "unused-in-standalone-mode",
                OFFSET_TOPIC: "unused-in-standalone-mode",
                STATUS_TOPIC: "unused-in-standalone-mode",
            }
        )
        self.offsets_file = offsets_file
