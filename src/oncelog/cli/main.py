"""`oncelog` command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from oncelog.cli.lazy import LazyCommand, lazy_group
from oncelog.cli.logging_setup import LogFormat, LogLevel, configure_logging

# Everything but `broker` loads from its module when run or listed (oncelog.cli.lazy):
# a broker's start does not import the client, rich or confluent-kafka.
LAZY = {
    "delete-records": LazyCommand("oncelog.cli.records", "delete_records"),
    "get-offsets": LazyCommand("oncelog.cli.records", "get_offsets"),
    "console-producer": LazyCommand("oncelog.cli.console", "producer"),
    "console-consumer": LazyCommand("oncelog.cli.console", "consumer"),
    "dump-log": LazyCommand("oncelog.cli.dump_log", "dump_log"),
    "demo": LazyCommand("oncelog.cli.demo", "demo"),
    "topics": LazyCommand("oncelog.cli.topics", "app"),
    "transactions": LazyCommand("oncelog.cli.transactions", "app"),
    "producers": LazyCommand("oncelog.cli.producers", "app"),
    "connect": LazyCommand("oncelog.cli.connect", "app"),
    "acls": LazyCommand("oncelog.cli.acls", "app"),
    "users": LazyCommand("oncelog.cli.users", "app"),
    "groups": LazyCommand("oncelog.cli.groups", "app"),
    # Kafka's tool name
    "consumer-groups": LazyCommand("oncelog.cli.groups", "app", hidden=True),
    "configs": LazyCommand("oncelog.cli.configs", "app"),
}
ORDER = [*list(LAZY)[:6], "broker", *list(LAZY)[6:]]  # the order of `oncelog --help`

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="oncelog: an exactly-once, Kafka-compatible streaming log.",
    cls=lazy_group(LAZY, ORDER),
)


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
