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

Blocking, one request at a time: one Produce per ``send`` call (acks=-1).
"""

from __future__ import annotations

import datetime
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kio.schema.add_offsets_to_txn.v3 import request as ao1
from kio.schema.add_partitions_to_txn.v3 import request as ap1
from kio.schema.api_versions.v4 import request as av
from kio.schema.end_txn.v4 import request as et1
from kio.schema.end_txn.v5 import request as et
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v5 import request as ip
from kio.schema.produce.v11 import request as pr1
from kio.schema.produce.v12 import request as pr
from kio.schema.txn_offset_commit.v4 import request as toc1
from kio.schema.txn_offset_commit.v5 import request as toc

from oncelog.client.config import ClientConfig
from oncelog.client.errors import ClientError
from oncelog.client.protocol import KEY_TYPE_GROUP, ProtocolClient
from oncelog.client.retry import RetryPolicy
from oncelog.client.wire import WireClient
from oncelog.records.builder import build_batch

T = TypeVar("T")
ProducerIdAndEpoch = tuple[int, int]

# Errors after which this producer instance cannot go on (Kafka's fatal errors): a new
# instance must call init_transactions. Every other non-retriable error is abortable.
FATAL = frozenset(
    {
        ErrorCode.producer_fenced,
        ErrorCode.invalid_producer_epoch,
        ErrorCode.invalid_producer_id_mapping,
        ErrorCode.invalid_txn_state,
        ErrorCode.transactional_id_authorization_failed,
        ErrorCode.unsupported_version,
    }
)
# Routing errors: find the coordinator / partition leader again before the next attempt.
_REROUTE = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_leader_or_follower,
        ErrorCode.unknown_topic_or_partition,
    }
)
# The request versions a TV2 client sends (Kafka's request builders cap below these when
# transaction.version < 2): the broker must offer each of them.
_TV2_REQUESTS = (
    pr.ProduceRequest,
    ip.InitProducerIdRequest,
    et.EndTxnRequest,
    toc.TxnOffsetCommitRequest,
)
DEFAULT_POLICY = RetryPolicy(deadline_s=60.0)


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


def is_fatal(exc: BaseException) -> bool:
    return isinstance(exc, ClientError) and exc.error_code in FATAL


def _check(code: ErrorCode, what: str) -> None:
    if code != ErrorCode.none:
        raise ClientError(f"{what}: {code.name.upper()}", code)


class RawTransactionalProducer:
    """``init_transactions`` once, then begin / send / send_offsets_to_transaction /
    commit or abort. ``history`` lists every (producer id, epoch) this instance used, in
    order: the one from InitProducerId, then (TV2) the one each EndTxn returned."""

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
        self.tv2 = transaction_version == 2
        self.config = ClientConfig(config) if isinstance(config, str) else config
        self.transactional_id = transactional_id
        self.transaction_timeout = transaction_timeout
        self.policy = policy
        self.protocol = ProtocolClient(
            self.config,
            timeout=request_timeout,
            client_id=f"tv{transaction_version}-{transactional_id}",
        )
        self._txn_coordinator: WireClient | None = None
        self._group_coordinators: dict[str, WireClient] = {}
        self.producer_id = -1
        self.epoch = -1
        self.history: list[ProducerIdAndEpoch] = []
        self._sequences: dict[tuple[str, int], int] = {}
        self._added: set[tuple[str, int]] = set()  # TV1: partitions in the transaction
        self._in_transaction = False
        self._started = False  # something was sent: EndTxn is needed to complete

    # -- plumbing ----------------------------------------------------------------------
    def close(self) -> None:
        self.protocol.close()

    def __enter__(self) -> RawTransactionalProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, fn: Callable[[], T]) -> T:
        return self.policy.call(fn, on_retry=self._before_retry)

    def _before_retry(self, exc: BaseException) -> None:
        code = exc.error_code if isinstance(exc, ClientError) else None
        if isinstance(exc, OSError) or code in _REROUTE:
            # A broken connection, or a coordinator/leader that moved: route afresh.
            self.protocol.close()
            self.protocol.forget_metadata()
            self._txn_coordinator = None
            self._group_coordinators = {}

    def _coordinator(self) -> WireClient:
        if self._txn_coordinator is None:
            self._txn_coordinator = self.protocol.coordinator(self.transactional_id)
        return self._txn_coordinator

    def _group_coordinator(self, group_id: str) -> WireClient:
        conn = self._group_coordinators.get(group_id)
        if conn is None:
            conn = self.protocol.coordinator(group_id, KEY_TYPE_GROUP)
            self._group_coordinators[group_id] = conn
        return conn

    def _set_producer(self, producer_id: int, epoch: int) -> None:
        self.producer_id, self.epoch = producer_id, epoch
        self.history.append((producer_id, epoch))
        self._sequences = {}  # a new epoch (or id) starts every partition at sequence 0

    # -- the transaction API -----------------------------------------------------------
    def init_transactions(self) -> ProducerIdAndEpoch:
        """Check that the broker runs TV2 (when asked for), then InitProducerId v5: fences
        older instances of this transactional id and aborts what they left open."""
        if self.tv2:
            self._call(self._require_tv2)

        def once() -> ProducerIdAndEpoch:
            resp = self._coordinator().request(
                ip.InitProducerIdRequest(
                    transactional_id=self.transactional_id,
                    transaction_timeout=self.transaction_timeout,
                    producer_id=-1,
                    producer_epoch=-1,
                )
            )
            _check(resp.error_code, f"InitProducerId of {self.transactional_id!r}")
            return int(resp.producer_id), int(resp.producer_epoch)

        self._set_producer(*self._call(once))
        self._in_transaction = self._started = False
        return self.producer_id, self.epoch

    def _require_tv2(self) -> None:
        resp = self._coordinator().request(
            av.ApiVersionsRequest(
                client_software_name="oncelog-tv2-producer", client_software_version="1"
            )
        )
        _check(resp.error_code, "ApiVersions")
        level = {f.name: f.max_version_level for f in resp.finalized_features}
        ranges = {k.api_key: k.max_version for k in resp.api_keys}
        missing = [
            f"{r.__name__} v{r.__version__}"
            for r in _TV2_REQUESTS
            if ranges.get(r.__api_key__, -1) < r.__version__
        ]
        if level.get("transaction.version", 0) < 2 or missing:
            raise ClientError(
                "the broker does not run transaction version 2 (finalized "
                f"transaction.version={level.get('transaction.version', 0)}, missing {missing})",
                ErrorCode.unsupported_version,
            )

    def begin_transaction(self) -> None:
        if self.producer_id < 0:
            raise RuntimeError("init_transactions() first")
        if self._in_transaction:
            raise RuntimeError("a transaction is already in progress")
        self._in_transaction, self._started = True, False
        self._added = set()

    def _add_partition(self, topic: str, partition: int) -> None:
        """TV1 only: AddPartitionsToTxn before the partition's first batch."""
        request = ap1.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.transactional_id,
            v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.epoch,
            v3_and_below_topics=(ap1.AddPartitionsToTxnTopic(name=topic, partitions=(partition,)),),
        )

        def once() -> None:
            resp = self._coordinator().request(request)
            for t in resp.results_by_topic_v3_and_below:
                for r in t.results_by_partition:
                    _check(
                        r.partition_error_code, f"AddPartitionsToTxn {t.name}-{r.partition_index}"
                    )

        self._call(once)
        self._added.add((topic, partition))

    def send(
        self,
        topic: str,
        partition: int,
        records: Sequence[tuple[bytes | None, bytes | None]],
        *,
        timestamp_ms: int | None = None,
    ) -> int:
        """One transactional batch of (key, value) records to one partition (Produce v12,
        acks=-1): adds the partition to the transaction implicitly. Returns the batch's base
        offset (-1 when a retry found the batch already written: DUPLICATE_SEQUENCE_NUMBER)."""
        if not self._in_transaction:
            raise RuntimeError("begin_transaction() first")
        if not records:
            return -1
        if not self.tv2 and (topic, partition) not in self._added:
            self._started = True
            self._add_partition(topic, partition)
        sequence = self._sequences.get((topic, partition), 0)
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        batch = build_batch(
            [(key, value, None, ts) for key, value in records],
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            base_sequence=sequence,
            transactional=True,
        )
        schema = pr if self.tv2 else pr1  # the two versions' entities are alike
        request = schema.ProduceRequest(
            transactional_id=self.transactional_id,
            acks=-1,
            timeout=datetime.timedelta(seconds=30),
            topic_data=(
                schema.TopicProduceData(
                    name=topic,
                    partition_data=(schema.PartitionProduceData(index=partition, records=batch),),
                ),
            ),
        )
        self._started = True  # from here on, the broker may have the batch

        def once() -> int:
            resp = self.protocol.leader(topic, partition).request(request).responses[0]
            answer = resp.partition_responses[0]
            if answer.error_code == ErrorCode.duplicate_sequence_number:
                return -1  # a retry of a batch the broker has: done
            _check(answer.error_code, f"Produce to {topic}-{partition}")
            return int(answer.base_offset)

        base_offset = self._call(once)
        self._sequences[(topic, partition)] = sequence + len(records)
        return base_offset

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
                    _check(
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
            lambda: _check(
                self._coordinator().request(request).error_code, f"AddOffsetsToTxn {group_id!r}"
            )
        )

    def commit_transaction(self) -> ProducerIdAndEpoch:
        return self._end(commit=True)

    def abort_transaction(self) -> ProducerIdAndEpoch:
        """Abort the open transaction, if any (also after an abortable error)."""
        return self._end(commit=False)

    def _end(self, *, commit: bool) -> ProducerIdAndEpoch:
        if not self._in_transaction:
            if commit:
                raise RuntimeError("no transaction in progress")
            return self.producer_id, self.epoch
        if not self._started:
            # Nothing reached the broker: Kafka's client completes such a transaction
            # locally, without EndTxn and without an epoch bump.
            self._in_transaction = False
            return self.producer_id, self.epoch
        request = (et if self.tv2 else et1).EndTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            committed=commit,
        )

        def once() -> Any:
            resp = self._coordinator().request(request)
            _check(resp.error_code, f"EndTxn({'commit' if commit else 'abort'})")
            return resp

        resp = self._call(once)
        self._in_transaction = self._started = False
        if not self.tv2:
            return self.producer_id, self.epoch  # TV1: same epoch, sequences carry on
        if resp.producer_id < 0:
            # EndTxn v5 always returns the id and epoch under TV2; -1 would mean the
            # broker completed it as TV1, which this producer must never accept silently.
            raise ClientError("EndTxn v5 returned no producer epoch", ErrorCode.unsupported_version)
        self._set_producer(int(resp.producer_id), int(resp.producer_epoch))
        return self.producer_id, self.epoch
