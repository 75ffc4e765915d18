"""The metrics' pure parts: hot-path counters, error extraction, the latency histogram, the
fast text encoder (same samples as prometheus_client's) and the listener URL."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.end_txn.v3 import response as end_txn
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9 import response as produce
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from oncelog.broker.config import BrokerConfigError
from oncelog.broker.http.listener import parse_http_listener
from oncelog.broker.loop_watchdog import LoopFigures
from oncelog.broker.metrics import (
    CleanerFigures,
    Snapshot,
    encode_text,
    families,
    metrics_registry,
)
from oncelog.broker.request_stats import (
    LATENCY_BUCKETS_S,
    LatencyHistogram,
    RequestStats,
    response_errors,
)
from oncelog.broker.state_view import GroupLag, Hanging, PartitionState, TxnView
from oncelog.storage.producer_state import OpenTxn

ZERO = datetime.timedelta(0)


def _produce_response(*codes: ErrorCode) -> produce.ProduceResponse:
    parts = tuple(
        produce.PartitionProduceResponse(
            index=i,
            error_code=code,
            base_offset=0,
            log_append_time=None,
            log_start_offset=0,
            record_errors=(),
            error_message=None,
        )
        for i, code in enumerate(codes)
    )
    return produce.ProduceResponse(
        responses=(produce.TopicProduceResponse(name="t", partition_responses=parts),),
        throttle_time=ZERO,
    )


def test_response_errors_top_level_and_per_partition() -> None:
    assert response_errors(_produce_response(ErrorCode.none, ErrorCode.none)) is None
    assert response_errors(
        _produce_response(
            ErrorCode.none, ErrorCode.not_leader_or_follower, ErrorCode.not_leader_or_follower
        )
    ) == {"NOT_LEADER_OR_FOLLOWER"}
    ok = end_txn.EndTxnResponse(throttle_time=ZERO, error_code=ErrorCode.none)
    fenced = end_txn.EndTxnResponse(throttle_time=ZERO, error_code=ErrorCode.producer_fenced)
    assert response_errors(ok) is None
    assert response_errors(fenced) == {"PRODUCER_FENCED"}


def test_request_stats_count_requests_errors_and_latency() -> None:
    stats = RequestStats()
    stats.request_done("PRODUCE", 0.002)
    stats.request_done("PRODUCE", 0.0005, {"NOT_LEADER_OR_FOLLOWER"})
    stats.request_done("END_TXN", 30.0, {"PRODUCER_FENCED"})
    assert dict(stats.requests) == {"PRODUCE": 2, "END_TXN": 1}
    assert dict(stats.errors) == {
        ("PRODUCE", "NOT_LEADER_OR_FOLLOWER"): 1,
        ("END_TXN", "PRODUCER_FENCED"): 1,
    }
    buckets = dict(stats.latency["PRODUCE"].cumulative())
    assert buckets["0.0005"] == 1  # a bound is inclusive (le)
    assert buckets["0.001"] == 1 and buckets["0.0025"] == 2 and buckets["+Inf"] == 2
    end = stats.latency["END_TXN"].cumulative()
    assert [count for _, count in end] == [0.0] * len(LATENCY_BUCKETS_S) + [1.0]
    assert stats.latency["END_TXN"].total_s == 30.0
    stats.connections_opened, stats.connections_closed = 5, 2
    assert stats.connections == 3


def test_histogram_buckets_are_cumulative_and_end_in_inf() -> None:
    h = LatencyHistogram()
    for s in (0.0001, 0.003, 0.003, 0.7, 11.0):
        h.observe(s)
    got = h.cumulative()
    assert got[-1] == ("+Inf", 5.0)
    assert [c for _, c in got] == sorted(c for _, c in got)
    assert dict(got)["0.005"] == 3.0 and dict(got)["1.0"] == 4.0


def _snapshot() -> Snapshot:
    open_txn = OpenTxn(7, 0, 2, 10, first_timestamp=1_000, last_timestamp=1_500)
    return Snapshot(
        now_ms=4_000,
        live_producer_ids=3,
        partitions=[
            PartitionState("orders", 0, 0, 15, 10, (open_txn,)),
            PartitionState("orders", 1, 5, 9, 9, ()),
        ],
        transactions=[
            TxnView("app-1", 7, 0, "Ongoing", 60_000, 500, (("orders", 0),)),
            TxnView("app-2", 8, 3, "CompleteCommit", 60_000, -1, ()),
        ],
        hanging=[Hanging("orders", 0, 7, 0, 2, 10, 3_500, None, "orphaned")],
        groups=[GroupLag('we"ird\\group\nid', "Stable", "orders", 1, 4, 9)],
        requests={"PRODUCE": 12, "FETCH": 30},
        errors={("PRODUCE", "NOT_LEADER_OR_FOLLOWER"): 2},
        latency={"PRODUCE": (LatencyHistogram().cumulative(), 0.0)},
        bytes_in={"orders": 4096},
        bytes_out={"orders": 1024},
        produce_waiting=1,
        fetch_waiting=4,
        connections_opened=9,
        connections_closed=7,
        cleaner=CleanerFigures(2, 2048, 1024, 17, 0.25, 1.5, 0),
        load_s={"transaction": 0.012, "group": 0.5},
        loop=_loop_figures(),
        load_progress={"group": (1200, 5000)},
        loading={"transaction": False, "group": True},
    )


def _loop_figures() -> LoopFigures:
    f = LoopFigures(stalls=2, max_lag_s=1.25, lag_total_s=1.5)
    f.lag_counts[0] = 10  # ten on-time beats
    f.lag_counts[6] = 1  # one between 1 and 2.5 s
    f.gc.collections[2] = 4
    f.gc.pause_s[2] = 0.2
    f.gc.max_pause_s[2] = 0.08
    return f


def _parsed(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_encode_text_has_exactly_prometheus_clients_samples() -> None:
    snap = _snapshot()
    ours = encode_text(families(snap)).decode()
    theirs = generate_latest(metrics_registry(snap)).decode()
    assert _parsed(ours) == _parsed(theirs)
    # The same HELP/TYPE lines, in the same order.
    assert [x for x in ours.splitlines() if x.startswith("#")] == [
        x for x in theirs.splitlines() if x.startswith("#")
    ]


def test_snapshot_values() -> None:
    s = _parsed(encode_text(families(_snapshot())).decode())
    orders0 = (("partition", "0"), ("topic", "orders"))
    assert s[("oncelog_partition_lso_lag_offsets", orders0)] == 5
    assert s[("oncelog_partition_lso_lag_seconds", orders0)] == 3.0  # 4000 - 1000 ms
    # The coordinator's start (500 ms) is older than the first batch (1000 ms).
    assert s[("oncelog_partition_oldest_open_transaction_age_seconds", orders0)] == 3.5
    assert s[("oncelog_partition_lso_lag_seconds", (("partition", "1"), ("topic", "orders")))] == 0
    assert s[("oncelog_transactions", (("state", "Ongoing"),))] == 1
    assert s[("oncelog_transactions", (("state", "PrepareAbort"),))] == 0
    assert s[("oncelog_hanging_transactions", (("kind", "orphaned"),))] == 1
    assert s[("oncelog_hanging_transactions", (("kind", "overdue"),))] == 0
    assert s[("oncelog_connections", ())] == 2
    assert s[("oncelog_purgatory_size", (("operation", "fetch"),))] == 4
    group = (("group", 'we"ird\\group\nid'), ("partition", "1"), ("topic", "orders"))
    assert s[("oncelog_consumer_group_lag_offsets", group)] == 5
    assert s[("oncelog_log_cleaner_removed_records_total", ())] == 17
    assert s[("oncelog_event_loop_lag_seconds_bucket", (("le", "0.01"),))] == 10
    assert s[("oncelog_event_loop_lag_seconds_bucket", (("le", "1.0"),))] == 10
    assert s[("oncelog_event_loop_lag_seconds_bucket", (("le", "2.5"),))] == 11
    assert s[("oncelog_event_loop_lag_seconds_count", ())] == 11
    assert s[("oncelog_event_loop_stalls_total", ())] == 2
    assert s[("oncelog_gc_collections_total", (("generation", "2"),))] == 4
    assert s[("oncelog_gc_pause_max_seconds", (("generation", "2"),))] == 0.08
    assert s[("oncelog_coordinator_loading", (("coordinator", "group"),))] == 1
    assert s[("oncelog_coordinator_loading", (("coordinator", "transaction"),))] == 0
    done = (("coordinator", "group"), ("state", "done"))
    assert s[("oncelog_coordinator_load_records", done)] == 1200
    assert (
        s[("oncelog_coordinator_load_records", (("coordinator", "group"), ("state", "total")))]
        == 5000
    )


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:9404", ("127.0.0.1", 9404)),
        ("http://0.0.0.0:0/", ("0.0.0.0", 0)),
        ("http://[::1]:9404", ("::1", 9404)),
    ],
)
def test_listener_url(url: str, expected: tuple[str, int]) -> None:
    assert parse_http_listener(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1:9404",
        "http://127.0.0.1",
        "127.0.0.1:9404",
        "http://h:x",
        "http://h:1/metrics",
    ],
)
def test_listener_url_refused(url: str) -> None:
    with pytest.raises(BrokerConfigError):
        parse_http_listener(url)
