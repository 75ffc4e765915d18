"""``--command-config FILE``: client security settings for the CLI's Kafka clients.

Accepts librdkafka names (``security.protocol``, ``sasl.username``, ...) and the
Java client's (``sasl.jaas.config`` with a Plain/Scram login module,
``ssl.truststore.location`` for PEM files, ``ssl.keystore.location``), as
``kafka-acls.sh --command-config`` does. Any other key goes to librdkafka as is,
which refuses names it does not know: nothing silently falls back to PLAINTEXT.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from oncelog.broker.config import BrokerConfigError, parse_properties

# The options every client-side command shares.
Bootstrap = Annotated[
    str, typer.Option("--bootstrap-server", "-b", help="HOST:PORT of any broker.")
]
CommandConfig = Annotated[
    Path | None,
    typer.Option("--command-config", help="Client security settings (properties file)."),
]

_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_JAVA_TO_LIBRDKAFKA = {
    "ssl.truststore.location": "ssl.ca.location",
    "ssl.keystore.location": "ssl.certificate.location",
    "ssl.key.password": "ssl.key.password",
}
_IGNORED_JAVA = {"ssl.truststore.type", "ssl.keystore.type"}


def client_settings(values: dict[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in values.items():
        if key == "sasl.jaas.config":
            options = dict(_JAAS_OPTION.findall(value))
            if "username" not in options or "password" not in options:
                raise BrokerConfigError('sasl.jaas.config needs username="..." and password="..."')
            out["sasl.username"], out["sasl.password"] = options["username"], options["password"]
        elif key in _JAVA_TO_LIBRDKAFKA:
            out[_JAVA_TO_LIBRDKAFKA[key]] = value
        elif key == "ssl.endpoint.identification.algorithm":
            out["ssl.endpoint.identification.algorithm"] = value or "none"
        elif key in _IGNORED_JAVA:
            continue
        else:
            out[key] = value
    return out


def load(path: Path | None) -> dict[str, str]:
    if path is None:
        return {}
    try:
        return client_settings(parse_properties(path.read_text()))
    except (OSError, BrokerConfigError) as exc:
        typer.echo(f"error: --command-config {path}: {exc}", err=True)
        raise typer.Exit(2) from exc
