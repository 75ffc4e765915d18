"""TLS contexts from Kafka's PEM settings, shared by every listener and client that
speaks TLS (the broker's listeners, a Connect worker's REST server and client).

Keys and certificates come from ``ssl.keystore.location`` (one PEM file holding the
key and its chain) or the inline ``ssl.keystore.certificate.chain`` /
``ssl.keystore.key`` pair; trusted CAs from ``ssl.truststore.location`` or the inline
``ssl.truststore.certificates``, as Kafka's ``DefaultSslEngineFactory`` reads them for
``ssl.keystore.type=PEM``. Settings arrive as a plain mapping: each caller decides
which prefix applies (a broker listener's ``listener.name.x.``, Connect's
``listeners.https.``); a missing key takes Kafka's default.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Mapping
from pathlib import Path

KEYSTORE_KEYS = (
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.key.password",
)
TRUSTSTORE_KEYS = ("ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates")
ALGORITHM_KEYS = ("ssl.enabled.protocols", "ssl.cipher.suites")
# Every key a TLS context is built from (``ssl.endpoint.identification.algorithm``:
# client side only; ``ssl.client.auth``: server side only).
CONTEXT_KEYS = (
    *KEYSTORE_KEYS,
    *TRUSTSTORE_KEYS,
    *ALGORITHM_KEYS,
    "ssl.client.auth",
    "ssl.endpoint.identification.algorithm",
)
_DEFAULTS = {
    "ssl.keystore.type": "PEM",
    "ssl.truststore.type": "PEM",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.client.auth": "none",
    "ssl.endpoint.identification.algorithm": "https",
}
_PROTOCOLS = {
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


class TlsConfigError(ValueError):
    """TLS settings that cannot make a context; the message names the setting."""


def _get(settings: Mapping[str, str], key: str) -> str:
    value = settings.get(key)
    return str(value).strip() if value not in (None, "") else _DEFAULTS.get(key, "")


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


def has_keystore(settings: Mapping[str, str]) -> bool:
    return bool(
        _get(settings, "ssl.keystore.location") or _get(settings, "ssl.keystore.certificate.chain")
    )


def load_keystore(ctx: ssl.SSLContext, settings: Mapping[str, str], *, required: bool) -> None:
    """This side's key and certificate chain (a server's identity, or a client's for
    mutual TLS); ``required``: a server cannot do without one."""
    if _get(settings, "ssl.keystore.type").upper() != "PEM":
        raise TlsConfigError("only ssl.keystore.type=PEM is supported")
    password = _get(settings, "ssl.key.password") or _get(settings, "ssl.keystore.password") or None
    location = _get(settings, "ssl.keystore.location")
    if location:
        ctx.load_cert_chain(location, password=password)
        return
    chain, key = (
        _get(settings, "ssl.keystore.certificate.chain"),
        _get(settings, "ssl.keystore.key"),
    )
    if not (chain and key):
        if chain or key or required:
            raise TlsConfigError(
                "TLS needs ssl.keystore.location or "
                "ssl.keystore.certificate.chain + ssl.keystore.key"
            )
        return
    # ssl can only load a key from a file: a private temporary one, removed at once.
    fd, name = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(key.replace("\\n", "\n") + "\n" + chain.replace("\\n", "\n") + "\n")
        ctx.load_cert_chain(name, password=password)
    finally:
        Path(name).unlink(missing_ok=True)


def load_truststore(ctx: ssl.SSLContext, settings: Mapping[str, str]) -> bool:
    """The CAs this side trusts; False when none is configured."""
    if _get(settings, "ssl.truststore.type").upper() != "PEM":
        raise TlsConfigError("only ssl.truststore.type=PEM is supported")
    location = _get(settings, "ssl.truststore.location")
    inline = _get(settings, "ssl.truststore.certificates")
    if location:
        ctx.load_verify_locations(cafile=location)
    if inline:
        ctx.load_verify_locations(cadata=inline.replace("\\n", "\n"))
    return bool(location or inline)


def apply_algorithms(ctx: ssl.SSLContext, settings: Mapping[str, str]) -> None:
    versions = [v.strip() for v in _get(settings, "ssl.enabled.protocols").split(",") if v.strip()]
    unknown = [v for v in versions if v not in _PROTOCOLS]
    if unknown or not versions:
        raise TlsConfigError(f"ssl.enabled.protocols: unsupported {unknown or versions}")
    ctx.minimum_version = min(_PROTOCOLS[v] for v in versions)
    ctx.maximum_version = max(_PROTOCOLS[v] for v in versions)
    suites = [s.strip() for s in _get(settings, "ssl.cipher.suites").split(",") if s.strip()]
    openssl_names = [n for n in (openssl_cipher_name(s) for s in suites) if n]
    if openssl_names:
        try:
            ctx.set_ciphers(":".join(openssl_names))
        except ssl.SSLError as exc:
            raise TlsConfigError(f"ssl.cipher.suites: {exc}") from exc


def client_auth(settings: Mapping[str, str]) -> str:
    value = _get(settings, "ssl.client.auth").lower()
    if value not in CLIENT_AUTH:
        raise TlsConfigError(f"ssl.client.auth must be none, requested or required, not {value!r}")
    return value


def server_context(settings: Mapping[str, str]) -> ssl.SSLContext:
    """A server's context: its keystore (required), the CAs it trusts for client
    certificates, ``ssl.client.auth``, protocols and suites."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        load_keystore(ctx, settings, required=True)
        load_truststore(ctx, settings)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"cannot load TLS material: {exc}") from exc
    ctx.verify_mode = CLIENT_AUTH[client_auth(settings)]
    apply_algorithms(ctx, settings)
    return ctx


def client_context(settings: Mapping[str, str]) -> ssl.SSLContext:
    """A client's context: the CAs it trusts (the system's when none is configured), its
    own certificate for mutual TLS when a keystore is set, and host name checking unless
    ``ssl.endpoint.identification.algorithm`` is empty (Kafka's switch for it)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        if not load_truststore(ctx, settings):
            ctx.load_default_certs()
        load_keystore(ctx, settings, required=False)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"cannot load TLS material: {exc}") from exc
    identification = settings.get("ssl.endpoint.identification.algorithm")
    ctx.check_hostname = identification is None or str(identification).strip() != ""
    ctx.verify_mode = ssl.CERT_REQUIRED
    apply_algorithms(ctx, settings)
    return ctx
