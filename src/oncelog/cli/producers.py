"""`oncelog producers ...`: act on producers by transactional id (KIP-618's fenceProducers)."""

from __future__ import annotations

from typing import Annotated

import typer

from oncelog.cli import common
from oncelog.cli.common import Bootstrap, CommandConfig, fail
from oncelog.client.errors import ClientError

app = typer.Typer(no_args_is_help=True, help="Fence out transactional producers.")


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
    with common.admin(bootstrap, config_file) as admin:
        try:
            fenced = admin.fence_producers(transactional_ids)
        except ClientError as exc:
            fail(str(exc))
    for tid in transactional_ids:
        producer_id, epoch = fenced[tid]
        typer.echo(f"fenced {tid}: producer id {producer_id}, epoch {epoch}")
