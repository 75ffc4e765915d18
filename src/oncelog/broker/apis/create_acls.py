"""CreateAcls (API 30): add ACL bindings (Cluster ALTER), stored durably."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, cluster_authorized
from oncelog.broker.apis.acl_wire import binding_from_creation
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make
from oncelog.security.acl import AclBinding, InvalidAcl


def create_acls(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    authorizer = ctx.broker.authorizer
    results: list[tuple[ErrorCode, str | None]] = []
    valid: list[AclBinding] = []
    if not authorizer.enabled:
        results = [(ErrorCode.security_disabled, "No Authorizer is configured")] * len(
            req.creations
        )
    elif not cluster_authorized(ctx, Op.ALTER):
        results = [(ErrorCode.cluster_authorization_failed, None)] * len(req.creations)
    else:
        for creation in req.creations:
            try:
                valid.append(binding_from_creation(creation).validate())
                results.append((ErrorCode.none, None))
            except InvalidAcl as exc:
                results.append((ErrorCode.invalid_request, str(exc)))
        authorizer.store.add(valid)
    return make(
        r.CreateAclsResponse,
        results=tuple(
            make(r.AclCreationResult, error_code=code, error_message=message)
            for code, message in results
        ),
    )


API = ApiSpec(ApiKey.CREATE_ACLS, 1, 3, create_acls)
