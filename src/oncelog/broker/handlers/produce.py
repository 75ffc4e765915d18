"""Produce: validate one v2 batch per partition, append it, answer offsets.

The hot path parses the 61-byte batch header and checks the CRC; records are
never decoded.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kio._kio_native import tz_aware_from_i64
from kio.schema.errors import ErrorCode
from kio.static.primitive import i64

from oncelog.broker.server import NO_RESPONSE, CloseConnection, RequestContext
from oncelog.clock import now_ms
from oncelog.protocol.api_keys import BROKER_API_VERSIONS, ApiKey
from oncelog.protocol.messages import make
from oncelog.records.batch import MAGIC_V2, OFFSET_MAGIC, CorruptRecordError, validate_batch
from oncelog.storage.log import RecordTooLargeError
from oncelog.storage.producer_state import ProducerStateError

if TYPE_CHECKING:
    from oncelog.broker.broker import Broker
    from oncelog.storage.log import AppendResult, PartitionLog

log = logging.getLogger(__name__)


class ProduceError(Exception):
    def __init__(self, code: ErrorCode, message: str, log_start_offset: int = -1) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.log_start_offset = log_start_offset


def check_batch(records: bytes | None, version: int) -> Any:
    """ProduceRequest validation: exactly one well-formed magic-v2 batch."""
    if not records:
        raise ProduceError(ErrorCode.invalid_record, f"Produce requests with version {version} must have at least one record batch per partition")
    # Magic first: Kafka answers a non-v2 batch with INVALID_RECORD, not CORRUPT_MESSAGE.
    if len(records) > OFFSET_MAGIC and records[OFFSET_MAGIC] != MAGIC_V2:
        raise ProduceError(ErrorCode.invalid_record, f"Produce requests with version {version} are only allowed to contain record batches with magic version 2")
    try:
        header = validate_batch(records)  # header, length and CRC-32C in one pass
    except CorruptRecordError as exc:
        raise ProduceError(ErrorCode.corrupt_message, str(exc)) from exc
    if header.size != len(records):
        raise ProduceError(ErrorCode.invalid_record, f"Produce requests with version {version} are only allowed to contain exactly one record batch per partition")
    if header.is_control:
        raise ProduceError(ErrorCode.invalid_record, "Clients are not allowed to write control records")
    if header.records_count != header.last_offset_delta + 1 or header.records_count <= 0:
        raise ProduceError(ErrorCode.invalid_record, f"record count {header.records_count} does not match last offset delta {header.last_offset_delta}")
    return header


def _check_timestamps(part: PartitionLog, header: Any, now: int) -> None:
    cfg = part.config
    if header.is_log_append_time or cfg.message_timestamp_type == "LogAppendTime":
        return
    ts = header.max_timestamp
    if ts < 0:
        return
    if now - header.base_timestamp > cfg.message_timestamp_before_max_ms or ts - now > cfg.message_timestamp_after_max_ms:
        raise ProduceError(ErrorCode.invalid_timestamp, f"Timestamp {ts} of message is out of range. The timestamp should be within [{now - cfg.message_timestamp_before_max_ms}, {now + cfg.message_timestamp_after_max_ms}]")


def append_to_partition(
    broker: Broker, topic: str, index: int, records: bytes | None, version: int, transactional_id: str | None
) -> AppendResult:
    part = broker.topics.partition(topic, index)
    if part is None:
        raise ProduceError(ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.")
    header = check_batch(records, version)
    if header.is_transactional:
        # KIP-890 part 1: a delayed produce must not land outside its transaction.
        code = broker.txn.verify_in_transaction(
            transactional_id, header.producer_id, header.producer_epoch, (topic, index), fenced=ErrorCode.invalid_producer_epoch
        )
        if code != ErrorCode.none:
            raise ProduceError(code, f"partition {topic}-{index} is not part of an ongoing transaction of producer {header.producer_id} epoch {header.producer_epoch}")
    assert records is not None
    now = now_ms()
    _check_timestamps(part, header, now)
    try:
        result = part.append(bytearray(records), header, now_ms=now)
    except ProducerStateError as exc:
        raise ProduceError(exc.error_code, str(exc), part.log_start_offset) from exc
    except RecordTooLargeError as exc:  # MESSAGE_TOO_LARGE, or RECORD_LIST_TOO_LARGE past segment.bytes
        raise ProduceError(exc.error_code, str(exc)) from exc
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
        for p in t.partition_data:
            try:
                if acks not in (0, 1, -1):
                    raise ProduceError(ErrorCode.invalid_required_acks, f"Invalid required acks {acks}")
                res = append_to_partition(broker, t.name, p.index, p.records, ctx.version, req.transactional_id)
                parts.append(
                    make(
                        r.PartitionProduceResponse,
                        index=p.index,
                        error_code=ErrorCode.none,
                        base_offset=res.base_offset,
                        log_append_time=tz_aware_from_i64(i64(res.log_append_time)) if res.log_append_time >= 0 else None,
                        log_start_offset=res.log_start_offset,
                        record_errors=(),
                        error_message=None,
                    )
                )
            except ProduceError as exc:
                any_error = True
                if exc.code not in (ErrorCode.duplicate_sequence_number, ErrorCode.out_of_order_sequence_number, ErrorCode.unknown_producer_id):
                    log.info("produce to %s-%d from %s rejected: %s %s", t.name, p.index, ctx.peer, exc.code.name, exc.message)
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


def register(broker: Broker) -> None:
    broker.register(ApiKey.PRODUCE, BROKER_API_VERSIONS[ApiKey.PRODUCE], produce)
