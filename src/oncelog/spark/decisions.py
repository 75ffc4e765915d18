"""The decision store of the exactly-once sink: which task transactions make up batch b.

A decision is written once per micro-batch by the driver, *before* any of the batch's
transactions is committed. It lives in a consumer group of its own,
``{prefix}-decisions-{queryId}``, as committed offsets (plain OffsetCommit, standard Kafka
API) on the topic ``__oncelog_spark_decisions``:

* committed offset = ``batchId + 1`` (so "offset >= b + 1" reads "batch b is decided");
* offset metadata = compact JSON of the decided transactions
  ``[[partitionId, attempt, producerId, producerEpoch], ...]``, chunked so that each
  metadata string stays under 4000 bytes (Kafka's ``offset.metadata.max.bytes`` is 4096);
  partition j of the topic holds chunk j, and chunk 0 also records the number of chunks.

Chunks 1..n-1 are committed first and chunk 0 last, so a decision is visible only once it
is complete (a reader checks that every chunk carries the same batch id), whatever the
broker's atomicity for multi-partition OffsetCommit.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from oncelog.client.admin import Admin
from oncelog.client.config import ClientConfig
from oncelog.client.errors import ClientError
from oncelog.client.group_offsets import Committed, MemberlessGroup
from oncelog.client.retry import DEFAULT_POLICY, RetryPolicy

log = logging.getLogger("oncelog.spark")

DECISIONS_TOPIC = "__oncelog_spark_decisions"
DECISIONS_PARTITIONS = 8
MAX_METADATA_BYTES = 4000

#: (partitionId, attempt, producerId, producerEpoch) of one task transaction.
Entry = tuple[int, int, int, int]


class DecisionError(RuntimeError):
    pass


@dataclass(frozen=True)
class Decision:
    batch_id: int
    entries: tuple[Entry, ...]


def decision_group(prefix: str, query_id: str) -> str:
    return f"{prefix}-decisions-{query_id}"


def _dump(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def encode_chunks(
    batch_id: int, entries: Sequence[Entry], max_bytes: int = MAX_METADATA_BYTES
) -> list[str]:
    """Split a decision into metadata strings of < max_bytes each (chunk 0 holds "n")."""
    items = [list(map(int, e)) for e in sorted(entries)]
    chunks: list[list[list[int]]] = [[]]
    # Room for the envelope; "n" is at most a few digits.
    budget = max_bytes - len(_dump({"b": batch_id, "n": 10**6, "t": []}))
    size = 0
    for item in items:
        cost = len(_dump(item)) + 1
        if cost > budget:
            raise DecisionError(f"decision entry {item} does not fit in {max_bytes} bytes")
        if size + cost > budget and chunks[-1]:
            chunks.append([])
            size = 0
        chunks[-1].append(item)
        size += cost
    out = []
    for j, chunk in enumerate(chunks):
        body: dict[str, Any] = {"b": batch_id}
        if j == 0:
            body["n"] = len(chunks)
        else:
            body["j"] = j
        body["t"] = chunk
        text = _dump(body)
        assert len(text.encode()) < max_bytes, len(text)
        out.append(text)
    return out


def chunk_count(chunk0: str) -> int:
    return int(json.loads(chunk0)["n"])


def decode_chunks(batch_id: int, chunks: Sequence[str]) -> Decision:
    """Inverse of encode_chunks; verifies that all chunks belong to batch_id."""
    if not chunks:
        raise DecisionError(f"decision of batch {batch_id} has no chunk")
    entries: list[Entry] = []
    n = None
    for j, text in enumerate(chunks):
        try:
            body = json.loads(text)
        except (TypeError, json.JSONDecodeError) as exc:
            raise DecisionError(
                f"decision chunk {j} of batch {batch_id} is not JSON: {text!r}"
            ) from exc
        if body.get("b") != batch_id:
            raise DecisionError(
                f"decision chunk {j} belongs to batch {body.get('b')}, expected {batch_id}"
            )
        if j == 0:
            n = body["n"]
        elif body.get("j") != j:
            raise DecisionError(
                f"decision chunk {j} of batch {batch_id} is labelled {body.get('j')}"
            )
        entries += [tuple(int(x) for x in e) for e in body["t"]]  # type: ignore[misc]
    if n != len(chunks):
        raise DecisionError(
            f"decision of batch {batch_id} has {len(chunks)} chunks, chunk 0 says {n}"
        )
    return Decision(batch_id, tuple(entries))


class DecisionStore:
    """The decision group of one streaming query: OffsetCommit / OffsetFetch of a group
    that never joins (:class:`oncelog.client.group_offsets.MemberlessGroup`)."""

    def __init__(
        self,
        config: ClientConfig,
        prefix: str,
        query_id: str,
        *,
        policy: RetryPolicy = DEFAULT_POLICY,
        timeout: float = 30.0,
    ) -> None:
        self.config = config
        self.group = decision_group(prefix, query_id)
        self.policy = policy
        self.timeout = timeout
        self._group = MemberlessGroup(config, self.group, timeout=timeout)

    def close(self) -> None:
        self._group.close()

    def __enter__(self) -> DecisionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _committed(self, partitions: Sequence[int]) -> list[Committed]:
        """OffsetFetch of the decision group; a partition the topic lacks reads as no offset."""
        try:
            return self.policy.call(lambda: self._group.committed(DECISIONS_TOPIC, partitions))
        except ClientError as exc:
            raise DecisionError(f"cannot read the decision group {self.group!r}: {exc}") from exc

    def decided_through(self) -> int:
        """The highest decided batch id, or -1."""
        tp = self._committed([0])[0]
        return tp.offset - 1 if tp.offset >= 0 else -1

    def read(self, batch_id: int) -> Decision | None:
        """The decision of batch_id, or None if batch_id is not decided.

        Raises SupersededDecision if a later batch is already decided (then batch_id is
        complete: Spark starts batch b+1 only after commit(b) returned)."""
        tp0 = self._committed([0])[0]
        offset = tp0.offset
        if offset < batch_id + 1:
            return None
        if offset > batch_id + 1:
            raise SupersededDecision(batch_id, offset - 1)
        chunks = [tp0.metadata or ""]
        n = chunk_count(chunks[0])
        if n > 1:
            rest = self._committed(list(range(1, n)))
            for tp in rest:
                if tp.offset != batch_id + 1:
                    raise DecisionError(
                        f"decision chunk {tp.partition} of batch {batch_id} has offset {tp.offset}"
                    )
            chunks += [tp.metadata or "" for tp in sorted(rest, key=lambda t: t.partition)]
        return decode_chunks(batch_id, chunks)

    def write(self, batch_id: int, entries: Sequence[Entry]) -> Decision:
        chunks = encode_chunks(batch_id, entries)
        ensure_decisions_topic(self.config, len(chunks))
        try:
            self._commit_chunks(batch_id, chunks)
        except DecisionError:
            # The topic this process saw may be gone (deleted, or a new cluster): check it
            # again once, then commit again (the same offsets and metadata: idempotent).
            ensure_decisions_topic(self.config, len(chunks), again=True)
            self._commit_chunks(batch_id, chunks)
        return Decision(batch_id, tuple(sorted(tuple(e) for e in entries)))  # type: ignore[misc]

    def _commit_chunks(self, batch_id: int, chunks: list[str]) -> None:
        def commit(parts: list[int]) -> None:
            try:
                self._group.commit(DECISIONS_TOPIC, {j: (batch_id + 1, chunks[j]) for j in parts})
            except ClientError as exc:
                raise DecisionError(
                    f"cannot write the decision of batch {batch_id} to group {self.group!r}: {exc}"
                ) from exc

        if len(chunks) > 1:
            commit(list(range(1, len(chunks))))
        commit([0])

    def retract(self, batch_id: int) -> None:
        """Undo the decision of batch_id (only when none of its transactions committed):
        the group then says "decided through batch_id - 1" and a replay recomputes it."""
        meta = _dump({"b": batch_id - 1, "n": 1, "t": [], "r": batch_id})
        try:
            self._group.commit(DECISIONS_TOPIC, {0: (batch_id, meta)})
        except ClientError as exc:
            raise DecisionError(f"cannot retract the decision of batch {batch_id}: {exc}") from exc


class SupersededDecision(Exception):
    def __init__(self, batch_id: int, decided: int) -> None:
        super().__init__(f"batch {batch_id} is superseded: batch {decided} is already decided")
        self.batch_id = batch_id
        self.decided = decided


# (client config, partitions) this process has seen the decisions topic have: a Metadata
# round trip (and an admin client) per micro-batch saved.
_ensured: set[tuple[str, int]] = set()


def ensure_decisions_topic(config: ClientConfig, partitions: int, *, again: bool = False) -> None:
    """Create __oncelog_spark_decisions (or grow it) so that it has >= partitions partitions
    (once per process and size unless ``again``)."""
    wanted = max(partitions, DECISIONS_PARTITIONS)
    key = (repr(config), wanted)
    if key in _ensured and not again:
        return
    with Admin(config) as admin:
        admin.ensure_partitions(DECISIONS_TOPIC, wanted)
    _ensured.add(key)
