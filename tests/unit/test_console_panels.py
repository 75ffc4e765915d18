"""The console's pure parts: the transactions table's order, idle topics, the chart's
ticks, the two group lags, and the log's non-blocking timestamp lookup they use."""

from __future__ import annotations

import tempfile
from pathlib import Path

from oncelog.broker.http.console import (
    HANGING_FIRST,
    IDLE_AFTER_MS,
    OPEN_NEXT,
    THE_REST,
    is_idle,
    topic_rollups,
    transaction_order,
    x_ticks,
    y_ticks,
)
from oncelog.broker.state_view import GroupLag, PartitionState, TxnView
from oncelog.records.batch import validate_batch
from oncelog.records.builder import build_batch
from oncelog.storage.config import LogConfig
from oncelog.storage.producer_state import OpenTxn
from oncelog.storage.unified_log import UnifiedLog

NOW = 1_700_000_000_000


def txn(tid: str, state: str, start_ms: int = -1, updated_ms: int = -1) -> TxnView:
    return TxnView(tid, 1, 0, state, 60_000, start_ms, (), updated_ms)


def test_hanging_then_open_then_the_rest_oldest_first() -> None:
    txns = [
        txn("a-done-new", "CompleteCommit", updated_ms=NOW - 10),
        txn("b-open-new", "Ongoing", start_ms=NOW - 100),
        txn("c-done-old", "CompleteAbort", updated_ms=NOW - 1000),
        txn("d-empty", "Empty", updated_ms=NOW - 500),
        txn("y-hanging-new", "Ongoing", start_ms=NOW - 5000),
        txn("z-hanging-old", "PrepareCommit", start_ms=NOW - 9000),
        txn("e-open-old", "PrepareAbort", start_ms=NOW - 200),
    ]
    order = transaction_order(txns, {"y-hanging-new": "overdue", "z-hanging-old": "overdue"})
    assert [(g, t.transactional_id) for g, t in order] == [
        (HANGING_FIRST, "z-hanging-old"),
        (HANGING_FIRST, "y-hanging-new"),
        (OPEN_NEXT, "e-open-old"),
        (OPEN_NEXT, "b-open-new"),
        (THE_REST, "c-done-old"),
        (THE_REST, "d-empty"),
        (THE_REST, "a-done-new"),
    ]


def part(
    topic: str, hw: int, lso: int | None = None, start: int = 0, newest: int = -1, txns: int = 0
) -> PartitionState:
    open_txns = tuple(OpenTxn(7, 0, 0, hw - 1, NOW, NOW) for _ in range(txns))
    return PartitionState(topic, 0, start, hw, hw if lso is None else lso, open_txns, 0, newest)


def test_idle_topics() -> None:
    old, recent = NOW - IDLE_AFTER_MS - 1, NOW - IDLE_AFTER_MS + 1000
    assert is_idle([part("t", 0)], NOW)  # never written
    assert is_idle([part("t", 5, start=5, newest=recent)], NOW)  # emptied by retention
    assert is_idle([part("t", 5, newest=old)], NOW)
    assert not is_idle([part("t", 5, newest=recent)], NOW)
    assert not is_idle([part("t", 5, newest=-1)], NOW)  # no timestamp: not judged idle
    # An open transaction or LSO lag is never idle, however old.
    assert not is_idle([part("t", 5, lso=4, newest=old, txns=1)], NOW)
    rollups = topic_rollups(
        [part("b", 5, newest=recent), part("__consumer_offsets", 9, newest=recent),
         part("c", 0), part("a", 5, lso=3, newest=old, txns=1)],
        NOW,
    )  # fmt: skip
    assert [(r.topic, r.quiet) for r in rollups] == [
        ("a", False),  # lagging first
        ("b", False),
        ("__consumer_offsets", True),
        ("c", True),
    ]


def test_chart_ticks() -> None:
    assert y_ticks(1) == [0, 1]
    assert y_ticks(2) == [0, 1, 2]
    assert y_ticks(7) == [0, 2, 4, 6, 8]
    assert y_ticks(23) == [0, 10, 20, 30]
    assert y_ticks(12_345) == [0, 5000, 10_000, 15_000]
    # Two samples a second apart still get a label; 150 s get one every 30 s.
    assert x_ticks(1_000_500, 1_001_600) == [1_001_000]
    assert x_ticks(1_000_500, 1_150_500) == [1_020_000, 1_050_000, 1_080_000, 1_110_000, 1_140_000]


def test_group_lag_to_the_lso_and_to_the_end() -> None:
    # Caught up behind an open transaction: nothing left for read_committed.
    g = GroupLag("g", "Empty", "t", 0, committed=3, high_watermark=5, last_stable_offset=3,
                 next_timestamp=NOW - 2500)  # fmt: skip
    assert (g.lag_to_lso, g.lag) == (0, 2)
    assert g.lag_ms(NOW, to_lso=True) == 0
    assert g.lag_ms(NOW, to_lso=False) == 2500
    # Past the LSO (it reads uncommitted): no LSO lag.
    g = GroupLag("g", "Empty", "t", 0, 4, 5, 3, -1)
    assert (g.lag_to_lso, g.lag, g.lag_ms(NOW, to_lso=False)) == (0, 1, None)
    # Without an LSO known, the high watermark stands in.
    assert GroupLag("g", "Empty", "t", 0, 1, 5).lag_to_lso == 4


def test_batch_timestamp_is_the_batch_max_and_never_blocks() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = UnifiedLog.open(Path(tmp) / "t-0", LogConfig(), now_ms=NOW)
        try:
            for ts in (NOW - 3000, NOW - 1000):
                batch = build_batch([(None, b"x", None, ts - 5), (None, b"y", None, ts)])
                log.append(bytearray(batch), validate_batch(batch), now_ms=NOW)
            assert [log.batch_timestamp(o) for o in range(4)] == [
                NOW - 3000,
                NOW - 3000,
                NOW - 1000,
                NOW - 1000,
            ]
            assert log.batch_timestamp(4) is None  # the log end: nothing written there
            assert log.batch_timestamp(-1) is None
        finally:
            log.close()
