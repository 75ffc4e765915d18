"""`oncelog connect ...`: the Kafka-Connect-compatible worker."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from oncelog.cli.logging_setup import LogFormat, LogLevel, configure_logging

app = typer.Typer(no_args_is_help=True, help="Run Kafka-Connect-compatible workers.")


@app.command()
def worker(
    config: Annotated[
        Path | None, typer.Option("--config", help="A worker.properties file.")
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override a worker config: key=value (repeatable)."),
    ] = None,
    log_level: LogLevel = "INFO",
    log_format: LogFormat = "text",
) -> None:
    """Run a distributed-mode worker; prints one ready line once it serves REST and has joined."""
    from oncelog.connect.api.errors import ConnectException
    from oncelog.connect.runtime.worker_config import WorkerConfig
    from oncelog.connect.worker_process import run_worker

    configure_logging(log_level, log_format)
    try:
        cfg = WorkerConfig.load(config, set_ or [])
    except ConnectException as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    try:
        run_worker(cfg, lambda line: typer.echo(line))
    except ConnectException as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


@app.command()
def standalone(
    worker_properties: Annotated[Path, typer.Argument(help="The worker's properties file.")],
    connector_files: Annotated[
        list[Path] | None,
        typer.Argument(help="Connector configs: .properties files, or .json ({name, config})."),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override a worker config: key=value (repeatable)."),
    ] = None,
    log_level: LogLevel = "INFO",
    log_format: LogFormat = "text",
) -> None:
    """Run a standalone worker, as Kafka's connect-standalone: the connectors given,
    offsets in offset.storage.file.filename, the same REST API; prints one ready line."""
    from oncelog.connect.api.errors import ConnectException
    from oncelog.connect.runtime.standalone_config import StandaloneConfig
    from oncelog.connect.standalone_process import run_standalone

    configure_logging(log_level, log_format)
    try:
        cfg = StandaloneConfig.load(worker_properties, set_ or [])
    except ConnectException as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    try:
        run_standalone(cfg, [str(f) for f in connector_files or []], lambda line: typer.echo(line))
    except ConnectException as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
