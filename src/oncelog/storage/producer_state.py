"""Per-partition producer state for idempotent and transactional producers (KIP-98, KIP-192).

Sans-IO: no files, sockets or clocks; callers pass offsets and ``now_ms`` in and persist
``snapshot()`` bytes themselves. Semantics follow current Kafka's producer state manager
(ProducerStateManager, ProducerAppendInfo): a batch is a duplicate only when it matches a
cached batch exactly, every other out-of-sequence batch is OUT_OF_ORDER_SEQUENCE_NUMBER,
and KIP-360's rule lets a producer the partition holds no state for continue at any
sequence.
"""

from __future__ import annotations

import heapq
import struct
from collections import deque
from dataclasses import dataclass

import crc32c
from kio.schema.errors import ErrorCode

from oncelog.records.batch import BatchHeader

from .errors import LogError

SEQ_MOD = 0x80000000  # sequences are non-negative int32 and wrap to 0 after 2**31-1
NO_SEQUENCE = -1
NO_EPOCH = -1
SNAPSHOT_VERSION = 1

_HEAD = struct.Struct(">BI")  # version, CRC-32C of everything after this header
_BODY = struct.Struct(">qI")  # last_offset, producer count
_ENTRY = struct.Struct(">qhiqqB")  # pid, epoch, coord epoch, last ts, txn first (-1), n batches
_BATCH = struct.Struct(">iiqqq")


class ProducerStateError(LogError):
    """A batch or marker the producer state rejects; ``error_code`` goes into the response."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class OutOfOrderSequence(ProducerStateError):
    """A batch that is neither the next in sequence nor a cached duplicate (Kafka's
    OutOfOrderSequenceException). The fields let the broker log who sent what."""

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int,
        first_seq: int,
        last_seq: int,
        last_appended_seq: int,
        *,
        new_epoch: bool = False,
        ended_txn: bool = False,
    ) -> None:
        expected = 0 if new_epoch else (last_appended_seq + 1) % SEQ_MOD
        if new_epoch:
            why = f"new epoch {producer_epoch} must start at sequence 0"
        elif ended_txn:
            why = (
                f"those sequences belong to a batch of an ended transaction; expected "
                f"sequence {expected} after {last_appended_seq}"
            )
        else:
            why = f"expected sequence {expected} after {last_appended_seq}"
        super().__init__(
            ErrorCode.out_of_order_sequence_number,
            f"producer {producer_id} epoch {producer_epoch} sent sequences {first_seq}..{last_seq}: "
            f"{why}",
        )
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.first_seq = first_seq
        self.last_seq = last_seq
        self.expected_seq = expected


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int  # the batch's max timestamp, answered again for duplicates


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # offset of the marker
    is_aborted: bool


@dataclass(frozen=True, slots=True)
class ProducerEntry:
    """Read-only view of one producer's state."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int | None
    batches: tuple[BatchMetadata, ...]

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1


@dataclass(frozen=True, slots=True)
class OpenTxn:
    """One transaction open in a partition, for monitoring."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    first_offset: int
    # The first batch's timestamp while the producer's cached batches still hold it, else
    # the producer's latest append time: a lower bound of the transaction's age.
    first_timestamp: int
    last_timestamp: int  # the producer's latest append (broker clock)


class _Entry:
    __slots__ = ("epoch", "batches", "last_timestamp", "coordinator_epoch")

    def __init__(self, epoch: int, maxlen: int) -> None:
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=maxlen)
        self.last_timestamp = -1
        self.coordinator_epoch = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def set_epoch(self, epoch: int) -> None:
        # A new epoch restarts sequences at 0, so the old cache can no longer match.
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()

    def touch(self, now_ms: int) -> None:
        self.last_timestamp = max(self.last_timestamp, now_ms)


class ProducerStateManager:
    MAX_CACHED_BATCHES = 5

    def __init__(self, *, producer_id_expiration_ms: int = 86_400_000) -> None:
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, _Entry] = {}
        self._ongoing: dict[int, int] = {}  # producer id -> first offset of its open txn
        # Min-heap of (first_offset, pid) with lazy deletion; an item is live iff _ongoing agrees.
        self._txn_heap: list[tuple[int, int]] = []
        self._last_offset = -1

    # -- validation -------------------------------------------------------------------------

    def check_append(self, header: BatchHeader) -> BatchMetadata | None:
        """Validate a client batch before offsets are assigned.

        Returns the cached metadata of an identical recent batch (answer success with its
        offsets, append nothing), None if the batch may be appended, else raises.
        """
        pid = header.producer_id
        if pid < 0:
            return None
        if header.is_control:
            raise ProducerStateError(
                ErrorCode.invalid_record, "clients may not write control batches"
            )
        if header.base_sequence < 0:
            raise ProducerStateError(
                ErrorCode.invalid_record, f"producer {pid} sent a batch without sequence"
            )
        epoch, first, last = header.producer_epoch, header.base_sequence, header.last_sequence
        entry = self._producers.get(pid)
        if entry is None:
            # KIP-360 (Kafka >= 2.5): with no state for this producer (new, expired, or its
            # records removed by retention/DeleteRecords) any sequence is accepted, so a
            # producer whose state was dropped continues instead of failing every send.
            self._check_txn_bit(pid, header)
            return None
        if epoch < entry.epoch:
            raise ProducerStateError(
                ErrorCode.invalid_producer_epoch,
                f"producer {pid} epoch {epoch} is older than {entry.epoch}",
            )
        if epoch == entry.epoch:
            # Kafka's ProducerStateEntry.findDuplicateBatch: a duplicate is a batch whose
            # (first, last) sequence range equals a cached batch of the same epoch; it is
            # answered with that batch's original offsets. Anything else that is not
            # last + 1 fails ProducerAppendInfo.checkSequence with OUT_OF_ORDER_SEQUENCE:
            # current Kafka brokers never answer DUPLICATE_SEQUENCE_NUMBER. Answering 46 for
            # a batch "behind" the last sequence would let a client that reuses a sequence
            # after an abort (seen in librdkafka) count a batch as delivered that no log holds.
            for cached in entry.batches:
                if cached.first_seq == first and cached.last_seq == last:
                    if header.is_transactional and not self._in_open_txn(pid, cached):
                        # Stricter than Kafka: under transaction version 1 the epoch
                        # survives an abort, and librdkafka can reuse an aborted batch's
                        # sequences for a new batch of the same size. Answering "duplicate"
                        # with the aborted batch's offsets would make the client count the
                        # new records delivered and commit without them. A client's own
                        # retry only ever targets its open transaction.
                        raise OutOfOrderSequence(
                            pid, epoch, first, last, entry.last_seq, ended_txn=True
                        )
                    return cached
            current = entry.last_seq
            if first != (current + 1) % SEQ_MOD:
                raise OutOfOrderSequence(pid, epoch, first, last, current)
        elif first != 0:
            raise OutOfOrderSequence(pid, epoch, first, last, NO_SEQUENCE, new_epoch=True)
        self._check_txn_bit(pid, header)
        return None

    def _in_open_txn(self, pid: int, batch: BatchMetadata) -> bool:
        first = self._ongoing.get(pid)
        return first is not None and batch.first_offset >= first

    def _check_txn_bit(self, pid: int, header: BatchHeader) -> None:
        if pid in self._ongoing and not header.is_transactional:
            raise ProducerStateError(
                ErrorCode.invalid_txn_state,
                f"non-transactional batch from producer {pid} during an open transaction",
            )

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        entry = self._producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise ProducerStateError(
                ErrorCode.invalid_producer_epoch,
                f"marker epoch {producer_epoch} older than producer {producer_id} "
                f"epoch {entry.epoch}",
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise ProducerStateError(
                ErrorCode.transaction_coordinator_fenced,
                f"coordinator epoch {coordinator_epoch} older than {entry.coordinator_epoch}",
            )

    # -- updates (also used for log replay: no validation) -----------------------------------

    def on_append(self, header: BatchHeader, *, base_offset: int, now_ms: int) -> None:
        """Record a data batch appended at ``base_offset`` (header.base_offset may be stale)."""
        if header.is_control:
            raise ValueError("control batches go through on_marker")
        last_offset = base_offset + header.last_offset_delta
        self._last_offset = max(self._last_offset, last_offset)
        pid = header.producer_id
        if pid < 0:
            return
        entry = self._producers.get(pid)
        if entry is None:
            entry = self._producers[pid] = _Entry(header.producer_epoch, self.MAX_CACHED_BATCHES)
        entry.set_epoch(header.producer_epoch)
        entry.batches.append(
            BatchMetadata(
                header.base_sequence,
                header.last_sequence,
                base_offset,
                last_offset,
                header.max_timestamp,
            )
        )
        entry.touch(now_ms)
        if header.is_transactional and pid not in self._ongoing:
            self._ongoing[pid] = base_offset
            heapq.heappush(self._txn_heap, (base_offset, pid))

    def on_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        *,
        offset: int,
        now_ms: int,
    ) -> CompletedTxn | None:
        """Apply a commit/abort marker written at ``offset``; returns the txn it completed."""
        self._last_offset = max(self._last_offset, offset)
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = _Entry(producer_epoch, self.MAX_CACHED_BATCHES)
        entry.set_epoch(producer_epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.touch(now_ms)
        first = self._ongoing.pop(producer_id, None)
        if first is None:
            return None  # an empty txn here: nothing to complete, LSO unaffected
        self._compact_heap()
        return CompletedTxn(producer_id, first, offset, not commit)

    def _compact_heap(self) -> None:
        heap = self._txn_heap
        while heap and self._ongoing.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        # Dead items buried under a long-running txn would otherwise pile up.
        if len(heap) > 2 * len(self._ongoing) + 32:
            self._txn_heap = [(first, pid) for pid, first in self._ongoing.items()]
            heapq.heapify(self._txn_heap)

    # -- queries ---------------------------------------------------------------------------

    def first_unstable_offset(self) -> int | None:
        self._compact_heap()
        return self._txn_heap[0][0] if self._txn_heap else None

    def ongoing_transactions(self) -> list[tuple[int, int, int]]:
        """(producer_id, producer_epoch, first_offset) of open txns, by first offset."""
        return sorted(
            ((pid, self._producers[pid].epoch, first) for pid, first in self._ongoing.items()),
            key=lambda t: (t[2], t[0]),
        )

    def open_transactions(self) -> list[OpenTxn]:
        """The open transactions, oldest first."""
        out = []
        for pid, epoch, first in self.ongoing_transactions():
            entry = self._producers[pid]
            started = next(
                (b.timestamp for b in entry.batches if b.first_offset == first),
                entry.last_timestamp,
            )
            out.append(
                OpenTxn(pid, epoch, entry.coordinator_epoch, first, started, entry.last_timestamp)
            )
        return out

    def producer_ids(self) -> list[int]:
        return list(self._producers)

    def producer(self, producer_id: int) -> ProducerEntry | None:
        entry = self._producers.get(producer_id)
        return None if entry is None else self._view(producer_id, entry)

    def producers(self) -> list[ProducerEntry]:
        return [self._view(pid, e) for pid, e in sorted(self._producers.items())]

    def _view(self, pid: int, entry: _Entry) -> ProducerEntry:
        return ProducerEntry(
            pid,
            entry.epoch,
            entry.last_seq,
            entry.last_timestamp,
            entry.coordinator_epoch,
            self._ongoing.get(pid),
            tuple(entry.batches),
        )

    @property
    def last_offset(self) -> int:
        """Highest log offset applied; replay the log from ``last_offset + 1``."""
        return self._last_offset

    # -- removal ---------------------------------------------------------------------------

    def expire(self, now_ms: int) -> list[int]:
        """Drop producers idle for >= the expiration time that have no open txn."""
        limit = self.producer_id_expiration_ms
        gone = [
            pid
            for pid, e in self._producers.items()
            if pid not in self._ongoing and now_ms - e.last_timestamp >= limit
        ]
        for pid in gone:
            del self._producers[pid]
        return sorted(gone)

    def truncate_head(self, log_start_offset: int, *, keep_dataless: bool = False) -> None:
        """The log start moved: forget producers whose data is all gone (open txns stay).

        ``keep_dataless``: keep producers with no batch cached, whose last record was a
        marker that bumped their epoch (transaction version 2). Loading a log does so, as
        Kafka's does: their epoch still fences older ones, and nothing says their data is
        gone. A log start moved by retention or DeleteRecords drops them, as Kafka does."""
        gone = [
            pid
            for pid, e in self._producers.items()
            if pid not in self._ongoing
            and e.last_data_offset < log_start_offset
            and not (keep_dataless and not e.batches)
        ]
        for pid in gone:
            del self._producers[pid]
        self._last_offset = max(self._last_offset, log_start_offset - 1)

    # -- snapshots -------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        parts = [_BODY.pack(self._last_offset, len(self._producers))]
        for pid, e in sorted(self._producers.items()):
            txn_first = self._ongoing.get(pid, -1)
            parts.append(
                _ENTRY.pack(
                    pid, e.epoch, e.coordinator_epoch, e.last_timestamp, txn_first, len(e.batches)
                )
            )
            parts.extend(
                _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp)
                for b in e.batches
            )
        body = b"".join(parts)
        return _HEAD.pack(SNAPSHOT_VERSION, crc32c.crc32c(body)) + body

    @classmethod
    def from_snapshot(cls, data: bytes, *, producer_id_expiration_ms: int) -> ProducerStateManager:
        """Rebuild from ``snapshot()`` bytes; ValueError means rebuild from the log instead."""
        try:
            return cls._load(bytes(data), producer_id_expiration_ms)
        except struct.error as exc:
            raise ValueError(f"truncated producer state snapshot: {exc}") from exc

    @classmethod
    def _load(cls, data: bytes, expiration_ms: int) -> ProducerStateManager:
        version, crc = _HEAD.unpack_from(data, 0)
        if version != SNAPSHOT_VERSION:
            raise ValueError(f"unsupported producer state snapshot version {version}")
        body = memoryview(data)[_HEAD.size :]
        if crc32c.crc32c(body) != crc:
            raise ValueError("producer state snapshot CRC-32C mismatch")
        mgr = cls(producer_id_expiration_ms=expiration_ms)
        mgr._last_offset, count = _BODY.unpack_from(body, 0)
        pos = _BODY.size
        for _ in range(count):
            pid, epoch, coord, ts, txn_first, n = _ENTRY.unpack_from(body, pos)
            pos += _ENTRY.size
            if pid < 0 or pid in mgr._producers or n > cls.MAX_CACHED_BATCHES:
                raise ValueError(f"invalid producer entry {pid} in snapshot")
            entry = mgr._producers[pid] = _Entry(epoch, cls.MAX_CACHED_BATCHES)
            entry.coordinator_epoch, entry.last_timestamp = coord, ts
            for _ in range(n):
                entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                pos += _BATCH.size
            if txn_first >= 0:
                mgr._ongoing[pid] = txn_first
                mgr._txn_heap.append((txn_first, pid))
        if pos != len(body):
            raise ValueError("trailing bytes in producer state snapshot")
        heapq.heapify(mgr._txn_heap)
        return mgr
