"""KIP-875 offset management: the bodies of ``GET|PATCH|DELETE /connectors/{c}/offsets``.

Source offsets are listed as ``{"partition": {…}, "offset": {…}}``; sink offsets as
``{"partition": {"kafka_topic": t, "kafka_partition": p}, "offset": {"kafka_offset": n}}``.
A PATCH body is ``{"offsets": [...]}``; a null offset erases that partition's offset.
Changes need the connector to be STOPPED. Error messages are Kafka's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from oncelog.connect.api.connector import partition_key
from oncelog.connect.api.errors import BadRequestException, DataException
from oncelog.connect.api.records import TopicPartition
from oncelog.connect.api.target_state import TargetState
from oncelog.connect.storage.offset_records import validate_format

KAFKA_TOPIC = "kafka_topic"
KAFKA_PARTITION = "kafka_partition"
KAFKA_OFFSET = "kafka_offset"


def require_stopped(connector: str, state: TargetState | None, task_count: int = 0) -> None:
    """Offsets change only for a STOPPED connector with no tasks (Kafka's
    ``DistributedHerder.modifyConnectorOffsetsChecks``)."""
    if state is not TargetState.STOPPED or task_count != 0:
        raise BadRequestException(
            "Connectors must be in the STOPPED state before their offsets can be modified. This can be done for "
            f"the specified connector by issuing a 'PUT' request to the '/connectors/{connector}/stop' endpoint"
        )


def _entries(body: Any) -> list[Mapping[str, Any]]:
    offsets = body.get("offsets") if isinstance(body, Mapping) else None
    if not isinstance(offsets, list) or not offsets:
        raise BadRequestException(
            "Partitions / offsets need to be provided for an alter offsets request"
        )
    for entry in offsets:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("partition"), Mapping):
            raise BadRequestException(
                "Each entry needs a 'partition' object and an 'offset' (an object or null)"
            )
    return offsets


def parse_source_offsets(body: Any) -> dict[Any, dict[str, Any] | None]:
    """partition_key -> offset (None: erase); ``partitions`` keeps the maps."""
    out: dict[Any, dict[str, Any] | None] = {}
    for entry in _entries(body):
        partition, offset = dict(entry["partition"]), entry.get("offset")
        if offset is not None and not isinstance(offset, Mapping):
            raise BadRequestException("Source offsets must be objects or null")
        try:
            validate_format(partition)
            validate_format(offset)
        except DataException as exc:
            raise BadRequestException(str(exc)) from None
        out[partition_key(partition)] = None if offset is None else dict(offset)
    return out


def parse_sink_offsets(body: Any) -> dict[TopicPartition, int | None]:
    out: dict[TopicPartition, int | None] = {}
    for entry in _entries(body):
        partition, offset = entry["partition"], entry.get("offset")
        if KAFKA_TOPIC not in partition or KAFKA_PARTITION not in partition:
            raise BadRequestException(
                f"The partition for a sink connector offset must contain the keys '{KAFKA_TOPIC}' and '{KAFKA_PARTITION}'"
            )
        topic, number = partition[KAFKA_TOPIC], partition[KAFKA_PARTITION]
        if not isinstance(topic, str) or not topic:
            raise BadRequestException("Kafka topics must be valid strings")
        if not _is_int(number):
            raise BadRequestException("Kafka partitions must be valid integers")
        if offset is None:
            out[TopicPartition(topic, int(number))] = None
            continue
        if not isinstance(offset, Mapping) or KAFKA_OFFSET not in offset:
            raise BadRequestException(
                f"The offset for a sink connector should either be null or contain the key '{KAFKA_OFFSET}'"
            )
        if not _is_int(offset[KAFKA_OFFSET]) or int(offset[KAFKA_OFFSET]) < 0:
            raise BadRequestException("Kafka offsets must be valid integers")
        out[TopicPartition(topic, int(number))] = int(offset[KAFKA_OFFSET])
    return out


def _is_int(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, str) and value.lstrip("-").isdigit()


def source_offsets_json(
    pairs: Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]],
) -> dict[str, Any]:
    return {"offsets": [{"partition": dict(p), "offset": dict(o)} for p, o in pairs]}


def sink_offsets_json(offsets: Mapping[TopicPartition, int]) -> dict[str, Any]:
    return {
        "offsets": [
            {
                "partition": {KAFKA_TOPIC: tp.topic, KAFKA_PARTITION: tp.partition},
                "offset": {KAFKA_OFFSET: o},
            }
            for tp, o in sorted(offsets.items())
        ]
    }


def success_message(*, reset: bool, connector_confirmed: bool) -> dict[str, str]:
    """The 200 body; ``connector_confirmed`` is what the connector's ``alter_offsets`` returned."""
    verb = "reset" if reset else "altered"
    if connector_confirmed:
        return {"message": f"The offsets for this connector have been {verb} successfully"}
    return {
        "message": f"The Connect framework-managed offsets for this connector have been {verb} successfully. "
        f"However, if this connector manages offsets externally, they will need to be manually {verb} in the "
        "system that the connector uses."
    }
