"""Incremental fetch sessions (KIP-227), as a pure cache.

A full fetch (epoch 0) creates a session holding the partitions and their
fetch positions; incremental fetches (epoch > 0) send only changed partitions
and receive only partitions whose data or offsets changed.

A session id is a random 31-bit number (Kafka's ``FetchSessionCache`` draws them too),
and a session belongs to the principal and listener that created it: another client
naming its id, by guess or by count, is told FETCH_SESSION_ID_NOT_FOUND and can neither
read through it nor close or evict it. The caller still authorizes every session
partition on every fetch (Kafka's ``IncrementalFetchContext``).
"""

from __future__ import annotations

import secrets
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

# A partition as the client names it: (topic name, index) before Fetch v13, (topic id,
# index) from v13 (KIP-516). An id session keeps ids, so a topic deleted and re-created
# under the same name is not mistaken for the one the client asked for.
PartitionKey = tuple[str | uuid.UUID, int]
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
Owner = tuple[str, str]
"""(principal, listener) of the connection that created a session."""


@dataclass(slots=True)
class SessionPartition:
    fetch_offset: int
    max_bytes: int
    # What the client last saw, so unchanged partitions can be left out.
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1


@dataclass
class FetchSession:
    id: int
    epoch: int
    uses_topic_ids: bool = False
    owner: Owner = ("", "")
    partitions: OrderedDict[PartitionKey, SessionPartition] = field(default_factory=OrderedDict)

    def changed(
        self, key: PartitionKey, hw: int, lso: int, log_start: int, has_data: bool, error: int
    ) -> bool:
        """Whether an incremental response must carry this partition; remembers what was sent."""
        part = self.partitions[key]
        changed = (
            has_data
            or error != 0
            or part.high_watermark != hw
            or part.last_stable_offset != lso
            or part.log_start_offset != log_start
        )
        part.high_watermark, part.last_stable_offset, part.log_start_offset = hw, lso, log_start
        if has_data:  # round-robin: partitions that returned data go to the back
            self.partitions.move_to_end(key)
        return changed


class FetchSessionError(Exception):
    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


class FetchSessionCache:
    def __init__(self, max_slots: int) -> None:
        self.max_slots = max_slots
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()

    def _new_id(self) -> int:
        while True:
            candidate = secrets.randbelow(2**31 - 1) + 1
            if candidate not in self.sessions:
                return candidate

    def _owned(self, session_id: int, owner: Owner) -> FetchSession | None:
        session = self.sessions.get(session_id)
        return session if session is not None and session.owner == owner else None

    def resolve(
        self,
        session_id: int,
        epoch: int,
        requested: list[tuple[PartitionKey, int, int]],
        forgotten: list[PartitionKey],
        *,
        uses_topic_ids: bool = False,
        owner: Owner = ("", ""),
    ) -> tuple[FetchSession | None, list[tuple[PartitionKey, int, int]]]:
        """Return (session or None for a sessionless fetch, partitions to fetch).

        Raises FetchSessionError for an unknown session, a wrong epoch, or (as Kafka's
        FetchManager) a session created with topic ids continued without them or the
        reverse (the client changed its Fetch version across v13).
        """
        if epoch == FINAL_EPOCH:
            if self._owned(session_id, owner) is not None:
                del self.sessions[session_id]
            return None, requested
        if epoch == INITIAL_EPOCH:
            if session_id and self._owned(session_id, owner) is not None:
                del self.sessions[session_id]
            if self.max_slots <= 0:
                return None, requested  # sessions declined: the client keeps sending full fetches
            while len(self.sessions) >= self.max_slots:
                self.sessions.popitem(last=False)
            session = FetchSession(self._new_id(), 1, uses_topic_ids, owner)
            for key, offset, max_bytes in requested:
                session.partitions[key] = SessionPartition(offset, max_bytes)
            self.sessions[session.id] = session
            return session, requested
        existing = self._owned(session_id, owner)
        if existing is None:
            raise FetchSessionError(ErrorCode.fetch_session_id_not_found)
        session = existing
        if session.epoch != epoch:
            raise FetchSessionError(ErrorCode.invalid_fetch_session_epoch)
        if session.uses_topic_ids != uses_topic_ids:
            raise FetchSessionError(ErrorCode.fetch_session_topic_id_error)
        session.epoch += 1
        self.sessions.move_to_end(session_id)
        for key in forgotten:
            session.partitions.pop(key, None)
        for key, offset, max_bytes in requested:
            cached = session.partitions.get(key)
            if cached is None:
                session.partitions[key] = SessionPartition(offset, max_bytes)
            else:
                cached.fetch_offset, cached.max_bytes = offset, max_bytes
        return session, [(k, p.fetch_offset, p.max_bytes) for k, p in session.partitions.items()]
