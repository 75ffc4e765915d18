"""DeleteAcls (API 31): remove the ACLs matching each filter (Cluster ALTER)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, cluster_authorized
from oncelog.broker.apis.acl_wire import filter_from_wire, filter_is_valid
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


def delete_acls(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    authorizer = ctx.broker.authorizer

    def failed(code: ErrorCode, message: str | None) -> Any:
        return make(
            r.DeleteAclsFilterResult, error_code=code, error_message=message, matching_acls=()
        )

    if not authorizer.enabled:
        results = [failed(ErrorCode.security_disabled, "No Authorizer is configured")] * len(
            req.filters
        )
    elif not cluster_authorized(ctx, Op.ALTER):
        results = [failed(ErrorCode.cluster_authorization_failed, None)] * len(req.filters)
    else:
        filters = [filter_from_wire(f) for f in req.filters]
        valid = [f for f in filters if filter_is_valid(f)]
        removed = iter(authorizer.store.remove(valid))
        results = []
        for f in filters:
            if not filter_is_valid(f):
                results.append(failed(ErrorCode.invalid_request, "Invalid ACL filter"))
                continue
            results.append(
                make(
                    r.DeleteAclsFilterResult,
                    error_code=ErrorCode.none,
                    error_message=None,
                    matching_acls=tuple(
                        make(
                            r.DeleteAclsMatchingAcl,
                            error_code=ErrorCode.none,
                            error_message=None,
                            resource_type=int(a.resource_type),
                            resource_name=a.resource_name,
                            pattern_type=int(a.pattern_type),
                            principal=a.principal,
                            host=a.host,
                            operation=int(a.operation),
                            permission_type=int(a.permission),
                        )
                        for a in next(removed)
                    ),
                )
            )
    return make(r.DeleteAclsResponse, filter_results=tuple(results))


API = ApiSpec(ApiKey.DELETE_ACLS, 1, 3, delete_acls)
