"""Consumer group APIs (classic protocol), offsets and TxnOffsetCommit (KIP-98, KIP-447)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from oncelog.broker.server import RequestContext
from oncelog.group import messages as gm
from oncelog.protocol.api_keys import GROUP_API_VERSIONS, ApiKey
from oncelog.protocol.messages import make

if TYPE_CHECKING:
    from oncelog.broker.broker import Broker


def _ms(td: Any) -> int:
    return int(td.total_seconds() * 1000)


async def join_group(ctx: RequestContext, req: Any) -> Any:
    groups = ctx.broker.groups
    session = _ms(req.session_timeout)
    rebalance = _ms(req.rebalance_timeout) if hasattr(req, "rebalance_timeout") else -1
    reply = await groups.join(
        gm.JoinGroupRequest(
            group_id=req.group_id,
            member_id=req.member_id,
            protocol_type=req.protocol_type,
            protocols=tuple((p.name, p.metadata) for p in req.protocols),
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            group_instance_id=getattr(req, "group_instance_id", None),
            client_id=ctx.header.client_id or "",
            client_host="/" + ctx.peer.rpartition(":")[0],
            api_version=ctx.version,
            reason=getattr(req, "reason", None),
        )
    )
    r = ctx.response
    protocol_name = reply.protocol_name
    if protocol_name is None and ctx.version < 7:
        protocol_name = ""
    return make(
        r.JoinGroupResponse,
        error_code=reply.error,
        generation_id=reply.generation_id,
        protocol_type=reply.protocol_type,
        protocol_name=protocol_name,
        leader=reply.leader,
        skip_assignment=reply.skip_assignment,
        member_id=reply.member_id,
        members=tuple(make(r.JoinGroupResponseMember, member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata) for m in reply.members),
    )


async def sync_group(ctx: RequestContext, req: Any) -> Any:
    groups = ctx.broker.groups
    reply = await groups.sync(
        gm.SyncGroupRequest(
            group_id=req.group_id,
            generation_id=req.generation_id,
            member_id=req.member_id,
            group_instance_id=getattr(req, "group_instance_id", None),
            protocol_type=getattr(req, "protocol_type", None),
            protocol_name=getattr(req, "protocol_name", None),
            assignments=tuple((a.member_id, a.assignment) for a in req.assignments),
        )
    )
    return make(ctx.response.SyncGroupResponse, error_code=reply.error, protocol_type=reply.protocol_type, protocol_name=reply.protocol_name, assignment=reply.assignment)


async def heartbeat(ctx: RequestContext, req: Any) -> Any:
    groups = ctx.broker.groups
    reply = await groups.heartbeat(gm.HeartbeatRequest(req.group_id, req.generation_id, req.member_id, getattr(req, "group_instance_id", None)))
    return make(ctx.response.HeartbeatResponse, error_code=reply.error)


async def leave_group(ctx: RequestContext, req: Any) -> Any:
    groups = ctx.broker.groups
    r = ctx.response
    if hasattr(req, "members"):
        members = tuple(gm.LeaveMember(m.member_id, m.group_instance_id, getattr(m, "reason", None)) for m in req.members)
    else:
        members = (gm.LeaveMember(req.member_id),)
    reply = await groups.leave(gm.LeaveGroupRequest(req.group_id, members))
    if not hasattr(r, "MemberResponse"):  # v0-v2: one error
        error = reply.error if reply.error != ErrorCode.none or not reply.members else reply.members[0].error
        return make(r.LeaveGroupResponse, error_code=error)
    return make(
        r.LeaveGroupResponse,
        error_code=reply.error,
        members=tuple(make(r.MemberResponse, member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=m.error) for m in reply.members),
    )


def _commit_topics(req: Any) -> tuple[tuple[str, tuple[gm.CommitPartition, ...]], ...]:
    return tuple(
        (
            t.name,
            tuple(
                gm.CommitPartition(p.partition_index, p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
                for p in t.partitions
            ),
        )
        for t in req.topics
    )


def _commit_response(r: Any, prefix: str, reply: gm.CommitReply) -> Any:
    topic_cls = getattr(r, f"{prefix}ResponseTopic")
    part_cls = getattr(r, f"{prefix}ResponsePartition")
    return make(
        getattr(r, f"{prefix}Response"),
        topics=tuple(make(topic_cls, name=t, partitions=tuple(make(part_cls, partition_index=p, error_code=e) for p, e in parts)) for t, parts in reply.topics),
    )


async def offset_commit(ctx: RequestContext, req: Any) -> Any:
    groups = ctx.broker.groups
    generation = getattr(req, "generation_id_or_member_epoch", getattr(req, "generation_id", -1))
    reply = await groups.commit_offsets(
        gm.OffsetCommitRequest(
            group_id=req.group_id,
            topics=_commit_topics(req),
            generation_id=generation,
            member_id=getattr(req, "member_id", ""),
            group_instance_id=getattr(req, "group_instance_id", None),
            retention_time_ms=_ms(req.retention_time) if hasattr(req, "retention_time") else -1,
            api_version=ctx.version,
        )
    )
    return _commit_response(ctx.response, "OffsetCommit", reply)


async def txn_offset_commit(ctx: RequestContext, req: Any) -> Any:
    groups = ctx.broker.groups
    topics = _commit_topics(req)
    reply = await groups.txn_commit_offsets(
        gm.TxnOffsetCommitRequest(
            transactional_id=req.transactional_id,
            group_id=req.group_id,
            producer_id=req.producer_id,
            producer_epoch=req.producer_epoch,
            topics=topics,
            generation_id=getattr(req, "generation_id", -1),
            member_id=getattr(req, "member_id", ""),
            group_instance_id=getattr(req, "group_instance_id", None),
        ),
        fenced=ErrorCode.producer_fenced if ctx.version >= 2 else ErrorCode.invalid_producer_epoch,
    )
    return _commit_response(ctx.response, "TxnOffsetCommit", reply)


def _fetch_one(ctx: RequestContext, group_id: str, topics: Any, require_stable: bool) -> gm.OffsetFetchReply:
    wanted = None if topics is None else tuple((t.name, tuple(t.partition_indexes)) for t in topics)
    return ctx.broker.groups.fetch_offsets(gm.OffsetFetchRequest(group_id, wanted, require_stable))


def offset_fetch(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    if hasattr(req, "groups"):  # v8+: several groups
        out = []
        for g in req.groups:
            reply = _fetch_one(ctx, g.group_id, g.topics, req.require_stable)
            out.append(
                make(
                    r.OffsetFetchResponseGroup,
                    group_id=g.group_id,
                    error_code=reply.error,
                    topics=tuple(
                        make(r.OffsetFetchResponseTopics, name=t, partitions=tuple(
                            make(r.OffsetFetchResponsePartitions, partition_index=p.partition, committed_offset=p.offset, committed_leader_epoch=p.leader_epoch, metadata=p.metadata, error_code=p.error)
                            for p in parts))
                        for t, parts in reply.topics
                    ),
                )
            )
        return make(r.OffsetFetchResponse, groups=tuple(out))
    reply = _fetch_one(ctx, req.group_id, req.topics, getattr(req, "require_stable", False))
    return make(
        r.OffsetFetchResponse,
        error_code=reply.error,
        topics=tuple(
            make(r.OffsetFetchResponseTopic, name=t, partitions=tuple(
                make(r.OffsetFetchResponsePartition, partition_index=p.partition, committed_offset=p.offset, committed_leader_epoch=p.leader_epoch, metadata=p.metadata, error_code=p.error)
                for p in parts))
            for t, parts in reply.topics
        ),
    )


def list_groups(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    reply = ctx.broker.groups.list_groups(getattr(req, "states_filter", ()), getattr(req, "types_filter", ()))
    return make(
        r.ListGroupsResponse,
        error_code=reply.error,
        groups=tuple(make(r.ListedGroup, group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state, group_type=g.group_type) for g in reply.groups),
    )


def describe_groups(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    described = ctx.broker.groups.describe_groups(req.groups, ctx.version)
    return make(
        r.DescribeGroupsResponse,
        groups=tuple(
            make(
                r.DescribedGroup,
                error_code=g.error,
                group_id=g.group_id,
                group_state=g.state,
                protocol_type=g.protocol_type,
                protocol_data=g.protocol_data,
                members=tuple(
                    make(r.DescribedGroupMember, member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                         client_host=m.client_host, member_metadata=m.metadata, member_assignment=m.assignment)
                    for m in g.members
                ),
                authorized_operations=-(2**31),
            )
            for g in described
        ),
    )


async def delete_groups(ctx: RequestContext, req: Any) -> Any:
    groups = ctx.broker.groups
    r = ctx.response
    reply = await groups.delete_groups(req.groups_names)
    return make(r.DeleteGroupsResponse, results=tuple(make(r.DeletableGroupResult, group_id=g, error_code=e) for g, e in reply.results))


async def offset_delete(ctx: RequestContext, req: Any) -> Any:
    groups = ctx.broker.groups
    r = ctx.response
    reply = await groups.delete_offsets(
        gm.OffsetDeleteRequest(req.group_id, tuple((t.name, tuple(p.partition_index for p in t.partitions)) for t in req.topics))
    )
    return make(
        r.OffsetDeleteResponse,
        error_code=reply.error,
        topics=tuple(
            make(r.OffsetDeleteResponseTopic, name=t, partitions=tuple(make(r.OffsetDeleteResponsePartition, partition_index=p, error_code=e) for p, e in parts))
            for t, parts in reply.topics
        ),
    )


def register(broker: Broker) -> None:
    v = GROUP_API_VERSIONS
    for key, handler in (
        (ApiKey.JOIN_GROUP, join_group),
        (ApiKey.SYNC_GROUP, sync_group),
        (ApiKey.HEARTBEAT, heartbeat),
        (ApiKey.LEAVE_GROUP, leave_group),
        (ApiKey.OFFSET_COMMIT, offset_commit),
        (ApiKey.OFFSET_FETCH, offset_fetch),
        (ApiKey.TXN_OFFSET_COMMIT, txn_offset_commit),
        (ApiKey.LIST_GROUPS, list_groups),
        (ApiKey.DESCRIBE_GROUPS, describe_groups),
        (ApiKey.DELETE_GROUPS, delete_groups),
        (ApiKey.OFFSET_DELETE, offset_delete),
    ):
        broker.register(key, v[key], handler)
