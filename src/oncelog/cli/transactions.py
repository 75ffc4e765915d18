"""`oncelog transactions ...`: inspect and repair transactions (KIP-664)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from oncelog.cli import command_config
from oncelog.cli.common import (
    Bootstrap,
    CommandConfig,
    Output,
    admin,
    console,
    emit,
    ensure_reachable,
    one_of,
    table,
)
from oncelog.client.admin import LATEST, Admin
from oncelog.client.config import ClientConfig
from oncelog.client.errors import ClientError
from oncelog.client.retry import RetryPolicy
from oncelog.client.transactions import OPEN_STATES, TxnAdmin
from oncelog.hanging import REASONS

app = typer.Typer(no_args_is_help=True, help="List, describe, find hanging and abort transactions.")
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
        int,
        typer.Option(
            "--min-duration-ms",
            "--duration-filter",
            help="Only transactions open longer than this many ms (--duration-filter: "
            "kafka-transactions.sh's spelling).",
        ),
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
    transactional_id: Annotated[
        str | None,
        typer.Argument(
            help="The transactional id (or --transactional-id, as kafka-transactions.sh)."
        ),
    ] = None,
    transactional_id_flag: Annotated[
        str | None,
        typer.Option("--transactional-id", help="kafka-transactions.sh's spelling of the id."),
    ] = None,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
    output: Output = "table",
) -> None:
    """Show one transaction: state, producer, timeout, start, duration, partitions."""
    tid = one_of(transactional_id, transactional_id_flag, "TRANSACTIONAL_ID", "--transactional-id")
    with _admin(bootstrap, config_file) as admin:
        try:
            s = admin.describe_txn(tid)
        except ClientError as exc:
            _fail(exc)
    if s is None:
        _fail(ClientError(f"cannot describe {tid!r}: TRANSACTIONAL_ID_NOT_FOUND"))
    start = s.transaction_start_time
    start_ms = int(start.timestamp() * 1000) if start is not None else None
    # kafka-transactions.sh describe's TransactionDurationMs: now - start, None if not started
    duration_ms = int(time.time() * 1000) - start_ms if start_ms is not None else None
    timeout_ms = int(s.transaction_timeout.total_seconds() * 1000)
    partitions = [f"{t.topic}-{p}" for t in s.topics for p in t.partitions]
    if output == "json":
        emit(
            output,
            {
                "transactional_id": s.transactional_id,
                "producer_id": s.producer_id,
                "producer_epoch": s.producer_epoch,
                "state": s.transaction_state,
                "transaction_timeout_ms": timeout_ms,
                "transaction_start_time_ms": start_ms,
                "transaction_duration_ms": duration_ms,
                "topic_partitions": partitions,
            },
            None,
        )
        return
    console.print(f"transactional id  {s.transactional_id}")
    console.print(f"state             {s.transaction_state}")
    console.print(f"producer          id {s.producer_id} epoch {s.producer_epoch}")
    console.print(f"timeout           {timeout_ms} ms")
    console.print(f"started           {start.isoformat() if start is not None else '-'}")
    console.print(f"duration          {f'{duration_ms} ms' if duration_ms is not None else '-'}")
    for t in s.topics:
        console.print(f"partitions        {t.topic}: {', '.join(map(str, t.partitions))}")


@app.command("describe-producers")
def describe_producers(
    topic: Annotated[
        str | None, typer.Argument(help="The topic (or --topic, as kafka-transactions.sh).")
    ] = None,
    partition: Annotated[
        int | None,
        typer.Argument(help="The partition (or --partition, as kafka-transactions.sh)."),
    ] = None,
    topic_flag: Annotated[
        str | None, typer.Option("--topic", help="kafka-transactions.sh's spelling of TOPIC.")
    ] = None,
    partition_flag: Annotated[
        int | None,
        typer.Option("--partition", help="kafka-transactions.sh's spelling of PARTITION."),
    ] = None,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
    output: Output = "table",
) -> None:
    """Producer state of one partition (DescribeProducers)."""
    topic = one_of(topic, topic_flag, "TOPIC", "--topic")
    partition = one_of(partition, partition_flag, "PARTITION", "--partition")
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
    start_offset: Annotated[
        int | None,
        typer.Option(
            "--start-offset",
            help="With --topic and --partition: the open transaction starting at this offset "
            "(as kafka-transactions.sh; see describe-producers).",
        ),
    ] = None,
    producer_id: Annotated[int | None, typer.Option("--producer-id")] = None,
    producer_epoch: Annotated[int | None, typer.Option("--producer-epoch")] = None,
    coordinator_epoch: Annotated[int | None, typer.Option("--coordinator-epoch")] = None,
) -> None:
    """Abort a transaction by transactional id, or a hanging one by partition and its start
    offset or producer."""
    by_partition = any(v is not None for v in (topic, partition, producer_id, start_offset))
    if (transactional_id is None) == (not by_partition):
        raise typer.BadParameter(
            "give either --transactional-id, or --topic, --partition and --start-offset"
            " (or --producer-id)"
        )
    if by_partition and (start_offset is None) == (producer_id is None):
        raise typer.BadParameter("give one of --start-offset or --producer-id")
    with _admin(bootstrap, config_file) as admin:
        try:
            if transactional_id is not None:
                pid, epoch = admin.fence(transactional_id)
                console.print(f"aborted {transactional_id}: producer {pid} now at epoch {epoch}")
            else:
                if topic is None or partition is None:
                    raise typer.BadParameter(
                        "--topic and --partition go with --start-offset or --producer-id"
                    )
                if start_offset is not None:
                    # kafka-transactions.sh abort --start-offset: the producer whose open
                    # transaction starts there, with its epochs (coordinator epoch -1 -> 0)
                    found = [
                        p
                        for p in admin.describe_producers(topic, partition)
                        if p.current_txn_start_offset == start_offset
                    ]
                    if not found:
                        _fail(
                            ClientError(
                                f"could not find any open transaction starting at offset "
                                f"{start_offset} on partition {topic}-{partition}"
                            )
                        )
                    producer_id = found[0].producer_id
                    producer_epoch = found[0].producer_epoch
                    coordinator_epoch = max(found[0].coordinator_epoch, 0)
                assert producer_id is not None
                admin.abort_partition(
                    topic, partition, producer_id, producer_epoch, coordinator_epoch
                )
                console.print(
                    f"wrote ABORT marker for producer {producer_id} to {topic}-{partition}"
                )
        except ClientError as exc:
            _fail(exc)


@app.command()
def metrics(
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
    output: Annotated[
        str,
        typer.Option(
            "--output",
            "-o",
            callback=command_config._check_output,
            help="json (the default, for scripts) or table.",
        ),
    ] = "json",
) -> None:
    """KIP-98 metrics: live producer ids, active transactional ids, LSO and its lag per partition."""
    try:
        data = txn_metrics(command_config.client_config(bootstrap, config_file))
    except ClientError as exc:
        _fail(exc)
    data["partitions"] = {k: v for k, v in data["partitions"].items() if not k.startswith("__")}
    if output == "json":
        typer.echo(json.dumps(data, indent=2))
        return
    console.print(f"live producer ids         {data['live_producer_ids']}")
    console.print(f"active transactional ids  {data['active_transactional_ids']}")
    console.print(f"ongoing transactions      {data['ongoing_transactions']}")
    rows = [
        (tp, m["high_watermark"], m["last_stable_offset"], m["lso_lag"])
        for tp, m in data["partitions"].items()
    ]
    console.print(table(None, ("partition", "high watermark", "LSO", "LSO lag"), rows))


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
