"""Validation of a client's produce batch in one place, like Kafka's LogValidator.

Every check reads the 61-byte v2 batch header (plus one CRC-32C pass over the
bytes); records are decoded only for compacted topics, whose records need keys. Each error carries the
Kafka error code the produce response answers with, so the handler maps
``exc.error_code`` and nothing else. Sequence checks that need the producer's
history stay in ``ProducerStateManager.check_append``.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from oncelog.records.batch import (
    MAGIC_V2,
    OFFSET_MAGIC,
    BatchHeader,
    CorruptRecordError,
    validate_batch,
)
from oncelog.records.builder import decode_batch
from oncelog.records.compression import CompressionType

from .config import LogConfig
from .errors import InvalidTimestampError, LogError, RecordBatchTooLargeError, RecordTooLargeError

# ProduceRequest v7 is the first that may carry zstd (KIP-110).
ZSTD_MIN_PRODUCE_VERSION = 7
_MAX_CODEC = int(max(CompressionType))  # once: iterating an enum costs microseconds
_ZSTD = int(CompressionType.ZSTD)


class InvalidBatchError(LogError):
    """A batch the log refuses before any state changes; ``error_code`` is its answer.
    ``record_errors``: (batch index, message) of each offending record (KIP-467), when
    the fault lies in records rather than in the batch."""

    def __init__(
        self,
        error_code: ErrorCode,
        message: str,
        record_errors: tuple[tuple[int, str], ...] = (),
    ) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.record_errors = record_errors


def validate_produce_batch(
    records: bytes | bytearray | memoryview | None,
    *,
    produce_version: int,
    config: LogConfig,
    now_ms: int,
    partition_name: str = "",
) -> BatchHeader:
    """Check one partition's ``records`` from a ProduceRequest; return its header.
    ``partition_name`` (``topic-N``) names the partition in record errors, as Kafka's do.

    Raises InvalidBatchError or InvalidTimestampError (LogErrors with their Kafka
    ``error_code``). The size rule is the log's: ``UnifiedLog.append`` checks it for
    every writer, clients and coordinators alike, so it is checked once.
    """
    header = check_batch_shape(records, produce_version)
    check_timestamps(header, config, now_ms)
    if config.compact_enabled:
        assert records is not None  # check_batch_shape refused None
        check_keys_for_compaction(records, partition_name)
    return header


def check_keys_for_compaction(
    records: bytes | bytearray | memoryview, partition_name: str = ""
) -> None:
    """Kafka refuses keyless records on a compacted topic (INVALID_RECORD), naming each
    one by its index in the batch (KIP-467, Kafka's ``LogValidator.validateKey`` and
    ``processRecordErrors``). Only compacted topics pay for decoding the records here;
    every other produce keeps the header-only path."""
    _, decoded = decode_batch(records, verify=False)  # the CRC was checked by the shape check
    message = (
        f"Compacted topic cannot accept message without key in topic partition {partition_name}"
    )
    errors = tuple((i, message) for i, record in enumerate(decoded) if record.key is None)
    if errors:
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
        raise InvalidBatchError(
            ErrorCode.invalid_record,
            f"One or more records have been rejected due to {len(errors)} record errors in "
            f"total, and only showing the first three errors at most: [{shown}]",
            errors,
        )


def check_batch_shape(
    records: bytes | bytearray | memoryview | None, produce_version: int
) -> BatchHeader:
    """Exactly one well-formed magic-v2 client batch (Kafka's ProduceRequest.validateRecords
    and LogValidator.validateBatch for AppendOrigin.CLIENT)."""
    version = produce_version
    if not records:
        raise InvalidBatchError(
            ErrorCode.invalid_record,
            f"Produce requests with version {version} must have at least one record batch "
            "per partition",
        )
    # Magic first: Kafka answers a non-v2 batch with INVALID_RECORD, not CORRUPT_MESSAGE.
    if len(records) > OFFSET_MAGIC and records[OFFSET_MAGIC] != MAGIC_V2:
        raise InvalidBatchError(
            ErrorCode.invalid_record,
            f"Produce requests with version {version} are only allowed to contain record "
            "batches with magic version 2",
        )
    try:
        header = validate_batch(records)  # header, length and CRC-32C in one pass
    except CorruptRecordError as exc:
        raise InvalidBatchError(ErrorCode.corrupt_message, str(exc)) from exc
    if header.size != len(records):
        raise InvalidBatchError(
            ErrorCode.invalid_record,
            f"Produce requests with version {version} are only allowed to contain exactly "
            "one record batch per partition",
        )
    _check_compression(header, version)
    if header.is_control:
        raise InvalidBatchError(
            ErrorCode.invalid_record, "Clients are not allowed to write control records"
        )
    if header.records_count != header.last_offset_delta + 1 or header.records_count <= 0:
        raise InvalidBatchError(
            ErrorCode.invalid_record,
            f"record count {header.records_count} does not match last offset delta "
            f"{header.last_offset_delta}",
        )
    if header.has_producer_id and header.base_sequence < 0:
        raise InvalidBatchError(
            ErrorCode.invalid_record,
            f"Invalid sequence number {header.base_sequence} in record batch with producerId "
            f"{header.producer_id}",
        )
    return header


def _check_compression(header: BatchHeader, produce_version: int) -> None:
    codec = header.compression
    if codec > _MAX_CODEC:
        # Stored as is, no consumer could ever inflate it.
        raise InvalidBatchError(ErrorCode.corrupt_message, f"unknown compression type id {codec}")
    if codec == _ZSTD and produce_version < ZSTD_MIN_PRODUCE_VERSION:
        raise InvalidBatchError(
            ErrorCode.unsupported_compression_type,
            f"Produce requests with version {produce_version} are not allowed to use "
            "ZStandard compression",
        )


def check_timestamps(header: BatchHeader, config: LogConfig, now_ms: int) -> None:
    """CreateTime within message.timestamp.before.max.ms / after.max.ms of now."""
    if header.is_log_append_time or config.log_append_time:
        return
    ts = header.max_timestamp
    if ts < 0:
        return
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    if now_ms - header.base_timestamp > before or ts - now_ms > after:
        raise InvalidTimestampError(
            f"Timestamp {ts} of message is out of range. The timestamp should be within "
            f"[{now_ms - before}, {now_ms + after}]"
        )


def check_size(size: int, config: LogConfig) -> None:
    """max.message.bytes (MESSAGE_TOO_LARGE), and segment.bytes, since a batch is
    never split across segments (RECORD_LIST_TOO_LARGE). Every append checks it."""
    if size > config.max_message_bytes:
        raise RecordTooLargeError(
            f"batch of {size} bytes is larger than max.message.bytes {config.max_message_bytes}"
        )
    if size > config.segment_bytes:
        raise RecordBatchTooLargeError(
            f"batch of {size} bytes is larger than segment.bytes {config.segment_bytes}"
        )
