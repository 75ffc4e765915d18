"""Security settings of the client layer, with librdkafka's names, so that one client
configuration serves confluent-kafka's clients and oncelog's protocol client alike.

    security.protocol          PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL (any case)
    ssl.ca.location            CA bundle (PEM) to verify the brokers; default: system CAs
    ssl.certificate.location   client certificate (PEM), for mutual TLS
    ssl.key.location           its private key (PEM); ssl.key.password if encrypted
    ssl.endpoint.identification.algorithm   https (default: check the host name) | none
    sasl.mechanism(s)          PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
    sasl.username, sasl.password

An unknown protocol or mechanism is an error: a client never falls back to PLAINTEXT.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass


class ClientConfigError(ValueError):
    """A bad client setting (unknown security.protocol, missing certificate, ...)."""


PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True, slots=True)
class SecurityConfig:
    protocol: str = "PLAINTEXT"
    ca_location: str | None = None
    certificate_location: str | None = None
    key_location: str | None = None
    key_password: str | None = None
    check_hostname: bool = True
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def from_conf(cls, conf: Mapping[str, object]) -> SecurityConfig:
        """Parse librdkafka-style settings; other keys are ignored."""
        get = {str(k).lower(): str(v) for k, v in conf.items() if v is not None}.get
        protocol = get("security.protocol", "PLAINTEXT").strip().upper()
        if protocol not in PROTOCOLS:
            raise ClientConfigError(
                f"security.protocol must be one of {', '.join(PROTOCOLS)}, got {get('security.protocol')!r}"
            )
        algorithm = get("ssl.endpoint.identification.algorithm", "https").strip().lower()
        if algorithm not in ("https", "none"):
            raise ClientConfigError(
                f"ssl.endpoint.identification.algorithm must be https or none, got {algorithm!r}"
            )
        mechanism = get("sasl.mechanism") or get("sasl.mechanisms")
        cfg = cls(
            protocol=protocol,
            ca_location=get("ssl.ca.location"),
            certificate_location=get("ssl.certificate.location"),
            key_location=get("ssl.key.location"),
            key_password=get("ssl.key.password"),
            check_hostname=algorithm == "https",
            sasl_mechanism=mechanism.strip().upper() if mechanism else None,
            sasl_username=get("sasl.username"),
            sasl_password=get("sasl.password"),
        )
        if cfg.sasl:
            # None would be librdkafka's default, GSSAPI, which this client does not speak.
            if cfg.sasl_mechanism not in MECHANISMS:
                raise ClientConfigError(
                    f"sasl.mechanism must be one of {', '.join(MECHANISMS)}, got {cfg.sasl_mechanism!r}"
                )
            if cfg.sasl_username is None or cfg.sasl_password is None:
                raise ClientConfigError(
                    f"security.protocol={protocol} needs sasl.username and sasl.password"
                )
        if cfg.certificate_location is None and cfg.key_location is not None:
            raise ClientConfigError("ssl.key.location is set without ssl.certificate.location")
        return cfg

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context of SSL / SASL_SSL connections."""
        try:
            ctx = ssl.create_default_context(cafile=self.ca_location)
            if self.certificate_location is not None:
                ctx.load_cert_chain(self.certificate_location, self.key_location, self.key_password)
        except (OSError, ssl.SSLError) as exc:
            raise ClientConfigError(
                f"cannot load the TLS settings (ssl.ca.location / ssl.certificate.location / ssl.key.location): {exc}"
            ) from exc
        ctx.check_hostname = self.check_hostname
        return ctx


PLAINTEXT = SecurityConfig()
