"""Log-layer errors; each carries the Kafka error code a handler should answer."""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class LogError(Exception):
    error_code: ErrorCode = ErrorCode.unknown_server_error


class OffsetOutOfRangeError(LogError):
    error_code = ErrorCode.offset_out_of_range


class RecordTooLargeError(LogError):
    """A batch above max.message.bytes (MESSAGE_TOO_LARGE)."""

    error_code = ErrorCode.message_too_large


class RecordBatchTooLargeError(RecordTooLargeError):
    """A batch that could never fit in a segment (RECORD_LIST_TOO_LARGE)."""

    error_code = ErrorCode.record_list_too_large


class InvalidTimestampError(LogError):
    """CreateTime outside message.timestamp.before/after.max.ms (INVALID_TIMESTAMP)."""

    error_code = ErrorCode.invalid_timestamp


class LogClosedError(LogError):
    """The partition log was closed or deleted (KAFKA_STORAGE_ERROR)."""

    error_code = ErrorCode.kafka_storage_error
