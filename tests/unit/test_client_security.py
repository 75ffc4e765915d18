"""Security settings (librdkafka names) and the SASL exchange of the protocol client,
byte-exact over a socket pair against a scramp server (no broker)."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from oncelog.client.config import ClientConfig
from oncelog.client.errors import AuthenticationError
from oncelog.client.sasl import Plain, Scram, authenticate, mechanism_for
from oncelog.client.security import ClientConfigError, SecurityConfig
from oncelog.client.wire import WireClient, encode_request
from oncelog.spark.options import OncelogOptionError, parse_read_options, parse_write_options
from tests.integration.secure_proxy import SaslAuthenticator, read_request

USERS = {"alice": "s3cret", "bob": "hunter2"}


# -- settings -----------------------------------------------------------------------------


def test_defaults_are_plaintext() -> None:
    cfg = SecurityConfig.from_conf({})
    assert cfg.protocol == "PLAINTEXT" and not cfg.tls and not cfg.sasl


def test_librdkafka_names_any_case() -> None:
    cfg = SecurityConfig.from_conf(
        {
            "security.protocol": "sasl_ssl",
            "ssl.ca.location": "/ca.pem",
            "ssl.endpoint.identification.algorithm": "none",
            "sasl.mechanisms": "scram-sha-512",
            "sasl.username": "alice",
            "sasl.password": "s3cret",
            "linger.ms": "5",
        }
    )
    assert (cfg.protocol, cfg.tls, cfg.sasl, cfg.ca_location, cfg.check_hostname) == (
        "SASL_SSL",
        True,
        True,
        "/ca.pem",
        False,
    )
    assert (cfg.sasl_mechanism, cfg.sasl_username, cfg.sasl_password) == (
        "SCRAM-SHA-512",
        "alice",
        "s3cret",
    )
    assert (
        SecurityConfig.from_conf(
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "a",
                "sasl.password": "b",
            }
        ).sasl_mechanism
        == "PLAIN"
    )


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        (
            {"security.protocol": "TLS"},
            "security.protocol must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL, got 'TLS'",
        ),
        (
            {"security.protocol": "SASL_SSL", "sasl.username": "a", "sasl.password": "b"},
            "sasl.mechanism must be one of",
        ),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "GSSAPI",
                "sasl.username": "a",
                "sasl.password": "b",
            },
            "got 'GSSAPI'",
        ),
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"},
            "needs sasl.username and sasl.password",
        ),
        ({"ssl.endpoint.identification.algorithm": "dns"}, "https or none"),
        (
            {"security.protocol": "SSL", "ssl.key.location": "/k.pem"},
            "without ssl.certificate.location",
        ),
    ],
)
def test_bad_settings_are_one_precise_error(conf: dict[str, str], message: str) -> None:
    with pytest.raises(ClientConfigError, match=message.replace("(", r"\(")):
        SecurityConfig.from_conf(conf)


def test_an_unknown_protocol_never_reaches_the_network() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        address = f"127.0.0.1:{server.getsockname()[1]}"
        with pytest.raises(ClientConfigError):
            ClientConfig.of(address, {"security.protocol": "SSL_PLAINTEXT"})
        with pytest.raises(ClientConfigError):
            WireClient(address, security=SecurityConfig.from_conf({"security.protocol": "ssl-ish"}))
        server.settimeout(0.2)
        with pytest.raises(TimeoutError):
            server.accept()  # nobody connected


def test_missing_ca_file_is_a_config_error() -> None:
    with pytest.raises(ClientConfigError, match="cannot load the TLS settings"):
        SecurityConfig.from_conf(
            {"security.protocol": "SSL", "ssl.ca.location": "/no/such/ca.pem"}
        ).ssl_context()


def test_client_config_keeps_only_connection_settings() -> None:
    cfg = ClientConfig.of(
        "h:1", {"security.protocol": "SSL", "linger.ms": "5", "socket.timeout.ms": "100"}
    )
    assert dict(cfg.conf) == {"security.protocol": "SSL", "socket.timeout.ms": "100"}
    assert cfg.librdkafka(**{"group.id": "g"}) == {
        "security.protocol": "SSL",
        "socket.timeout.ms": "100",
        "group.id": "g",
        "bootstrap.servers": "h:1",
    }


def test_spark_options_reject_bad_security_settings() -> None:
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    with pytest.raises(OncelogOptionError, match="security.protocol must be one of"):
        parse_read_options({**base, "kafka.security.protocol": "bogus"}, streaming=True)
    with pytest.raises(OncelogOptionError, match="sasl.mechanism"):
        parse_write_options(
            {
                "kafka.bootstrap.servers": "h:1",
                "topic": "t",
                "kafka.security.protocol": "SASL_SSL",
                "kafka.sasl.username": "u",
                "kafka.sasl.password": "p",
            }
        )
    opts = parse_write_options(
        {
            "kafka.bootstrap.servers": "h:1",
            "topic": "t",
            "kafka.security.protocol": "SSL",
            "kafka.linger.ms": "7",
        }
    )
    assert opts.client_config.security.tls and dict(opts.client_config.conf) == {
        "security.protocol": "SSL"
    }


# -- the SASL exchange, over real frames ----------------------------------------------------


@pytest.fixture
def sasl_pair() -> Iterator[
    Callable[[tuple[str, ...]], tuple[Callable[[Any], Any], SaslAuthenticator, list[bool]]]
]:
    socks: list[socket.socket] = []

    def make(
        mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
    ) -> tuple[Callable[[Any], Any], SaslAuthenticator, list[bool]]:
        client, server = socket.socketpair()
        client.settimeout(10)
        socks.extend((client, server))
        auth = SaslAuthenticator(USERS, mechanisms)
        result: list[bool] = []
        threading.Thread(target=lambda: result.append(auth.run(server)), daemon=True).start()
        correlation = iter(range(1, 100))

        def request(req: Any) -> Any:
            cid = next(correlation)
            client.sendall(encode_request(req, cid, "test"))
            size = struct.unpack(">i", client.recv(4, socket.MSG_WAITALL))[0]
            frame = client.recv(size, socket.MSG_WAITALL)
            return WireClient.decode_response(req.__api_key__, req.__version__, frame, cid)

        return request, auth, result

    yield make
    for s in socks:
        s.close()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_exchange_succeeds(sasl_pair: Any, mechanism: str) -> None:
    request, auth, result = sasl_pair()
    security = SecurityConfig.from_conf(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": "alice",
            "sasl.password": "s3cret",
        }
    )
    authenticate(request, mechanism_for(security))
    assert auth.authenticated == "alice"


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_wrong_password_is_an_authentication_error(sasl_pair: Any, mechanism: str) -> None:
    request, auth, _ = sasl_pair()
    mech = Plain("alice", "wrong") if mechanism == "PLAIN" else Scram(mechanism, "alice", "wrong")
    with pytest.raises(AuthenticationError, match="authentication failed") as info:
        authenticate(request, mech)
    assert (
        info.value.error_code == ErrorCode.sasl_authentication_failed and not info.value.retriable
    )
    assert auth.authenticated is None


def test_unsupported_mechanism_names_what_the_broker_offers(sasl_pair: Any) -> None:
    request, _, _ = sasl_pair(("SCRAM-SHA-512",))
    with pytest.raises(
        AuthenticationError,
        match=r"PLAIN refused \(UNSUPPORTED_SASL_MECHANISM\); the broker offers SCRAM-SHA-512",
    ) as info:
        authenticate(request, Plain("alice", "s3cret"))
    assert info.value.error_code == ErrorCode.unsupported_sasl_mechanism


def test_request_encoding() -> None:
    from oncelog.client.sasl import authenticate_request, handshake_request

    a, b = socket.socketpair()
    with a, b:
        a.sendall(encode_request(handshake_request("SCRAM-SHA-256"), 7, "cid"))
        header, body = read_request(b)
        assert (
            header.request_api_key,
            header.request_api_version,
            header.correlation_id,
            header.client_id,
        ) == (17, 1, 7, "cid")
        assert body.mechanism == "SCRAM-SHA-256"
        a.sendall(encode_request(authenticate_request(b"\0alice\0s3cret"), 8, "cid"))
        header, body = read_request(b)
        assert (header.request_api_key, header.request_api_version, header.correlation_id) == (
            36,
            2,
            8,
        )
        assert body.auth_bytes == b"\0alice\0s3cret"


def test_scram_client_verifies_the_server() -> None:
    """A server that does not know the password cannot forge server-final."""
    from scramp import ScramMechanism

    mech = ScramMechanism("SCRAM-SHA-256")
    info = mech.make_auth_info("s3cret")
    server = mech.make_server(lambda user: info)
    client = Scram("SCRAM-SHA-256", "alice", "s3cret")
    server.set_client_first(client.first().decode())
    final = client.step(server.get_server_first().encode())
    assert final is not None and final.startswith(b"c=biws,r=")
    server.set_client_final(final.decode())
    genuine = server.get_server_final()
    assert genuine.startswith("v=")
    with pytest.raises(AuthenticationError):
        client.step(b"v=" + b"A" * 44)
    assert Plain("alice", "s3cret").first() == b"\0alice\0s3cret"
