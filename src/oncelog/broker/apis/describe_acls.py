"""DescribeAcls (API 29): the ACLs matching a filter, grouped by resource pattern
(Cluster DESCRIBE)."""

from __future__ import annotations

from itertools import groupby
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, cluster_authorized, denied
from oncelog.broker.apis.acl_wire import filter_from_wire, filter_is_valid
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


def describe_acls(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    authorizer = ctx.broker.authorizer
    if not authorizer.enabled:
        return denied(ctx, ErrorCode.security_disabled, error_message="No Authorizer is configured")
    if not cluster_authorized(ctx, Op.DESCRIBE):
        return denied(ctx, ErrorCode.cluster_authorization_failed)
    acl_filter = filter_from_wire(req)
    if not filter_is_valid(acl_filter):
        return denied(ctx, ErrorCode.invalid_request, error_message="Invalid ACL filter")
    acls = authorizer.store.matching(acl_filter)
    resources = []
    for (rtype, name, pattern), group in groupby(
        acls, key=lambda a: (a.resource_type, a.resource_name, a.pattern_type)
    ):
        resources.append(
            make(
                r.DescribeAclsResource,
                resource_type=int(rtype),
                resource_name=name,
                pattern_type=int(pattern),
                acls=tuple(
                    make(
                        r.AclDescription,
                        principal=a.principal,
                        host=a.host,
                        operation=int(a.operation),
                        permission_type=int(a.permission),
                    )
                    for a in group
                ),
            )
        )
    return make(
        r.DescribeAclsResponse,
        error_code=ErrorCode.none,
        error_message=None,
        resources=tuple(resources),
    )


API = ApiSpec(ApiKey.DESCRIBE_ACLS, 1, 3, describe_acls)
