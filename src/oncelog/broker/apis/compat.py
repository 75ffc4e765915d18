"""Error codes that older request versions do not know."""

from __future__ import annotations

from kio.schema.errors import ErrorCode


def fenced_for_version(code: ErrorCode, version: int, fenced_since: int) -> ErrorCode:
    """PRODUCER_FENCED is sent only from ``fenced_since`` on; older clients get
    INVALID_PRODUCER_EPOCH, as Kafka maps it."""
    if code == ErrorCode.producer_fenced and version < fenced_since:
        return ErrorCode.invalid_producer_epoch
    return code
