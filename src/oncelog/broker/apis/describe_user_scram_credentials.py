"""DescribeUserScramCredentials (API 50): which mechanisms and iteration counts
each user has; never salts or keys."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, cluster_authorized, denied
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


def describe_user_scram_credentials(ctx: RequestContext, req: Any) -> Any:
    store = ctx.broker.scram_credentials
    r = ctx.response
    if not cluster_authorized(ctx, Op.DESCRIBE):
        return denied(ctx, ErrorCode.cluster_authorization_failed, results=())
    requested = [u.name for u in req.users] if req.users else store.users()
    results = []
    for i, name in enumerate(requested):
        mechanisms = store.mechanisms(name)
        if name in requested[:i]:
            continue
        if requested.count(name) > 1:
            code, message = (
                ErrorCode.duplicate_resource,
                f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}",
            )
        elif not mechanisms:
            code, message = (
                ErrorCode.resource_not_found,
                f"Attempt to describe a user credential that does not exist: {name}",
            )
        else:
            code, message = ErrorCode.none, None
        infos = (
            tuple(
                make(r.CredentialInfo, mechanism=int(m), iterations=c.iterations)
                for m, c in sorted(mechanisms.items())
            )
            if code is ErrorCode.none
            else ()
        )
        results.append(
            make(
                r.DescribeUserScramCredentialsResult,
                user=name,
                error_code=code,
                error_message=message,
                credential_infos=infos,
            )
        )
    return make(
        r.DescribeUserScramCredentialsResponse,
        error_code=ErrorCode.none,
        error_message=None,
        results=tuple(results),
    )


API = ApiSpec(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, describe_user_scram_credentials)
