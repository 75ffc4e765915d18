"""Shared pieces of the per-API authorization rules (Kafka's KafkaApis checks).

``denied`` builds a whole-request error response; the rules themselves sit in
each API's module, next to the handler they guard.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make
from oncelog.security.acl import CLUSTER_NAME, VALID_OPERATIONS, AclOperation, ResourceType

Op = AclOperation
Res = ResourceType


def _response_class(ctx: RequestContext) -> Any:
    name = "".join(w.capitalize() for w in ApiKey(ctx.header.api_key).name.split("_"))
    return getattr(ctx.response, f"{name}Response")


def denied(ctx: RequestContext, code: ErrorCode, **fields: Any) -> Any:
    """The API's response with only a top-level error (non-null strings left empty)."""
    cls = _response_class(ctx)
    for f in dataclasses.fields(cls):
        if f.name not in fields and f.default is dataclasses.MISSING:
            if f.type is str:
                fields[f.name] = ""
            elif f.type is bytes:
                fields[f.name] = b""
    return make(cls, error_code=code, **fields)


def cluster_authorized(
    ctx: RequestContext, operation: AclOperation, *, log_denied: bool = True
) -> bool:
    return ctx.authorized(operation, Res.CLUSTER, CLUSTER_NAME, log_denied=log_denied)


def group_read_rule(ctx: RequestContext, req: Any) -> Any | None:
    """JoinGroup, SyncGroup, Heartbeat, LeaveGroup: Group READ."""
    if ctx.authorized(Op.READ, Res.GROUP, req.group_id):
        return None
    return denied(ctx, ErrorCode.group_authorization_failed)


def transactional_id_write_rule(ctx: RequestContext, req: Any) -> Any | None:
    """EndTxn: TransactionalId WRITE."""
    if ctx.authorized(Op.WRITE, Res.TRANSACTIONAL_ID, req.transactional_id):
        return None
    return denied(ctx, ErrorCode.transactional_id_authorization_failed)


def authorized_operations(ctx: RequestContext, resource_type: ResourceType, name: str) -> int:
    """Kafka's ``authorizedOperations`` bit field: bit ``op`` set for each operation the
    resource type supports that the principal may perform (all of them without an
    authorizer)."""
    bits = 0
    for op in VALID_OPERATIONS[resource_type]:
        if ctx.authorized(op, resource_type, name, log_denied=False):
            bits |= 1 << op
    return bits


def cluster_rule(operation: AclOperation) -> Any:
    def rule(ctx: RequestContext, req: Any) -> Any | None:
        if cluster_authorized(ctx, operation):
            return None
        return denied(ctx, ErrorCode.cluster_authorization_failed)

    return rule
