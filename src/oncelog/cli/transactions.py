"""`oncelog transactions ...`: inspect and repair transactions (KIP-664)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from oncelog.cli import command_config
from oncelog.cli.common import (
    Bootstrap,
    CommandConfig,
    Output,
    admin,
    emit,
    ensure_reachable,
    table,
)
from oncelog.client.admin import LATEST, Admin
from oncelog.client.config import ClientConfig
from oncelog.client.errors import ClientError
from oncelog.client.retry import RetryPolicy
from oncelog.client.transactions import OPEN_STATES, TxnAdmin
from oncelog.hanging import REASONS

app = typer.Typer(no_args_is_help=True, help="List, describe, find hanging and abort transactions.")
console = Console()
# Kafka's transaction.max.timeout.ms default.
KAFKA_MAX_TIMEOUT_MS = 900_000
# An operator waits at most this long for an unreachable or busy cluster.
POLICY = RetryPolicy(deadline_s=30.0)


def _admin(bootstrap: str, config_file: Path | None) -> TxnAdmin:
    config = command_config.client_config(bootstrap, config_file)
    ensure_reachable(bootstrap, config)
    return TxnAdmin(config, policy=POLICY)


def _fail(exc: Exception) -> NoReturn:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(1)


@app.command("list")
def list_(
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
    state: Annotated[
        list[str] | None, typer.Option("--state", help="Ongoing, PrepareCommit, CompleteAbort, ...")
    ] = None,
    producer_id: Annotated[list[int] | None, typer.Option("--producer-id")] = None,
    min_duration_ms: Annotated[
        int, typer.Option("--min-duration-ms", help="Only transactions open longer than this.")
    ] = -1,
    output: Output = "table",
) -> None:
    """List transactional ids and their states."""
    with _admin(bootstrap, config_file) as admin:
        try:
            rows = admin.list_transactions(
                tuple(state or ()), tuple(producer_id or ()), min_duration_ms
            )
        except ClientError as exc:
            _fail(exc)
    data = [
        {"transactional_id": r.transactional_id, "producer_id": r.producer_id, "state": r.state}
        for r in rows
    ]
    emit(
        output,
        data,
        table(None, ("transactional id", "producer id", "state"), [list(d.values()) for d in data]),
    )


@app.command()
def describe(
    transactional_id: str,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
) -> None:
    """Show one transaction: state, producer, timeout, partitions."""
    with _admin(bootstrap, config_file) as admin:
        try:
            s = admin.describe_txn(transactional_id)
        except ClientError as exc:
            _fail(exc)
    if s is None:
        _fail(ClientError(f"cannot describe {transactional_id!r}: TRANSACTIONAL_ID_NOT_FOUND"))
    start = s.transaction_start_time
    console.print(f"transactional id  {s.transactional_id}")
    console.print(f"state             {s.transaction_state}")
    console.print(f"producer          id {s.producer_id} epoch {s.producer_epoch}")
    console.print(f"timeout           {int(s.transaction_timeout.total_seconds() * 1000)} ms")
    console.print(f"started           {start.isoformat() if start is not None else '-'}")
    for t in s.topics:
        console.print(f"partitions        {t.topic}: {', '.join(map(str, t.partitions))}")


@app.command("describe-producers")
def describe_producers(
    topic: str,
    partition: int,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
    output: Output = "table",
) -> None:
    """Producer state of one partition (DescribeProducers)."""
    with _admin(bootstrap, config_file) as admin:
        try:
            rows = admin.describe_producers(topic, partition)
        except ClientError as exc:
            _fail(exc)
    columns = (
        "producer id",
        "epoch",
        "last seq",
        "last timestamp",
        "coordinator epoch",
        "txn start offset",
    )
    values = [
        (
            r.producer_id,
            r.producer_epoch,
            r.last_sequence,
            r.last_timestamp,
            r.coordinator_epoch,
            r.current_txn_start_offset,
        )
        for r in rows
    ]
    keys = [c.replace(" ", "_") for c in columns]
    emit(output, [dict(zip(keys, v, strict=True)) for v in values], table(None, columns, values))


@app.command("find-hanging")
def find_hanging(
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
    topic: Annotated[list[str] | None, typer.Option("--topic")] = None,
    max_transaction_timeout_ms: Annotated[
        int | None,
        typer.Option(
            "--max-transaction-timeout-ms",
            help="How long a producer the coordinator does not track may stay idle in an "
            "open transaction (default: the broker's transaction.max.timeout.ms).",
        ),
    ] = None,
    output: Output = "table",
) -> None:
    """Transactions that will not end by themselves, and why: overdue (the coordinator
    tracks it, and it is open longer than its timeout) or orphaned (the coordinator has no
    open transaction of its producer there). The web console flags the same ones."""
    max_timeout_ms = max_transaction_timeout_ms
    if max_timeout_ms is None:
        max_timeout_ms = _broker_max_timeout_ms(bootstrap, config_file)
    with _admin(bootstrap, config_file) as admin:
        try:
            rows = admin.find_hanging(topic, max_timeout_ms)
        except ClientError as exc:
            _fail(exc)
    columns = (
        "topic",
        "partition",
        "producer id",
        "epoch",
        "coordinator epoch",
        "start offset",
        "transactional id",
        "why",
    )
    values = [
        (
            r.topic,
            r.partition,
            r.producer_id,
            r.producer_epoch,
            r.coordinator_epoch,
            r.current_txn_start_offset,
            r.transactional_id,
            r.kind,
        )
        for r in rows
    ]
    if output == "json":
        keys = [c.replace(" ", "_") for c in columns[:-1]]
        emit(
            output,
            [
                {**dict(zip(keys, v[:-1], strict=True)), "kind": r.kind, "reason": r.reason}
                for v, r in zip(values, rows, strict=True)
            ],
            None,
        )
    elif not rows:
        console.print("no hanging transactions")
    else:
        console.print(table(None, columns, values))
        for kind in sorted({r.kind for r in rows}):
            console.print(f"{kind}: {REASONS[kind]}")


def _broker_max_timeout_ms(bootstrap: str, config_file: Path | None) -> int:
    """The broker's transaction.max.timeout.ms, the bound the console applies; Kafka's
    default when the broker does not say (no DESCRIBE_CONFIGS on the cluster)."""
    try:
        with admin(bootstrap, config_file) as a:
            for entry in a.describe_configs("broker", "0"):
                if entry.name == "transaction.max.timeout.ms" and entry.value:
                    return int(entry.value)
    except (ClientError, ValueError):
        pass
    return KAFKA_MAX_TIMEOUT_MS


@app.command()
def abort(
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
    transactional_id: Annotated[
        str | None,
        typer.Option("--transactional-id", help="Abort by id (fences the current producer)."),
    ] = None,
    topic: Annotated[str | None, typer.Option("--topic")] = None,
    partition: Annotated[int | None, typer.Option("--partition")] = None,
    producer_id: Annotated[int | None, typer.Option("--producer-id")] = None,
    producer_epoch: Annotated[int | None, typer.Option("--producer-epoch")] = None,
    coordinator_epoch: Annotated[int | None, typer.Option("--coordinator-epoch")] = None,
) -> None:
    """Abort a transaction by transactional id, or a hanging one by partition and producer."""
    by_partition = topic is not None or partition is not None or producer_id is not None
    if (transactional_id is None) == (not by_partition):
        raise typer.BadParameter(
            "give either --transactional-id, or --topic, --partition and --producer-id"
        )
    with _admin(bootstrap, config_file) as admin:
        try:
            if transactional_id is not None:
                pid, epoch = admin.fence(transactional_id)
                console.print(f"aborted {transactional_id}: producer {pid} now at epoch {epoch}")
            else:
                if topic is None or partition is None or producer_id is None:
                    raise typer.BadParameter("--topic, --partition and --producer-id go together")
                admin.abort_partition(
                    topic, partition, producer_id, producer_epoch, coordinator_epoch
                )
                console.print(
                    f"wrote ABORT marker for producer {producer_id} to {topic}-{partition}"
                )
        except ClientError as exc:
            _fail(exc)


@app.command()
def metrics(bootstrap: Bootstrap = "127.0.0.1:9092", config_file: CommandConfig = None) -> None:
    """KIP-98 metrics: live producer ids, active transactional ids, LSO and its lag per partition."""
    try:
        data = txn_metrics(command_config.client_config(bootstrap, config_file))
    except ClientError as exc:
        _fail(exc)
    data["partitions"] = {k: v for k, v in data["partitions"].items() if not k.startswith("__")}
    typer.echo(json.dumps(data, indent=2))


def txn_metrics(config: ClientConfig) -> dict[str, Any]:
    """KIP-98's transaction metrics, computed from the standard APIs."""
    with TxnAdmin(config, policy=POLICY) as txns, Admin(config, policy=POLICY) as admin:
        topics = admin.topics()
        tps = [(t, p) for t, n in topics.items() for p in range(n)]
        hw = admin.list_offsets(tps, LATEST, read_committed=False)
        lso = admin.list_offsets(tps, LATEST, read_committed=True)
        live = {i.producer_id for t, p in tps for i in txns.describe_producers(t, p)}
        listed = txns.list_transactions()
    return {
        "live_producer_ids": len(live),
        "active_transactional_ids": len(listed),
        "ongoing_transactions": sum(1 for t in listed if t.state in OPEN_STATES),
        "partitions": {
            f"{t}-{p}": {
                "high_watermark": hw[(t, p)],
                "last_stable_offset": lso[(t, p)],
                "lso_lag": hw[(t, p)] - lso[(t, p)],
            }
            for t, p in sorted(tps)
        },
    }
