"""Re-authentication (KIP-368) only when enabled, and only with the mechanism the
connection first used (Kafka's SaslServerAuthenticator)."""

from __future__ import annotations

from pathlib import Path

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker
from tests.integration.security import PLAIN_USERS, plain_jaas, plain_login

VERSIONS = ApiVersionsRequest(client_software_name="probe", client_software_version="1")


def _settings(reauth_ms: int) -> dict[str, str]:
    return {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
        "connections.max.reauth.ms": str(reauth_ms),
    }


def test_reauthentication_is_refused_when_off(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "data", settings=_settings(0)) as broker:
        with WireClient(broker.bootstrap) as c:
            plain_login(c, "alice", PLAIN_USERS["alice"])
            again = c.request(SaslHandshakeRequest(mechanism="PLAIN"))
            assert again.error_code == ErrorCode.illegal_sasl_state
            assert c.request(VERSIONS).error_code == ErrorCode.none  # still served


def test_reauthentication_keeps_its_mechanism(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "data", settings=_settings(60_000)) as broker:
        with WireClient(broker.bootstrap) as c:
            plain_login(c, "alice", PLAIN_USERS["alice"])
            plain_login(c, "alice", PLAIN_USERS["alice"])  # re-authenticated, same mechanism
            assert c.request(VERSIONS).error_code == ErrorCode.none
            switched = c.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))
            assert switched.error_code == ErrorCode.unsupported_sasl_mechanism
            assert list(switched.mechanisms) == ["PLAIN"]
            c.sock.settimeout(5)
            assert c.sock.recv(1) == b""  # then closed
