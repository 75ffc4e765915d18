"""Fetch (API 1): byte ranges straight from segment files, long polling, sessions.

From v13 (KIP-516) topics are named by id: each id is resolved to its topic on every
read, so an id no topic has (deleted, or never existed) answers UNKNOWN_TOPIC_ID per
partition, as Kafka's KafkaApis does. v15 (KIP-903 replica state) and v17 (KIP-853
directory id) only add follower fields; v16 (KIP-951) adds the current leader and node
endpoints, which Kafka fills only for NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH,
errors a single-node broker whose leader epoch is 0 never returns.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res
from oncelog.broker.apis.fetch_response import FetchAnswer, PartitionResult, TopicResults
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.apis.wire_values import READ_COMMITTED, ZERO_UUID
from oncelog.broker.fetch_sessions import FetchSession, FetchSessionError, PartitionKey
from oncelog.broker.request import RequestContext
from oncelog.pread import NotCachedError
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make
from oncelog.protocol.response_frame import FileRange
from oncelog.storage.unified_log import OffsetOutOfRangeError

if TYPE_CHECKING:
    from oncelog.broker.broker import Broker


TOPIC_IDS_VERSION = 13


def read_partition(
    broker: Broker,
    key: PartitionKey,
    name: str | None,
    offset: int,
    max_bytes: int,
    *,
    committed: bool,
    min_one: bool,
    leader_epoch: int,
    cached_only: bool = False,
) -> PartitionResult:
    if name is None:
        return PartitionResult(key, ErrorCode.unknown_topic_id)
    part = broker.topics.partition(name, key[1])
    if part is None:
        return PartitionResult(key, ErrorCode.unknown_topic_or_partition)
    if leader_epoch > 0:
        return PartitionResult(key, ErrorCode.unknown_leader_epoch)
    hw, lso, start = part.high_watermark, part.last_stable_offset, part.log_start_offset
    result = PartitionResult(key, ErrorCode.none, hw, lso, start, aborted=() if committed else None)
    bound = lso if committed else hw
    try:
        data = part.read(
            offset, max_bytes, max_offset=bound, min_one=min_one, cached_only=cached_only
        )
    except OffsetOutOfRangeError:
        result.error_code = ErrorCode.offset_out_of_range
        return result
    if data is not None:
        # The range is sent from the file as it is (never read into Python here): a
        # duplicate descriptor keeps it readable even if the segment is deleted meanwhile.
        result.records = FileRange(data.fd, data.position, data.length)
        if committed:
            result.aborted = tuple(part.aborted_transactions(offset, bound))
    return result


def _topic_name(broker: Broker, ref: str | uuid.UUID) -> str | None:
    """The topic a request names: a name as is, an id by lookup (None: no such id)."""
    if isinstance(ref, str):
        return ref
    topic = broker.topics.by_id.get(ref)
    return None if topic is None else topic.name


def _fetch_all(
    broker: Broker,
    wanted: list[tuple[PartitionKey, int, int, int]],
    max_bytes: int,
    committed: bool,
    cached_only: bool = False,
) -> tuple[list[PartitionResult], int]:
    results: list[PartitionResult] = []
    remaining = max_bytes
    total = 0
    try:
        for key, offset, part_max, epoch in wanted:
            res = read_partition(
                broker,
                key,
                _topic_name(broker, key[0]),
                offset,
                min(part_max, max(remaining, 0)),
                committed=committed,
                min_one=total == 0,
                leader_epoch=epoch,
                cached_only=cached_only,
            )
            size = res.size
            total += size
            remaining -= size
            results.append(res)
    except NotCachedError:
        _release(results)
        raise
    return results, total


# Pieces a cold fetch may bring in one by one before it just reads the blocking way.
MAX_WARM_ROUNDS = 16


def _fetch_all_cold(
    broker: Broker,
    wanted: list[tuple[PartitionKey, int, int, int]],
    max_bytes: int,
    committed: bool,
) -> tuple[list[PartitionResult], int]:
    """``_fetch_all`` in a page-read thread: each missing piece is read in *outside* the
    log's lock, so an append to the same partition never waits behind the disk; the
    plan itself is then made on cached pages (retried until it is)."""
    for _ in range(MAX_WARM_ROUNDS):
        try:
            return _fetch_all(broker, wanted, max_bytes, committed, cached_only=True)
        except NotCachedError as exc:
            if not exc.warm():
                break  # an index to load: that happens under the lock, once per segment
    return _fetch_all(broker, wanted, max_bytes, committed)


async def _read_all(
    broker: Broker,
    wanted: list[tuple[PartitionKey, int, int, int]],
    max_bytes: int,
    committed: bool,
) -> tuple[list[PartitionResult], int]:
    """``_fetch_all`` on the loop if every index and batch header it needs is in the
    page cache (nearly always), else in a page-read thread: a cold segment's header
    reads would otherwise hold every client while the disk seeks. The log's methods
    take its lock, so they are safe to call from that thread."""
    try:
        return _fetch_all(broker, wanted, max_bytes, committed, cached_only=True)
    except NotCachedError:
        pass
    broker.stats.fetch_cold_plans += 1
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(
        broker.page_warmer.executor, _fetch_all_cold, broker, wanted, max_bytes, committed
    )


def _release(results: list[PartitionResult]) -> None:
    """Close the duplicated descriptors of results that will not be sent."""
    for res in results:
        if res.records is not None:
            res.records.close()


async def _parked(broker: Broker, keys: list[tuple[str, int]], timeout: float) -> bool:
    """Wait for an append to one of ``keys``: the fetch purgatory, counted for metrics."""
    broker.stats.fetch_waiting += 1
    try:
        return await broker.notifier.wait(keys, timeout)
    finally:
        broker.stats.fetch_waiting -= 1


async def fetch(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    r = ctx.response
    committed = getattr(req, "isolation_level", 0) == READ_COMMITTED
    by_ids = ctx.version >= TOPIC_IDS_VERSION
    max_bytes = min(getattr(req, "max_bytes", 2**31 - 1), broker.config.settings.fetch_max_bytes)
    epochs: dict[PartitionKey, int] = {}
    requested = []
    unreadable: list[PartitionKey] = []  # answered TOPIC_AUTHORIZATION_FAILED, never read
    for t in req.topics:
        # kio decodes the all-zero id as None: keep it a UUID (answered UNKNOWN_TOPIC_ID)
        ref = (t.topic_id or ZERO_UUID) if by_ids else t.topic
        name = _topic_name(broker, ref)
        # An unknown id is answered UNKNOWN_TOPIC_ID (by read_partition), before any ACL.
        readable = name is None or ctx.authorized(Op.READ, Res.TOPIC, name)
        for p in t.partitions:
            key: PartitionKey = (ref, p.partition)
            if not readable:
                unreadable.append(key)
                continue
            epochs[key] = getattr(p, "current_leader_epoch", -1)
            requested.append((key, p.fetch_offset, p.partition_max_bytes))
    forgotten: list[PartitionKey] = [
        ((t.topic_id or ZERO_UUID) if by_ids else t.topic, p)
        for t in getattr(req, "forgotten_topics_data", ())
        for p in t.partitions
    ]
    session: FetchSession | None = None
    try:
        session, to_fetch = broker.fetch_sessions.resolve(
            getattr(req, "session_id", 0),
            getattr(req, "session_epoch", -1),
            requested,
            forgotten,
            uses_topic_ids=by_ids,
            owner=(ctx.session.principal, ctx.session.listener),
        )
    except FetchSessionError as exc:
        return make(r.FetchResponse, error_code=exc.code, session_id=0, responses=())
    if session is not None and req.session_epoch > 0 and broker.authorizer.enabled:
        # Every session partition is authorized again on every fetch (Kafka's
        # IncrementalFetchContext): a READ revoked since the session began stops it.
        refused = {k for k, _, _ in to_fetch if k not in epochs and not _readable(ctx, k[0])}
        unreadable.extend(sorted(refused - set(unreadable), key=str))
        to_fetch = [entry for entry in to_fetch if entry[0] not in refused]
    wanted = [(k, off, mb, epochs.get(k, -1)) for k, off, mb in to_fetch]
    deadline = time.monotonic() + req.max_wait.total_seconds()
    while True:
        results, total = await _read_all(broker, wanted, max_bytes, committed)
        if total >= req.min_bytes or any(x.error_code != ErrorCode.none for x in results):
            break
        _release(results)  # below min_bytes: these ranges are read again after the wait
        left = deadline - time.monotonic()
        if left <= 0 or not await _parked(broker, _append_keys(broker, wanted), left):
            results, total = await _read_all(broker, wanted, max_bytes, committed)
            break
    bytes_out = broker.stats.bytes_out
    for res in results:
        if res.size:
            name = _topic_name(broker, res.key[0])  # v13+: the key holds the topic id
            if name is not None:
                bytes_out[name] += res.size
    incremental = session is not None and req.session_epoch > 0
    by_topic: dict[str | uuid.UUID, list[PartitionResult]] = {}
    for res in results:
        if session is not None:
            changed = session.changed(
                res.key,
                res.high_watermark,
                res.last_stable_offset,
                res.log_start_offset,
                res.size > 0,
                res.error_code,
            )
            if incremental and not changed:
                continue
        by_topic.setdefault(res.key[0], []).append(res)
    for key in unreadable:
        by_topic.setdefault(key[0], []).append(
            PartitionResult(key, ErrorCode.topic_authorization_failed)
        )
    return FetchAnswer(
        ctx.version,
        ErrorCode.none,
        session.id if session is not None else 0,
        [TopicResults(ref, ps) for ref, ps in by_topic.items()],
    )


def _readable(ctx: RequestContext, ref: str | uuid.UUID) -> bool:
    name = _topic_name(ctx.broker, ref)
    return name is None or ctx.authorized(Op.READ, Res.TOPIC, name)


def _append_keys(
    broker: Broker, wanted: list[tuple[PartitionKey, int, int, int]]
) -> list[tuple[str, int]]:
    """The (name, index) keys appends are announced under, for a long poll."""
    keys = []
    for (ref, index), *_ in wanted:
        name = _topic_name(broker, ref)
        if name is not None:
            keys.append((name, index))
    return keys


API = ApiSpec(ApiKey.FETCH, 4, 17, fetch)
