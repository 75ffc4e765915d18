"""Reading an internal topic (config, status or offsets) to its end, as Kafka
Connect's ``KafkaBasedLog`` does: take the end offset of every partition, then
consume from where the reader stopped until each partition reaches its end.

Workers read the config topic to the end before acting on an assignment, and the
offsets topic before starting source tasks. The consumer is reached through
:class:`LogConsumer`, which the client layer implements (read_committed once
exactly-once support lands, so aborted offset writes are never seen).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from oncelog.connect.api.errors import ConnectException


@dataclass(frozen=True)
class LogRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


class LogConsumer(Protocol):
    def partitions(self, topic: str) -> list[int]: ...

    def end_offsets(
        self, topic: str, partitions: list[int], timeout_s: float, *, high_watermark: bool = False
    ) -> dict[int, int]:
        """The partitions' end offsets (under the consumer's isolation level, or with
        ``high_watermark`` the high watermarks); transient failures are retried until
        ``timeout_s``."""

    def assign(self, topic: str, positions: dict[int, int]) -> None:
        """Read ``topic`` from these positions (partition -> next offset)."""

    def poll(self, timeout_s: float) -> list[LogRecord]: ...

    def positions(self, topic: str, partitions: list[int]) -> dict[int, int]:
        """The consumer's next offsets; they pass compaction gaps and transaction
        markers, which no record reports."""


class InternalTopicReader:
    """Feeds every record of one topic to ``apply`` and keeps the positions."""

    def __init__(
        self,
        consumer: LogConsumer,
        topic: str,
        apply: Callable[[LogRecord], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.consumer = consumer
        self.topic = topic
        self.apply = apply
        self.clock = clock
        self.positions: dict[int, int] = {}

    def start(self) -> None:
        partitions = self.consumer.partitions(self.topic)
        if not partitions:
            raise ConnectException(f"Internal topic {self.topic} does not exist")
        self.positions = dict.fromkeys(partitions, 0)
        self.consumer.assign(self.topic, dict(self.positions))

    def read_to_end(self, timeout_s: float, *, high_watermark: bool = False) -> None:
        """Apply every record up to the end offsets taken now; raises on timeout.

        ``high_watermark``: read to the high watermarks even when the consumer reads
        read_committed, as Kafka's ``KafkaBasedLog`` does. The broker writes a
        transaction's commit marker after it answers EndTxn, so only then does a read
        right after one's own transactional write surely see it; it also waits for any
        transaction still open (bounded by ``timeout_s``)."""
        deadline = self.clock() + timeout_s
        ends = self.consumer.end_offsets(
            self.topic, sorted(self.positions), timeout_s, high_watermark=high_watermark
        )
        while any(self.positions[p] < end for p, end in ends.items()):
            if self.clock() >= deadline:
                behind = {
                    p: (self.positions[p], end)
                    for p, end in ends.items()
                    if self.positions[p] < end
                }
                raise ConnectException(
                    f"Timed out reading {self.topic} to its end: (position, end) {behind}"
                )
            self.poll(0.2)

    def poll(self, timeout_s: float) -> int:
        """Apply what has arrived (also past the last end offsets); returns how many."""
        records = self.consumer.poll(timeout_s)
        for record in records:
            self.apply(record)
            self.positions[record.partition] = record.offset + 1
        for partition, position in self.consumer.positions(
            self.topic, sorted(self.positions)
        ).items():
            if position >= 0:
                self.positions[partition] = max(self.positions[partition], position)
        return len(records)
