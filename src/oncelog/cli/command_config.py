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
from typing import Annotated, NoReturn

import typer

from oncelog.broker.config import BrokerConfigError, parse_properties
from oncelog.client.config import ClientConfig
from oncelog.client.java_config import librdkafka_settings
from oncelog.client.security import ClientConfigError


# The options every client-side command shares.
def fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def parse_servers(value: str) -> list[tuple[str, int]]:
    """``host:port[,host:port...]``; a one-line usage error (exit 2) otherwise."""
    out = []
    for raw in value.split(","):
        entry = raw.strip()
        host, sep, port = entry.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            fail(
                f"--bootstrap-server {value}: expected HOST:PORT with a port from 1 to 65535,"
                f" got {entry!r}",
                2,
            )
        out.append((host.strip("[]"), int(port)))
    return out


def _check_bootstrap(value: str) -> str:
    parse_servers(value)
    return value


def _check_output(value: str) -> str:
    if value not in ("table", "json"):
        fail(f"--output {value}: expected table or json", 2)
    return value


Bootstrap = Annotated[
    str,
    typer.Option(
        "--bootstrap-server", "-b", callback=_check_bootstrap, help="HOST:PORT of any broker."
    ),
]
Output = Annotated[
    str, typer.Option("--output", "-o", callback=_check_output, help="table or json.")
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
        settings = librdkafka_settings(parse_properties(path.read_text()))
    except (OSError, BrokerConfigError, ClientConfigError) as exc:
        typer.echo(f"error: --command-config {path}: {exc}", err=True)
        raise typer.Exit(2) from exc
    _check_names(path, settings)
    return settings


def _check_names(path: Path, settings: dict[str, str]) -> None:
    """A misspelt key (``sasl.mechansim``) is a usage error for every command, naming it:
    librdkafka checks names and values when a client is built (without bootstrap servers
    it never connects), whereas the protocol client would ignore what it does not use."""
    import logging

    from oncelog.client.errors import ClientError
    from oncelog.client.kafka_producer import KafkaProducer

    quiet = logging.getLogger("oncelog.cli.librdkafka")  # silent unless --verbose
    try:
        KafkaProducer({**settings, "logger": quiet})
    except ClientError as exc:
        typer.echo(f"error: --command-config {path}: {exc.detail or exc}", err=True)
        raise typer.Exit(2) from exc
