"""Encoders of oncelog's pre-Kafka internal-topic layouts, kept (from the codecs as they were
before the Kafka layouts, commit 49d181e) only to build old data dirs in tests. The broker
itself only decodes them: see oncelog.group.offsets_codec_legacy and
oncelog.txn.log_codec_legacy."""

from __future__ import annotations

import struct
from collections import defaultdict

from oncelog.group.offsets_records import GroupValue, OffsetValue
from oncelog.txn.metadata import TransactionMetadata

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_TXN_HEAD = struct.Struct(">hqqhhibqqi")


def _string(s: str | None) -> bytes:
    if s is None:
        return _I32.pack(-1)
    data = s.encode("utf-8")
    return _I32.pack(len(data)) + data


def _raw(b: bytes) -> bytes:
    return _I32.pack(len(b)) + b


def legacy_offset_key(group_id: str, topic: str, partition: int) -> bytes:
    return _I16.pack(1) + _string(group_id) + _string(topic) + _I32.pack(partition)


def legacy_group_key(group_id: str) -> bytes:
    return _I16.pack(2) + _string(group_id)


def legacy_offset_value(v: OffsetValue) -> bytes:
    expire = -1 if v.expire_timestamp_ms is None else v.expire_timestamp_ms
    return (
        _I16.pack(1)
        + struct.pack(">qi", v.offset, v.leader_epoch)
        + _string(v.metadata)
        + struct.pack(">qq", v.commit_timestamp_ms, expire)
    )


def legacy_group_value(v: GroupValue) -> bytes:
    out = bytearray(_I16.pack(1))
    out += _string(v.protocol_type) + _I32.pack(v.generation_id)
    out += _string(v.protocol_name) + _string(v.leader_id)
    out += _I64.pack(-1 if v.state_timestamp_ms is None else v.state_timestamp_ms)
    out += _I32.pack(len(v.members))
    for m in v.members:
        out += _string(m.member_id) + _string(m.group_instance_id)
        out += _string(m.client_id) + _string(m.client_host)
        out += struct.pack(">ii", m.rebalance_timeout_ms, m.session_timeout_ms)
        out += _raw(m.subscription) + _raw(m.assignment)
    return bytes(out)


def legacy_txn_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    return _I16.pack(0) + _U16.pack(len(raw)) + raw


def legacy_txn_value(meta: TransactionMetadata) -> bytes:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in meta.partitions:
        by_topic[topic].append(partition)
    out = [
        _TXN_HEAD.pack(
            0,
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
    return b"".join(out)
