"""Test-side security material: a throw-away CA (trustme) and client settings."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trustme


@dataclass(frozen=True)
class TlsFiles:
    ca: Path  # the CA certificate clients and the broker trust
    server: Path  # the broker's key + chain (PEM), for ssl.keystore.location
    client_cert: Path
    client_key: Path
    client_dn: str


def make_tls(directory: Path, client_cn: str = "alice") -> TlsFiles:
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="oncelog tests")
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert(
        f"{client_cn}.clients.test",
        common_name=client_cn,
        organization_name="oncelog",
        organization_unit_name="eng",
    )
    files = TlsFiles(
        directory / "ca.pem",
        directory / "server.pem",
        directory / "client.pem",
        directory / "client.key",
        f"CN={client_cn},OU=eng,O=oncelog",
    )
    ca.cert_pem.write_to_path(str(files.ca))
    server.private_key_and_cert_chain_pem.write_to_path(str(files.server))
    for i, blob in enumerate(client.cert_chain_pems):
        blob.write_to_path(str(files.client_cert), append=i > 0)
    client.private_key_pem.write_to_path(str(files.client_key))
    return files


def tls_listener_settings(
    tls: TlsFiles, listener: str, client_auth: str = "none"
) -> dict[str, str]:
    prefix = f"listener.name.{listener.lower()}."
    return {
        prefix + "ssl.keystore.type": "PEM",
        prefix + "ssl.keystore.location": str(tls.server),
        prefix + "ssl.truststore.type": "PEM",
        prefix + "ssl.truststore.location": str(tls.ca),
        prefix + "ssl.client.auth": client_auth,
    }


def confluent_ssl(tls: TlsFiles, *, client_cert: bool = False) -> dict[str, object]:
    conf: dict[str, object] = {"security.protocol": "SSL", "ssl.ca.location": str(tls.ca)}
    if client_cert:
        conf["ssl.certificate.location"] = str(tls.client_cert)
        conf["ssl.key.location"] = str(tls.client_key)
    return conf


PLAIN_USERS = {"alice": "alice-secret", "bob": "bob-secret", "admin": "admin-secret"}


def plain_jaas(users: dict[str, str]) -> str:
    entries = " ".join(f'user_{name}="{password}"' for name, password in users.items())
    return (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="admin" password="admin-secret" {entries};'
    )


def secured_settings(tls: TlsFiles, **extra: str) -> dict[str, str]:
    """PLAINTEXT (setup), SASL_PLAINTEXT with PLAIN, SASL_SSL with SCRAM."""
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        **tls_listener_settings(tls, "SASL_SSL"),
        **extra,
    }


def confluent_sasl(
    protocol: str, mechanism: str, user: str, password: str, tls: TlsFiles | None = None
) -> dict[str, object]:
    conf: dict[str, object] = {
        "security.protocol": protocol,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    if tls is not None:
        conf["ssl.ca.location"] = str(tls.ca)
    return conf


def plain_login(c: Any, user: str, password: str) -> Any:
    """SaslHandshake + SaslAuthenticate (PLAIN) on a raw WireClient; the response."""
    from kio.schema.errors import ErrorCode
    from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

    assert c.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == ErrorCode.none
    resp = c.request(
        SaslAuthenticateRequest(auth_bytes=b"\0" + user.encode() + b"\0" + password.encode())
    )
    assert resp.error_code == ErrorCode.none
    return resp
