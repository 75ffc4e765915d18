"""Records of the compacted ``__transaction_state`` topic (our own layout, not Kafka's).

Key   (version 0): ``i16 version | u16 length | utf-8 transactional id``
Value (version 0): ``i16 version | i64 producer_id | i64 last_producer_id | i16 producer_epoch |
    i16 last_producer_epoch | i32 txn_timeout_ms | i8 state | i64 txn_start_ms |
    i64 txn_last_update_ms | i32 topic count | per topic (sorted): u16 length | utf-8 name |
    i32 partition count | i32 partition...(sorted)``
Value (version 1, transaction version 2): version 0's fields, then ``i64 next_producer_id |
    i8 client_transaction_version``. Written only when one of them is not its default, so a
    TV1 transaction's records stay version 0.
A ``None`` value is a tombstone: the id expired, and compaction will drop it.

Unlike Kafka's value schema we persist ``last_producer_id``/``last_producer_epoch`` always, so a
KIP-360 retry of InitProducerId still works after a broker restart. Every version is checked
strictly (unknown version, unknown state or trailing bytes raise ``TxnLogCodecError``).
"""

from __future__ import annotations

import struct
from collections import defaultdict

from oncelog.txn.metadata import (
    NO_PRODUCER_ID,
    TV_0,
    TopicPartition,
    TransactionMetadata,
    TxnState,
)

KEY_VERSION = 0
VALUE_VERSION = 0
VALUE_VERSION_TV2 = 1

_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">hqqhhibqqi")
_TV2_TAIL = struct.Struct(">qb")


class TxnLogCodecError(ValueError):
    pass


def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    if len(raw) > 0xFFFF:
        raise TxnLogCodecError("transactional id longer than 65535 bytes")
    return _I16.pack(KEY_VERSION) + _U16.pack(len(raw)) + raw


def decode_key(data: bytes) -> str:
    try:
        (version,) = _I16.unpack_from(data, 0)
        if version != KEY_VERSION:
            raise TxnLogCodecError(f"unknown transaction log key version {version}")
        (n,) = _U16.unpack_from(data, 2)
        if len(data) != 4 + n:
            raise TxnLogCodecError("transaction log key has a bad length")
        return bytes(data[4:]).decode()
    except (struct.error, UnicodeDecodeError) as e:
        raise TxnLogCodecError(f"malformed transaction log key: {e}") from e


def encode_value(meta: TransactionMetadata) -> bytes:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in meta.partitions:
        by_topic[topic].append(partition)
    tv2 = meta.next_producer_id != NO_PRODUCER_ID or meta.client_transaction_version != TV_0
    out = [
        _HEAD.pack(
            VALUE_VERSION_TV2 if tv2 else VALUE_VERSION,
            meta.producer_id,
            meta.last_producer_id,
            meta.producer_epoch,
            meta.last_producer_epoch,
            meta.txn_timeout_ms,
            int(meta.state),
            meta.txn_start_ms,
            meta.txn_last_update_ms,
            len(by_topic),
        )
    ]
    for topic in sorted(by_topic):
        name = topic.encode()
        parts = sorted(by_topic[topic])
        out.append(_U16.pack(len(name)) + name + _I32.pack(len(parts)))
        out.append(struct.pack(f">{len(parts)}i", *parts))
    if tv2:
        out.append(_TV2_TAIL.pack(meta.next_producer_id, meta.client_transaction_version))
    return b"".join(out)


def decode_value(transactional_id: str, data: bytes) -> TransactionMetadata:
    try:
        (version,) = _I16.unpack_from(data, 0)
        if version not in (VALUE_VERSION, VALUE_VERSION_TV2):
            raise TxnLogCodecError(f"unknown transaction log value version {version}")
        (_, pid, last_pid, epoch, last_epoch, timeout, state_id, start, update, n_topics) = (
            _HEAD.unpack_from(data, 0)
        )
        try:
            state = TxnState(state_id)
        except ValueError:
            raise TxnLogCodecError(f"unknown transaction state id {state_id}") from None
        pos = _HEAD.size
        partitions: set[TopicPartition] = set()
        for _ in range(n_topics):
            (n,) = _U16.unpack_from(data, pos)
            topic = bytes(data[pos + 2 : pos + 2 + n]).decode()
            pos += 2 + n
            (count,) = _I32.unpack_from(data, pos)
            pos += 4
            if count < 0:
                raise TxnLogCodecError("negative partition count")
            partitions.update((topic, p) for p in struct.unpack_from(f">{count}i", data, pos))
            pos += 4 * count
        next_pid, client_tv = NO_PRODUCER_ID, TV_0
        if version == VALUE_VERSION_TV2:
            next_pid, client_tv = _TV2_TAIL.unpack_from(data, pos)
            pos += _TV2_TAIL.size
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
        next_producer_id=next_pid,
        client_transaction_version=client_tv,
    )
