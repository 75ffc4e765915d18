"""`oncelog demo`: the main job on embedded defaults.

Starts a broker in a temporary directory, creates a topic, produces a sample
idempotently with confluent-kafka, reads it back and prints what happened.
"""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import Progress

console = Console()


def demo(
    records: Annotated[int, typer.Option("--records", "-n", min=1)] = 50_000,
    partitions: Annotated[int, typer.Option("--partitions", "-p", min=1)] = 3,
    broker_only: Annotated[
        bool,
        typer.Option(
            "--broker-only", help="Only the idempotent produce/consume round trip, no Spark."
        ),
    ] = False,
) -> None:
    """The main job on embedded defaults: an exactly-once Spark pipeline whose driver
    is killed mid-run and restarted, then verified."""
    if not broker_only:
        from oncelog.demo.spark_demo import run_demo

        raise typer.Exit(run_demo(records))
    broker_round_trip(records, partitions)


def broker_round_trip(records: int, partitions: int) -> None:
    """Produce idempotently and read back with confluent-kafka; verify exactly-once."""
    from confluent_kafka import Consumer, KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from oncelog.embedded import EmbeddedBroker

    with EmbeddedBroker() as broker:
        console.print(f"[bold]broker[/] ready on {broker.bootstrap} (data in {broker.data_dir})")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("demo", partitions, 1)])["demo"].result(15)
        console.print(f"created topic [cyan]demo[/] with {partitions} partitions")

        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "compression.type": "lz4",
            }
        )
        acked: list[int] = []
        errors: list[str] = []

        def on_delivery(err, msg):  # type: ignore[no-untyped-def]
            if err is not None:
                errors.append(str(err))
            else:
                acked.append(msg.offset())

        started = time.perf_counter()
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("producing", total=records)
            for i in range(records):
                while True:
                    try:
                        producer.produce(
                            "demo",
                            key=str(i % 1000).encode(),
                            value=f"record-{i}".encode(),
                            on_delivery=on_delivery,
                        )
                        break
                    except BufferError:
                        producer.poll(0.05)
                if i % 1000 == 0:
                    producer.poll(0)
                    progress.update(task, completed=i)
            producer.flush(30)
            progress.update(task, completed=records)
        produce_s = time.perf_counter() - started
        if errors:
            raise KafkaException(errors[0])
        console.print(
            f"produced {len(acked)} records idempotently in {produce_s:.2f}s ({len(acked) / produce_s:,.0f} rec/s)"
        )

        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "demo",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        from confluent_kafka import TopicPartition

        consumer.assign([TopicPartition("demo", p, 0) for p in range(partitions)])
        seen: dict[bytes, int] = {}
        last_offset: dict[int, int] = {}
        out_of_order = 0
        deadline = time.monotonic() + 60
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("consuming", total=records)
            while len(seen) < records and time.monotonic() < deadline:
                for msg in consumer.consume(1000, 1.0):
                    if msg.error():
                        raise KafkaException(msg.error())
                    value, part, offset = (
                        msg.value() or b"",
                        msg.partition() or 0,
                        msg.offset() or 0,
                    )
                    seen[value] = seen.get(value, 0) + 1
                    if offset <= last_offset.get(part, -1):
                        out_of_order += 1
                    last_offset[part] = offset
                progress.update(task, completed=len(seen))
        consumer.close()
        duplicates = sum(c - 1 for c in seen.values())
        missing = records - len(seen)
        ok = duplicates == 0 and missing == 0 and out_of_order == 0
        verdict = "exactly-once verified" if ok else "exactly-once FAILED"
        console.print(
            f"[bold {'green' if ok else 'red'}]{verdict}[/]: {records} in, {sum(seen.values())} out, {duplicates} duplicates, {missing} missing"
        )
        if not ok:
            raise typer.Exit(1)
