"""ApiVersions (API 18): the APIs and version ranges of the registry, and the features.

Features (KIP-584) as Kafka 4.x reports them: ``transaction.version`` is supported from 0
to 2 and finalized at the configured level (KIP-890 part 2 clients use transaction version 2
when it is finalized at 2 or more). Before v4, a supported feature whose minimum is 0 is
left out (KAFKA-17011: older clients reject a 0 minimum); a feature finalized at level 0 is
never listed.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import encode_response, make, response_module

TRANSACTION_VERSION_FEATURE = "transaction.version"
# (name, min, max) of the features this broker implements.
SUPPORTED_FEATURES = ((TRANSACTION_VERSION_FEATURE, 0, 2),)
# Kafka uses the metadata log offset; a single node with static features has one epoch.
FINALIZED_FEATURES_EPOCH = 0
FEATURES_SINCE = 3  # the tagged feature fields (KIP-584)
ZERO_MIN_FEATURES_SINCE = 4


def version_entries(apis: dict[int, ApiSpec], r: ModuleType) -> tuple[Any, ...]:
    return tuple(
        make(r.ApiVersion, api_key=key, min_version=spec.min_version, max_version=spec.max_version)
        for key, spec in sorted(apis.items())
    )


def api_versions(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    if ctx.version < FEATURES_SINCE:
        return make(
            r.ApiVersionsResponse,
            error_code=ErrorCode.none,
            api_keys=version_entries(ctx.broker.apis, r),
        )
    finalized = {TRANSACTION_VERSION_FEATURE: ctx.broker.txn.config.transaction_version}
    return make(
        r.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=version_entries(ctx.broker.apis, r),
        supported_features=tuple(
            make(r.SupportedFeatureKey, name=name, min_version=lo, max_version=hi)
            for name, lo, hi in SUPPORTED_FEATURES
            if lo > 0 or ctx.version >= ZERO_MIN_FEATURES_SINCE
        ),
        finalized_features_epoch=FINALIZED_FEATURES_EPOCH,
        finalized_features=tuple(
            make(r.FinalizedFeatureKey, name=name, max_version_level=level, min_version_level=level)
            for name, level in finalized.items()
            if level > 0
        ),
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


API = ApiSpec(ApiKey.API_VERSIONS, 0, 4, api_versions)
