"""`oncelog topics ...`: topic admin through the standard Admin API."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from oncelog.cli import command_config
from oncelog.cli.command_config import CommandConfig

app = typer.Typer(no_args_is_help=True, help="Create, list, describe and delete topics.")
Bootstrap = Annotated[
    str, typer.Option("--bootstrap-server", "-b", help="HOST:PORT of any broker.")
]
console = Console()
TIMEOUT_S = 15.0


def _admin(bootstrap: str, config: Path | None = None):  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient

    return AdminClient(
        {"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000, **command_config.load(config)}
    )


def _fail(message: str) -> None:
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
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap, config_file)  # must outlive the future
    fut = admin.create_topics(
        [NewTopic(name, partitions, replication_factor, config=_parse_configs(config))],
        operation_timeout=TIMEOUT_S,
    )[name]
    try:
        fut.result(TIMEOUT_S)
    except Exception as exc:
        _fail(
            f"cannot create topic {name!r}: {exc.args[0].str() if hasattr(exc.args[0], 'str') else exc}"
        )
    typer.echo(f"created topic {name} ({partitions} partitions)")


@app.command("list")
def list_(
    bootstrap: Bootstrap = "127.0.0.1:9092",
    internal: bool = False,
    config_file: CommandConfig = None,
) -> None:
    """List topic names."""
    try:
        md = _admin(bootstrap, config_file).list_topics(timeout=TIMEOUT_S)
    except Exception as exc:
        _fail(f"cannot reach {bootstrap}: {exc}")
    for name in sorted(md.topics):
        if internal or not name.startswith("__"):
            typer.echo(name)


@app.command()
def describe(
    name: str, bootstrap: Bootstrap = "127.0.0.1:9092", config_file: CommandConfig = None
) -> None:
    """Show a topic's partitions, offsets and non-default configs."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import ConfigResource

    admin = _admin(bootstrap, config_file)
    # Listing all topics: naming one would auto-create it on brokers that allow that.
    md = admin.list_topics(timeout=TIMEOUT_S)
    t = md.topics.get(name)
    if t is None or t.error is not None:
        _fail(
            f"unknown topic {name!r}" + (f" ({t.error.str()})" if t is not None and t.error else "")
        )
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "oncelog-cli",
            "enable.auto.commit": False,
            **command_config.load(config_file),
        }
    )
    table = Table(title=f"topic {name}")
    for col in ("partition", "leader", "log start", "high watermark"):
        table.add_column(col, justify="right")
    try:
        for p in sorted(t.partitions):
            lo, hi = consumer.get_watermark_offsets(TopicPartition(name, p), timeout=TIMEOUT_S)
            table.add_row(str(p), str(t.partitions[p].leader), str(lo), str(hi))
    finally:
        consumer.close()
    console.print(table)
    res = ConfigResource("topic", name)
    configs = admin.describe_configs([res])[res].result(TIMEOUT_S)
    overrides = {k: v.value for k, v in configs.items() if not v.is_default}
    if overrides:
        console.print("configs: " + ", ".join(f"{k}={v}" for k, v in sorted(overrides.items())))


@app.command()
def delete(
    name: str, bootstrap: Bootstrap = "127.0.0.1:9092", config_file: CommandConfig = None
) -> None:
    """Delete a topic and its data."""
    admin = _admin(bootstrap, config_file)  # must outlive the future
    fut = admin.delete_topics([name], operation_timeout=TIMEOUT_S)[name]
    try:
        fut.result(TIMEOUT_S)
    except Exception as exc:
        _fail(
            f"cannot delete topic {name!r}: {exc.args[0].str() if hasattr(exc.args[0], 'str') else exc}"
        )
    typer.echo(f"deleted topic {name}")
