"""`oncelog` command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from oncelog.cli import (
    acls,
    configs,
    connect,
    console,
    dump_log,
    groups,
    producers,
    records,
    topics,
    transactions,
    users,
)
from oncelog.cli.demo import demo
from oncelog.cli.logging_setup import LogFormat, LogLevel, configure_logging

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
app.add_typer(groups.app, name="groups")
app.add_typer(groups.app, name="consumer-groups", hidden=True)  # Kafka's tool name
app.add_typer(configs.app, name="configs")
app.command("delete-records")(records.delete_records)
app.command("get-offsets")(records.get_offsets)
app.command("console-producer")(console.producer)
app.command("console-consumer")(console.consumer)
app.command("dump-log")(dump_log.dump_log)
app.command()(demo)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"oncelog {version('oncelog')}")
        except PackageNotFoundError:
            typer.echo("oncelog (unknown version: not installed)")
        raise typer.Exit()


@app.callback()
def main(
    _version_flag: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", help="Debug logs on stderr, librdkafka's included (silent by default)."
        ),
    ] = False,
) -> None:
    """oncelog: an exactly-once, Kafka-compatible streaming log."""
    if verbose:
        from oncelog.cli.common import enable_verbose

        enable_verbose()


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
    log_level: LogLevel = "INFO",
    log_format: LogFormat = "text",
) -> None:
    """Run a single-node broker speaking the Kafka protocol."""
    import logging

    from oncelog.broker.broker import Broker
    from oncelog.broker.config import BrokerConfig, BrokerConfigError, parse_host_port
    from oncelog.broker.run import run
    from oncelog.broker.startup import StartupError, check_data_dir, os_reason

    configure_logging(log_level, log_format)
    log = logging.getLogger("oncelog.broker")
    try:
        overrides = _parse_sets(set_ or [])
        if data_dir is not None:
            overrides["log.dirs"] = str(data_dir)
        cfg = BrokerConfig.build(config, overrides)
        listen_addr = parse_host_port(listen) if listen else None
        adv = parse_host_port(advertised) if advertised else None
    except BrokerConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if (warning := cfg.ignored_warning()) is not None:
        log.warning(warning)
    try:
        check_data_dir(cfg.data_dir)
        instance = Broker(cfg, listen=listen_addr, advertised=adv)
    except BrokerConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    except StartupError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    except OSError as exc:
        typer.echo(f"error: cannot start the broker: {exc.filename}: {os_reason(exc)}", err=True)
        raise typer.Exit(1) from exc
    log.info("effective config (non-default): %s", cfg.non_default_summary())
    run(instance)


if __name__ == "__main__":
    app()
