"""Thin layer over kio: decode request frames, build and encode responses.

kio generates one dataclass module per API version, and fields come and go
between versions. Handlers build responses with ``make``, which drops the
keyword arguments the target version does not have, so one handler body serves
every version.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import typing
from functools import cache
from types import ModuleType
from typing import Any

from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.framing import begin_frame, end_frame
from oncelog.protocol.guard import FrameShapeError, check_request
from oncelog.protocol.nulls import forbidden_null
from oncelog.protocol.produce_wire import EncodedResponse, decode_produce

_HEADER_PREFIX = struct.Struct(">hhi")
_PRODUCE = int(ApiKey.PRODUCE)
ZERO_MS = datetime.timedelta(0)


class RequestParseError(Exception):
    """The frame is not a valid request of the version it claims."""


class InvalidRequestError(Exception):
    """The request decodes but breaks its schema or the API's rules (a null where the
    schema forbids one): Kafka's INVALID_REQUEST."""


@dataclasses.dataclass(slots=True, frozen=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_header(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id): fixed layout in every header version."""
    if len(frame) < _HEADER_PREFIX.size:
        raise RequestParseError("frame shorter than a request header")
    return _HEADER_PREFIX.unpack_from(frame, 0)


@cache
def _request_reader(api_key: int, version: int) -> tuple[Any, Any, Any, Any]:
    schema = load_request_schema(api_key, version)
    header = schema.__header_schema__
    return entity_reader(header), entity_reader(schema), header, schema


def decode_request(
    frame: bytes | bytearray | memoryview, api_key: int, version: int
) -> tuple[RequestHeader, Any]:
    if api_key == _PRODUCE:  # Produce: its records stay in the frame (see produce_wire)
        fast = decode_produce(frame)
        if fast is not None:
            correlation_id, client_id, produce = fast
            return RequestHeader(api_key, version, correlation_id, client_id), produce
    header_reader, body_reader, header_schema, body_schema = _request_reader(api_key, version)
    if not isinstance(frame, bytes):  # kio reads only read-only buffers; a view avoids a copy
        frame = memoryview(frame).toreadonly()
    try:
        check_request(header_schema, body_schema, frame)
    except FrameShapeError as exc:
        raise RequestParseError(f"malformed {api_key}v{version} request: {exc}") from exc
    try:
        header, pos = header_reader(frame, 0)
        body, _ = body_reader(frame, pos)
    except Exception as exc:  # kio raises assorted errors on malformed input
        raise RequestParseError(f"malformed {api_key}v{version} request: {exc}") from exc
    null = forbidden_null(body)
    if null is not None:
        raise InvalidRequestError(f"non-nullable field {null} is null")
    return (
        RequestHeader(api_key, version, header.correlation_id, getattr(header, "client_id", None)),
        body,
    )


@cache
def response_module(api_key: int, version: int) -> ModuleType:
    return load_payload_module(api_key, version, EntityType.response)


@cache
def _response_writer(api_key: int, version: int) -> tuple[Any, Any, Any]:
    schema = load_response_schema(api_key, version)
    header_schema = schema.__header_schema__
    return entity_writer(header_schema), entity_writer(schema), header_schema


@dataclasses.dataclass(slots=True, frozen=True)
class EncodedBody:
    """A response body already encoded: a handler whose answer never changes (ApiVersions)
    encodes it once, and a pipelining client then costs a header per request."""

    body: bytes


def encode_body(api_key: int, version: int, response: Any) -> EncodedBody:
    _, body_writer, _ = _response_writer(api_key, version)
    buf = io.BytesIO()
    body_writer(buf, response)
    return EncodedBody(buf.getvalue())


def encode_response(api_key: int, version: int, correlation_id: int, response: Any) -> bytes:
    """Size-prefixed response frame, with the header version kio's schema names."""
    if isinstance(response, EncodedResponse):
        return response.frame(correlation_id)
    header_writer, body_writer, header_schema = _response_writer(api_key, version)
    buf = io.BytesIO()
    begin_frame(buf)
    header_writer(buf, header_schema(correlation_id=correlation_id))
    if isinstance(response, EncodedBody):
        buf.write(response.body)
    else:
        body_writer(buf, response)
    return end_frame(buf)


def holds_more_entries(response: Any, limit: int) -> bool:
    """Whether ``response`` holds more than ``limit`` array entries, counted two levels
    deep without encoding anything: a cheap bound on what encoding it costs."""
    count = 0
    for entries in _arrays(response):
        count += len(entries)
        if count > limit:
            return True
        for entry in entries:
            for inner in _arrays(entry):
                count += len(inner)
                if count > limit:
                    return True
    return False


def _arrays(entity: Any) -> list[tuple[Any, ...]]:
    if not dataclasses.is_dataclass(entity):
        return []
    return [
        value
        for f in dataclasses.fields(entity)
        if isinstance(value := getattr(entity, f.name), tuple) and value
    ]


@cache
def _has_top_level_error(api_key: int, version: int) -> bool:
    return has_field(load_response_schema(api_key, version), "error_code")


def error_response(
    api_key: int, version: int, correlation_id: int, code: ErrorCode
) -> bytes | None:
    """A response carrying ``code`` in its top-level error field, or None when the API
    has no such field (or its other fields cannot be left empty): then Kafka closes the
    connection instead."""
    if not _has_top_level_error(api_key, version):
        return None
    try:
        response = make(load_response_schema(api_key, version), error_code=code)
        return encode_response(api_key, version, correlation_id, response)
    except Exception:  # a non-nullable field without a neutral value
        return None


@cache
def _field_info(cls: type) -> tuple[frozenset[str], dict[str, Any]]:
    names = set()
    required_defaults: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        names.add(f.name)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required_defaults[f.name] = _implicit_default(f)
    return frozenset(names), required_defaults


def _implicit_default(f: dataclasses.Field[Any]) -> Any:
    kafka_type = f.metadata.get("kafka_type")
    if kafka_type == "error_code":
        return ErrorCode.none
    if kafka_type == "timedelta_i32" or kafka_type == "timedelta_i64":
        return ZERO_MS
    if kafka_type in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return 0
    if kafka_type == "bool":
        return False
    if kafka_type == "string":
        return None
    if kafka_type is None:  # nested entity or array of them
        if typing.get_origin(f.type) is tuple:
            return ()
        if dataclasses.is_dataclass(f.type):
            return make(f.type)  # type: ignore[arg-type]
    return None


def make(cls: type, **kwargs: Any) -> Any:
    """Instantiate a kio dataclass, ignoring fields this version lacks and
    filling fields the caller left out with Kafka's implicit defaults."""
    names, defaults = _field_info(cls)
    args = {k: v for k, v in kwargs.items() if k in names}
    for name, default in defaults.items():
        args.setdefault(name, default)
    return cls(**args)


def has_field(cls: type, name: str) -> bool:
    return name in _field_info(cls)[0]
