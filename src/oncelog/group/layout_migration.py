"""Start-up migration of ``__consumer_offsets`` from oncelog's legacy layout to Kafka's.

Legacy and Kafka keys of one offset or group are different bytes, so compaction never lets
one supersede the other: a legacy record would outlive a later Kafka-layout tombstone once
the cleaner drops that tombstone, and come back at the next load. So, once the log is
loaded, every legacy key still holding a value is rewritten: a tombstone for the legacy key,
then the current state (if any) under the Kafka key, in that order, so replaying the log
gives the same state and compaction can drop the legacy records for good.

A legacy offset key whose partition has a pending transactional offset is left as it is:
its tombstone would cancel the pending offset on replay. Its transaction ends (marker or
timeout) before long, and the next start-up migrates it.
"""

from __future__ import annotations

from collections.abc import Mapping

from oncelog.group.core import Registry
from oncelog.group.messages import Out
from oncelog.group.offsets_codec import (
    GroupKey,
    OffsetValue,
    decode_key,
    encode_offset_key,
    encode_offset_value,
)


def maybe_legacy_key(key: bytes) -> bool:
    """Cheap pre-check at load: every legacy key has ``00 00`` right after its type (the
    high half of an ``i32`` length); Kafka keys only when the group name is empty."""
    return key[2:4] == b"\x00\x00" and decode_key(key).legacy


def rewrite_legacy(reg: Registry, live_legacy_keys: Mapping[bytes, bool], out: Out) -> int:
    """Rewrite the legacy keys whose latest record is a value (``True`` in
    ``live_legacy_keys``); returns how many were rewritten."""
    rewritten = 0
    for raw, live in live_legacy_keys.items():
        if not live:
            continue  # already a tombstone: the cleaner will drop it
        key = decode_key(raw)
        group = reg.groups.get(key.group_id)
        partition = reg.partition(key.group_id)
        if isinstance(key, GroupKey):
            out.record(partition, raw, None)
            if group is not None and group.persisted:
                reg.store_group(group, out)
            rewritten += 1
            continue
        tp = (key.topic, key.partition)
        if group is not None and any(tp in p for p in group.pending_txn_offsets.values()):
            continue
        out.record(partition, raw, None)
        committed = None if group is None else group.offsets.get(tp)
        if committed is not None:
            value = OffsetValue(
                committed.offset,
                committed.leader_epoch,
                committed.metadata,
                committed.commit_timestamp_ms,
                committed.expire_timestamp_ms,
            )
            out.record(partition, encode_offset_key(key.group_id, *tp), encode_offset_value(value))
        rewritten += 1
    return rewritten
