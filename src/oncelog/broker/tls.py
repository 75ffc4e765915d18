"""Server-side TLS contexts from Kafka's PEM settings (per listener).

Keys and certificates come from ``ssl.keystore.location`` (one PEM file holding
the key and its chain) or the inline ``ssl.keystore.certificate.chain`` /
``ssl.keystore.key`` pair; trusted CAs from ``ssl.truststore.location`` or the
inline ``ssl.truststore.certificates``.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path

from oncelog.broker.config import BrokerConfig, BrokerConfigError

_PROTOCOLS = {
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


def openssl_cipher_name(iana: str) -> str | None:
    """Kafka (Java) names TLS 1.2 suites the IANA way; OpenSSL does not.

    ``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`` -> ``ECDHE-RSA-AES128-GCM-SHA256``.
    TLS 1.3 suites (``TLS_AES_128_GCM_SHA256``) cannot be restricted through
    Python's ``ssl`` and give None; a name without ``TLS_`` is taken as OpenSSL's.
    """
    if not iana.startswith("TLS_"):
        return iana
    kx, sep, rest = iana[4:].partition("_WITH_")
    if not sep:
        return None
    rest = (
        rest.replace("AES_128_", "AES128-")
        .replace("AES_256_", "AES256-")
        .replace("CHACHA20_POLY1305_SHA256", "CHACHA20-POLY1305")
        .replace("_", "-")
    )
    return f"{kx.replace('_', '-')}-{rest}"


def _load_keystore(ctx: ssl.SSLContext, get: dict[str, str]) -> None:
    password = get["ssl.key.password"] or get["ssl.keystore.password"] or None
    if get["ssl.keystore.type"].upper() != "PEM":
        raise BrokerConfigError("only ssl.keystore.type=PEM is supported")
    if get["ssl.keystore.location"]:
        ctx.load_cert_chain(get["ssl.keystore.location"], password=password)
        return
    chain, key = get["ssl.keystore.certificate.chain"], get["ssl.keystore.key"]
    if not (chain and key):
        raise BrokerConfigError(
            "a TLS listener needs ssl.keystore.location or "
            "ssl.keystore.certificate.chain + ssl.keystore.key"
        )
    # ssl can only load a key from a file: a private temporary one, removed at once.
    fd, name = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(key.replace("\\n", "\n") + "\n" + chain.replace("\\n", "\n") + "\n")
        ctx.load_cert_chain(name, password=password)
    finally:
        Path(name).unlink(missing_ok=True)


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    names = (
        "ssl.keystore.type ssl.keystore.location ssl.keystore.password "
        "ssl.keystore.certificate.chain ssl.keystore.key ssl.key.password "
        "ssl.truststore.type ssl.truststore.location ssl.truststore.certificates "
        "ssl.client.auth ssl.enabled.protocols ssl.cipher.suites"
    ).split()
    get = {name: config.for_listener(listener, name) for name in names}
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        _load_keystore(ctx, get)
        if get["ssl.truststore.type"].upper() != "PEM":
            raise BrokerConfigError("only ssl.truststore.type=PEM is supported")
        if get["ssl.truststore.location"]:
            ctx.load_verify_locations(cafile=get["ssl.truststore.location"])
        if get["ssl.truststore.certificates"]:
            ctx.load_verify_locations(
                cadata=get["ssl.truststore.certificates"].replace("\\n", "\n")
            )
    except (OSError, ssl.SSLError) as exc:
        raise BrokerConfigError(f"listener {listener}: cannot load TLS material: {exc}") from exc
    client_auth = get["ssl.client.auth"].strip().lower() or "none"
    if client_auth not in _CLIENT_AUTH:
        raise BrokerConfigError(
            f"ssl.client.auth must be none, requested or required, not {client_auth!r}"
        )
    ctx.verify_mode = _CLIENT_AUTH[client_auth]
    if client_auth != "none":
        # Loaded here, not at import: a broker without client certificates never needs
        # it, and one with them should not pay for it on the first handshake.
        from cryptography import x509  # noqa: F401
    versions = [v.strip() for v in get["ssl.enabled.protocols"].split(",") if v.strip()]
    unknown = [v for v in versions if v not in _PROTOCOLS]
    if unknown or not versions:
        raise BrokerConfigError(f"ssl.enabled.protocols: unsupported {unknown or versions}")
    ctx.minimum_version = min(_PROTOCOLS[v] for v in versions)
    ctx.maximum_version = max(_PROTOCOLS[v] for v in versions)
    suites = [s.strip() for s in get["ssl.cipher.suites"].split(",") if s.strip()]
    openssl_names = [n for n in (openssl_cipher_name(s) for s in suites) if n]
    if openssl_names:
        try:
            ctx.set_ciphers(":".join(openssl_names))
        except ssl.SSLError as exc:
            raise BrokerConfigError(f"ssl.cipher.suites: {exc}") from exc
    return ctx


def peer_dn(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> str | None:
    """The client certificate's subject in RFC 2253 form, or None without one."""
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return None
    from cryptography import x509

    return x509.load_der_x509_certificate(der).subject.rfc4514_string()
