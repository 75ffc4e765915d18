"""`oncelog` command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from oncelog.cli import acls, connect, producers, topics, transactions, users
from oncelog.cli.demo import demo
from oncelog.cli.logging_setup import configure_logging

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="oncelog: an exactly-once, Kafka-compatible streaming log.",
)
app.add_typer(topics.app, name="topics")
app.add_typer(transactions.app, name="transactions")
app.add_typer(producers.app, name="producers")
app.add_typer(connect.app, name="connect")
app.add_typer(acls.app, name="acls")
app.add_typer(users.app, name="users")
app.command()(demo)


def _parse_sets(values: list[str]) -> dict[str, str]:
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected key=value, got {item!r}", param_hint="--set")
        out[key.strip()] = value.strip()
    return out


@app.command()
def broker(
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Where partitions live (Kafka's log.dirs).")
    ] = None,
    listen: Annotated[
        str | None,
        typer.Option("--listen", help="HOST:PORT: shorthand for listeners=PLAINTEXT://HOST:PORT."),
    ] = None,
    advertised: Annotated[
        str | None, typer.Option("--advertised", help="HOST:PORT clients are told to connect to.")
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="A server.properties file.")
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override a broker config: key=value (repeatable)."),
    ] = None,
    log_level: Annotated[str, typer.Option("--log-level")] = "INFO",
) -> None:
    """Run a single-node broker speaking the Kafka protocol."""
    from oncelog.broker.broker import Broker
    from oncelog.broker.config import BrokerConfig, BrokerConfigError, parse_host_port
    from oncelog.broker.run import run

    configure_logging(log_level)
    try:
        overrides = _parse_sets(set_ or [])
        if data_dir is not None:
            overrides["log.dirs"] = str(data_dir)
        cfg = BrokerConfig.build(config, overrides)
        listen_addr = parse_host_port(listen) if listen else None
        adv = parse_host_port(advertised) if advertised else None
        instance = Broker(cfg, listen=listen_addr, advertised=adv)
    except BrokerConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    run(instance)


if __name__ == "__main__":
    app()
