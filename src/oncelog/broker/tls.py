"""Server-side TLS contexts of the broker's listeners, from Kafka's PEM settings (see
:mod:`oncelog.security.tls`), and the client certificate's subject."""

from __future__ import annotations

import ssl

from oncelog.broker.config import BrokerConfig, BrokerConfigError
from oncelog.security import tls
from oncelog.security.tls import openssl_cipher_name

__all__ = ["openssl_cipher_name", "peer_dn", "server_context"]


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The listener's context from its settings (``listener.name.<l>.ssl.*`` over
    ``ssl.*``, as Kafka resolves them), built by the shared TLS core."""
    settings = {name: config.for_listener(listener, name) for name in tls.CONTEXT_KEYS}
    try:
        ctx = tls.server_context(settings)
    except tls.TlsConfigError as exc:
        raise BrokerConfigError(f"listener {listener}: {exc}") from exc
    if ctx.verify_mode != ssl.CERT_NONE:
        # Loaded here, not at import: a broker without client certificates never needs
        # it, and one with them should not pay for it on the first handshake.
        from cryptography import x509  # noqa: F401
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
