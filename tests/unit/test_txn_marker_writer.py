"""The one marker writer against real partition logs: what it appends, whom it tells."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from oncelog.coordinator.internal_topics import CONSUMER_OFFSETS_TOPIC
from oncelog.storage.config import LogConfig
from oncelog.storage.unified_log import UnifiedLog
from oncelog.txn.marker_writer import MarkerWriter
from oncelog.txn.messages import TxnMarker
from tests.unit.test_storage_support import NOW, append

E = ErrorCode
PID = 7


class Logs:
    def __init__(self, path: Path) -> None:
        self.logs = {
            tp: UnifiedLog.open(path / f"{tp[0]}-{tp[1]}", LogConfig(), now_ms=NOW)
            for tp in (("out", 0), (CONSUMER_OFFSETS_TOPIC, 3))
        }

    def partition(self, name: str, index: int) -> UnifiedLog | None:
        return self.logs.get((name, index))


class Woken:
    def __init__(self) -> None:
        self.keys: list[tuple[str, int]] = []

    def notify(self, key: tuple[str, int]) -> None:
        self.keys.append(key)


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[Logs]:
    logs = Logs(tmp_path)
    yield logs
    for log in logs.logs.values():
        log.close()


def open_txn(log: UnifiedLog, epoch: int = 0) -> None:
    append(log, producer_id=PID, epoch=epoch, seq=0, transactional=True)


def test_marker_wakes_fetches_and_settles_offsets_only_on_consumer_offsets(logs: Logs) -> None:
    woken, settled = Woken(), []
    writer = MarkerWriter(logs, woken, lambda p, pid, commit: settled.append((p, pid, commit)))
    for tp in logs.logs:
        open_txn(logs.logs[tp])
    abort = TxnMarker(PID, 0, False, 2)
    assert writer.write("out", 0, abort, now_ms=NOW) is E.none
    assert writer.write(CONSUMER_OFFSETS_TOPIC, 3, abort, now_ms=NOW) is E.none
    assert woken.keys == [("out", 0), (CONSUMER_OFFSETS_TOPIC, 3)]
    assert settled == [(3, PID, False)]
    for log in logs.logs.values():
        assert log.log_end_offset == 2 and log.last_stable_offset == 2


def test_only_if_written_skips_partitions_without_an_open_transaction(logs: Logs) -> None:
    woken, settled = Woken(), []
    writer = MarkerWriter(logs, woken, lambda p, pid, commit: settled.append((p, pid, commit)))
    commit = TxnMarker(PID, 0, True, 2)
    assert (
        writer.write(CONSUMER_OFFSETS_TOPIC, 3, commit, now_ms=NOW, only_if_written=True) is E.none
    )
    assert logs.logs[(CONSUMER_OFFSETS_TOPIC, 3)].log_end_offset == 0
    assert (woken.keys, settled) == ([], [])
    # The admin path writes regardless (the partition may hold a transaction we do not know).
    assert writer.write(CONSUMER_OFFSETS_TOPIC, 3, commit, now_ms=NOW) is E.none
    assert logs.logs[(CONSUMER_OFFSETS_TOPIC, 3)].log_end_offset == 1
    assert settled == [(3, PID, True)]


def test_rejected_or_unknown_partition_tells_nobody(logs: Logs) -> None:
    woken, settled = Woken(), []
    writer = MarkerWriter(logs, woken, lambda p, pid, commit: settled.append((p, pid, commit)))
    open_txn(logs.logs[(CONSUMER_OFFSETS_TOPIC, 3)], epoch=5)
    stale = TxnMarker(PID, 4, False, 2)
    assert writer.write(CONSUMER_OFFSETS_TOPIC, 3, stale, now_ms=NOW) is E.invalid_producer_epoch
    assert writer.write("out", 9, stale, now_ms=NOW) is E.unknown_topic_or_partition
    assert (woken.keys, settled) == ([], [])
    assert logs.logs[(CONSUMER_OFFSETS_TOPIC, 3)].last_stable_offset == 0  # still open
