"""Transaction admin operations (KIP-664) over the standard protocol.

Requests are routed as Kafka requires (DescribeProducers and WriteTxnMarkers to
the partition leader, DescribeTransactions to the transaction coordinator), so
the same tool works against an Apache Kafka cluster.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass
from typing import Any

from kio.schema.describe_producers.v0 import request as dp
from kio.schema.describe_transactions.v0 import request as dt
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4 import request as fc
from kio.schema.init_producer_id.v4 import request as ip
from kio.schema.list_offsets.v7 import request as lo
from kio.schema.list_transactions.v1 import request as lt
from kio.schema.metadata.v12 import request as md
from kio.schema.write_txn_markers.v1 import request as wm

from oncelog.client.wire import WireClient

KEY_TXN = 1


class AdminError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class ProducerInfo:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


@dataclass(frozen=True, slots=True)
class TxnListing:
    transactional_id: str
    producer_id: int
    state: str


class ClusterAdmin:
    """Connections per broker, found through Metadata from a bootstrap address."""

    def __init__(self, bootstrap: str, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self._bootstrap = WireClient(bootstrap, timeout=timeout, client_id="oncelog-admin")
        self._nodes: dict[int, str] = {}
        self._conns: dict[str, WireClient] = {bootstrap: self._bootstrap}
        self._leaders: dict[tuple[str, int], int] = {}
        self.topics: dict[str, int] = {}
        self.refresh()

    def close(self) -> None:
        for c in self._conns.values():
            c.close()

    def __enter__(self) -> ClusterAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def refresh(self) -> None:
        resp = self._bootstrap.request(md.MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        self._nodes = {b.node_id: f"{b.host}:{b.port}" for b in resp.brokers}
        self.topics = {}
        for t in resp.topics:
            if t.error_code == ErrorCode.none and t.name is not None:
                self.topics[t.name] = len(t.partitions)
                for p in t.partitions:
                    self._leaders[(t.name, p.partition_index)] = p.leader_id

    def conn(self, node_id: int) -> WireClient:
        addr = self._nodes[node_id]
        if addr not in self._conns:
            self._conns[addr] = WireClient(addr, timeout=self.timeout, client_id="oncelog-admin")
        return self._conns[addr]

    def leader(self, topic: str, partition: int) -> WireClient:
        node = self._leaders.get((topic, partition))
        if node is None:
            raise AdminError(f"unknown topic-partition {topic}-{partition}")
        return self.conn(node)

    def any_node(self) -> list[WireClient]:
        return [self.conn(n) for n in sorted(self._nodes)]

    def coordinator(self, transactional_id: str) -> WireClient:
        resp = self._bootstrap.request(fc.FindCoordinatorRequest(key_type=KEY_TXN, coordinator_keys=(transactional_id,)))
        c = resp.coordinators[0]
        if c.error_code != ErrorCode.none:
            raise AdminError(f"no coordinator for {transactional_id!r}: {c.error_code.name}")
        self._nodes.setdefault(c.node_id, f"{c.host}:{c.port}")
        return self.conn(c.node_id)

    # -- KIP-664 operations ------------------------------------------------------
    def list_transactions(self, states: tuple[str, ...] = (), producer_ids: tuple[int, ...] = (), min_duration_ms: int = -1) -> list[TxnListing]:
        out: list[TxnListing] = []
        for c in self.any_node():
            resp = c.request(lt.ListTransactionsRequest(state_filters=states, producer_id_filters=producer_ids, duration_filter=min_duration_ms))
            if resp.error_code != ErrorCode.none:
                raise AdminError(f"ListTransactions failed: {resp.error_code.name}")
            out += [TxnListing(s.transactional_id, s.producer_id, s.transaction_state) for s in resp.transaction_states]
        return sorted(out, key=lambda x: x.transactional_id)

    def describe_transaction(self, transactional_id: str) -> Any:
        resp = self.coordinator(transactional_id).request(dt.DescribeTransactionsRequest(transactional_ids=(transactional_id,)))
        state = resp.transaction_states[0]
        if state.error_code != ErrorCode.none:
            raise AdminError(f"cannot describe {transactional_id!r}: {state.error_code.name}")
        return state

    def describe_producers(self, topic: str, partition: int) -> list[ProducerInfo]:
        resp = self.leader(topic, partition).request(
            dp.DescribeProducersRequest(topics=(dp.TopicRequest(name=topic, partition_indexes=(partition,)),))
        )
        p = resp.topics[0].partitions[0]
        if p.error_code != ErrorCode.none:
            raise AdminError(f"cannot describe producers of {topic}-{partition}: {p.error_code.name}")
        return [
            ProducerInfo(topic, partition, s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp, s.coordinator_epoch, s.current_txn_start_offset)
            for s in p.active_producers
        ]

    def find_hanging(self, topics: list[str] | None = None, max_timeout_ms: int = 900_000) -> list[ProducerInfo]:
        """Open transactions in partitions that the coordinator no longer tracks as
        Ongoing for that producer, and older than the maximum transaction timeout
        (Kafka's kafka-transactions.sh find-hanging)."""
        now = int(time.time() * 1000)
        candidates = []
        for topic in topics or sorted(self.topics):
            for p in range(self.topics.get(topic, 0)):
                for info in self.describe_producers(topic, p):
                    if info.current_txn_start_offset >= 0 and now - info.last_timestamp > max_timeout_ms:
                        candidates.append(info)
        if not candidates:
            return []
        ongoing = {t.producer_id for t in self.list_transactions(producer_ids=tuple({c.producer_id for c in candidates})) if t.state in ("Ongoing", "PrepareCommit", "PrepareAbort")}
        return [c for c in candidates if c.producer_id not in ongoing]

    def abort_partition(self, topic: str, partition: int, producer_id: int, producer_epoch: int | None = None, coordinator_epoch: int | None = None) -> None:
        """Write an ABORT marker for a hanging transaction (WriteTxnMarkers)."""
        if producer_epoch is None or coordinator_epoch is None:
            match = [p for p in self.describe_producers(topic, partition) if p.producer_id == producer_id]
            if not match:
                raise AdminError(f"producer {producer_id} has no state in {topic}-{partition}")
            producer_epoch = match[0].producer_epoch if producer_epoch is None else producer_epoch
            coordinator_epoch = max(match[0].coordinator_epoch, 0) if coordinator_epoch is None else coordinator_epoch
        resp = self.leader(topic, partition).request(
            wm.WriteTxnMarkersRequest(
                markers=(
                    wm.WritableTxnMarker(
                        producer_id=producer_id,
                        producer_epoch=producer_epoch,
                        transaction_result=False,
                        topics=(wm.WritableTxnMarkerTopic(name=topic, partition_indexes=(partition,)),),
                        coordinator_epoch=coordinator_epoch,
                    ),
                )
            )
        )
        code = resp.markers[0].topics[0].partitions[0].error_code
        if code != ErrorCode.none:
            raise AdminError(f"abort marker for {topic}-{partition} rejected: {code.name}")

    def abort_transactional_id(self, transactional_id: str, timeout_s: float = 30.0) -> tuple[int, int]:
        """Abort whatever the id has open by fencing it: InitProducerId bumps the
        epoch and aborts an ongoing transaction, as a new producer instance would."""
        state = self.describe_transaction(transactional_id)
        timeout = state.transaction_timeout
        c = self.coordinator(transactional_id)
        deadline = time.monotonic() + timeout_s
        while True:
            resp = c.request(ip.InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout=timeout, producer_id=-1, producer_epoch=-1))
            if resp.error_code == ErrorCode.none:
                return resp.producer_id, resp.producer_epoch
            if resp.error_code != ErrorCode.concurrent_transactions or time.monotonic() > deadline:
                raise AdminError(f"cannot abort {transactional_id!r}: {resp.error_code.name}")
            time.sleep(0.05)

    def partition_offsets(self) -> dict[tuple[str, int], tuple[int, int]]:
        """(high watermark, last stable offset) of every partition."""
        out: dict[tuple[str, int], tuple[int, int]] = {}
        for isolation in (0, 1):
            for topic, n in self.topics.items():
                by_leader: dict[int, list[int]] = {}
                for p in range(n):
                    by_leader.setdefault(self._leaders[(topic, p)], []).append(p)
                for node, parts in by_leader.items():
                    resp = self.conn(node).request(
                        lo.ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=(lo.ListOffsetsTopic(name=topic, partitions=tuple(lo.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=-1) for p in parts)),))
                    )
                    for pr in resp.topics[0].partitions:
                        hw, lso = out.get((topic, pr.partition_index), (-1, -1))
                        out[(topic, pr.partition_index)] = (pr.offset, lso) if isolation == 0 else (hw, pr.offset)
        return out

    def metrics(self) -> dict[str, Any]:
        """KIP-98's transaction metrics, computed from the standard APIs."""
        offsets = self.partition_offsets()
        live: set[int] = set()
        for topic, n in self.topics.items():
            for p in range(n):
                live |= {i.producer_id for i in self.describe_producers(topic, p)}
        txns = self.list_transactions()
        return {
            "live_producer_ids": len(live),
            "active_transactional_ids": len(txns),
            "ongoing_transactions": sum(1 for t in txns if t.state in ("Ongoing", "PrepareCommit", "PrepareAbort")),
            "partitions": {f"{t}-{p}": {"high_watermark": hw, "last_stable_offset": lso, "lso_lag": hw - lso} for (t, p), (hw, lso) in sorted(offsets.items())},
        }


def ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)
