"""A transactional producer over the raw protocol, speaking transaction version 2
(KIP-890 part 2), for tests and benchmarks: no installed client negotiates TV2 (librdkafka
2.16, kafka-python and aiokafka stay on TV1). ``transaction_version=1`` gives the same
producer on TV1, so a benchmark compares the two protocols with one client.

It follows the semantics of Kafka 4.x's client ``TransactionManager`` with TV2 enabled:

- ``init_transactions``: InitProducerId v5, after checking that the broker finalizes
  ``transaction.version`` >= 2 (refuses to fall back to TV1 silently);
- no AddPartitionsToTxn: Produce v12 with the transactional batch adds the partition;
- no AddOffsetsToTxn: ``send_offsets_to_transaction`` sends TxnOffsetCommit v5 to the group
  coordinator, which adds the offsets partition;
- EndTxn v5 returns the producer id and the bumped epoch, which the next transaction uses
  (sequences restart at 0); on epoch overflow the coordinator hands out a new producer id
  with epoch 0, taken as is;
- a transaction that sent nothing completes locally, without EndTxn (no bump);
- retriable errors (CONCURRENT_TRANSACTIONS while the previous transaction's markers are
  written, NOT_COORDINATOR, lost connections, ...) are retried with the client layer's
  retry policy; a produce is retried with the same sequence, an EndTxn with the same epoch
  (the coordinator answers a retry of the last EndTxn with the epoch it already returned).

With TV1 it sends what Kafka's client sends when TV2 is disabled: AddPartitionsToTxn v3
before a partition's first batch, AddOffsetsToTxn before TxnOffsetCommit (v4), Produce v11,
EndTxn v4 (no bump: the epoch and the sequences carry on into the next transaction). The TV1
mode exists for benchmarks: it lacks Kafka's epoch-bump recovery after a batch whose outcome
is unknown.

Blocking, one request at a time: one Produce per ``send`` call (acks=-1). The protocol
machinery (versions, InitProducerId, sequences, Produce with retries, AddPartitionsToTxn,
EndTxn) is the client layer's producer, :class:`oncelog.client.producer.TransactionalProducer`;
this class adds the one-batch ``send`` and ``send_offsets_to_transaction``.
"""

from __future__ import annotations

import datetime
import struct
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kio.schema.add_offsets_to_txn.v3 import request as ao1
from kio.schema.init_producer_id.v5 import request as ip
from kio.schema.txn_offset_commit.v4 import request as toc1
from kio.schema.txn_offset_commit.v5 import request as toc

from oncelog.client.config import ClientConfig
from oncelog.client.errors import check
from oncelog.client.producer import (
    FATAL,
    TV2_REQUESTS,
    ProducerIdAndEpoch,
    ProducerSettings,
    TransactionalProducer,
    is_fatal,
)
from oncelog.client.protocol import KEY_TYPE_GROUP
from oncelog.client.retry import RetryPolicy
from oncelog.client.wire import WireClient

__all__ = [
    "FATAL",
    "GroupMetadata",
    "ProducerIdAndEpoch",
    "RawTransactionalProducer",
    "is_fatal",
]

DEFAULT_POLICY = RetryPolicy(deadline_s=60.0)
# One send() is one batch, whatever its size.
_ONE_BATCH = 1 << 30


@dataclass(frozen=True, slots=True)
class GroupMetadata:
    """What TxnOffsetCommit carries about the consumer (KIP-447): the generation (the
    member epoch under KIP-848) and member id fence a zombie; -1 and "" for assign()."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None

    @classmethod
    def from_librdkafka(cls, blob: bytes) -> GroupMetadata:
        """confluent-kafka's ``consumer_group_metadata()``: librdkafka's serialised form,
        "CGMDv2:", the generation (native int32), group id and member id NUL-terminated,
        then a byte that is 1 when there is no group instance id (else the id follows)."""
        magic = b"CGMDv2:"
        if not blob.startswith(magic):
            raise ValueError(f"not librdkafka group metadata: {blob[:8]!r}")
        (generation,) = struct.unpack_from("=i", blob, len(magic))
        group_id, member_id, rest = blob[len(magic) + 4 :].split(b"\0", 2)
        instance = None if rest[:1] == b"\1" else rest[1:].split(b"\0", 1)[0].decode()
        return cls(group_id.decode(), generation, member_id.decode(), instance)


class RawTransactionalProducer(TransactionalProducer):
    """``init_transactions`` once, then begin / send / send_offsets_to_transaction /
    commit or abort. ``history`` lists every (producer id, epoch) this instance used, in
    order: the one from InitProducerId, then (TV2) the one each EndTxn returned."""

    # A TV2 client sends these versions: the broker must offer each of them.
    tv2_requests = (*TV2_REQUESTS, ip.InitProducerIdRequest, toc.TxnOffsetCommitRequest)

    def __init__(
        self,
        config: ClientConfig | str,
        transactional_id: str,
        *,
        transaction_timeout: datetime.timedelta = datetime.timedelta(seconds=60),
        request_timeout: float = 30.0,
        policy: RetryPolicy = DEFAULT_POLICY,
        transaction_version: int = 2,
    ) -> None:
        if transaction_version not in (1, 2):
            raise ValueError(f"transaction version {transaction_version}: 1 or 2")
        super().__init__(
            config,
            transactional_id,
            transaction_timeout=transaction_timeout,
            settings=ProducerSettings(
                batch_size=_ONE_BATCH,
                max_request_bytes=_ONE_BATCH,
                request_timeout_s=request_timeout,
            ),
            transaction_version=transaction_version,
            policy=policy,
            client_id=f"tv{transaction_version}-{transactional_id}",
        )
        self._group_coordinators: dict[str, WireClient] = {}

    def _before_retry(self, exc: BaseException) -> None:
        super()._before_retry(exc)
        if self._txn_coordinator is None:
            self._group_coordinators = {}

    def _group_coordinator(self, group_id: str) -> WireClient:
        conn = self._group_coordinators.get(group_id)
        if conn is None:
            conn = self.protocol.coordinator(group_id, KEY_TYPE_GROUP)
            self._group_coordinators[group_id] = conn
        return conn

    def send(  # type: ignore[override]
        self,
        topic: str,
        partition: int,
        records: Sequence[tuple[bytes | None, bytes | None]],
        *,
        timestamp_ms: int | None = None,
    ) -> int:
        """One transactional batch of (key, value) records to one partition (Produce v12,
        acks=-1; TV1: AddPartitionsToTxn first): TV2 adds the partition implicitly. Returns
        the batch's base offset (-1 only from a broker that answers a retry of a written
        batch with DUPLICATE_SEQUENCE_NUMBER; current brokers give the original offset)."""
        if not self._in_transaction:
            raise RuntimeError("begin_transaction() first")
        if not records:
            return -1
        tp = (topic, partition)
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        for key, value in records:
            self.accumulator.append(tp, key, value, (), ts)
        self.accumulator.seal(tp)
        self._send_sealed()
        return self.offsets[tp]

    def send_offsets_to_transaction(
        self, offsets: Mapping[tuple[str, int], int], group: GroupMetadata | str
    ) -> None:
        """Commit the consumer's next offsets with the transaction: TV2 sends TxnOffsetCommit
        v5 straight to the group coordinator (no AddOffsetsToTxn), TV1 AddOffsetsToTxn first
        and TxnOffsetCommit v4."""
        if not self._in_transaction:
            raise RuntimeError("begin_transaction() first")
        meta = GroupMetadata(group) if isinstance(group, str) else group
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append((partition, offset))
        schema = toc if self.tv2 else toc1  # the two versions' entities are alike
        request = schema.TxnOffsetCommitRequest(
            transactional_id=self.transactional_id,
            group_id=meta.group_id,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            generation_id=meta.generation_id,
            member_id=meta.member_id,
            group_instance_id=meta.group_instance_id,
            topics=tuple(
                schema.TxnOffsetCommitRequestTopic(
                    name=topic,
                    partitions=tuple(
                        schema.TxnOffsetCommitRequestPartition(
                            partition_index=p,
                            committed_offset=o,
                            committed_leader_epoch=-1,
                            committed_metadata=None,
                        )
                        for p, o in parts
                    ),
                )
                for topic, parts in by_topic.items()
            ),
        )
        self._started = True
        if not self.tv2:
            self._add_offsets(meta.group_id)

        def once() -> None:
            resp = self._group_coordinator(meta.group_id).request(request)
            for t in resp.topics:
                for p in t.partitions:
                    check(
                        p.error_code,
                        f"TxnOffsetCommit of {meta.group_id!r} {t.name}-{p.partition_index}",
                    )

        self._call(once)

    def _add_offsets(self, group_id: str) -> None:
        """TV1 only: AddOffsetsToTxn puts the group's offsets partition in the transaction."""
        request = ao1.AddOffsetsToTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            group_id=group_id,
        )
        self._call(
            lambda: check(
                self._coordinator().request(request).error_code, f"AddOffsetsToTxn {group_id!r}"
            )
        )
