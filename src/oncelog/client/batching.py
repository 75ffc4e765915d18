"""The record accumulator of oncelog's producer (pure: no sockets, no clock).

Records are appended per partition into an open batch; a batch is *sealed* when it reaches
``batch_size`` bytes (or when the producer flushes): it then gets its base sequence (the
partition's next sequence, idempotence per KIP-98; sequences wrap after Int.MAX_VALUE as in
Kafka) and is encoded once as a record batch v2 (``oncelog.records``: CRC, compression).
Sealed batches wait in a FIFO per partition. A send round takes the *head* batch of each
partition (Produce v3+ carries exactly one batch per partition), and a batch leaves the
queue only when the broker acknowledged it: a retry resends the very same bytes, with the
same sequence, so the broker deduplicates it, and no later batch of that partition is ever
sent before an earlier one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from oncelog.records.builder import RecordTuple, build_batch
from oncelog.records.compression import CompressionType

TopicPartition = tuple[str, int]
Header = tuple[str, bytes | None]

MAX_SEQUENCE = 2_147_483_647
# Bytes of a record beyond its key, value and headers: varint lengths and deltas, attributes.
RECORD_OVERHEAD = 21
# The record batch v2 header.
BATCH_OVERHEAD = 61


def next_sequence(sequence: int, count: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``: wraps to 0 after Int.MAX_VALUE."""
    if sequence > MAX_SEQUENCE - count:
        return count - (MAX_SEQUENCE - sequence) - 1
    return sequence + count


def record_size(key: bytes | None, value: bytes | None, headers: Sequence[Header]) -> int:
    """An estimate (from above) of one record's encoded size, uncompressed."""
    size = RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)
    for name, data in headers:
        size += 10 + len(name.encode()) + (len(data) if data else 0)
    return size


@dataclass(frozen=True, slots=True)
class SealedBatch:
    topic: str
    partition: int
    base_sequence: int
    count: int
    data: bytes  # the encoded record batch v2


@dataclass(slots=True)
class _Open:
    records: list[RecordTuple] = field(default_factory=list)
    size: int = BATCH_OVERHEAD


class Accumulator:
    """Open and sealed batches of one producer identity (producer id, epoch); ``reset``
    starts a new identity (sequences start at 0 again)."""

    def __init__(
        self,
        *,
        batch_size: int = 512 * 1024,
        compression: int = CompressionType.NONE,
        transactional: bool = True,
    ) -> None:
        if batch_size <= BATCH_OVERHEAD:
            raise ValueError(f"batch size {batch_size} is too small")
        self.batch_size = batch_size
        self.compression = compression
        self.transactional = transactional
        self.producer_id = -1
        self.producer_epoch = -1
        self._sequences: dict[TopicPartition, int] = {}
        self._open: dict[TopicPartition, _Open] = {}
        self._sealed: dict[TopicPartition, deque[SealedBatch]] = {}
        self.sealed_bytes = 0
        self.records = 0  # appended since the last reset

    def reset(self, producer_id: int, producer_epoch: int) -> None:
        """A new identity: drop everything buffered, sequences restart at 0."""
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self._sequences.clear()
        self._open.clear()
        self._sealed.clear()
        self.sealed_bytes = 0
        self.records = 0

    def discard(self) -> None:
        """Drop what was not acknowledged (an aborted transaction). Each partition's next
        sequence goes back to its first unacknowledged batch (transaction version 1 carries
        sequences into the next transaction; version 2 starts a new epoch anyway)."""
        for tp, queue in self._sealed.items():
            self._sequences[tp] = queue[0].base_sequence
        self._open.clear()
        self._sealed.clear()
        self.sealed_bytes = 0

    def drop(self, tp: TopicPartition) -> None:
        """A batch of ``tp`` failed for good: drop it and the partition's later batches (they
        could never follow it in sequence); the partition's next sequence is the failed
        batch's again."""
        queue = self._sealed.pop(tp, None)
        if queue:
            self._sequences[tp] = queue[0].base_sequence
            self.sealed_bytes -= sum(len(b.data) for b in queue)
        self._open.pop(tp, None)

    def sequence(self, tp: TopicPartition) -> int:
        """The base sequence the partition's next sealed batch gets."""
        return self._sequences.get(tp, 0)

    def append(
        self,
        tp: TopicPartition,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        timestamp_ms: int,
    ) -> bool:
        """Buffer one record; True when that filled the partition's batch and sealed it."""
        size = record_size(key, value, headers)
        batch = self._open.get(tp)
        if batch is None:
            batch = self._open[tp] = _Open()
        elif batch.size + size > self.batch_size:
            self.seal(tp)
            batch = self._open[tp] = _Open()
        batch.records.append((key, value, tuple(headers), timestamp_ms))
        batch.size += size
        self.records += 1
        if batch.size >= self.batch_size:
            self.seal(tp)
            return True
        return False

    def seal(self, tp: TopicPartition) -> SealedBatch | None:
        """Close the partition's open batch: sequence it and encode it."""
        batch = self._open.pop(tp, None)
        if batch is None or not batch.records:
            return None
        base = self.sequence(tp)
        sealed = SealedBatch(
            tp[0],
            tp[1],
            base,
            len(batch.records),
            build_batch(
                batch.records,
                compression=self.compression,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=base,
                transactional=self.transactional,
            ),
        )
        self._sequences[tp] = next_sequence(base, sealed.count)
        self._sealed.setdefault(tp, deque()).append(sealed)
        self.sealed_bytes += len(sealed.data)
        return sealed

    def seal_all(self) -> None:
        for tp in list(self._open):
            self.seal(tp)

    def pending(self) -> bool:
        """Anything sealed and not yet acknowledged?"""
        return bool(self._sealed)

    def buffered(self) -> bool:
        """Anything open or sealed and not yet acknowledged?"""
        return bool(self._sealed) or any(b.records for b in self._open.values())

    def round(self, max_bytes: int, exclude: Iterable[TopicPartition] = ()) -> list[SealedBatch]:
        """The head batch of each partition with sealed batches, up to ``max_bytes`` in all
        (at least one), in a stable order; partitions in ``exclude`` are skipped."""
        skip = set(exclude)
        out: list[SealedBatch] = []
        size = 0
        for tp in sorted(self._sealed):
            if tp in skip:
                continue
            head = self._sealed[tp][0]
            if out and size + len(head.data) > max_bytes:
                break
            out.append(head)
            size += len(head.data)
        return out

    def acknowledged(self, batch: SealedBatch) -> None:
        """The broker has ``batch`` (the head of its partition's queue)."""
        tp = (batch.topic, batch.partition)
        queue = self._sealed.get(tp)
        if not queue or queue[0] is not batch:
            raise ValueError(f"{tp}: the acknowledged batch is not the head of its queue")
        queue.popleft()
        self.sealed_bytes -= len(batch.data)
        if not queue:
            del self._sealed[tp]
