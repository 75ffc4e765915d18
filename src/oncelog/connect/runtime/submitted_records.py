"""Which source offsets are safe to commit (Kafka Connect's ``SubmittedRecords``).

A source task's records are produced asynchronously and acknowledged out of order.
An offset may only be committed once its record *and every earlier record of the
same source partition* were acknowledged; otherwise a crash after the commit could
skip an unsent record. Records are tracked per source partition in submission
order; :meth:`SubmittedRecords.committable_offsets` takes the acknowledged prefix of
each partition and returns the offset of its last record.

Records without a source partition or offset are not tracked (nothing to commit).
A record dropped by a transform or by error tolerance is acknowledged at once.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from oncelog.connect.api.connector import partition_key


@dataclass
class SubmittedRecord:
    partition: Any  # partition_key(...) of the source partition, None if untracked
    offset: Mapping[str, Any] | None
    seq: int
    acked: bool = False


@dataclass(frozen=True)
class CommittableOffsets:
    offsets: dict[Any, Mapping[str, Any]]  # partition key -> newest committable offset
    committable: int  # records whose offsets are in ``offsets``
    uncommittable: int  # records still waiting for themselves or an earlier record
    partitions: dict[Any, Mapping[str, Any]] = field(default_factory=dict)  # key -> partition map

    def is_empty(self) -> bool:
        return not self.offsets


class SubmittedRecords:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[Any, deque[SubmittedRecord]] = {}
        self._partitions: dict[Any, Mapping[str, Any]] = {}
        self._seq = itertools.count()

    def submit(
        self, partition: Mapping[str, Any] | None, offset: Mapping[str, Any] | None
    ) -> SubmittedRecord:
        """Track a record about to be sent; keep the handle to :meth:`ack` it."""
        if partition is None or offset is None:
            return SubmittedRecord(None, None, next(self._seq), acked=True)
        key = partition_key(partition)
        record = SubmittedRecord(key, offset, next(self._seq))
        with self._lock:
            self._partitions.setdefault(key, dict(partition))
            self._records.setdefault(key, deque()).append(record)
        return record

    def ack(self, record: SubmittedRecord) -> None:
        with self._lock:
            record.acked = True

    def remove(self, record: SubmittedRecord) -> bool:
        """Forget the newest record of its partition (a send that failed before being
        queued, which the task will retry); False if it is not the newest."""
        with self._lock:
            records = self._records.get(record.partition)
            if not records or records[-1] is not record:
                return False
            records.pop()
            if not records:
                del self._records[record.partition]
            return True

    def committable_offsets(self) -> CommittableOffsets:
        """Take the acknowledged prefix of every partition (those records are forgotten)."""
        offsets: dict[Any, Mapping[str, Any]] = {}
        committable = uncommittable = 0
        with self._lock:
            for key in list(self._records):
                records = self._records[key]
                while records and records[0].acked:
                    done = records.popleft()
                    assert done.offset is not None
                    offsets[key] = done.offset
                    committable += 1
                uncommittable += len(records)
                if not records:
                    del self._records[key]
            partitions = {k: self._partitions[k] for k in offsets}
        return CommittableOffsets(offsets, committable, uncommittable, partitions)

    def pending(self) -> int:
        """Records submitted and not yet taken by :meth:`committable_offsets`."""
        with self._lock:
            return sum(len(r) for r in self._records.values())

    def unacked(self) -> int:
        with self._lock:
            return sum(1 for records in self._records.values() for r in records if not r.acked)
