"""Produce (API 0): validate one v2 batch per partition, append it, answer offsets.

The hot path parses the 61-byte batch header and checks the CRC
(``storage.validator``); records are never decoded.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kio._kio_native import tz_aware_from_i64
from kio.schema.errors import ErrorCode
from kio.static.primitive import i64

from oncelog.broker.apis.acl_checks import Op, Res
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import NO_RESPONSE, CloseConnection, RequestContext
from oncelog.clock import now_ms
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make
from oncelog.storage.errors import LogError
from oncelog.storage.producer_state import ProducerStateError
from oncelog.storage.validator import validate_produce_batch

if TYPE_CHECKING:
    from oncelog.broker.broker import Broker
    from oncelog.storage.log import AppendResult

log = logging.getLogger(__name__)

# Not worth a log line: idempotent producers retry through these by design.
_ROUTINE = (
    ErrorCode.duplicate_sequence_number,
    ErrorCode.out_of_order_sequence_number,
    ErrorCode.unknown_producer_id,
)


class ProduceError(Exception):
    def __init__(self, code: ErrorCode, message: str, log_start_offset: int = -1) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.log_start_offset = log_start_offset


def append_to_partition(
    broker: Broker,
    topic: str,
    index: int,
    records: bytes | None,
    version: int,
    transactional_id: str | None,
) -> AppendResult:
    part = broker.topics.partition(topic, index)
    if part is None:
        raise ProduceError(
            ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition."
        )
    now = now_ms()
    try:
        header = validate_produce_batch(
            records, produce_version=version, config=part.config, now_ms=now
        )
        if header.is_transactional:
            # KIP-890 part 1: a delayed produce must not land outside its transaction.
            code = broker.txn.verify_in_transaction(
                transactional_id,
                header.producer_id,
                header.producer_epoch,
                (topic, index),
                fenced=ErrorCode.invalid_producer_epoch,
            )
            if code != ErrorCode.none:
                raise ProduceError(
                    code,
                    f"partition {topic}-{index} is not part of an ongoing transaction of "
                    f"producer {header.producer_id} epoch {header.producer_epoch}",
                )
        assert records is not None
        result = part.append(bytearray(records), header, now_ms=now)
    except LogError as exc:
        # KIP-192: sequence errors carry the log start offset, so a client can tell
        # producer state lost to retention from a real gap.
        start = part.log_start_offset if isinstance(exc, ProducerStateError) else -1
        raise ProduceError(exc.error_code, str(exc), start) from exc
    except OSError as exc:
        log.exception("storage error appending to %s-%d", topic, index)
        raise ProduceError(ErrorCode.kafka_storage_error, str(exc)) from exc
    if not result.duplicate:
        broker.notifier.notify((topic, index))
    return result


def produce(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    r = ctx.response
    acks = req.acks
    any_error = False
    topics = []
    for t in req.topic_data:
        parts = []
        writable = ctx.authorized(Op.WRITE, Res.TOPIC, t.name)
        for p in t.partition_data:
            try:
                if acks not in (0, 1, -1):
                    raise ProduceError(
                        ErrorCode.invalid_required_acks, f"Invalid required acks {acks}"
                    )
                if not writable:
                    raise ProduceError(ErrorCode.topic_authorization_failed, "Topic WRITE denied")
                res = append_to_partition(
                    broker, t.name, p.index, p.records, ctx.version, req.transactional_id
                )
                parts.append(
                    make(
                        r.PartitionProduceResponse,
                        index=p.index,
                        error_code=ErrorCode.none,
                        base_offset=res.base_offset,
                        log_append_time=tz_aware_from_i64(i64(res.log_append_time))
                        if res.log_append_time >= 0
                        else None,
                        log_start_offset=res.log_start_offset,
                        record_errors=(),
                        error_message=None,
                    )
                )
            except ProduceError as exc:
                any_error = True
                if exc.code not in _ROUTINE:
                    log.info(
                        "produce to %s-%d from %s rejected: %s %s",
                        t.name,
                        p.index,
                        ctx.peer,
                        exc.code.name,
                        exc.message,
                    )
                parts.append(
                    make(
                        r.PartitionProduceResponse,
                        index=p.index,
                        error_code=exc.code,
                        base_offset=-1,
                        log_append_time=None,
                        log_start_offset=exc.log_start_offset,
                        record_errors=(),
                        error_message=exc.message,
                    )
                )
        topics.append(make(r.TopicProduceResponse, name=t.name, partition_responses=tuple(parts)))
    if acks == 0:
        if any_error:  # Kafka's only way to tell an acks=0 producer about an error
            raise CloseConnection("error on acks=0 produce")
        return NO_RESPONSE
    return make(r.ProduceResponse, responses=tuple(topics))


def authorize_produce(ctx: RequestContext, req: Any) -> Any | None:
    """A transactional produce needs TransactionalId WRITE; else every partition fails."""
    txn_id = req.transactional_id
    if txn_id is None or ctx.authorized(Op.WRITE, Res.TRANSACTIONAL_ID, txn_id):
        return None
    if req.acks == 0:
        raise CloseConnection("TransactionalId WRITE denied on an acks=0 produce")
    r = ctx.response
    code = ErrorCode.transactional_id_authorization_failed
    return make(
        r.ProduceResponse,
        responses=tuple(
            make(
                r.TopicProduceResponse,
                name=t.name,
                partition_responses=tuple(
                    make(
                        r.PartitionProduceResponse,
                        index=p.index,
                        error_code=code,
                        base_offset=-1,
                        log_append_time=None,
                        log_start_offset=-1,
                        record_errors=(),
                        error_message=None,
                    )
                    for p in t.partition_data
                ),
            )
            for t in req.topic_data
        ),
    )


API = ApiSpec(ApiKey.PRODUCE, 3, 9, produce, authorize=authorize_produce)
