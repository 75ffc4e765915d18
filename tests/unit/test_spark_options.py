"""Pure parts of oncelog.spark: option parsing and offset JSON (no Spark session, no broker)."""

from __future__ import annotations

import json
import random

import pytest

from oncelog.spark.offsets import (
    TopicPartition,
    distribute,
    from_json,
    group_ranges,
    split_ranges,
    to_json,
)
from oncelog.spark.options import (
    OncelogOptionError,
    Subscription,
    parse_offset_spec,
    parse_read_options,
    parse_write_options,
)

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def read(streaming: bool = True, /, **opts: str):  # type: ignore[no-untyped-def]
    return parse_read_options({**BOOT, **opts}, streaming=streaming)


def error(fn, *args, **kwargs) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(OncelogOptionError) as info:
        fn(*args, **kwargs)
    return str(info.value)


# -- read options ---------------------------------------------------------------------------


def test_read_defaults_mirror_spark() -> None:
    o = read(subscribe="a, b,a")
    assert o.subscription.topics == ("a", "b")
    assert o.starting == "latest" and o.ending is None
    assert o.isolation_level == "read_committed" and o.read_committed
    assert o.fail_on_data_loss is True and o.include_headers is False
    assert o.max_offsets_per_trigger is None
    batch = read(False, subscribe="a")
    assert batch.starting == "earliest" and batch.ending == "latest"


def test_options_are_case_insensitive_and_alias_bootstrap() -> None:
    o = parse_read_options(
        {
            "bootstrap.servers": "h:1,h2:2",
            "SubscribePattern": "t-.*",
            "MAXOFFSETSPERTRIGGER": "5",
            "includeHeaders": "TRUE",
        },
        streaming=True,
    )
    assert o.bootstrap == "h:1,h2:2"
    assert o.subscription.pattern == "t-.*"
    assert o.max_offsets_per_trigger == 5 and o.include_headers


def test_kafka_options_pass_through_and_owned_ones_are_rejected() -> None:
    o = read(
        subscribe="a",
        **{"kafka.fetch.max.bytes": "1000", "kafka.isolation.level": "read_uncommitted"},
    )
    assert o.consumer_conf == {"fetch.max.bytes": "1000"}
    assert o.isolation_level == "read_uncommitted" and not o.read_committed
    assert "startingOffsets" in error(
        read, subscribe="a", **{"kafka.auto.offset.reset": "earliest"}
    )
    assert "kafka.isolation.level" in error(
        read, subscribe="a", **{"kafka.isolation.level": "snapshot"}
    )


@pytest.mark.parametrize(
    ("opts", "needle"),
    [
        ({}, "exactly one of"),
        ({"subscribe": "a", "assign": '{"a":[0]}'}, "subscribe, assign"),
        ({"subscribe": "a", "subscribePattern": "x"}, "subscribe, subscribePattern"),
        ({"subscribePattern": "("}, "subscribePattern"),
        ({"assign": "[0]"}, "assign"),
        ({"assign": '{"a": []}'}, "assign"),
        ({"assign": '{"a": [-1]}'}, "assign"),
        ({"subscribe": " , "}, "subscribe"),
        ({"subscribe": "a", "startingOffsets": "{bad"}, "startingOffsets"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"x": 1}}'}, "startingOffsets"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"0": -3}}'}, "startingOffsets"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"0": "5"}}'}, "startingOffsets"),
        ({"subscribe": "a", "startingOffsets": '{"b": {"0": 5}}'}, "not in 'subscribe'"),
        ({"assign": '{"a": [0]}', "startingOffsets": '{"a": {"1": 5}}'}, "not in 'assign'"),
        ({"subscribePattern": "a.*", "startingOffsets": '{"b": {"0": 5}}'}, "subscribePattern"),
        ({"subscribe": "a", "endingOffsets": "latest"}, "endingOffsets"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "many"}, "maxOffsetsPerTrigger"),
        ({"subscribe": "a", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
        (
            {"subscribe": "a", "fetchOffset.numRetries": "5"},
            "'fetchOffset.numRetries' is not supported",
        ),
        ({"subscribe": "a", "minOffsetsPerTrigger": "0"}, "minOffsetsPerTrigger"),
        ({"subscribe": "a", "minOffsetsPerTrigger": "9", "maxOffsetsPerTrigger": "5"}, "above"),
        ({"subscribe": "a", "maxTriggerDelay": "soon"}, "maxTriggerDelay"),
        ({"subscribe": "a", "startingTimestamp": "yesterday"}, "startingTimestamp"),
        (
            {"subscribe": "a", "startingOffsetsByTimestamp": '{"a": {"0": -5}}'},
            "startingOffsetsByTimestamp",
        ),
        ({"subscribe": "a", "startingOffsetsByTimestamp": '{"b": {"0": 5}}'}, "not in 'subscribe'"),
        ({"subscribe": "a", "startingOffsetsByTimestampStrategy": "skip"}, "'error' or 'latest'"),
        ({"subscribe": "a", "endingTimestamp": "5"}, "batch queries only"),
        ({"subscribe": "a", "minPartitions": "0"}, "minPartitions"),
        ({"subscribe": "a", "maxRecordsPerPartition": "x"}, "maxRecordsPerPartition"),
        ({"subscribe": "a", "kafka.partitioner.class": "x.Y"}, "'kafka.partitioner'"),
        ({"subscribe": "a", "kafka.max.poll.records": "5"}, "'maxRecordsPerPartition'"),
        ({"subscribe": "a", "startingoffset": "earliest"}, "unknown option 'startingoffset'"),
        ({"subscribe": "a", "topic": "b"}, "'topic' applies to writing"),
    ],
)
def test_bad_read_options_name_the_option(opts: dict[str, str], needle: str) -> None:
    assert needle in error(read, **opts)


def test_batch_only_restrictions() -> None:
    assert "latest" in error(read, False, subscribe="a", startingOffsets="latest")
    assert "latest" in error(read, False, subscribe="a", startingOffsets='{"a": {"0": -1}}')
    assert "earliest" in error(read, False, subscribe="a", endingOffsets="earliest")
    assert "maxOffsetsPerTrigger" in error(read, False, subscribe="a", maxOffsetsPerTrigger="5")
    o = read(
        False,
        subscribe="a",
        startingOffsets='{"a": {"0": 3, "1": -2}}',
        endingOffsets='{"a": {"0": -1}}',
    )
    assert o.starting == {"a": {0: 3, 1: -2}} and o.ending == {"a": {0: -1}}


@pytest.mark.parametrize(
    ("opts", "needle"),
    [
        ({}, "kafka.bootstrap.servers' is required"),
        ({"kafka.bootstrap.servers": "nohost"}, "host:port"),
        ({"kafka.bootstrap.servers": "a:1", "bootstrap.servers": "b:2"}, "conflict"),
    ],
)
def test_bootstrap_errors(opts: dict[str, str], needle: str) -> None:
    assert needle in error(parse_read_options, {**opts, "subscribe": "a"}, streaming=True)


def test_offset_spec() -> None:
    assert parse_offset_spec(" Earliest ", "startingoffsets") == "earliest"
    assert parse_offset_spec('{"t": {"0": 23, "1": -2}}', "startingoffsets") == {
        "t": {0: 23, 1: -2}
    }


def test_subscription_select() -> None:
    cluster = {
        "orders": 3,
        "orders-x": 2,
        "other": 1,
        "__consumer_offsets": 50,
        "__oncelog_spark_decisions": 8,
    }
    assert Subscription(topics=("orders", "missing")).select(cluster) == {"orders": (0, 1, 2)}
    assert Subscription(pattern="orders.*").select(cluster) == {
        "orders": (0, 1, 2),
        "orders-x": (0, 1),
    }
    assert Subscription(pattern=".*").select(cluster).keys() == {
        "orders",
        "orders-x",
        "other",
    }  # no internal topics
    assert Subscription(assign={"orders": (1,)}).select(cluster) == {"orders": (1,)}


# -- write options --------------------------------------------------------------------------


def test_write_options() -> None:
    o = parse_write_options(
        {**BOOT, "topic": "out", "checkpointLocation": "/tmp/x", "kafka.linger.ms": "20"}
    )
    assert o.topic == "out" and o.exactly_once and o.transactional_id_prefix == "oncelog-spark"
    assert o.transaction_timeout_ms == 60_000 and o.producer_conf == {"linger.ms": "20"}
    assert o.checkpoint == "/tmp/x"
    o = parse_write_options(
        {
            **BOOT,
            "exactlyOnce": "false",
            "transactionalIdPrefix": "my.app",
            "transactionTimeoutMs": "60000",
        }
    )
    assert (
        not o.exactly_once
        and o.transactional_id_prefix == "my.app"
        and o.transaction_timeout_ms == 60_000
        and o.topic is None
    )


@pytest.mark.parametrize(
    ("opts", "needle"),
    [
        ({"kafka.transactional.id": "x"}, "transactionalIdPrefix"),
        ({"kafka.transaction.timeout.ms": "5"}, "transactionTimeoutMs"),
        ({"kafka.enable.idempotence": "false"}, "exactlyOnce"),
        ({"transactionalIdPrefix": "has space"}, "transactionalIdPrefix"),
        ({"transactionTimeoutMs": "-1"}, "transactionTimeoutMs"),
        ({"exactlyOnce": "perhaps"}, "exactlyOnce"),
        ({"subscribe": "a"}, "'subscribe' applies to reading"),
        ({"failOnDataLoss": "true"}, "applies to reading"),
        ({"topik": "a"}, "unknown option 'topik'"),
    ],
)
def test_bad_write_options_name_the_option(opts: dict[str, str], needle: str) -> None:
    assert needle in error(parse_write_options, {**BOOT, **opts})


def test_two_phase_commit_option() -> None:
    assert parse_write_options(BOOT).two_phase_commit == "auto"
    for raw, want in [("TRUE", "true"), ("false", "false"), (" Auto ", "auto"), ("no", "false")]:
        o = parse_write_options({**BOOT, "exactlyOnce.twoPhaseCommit": raw})
        assert o.two_phase_commit == want
    # Spark lower-cases option names.
    assert (
        parse_write_options({**BOOT, "exactlyonce.twophasecommit": "true"}).two_phase_commit
        == "true"
    )
    assert "exactlyOnce.twoPhaseCommit' must be auto, true or false" in error(
        parse_write_options, {**BOOT, "exactlyOnce.twoPhaseCommit": "sometimes"}
    )
    assert "needs 'exactlyOnce=true'" in error(
        parse_write_options,
        {**BOOT, "exactlyOnce": "false", "exactlyOnce.twoPhaseCommit": "true"},
    )
    # auto (and false) with at-least-once writes: nothing to decide, no error.
    o = parse_write_options({**BOOT, "exactlyOnce": "false", "exactlyOnce.twoPhaseCommit": "auto"})
    assert not o.exactly_once and o.two_phase_commit == "auto"
    assert "exactlyOnce.twoPhaseCommit' applies to writing" in error(
        parse_read_options,
        {**BOOT, "subscribe": "t", "exactlyOnce.twoPhaseCommit": "true"},
        streaming=True,
    )


def test_idempotence_may_be_disabled_only_without_exactly_once() -> None:
    o = parse_write_options({**BOOT, "exactlyOnce": "false", "kafka.enable.idempotence": "false"})
    assert o.producer_conf["enable.idempotence"] == "false"


# -- offsets --------------------------------------------------------------------------------


def backlog(start: dict[TopicPartition, int], end: dict[TopicPartition, int]) -> int:
    return sum(max(0, end[tp] - start.get(tp, end[tp])) for tp in end)


def test_offset_json_is_canonical() -> None:
    offsets = {("b", 10): 5, ("a", 2): 7, ("b", 9): 1, ("a", 10): 3}
    data = to_json(offsets)
    assert json.dumps(data) == '{"a": {"2": 7, "10": 3}, "b": {"9": 1, "10": 5}}'
    assert from_json(json.loads(json.dumps(data))) == offsets
    assert to_json(from_json({"b": {"10": 5, "9": 1}, "a": {"10": 3, "2": 7}})) == data
    assert from_json({}) == {} and from_json(None) == {}


def test_distribute_bounds_the_total_proportionally() -> None:
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 50}
    end = {("t", 0): 1000, ("t", 1): 200, ("t", 2): 50}
    capped = distribute(start, end, 110)
    assert backlog(start, capped) == 110
    assert (
        capped[("t", 0)] in (99, 100)
        and capped[("t", 1)] - 100 in (10, 11)
        and capped[("t", 2)] == 50
    )
    assert distribute(start, end, 10_000) == end  # under the limit: everything


def test_distribute_new_partitions_and_no_backlog() -> None:
    start = {("t", 0): 5}
    end = {("t", 0): 5, ("t", 1): 9}
    assert distribute(start, end, 1) == end  # a partition missing from start has no backlog here
    with pytest.raises(ValueError):
        distribute(start, end, 0)


@pytest.mark.parametrize("seed", range(20))
def test_distribute_properties(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randrange(1, 8)
    start = {("t", p): rng.randrange(0, 1000) for p in range(n)}
    end = {tp: o + rng.choice([0, 0, rng.randrange(1, 5000)]) for tp, o in start.items()}
    limit = rng.randrange(1, 3000)
    out = distribute(start, end, limit)
    assert backlog(start, out) == min(limit, backlog(start, end))
    assert all(start[tp] <= out[tp] <= end[tp] for tp in end)


def test_distribute_never_starves_a_partition() -> None:
    # A small budget over a big and a small backlog: the small one progresses every batch.
    start = {("t", 0): 0, ("t", 1): 0}
    end = {("t", 0): 10_000, ("t", 1): 3}
    assert distribute(start, end, 2) == {("t", 0): 1, ("t", 1): 1}
    # Fewer offsets than backlogged partitions: the biggest backlogs first, none forever.
    cur = {("t", p): 0 for p in range(4)}
    end = {("t", 0): 5, ("t", 1): 5, ("t", 2): 1, ("t", 3): 2}
    for _ in range(13):
        cur = distribute(cur, end, 1)
    assert cur == end


def test_spark_kafka_options_with_sparks_semantics() -> None:
    o = read(
        subscribe="a",
        startingTimestamp="1000",
        startingOffsetsByTimestamp='{"a": {"0": 5}}',
        startingOffsetsByTimestampStrategy="LATEST",
        minOffsetsPerTrigger="10",
        maxOffsetsPerTrigger="20",
        maxTriggerDelay="3s",
        minPartitions="4",
        maxRecordsPerPartition="100",
        groupIdPrefix="mine",
        **{"kafka.group.id": "g", "kafka.fetch.max.wait.ms": "50"},
    )
    # startingTimestamp takes precedence over startingOffsetsByTimestamp (Spark's order)
    assert o.starting_by_timestamp is not None and o.starting_by_timestamp.everywhere == 1000
    assert o.timestamp_strategy == "latest"
    assert (o.min_offsets_per_trigger, o.max_offsets_per_trigger) == (10, 20)
    assert o.max_trigger_delay_ms == 3000
    assert (o.min_partitions, o.max_records_per_partition) == (4, 100)
    assert o.group_id_prefix == "mine"
    assert o.consumer_conf["group.id"] == "g" and o.consumer_conf["fetch.wait.max.ms"] == "50"
    assert read(subscribe="a").max_trigger_delay_ms == 15 * 60_000
    assert read(subscribe="a", maxTriggerDelay="250").max_trigger_delay_ms == 250
    b = read(False, subscribe="a", endingOffsetsByTimestamp='{"a": {"0": 7, "1": 9}}')
    assert b.ending_by_timestamp is not None
    assert b.ending_by_timestamp.per_partition == {"a": {0: 7, 1: 9}}
    assert "streaming queries only" in error(read, False, subscribe="a", minOffsetsPerTrigger="5")
    w = parse_write_options({**BOOT, "includeHeaders": "false"})
    assert w.include_headers is False and parse_write_options(BOOT).include_headers is True


def test_split_ranges_like_sparks_range_calculator() -> None:
    r = [("a", 0, 0, 100), ("a", 1, 10, 20)]
    assert split_ranges(r, None, None) == r
    assert split_ranges(r, None, 40) == [
        ("a", 0, 0, 40),
        ("a", 0, 40, 80),
        ("a", 0, 80, 100),
        ("a", 1, 10, 20),
    ]
    # 110 offsets over >= 4 partitions: a-0 (100) gets ceil(100/110*4) = 4 parts, a-1 one.
    assert split_ranges(r, 4, None) == [
        ("a", 0, 0, 25),
        ("a", 0, 25, 50),
        ("a", 0, 50, 75),
        ("a", 0, 75, 100),
        ("a", 1, 10, 20),
    ]
    assert split_ranges(r, 2, None) == r  # already enough partitions
    assert split_ranges([("a", 0, 0, 3)], 10, None) == [
        ("a", 0, 0, 1),
        ("a", 0, 1, 2),
        ("a", 0, 2, 3),
    ]
    assert split_ranges([], 4, 10) == []


def test_group_ranges_for_max_partitions() -> None:
    r = [("a", 0, 0, 100), ("a", 1, 0, 60), ("a", 2, 0, 50), ("b", 0, 5, 15)]
    assert group_ranges(r, None) == [[x] for x in sorted(r)]
    assert group_ranges(r, 4) == group_ranges(r, 9) == [[x] for x in sorted(r)]
    # Largest first onto the lightest task: a-0 (100) -> 1, a-1 (60) -> 2, a-2 (50) -> 2
    # (60 < 100), b-0 (10) -> 1 (100 < 110).
    assert group_ranges(r, 2) == [
        [("a", 0, 0, 100), ("b", 0, 5, 15)],
        [("a", 1, 0, 60), ("a", 2, 0, 50)],
    ]
    assert group_ranges(r, 1) == [sorted(r)]
    o = read(subscribe="a", maxPartitions="2")
    assert o.max_partitions == 2 and read(subscribe="a").max_partitions is None
    assert "maxPartitions" in error(read, True, subscribe="a", maxPartitions="0")
