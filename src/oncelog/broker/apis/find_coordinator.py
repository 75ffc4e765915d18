"""FindCoordinator (API 10): this broker coordinates every group and transaction."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make

KEY_GROUP, KEY_TXN = 0, 1


def find_coordinator(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    r = ctx.response
    key_type = getattr(req, "key_type", KEY_GROUP)
    host, port = ctx.advertised_address
    # v4+ batches keys (an empty batch gets an empty answer); v0-v3 carry one key
    batched = hasattr(req, "coordinator_keys")
    keys = req.coordinator_keys if batched else (req.key,)
    code = ErrorCode.none if key_type in (KEY_GROUP, KEY_TXN) else ErrorCode.invalid_request
    message = None if code == ErrorCode.none else f"unknown key type {key_type}"
    # As Kafka's, whatever the load: a request for an id or group whose partition still
    # loads waits for it, or gets COORDINATOR_LOAD_IN_PROGRESS (coordinator.loader).
    # Group DESCRIBE or TransactionalId DESCRIBE, per key.
    resource, auth_code = (
        (Res.TRANSACTIONAL_ID, ErrorCode.transactional_id_authorization_failed)
        if key_type == KEY_TXN
        else (Res.GROUP, ErrorCode.group_authorization_failed)
    )
    denied_keys = {
        k for k in keys if k is not None and not ctx.authorized(Op.DESCRIBE, resource, k)
    }
    if code == ErrorCode.none and not batched and keys[0] in denied_keys:
        code = auth_code
    if hasattr(r, "Coordinator"):  # v4+: batched
        return make(
            r.FindCoordinatorResponse,
            coordinators=tuple(
                make(
                    r.Coordinator,
                    key=k,
                    node_id=broker.node_id if not code and k not in denied_keys else -1,
                    host=host if not code and k not in denied_keys else "",
                    port=port if not code and k not in denied_keys else -1,
                    error_code=auth_code if not code and k in denied_keys else code,
                    error_message=message,
                )
                for k in keys
            ),
        )
    return make(
        r.FindCoordinatorResponse,
        error_code=code,
        error_message=message,
        node_id=broker.node_id if not code else -1,
        host=host if not code else "",
        port=port if not code else -1,
    )


API = ApiSpec(ApiKey.FIND_COORDINATOR, 0, 4, find_coordinator)
