"""`oncelog producers ...`: act on producers by transactional id (KIP-618's fenceProducers)."""

from __future__ import annotations

from typing import Annotated, NoReturn

import typer

from oncelog.cli import command_config
from oncelog.cli.command_config import Bootstrap, CommandConfig
from oncelog.client.admin import Admin
from oncelog.client.errors import ClientError
from oncelog.client.retry import RetryPolicy

app = typer.Typer(no_args_is_help=True, help="Fence out transactional producers.")
# An operator waits at most this long for an unreachable or busy cluster.
POLICY = RetryPolicy(deadline_s=30.0)


def _fail(exc: Exception) -> NoReturn:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(1)


@app.command()
def fence(
    transactional_ids: Annotated[
        list[str], typer.Argument(help="Transactional ids whose producers to fence out.")
    ],
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
) -> None:
    """Fence out the producers of these transactional ids (bump their epochs, abort what
    they have open): their next transactional call fails with PRODUCER_FENCED."""
    admin = Admin(command_config.client_config(bootstrap, config_file), policy=POLICY)
    with admin:
        try:
            fenced = admin.fence_producers(transactional_ids)
        except ClientError as exc:
            _fail(exc)
    for tid in transactional_ids:
        producer_id, epoch = fenced[tid]
        typer.echo(f"fenced {tid}: producer id {producer_id}, epoch {epoch}")
