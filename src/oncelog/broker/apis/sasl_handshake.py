"""SaslHandshake (API 17): pick the SASL mechanism of the exchange that follows.

Only v1 is served: the tokens then travel inside SaslAuthenticate requests.
An unsupported mechanism is answered, then the connection is closed, as Kafka's
SaslServerAuthenticator does. Sent again on an authenticated connection, it
starts a KIP-368 re-authentication.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


def sasl_handshake(ctx: RequestContext, req: Any) -> Any:
    session = ctx.session
    r = ctx.response
    if not session.protocol.uses_sasl:
        # Kafka's KafkaApis.handleSaslHandshakeRequest: answered, and the connection
        # (with whatever is pipelined behind it) carries on.
        return make(r.SaslHandshakeResponse, error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    authentication = ctx.broker.authentication
    enabled = tuple(authentication.enabled_mechanisms(session.listener))
    if session.mechanism is not None:  # re-authentication (KIP-368)
        if authentication.reauth_ms(session.listener) <= 0:
            # Off (connections.max.reauth.ms=0): answered as KafkaApis answers a
            # handshake after authentication, and the connection carries on.
            return make(
                r.SaslHandshakeResponse, error_code=ErrorCode.illegal_sasl_state, mechanisms=()
            )
        if req.mechanism.upper() != session.mechanism:
            # Kafka's SaslServerAuthenticator: a re-authentication keeps its mechanism.
            session.close_after_response = (
                f"re-authentication with {req.mechanism!r} after {session.mechanism!r}"
            )
            return make(
                r.SaslHandshakeResponse,
                error_code=ErrorCode.unsupported_sasl_mechanism,
                mechanisms=(session.mechanism,),
            )
    authenticator = authentication.authenticator(session.listener, req.mechanism.upper())
    if authenticator is None:
        session.close_after_response = f"unsupported SASL mechanism {req.mechanism!r}"
        return make(
            r.SaslHandshakeResponse,
            error_code=ErrorCode.unsupported_sasl_mechanism,
            mechanisms=enabled,
        )
    session.authenticator = authenticator
    return make(r.SaslHandshakeResponse, error_code=ErrorCode.none, mechanisms=enabled)


API = ApiSpec(ApiKey.SASL_HANDSHAKE, 1, 1, sasl_handshake)
