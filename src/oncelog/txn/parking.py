"""Blocking begin: AddPartitionsToTxn / AddOffsetsToTxn requests that arrive while
the previous transaction's markers are in flight wait here instead of being bounced with
CONCURRENT_TRANSACTIONS, and are re-run in arrival order once that transaction is complete."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from oncelog.txn.metadata import TV_0, TopicPartition


@dataclass(frozen=True, slots=True)
class AddRequest:
    token: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: frozenset[TopicPartition]
    transaction_version: int = TV_0  # TV_2 for an implicit add (Produce v12, TxnOffsetCommit v5)


class ParkingLot:
    def __init__(self) -> None:
        self._queues: dict[str, deque[AddRequest]] = {}
        self._by_token: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self._by_token)

    def park(self, req: AddRequest) -> None:
        self._queues.setdefault(req.transactional_id, deque()).append(req)
        self._by_token[req.token] = req.transactional_id

    def has(self, transactional_id: str) -> bool:
        return transactional_id in self._queues

    def pop(self, transactional_id: str) -> AddRequest | None:
        """The oldest parked request of ``transactional_id``, removed."""
        queue = self._queues.get(transactional_id)
        if not queue:
            return None
        req = queue.popleft()
        del self._by_token[req.token]
        if not queue:
            del self._queues[transactional_id]
        return req

    def cancel(self, token: int) -> bool:
        transactional_id = self._by_token.pop(token, None)
        if transactional_id is None:
            return False
        queue = self._queues[transactional_id]
        for req in queue:
            if req.token == token:
                queue.remove(req)
                break
        if not queue:
            del self._queues[transactional_id]
        return True
