"""ApiVersions (API 18): the APIs and version ranges of the registry."""

from __future__ import annotations

from functools import cache
from types import ModuleType
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import (
    EncodedBody,
    encode_body,
    encode_response,
    make,
    response_module,
)

# (api key, min version, max version) per served API
Ranges = tuple[tuple[int, int, int], ...]


def version_entries(apis: dict[int, ApiSpec], r: ModuleType) -> tuple[Any, ...]:
    return tuple(
        make(r.ApiVersion, api_key=key, min_version=spec.min_version, max_version=spec.max_version)
        for key, spec in sorted(apis.items())
    )


def api_versions(ctx: RequestContext, req: Any) -> EncodedBody:
    # Clients send it first on every connection, and a pipelining client may send
    # thousands: the answer is encoded once per version, not per request.
    return _encoded_answer(_ranges(ctx.broker.apis), ctx.header.api_version)


_last_ranges: tuple[dict[int, ApiSpec], Ranges] | None = None


def _ranges(apis: dict[int, ApiSpec]) -> Ranges:
    """The registry's ranges, recomputed only when another registry is asked about."""
    global _last_ranges
    if _last_ranges is None or _last_ranges[0] is not apis:
        ranges = tuple((key, s.min_version, s.max_version) for key, s in apis.items())
        _last_ranges = (apis, ranges)
    return _last_ranges[1]


@cache
def _encoded_answer(ranges: Ranges, version: int) -> EncodedBody:
    r = response_module(ApiKey.API_VERSIONS, version)
    entries = tuple(
        make(r.ApiVersion, api_key=key, min_version=lo, max_version=hi)
        for key, lo, hi in sorted(ranges)
    )
    answer = make(r.ApiVersionsResponse, error_code=ErrorCode.none, api_keys=entries)
    return encode_body(ApiKey.API_VERSIONS, version, answer)


def unsupported_version_response(apis: dict[int, ApiSpec], correlation_id: int) -> bytes:
    """Kafka answers an unknown ApiVersions version with a v0 response so the
    client can retry with a version from the list."""
    r = response_module(ApiKey.API_VERSIONS, 0)
    resp = make(
        r.ApiVersionsResponse,
        error_code=ErrorCode.unsupported_version,
        api_keys=version_entries(apis, r),
    )
    return encode_response(ApiKey.API_VERSIONS, 0, correlation_id, resp)


API = ApiSpec(ApiKey.API_VERSIONS, 0, 3, api_versions)
