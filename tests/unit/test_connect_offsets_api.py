"""KIP-875 request and response bodies, with Kafka's messages."""

from __future__ import annotations

from typing import Any

import pytest

from oncelog.connect.api import partition_key
from oncelog.connect.api.errors import BadRequestException
from oncelog.connect.api.records import TopicPartition
from oncelog.connect.api.target_state import TargetState
from oncelog.connect.runtime.connector_offsets import (
    parse_sink_offsets,
    parse_source_offsets,
    require_stopped,
    sink_offsets_json,
    source_offsets_json,
    success_message,
)


def test_source_offsets() -> None:
    body = {
        "offsets": [
            {"partition": {"filename": "/a"}, "offset": {"position": 5}},
            {"partition": {"filename": "/b"}, "offset": None},
        ]
    }
    assert parse_source_offsets(body) == {
        partition_key({"filename": "/a"}): {"position": 5},
        partition_key({"filename": "/b"}): None,
    }
    assert source_offsets_json([({"filename": "/a"}, {"position": 5})]) == {
        "offsets": [{"partition": {"filename": "/a"}, "offset": {"position": 5}}]
    }
    with pytest.raises(
        BadRequestException,
        match="Offsets may only contain primitive types as values, but field x contains dict",
    ):
        parse_source_offsets({"offsets": [{"partition": {"filename": "/a"}, "offset": {"x": {}}}]})


def test_sink_offsets() -> None:
    body = {"offsets": [
        {"partition": {"kafka_topic": "t", "kafka_partition": 1}, "offset": {"kafka_offset": 10}},
        {"partition": {"kafka_topic": "t", "kafka_partition": "2"}, "offset": None},
    ]}  # fmt: skip
    assert parse_sink_offsets(body) == {TopicPartition("t", 1): 10, TopicPartition("t", 2): None}
    assert sink_offsets_json({TopicPartition("t", 1): 10}) == {
        "offsets": [
            {
                "partition": {"kafka_topic": "t", "kafka_partition": 1},
                "offset": {"kafka_offset": 10},
            }
        ]
    }


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "Partitions / offsets need to be provided for an alter offsets request"),
        ({"offsets": []}, "Partitions / offsets need to be provided for an alter offsets request"),
        ({"offsets": [{"partition": {"kafka_topic": "t"}, "offset": None}]},
         "The partition for a sink connector offset must contain the keys 'kafka_topic' and 'kafka_partition'"),
        ({"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": "x"}, "offset": None}]},
         "Kafka partitions must be valid integers"),
        ({"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"offset": 1}}]},
         "The offset for a sink connector should either be null or contain the key 'kafka_offset'"),
        ({"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": "a"}}]},
         "Kafka offsets must be valid integers"),
    ],
)  # fmt: skip
def test_sink_offset_errors(body: Any, message: str) -> None:
    with pytest.raises(BadRequestException) as err:
        parse_sink_offsets(body)
    assert str(err.value) == message
    assert err.value.body() == {"error_code": 400, "message": message}


def test_stopped_requirement_and_messages() -> None:
    require_stopped("c", TargetState.STOPPED)
    with pytest.raises(
        BadRequestException, match="'PUT' request to the '/connectors/c/stop' endpoint"
    ):
        require_stopped("c", TargetState.PAUSED)
    assert success_message(reset=False, connector_confirmed=True) == {
        "message": "The offsets for this connector have been altered successfully"
    }
    assert success_message(reset=True, connector_confirmed=False)["message"].startswith(
        "The Connect framework-managed offsets for this connector have been reset successfully. However,"
    )
