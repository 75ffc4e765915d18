"""oncelog's own transactional producer, over the protocol client: for what librdkafka
cannot do, chiefly two-phase commit (KIP-939: InitProducerId v6 with ``enable2Pc``).

It behaves like Kafka's Java producer with idempotence and acks=all:

- ``init_transactions``: ApiVersions at the transaction coordinator, then InitProducerId
  (v6 with ``enable2Pc`` for ``two_phase=True``, else v5/v4). A broker that cannot open a
  two-phase-commit transaction raises :class:`TwoPhaseCommitUnavailable`: no InitProducerId
  v6 or no transaction version 2 (UNSUPPORTED_VERSION; KIP-939 builds on KIP-890), or
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which is how Kafka
  answers both ``transaction.two.phase.commit.enable=false`` and a missing TWO_PHASE_COMMIT
  ACL (deliberately the same, so the setting cannot be probed);
- transaction version 2 (KIP-890) when the broker finalizes ``transaction.version`` >= 2:
  Produce v12 adds a partition to the transaction implicitly, EndTxn v5 bumps the epoch
  (sequences restart at 0). Otherwise version 1: AddPartitionsToTxn v3 before a
  partition's first batch, Produce v11, EndTxn v4;
- records are batched per partition (:mod:`oncelog.client.batching`: ``batch.size``,
  ``compression.type``), partitioned like Java's producer (:mod:`.partitioner`), and sent
  to the partition leaders (Metadata) in rounds: one Produce per leader, all leaders at
  once, the head batch of each partition in it, so a partition's batches reach the broker
  in sequence order;
- retriable errors (lost connections, NOT_LEADER_OR_FOLLOWER, CONCURRENT_TRANSACTIONS,
  NOT_ENOUGH_REPLICAS, ...) are retried with the client layer's retry policy, a batch with
  the same bytes and sequence (the broker answers a cached duplicate with its original
  offset; an old broker's DUPLICATE_SEQUENCE_NUMBER is taken as delivered, as Java's Sender does);
- :meth:`prepare` flushes everything and leaves the transaction open: the first phase of a
  two-phase commit. Whoever commits it later (``TxnAdmin.complete_prepared``: InitProducerId
  keepPreparedTxn + EndTxn) needs only the transactional id; :meth:`close` does not end it.

Security settings are the client layer's (``ClientConfig``: TLS, SASL). Blocking and
single-threaded; not pickle-safe while connected.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kio.schema.add_partitions_to_txn.v3 import request as ap3
from kio.schema.end_txn.v4 import request as et4
from kio.schema.end_txn.v5 import request as et5
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4 import request as ip4
from kio.schema.init_producer_id.v5 import request as ip5
from kio.schema.init_producer_id.v6 import request as ip6
from kio.schema.produce.v11 import request as pr11
from kio.schema.produce.v12 import request as pr12

from oncelog.client.batching import Accumulator, Header, SealedBatch, TopicPartition
from oncelog.client.config import ClientConfig
from oncelog.client.errors import ClientError, check
from oncelog.client.partitioner import StickyPartitioner
from oncelog.client.protocol import BrokerVersions, ProtocolClient
from oncelog.client.retry import RetryPolicy
from oncelog.client.wire import WireClient
from oncelog.records.compression import CompressionType

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
REROUTE = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_leader_or_follower,
        ErrorCode.unknown_topic_or_partition,
    }
)
# What a transaction version 2 producer sends (Kafka's request builders cap below these when
# transaction.version < 2), and a version 1 producer.
TV2_REQUESTS: tuple[Any, ...] = (pr12.ProduceRequest, et5.EndTxnRequest)
TV1_REQUESTS: tuple[Any, ...] = (
    pr11.ProduceRequest,
    ap3.AddPartitionsToTxnRequest,
    et4.EndTxnRequest,
)
COMPRESSION = {
    "none": CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}


class TwoPhaseCommitUnavailable(ClientError):
    """The broker will not open a two-phase-commit transaction for this producer: it has no
    InitProducerId v6 (``error_code`` UNSUPPORTED_VERSION), or it refused ``enable2Pc``
    (TRANSACTIONAL_ID_AUTHORIZATION_FAILED: ``transaction.two.phase.commit.enable`` is off,
    or the principal lacks TransactionalId TWO_PHASE_COMMIT; Kafka does not say which)."""

    def __init__(self, message: str, error_code: ErrorCode) -> None:
        super().__init__(message, error_code, retriable=False)


def is_fatal(exc: BaseException) -> bool:
    return isinstance(exc, ClientError) and exc.error_code in FATAL


def _ms(conf: Mapping[str, Any], *keys: str) -> float | None:
    for key in keys:
        if conf.get(key) is not None:
            return int(str(conf[key])) / 1000
    return None


@dataclass(frozen=True, slots=True)
class ProducerSettings:
    batch_size: int = 512 * 1024  # bytes of records per batch, before compression
    buffer_bytes: int = 8 * 1024 * 1024  # sealed, unsent bytes that start a send round
    max_request_bytes: int = 16 * 1024 * 1024  # batches in one Produce (at least one)
    compression: int = CompressionType.NONE
    request_timeout_s: float = 30.0
    delivery_timeout_s: float = 120.0  # the retry deadline of a send round or a request

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> ProducerSettings:
        """From librdkafka-style producer settings: ``batch.size``, ``compression.type``
        (or ``compression.codec``), ``request.timeout.ms``, ``delivery.timeout.ms`` (or
        ``message.timeout.ms``); others are ignored."""
        default = cls()
        codec = str(conf.get("compression.type") or conf.get("compression.codec") or "none")
        if codec.strip().lower() not in COMPRESSION:
            raise ValueError(
                f"compression.type must be one of {', '.join(COMPRESSION)}, got {codec!r}"
            )
        batch = conf.get("batch.size")
        return cls(
            batch_size=int(str(batch)) if batch is not None else default.batch_size,
            compression=COMPRESSION[codec.strip().lower()],
            request_timeout_s=_ms(conf, "request.timeout.ms") or default.request_timeout_s,
            delivery_timeout_s=_ms(conf, "delivery.timeout.ms", "message.timeout.ms")
            or default.delivery_timeout_s,
        )


class TransactionalProducer:
    """``init_transactions`` once, then ``begin_transaction`` / ``send`` ... and either
    ``prepare`` (leave it open for someone else to complete) or ``commit_transaction`` /
    ``abort_transaction``. ``history`` lists every (producer id, epoch) this instance
    used: the one from InitProducerId, then (TV2) the one each EndTxn returned."""

    tv2_requests: tuple[Any, ...] = TV2_REQUESTS

    def __init__(
        self,
        config: ClientConfig | str,
        transactional_id: str,
        *,
        two_phase: bool = False,
        transaction_timeout: datetime.timedelta = datetime.timedelta(seconds=60),
        settings: ProducerSettings | None = None,
        transaction_version: int | None = None,
        policy: RetryPolicy | None = None,
        client_id: str | None = None,
    ) -> None:
        if transaction_version not in (None, 1, 2):
            raise ValueError(f"transaction version {transaction_version}: 1, 2 or None")
        self.config = ClientConfig(config) if isinstance(config, str) else config
        self.transactional_id = transactional_id
        self.two_phase = two_phase
        self.transaction_timeout = transaction_timeout
        self.settings = settings or ProducerSettings()
        self.policy = policy or RetryPolicy(deadline_s=self.settings.delivery_timeout_s)
        self._required_version = transaction_version
        self.tv2 = transaction_version != 1
        self.protocol = ProtocolClient(
            self.config,
            timeout=self.settings.request_timeout_s + 5.0,
            client_id=client_id or f"oncelog-producer-{transactional_id}",
        )
        self.versions: BrokerVersions | None = None
        self.accumulator = Accumulator(
            batch_size=self.settings.batch_size, compression=self.settings.compression
        )
        self.partitioner = StickyPartitioner()
        self._txn_coordinator: WireClient | None = None
        self.producer_id = -1
        self.epoch = -1
        self.history: list[ProducerIdAndEpoch] = []
        self.offsets: dict[TopicPartition, int] = {}  # base offset of the last batch (-1: dup)
        self.acknowledged = 0  # records the brokers acknowledged
        self.requests = 0  # Produce requests sent
        self._added: set[TopicPartition] = set()  # TV1: partitions in the transaction
        self._partition_counts: dict[str, int] = {}
        self._in_transaction = False
        self._started = False  # something was sent: EndTxn is needed to complete
        self._prepared = False
        self._send_error: ClientError | None = None  # a batch of this transaction failed

    # -- plumbing ----------------------------------------------------------------------
    def close(self) -> None:
        """Drop the connections. An open transaction stays open (see :meth:`prepare`)."""
        self.protocol.close()
        self._txn_coordinator = None

    def __enter__(self) -> TransactionalProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, fn: Callable[[], T]) -> T:
        return self.policy.call(fn, on_retry=self._before_retry)

    def _before_retry(self, exc: BaseException) -> None:
        code = exc.error_code if isinstance(exc, ClientError) else None
        if isinstance(exc, OSError) or code in REROUTE:
            # A broken connection, or a coordinator/leader that moved: route afresh.
            self.protocol.close()
            self.protocol.forget_metadata()
            self._txn_coordinator = None

    def _coordinator(self) -> WireClient:
        if self._txn_coordinator is None:
            self._txn_coordinator = self.protocol.coordinator(self.transactional_id)
        return self._txn_coordinator

    def _set_producer(self, producer_id: int, epoch: int) -> None:
        self.producer_id, self.epoch = producer_id, epoch
        self.history.append((producer_id, epoch))
        self.accumulator.reset(producer_id, epoch)  # sequences restart at 0

    # -- versions ------------------------------------------------------------------------
    def _negotiate(self, versions: BrokerVersions) -> bool:
        """Transaction version 2 or 1, as the broker and the caller allow."""
        tv2 = versions.transaction_version >= 2 and all(
            versions.offers(r) for r in self.tv2_requests
        )
        if self._required_version == 2 and not tv2:
            missing = [
                f"{r.__name__} v{r.__version__}"
                for r in self.tv2_requests
                if not versions.offers(r)
            ]
            raise ClientError(
                "the broker does not run transaction version 2 (finalized "
                f"transaction.version={versions.transaction_version}, missing {missing})",
                ErrorCode.unsupported_version,
            )
        if self._required_version == 1 or not tv2:
            missing = [
                f"{r.__name__} v{r.__version__}" for r in TV1_REQUESTS if not versions.offers(r)
            ]
            if missing:
                raise ClientError(
                    f"the broker lacks the request versions of this producer: {missing}",
                    ErrorCode.unsupported_version,
                )
            return False
        return True

    def _init_request(self, versions: BrokerVersions) -> Any:
        if self.two_phase:
            if not versions.offers(ip6.InitProducerIdRequest):
                raise TwoPhaseCommitUnavailable(
                    f"the broker offers InitProducerId up to "
                    f"v{versions.max_version(ip6.InitProducerIdRequest)}; two-phase commit "
                    "(KIP-939) needs v6",
                    ErrorCode.unsupported_version,
                )
            return ip6.InitProducerIdRequest(
                transactional_id=self.transactional_id,
                transaction_timeout=self.transaction_timeout,  # ignored for 2PC
                producer_id=-1,
                producer_epoch=-1,
                enable2_pc=True,
                keep_prepared_txn=False,
            )
        schema = ip5 if versions.offers(ip5.InitProducerIdRequest) else ip4
        if not versions.offers(schema.InitProducerIdRequest):
            raise ClientError(
                "the broker offers no InitProducerId v4 or later", ErrorCode.unsupported_version
            )
        return schema.InitProducerIdRequest(
            transactional_id=self.transactional_id,
            transaction_timeout=self.transaction_timeout,
            producer_id=-1,
            producer_epoch=-1,
        )

    # -- the transaction API -----------------------------------------------------------
    def init_transactions(self) -> ProducerIdAndEpoch:
        """ApiVersions, then InitProducerId: fences older instances of this transactional id
        and aborts what they left open (also a prepared 2PC transaction)."""
        versions = self.versions = self._call(
            lambda: self.protocol.api_versions(self._coordinator())
        )
        self.tv2 = self._negotiate(versions)
        if self.two_phase and not self.tv2:
            # KIP-939 builds on KIP-890: a prepared transaction is completed with EndTxn v5.
            raise TwoPhaseCommitUnavailable(
                "two-phase commit (KIP-939) needs transaction version 2; the broker finalizes "
                f"transaction.version={versions.transaction_version}",
                ErrorCode.unsupported_version,
            )
        request = self._init_request(versions)

        def once() -> ProducerIdAndEpoch:
            resp = self._coordinator().request(request)
            if (
                self.two_phase
                and resp.error_code == ErrorCode.transactional_id_authorization_failed
            ):
                raise TwoPhaseCommitUnavailable(
                    f"InitProducerId (enable2Pc) of {self.transactional_id!r}: "
                    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED: the broker refuses two-phase "
                    "commit (transaction.two.phase.commit.enable=false, or no TransactionalId "
                    "WRITE and TWO_PHASE_COMMIT ACL for this principal)",
                    resp.error_code,
                )
            check(resp.error_code, f"InitProducerId of {self.transactional_id!r}")
            return int(resp.producer_id), int(resp.producer_epoch)

        self._set_producer(*self._call(once))
        self._in_transaction = self._started = self._prepared = False
        return self.producer_id, self.epoch

    def begin_transaction(self) -> None:
        if self.producer_id < 0:
            raise RuntimeError("init_transactions() first")
        if self._in_transaction:
            raise RuntimeError("a transaction is already in progress")
        self._in_transaction, self._started, self._prepared = True, False, False
        self._added = set()
        self._send_error = None

    def partitions(self, topic: str) -> int:
        """The topic's partition count (Metadata, cached for this producer's life)."""
        count = self._partition_counts.get(topic)
        if count is None:
            count = self._call(lambda: self.protocol.partition_count(topic))
            self._partition_counts[topic] = count
        return count

    def send(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] = (),
        timestamp_ms: int | None = None,
    ) -> None:
        """Buffer one record (partition None: Java's partitioner). Full batches are sent
        once ``buffer_bytes`` of them wait; :meth:`flush` sends the rest."""
        if not self._in_transaction:
            raise RuntimeError("begin_transaction() first")
        if self._prepared:
            raise RuntimeError("the transaction is prepared: it takes no more records")
        count = self.partitions(topic)
        if partition is None:
            partition = self.partitioner.partition(topic, key, count)
        elif not 0 <= partition < count:
            raise ClientError(
                f"partition {partition} of {topic!r}, which has {count} partition(s)",
                ErrorCode.unknown_topic_or_partition,
                retriable=False,
            )
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        if self.accumulator.append((topic, partition), key, value, headers, ts):
            self.partitioner.batch_sealed(topic, partition)
            if self.accumulator.sealed_bytes >= self.settings.buffer_bytes:
                self._send_sealed()

    def flush(self) -> None:
        """Send every buffered record and wait until the brokers have them (acks=all)."""
        self.accumulator.seal_all()
        if self.accumulator.pending():
            self._send_sealed()

    def prepare(self) -> ProducerIdAndEpoch:
        """The first phase of a two-phase commit: flush, and leave the transaction open.
        Returns the (producer id, epoch) the transaction is written under."""
        if not self._in_transaction:
            raise RuntimeError("no transaction in progress")
        self.flush()
        self._prepared = True
        return self.producer_id, self.epoch

    def commit_transaction(self) -> ProducerIdAndEpoch:
        return self._end(commit=True)

    def abort_transaction(self) -> ProducerIdAndEpoch:
        """Abort the open transaction, if any (also after an abortable error); records not
        yet sent are dropped."""
        return self._end(commit=False)

    # -- sending -------------------------------------------------------------------------
    def _send_sealed(self) -> None:
        self._call(self._drain)

    def _drain(self) -> None:
        """Rounds until every sealed batch is acknowledged. A retriable failure raises after
        the round (what succeeded stays acknowledged); the retry resends the rest."""
        while self.accumulator.pending():
            batches = self.accumulator.round(self.settings.max_request_bytes)
            self._started = True  # from here on, the broker may have records
            if not self.tv2:
                self._add_partitions({(b.topic, b.partition) for b in batches} - self._added)
            by_leader: dict[int, list[SealedBatch]] = {}
            for b in batches:
                by_leader.setdefault(self.protocol.leader_id(b.topic, b.partition), []).append(b)
            answers = self._exchange(by_leader)
            retry: ClientError | None = None
            for group, resp in answers:
                failed = self._acknowledge(group, resp)
                retry = retry or failed
            if retry is not None:
                raise retry

    def _exchange(
        self, by_leader: dict[int, list[SealedBatch]]
    ) -> list[tuple[list[SealedBatch], Any]]:
        """One Produce per leader, all sent before any answer is read."""
        sent: list[tuple[WireClient, Any, int, list[SealedBatch]]] = []
        try:
            for node, group in by_leader.items():
                conn = self.protocol.node(node)
                request = self._produce_request(group)
                sent.append((conn, request, conn.send(request), group))
                self.requests += 1
            return [(group, conn.receive(request, cid)) for conn, request, cid, group in sent]
        except BaseException:
            # Answers may be left unread on some connection: none of them is reusable.
            self.protocol.close()
            self._txn_coordinator = None
            raise

    def _produce_request(self, group: list[SealedBatch]) -> Any:
        schema = pr12 if self.tv2 else pr11  # the two versions' entities are alike
        by_topic: dict[str, list[SealedBatch]] = {}
        for b in group:
            by_topic.setdefault(b.topic, []).append(b)
        return schema.ProduceRequest(
            transactional_id=self.transactional_id,
            acks=-1,
            timeout=datetime.timedelta(seconds=self.settings.request_timeout_s),
            topic_data=tuple(
                schema.TopicProduceData(
                    name=topic,
                    partition_data=tuple(
                        schema.PartitionProduceData(index=b.partition, records=b.data)
                        for b in parts
                    ),
                )
                for topic, parts in by_topic.items()
            ),
        )

    def _acknowledge(self, group: list[SealedBatch], resp: Any) -> ClientError | None:
        """Mark what the broker has; the first retriable error, or raise a fatal one."""
        answers = {(t.name, p.index): p for t in resp.responses for p in t.partition_responses}
        retry: ClientError | None = None
        for b in group:
            tp = (b.topic, b.partition)
            p = answers.get(tp)
            code = ErrorCode.unknown_server_error if p is None else p.error_code
            if p is not None and code in (ErrorCode.none, ErrorCode.duplicate_sequence_number):
                # DUPLICATE_SEQUENCE_NUMBER: only older brokers sent it, for a
                # retry of a batch they have (Java's Sender counts it delivered too).
                self.accumulator.acknowledged(b)
                self.offsets[tp] = int(p.base_offset) if code == ErrorCode.none else -1
                self.acknowledged += b.count
            elif code.retriable:
                retry = retry or ClientError(
                    f"Produce to {b.topic}-{b.partition}: {code.name.upper()}", code
                )
            else:
                detail = f" ({p.error_message})" if p is not None and p.error_message else ""
                self.accumulator.drop(tp)
                self._send_error = ClientError(
                    f"Produce to {b.topic}-{b.partition} (sequence {b.base_sequence}): "
                    f"{code.name.upper()}{detail}",
                    code,
                )
                raise self._send_error
        return retry

    def _add_partitions(self, tps: set[TopicPartition]) -> None:
        """TV1 only: AddPartitionsToTxn before a partition's first batch."""
        if not tps:
            return
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(tps):
            by_topic.setdefault(topic, []).append(partition)
        request = ap3.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.transactional_id,
            v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.epoch,
            v3_and_below_topics=tuple(
                ap3.AddPartitionsToTxnTopic(name=t, partitions=tuple(ps))
                for t, ps in by_topic.items()
            ),
        )
        resp = self._coordinator().request(request)
        for t in resp.results_by_topic_v3_and_below:
            for r in t.results_by_partition:
                check(r.partition_error_code, f"AddPartitionsToTxn {t.name}-{r.partition_index}")
        self._added |= tps

    # -- ending ----------------------------------------------------------------------------
    def _end(self, *, commit: bool) -> ProducerIdAndEpoch:
        if not self._in_transaction:
            if commit:
                raise RuntimeError("no transaction in progress")
            return self.producer_id, self.epoch
        if commit:
            if self._send_error is not None and not is_fatal(self._send_error):
                # Records of this transaction are lost: only an abort may end it. (After a
                # fatal error, EndTxn tells the caller precisely why it is fenced.)
                raise ClientError(
                    f"cannot commit: a send of this transaction failed ({self._send_error}); "
                    "abort it",
                    self._send_error.error_code,
                    retriable=False,
                )
            self.flush()
        else:
            self.accumulator.discard()
        if not self._started:
            # Nothing reached the broker: Kafka's client completes such a transaction
            # locally, without EndTxn and without an epoch bump.
            self._in_transaction = self._prepared = False
            return self.producer_id, self.epoch
        request = (et5 if self.tv2 else et4).EndTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            committed=commit,
        )

        def once() -> Any:
            resp = self._coordinator().request(request)
            check(resp.error_code, f"EndTxn({'commit' if commit else 'abort'})")
            return resp

        resp = self._call(once)
        self._in_transaction = self._started = self._prepared = False
        self._send_error = None
        if not self.tv2:
            return self.producer_id, self.epoch  # TV1: same epoch, sequences carry on
        if resp.producer_id < 0:
            # EndTxn v5 always returns the id and epoch under TV2; -1 would mean the
            # broker completed it as TV1, which this producer must never accept silently.
            raise ClientError("EndTxn v5 returned no producer epoch", ErrorCode.unsupported_version)
        self._set_producer(int(resp.producer_id), int(resp.producer_epoch))
        return self.producer_id, self.epoch
