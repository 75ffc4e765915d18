"""The hand-coded Produce request decoder and response encoder against kio (Hypothesis).

The fast decoder must give what kio gives for every request it takes, never take a
frame kio would refuse, and keep each partition's records a writable view into the
frame. The hand-encoded response must be byte-identical to kio's encoding.
"""

from __future__ import annotations

import datetime
import importlib
import io
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from oncelog.protocol.messages import (
    RequestParseError,
    decode_request,
    encode_response,
    make,
    response_module,
)
from oncelog.protocol.produce_wire import (
    MAX_VERSION,
    MIN_VERSION,
    ProduceRequestView,
    decode_produce,
    encode_produce_success,
)

VERSIONS = st.integers(MIN_VERSION, MAX_VERSION)
TEXT = st.text(max_size=12)
NAMES = st.text(min_size=1, max_size=12)


def request_module(version: int) -> Any:
    return importlib.import_module(f"kio.schema.produce.v{version}.request")


def encode_request(version: int, req: Any, client_id: str | None) -> bytes:
    buf = io.BytesIO()
    header_cls = req.__header_schema__
    entity_writer(header_cls)(
        buf,
        header_cls(
            request_api_key=0,
            request_api_version=version,
            correlation_id=77,
            client_id=client_id,
        ),
    )
    entity_writer(type(req))(buf, req)
    return buf.getvalue()


@st.composite
def produce_requests(draw: st.DrawFn) -> tuple[int, bytes, Any]:
    version = draw(VERSIONS)
    m = request_module(version)
    topics = tuple(
        m.TopicProduceData(
            name=draw(NAMES),
            partition_data=tuple(
                m.PartitionProduceData(index=draw(st.integers(-5, 2**31 - 1)), records=records)
                for records in draw(st.lists(st.binary(max_size=300), max_size=3))
            ),
        )
        for _ in range(draw(st.integers(0, 3)))
    )
    req = m.ProduceRequest(
        transactional_id=draw(st.none() | TEXT),
        acks=draw(st.sampled_from([-1, 0, 1, 2])),
        timeout=datetime.timedelta(milliseconds=draw(st.integers(0, 2**31 - 1))),
        topic_data=topics,
    )
    return version, encode_request(version, req, draw(st.none() | TEXT)), req


def as_plain(req: Any) -> tuple[Any, ...]:
    return (
        req.transactional_id,
        int(req.acks),
        req.timeout,
        [
            (t.name, [(int(p.index), bytes(p.records)) for p in t.partition_data])
            for t in req.topic_data
        ],
    )


def kio_decode(frame: bytes, version: int) -> tuple[Any, Any]:
    """The straightforward path: what decode_request does when the fast path declines."""
    from oncelog.protocol import messages

    reader = messages._request_reader(0, version)
    header, pos = reader[0](frame, 0)
    body, _ = reader[1](frame, pos)
    return header, body


@settings(max_examples=300, deadline=None)
@given(produce_requests())
def test_fast_decode_equals_kio(case: tuple[int, bytes, Any]) -> None:
    version, frame, req = case
    fast = decode_produce(bytearray(frame))
    assert fast is not None
    correlation_id, client_id, view = fast
    header, body = kio_decode(frame, version)
    assert (correlation_id, client_id) == (header.correlation_id, header.client_id)
    assert as_plain(view) == as_plain(body) == as_plain(req)
    for t in view.topic_data:
        for p in t.partition_data:
            assert isinstance(p.records, memoryview) and not p.records.readonly


@settings(max_examples=500, deadline=None)
@given(produce_requests(), st.data())
def test_fast_decode_never_accepts_what_kio_refuses(
    case: tuple[int, bytes, Any], data: st.DataObject
) -> None:
    """Random corruption: truncation, overwritten bytes, appended junk."""
    version, frame, _ = case
    raw = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 4))):
        if len(raw) > 8:
            at = data.draw(st.integers(8, len(raw) - 1))
            raw[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(8, len(raw)))
    raw = raw[:cut] + data.draw(st.binary(max_size=4))
    fast = decode_produce(raw)
    if fast is None:
        return  # kio decides, exactly as before
    try:
        header, body = kio_decode(bytes(raw), version)
    except Exception as exc:  # noqa: BLE001 - any refusal by kio is a mismatch
        raise AssertionError(f"fast path took a frame kio refuses: {exc}") from exc
    assert as_plain(fast[2]) == as_plain(body)
    assert fast[:2] == (header.correlation_id, header.client_id)


def test_decode_request_falls_back_to_kio_for_null_records() -> None:
    m = request_module(9)
    req = m.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=1),
        topic_data=(
            m.TopicProduceData(
                name="t", partition_data=(m.PartitionProduceData(index=0, records=None),)
            ),
        ),
    )
    frame = encode_request(9, req, "c")
    assert decode_produce(frame) is None
    _, body = decode_request(frame, 0, 9)
    assert not isinstance(body, ProduceRequestView)
    assert body.topic_data[0].partition_data[0].records is None


def test_decode_request_uses_the_fast_path_and_kio_still_rejects_truncation() -> None:
    m = request_module(10)
    req = m.ProduceRequest(
        transactional_id="tx",
        acks=-1,
        timeout=datetime.timedelta(seconds=1),
        topic_data=(
            m.TopicProduceData(
                name="t", partition_data=(m.PartitionProduceData(index=2, records=b"abc"),)
            ),
        ),
    )
    frame = encode_request(10, req, "c")
    header, body = decode_request(bytearray(frame), 0, 10)
    assert isinstance(body, ProduceRequestView)
    assert (header.correlation_id, header.client_id, body.transactional_id) == (77, "c", "tx")
    assert body.timeout == datetime.timedelta(seconds=1)
    try:
        decode_request(frame[:-6], 0, 10)
    except RequestParseError:
        pass
    else:
        raise AssertionError("a truncated frame decoded")


@st.composite
def successes(draw: st.DrawFn) -> tuple[int, list[tuple[str, list[tuple[int, int, int, int]]]]]:
    version = draw(VERSIONS)
    i64 = st.integers(-1, 2**63 - 1)
    topics = draw(
        st.lists(
            st.tuples(
                NAMES,
                st.lists(
                    st.tuples(st.integers(0, 2**31 - 1), i64, st.integers(-1, 2**42), i64),
                    max_size=4,
                ),
            ),
            max_size=4,
        )
    )
    return version, topics


@settings(max_examples=300, deadline=None)
@given(successes())
def test_hand_encoded_response_equals_kio(
    case: tuple[int, list[tuple[str, list[tuple[int, int, int, int]]]]],
) -> None:
    from kio._kio_native import tz_aware_from_i64
    from kio.static.primitive import i64

    version, topics = case
    r = response_module(0, version)
    kio_response = make(
        r.ProduceResponse,
        responses=tuple(
            make(
                r.TopicProduceResponse,
                name=name,
                partition_responses=tuple(
                    make(
                        r.PartitionProduceResponse,
                        index=index,
                        error_code=ErrorCode.none,
                        base_offset=base,
                        log_append_time=tz_aware_from_i64(i64(append_time))
                        if append_time >= 0
                        else None,
                        log_start_offset=start,
                        record_errors=(),
                        error_message=None,
                    )
                    for index, base, append_time, start in parts
                ),
            )
            for name, parts in topics
        ),
    )
    expected = encode_response(0, version, 12345, kio_response)
    assert encode_response(0, version, 12345, encode_produce_success(version, topics)) == expected
