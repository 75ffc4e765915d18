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

import struct

from oncelog.txn.log_errors import TxnLogCodecError
from oncelog.txn.metadata import TopicPartition, TransactionMetadata, TxnState

LEGACY_VALUE_VERSION = 0

_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">hqqhhibqqi")


def decode_legacy_value(transactional_id: str, data: bytes) -> TransactionMetadata:
    try:
        (version, pid, last_pid, epoch, last_epoch, timeout, state_id, start, update, n_topics) = (
            _HEAD.unpack_from(data, 0)
        )
        if version != LEGACY_VALUE_VERSION:
            raise TxnLogCodecError(f"unknown legacy transaction log value version {version}")
        try:
            state = TxnState(state_id)
        except ValueError:
            raise TxnLogCodecError(f"unknown transaction state id {state_id}") from None
        pos = _HEAD.size
        partitions: set[TopicPartition] = set()
        for _ in range(n_topics):
            (n,) = _U16.unpack_from(data, pos)
            if pos + 2 + n > len(data):
                raise TxnLogCodecError("truncated topic name")
            topic = bytes(data[pos + 2 : pos + 2 + n]).decode()
            pos += 2 + n
            (count,) = _I32.unpack_from(data, pos)
            pos += 4
            if count < 0:
                raise TxnLogCodecError("negative partition count")
            partitions.update((topic, p) for p in struct.unpack_from(f">{count}i", data, pos))
            pos += 4 * count
        if pos != len(data):
            raise TxnLogCodecError("trailing bytes after transaction log value")
    except (struct.error, UnicodeDecodeError) as e:
        raise TxnLogCodecError(f"malformed transaction log value: {e}") from e
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
