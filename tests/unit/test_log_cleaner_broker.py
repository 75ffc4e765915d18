"""The broker's cleaner: its configs and which log it picks."""

from __future__ import annotations

from pathlib import Path

import pytest

from oncelog.broker.config import BrokerConfig, BrokerConfigError
from oncelog.broker.log_cleaner import CleanerSettings, LogCleaner
from oncelog.storage.cleaner_manager import SegmentFacts, horizon_due, is_due, measure
from oncelog.storage.compaction import compact_log
from oncelog.storage.config import LogConfig

from .test_storage_cleaner import CFG, Writer
from .test_storage_support import NOW, config, open_log


def test_kafka_cleaner_configs_are_accepted_with_kafka_defaults() -> None:
    cfg = BrokerConfig.build(
        overrides={"log.cleaner.backoff.ms": "250", "log.cleaner.threads": "2"}
    )
    s = cfg.cleaner
    assert (s.enabled, s.threads, s.backoff_ms, s.dedupe_buffer_bytes) == (True, 2, 250, 134217728)
    assert s.io_max_bytes_per_second == 1.7976931348623157e308
    for name in (
        "log.cleaner.enable",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.min.cleanable.ratio",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms",
        "log.cleaner.io.buffer.size",
    ):
        assert name in cfg.values
    with pytest.raises(BrokerConfigError):
        BrokerConfig.build(overrides={"log.cleaner.threads": "many"})


def test_broker_cleaner_configs_seed_topic_defaults() -> None:
    cfg = BrokerConfig.build(
        overrides={
            "log.cleaner.min.cleanable.ratio": "0.25",
            "log.cleaner.delete.retention.ms": "5000",
            "log.cleaner.min.compaction.lag.ms": "7",
            "log.cleaner.max.compaction.lag.ms": "900000",
        }
    )
    log_cfg = LogConfig.from_props(cfg.topic_defaults())
    assert log_cfg.min_cleanable_dirty_ratio == 0.25
    assert log_cfg.delete_retention_ms == 5000
    assert log_cfg.min_compaction_lag_ms == 7
    assert log_cfg.max_compaction_lag_ms == 900000
    # A compacted log rolls by max.compaction.lag.ms when it is below segment.ms.
    assert LogConfig.from_props({"cleanup.policy": "compact"}, log_cfg).max_segment_ms == 900000
    assert log_cfg.max_segment_ms == log_cfg.segment_ms  # not compacted: segment.ms only


def test_segment_delete_delay_seeds_file_delete_delay() -> None:
    """Kafka's log.segment.delete.delay.ms is the broker default of file.delete.delay.ms:
    how long segments replaced by the cleaner stay on disk as *.deleted."""
    assert LogConfig.from_props(BrokerConfig.build().topic_defaults()).file_delete_delay_ms == 60000
    cfg = BrokerConfig.build(overrides={"log.segment.delete.delay.ms": "250"})
    assert LogConfig.from_props(cfg.topic_defaults()).file_delete_delay_ms == 250
    with pytest.raises(BrokerConfigError):
        BrokerConfig.build(overrides={"log.segment.delete.delay.ms": "soon"})


def test_picks_the_dirtiest_due_log(tmp_path: Path) -> None:
    now = NOW + 5_000
    logs = {}
    for name, fresh in (("a-0", 30), ("b-0", 90), ("c-0", 0)):
        log = open_log(tmp_path / name, CFG)
        w = Writer(log)
        for i in range(60):
            w.put([(f"k{i % 20}".encode(), b"v")])
        w.roll()
        assert compact_log(log, now_ms=w.now, dedupe_buffer_bytes=1 << 20) is not None
        for i in range(fresh):  # new dirty data after the first pass
            w.put([(f"k{i % 20}".encode(), b"w")])
        if fresh:
            w.roll()
        logs[name] = log
    plain = open_log(tmp_path / "d-0", config(segment_bytes=600))  # cleanup.policy=delete
    for _ in range(60):
        Writer(plain).put([(b"k", b"v")])
    ratios = {n: log.dirtiness(now).ratio for n, log in logs.items()}  # type: ignore[union-attr]
    assert ratios["b-0"] > ratios["a-0"] >= 0.5 > ratios["c-0"] == 0.0
    cleaner = LogCleaner(
        CleanerSettings(), lambda: [*logs.items(), ("d-0", plain)], clock=lambda: now
    )
    # Dirtiest first; a log being cleaned is not handed out twice; c is clean, d not compacted.
    picked = [cleaner._grab() for _ in range(3)]
    assert [p[0] if p else None for p in picked] == ["b-0", "a-0", None]


def _facts(*specs: tuple[int, int, int, int]) -> list[SegmentFacts]:
    """(base, end, largest_ts, first_ts) with 100 bytes each."""
    return [SegmentFacts(b, e, 100, ts, first) for b, e, ts, first in specs]


def test_dirtiness_bounds_and_compaction_lags() -> None:
    segs = _facts((0, 10, 1_000, 900), (10, 20, 2_000, 1_900), (20, 30, 3_000, 2_900))
    cfg = config(cleanup_policy="compact")
    d = measure(
        segs, first_dirty_offset=10, last_stable_offset=99, active_base=30, config=cfg, now_ms=5_000
    )
    assert (d.end_offset, d.clean_bytes, d.dirty_bytes, d.overdue) == (30, 100, 200, False)
    assert is_due(d, cfg) and d.ratio == 200 / 300
    # The LSO inside segment 20-30: that segment is not cleanable.
    d = measure(
        segs, first_dirty_offset=10, last_stable_offset=25, active_base=30, config=cfg, now_ms=5_000
    )
    assert (d.end_offset, d.dirty_bytes) == (20, 100)
    # min.compaction.lag.ms: the first dirty segment younger than the lag bounds the range.
    lag = config(cleanup_policy="compact", min_compaction_lag_ms=2_500)
    d = measure(
        segs, first_dirty_offset=10, last_stable_offset=99, active_base=30, config=lag, now_ms=5_000
    )
    assert (d.end_offset, d.dirty_bytes) == (20, 100)
    # max.compaction.lag.ms: overdue even below min.cleanable.dirty.ratio.
    strict = config(
        cleanup_policy="compact", max_compaction_lag_ms=3_000, min_cleanable_dirty_ratio="0.99"
    )
    d = measure(
        segs,
        first_dirty_offset=10,
        last_stable_offset=99,
        active_base=30,
        config=strict,
        now_ms=5_000,
    )
    assert d.overdue and is_due(d, strict)
    d = measure(
        segs,
        first_dirty_offset=10,
        last_stable_offset=99,
        active_base=30,
        config=strict,
        now_ms=4_800,
    )
    assert not d.overdue and not is_due(d, strict)
    # Nothing dirty: only a passed delete horizon makes a pass worthwhile.
    d = measure(
        segs, first_dirty_offset=30, last_stable_offset=99, active_base=30, config=cfg, now_ms=5_000
    )
    assert not is_due(d, cfg)
    assert horizon_due(d, 4_000, 5_000) and not horizon_due(d, 6_000, 5_000)
    assert not horizon_due(d, None, 5_000)
