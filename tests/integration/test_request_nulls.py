"""A null where the schema forbids one gets Kafka's answer, never a handler traceback.

Regression tests for the fuzzer's crash sites: the minimised frames it
reported, and, generated from kio's schemas, a null in every non-nullable array of
every served API and version, at the top level and one level down. The answer is
INVALID_REQUEST in the response's top-level error field where the API has one,
otherwise a closed connection; the broker logs no traceback and keeps serving.
"""

from __future__ import annotations

import dataclasses
import datetime
import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    is_optional,
)

from oncelog.broker.apis.registry import API_SPECS
from oncelog.embedded import EmbeddedBroker

from .protocol_fuzz import encode
from .test_bad_input import assert_other_client_works

CLOSED = "closed"


def answer(broker: EmbeddedBroker, frame: bytes) -> bytes | str:
    """The broker's response frame (without its size), or CLOSED."""
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
        s.sendall(frame)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                return CLOSED
            data += chunk
        return data[4:]


def top_level_error(api_key: int, version: int, response: bytes) -> ErrorCode:
    schema = load_response_schema(api_key, version)
    _, pos = entity_reader(schema.__header_schema__)(response, 0)
    body, _ = entity_reader(schema)(response, pos)
    return ErrorCode(body.error_code)


# -- the minimised reproducers the fuzzer reported --------------------------------------------
@pytest.mark.parametrize(
    "hex_frame",
    [
        pytest.param("0000000d004100000003628e0000000000", id="DescribeTransactions-v0-null-ids"),
        pytest.param(
            "0000001400140002000d95ab0002667affffffff000a667a", id="DeleteTopics-v2-null-names"
        ),
        pytest.param(
            "0000001400020001000000020002667affffffffffffffff", id="ListOffsets-v1-null-topics"
        ),
        pytest.param(
            "000000240003000a000000070002667a000200000000000000000000000000000001000001000000",
            id="Metadata-v10-null-name-unknown-id",
        ),
    ],
)
def test_reported_crash_frames_close_the_connection(broker: EmbeddedBroker, hex_frame: str) -> None:
    # None of these APIs has a top-level error field: Kafka closes the connection.
    assert answer(broker, bytes.fromhex(hex_frame)) == CLOSED
    assert_other_client_works(broker)
    log_text = broker.log_path.read_text()
    assert "Traceback" not in log_text and "BUG:" not in log_text
    assert "invalid " in log_text  # logged as the client's fault, one line


def test_null_in_an_api_with_a_top_level_error_is_invalid_request(broker: EmbeddedBroker) -> None:
    # ListTransactions v0 with state_filters null (compact count 0)
    frame = _null_variants(66, 0)
    assert frame, "ListTransactions v0 has non-nullable arrays"
    for path, data in frame:
        response = answer(broker, data)
        assert response != CLOSED, path
        assert isinstance(response, bytes)
        assert top_level_error(66, 0, response) == ErrorCode.invalid_request, path


# -- a null in every non-nullable array of every served API and version ----------------------
def _sample(kafka_type: str) -> Any:
    return {
        "string": "x",
        "bytes": b"",
        "records": None,
        "bool": False,
        "uuid": None,
        "float64": 0.0,
        "error_code": ErrorCode.none,
        "timedelta_i32": datetime.timedelta(0),
        "timedelta_i64": datetime.timedelta(0),
        "datetime_i64": datetime.datetime.fromtimestamp(0, datetime.UTC),
    }.get(kafka_type, 0)


def filled(cls: type) -> Any:
    """An instance with every field set to a neutral value and every array empty."""
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        kind = classify_field(f)
        if isinstance(kind, EntityTupleField | PrimitiveTupleField):
            kwargs[f.name] = ()
        elif isinstance(kind, EntityField):
            kwargs[f.name] = filled(kind.type_)
        else:
            value = _sample(f.metadata["kafka_type"])
            kwargs[f.name] = None if value is None and is_optional(f) else value
    return cls(**kwargs)


def _one_item(f: dataclasses.Field[Any]) -> Any:
    kind = classify_field(f)
    if isinstance(kind, EntityTupleField):
        return filled(kind.type_)
    return _sample(f.metadata["kafka_type"])


def _nulled(frame_empty: bytes, frame_one: bytes, flexible: bool) -> bytes:
    """``frame_empty`` with the array that differs from ``frame_one`` made null."""
    pairs = enumerate(zip(frame_empty, frame_one, strict=False))
    d = next(i for i, (a, b) in pairs if i >= 4 and a != b)  # past the size prefix
    if flexible:  # compact count: 1 (empty) vs 2 (one item) in one byte; 0 is null
        out = frame_empty[:d] + b"\x00" + frame_empty[d + 1 :]
    else:  # int32 count: 0 vs 1 differ in its last byte; -1 is null
        out = frame_empty[: d - 3] + b"\xff\xff\xff\xff" + frame_empty[d + 1 :]
    body = out[4:]
    return struct.pack(">i", len(body)) + body


def _arrays(cls: type) -> Iterator[dataclasses.Field[Any]]:
    for f in dataclasses.fields(cls):
        if "tag" not in f.metadata and isinstance(
            classify_field(f), EntityTupleField | PrimitiveTupleField
        ):
            yield f


def _null_variants(api_key: int, version: int) -> list[tuple[str, bytes]]:
    cls = load_request_schema(api_key, version)
    flexible = bool(getattr(cls, "__flexible__", False))
    base = filled(cls)
    out = []
    for f in _arrays(cls):
        if not is_optional(f):
            empty = encode(base, 1)
            one = encode(dataclasses.replace(base, **{f.name: (_one_item(f),)}), 1)
            out.append((f.name, _nulled(empty, one, flexible)))
        kind = classify_field(f)
        if isinstance(kind, EntityTupleField):
            item = filled(kind.type_)
            for g in _arrays(kind.type_):
                if is_optional(g):
                    continue
                empty = encode(dataclasses.replace(base, **{f.name: (item,)}), 1)
                inner = dataclasses.replace(item, **{g.name: (_one_item(g),)})
                one = encode(dataclasses.replace(base, **{f.name: (inner,)}), 1)
                out.append((f"{f.name}[0].{g.name}", _nulled(empty, one, flexible)))
    return out


def _served() -> list[tuple[int, int]]:
    return [
        (spec.key, v) for spec in API_SPECS for v in range(spec.min_version, spec.max_version + 1)
    ]


def test_a_null_in_every_non_nullable_array_gets_kafkas_answer(broker: EmbeddedBroker) -> None:
    cases = 0
    answered = closed = 0
    for api_key, version in _served():
        for path, frame in _null_variants(api_key, version):
            cases += 1
            response = answer(broker, frame)
            if response == CLOSED:
                closed += 1
                continue
            assert isinstance(response, bytes)
            assert top_level_error(api_key, version, response) == ErrorCode.invalid_request, (
                api_key,
                version,
                path,
            )
            answered += 1
    # 66 requests carry INVALID_REQUEST in a top-level error field; the other 171 APIs
    # (or versions) have none, so the connection closes. The totals follow the advertised
    # versions (test_api_versions_coverage pins those). ConsumerGroupHeartbeat v0-v1 add
    # two answered cases (a null partition list), ConsumerGroupDescribe v0-v1 two closed
    # ones (null group ids; its response has no top-level error); Produce v11-12 and
    # TxnOffsetCommit v5 six closed ones.
    assert (cases, answered, closed) == (237, 66, 171)
    assert_other_client_works(broker)
    log_text = broker.log_path.read_text()
    assert "Traceback" not in log_text and "BUG:" not in log_text


# -- further crash sites the fuzzer found ----------------------------------------------------------
def test_find_coordinator_v4_with_no_keys_gets_an_empty_answer(broker: EmbeddedBroker) -> None:
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest

    response = answer(broker, encode(FindCoordinatorRequest(key_type=0, coordinator_keys=()), 1))
    assert isinstance(response, bytes)
    schema = load_response_schema(10, 4)
    _, pos = entity_reader(schema.__header_schema__)(response, 0)
    body, _ = entity_reader(schema)(response, pos)
    assert body.coordinators == ()
    assert "BUG:" not in broker.log_path.read_text()
