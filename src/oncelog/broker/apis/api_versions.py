"""ApiVersions (API 18): the APIs and version ranges of the registry."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import encode_response, make, response_module


def version_entries(apis: dict[int, ApiSpec], r: ModuleType) -> tuple[Any, ...]:
    return tuple(
        make(r.ApiVersion, api_key=key, min_version=spec.min_version, max_version=spec.max_version)
        for key, spec in sorted(apis.items())
    )


def api_versions(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    return make(
        r.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=version_entries(ctx.broker.apis, r),
    )


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
