"""Shared state of the group coordinator: the groups, record writing and offset replay.

Every change to committed or pending offsets, live or during load, goes through
``apply_offset``, so a coordinator rebuilt from the log ends in the same offset state.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable

from oncelog.coordinator.internal_topics import DEFAULT_INTERNAL_PARTITIONS
from oncelog.coordinator.placement import partition_for as placement_partition_for
from oncelog.group.config import GroupConfig
from oncelog.group.consumer_records import group_records
from oncelog.group.messages import Out
from oncelog.group.offsets_codec import (
    GroupValue,
    MemberValue,
    OffsetValue,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from oncelog.group.state import CommittedOffset, Group, GroupState

# Process-wide, so tokens of an abandoned coordinator never collide with its successor's.
_TOKENS = itertools.count(1)


def partition_for(group_id: str, n: int = DEFAULT_INTERNAL_PARTITIONS) -> int:
    """The ``__consumer_offsets`` partition of a group: Kafka's ``Utils.abs(hashCode) % n``,
    the same formula the transaction coordinator uses for AddOffsetsToTxn."""
    return placement_partition_for(group_id, n)


class Registry:
    def __init__(self, config: GroupConfig, member_id_suffix: Callable[[], str] | None) -> None:
        self.config = config
        self.groups: dict[str, Group] = {}
        self.txn_groups: dict[int, set[str]] = {}  # producer id -> groups with pending offsets
        self._suffix = member_id_suffix or (lambda: str(uuid.uuid4()))
        self._seq = 0

    def partition(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def new_member_id(self, client_id: str) -> str:
        return f"{client_id}-{self._suffix()}"

    def new_token(self) -> int:
        return next(_TOKENS)

    def get_or_create(self, group_id: str, now_ms: int | None) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id, state_timestamp_ms=now_ms)
        return group

    # -- records --------------------------------------------------------------------------

    def store_group(self, group: Group, out: Out) -> None:
        """Write the group's metadata record (Kafka's storeGroup)."""
        members: tuple[MemberValue, ...] = ()
        if group.members and group.protocol_name is not None:
            proto = group.protocol_name
            members = tuple(
                MemberValue(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(proto),
                    m.assignment,
                )
                for m in group.members.values()
            )
        value = GroupValue(
            group.protocol_type,
            group.generation_id,
            group.protocol_name,
            group.leader_id,
            group.state_timestamp_ms,
            members,
        )
        gid = group.group_id
        out.record(self.partition(gid), encode_group_key(gid), encode_group_value(value))
        group.persisted = True

    def write_offset(
        self,
        group: Group,
        topic: str,
        partition: int,
        value: OffsetValue | None,
        out: Out,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> None:
        gid = group.group_id
        out.record(
            self.partition(gid),
            encode_offset_key(gid, topic, partition),
            None if value is None else encode_offset_value(value),
            producer_id,
            producer_epoch,
        )
        self.apply_offset(group, topic, partition, value, producer_id)

    def apply_offset(
        self, group: Group, topic: str, partition: int, value: OffsetValue | None, producer_id: int
    ) -> None:
        """One offset record, in log order. A transactional one stays pending until its
        producer's marker; a tombstone also drops pending offsets for the partition."""
        tp = (topic, partition)
        if value is None:
            group.offsets.pop(tp, None)
            for pid, pending in list(group.pending_txn_offsets.items()):
                pending.pop(tp, None)
                if not pending:
                    self._drop_pending(group, pid)
            return
        self._seq += 1
        committed = CommittedOffset(
            value.offset,
            value.leader_epoch,
            value.metadata,
            value.commit_timestamp_ms,
            value.expire_timestamp_ms,
            self._seq,
        )
        if producer_id < 0:
            group.offsets[tp] = committed
        else:
            group.pending_txn_offsets.setdefault(producer_id, {})[tp] = committed
            self.txn_groups.setdefault(producer_id, set()).add(group.group_id)

    def complete_txn(self, producer_id: int, commit: bool, partition: int | None) -> None:
        """A COMMIT/ABORT marker of ``producer_id`` in ``partition`` (None: all partitions)."""
        gids = self.txn_groups.get(producer_id)
        if not gids:
            return
        for gid in list(gids):
            if partition is not None and self.partition(gid) != partition:
                continue
            gids.discard(gid)
            group = self.groups.get(gid)
            pending = None if group is None else group.pending_txn_offsets.pop(producer_id, None)
            if group is None or not pending or not commit:
                continue
            for tp, offset in pending.items():
                current = group.offsets.get(tp)
                if current is None or current.seq < offset.seq:
                    group.offsets[tp] = offset
        if not gids:
            del self.txn_groups[producer_id]

    def _drop_pending(self, group: Group, producer_id: int) -> None:
        group.pending_txn_offsets.pop(producer_id, None)
        gids = self.txn_groups.get(producer_id)
        if gids is not None:
            gids.discard(group.group_id)
            if not gids:
                del self.txn_groups[producer_id]

    def store_consumer_group(self, group: Group, out: Out, *, gone: bool = False) -> None:
        """Write the records of a consumer-protocol group that changed since last time,
        and tombstones for those that are gone (all of them once it is no longer one)."""
        cg = group.consumer
        if cg is None:
            return
        current = {} if gone else group_records(cg)
        partition = self.partition(group.group_id)
        for key in cg.written:
            if key not in current:
                out.record(partition, key, None)
        for key, value in current.items():
            if cg.written.get(key) != value:
                out.record(partition, key, value)
        cg.written = current

    def delete_group(self, group: Group, out: Out) -> None:
        """Tombstone every offset (committed or pending) and the group, then forget it."""
        self.store_consumer_group(group, out, gone=True)
        tps = set(group.offsets)
        for pending in group.pending_txn_offsets.values():
            tps.update(pending)
        for topic, partition in sorted(tps):
            self.write_offset(group, topic, partition, None, out)
        if group.persisted:
            gid = group.group_id
            out.record(self.partition(gid), encode_group_key(gid), None)
        self.forget(group)

    def forget(self, group: Group) -> None:
        for pid in list(group.pending_txn_offsets):
            self._drop_pending(group, pid)
        group.state = GroupState.DEAD
        self.groups.pop(group.group_id, None)
