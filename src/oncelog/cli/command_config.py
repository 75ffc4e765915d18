"""``--command-config FILE``: client security settings for the CLI's Kafka clients.

Accepts librdkafka names (``security.protocol``, ``sasl.username``, ...) and the
Java client's (``sasl.jaas.config`` with a Plain/Scram login module,
``ssl.truststore.location`` for PEM files, ``ssl.keystore.location``), as
``kafka-acls.sh --command-config`` does (``oncelog.client.java_config``). Any other
key goes to librdkafka as is, which refuses names it does not know: nothing silently
falls back to PLAINTEXT.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from oncelog.broker.config import BrokerConfigError, parse_properties
from oncelog.client.config import ClientConfig
from oncelog.client.java_config import librdkafka_settings
from oncelog.client.security import ClientConfigError

# The options every client-side command shares.
Bootstrap = Annotated[
    str, typer.Option("--bootstrap-server", "-b", help="HOST:PORT of any broker.")
]
CommandConfig = Annotated[
    Path | None,
    typer.Option("--command-config", help="Client security settings (properties file)."),
]


def client_config(bootstrap: str, path: Path | None, **defaults: str) -> ClientConfig:
    """The client layer's configuration of a CLI command: ``defaults`` under the file's
    settings; a bad file ends the command with exit code 2."""
    settings = {**defaults, **load(path)}
    try:
        return ClientConfig.of(bootstrap, settings)
    except ClientConfigError as exc:
        typer.echo(f"error: --command-config {path}: {exc}", err=True)
        raise typer.Exit(2) from exc


def load(path: Path | None) -> dict[str, str]:
    if path is None:
        return {}
    try:
        return librdkafka_settings(parse_properties(path.read_text()))
    except (OSError, BrokerConfigError, ClientConfigError) as exc:
        typer.echo(f"error: --command-config {path}: {exc}", err=True)
        raise typer.Exit(2) from exc
