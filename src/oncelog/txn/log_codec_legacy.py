"""Decoder for oncelog's own ``__transaction_state`` value layout, written before the Kafka
layout (log_codec): data dirs from older oncelog versions still hold such values. (The key
layout was already Kafka's: ``i16 0 | i16 length | utf-8 id``.)

Value (version 0): ``i16 0 | i64 producer_id | i64 last_producer_id | i16 producer_epoch |
    i16 last_producer_epoch | i32 txn_timeout_ms | i8 state | i64 txn_start_ms |
    i64 txn_last_update_ms | i32 topic count | per topic: u16 length | utf-8 name |
    i32 partition count | i32 partition...``
Strict: an unknown state, a short buffer or trailing bytes raise ``TxnLogCodecError``.
"""

from __future__ import annotations

from oncelog.coordinator.schema_io import SchemaReader
from oncelog.txn.log_errors import TxnLogCodecError
from oncelog.txn.metadata import TopicPartition, TransactionMetadata, TxnState

LEGACY_VALUE_VERSION = 0


def decode_legacy_value(transactional_id: str, data: bytes) -> TransactionMetadata:
    r = SchemaReader(data, TxnLogCodecError)
    version = r.i16()
    if version != LEGACY_VALUE_VERSION:
        raise TxnLogCodecError(f"unknown legacy transaction log value version {version}")
    pid, last_pid = r.i64(), r.i64()
    epoch, last_epoch = r.i16(), r.i16()
    timeout = r.i32()
    state_id = r.i8()
    try:
        state = TxnState(state_id)
    except ValueError:
        raise TxnLogCodecError(f"unknown transaction state id {state_id}") from None
    start, update = r.i64(), r.i64()
    partitions: set[TopicPartition] = set()
    for _ in range(r.i32()):
        topic = r.text(r.u16())
        count = r.i32()
        if count < 0:
            raise TxnLogCodecError("negative partition count")
        partitions.update((topic, r.i32()) for _ in range(count))
    r.done()
    return TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=pid,
        last_producer_id=last_pid,
        producer_epoch=epoch,
        last_producer_epoch=last_epoch,
        txn_timeout_ms=timeout,
        state=state,
        partitions=partitions,
        txn_start_ms=start,
        txn_last_update_ms=update,
    )
