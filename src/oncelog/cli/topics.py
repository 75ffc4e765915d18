"""`oncelog topics ...`: topic admin through the standard Admin API."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from oncelog.cli import command_config
from oncelog.cli.command_config import CommandConfig
from oncelog.client.admin import EARLIEST, LATEST, Admin
from oncelog.client.config import ClientConfig
from oncelog.client.errors import ClientError
from oncelog.client.retry import RetryPolicy

app = typer.Typer(no_args_is_help=True, help="Create, list, describe and delete topics.")
Bootstrap = Annotated[
    str, typer.Option("--bootstrap-server", "-b", help="HOST:PORT of any broker.")
]
console = Console()
TIMEOUT_S = 15.0


def _admin(bootstrap: str, config_file: Path | None = None) -> Admin:
    return Admin(
        ClientConfig(bootstrap, {"socket.timeout.ms": "10000", **command_config.load(config_file)}),
        policy=RetryPolicy(deadline_s=TIMEOUT_S),
        timeout=TIMEOUT_S,
    )


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def _parse_configs(values: list[str] | None) -> dict[str, str]:
    out = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected key=value, got {item!r}", param_hint="--config")
        out[key] = value
    return out


@app.command()
def create(
    name: str,
    partitions: Annotated[int, typer.Option("--partitions", "-p", min=1)] = 1,
    replication_factor: Annotated[int, typer.Option("--replication-factor", "-r")] = 1,
    config: Annotated[
        list[str] | None, typer.Option("--config", "-c", help="key=value topic config")
    ] = None,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
) -> None:
    """Create a topic."""
    try:
        _admin(bootstrap, config_file).create_topics(
            [name], partitions, replication_factor, config=_parse_configs(config), exist_ok=False
        )
    except ClientError as exc:
        _fail(f"cannot create topic {name!r}: {exc}")
    typer.echo(f"created topic {name} ({partitions} partitions)")


@app.command("list")
def list_(
    bootstrap: Bootstrap = "127.0.0.1:9092",
    internal: bool = False,
    config_file: CommandConfig = None,
) -> None:
    """List topic names."""
    try:
        names = _admin(bootstrap, config_file).topics()
    except ClientError as exc:
        _fail(f"cannot reach {bootstrap}: {exc}")
    for name in sorted(names):
        if internal or not name.startswith("__"):
            typer.echo(name)


@app.command()
def describe(
    name: str, bootstrap: Bootstrap = "127.0.0.1:9092", config_file: CommandConfig = None
) -> None:
    """Show a topic's partitions, offsets and non-default configs."""
    admin = _admin(bootstrap, config_file)
    try:
        t = admin.describe_topics().get(name)
        if t is None:
            _fail(f"unknown topic {name!r}")
        tps = [(name, p) for p in sorted(t.leaders)]
        starts = admin.list_offsets(tps, EARLIEST, read_committed=False)
        ends = admin.list_offsets(tps, LATEST, read_committed=False)
        overrides = admin.topic_config_overrides(name)
    except ClientError as exc:
        _fail(f"cannot describe topic {name!r}: {exc}")
    table = Table(title=f"topic {name}")
    for col in ("partition", "leader", "log start", "high watermark"):
        table.add_column(col, justify="right")
    for tp in tps:
        table.add_row(str(tp[1]), str(t.leaders[tp[1]]), str(starts[tp]), str(ends[tp]))
    console.print(table)
    if overrides:
        console.print("configs: " + ", ".join(f"{k}={v}" for k, v in sorted(overrides.items())))


@app.command()
def delete(
    name: str, bootstrap: Bootstrap = "127.0.0.1:9092", config_file: CommandConfig = None
) -> None:
    """Delete a topic and its data."""
    try:
        _admin(bootstrap, config_file).delete_topic(name)
    except ClientError as exc:
        _fail(f"cannot delete topic {name!r}: {exc}")
    typer.echo(f"deleted topic {name}")
