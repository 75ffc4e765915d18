# mypy: disable-error-code="arg-type"
# (kio's phantom int types, i16/i32/..., are plain ints at run time)
"""The few Kafka protocol calls the data source needs beyond a producer and a consumer.

All are standard Kafka APIs (Metadata, ListOffsets, FindCoordinator, EndTxn,
DescribeTransactions, ListTransactions, InitProducerId), routed as Kafka requires, through
oncelog's small wire client. The same code therefore runs against an Apache Kafka cluster
(PLAINTEXT listeners: the wire client speaks neither TLS nor SASL).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from kio.schema.describe_transactions.v0 import request as dt
from kio.schema.end_txn.v3 import request as et
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4 import request as fc
from kio.schema.list_offsets.v7 import request as lo

from oncelog.client.txn_admin import AdminError, ClusterAdmin, TxnListing
from oncelog.client.wire import WireClient

from .offsets import Offsets, TopicPartition

log = logging.getLogger("oncelog.spark")

EARLIEST_TS, LATEST_TS = -2, -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1

_RETRIABLE = frozenset(
    {
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.concurrent_transactions,
        ErrorCode.leader_not_available,
        ErrorCode.not_leader_or_follower,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.offset_not_available,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
    }
)


class ClusterError(RuntimeError):
    pass


class Cluster:
    """A lazily connected admin view of a cluster: cheap to create, pickle-safe when closed."""

    def __init__(self, bootstrap: str, *, timeout: float = 30.0, retries: int = 40, backoff: float = 0.25) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._admin: ClusterAdmin | None = None

    # -- connection management ---------------------------------------------------------
    @property
    def admin(self) -> ClusterAdmin:
        if self._admin is None:
            errors = []
            for server in self.bootstrap.split(","):
                try:
                    self._admin = ClusterAdmin(server.strip(), timeout=self.timeout)
                    break
                except (OSError, ConnectionError, AdminError) as exc:
                    errors.append(f"{server.strip()}: {exc}")
            else:
                raise ClusterError(f"cannot reach any bootstrap server ({'; '.join(errors)})")
        return self._admin

    def reset(self) -> None:
        if self._admin is not None:
            try:
                self._admin.close()
            except OSError:
                pass
            self._admin = None

    close = reset

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_admin"] = None
        return state

    def _call(self, what: str, fn: Any) -> Any:
        """Run fn(admin), reconnecting on connection errors."""
        last: Exception | None = None
        for attempt in range(self.retries):
            try:
                return fn(self.admin)
            except (OSError, ConnectionError) as exc:
                last = exc
                self.reset()
                time.sleep(min(self.backoff * (attempt + 1), 2.0))
        raise ClusterError(f"{what} failed: {last}")

    # -- metadata and offsets ---------------------------------------------------------
    def topics(self) -> dict[str, int]:
        """{topic: partition count}, freshly from Metadata."""

        def run(admin: ClusterAdmin) -> dict[str, int]:
            admin.refresh()
            return dict(admin.topics)

        result: dict[str, int] = self._call("Metadata", run)
        return result

    def list_offsets(self, tps: Iterable[TopicPartition], timestamp: int, isolation: int = READ_COMMITTED) -> Offsets:
        """ListOffsets: earliest (-2) or latest (-1). Latest is the LSO under READ_COMMITTED,
        the high watermark under READ_UNCOMMITTED."""
        wanted = sorted(set(tps))
        out: Offsets = {}
        for attempt in range(self.retries):
            missing = [tp for tp in wanted if tp not in out]
            if not missing:
                return out
            errors: dict[TopicPartition, str] = {}

            def run(admin: ClusterAdmin, missing: list[TopicPartition] = missing, errors: dict[TopicPartition, str] = errors, attempt: int = attempt) -> None:
                if attempt:
                    admin.refresh()
                by_conn: dict[int, tuple[WireClient, dict[str, list[int]]]] = {}
                for topic, partition in missing:
                    try:
                        conn = admin.leader(topic, partition)
                    except AdminError:
                        errors[(topic, partition)] = "unknown topic-partition"
                        continue
                    by_conn.setdefault(id(conn), (conn, {}))[1].setdefault(topic, []).append(partition)
                for conn, topics in by_conn.values():
                    resp = conn.request(
                        lo.ListOffsetsRequest(
                            replica_id=-1,
                            isolation_level=isolation,
                            topics=tuple(
                                lo.ListOffsetsTopic(
                                    name=t,
                                    partitions=tuple(lo.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=timestamp) for p in ps),
                                )
                                for t, ps in topics.items()
                            ),
                        )
                    )
                    for t in resp.topics:
                        for p in t.partitions:
                            if p.error_code == ErrorCode.none:
                                out[(t.name, p.partition_index)] = p.offset
                            else:
                                errors[(t.name, p.partition_index)] = p.error_code.name

            self._call("ListOffsets", run)
            if errors and attempt + 1 < self.retries:
                time.sleep(self.backoff)
            elif errors:
                raise ClusterError(f"ListOffsets failed for {', '.join(f'{t}-{p}: {e}' for (t, p), e in sorted(errors.items()))}")
        return out

    # -- transactions (KIP-98 EndTxn; KIP-664 Describe/List; fencing by InitProducerId) ---
    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode:
        """Send EndTxn for someone else's transaction; retriable errors are retried, the
        final error code (NONE, PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, ...) returned."""
        request = et.EndTxnRequest(transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch, committed=commit)
        code = ErrorCode.none
        for attempt in range(self.retries):
            code = self._call("EndTxn", lambda admin: admin.coordinator(transactional_id).request(request).error_code)
            if code not in _RETRIABLE:
                return code
            time.sleep(min(self.backoff * (attempt + 1), 1.0))
        return code

    def describe_txn(self, transactional_id: str) -> Any | None:
        """DescribeTransactions state (producer_id, producer_epoch, transaction_state, ...),
        or None if the coordinator does not know the id."""
        for attempt in range(self.retries):
            try:
                return self._call("DescribeTransactions", lambda admin: admin.describe_transaction(transactional_id))
            except AdminError as exc:
                if "TRANSACTIONAL_ID_NOT_FOUND" in str(exc).upper():
                    return None
                if not any(name.name.upper() in str(exc).upper() for name in _RETRIABLE) or attempt + 1 == self.retries:
                    raise ClusterError(str(exc)) from exc
                time.sleep(self.backoff)
        return None

    def describe_many(self, transactional_ids: Iterable[str]) -> dict[str, Any]:
        """DescribeTransactions for many ids, batched per coordinator (FindCoordinator v4
        takes many keys). Ids the coordinator does not know map to None."""
        pending = sorted(set(transactional_ids))
        out: dict[str, Any] = {}
        for attempt in range(self.retries):
            if not pending:
                break
            retry: list[str] = []

            def run(admin: ClusterAdmin, ids: list[str] = pending, retry: list[str] = retry, attempt: int = attempt) -> None:
                if attempt:
                    admin.refresh()
                resp = admin.any_node()[0].request(fc.FindCoordinatorRequest(key_type=1, coordinator_keys=tuple(ids)))
                groups: dict[int, list[str]] = {}
                for c in resp.coordinators:
                    if c.error_code != ErrorCode.none:
                        retry.append(c.key)
                    else:
                        groups.setdefault(c.node_id, []).append(c.key)
                for node, keys in groups.items():
                    reply = admin.conn(node).request(dt.DescribeTransactionsRequest(transactional_ids=tuple(keys)))
                    for state in reply.transaction_states:
                        if state.error_code == ErrorCode.none:
                            out[state.transactional_id] = state
                        elif state.error_code == ErrorCode.transactional_id_not_found:
                            out[state.transactional_id] = None
                        elif state.error_code in _RETRIABLE:
                            retry.append(state.transactional_id)
                        else:
                            raise ClusterError(f"cannot describe {state.transactional_id!r}: {state.error_code.name}")

            self._call("DescribeTransactions", run)
            pending = sorted(set(retry))
            if pending:
                time.sleep(self.backoff)
        if pending:
            raise ClusterError(f"cannot describe transactions {pending}: coordinator not available")
        return out

    def list_transactions(self, states: tuple[str, ...] = ("Ongoing",)) -> list[TxnListing]:
        result: list[TxnListing] = self._call("ListTransactions", lambda admin: admin.list_transactions(states=states))
        return result

    def fence(self, transactional_id: str) -> tuple[int, int]:
        """Abort whatever the id has open by bumping its epoch (InitProducerId), as a new
        producer instance would. Returns the new (producer_id, epoch)."""
        result: tuple[int, int] = self._call("InitProducerId", lambda admin: admin.abort_transactional_id(transactional_id))
        return result
