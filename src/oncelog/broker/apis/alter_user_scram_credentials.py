"""AlterUserScramCredentials (API 51): upsert or delete SCRAM credentials.

The client salts the password; the broker keeps salt, stored key, server key and
iterations, durably. Errors per user as Kafka's ScramControlManager: an unknown
mechanism, too few/many iterations, a user named twice for one mechanism, or
deleting a credential that does not exist. A user with any error changes nothing.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, cluster_authorized
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make
from oncelog.security.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    credential_from_salted_password,
)


def _mechanism(code: int) -> ScramMechanism | None:
    try:
        mechanism = ScramMechanism(code)
    except ValueError:
        return None
    return None if mechanism is ScramMechanism.UNKNOWN else mechanism


def alter_user_scram_credentials(ctx: RequestContext, req: Any) -> Any:
    store = ctx.broker.scram_credentials
    errors: dict[str, tuple[ErrorCode, str]] = {}
    seen: set[tuple[str, int]] = set()
    order: list[str] = []

    def fail(name: str, code: ErrorCode, message: str) -> None:
        errors.setdefault(name, (code, message))

    items = [(d.name, d.mechanism, None) for d in req.deletions] + [
        (u.name, u.mechanism, u) for u in req.upsertions
    ]
    if not cluster_authorized(ctx, Op.ALTER):
        for name, _, _ in items:
            fail(name, ErrorCode.cluster_authorization_failed, "Cluster ALTER denied")
    upserts: list[tuple[str, ScramMechanism, ScramCredential]] = []
    deletions: list[tuple[str, ScramMechanism]] = []
    for name, code, upsertion in items:
        if name not in order:
            order.append(name)
        if name in errors:
            continue
        if (name, code) in seen:
            fail(
                name,
                ErrorCode.duplicate_resource,
                "A user credential cannot be altered twice in the same request",
            )
            continue
        seen.add((name, code))
        mechanism = _mechanism(code)
        if not name:
            fail(name, ErrorCode.unacceptable_credential, "Username must not be empty")
        elif mechanism is None:
            fail(name, ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
        elif upsertion is None:
            if store.get(name, mechanism) is None:
                fail(
                    name,
                    ErrorCode.resource_not_found,
                    "Attempt to delete a user credential that does not exist",
                )
            else:
                deletions.append((name, mechanism))
        elif upsertion.iterations < MIN_ITERATIONS:
            fail(name, ErrorCode.unacceptable_credential, "Too few iterations")
        elif upsertion.iterations > MAX_ITERATIONS:
            fail(name, ErrorCode.unacceptable_credential, "Too many iterations")
        else:
            upserts.append(
                (
                    name,
                    mechanism,
                    credential_from_salted_password(
                        mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations
                    ),
                )
            )
    store.apply(
        [u for u in upserts if u[0] not in errors], [d for d in deletions if d[0] not in errors]
    )
    r = ctx.response
    results = tuple(
        make(
            r.AlterUserScramCredentialsResult,
            user=name,
            error_code=errors.get(name, (ErrorCode.none, None))[0],
            error_message=errors.get(name, (ErrorCode.none, None))[1],
        )
        for name in order
    )
    return make(r.AlterUserScramCredentialsResponse, results=results)


API = ApiSpec(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0, alter_user_scram_credentials)
