"""Topic ids at the wire (KIP-516): Fetch v13+ names topics by id, with exact error codes."""

from __future__ import annotations

import datetime
import threading
import time
import uuid
from typing import Any

from confluent_kafka.admin import AdminClient
from kio.schema.delete_topics.v5 import request as d5
from kio.schema.delete_topics.v6 import request as d6
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as f12
from kio.schema.fetch.v13 import request as f13
from kio.schema.fetch.v17 import request as f17
from kio.schema.metadata.v12 import request as md

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker
from oncelog.records.builder import iter_records

from .helpers import create_topic, produce

WAIT = datetime.timedelta(milliseconds=50)
ZERO = uuid.UUID(int=0)


def topic_id(c: WireClient, name: str) -> uuid.UUID:
    resp = c.request(
        md.MetadataRequest(
            topics=(md.MetadataRequestTopic(topic_id=None, name=name),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    )
    assert resp.topics[0].error_code == ErrorCode.none
    found: uuid.UUID = resp.topics[0].topic_id
    assert found.int != 0
    return found


def fetch_by_id(
    c: WireClient,
    topics: dict[uuid.UUID, list[tuple[int, int]]],
    *,
    schema: Any = f17,
    session_id: int = 0,
    session_epoch: int = -1,
) -> Any:
    return c.request(
        schema.FetchRequest(
            max_wait=WAIT,
            min_bytes=1,
            session_id=session_id,
            session_epoch=session_epoch,
            topics=tuple(
                schema.FetchTopic(
                    topic_id=tid,
                    partitions=tuple(
                        schema.FetchPartition(
                            partition=p, fetch_offset=off, partition_max_bytes=1 << 20
                        )
                        for p, off in parts
                    ),
                )
                for tid, parts in topics.items()
            ),
            forgotten_topics_data=(),
        )
    )


def values(partition: Any) -> list[bytes | None]:
    return [r.value for r in iter_records(partition.records or b"")]


def test_fetch_by_topic_id_reads_and_unknown_ids_answer_unknown_topic_id(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, 2)
    produce(broker.bootstrap, topic_name, [(None, b"a", 0), (None, b"b", 0), (None, b"c", 1)])
    stranger = uuid.uuid4()
    with WireClient(broker.bootstrap) as c:
        tid = topic_id(c, topic_name)
        for schema in (f13, f17):
            resp = fetch_by_id(c, {tid: [(0, 0), (1, 0)], stranger: [(0, 0)]}, schema=schema)
            assert resp.error_code == ErrorCode.none
            by_id = {
                t.topic_id: {p.partition_index: p for p in t.partitions} for t in resp.responses
            }
            assert set(by_id) == {tid, stranger}
            p0, p1 = by_id[tid][0], by_id[tid][1]
            assert (p0.error_code, p0.high_watermark, values(p0)) == (
                ErrorCode.none,
                2,
                [b"a", b"b"],
            )
            assert (p1.error_code, p1.high_watermark, values(p1)) == (ErrorCode.none, 1, [b"c"])
            unknown = by_id[stranger][0]
            assert unknown.error_code == ErrorCode.unknown_topic_id
            assert (unknown.high_watermark, unknown.records) == (-1, b"")
        # The all-zero id (found by the fuzzer: it once closed the connection) is unknown.
        zero = uuid.UUID(int=0)
        for schema in (f13, f17):
            resp = fetch_by_id(c, {zero: [(0, 0)]}, schema=schema)
            # (kio decodes the zero id the broker echoes as None)
            assert [(t.topic_id, t.partitions[0].error_code) for t in resp.responses] == [
                (None, ErrorCode.unknown_topic_id)
            ]
        # A partition the topic lacks is UNKNOWN_TOPIC_OR_PARTITION, as by name.
        resp = fetch_by_id(c, {tid: [(5, 0)]})
        assert resp.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition


def test_a_recreated_topic_has_a_new_id_and_the_old_id_is_unknown(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, [(None, b"old", 0)])
    with WireClient(broker.bootstrap) as c:
        old = topic_id(c, topic_name)
        # An id session over the old topic.
        first = fetch_by_id(c, {old: [(0, 0)]}, session_epoch=0)
        assert first.session_id > 0 and values(first.responses[0].partitions[0]) == [b"old"]
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.delete_topics([topic_name])[topic_name].result(15)
        create_topic(broker.bootstrap, topic_name, 1)
        produce(broker.bootstrap, topic_name, [(None, b"new", 0)])
        new = topic_id(c, topic_name)
        assert new != old
        # The session still names the old id: the new topic of that name is not served.
        again = fetch_by_id(c, {}, session_id=first.session_id, session_epoch=1)
        assert again.error_code == ErrorCode.none
        assert [(t.topic_id, [p.error_code for p in t.partitions]) for t in again.responses] == [
            (old, [ErrorCode.unknown_topic_id])
        ]
        fresh = fetch_by_id(c, {new: [(0, 0)]})
        assert values(fresh.responses[0].partitions[0]) == [b"new"]


def test_a_session_cannot_switch_between_names_and_ids(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    with WireClient(broker.bootstrap) as c:
        tid = topic_id(c, topic_name)
        by_id = fetch_by_id(c, {tid: [(0, 0)]}, schema=f13, session_epoch=0)
        assert by_id.error_code == ErrorCode.none and by_id.session_id > 0
        by_name = c.request(
            f12.FetchRequest(
                max_wait=WAIT,
                min_bytes=1,
                session_id=by_id.session_id,
                session_epoch=1,
                topics=(),
                forgotten_topics_data=(),
            )
        )
        assert by_name.error_code == ErrorCode.fetch_session_topic_id_error
        assert by_name.responses == ()


def delete_v6(c: WireClient, *entries: tuple[str | None, uuid.UUID | None]) -> list[Any]:
    resp = c.request(
        d6.DeleteTopicsRequest(
            topics=tuple(d6.DeleteTopicState(name=n, topic_id=i) for n, i in entries),
            timeout=datetime.timedelta(seconds=10),
        )
    )
    return list(resp.responses)


def outcome(result: Any) -> tuple[str | None, uuid.UUID | None, ErrorCode]:
    topic_id = result.topic_id if result.topic_id != ZERO else None
    return result.name, topic_id, result.error_code


def test_delete_topics_v6_by_id_and_its_invalid_requests(broker: EmbeddedBroker) -> None:
    for name in ("by-id", "by-name", "both", "twice", "named-and-id"):
        create_topic(broker.bootstrap, name, 1)
    with WireClient(broker.bootstrap) as c:
        ids = {n: topic_id(c, n) for n in ("by-id", "by-name", "both", "twice", "named-and-id")}
        stranger = uuid.uuid4()
        results = delete_v6(
            c,
            (None, ids["by-id"]),
            ("by-name", None),
            ("both", ids["both"]),
            (None, None),
            (None, ids["twice"]),
            (None, ids["twice"]),
            ("named-and-id", None),
            (None, ids["named-and-id"]),
            (None, stranger),
            ("no-such-topic", None),
        )
        assert sorted(map(outcome, results), key=str) == sorted(
            [
                ("both", ids["both"], ErrorCode.invalid_request),
                (None, None, ErrorCode.invalid_request),
                (None, ids["twice"], ErrorCode.invalid_request),
                ("named-and-id", ids["named-and-id"], ErrorCode.invalid_request),
                (None, stranger, ErrorCode.unknown_topic_id),
                ("no-such-topic", None, ErrorCode.unknown_topic_or_partition),
                ("by-id", ids["by-id"], ErrorCode.none),
                ("by-name", ids["by-name"], ErrorCode.none),
            ],
            key=str,
        )
        messages = {r.error_message for r in results if r.error_code == ErrorCode.invalid_request}
        assert messages == {
            "You may not specify both topic name and topic id.",
            "Neither topic name nor id were specified.",
            "Duplicate topic id.",
            "The provided topic name maps to an ID that was already supplied.",
        }
        # Only the two valid entries deleted anything.
        left = c.request(
            md.MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        assert {t.name for t in left.topics} & set(ids) == {"both", "twice", "named-and-id"}
        # A deleted id is unknown from now on; by name (v5) the same topic is unknown too.
        assert list(map(outcome, delete_v6(c, (None, ids["by-id"])))) == [
            (None, ids["by-id"], ErrorCode.unknown_topic_id)
        ]
        v5 = c.request(d5.DeleteTopicsRequest(topic_names=("by-id",), timeout=WAIT))
        assert [(r.name, r.error_code) for r in v5.responses] == [
            ("by-id", ErrorCode.unknown_topic_or_partition)
        ]
        # A name given twice is refused, not deleted.
        twice = c.request(d5.DeleteTopicsRequest(topic_names=("both", "both"), timeout=WAIT))
        assert [(r.name, r.error_code, r.error_message) for r in twice.responses] == [
            ("both", ErrorCode.invalid_request, "Duplicate topic name.")
        ]


def test_a_long_poll_by_topic_id_wakes_on_append(broker: EmbeddedBroker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    with WireClient(broker.bootstrap) as c:
        tid = topic_id(c, topic_name)
        done: list[tuple[float, Any]] = []

        def poll() -> None:
            start = time.monotonic()
            resp = c.request(
                f17.FetchRequest(
                    max_wait=datetime.timedelta(seconds=20),
                    min_bytes=1,
                    topics=(
                        f17.FetchTopic(
                            topic_id=tid,
                            partitions=(
                                f17.FetchPartition(
                                    partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                                ),
                            ),
                        ),
                    ),
                    forgotten_topics_data=(),
                )
            )
            done.append((time.monotonic() - start, resp))

        waiter = threading.Thread(target=poll)
        waiter.start()
        time.sleep(1.0)
        assert not done  # still parked: nothing to read yet
        produce(broker.bootstrap, topic_name, [(None, b"wake", 0)])
        waiter.join(15)
        assert done, "the long poll did not wake on the append"
        elapsed, resp = done[0]
        assert elapsed < 15
        assert values(resp.responses[0].partitions[0]) == [b"wake"]
