"""The structural pre-check must accept every valid request and reject forged lengths."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.metadata.v12 import request as md
from kio.schema.produce.v9 import request as pr
from kio.serial import entity_writer

from oncelog.protocol.guard import FrameShapeError, check_request
from oncelog.protocol.messages import RequestParseError, decode_request


def encode(req: object) -> bytes:
    buf = io.BytesIO()
    header_cls = req.__header_schema__  # type: ignore[attr-defined]
    entity_writer(header_cls)(
        buf,
        header_cls(
            request_api_key=req.__api_key__,
            request_api_version=req.__version__,
            correlation_id=1,
            client_id="c",
        ),
    )  # type: ignore[attr-defined]
    entity_writer(type(req))(buf, req)
    return buf.getvalue()


@given(st.lists(st.text(max_size=30), max_size=20), st.booleans())
def test_valid_metadata_requests_pass(names: list[str], auto: bool) -> None:
    req = md.MetadataRequest(
        topics=tuple(md.MetadataRequestTopic(topic_id=None, name=n) for n in names),
        allow_auto_topic_creation=auto,
        include_topic_authorized_operations=False,
    )
    frame = encode(req)
    check_request(req.__header_schema__, md.MetadataRequest, frame)
    _, body = decode_request(frame, 3, 12)
    assert [t.name for t in body.topics] == names


@given(st.binary(max_size=3000))
def test_valid_produce_requests_pass(records: bytes) -> None:
    req = pr.ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout=__import__("datetime").timedelta(seconds=1),
        topic_data=(
            pr.TopicProduceData(
                name="t", partition_data=(pr.PartitionProduceData(index=0, records=records),)
            ),
        ),
    )
    _, body = decode_request(encode(req), 0, 9)
    assert body.topic_data[0].partition_data[0].records == records


@pytest.mark.parametrize("count", [0xFFFFFFF, 2**31 - 1])
def test_forged_array_count_is_rejected_without_allocating(count: int) -> None:
    header = struct.pack(">hhih", 3, 12, 7, -1) + b"\x00"
    body = bytearray()
    n = count + 1
    while n >= 0x80:  # unsigned varint
        body.append((n & 0x7F) | 0x80)
        n >>= 7
    body.append(n)
    body += b"\x00\x00\x00"
    with pytest.raises(FrameShapeError):
        check_request(
            md.MetadataRequest.__header_schema__, md.MetadataRequest, header + bytes(body)
        )
    with pytest.raises(RequestParseError):
        decode_request(header + bytes(body), 3, 12)


@given(st.binary(max_size=200))
def test_random_bytes_never_crash(data: bytes) -> None:
    frame = struct.pack(">hhi", 0, 9, 1) + data
    try:
        decode_request(frame, 0, 9)
    except RequestParseError:
        pass
