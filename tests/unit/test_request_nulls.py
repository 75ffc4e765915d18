"""forbidden_null: the first null a request's schema forbids, by path."""

from __future__ import annotations

import dataclasses
import datetime

import pytest
from kio.schema.delete_topics.v2.request import DeleteTopicsRequest
from kio.schema.list_offsets.v1 import request as lo
from kio.schema.metadata.v10 import request as md

from oncelog.protocol.messages import InvalidRequestError, decode_request
from oncelog.protocol.nulls import forbidden_null

T = datetime.timedelta(seconds=1)


def test_null_top_level_array() -> None:
    assert forbidden_null(DeleteTopicsRequest(topic_names=None, timeout=T)) == "topic_names"  # type: ignore[arg-type]
    assert forbidden_null(DeleteTopicsRequest(topic_names=("a",), timeout=T)) is None


def test_null_item_of_a_string_array() -> None:
    request = DeleteTopicsRequest(topic_names=("a", None), timeout=T)  # type: ignore[arg-type]
    assert forbidden_null(request) == "topic_names[1]"


def test_null_nested_array_and_string() -> None:
    topic = lo.ListOffsetsTopic(name="t", partitions=None)  # type: ignore[arg-type]
    request = lo.ListOffsetsRequest(replica_id=-1, topics=(topic,))
    assert forbidden_null(request) == "topics[0].partitions"
    topic = lo.ListOffsetsTopic(name=None, partitions=())  # type: ignore[arg-type]
    assert forbidden_null(lo.ListOffsetsRequest(replica_id=-1, topics=(topic,))) == "topics[0].name"


def test_nullable_fields_may_be_null() -> None:
    request = md.MetadataRequest(
        topics=None,
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    assert forbidden_null(request) is None
    topic = md.MetadataRequestTopic(topic_id=None, name=None)
    assert forbidden_null(dataclasses.replace(request, topics=(topic,))) is None


@pytest.mark.parametrize(
    "hex_frame",
    [
        "004100000003628e0000000000",  # DescribeTransactions v0, null transactional_ids
        "00140002000d95ab0002667affffffff000a667a",  # DeleteTopics v2, null topic_names
        "00020001000000020002667affffffffffffffff",  # ListOffsets v1, null topics
    ],
)
def test_decode_request_rejects_the_reported_frames(hex_frame: str) -> None:
    frame = bytes.fromhex(hex_frame)
    api_key, version = int.from_bytes(frame[:2], "big"), int.from_bytes(frame[2:4], "big")
    with pytest.raises(InvalidRequestError, match="is null"):
        decode_request(frame, api_key, version)
