"""ApiVersions (API 18): the APIs and version ranges of the registry, and the features.

Features (KIP-584) as Kafka 4.x reports them: ``group.version`` is supported from 0 to 1
and ``transaction.version`` from 0 to 2, each finalized at the configured level (at
``group.version`` 1 the consumer group protocol of KIP-848 is served; KIP-890 part 2 clients
use transaction version 2 when it is finalized at 2 or more). Before v4, a supported feature whose minimum is 0 is
left out (KAFKA-17011: older clients reject a 0 minimum); a feature finalized at level 0 is
never listed.
"""

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

GROUP_VERSION_FEATURE = "group.version"
TRANSACTION_VERSION_FEATURE = "transaction.version"
# (name, min, max) of the features this broker implements.
SUPPORTED_FEATURES = ((GROUP_VERSION_FEATURE, 0, 1), (TRANSACTION_VERSION_FEATURE, 0, 2))
# Kafka uses the metadata log offset; a single node with static features has one epoch.
FINALIZED_FEATURES_EPOCH = 0
FEATURES_SINCE = 3  # the tagged feature fields (KIP-584)
ZERO_MIN_FEATURES_SINCE = 4


def version_entries(apis: dict[int, ApiSpec], r: ModuleType) -> tuple[Any, ...]:
    return tuple(
        make(r.ApiVersion, api_key=key, min_version=spec.min_version, max_version=spec.max_version)
        for key, spec in sorted(apis.items())
    )


def api_versions(ctx: RequestContext, req: Any) -> EncodedBody:
    # Clients send it first on every connection, and a pipelining client may send
    # thousands: the answer is encoded once per version and feature level, not per request.
    levels = (
        (GROUP_VERSION_FEATURE, ctx.broker.groups.config.group_version),
        (TRANSACTION_VERSION_FEATURE, ctx.broker.txn.config.transaction_version),
    )
    return _encoded_answer(_ranges(ctx.broker.apis), ctx.header.api_version, levels)


_last_ranges: tuple[dict[int, ApiSpec], Ranges] | None = None


def _ranges(apis: dict[int, ApiSpec]) -> Ranges:
    """The registry's ranges, recomputed only when another registry is asked about."""
    global _last_ranges
    if _last_ranges is None or _last_ranges[0] is not apis:
        ranges = tuple((key, s.min_version, s.max_version) for key, s in apis.items())
        _last_ranges = (apis, ranges)
    return _last_ranges[1]


@cache
def _encoded_answer(
    ranges: Ranges, version: int, finalized: tuple[tuple[str, int], ...]
) -> EncodedBody:
    r = response_module(ApiKey.API_VERSIONS, version)
    entries = tuple(
        make(r.ApiVersion, api_key=key, min_version=lo, max_version=hi)
        for key, lo, hi in sorted(ranges)
    )
    if version < FEATURES_SINCE:
        answer = make(r.ApiVersionsResponse, error_code=ErrorCode.none, api_keys=entries)
        return encode_body(ApiKey.API_VERSIONS, version, answer)
    answer = make(
        r.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=entries,
        supported_features=tuple(
            make(r.SupportedFeatureKey, name=name, min_version=lo, max_version=hi)
            for name, lo, hi in SUPPORTED_FEATURES
            if lo > 0 or version >= ZERO_MIN_FEATURES_SINCE
        ),
        finalized_features_epoch=FINALIZED_FEATURES_EPOCH,
        finalized_features=tuple(
            make(r.FinalizedFeatureKey, name=name, max_version_level=level, min_version_level=level)
            for name, level in finalized
            if level > 0
        ),
    )
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


API = ApiSpec(ApiKey.API_VERSIONS, 0, 4, api_versions)
