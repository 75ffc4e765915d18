"""`oncelog demo`: the main job on embedded defaults.

Starts a broker in a temporary directory, creates a topic, produces a sample
idempotently with the client layer's (confluent-kafka's) producer, reads it back and
prints what happened.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.progress import Progress

from oncelog.cli import command_config
from oncelog.cli.command_config import CommandConfig
from oncelog.cli.common import console, stdout_console
from oncelog.client.config import ClientConfig
from oncelog.embedded import DEMO_METRICS_LISTENER


def demo(
    records: Annotated[int, typer.Option("--records", "-n", min=1)] = 50_000,
    partitions: Annotated[int, typer.Option("--partitions", "-p", min=1)] = 3,
    broker_only: Annotated[
        bool,
        typer.Option(
            "--broker-only", help="Only the idempotent produce/consume round trip, no Spark."
        ),
    ] = False,
    bootstrap: Annotated[
        str | None,
        typer.Option(
            "--bootstrap-server",
            "-b",
            help="With --broker-only: run the round trip against this cluster (topic 'demo', "
            "created if missing) instead of an embedded broker.",
        ),
    ] = None,
    config_file: CommandConfig = None,
) -> None:
    """The main job on embedded defaults: an exactly-once Spark pipeline whose driver
    is killed mid-run and restarted, then verified."""
    if (bootstrap is not None or config_file is not None) and not broker_only:
        # The Spark demo runs its own embedded PLAINTEXT broker: say so rather than
        # ignore the security settings.
        raise typer.BadParameter(
            "--bootstrap-server / --command-config apply to --broker-only; the Spark demo "
            "runs its own embedded broker"
        )
    if config_file is not None and bootstrap is None:
        raise typer.BadParameter(
            "--command-config needs --bootstrap-server: the embedded broker is PLAINTEXT"
        )
    if not broker_only:
        from oncelog.demo.spark_demo import run_demo

        raise typer.Exit(run_demo(records, console=stdout_console()))
    config = None if bootstrap is None else command_config.client_config(bootstrap, config_file)
    broker_round_trip(records, partitions, config)


@contextmanager
def _cluster(config: ClientConfig | None) -> Iterator[ClientConfig]:
    """The given cluster, or an embedded broker for the demo's lifetime."""
    if config is not None:
        console.print(f"[bold]cluster[/] {config.bootstrap} ({config.security.protocol})")
        yield config
        return
    from oncelog.embedded import EmbeddedBroker

    with EmbeddedBroker(settings={"metrics.listener": DEMO_METRICS_LISTENER}) as broker:
        console.print(f"[bold]broker[/] ready on {broker.bootstrap} (data in {broker.data_dir})")
        console.print(f"[bold]metrics and console[/] on {broker.http_url}")
        yield ClientConfig(broker.bootstrap)


def broker_round_trip(records: int, partitions: int, config: ClientConfig | None = None) -> None:
    """Produce idempotently and read back with the client layer; verify exactly-once.
    Against an existing cluster the demo reads only what this run wrote."""
    from oncelog.client.admin import Admin
    from oncelog.client.consumer import KafkaConsumer
    from oncelog.client.errors import ClientError
    from oncelog.client.kafka_producer import Delivered, KafkaProducer

    with _cluster(config) as cluster:
        with Admin(cluster, timeout=15) as admin:
            if admin.create_topics(["demo"], partitions):
                console.print(f"created topic [cyan]demo[/] with {partitions} partitions")
            else:
                console.print("topic [cyan]demo[/] exists")
        start = _end_offsets(cluster, partitions)

        producer = KafkaProducer.of(
            cluster, **{"enable.idempotence": True, "linger.ms": 5, "compression.type": "lz4"}
        )
        acked: list[int] = []
        errors: list[ClientError] = []

        def on_delivery(err: ClientError | None, delivered: Delivered | None) -> None:
            if err is not None:
                errors.append(err)
            elif delivered is not None:
                acked.append(delivered.offset)

        started = time.perf_counter()
        with Progress(console=stdout_console(), transient=True) as progress:
            task = progress.add_task("producing", total=records)
            for i in range(records):
                producer.produce(
                    "demo",
                    key=str(i % 1000).encode(),
                    value=f"record-{i}".encode(),
                    on_delivery=on_delivery,
                )
                if i % 1000 == 0:
                    producer.poll(0)
                    progress.update(task, completed=i)
            producer.flush(30)
            progress.update(task, completed=records)
        produce_s = time.perf_counter() - started
        if errors:
            raise errors[0]
        console.print(
            f"produced {len(acked)} records idempotently in {produce_s:.2f}s ({len(acked) / produce_s:,.0f} rec/s)"
        )

        consumer = KafkaConsumer.of(
            cluster,
            **{
                "group.id": "demo",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            },
        )
        consumer.assign([("demo", p, start[p]) for p in range(partitions)])
        seen: dict[bytes, int] = {}
        last_offset: dict[int, int] = {}
        out_of_order = 0
        deadline = time.monotonic() + 60
        with Progress(console=stdout_console(), transient=True) as progress:
            task = progress.add_task("consuming", total=records)
            while len(seen) < records and time.monotonic() < deadline:
                polled = consumer.consume(1000, 1.0)
                if polled.errors:
                    raise polled.errors[0]
                for msg in polled.records:
                    value, part, offset = msg.value or b"", msg.partition, msg.offset
                    seen[value] = seen.get(value, 0) + 1
                    if offset <= last_offset.get(part, -1):
                        out_of_order += 1
                    last_offset[part] = offset
                progress.update(task, completed=len(seen))
        consumer.close()
        # Destroyed while the broker still runs: librdkafka would otherwise log
        # "Connection refused" as the embedded broker stops under live clients.
        del producer
        duplicates = sum(c - 1 for c in seen.values())
        missing = records - len(seen)
        ok = duplicates == 0 and missing == 0 and out_of_order == 0
        verdict = "exactly-once verified" if ok else "exactly-once FAILED"
        console.print(
            f"[bold {'green' if ok else 'red'}]{verdict}[/]: {records} in, {sum(seen.values())} out, {duplicates} duplicates, {missing} missing"
        )
        if not ok:
            raise typer.Exit(1)


def _end_offsets(cluster: ClientConfig, partitions: int) -> dict[int, int]:
    """Where each partition of 'demo' ends now (0 on a fresh topic)."""
    from oncelog.client.admin import LATEST, Admin

    with Admin(cluster) as admin:
        ends = admin.list_offsets(
            [("demo", p) for p in range(partitions)], LATEST, read_committed=False
        )
    return {p: ends[("demo", p)] for p in range(partitions)}
