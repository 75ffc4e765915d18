"""Connect task-loop benchmark (preliminary: task loops in one process, no worker yet).

VerifiableSource (unthrottled) -> transform-free chain -> JsonConverter (schemas off)
-> idempotent producer -> embedded oncelog broker, with 1 and 3 source task loops,
each on its own thread as a worker runs them. Prints acknowledged records/s and
how many offset commits were made. The full benchmark of issue 10 (one worker,
sink into PostgreSQL) comes with the worker.

    PYTHONPATH=src .venv/bin/python bench/connect.py --seconds 10
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oncelog.connect.assignor import ConnectorTaskId  # noqa: E402
from oncelog.connect.connectors.verifiable import VerifiableSourceConnector, VerifiableSourceTask  # noqa: E402
from oncelog.connect.converters import JsonConverter  # noqa: E402
from oncelog.connect.offsets import MemoryOffsetStore  # noqa: E402
from oncelog.connect.transforms.chain import TransformationChain  # noqa: E402
from oncelog.connect.worker_source_task import WorkerSourceTask  # noqa: E402
from oncelog.embedded import EmbeddedBroker  # noqa: E402
from tests.integration.connect.kafka_adapters import ConfluentOffsetWriter, ConfluentSender  # noqa: E402


def run(broker: EmbeddedBroker, tasks: int, seconds: float, batch: int) -> tuple[float, int]:
    topic = f"verify-{tasks}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(15)
    connector = VerifiableSourceConnector()
    connector.start({"name": "bench", "topic": topic, "throughput": "-1", "batch.size": str(batch)})
    loops = []
    for config in connector.task_configs(tasks):
        converter = JsonConverter()
        converter.configure({"schemas.enable": "false"}, False)
        key_converter = JsonConverter()
        key_converter.configure({"schemas.enable": "false"}, True)
        loop = WorkerSourceTask(
            ConnectorTaskId("bench", int(config["id"])),
            VerifiableSourceTask(),
            config,
            key_converter=key_converter,
            value_converter=converter,
            chain=TransformationChain([]),
            sender=ConfluentSender(
                {
                    "bootstrap.servers": broker.bootstrap,
                    "enable.idempotence": "true",
                    "linger.ms": "5",
                }
            ),
            offset_writer=ConfluentOffsetWriter(broker.bootstrap, "connect-offsets"),
            offsets=MemoryOffsetStore(),
            offset_flush_interval_ms=1000,
        )
        loop.start()
        loops.append(loop)
    stop = threading.Event()

    def drive(loop: WorkerSourceTask) -> None:
        while not stop.is_set():
            loop.iterate()

    threads = [threading.Thread(target=drive, args=(loop,)) for loop in loops]
    start = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    for loop in loops:
        loop.close()
        loop.stop()
    elapsed = time.monotonic() - start
    acked = sum(loop.metrics.acked for loop in loops)
    commits = sum(loop.metrics.offset_commits for loop in loops)
    return acked / elapsed, commits


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument(
        "--batch", type=int, default=1000, help="VerifiableSource batch.size (records per poll)"
    )
    args = parser.parse_args()
    broker = EmbeddedBroker(log_level="WARNING").start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        offsets = NewTopic("connect-offsets", 25, 1, config={"cleanup.policy": "compact"})
        admin.create_topics([offsets])["connect-offsets"].result(15)
        for tasks in (1, 3):
            rate, commits = run(broker, tasks, args.seconds, args.batch)
            print(
                f"VerifiableSource, {tasks} task(s): {rate:,.0f} records/s acknowledged, {commits} offset commits"
            )
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
