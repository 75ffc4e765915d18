"""AlterConfigs (API 33): replace a topic's config overrides or a dynamic broker config layer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.config_resources import apply_config_change
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.broker.topics import TopicError
from oncelog.protocol.api_keys import ApiKey


def alter_configs(ctx: RequestContext, req: Any) -> Any:
    def replace(_: dict[str, str], configs: Any, __: Mapping[str, str]) -> dict[str, str]:
        out = {}
        for c in configs:
            if c.value is None:
                raise TopicError(
                    ErrorCode.invalid_request, f"Null value not supported for : {c.name}"
                )
            out[c.name] = c.value
        return out

    return apply_config_change(ctx, req, replace)


API = ApiSpec(ApiKey.ALTER_CONFIGS, 0, 2, alter_configs)
