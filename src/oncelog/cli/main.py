"""`oncelog` command line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from oncelog.cli.lazy import LazyCommand, lazy_group
from oncelog.cli.logging_setup import (
    ALIASES,
    FORMATS,
    LEVELS,
    LogFormat,
    LogLevel,
    configure_logging,
)

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


class _Cli(typer.Typer):
    """The ``oncelog`` command. A plain ``oncelog broker --option value ...`` line (how
    EmbeddedBroker, tests and deployments start a broker) skips typer's parsing: typer
    coerces every parameter through a pydantic TypeAdapter, ~0.1 CPU-s of each start for
    importing pydantic and building them. Anything else (help, other commands, a value
    typer would reject) goes through typer, so its messages and exit codes are kept."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not args and not kwargs and (fast := broker_arguments(sys.argv[1:])) is not None:
            try:
                return broker(**fast)
            except typer.Exit as exc:  # as typer's standalone mode ends on it
                raise SystemExit(exc.exit_code) from None
            except KeyboardInterrupt:  # as click's Abort: Ctrl-C during the start
                typer.echo("Aborted!", err=True)
                raise SystemExit(1) from None
        return super().__call__(*args, **kwargs)


app = _Cli(
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


# The broker's options as typer declares them below: name -> parameter.
_BROKER_OPTIONS = {
    "--data-dir": "data_dir",
    "--listen": "listen",
    "--advertised": "advertised",
    "--config": "config",
    "--set": "set_",
    "--log-level": "log_level",
    "--log-format": "log_format",
}


def broker_arguments(argv: list[str]) -> dict[str, Any] | None:
    """``broker``'s keyword arguments for ``argv`` = ``broker`` and ``--option value``
    (or ``--option=value``) pairs whose values typer would accept unchanged; None for
    any other command line, which typer then parses."""
    if not argv or argv[0] != "broker":
        return None
    found: dict[str, Any] = {"set_": []}
    rest = argv[1:]
    while rest:
        option, eq, value = rest[0].partition("=")
        if option not in _BROKER_OPTIONS:
            return None  # --help, a typo, a positional: typer's answer
        if not eq:
            if len(rest) < 2:
                return None
            value = rest[1]
        rest = rest[1:] if eq else rest[2:]
        if not value or value.startswith("-"):
            return None  # typer's handling of such values is its own
        name = _BROKER_OPTIONS[option]
        if name == "set_":
            found["set_"].append(value)
        else:
            found[name] = value
    level = ALIASES.get(found.get("log_level", "INFO").upper(), found.get("log_level", "INFO"))
    log_format = found.get("log_format", "text")
    if level.upper() not in LEVELS or log_format.lower() not in FORMATS:
        return None
    if any(not item.partition("=")[0] or "=" not in item for item in found["set_"]):
        return None  # _parse_sets's error, through typer
    return {
        "data_dir": Path(found["data_dir"]) if "data_dir" in found else None,
        "listen": found.get("listen"),
        "advertised": found.get("advertised"),
        "config": Path(found["config"]) if "config" in found else None,
        "set_": found["set_"] or (),  # as typer: a list, () when none
        "log_level": level.upper(),
        "log_format": log_format.lower(),
    }


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
    from oncelog.broker.startup import StartupError, os_reason

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
    run(instance)  # logs the effective config once it holds the data directory


if __name__ == "__main__":
    app()
