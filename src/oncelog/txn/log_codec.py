"""Records of the compacted ``__transaction_state`` topic, in Kafka's layout.

The schemas are Kafka's ``transaction-coordinator/src/main/resources/common/message/``
``TransactionLogKey.json`` and ``TransactionLogValue.json`` (see coordinator/schema_io.py
for the encoding), so Kafka's ``TransactionLogMessageFormatter`` reads what we write.

Key (version 0): ``i16 0 | string TransactionalId``.
Value (we write version 1, the flexible one, for its tagged fields):
  ``i16 1 | i64 ProducerId | i16 ProducerEpoch | i32 TransactionTimeoutMs |
  i8 TransactionStatus | compact array? TransactionPartitions (null when Empty, as Kafka
  writes it) of {compact string Topic | compact array of i32 PartitionIds | tagged} |
  i64 TransactionLastUpdateTimestampMs | i64 TransactionStartTimestampMs | tagged fields``.
  The status ids are Kafka's (``TxnState`` values). Tagged fields: 0 PreviousProducerId
  (our ``last_producer_id``), and oncelog's ``ONCELOG_TAG_BASE`` = last_producer_epoch,
  which Kafka does not persist; we do, so a KIP-360 retry of InitProducerId still works after
  a restart. Transactions v2 (KIP-890) adds Kafka's NextProducerId (1, i64: the id taking
  over after an epoch overflow) and ClientTransactionVersion (2, i16). Two-phase commit
  (KIP-939) adds Kafka's NextProducerEpoch (3, i16: with NextProducerId, the identity handed
  to a producer that kept a prepared transaction); a 2PC transaction itself is marked only
  by TransactionTimeoutMs = Int.MaxValue, as in Kafka. Fields at their default (-1, or 0
  for the version) are left out, as Kafka does.
A ``None`` value is a tombstone: the id expired, and compaction will drop it.

Version-0 values: Kafka's v0 has the same first field as oncelog's pre-Kafka layout
(log_codec_legacy), which also says version 0. We never write v0, so a v0 value is read as
the legacy layout first (what every older oncelog data dir holds) and as Kafka's v0 only if
that strict parse fails. Keys need no such care: the legacy key was already Kafka's.
"""

from __future__ import annotations

import struct
from collections import defaultdict

from oncelog.coordinator.schema_io import (
    ONCELOG_TAG_BASE,
    SchemaReader,
    SchemaWriter,
    pack_i16,
    pack_i64,
    uvarint,
)
from oncelog.txn.log_codec_legacy import decode_legacy_value
from oncelog.txn.log_errors import TxnLogCodecError
from oncelog.txn.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV_0,
    TopicPartition,
    TransactionMetadata,
    TxnState,
)

__all__ = [
    "KEY_VERSION",
    "VALUE_VERSION",
    "TxnLogCodecError",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "is_legacy_value",
]

KEY_VERSION = 0
VALUE_VERSION = 1
PREVIOUS_PRODUCER_ID_TAG = 0
NEXT_PRODUCER_ID_TAG = 1
CLIENT_TRANSACTION_VERSION_TAG = 2
NEXT_PRODUCER_EPOCH_TAG = 3
LAST_PRODUCER_EPOCH_TAG = ONCELOG_TAG_BASE


def encode_key(transactional_id: str) -> bytes:
    w = SchemaWriter(KEY_VERSION)
    try:
        w.string(transactional_id)
    except ValueError as exc:
        raise TxnLogCodecError(str(exc)) from None
    return w.done()


def decode_key(data: bytes) -> str:
    if len(data) >= 4 and data[0] == 0 and data[1] == 0:  # fast path: version 0
        (n,) = _U16.unpack_from(data, 2)
        if 4 + n == len(data):
            try:
                return data[4:].decode("utf-8")
            except UnicodeDecodeError:
                pass  # the schema reader raises its own error
    return decode_key_schema(data)


def decode_key_schema(data: bytes) -> str:
    """``decode_key`` through the strict schema reader only."""
    r = SchemaReader(data, TxnLogCodecError)
    version = r.i16()
    if version != KEY_VERSION:
        raise TxnLogCodecError(f"unknown transaction log key version {version}")
    # Unsigned: the legacy key allowed ids of up to 65535 bytes.
    txn_id = r.text(r.u16())
    r.done()
    return txn_id


def _by_topic(partitions: set[TopicPartition]) -> list[tuple[str, list[int]]]:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in partitions:
        by_topic[topic].append(partition)
    return [(topic, sorted(by_topic[topic])) for topic in sorted(by_topic)]


_VALUE_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, status
_TIMES = struct.Struct(">qq")  # last update, start
_ONE_PARTITION = struct.Struct(">bib")  # compact count 1, partition id, no tagged fields
_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")


def encode_value(meta: TransactionMetadata) -> bytes:
    """The value record (v1). Packed with ``struct`` rather than ``SchemaWriter``: every
    transaction writes three, and the test suite holds the two byte-equal."""
    out = bytearray(
        _VALUE_HEAD.pack(
            VALUE_VERSION,
            meta.producer_id,
            meta.producer_epoch,
            meta.txn_timeout_ms,
            meta.state,
        )
    )
    partitions = meta.partitions
    if not partitions:
        # null when Empty (as Kafka writes it), else an empty array
        out.append(0 if meta.state is TxnState.EMPTY else 1)
    elif len(partitions) == 1:  # the common case: no grouping, no sorting
        ((topic, partition),) = partitions
        name = topic.encode("utf-8")
        out.append(2)  # one topic
        out += uvarint(len(name) + 1)
        out += name
        out += _ONE_PARTITION.pack(2, partition, 0)
    else:
        topics = _by_topic(partitions)
        out += uvarint(len(topics) + 1)
        for topic, parts in topics:
            name = topic.encode("utf-8")
            out += uvarint(len(name) + 1)
            out += name
            out += uvarint(len(parts) + 1)
            for p in parts:
                out += _I32.pack(p)
            out.append(0)
    out += _TIMES.pack(meta.txn_last_update_ms, meta.txn_start_ms)
    # Tagged fields, in increasing tag order.
    tagged: list[tuple[int, bytes]] = []
    if meta.last_producer_id != NO_PRODUCER_ID:
        tagged.append((PREVIOUS_PRODUCER_ID_TAG, pack_i64(meta.last_producer_id)))
    if meta.next_producer_id != NO_PRODUCER_ID:
        tagged.append((NEXT_PRODUCER_ID_TAG, pack_i64(meta.next_producer_id)))
    if meta.client_transaction_version != TV_0:
        tagged.append((CLIENT_TRANSACTION_VERSION_TAG, pack_i16(meta.client_transaction_version)))
    if meta.next_producer_epoch != NO_PRODUCER_EPOCH:
        tagged.append((NEXT_PRODUCER_EPOCH_TAG, pack_i16(meta.next_producer_epoch)))
    if meta.last_producer_epoch != NO_PRODUCER_EPOCH:
        tagged.append((LAST_PRODUCER_EPOCH_TAG, pack_i16(meta.last_producer_epoch)))
    out += uvarint(len(tagged))
    for tag, data in tagged:
        out += uvarint(tag)
        out += uvarint(len(data))
        out += data
    return bytes(out)


def is_legacy_value(data: bytes) -> bool:
    """Is this value in oncelog's legacy layout (the rule ``decode_value`` applies)?"""
    if data[:2] != b"\x00\x00":
        return False
    try:
        decode_legacy_value("", data)
    except TxnLogCodecError:
        return False
    return True


def decode_value(transactional_id: str, data: bytes) -> TransactionMetadata:
    if data[:2] == b"\x00\x01":
        fast = _fast_kafka_value_v1(transactional_id, data)
        if fast is not None:
            return fast
    if data[:2] == b"\x00\x00":
        try:
            return decode_legacy_value(transactional_id, data)
        except TxnLogCodecError:
            pass  # not oncelog's legacy layout: Kafka's v0
    return _decode_kafka_value(transactional_id, data)


def _fast_kafka_value_v1(transactional_id: str, data: bytes) -> TransactionMetadata | None:
    """A v1 value as ``encode_value`` writes it, with ``struct`` and single-byte varints;
    None for anything else (a multi-byte length, a tagged field in a topic entry, a bad
    size or UTF-8, ...): the schema reader then decides, so the outcome is always its."""
    n = len(data)
    if n < _VALUE_HEAD.size + 1 + _TIMES.size + 1:
        return None
    _, pid, epoch, timeout, state_id = _VALUE_HEAD.unpack_from(data, 0)
    try:
        state = TxnState(state_id)
    except ValueError:
        return None
    pos = _VALUE_HEAD.size
    n_topics = data[pos]
    pos += 1
    if n_topics & 0x80:
        return None
    partitions: set[TopicPartition] = set()
    for _ in range(n_topics - 1 if n_topics else 0):
        if pos >= n:
            return None
        length = data[pos]
        end = pos + length  # the name is length - 1 bytes after the length byte
        if length & 0x80 or length == 0 or end >= n:
            return None
        try:
            topic = data[pos + 1 : end].decode("utf-8")
        except UnicodeDecodeError:
            return None
        count = data[end]
        pos = end + 1
        if count & 0x80 or count == 0:
            return None
        ids_end = pos + 4 * (count - 1)
        if ids_end >= n or data[ids_end] != 0:  # no tagged fields in the topic entry
            return None
        partitions.update((topic, p) for (p,) in _I32.iter_unpack(data[pos:ids_end]))
        pos = ids_end + 1
    if pos + _TIMES.size >= n:
        return None
    update, start = _TIMES.unpack_from(data, pos)
    pos += _TIMES.size
    n_tags = data[pos]
    pos += 1
    if n_tags & 0x80:
        return None
    tags: dict[int, bytes] = {}
    last = -1
    for _ in range(n_tags):
        if pos + 1 >= n:
            return None
        tag = data[pos]
        pos += 1
        if tag & 0x80:  # two-byte tags (oncelog's 10000) at most
            tag = (tag & 0x7F) | (data[pos] << 7)
            pos += 1
            if tag >= 1 << 14 or pos >= n:
                return None
        size = data[pos]
        pos += 1
        if tag <= last or size & 0x80 or pos + size > n:
            return None
        last = tag
        tags[tag] = data[pos : pos + size]
        pos += size
    if pos != n:
        return None
    try:
        last_pid = _tag_int(tags, PREVIOUS_PRODUCER_ID_TAG, _I64, NO_PRODUCER_ID)
        last_epoch = _tag_int(tags, LAST_PRODUCER_EPOCH_TAG, _I16, NO_PRODUCER_EPOCH)
        next_pid = _tag_int(tags, NEXT_PRODUCER_ID_TAG, _I64, NO_PRODUCER_ID)
        next_epoch = _tag_int(tags, NEXT_PRODUCER_EPOCH_TAG, _I16, NO_PRODUCER_EPOCH)
        client_tv = _tag_int(tags, CLIENT_TRANSACTION_VERSION_TAG, _I16, TV_0)
    except ValueError:
        return None
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
        next_producer_epoch=next_epoch,
        client_transaction_version=client_tv,
    )


def _tag_int(tags: dict[int, bytes], tag: int, kind: struct.Struct, default: int) -> int:
    raw = tags.get(tag)
    if raw is None:
        return default
    if len(raw) != kind.size:
        raise ValueError(tag)
    value: int = kind.unpack(raw)[0]
    return value


def _decode_kafka_value(transactional_id: str, data: bytes) -> TransactionMetadata:
    r = SchemaReader(data, TxnLogCodecError)
    version = r.i16()
    if version not in (0, 1):
        raise TxnLogCodecError(f"unknown transaction log value version {version}")
    flexible = version == 1
    pid = r.i64()
    epoch = r.i16()
    timeout = r.i32()
    state_id = r.i8()
    try:
        state = TxnState(state_id)
    except ValueError:
        raise TxnLogCodecError(f"unknown transaction state id {state_id}") from None
    partitions: set[TopicPartition] = set()
    n_topics = r.compact_length() if flexible else r.array_length()
    for _ in range(n_topics or 0):
        topic = r.compact_string() if flexible else r.string()
        count = r.compact_length() if flexible else r.array_length()
        if count is None:
            raise TxnLogCodecError("null partition array")
        partitions.update((topic, r.i32()) for _ in range(count))
        if flexible:
            r.tagged()
    update = r.i64()
    start = r.i64()
    last_pid, last_epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
    next_pid, next_epoch, client_tv = NO_PRODUCER_ID, NO_PRODUCER_EPOCH, TV_0
    if flexible:
        tagged = r.tagged()
        last_pid = r.tagged_i64(tagged, PREVIOUS_PRODUCER_ID_TAG, NO_PRODUCER_ID)
        last_epoch = r.tagged_i16(tagged, LAST_PRODUCER_EPOCH_TAG, NO_PRODUCER_EPOCH)
        next_pid = r.tagged_i64(tagged, NEXT_PRODUCER_ID_TAG, NO_PRODUCER_ID)
        next_epoch = r.tagged_i16(tagged, NEXT_PRODUCER_EPOCH_TAG, NO_PRODUCER_EPOCH)
        client_tv = r.tagged_i16(tagged, CLIENT_TRANSACTION_VERSION_TAG, TV_0)
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
        next_producer_id=next_pid,
        next_producer_epoch=next_epoch,
        client_transaction_version=client_tv,
    )
