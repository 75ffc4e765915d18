"""Response schemas the client decodes with in place of kio's, where kio refuses valid
Kafka answers.

DescribeTransactions v0: Kafka sends ``TransactionStartTimeMs = -1`` for a transaction
that has not started (Empty, or just initialised), and kio's ``datetime_i64`` reader
refuses negative timestamps. This copy of kio's schema reads the field as the plain
int64 it is on the wire, and offers ``transaction_start_time`` as a datetime, or None
when Kafka sent -1. Every other field is kio's, in kio's order, so kio's reader does
the decoding.
"""

# No "from __future__ import annotations": kio reads the field types at run time.

import datetime
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kio.schema.describe_transactions.v0 import response as kio_dt
from kio.schema.errors import ErrorCode
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32Timedelta, i64

NOT_STARTED_MS = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(65)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    transactional_id: str = field(metadata={"kafka_type": "string"})
    transaction_state: str = field(metadata={"kafka_type": "string"})
    transaction_timeout: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    transaction_start_time_ms: i64 = field(metadata={"kafka_type": "int64"})
    producer_id: i64 = field(metadata={"kafka_type": "int64"})
    producer_epoch: i16 = field(metadata={"kafka_type": "int16"})
    topics: tuple[kio_dt.TopicData, ...]

    @property
    def transaction_start_time(self) -> datetime.datetime | None:
        """When the ongoing (or last) transaction started; None if none has."""
        if self.transaction_start_time_ms < 0:
            return None
        return datetime.datetime.fromtimestamp(self.transaction_start_time_ms / 1000, datetime.UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTransactionsResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(65)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    transaction_states: tuple[TransactionState, ...]


# (api key, version) -> the schema to decode that response with.
TOLERANT_RESPONSES: dict[tuple[int, int], type[Any]] = {
    (DescribeTransactionsResponse.__api_key__, 0): DescribeTransactionsResponse,
}
