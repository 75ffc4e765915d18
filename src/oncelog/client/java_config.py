"""Kafka's (Java client) security settings, translated to librdkafka's names, which the
client layer speaks (``ClientConfig`` / ``SecurityConfig``). The Connect worker, the Spark
data source and ``--command-config`` accept Kafka's names through this one function.

    sasl.jaas.config          PlainLoginModule / ScramLoginModule username="…" password="…"
                              → sasl.username, sasl.password (the module must match
                              sasl.mechanism; PlainLoginModule alone implies PLAIN)
    ssl.truststore.location   PEM file → ssl.ca.location
    ssl.keystore.location     PEM file (certificate chain + key) → ssl.certificate.location
                              and ssl.key.location
    ssl.endpoint.identification.algorithm   "" → none
    ssl.truststore.type, ssl.keystore.type  PEM only

librdkafka's own names pass through unchanged. Java-only settings (JKS/PKCS12 stores,
store passwords, JSSE algorithms, login callback classes, Kerberos) raise
:class:`ClientConfigError` naming the key: nothing silently connects without the
security the user asked for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from oncelog.client.security import ClientConfigError

_JAAS = re.compile(r"^\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b(.*?);?\s*$", re.S)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"

_RENAMED = {"ssl.truststore.location": "ssl.ca.location"}
_STORE_TYPES = ("ssl.truststore.type", "ssl.keystore.type")
_INLINE_PEM = ("ssl.truststore.certificates", "ssl.keystore.certificate.chain", "ssl.keystore.key")
_JAVA_ONLY = frozenset(
    {
        "ssl.truststore.password",
        "ssl.keystore.password",
        "ssl.protocol",
        "ssl.enabled.protocols",
        "ssl.provider",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.secure.random.implementation",
        "ssl.engine.factory.class",
        "sasl.login.class",
        "sasl.login.callback.handler.class",
        "sasl.client.callback.handler.class",
        "sasl.kerberos.service.name",
        "sasl.kerberos.kinit.cmd",
    }
)


def _jaas_login(value: str) -> tuple[str, dict[str, str]]:
    """(login module, options) of a one-entry JAAS configuration."""
    match = _JAAS.match(value)
    if match is None:
        raise ClientConfigError(
            'sasl.jaas.config must read \'<LoginModule> required username="…" password="…";\''
        )
    options = {
        name: (quoted if quoted else bare).replace('\\"', '"').replace("\\\\", "\\")
        for name, quoted, bare in _JAAS_OPTION.findall(match.group(3))
    }
    return match.group(1), options


def _translate_jaas(value: str, mechanism: str | None) -> dict[str, str]:
    module, options = _jaas_login(value)
    if module == _PLAIN_MODULE:
        if mechanism not in (None, "PLAIN"):
            raise ClientConfigError(
                f"sasl.jaas.config uses PlainLoginModule but sasl.mechanism is {mechanism}"
            )
        out = {"sasl.mechanism": "PLAIN"}
    elif module == _SCRAM_MODULE:
        if mechanism not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ClientConfigError(
                "sasl.jaas.config uses ScramLoginModule: set sasl.mechanism to SCRAM-SHA-256 or "
                f"SCRAM-SHA-512 (got {mechanism})"
            )
        out = {}
    else:
        raise ClientConfigError(
            f"sasl.jaas.config: login module {module} is not supported "
            f"(use {_PLAIN_MODULE} or {_SCRAM_MODULE})"
        )
    if "username" not in options or "password" not in options:
        raise ClientConfigError('sasl.jaas.config needs username="…" and password="…"')
    out["sasl.username"], out["sasl.password"] = options["username"], options["password"]
    return out


def librdkafka_settings(values: Mapping[str, str]) -> dict[str, str]:
    """Kafka's client settings with their security names translated for librdkafka
    (and the client layer); other keys are kept as they are."""
    out: dict[str, str] = {}
    raw_mechanism = values.get("sasl.mechanism") or values.get("sasl.mechanisms")
    mechanism = raw_mechanism.strip().upper() if raw_mechanism else None
    for key, value in values.items():
        if key == "sasl.jaas.config":
            out.update(_translate_jaas(value, mechanism))
        elif key in _RENAMED:
            out[_RENAMED[key]] = value
        elif key == "ssl.keystore.location":
            out["ssl.certificate.location"] = out["ssl.key.location"] = value
        elif key == "ssl.endpoint.identification.algorithm":
            out[key] = value.strip() or "none"
        elif key in _STORE_TYPES:
            if value.strip().upper() != "PEM":
                raise ClientConfigError(
                    f"{key}={value} is not supported: only PEM files can be used "
                    "(convert JKS/PKCS12 stores with keytool/openssl)"
                )
        elif key in _INLINE_PEM:
            raise ClientConfigError(
                f"{key} (inline PEM) is not supported: put the PEM into a file and use "
                "ssl.truststore.location / ssl.keystore.location"
            )
        elif key in _JAVA_ONLY or key.startswith(("sasl.login.", "sasl.oauthbearer.")):
            raise ClientConfigError(f"{key} is a Java-client setting that is not supported here")
        else:
            out[key] = value
    if "sasl.mechanisms" in out and "sasl.mechanism" in out:
        del out["sasl.mechanisms"]
    return out
