"""IncrementalAlterConfigs (API 44, KIP-339): set, delete, append or subtract topic or
dynamic broker configs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.config_resources import apply_config_change
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.broker.topics import TopicError
from oncelog.protocol.api_keys import ApiKey

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


def incremental_alter_configs(ctx: RequestContext, req: Any) -> Any:
    def patch(current: dict[str, str], configs: Any, lists: Mapping[str, str]) -> dict[str, str]:
        out = dict(current)
        seen = set()
        for c in configs:
            if c.name in seen:
                raise TopicError(
                    ErrorCode.invalid_request, f"Error due to duplicate config keys: {c.name}"
                )
            seen.add(c.name)
            op = c.config_operation
            if op == OP_SET:
                if c.value is None:
                    raise TopicError(
                        ErrorCode.invalid_request, f"Null value not supported for : {c.name}"
                    )
                out[c.name] = c.value
            elif op == OP_DELETE:
                out.pop(c.name, None)
            elif op in (OP_APPEND, OP_SUBTRACT):
                if c.name not in lists:
                    raise TopicError(
                        ErrorCode.invalid_config,
                        f"Config value append is not allowed for config key: {c.name}",
                    )
                base = out.get(c.name, lists[c.name])
                items = [x for x in base.split(",") if x]
                values = [x for x in (c.value or "").split(",") if x]
                if op == OP_APPEND:
                    items += [v for v in values if v not in items]
                else:
                    items = [x for x in items if x not in values]
                out[c.name] = ",".join(items)
            else:
                raise TopicError(ErrorCode.invalid_request, f"Unknown config operation {op}")
        return out

    return apply_config_change(ctx, req, patch)


API = ApiSpec(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, incremental_alter_configs)
