"""Transaction APIs: FindCoordinator, InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, WriteTxnMarkers and the KIP-664 admin APIs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio._kio_native import tz_aware_from_i64
from kio.schema.errors import ErrorCode
from kio.static.primitive import i64

from oncelog.broker.server import RequestContext
from oncelog.protocol.api_keys import TXN_API_VERSIONS, ApiKey
from oncelog.protocol.messages import make
from oncelog.txn.messages import Reply, TxnMarker
from oncelog.txn.metadata import TxnState

if TYPE_CHECKING:
    from oncelog.broker.broker import Broker

KEY_GROUP, KEY_TXN = 0, 1
# Below these versions clients do not know PRODUCER_FENCED (Kafka maps it likewise).
_FENCED_SINCE = {
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 2,
    ApiKey.ADD_OFFSETS_TO_TXN: 2,
    ApiKey.END_TXN: 2,
}


def client_error(ctx: RequestContext, code: ErrorCode) -> ErrorCode:
    if code == ErrorCode.producer_fenced and ctx.version < _FENCED_SINCE.get(ApiKey(ctx.header.api_key), 0):
        return ErrorCode.invalid_producer_epoch
    return code


def find_coordinator(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    r = ctx.response
    key_type = getattr(req, "key_type", KEY_GROUP)
    host, port = broker.advertised_address
    keys = getattr(req, "coordinator_keys", None) or (getattr(req, "key", None),)
    code = ErrorCode.none if key_type in (KEY_GROUP, KEY_TXN) else ErrorCode.invalid_request
    message = None if code == ErrorCode.none else f"unknown key type {key_type}"
    if code == ErrorCode.none and key_type == KEY_TXN and not broker.txn.loaded:
        code = ErrorCode.coordinator_load_in_progress
    if hasattr(r, "Coordinator"):  # v4+: batched
        return make(
            r.FindCoordinatorResponse,
            coordinators=tuple(
                make(r.Coordinator, key=k, node_id=broker.node_id if not code else -1, host=host if not code else "",
                     port=port if not code else -1, error_code=code, error_message=message)
                for k in keys
            ),
        )
    return make(
        r.FindCoordinatorResponse,
        error_code=code,
        error_message=message,
        node_id=broker.node_id if not code else -1,
        host=host if not code else "",
        port=port if not code else -1,
    )


async def init_producer_id(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    broker = ctx.broker
    reply = await broker.txn.init_producer_id(
        req.transactional_id,
        int(req.transaction_timeout.total_seconds() * 1000),
        getattr(req, "producer_id", -1),
        getattr(req, "producer_epoch", -1),
    )
    return make(
        r.InitProducerIdResponse,
        error_code=client_error(ctx, reply.error),
        producer_id=reply.producer_id if reply.ok else -1,
        producer_epoch=reply.producer_epoch if reply.ok else -1,
    )


def _partition_results(r: Any, topics: Any, reply: Reply, ctx: RequestContext) -> tuple[Any, ...]:
    out = []
    for t in topics:
        parts = []
        for p in t.partitions:
            code = reply.error
            if reply.partition_errors is not None:
                code = reply.partition_errors.get((t.name, p), reply.error)
            parts.append(make(r.AddPartitionsToTxnPartitionResult, partition_index=p, partition_error_code=client_error(ctx, code)))
        out.append(make(r.AddPartitionsToTxnTopicResult, name=t.name, results_by_partition=tuple(parts)))
    return tuple(out)


async def _add_partitions(ctx: RequestContext, txn_id: str, pid: int, epoch: int, topics: Any, verify_only: bool) -> Reply:
    partitions = [(t.name, p) for t in topics for p in t.partitions]
    return await ctx.broker.txn.add_partitions(txn_id, pid, epoch, partitions, verify_only=verify_only)


async def add_partitions_to_txn(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    if hasattr(req, "transactions"):  # v4+: batched, from brokers (verify_only)
        results = []
        for txn in req.transactions:
            reply = await _add_partitions(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics, txn.verify_only)
            results.append(make(r.AddPartitionsToTxnResult, transactional_id=txn.transactional_id, topic_results=_partition_results(r, txn.topics, reply, ctx)))
        return make(r.AddPartitionsToTxnResponse, error_code=ErrorCode.none, results_by_transaction=tuple(results))
    reply = await _add_partitions(ctx, req.v3_and_below_transactional_id, req.v3_and_below_producer_id, req.v3_and_below_producer_epoch, req.v3_and_below_topics, False)
    return make(r.AddPartitionsToTxnResponse, results_by_topic_v3_and_below=_partition_results(r, req.v3_and_below_topics, reply, ctx))


async def add_offsets_to_txn(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    reply = await broker.txn.add_offsets(req.transactional_id, req.producer_id, req.producer_epoch, req.group_id)
    return make(ctx.response.AddOffsetsToTxnResponse, error_code=client_error(ctx, reply.error))


async def end_txn(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    reply = await broker.txn.end_txn(req.transactional_id, req.producer_id, req.producer_epoch, req.committed)
    return make(ctx.response.EndTxnResponse, error_code=client_error(ctx, reply.error))


def write_txn_markers(ctx: RequestContext, req: Any) -> Any:
    """Used by admin tools to abort hanging transactions (KIP-664)."""
    broker = ctx.broker
    r = ctx.response
    results = []
    for marker in req.markers:
        topics = []
        for t in marker.topics:
            parts = []
            for p in t.partition_indexes:
                code = broker.txn.write_marker(
                    t.name, p, TxnMarker(marker.producer_id, marker.producer_epoch, marker.transaction_result, marker.coordinator_epoch)
                )
                parts.append(make(r.WritableTxnMarkerPartitionResult, partition_index=p, error_code=code))
            topics.append(make(r.WritableTxnMarkerTopicResult, name=t.name, partitions=tuple(parts)))
        results.append(make(r.WritableTxnMarkerResult, producer_id=marker.producer_id, topics=tuple(topics)))
    return make(r.WriteTxnMarkersResponse, markers=tuple(results))


def describe_transactions(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    states = []
    for txn_id, meta in ctx.broker.txn.describe_transactions(req.transactional_ids):
        if meta is None:
            states.append(make(r.TransactionState, error_code=ErrorCode.transactional_id_not_found, transactional_id=txn_id,
                               transaction_state="", transaction_timeout=_ms(0), transaction_start_time=_ts(-1),
                               producer_id=-1, producer_epoch=-1, topics=()))
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(p)
        states.append(
            make(
                r.TransactionState,
                error_code=ErrorCode.none,
                transactional_id=txn_id,
                transaction_state=meta.state.kafka_name,
                transaction_timeout=_ms(meta.txn_timeout_ms),
                transaction_start_time=_ts(meta.txn_start_ms),
                producer_id=meta.producer_id,
                producer_epoch=meta.producer_epoch,
                topics=tuple(make(r.TopicData, topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
            )
        )
    return make(r.DescribeTransactionsResponse, transaction_states=tuple(states))


def list_transactions(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    known = {s.kafka_name for s in TxnState}
    unknown = tuple(s for s in req.state_filters if s not in known)
    wanted = [s for s in req.state_filters if s in known]
    duration = getattr(req, "duration_filter", -1)
    if req.state_filters and not wanted:
        metas = []
    else:
        metas = ctx.broker.txn.list_transactions(wanted or None, req.producer_id_filters or None, duration if duration >= 0 else None)
    return make(
        r.ListTransactionsResponse,
        error_code=ErrorCode.none,
        unknown_state_filters=unknown,
        transaction_states=tuple(
            make(r.TransactionState, transactional_id=m.transactional_id, producer_id=m.producer_id, transaction_state=m.state.kafka_name)
            for m in metas
        ),
    )


def describe_producers(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partition_indexes:
            part = ctx.broker.topics.partition(t.name, p)
            if part is None:
                parts.append(make(r.PartitionResponse, partition_index=p, error_code=ErrorCode.unknown_topic_or_partition, error_message=None, active_producers=()))
                continue
            producers = tuple(
                make(
                    r.ProducerState,
                    producer_id=e.producer_id,
                    producer_epoch=e.producer_epoch,
                    last_sequence=e.last_sequence,
                    last_timestamp=e.last_timestamp,
                    coordinator_epoch=e.coordinator_epoch,
                    current_txn_start_offset=-1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
                )
                for e in part.producer_state.producers()
            )
            parts.append(make(r.PartitionResponse, partition_index=p, error_code=ErrorCode.none, error_message=None, active_producers=producers))
        topics.append(make(r.TopicResponse, name=t.name, partitions=tuple(parts)))
    return make(r.DescribeProducersResponse, topics=tuple(topics))


def _ms(ms: int) -> Any:
    import datetime

    return datetime.timedelta(milliseconds=ms)


def _ts(ms: int) -> Any:
    # Kafka sends -1 for "not started"; kio's decoder (and so our own admin
    # client) rejects negative timestamps, so the epoch stands in for it.
    return tz_aware_from_i64(i64(max(ms, 0)))


def register(broker: Broker) -> None:
    v = TXN_API_VERSIONS
    broker.register(ApiKey.FIND_COORDINATOR, v[ApiKey.FIND_COORDINATOR], find_coordinator)
    broker.register(ApiKey.INIT_PRODUCER_ID, v[ApiKey.INIT_PRODUCER_ID], init_producer_id)
    broker.register(ApiKey.ADD_PARTITIONS_TO_TXN, v[ApiKey.ADD_PARTITIONS_TO_TXN], add_partitions_to_txn)
    broker.register(ApiKey.ADD_OFFSETS_TO_TXN, v[ApiKey.ADD_OFFSETS_TO_TXN], add_offsets_to_txn)
    broker.register(ApiKey.END_TXN, v[ApiKey.END_TXN], end_txn)
    broker.register(ApiKey.WRITE_TXN_MARKERS, v[ApiKey.WRITE_TXN_MARKERS], write_txn_markers)
    broker.register(ApiKey.DESCRIBE_TRANSACTIONS, v[ApiKey.DESCRIBE_TRANSACTIONS], describe_transactions)
    broker.register(ApiKey.LIST_TRANSACTIONS, v[ApiKey.LIST_TRANSACTIONS], list_transactions)
    broker.register(ApiKey.DESCRIBE_PRODUCERS, v[ApiKey.DESCRIBE_PRODUCERS], describe_producers)
