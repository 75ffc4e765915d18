"""`oncelog topics ...`: topic admin through the standard Admin API."""

from __future__ import annotations

from typing import Annotated

import typer

from oncelog.cli.common import (
    Bootstrap,
    CommandConfig,
    Output,
    admin,
    emit,
    fail,
    failures,
    table,
)
from oncelog.client.admin import EARLIEST, LATEST

app = typer.Typer(no_args_is_help=True, help="Create, list, describe, alter and delete topics.")


def _parse_configs(values: list[str] | None) -> dict[str, str]:
    out = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"--config: expected key=value, got {item!r}", 2)
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
    configs = _parse_configs(config)
    with failures(f"cannot create topic {name!r}"):
        admin(bootstrap, config_file).create_topics(
            [name], partitions, replication_factor, config=configs, exist_ok=False
        )
    typer.echo(f"created topic {name} ({partitions} partitions)")


@app.command("list")
def list_(
    bootstrap: Bootstrap = "127.0.0.1:9092",
    internal: bool = False,
    config_file: CommandConfig = None,
    output: Output = "table",
) -> None:
    """List topic names."""
    with failures("cannot list topics"):
        names = admin(bootstrap, config_file).topics()
    shown = sorted(n for n in names if internal or not n.startswith("__"))
    if output == "json":
        emit(output, [{"topic": n, "partitions": names[n]} for n in shown], None)
        return
    for name in shown:
        typer.echo(name)


@app.command()
def describe(
    name: str,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
    output: Output = "table",
) -> None:
    """Show a topic's partitions, offsets (log start, LSO, high watermark) and non-default
    configs."""
    a = admin(bootstrap, config_file)
    with failures(f"cannot describe topic {name!r}"):
        t = a.describe_topics().get(name)
        if t is None:
            fail(f"unknown topic {name!r}")
        tps = [(name, p) for p in sorted(t.leaders)]
        starts = a.list_offsets(tps, EARLIEST, read_committed=False)
        stable = a.list_offsets(tps, LATEST, read_committed=True)
        ends = a.list_offsets(tps, LATEST, read_committed=False)
        overrides = a.topic_config_overrides(name)
    rows = [
        {
            "partition": p,
            "leader": t.leaders[p],
            "log_start_offset": starts[(name, p)],
            "last_stable_offset": stable[(name, p)],
            "high_watermark": ends[(name, p)],
        }
        for _, p in tps
    ]
    data = {"topic": name, "partitions": rows, "configs": dict(sorted(overrides.items()))}
    render = table(
        f"topic {name}",
        ("partition", "leader", "log start", "LSO", "high watermark"),
        [list(r.values()) for r in rows],
    )
    emit(output, data, render)
    if output == "table" and overrides:
        typer.echo("configs: " + ", ".join(f"{k}={v}" for k, v in sorted(overrides.items())))


@app.command()
def alter(
    name: str,
    partitions: Annotated[
        int, typer.Option("--partitions", "-p", min=1, help="The new (larger) partition count.")
    ],
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
) -> None:
    """Add partitions to a topic (partitions can never be removed)."""
    a = admin(bootstrap, config_file)
    with failures(f"cannot alter topic {name!r}"):
        have = a.topics().get(name)
        if have is None:
            fail(f"unknown topic {name!r}")
        if partitions <= have:
            fail(
                f"cannot alter topic {name!r}: it has {have} partitions; "
                f"--partitions must be more than that"
            )
        a.create_partitions(name, partitions)
    typer.echo(f"topic {name}: {have} -> {partitions} partitions")


@app.command()
def delete(
    name: str, bootstrap: Bootstrap = "127.0.0.1:9092", config_file: CommandConfig = None
) -> None:
    """Delete a topic and its data."""
    with failures(f"cannot delete topic {name!r}"):
        admin(bootstrap, config_file).delete_topic(name)
    typer.echo(f"deleted topic {name}")
