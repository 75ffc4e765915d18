"""SaslAuthenticate (API 36): one SASL token in, one challenge out.

A failed exchange is answered with SASL_AUTHENTICATION_FAILED, logged once with
the peer and mechanism, and the connection is closed. v1+ tells the client the
session lifetime (``connections.max.reauth.ms``, KIP-368).
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make
from oncelog.security.sasl import SaslAuthenticationError

log = logging.getLogger(__name__)
NO_LIFETIME = datetime.timedelta(0)


def _failed(ctx: RequestContext, code: ErrorCode, message: str) -> Any:
    ctx.session.close_after_response = message
    ctx.session.authenticator = None
    return make(
        ctx.response.SaslAuthenticateResponse,
        error_code=code,
        error_message=message,
        auth_bytes=b"",
        session_lifetime=NO_LIFETIME,
    )


def sasl_authenticate(ctx: RequestContext, req: Any) -> Any:
    session = ctx.session
    authenticator = session.authenticator
    if authenticator is None and not session.protocol.uses_sasl:
        # Kafka's KafkaApis.handleSaslAuthenticateRequest: answered, connection kept.
        return make(
            ctx.response.SaslAuthenticateResponse,
            error_code=ErrorCode.illegal_sasl_state,
            error_message="SaslAuthenticate on a listener without SASL",
            auth_bytes=b"",
            session_lifetime=NO_LIFETIME,
        )
    if authenticator is None:
        return _failed(ctx, ErrorCode.illegal_sasl_state, "SaslAuthenticate before SaslHandshake")
    try:
        challenge = authenticator.step(bytes(req.auth_bytes))
        principal = authenticator.principal
        if principal is not None and session.authenticated and principal != session.principal:
            raise SaslAuthenticationError(
                f"Cannot change principals during re-authentication from {session.principal}"
            )
    except SaslAuthenticationError as exc:
        # A password-guessing run must not flood the log: the first failure of each
        # window is logged, the rest counted (client_faults) and in /metrics.
        ctx.broker.stats.failed_authentications += 1
        ctx.broker.client_faults.note(
            "failed authentications", logging.INFO,
            "Failed authentication with %s (mechanism %s, listener %s): %s",
            ctx.peer, authenticator.mechanism, session.listener, exc,
        )  # fmt: skip
        return _failed(ctx, ErrorCode.sasl_authentication_failed, str(exc))
    lifetime_ms = 0
    if principal is not None:
        lifetime_ms, session.expires_at_ms = ctx.broker.authentication.session_expiry(
            session.listener
        )
        session.principal = principal
        session.authenticated = True
        session.mechanism = authenticator.mechanism.upper()
        session.authenticator = None
    return make(
        ctx.response.SaslAuthenticateResponse,
        error_code=ErrorCode.none,
        error_message=None,
        auth_bytes=challenge,
        session_lifetime=datetime.timedelta(milliseconds=lifetime_ms),
    )


API = ApiSpec(ApiKey.SASL_AUTHENTICATE, 0, 2, sasl_authenticate)
