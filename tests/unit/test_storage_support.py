"""Shared helpers for the storage tests (imported by the test_storage_* modules)."""

from __future__ import annotations

from pathlib import Path

from oncelog.records.batch import BatchHeader, validate_batch
from oncelog.records.builder import build_batch, decode_batch, iter_batches
from oncelog.records.control import build_end_txn_marker
from oncelog.storage.config import LogConfig
from oncelog.storage.unified_log import AppendResult, UnifiedLog

NOW = 1_700_000_000_000


def make_batch(
    count: int = 1,
    *,
    ts: int = NOW,
    ts_step: int = 0,
    value_size: int = 10,
    producer_id: int = -1,
    epoch: int = -1,
    seq: int = -1,
    transactional: bool = False,
    compression: int = 0,
    tag: int = 0,
) -> tuple[bytearray, BatchHeader]:
    """A valid v2 batch of ``count`` records; record i has timestamp ts + i*ts_step."""
    records = [
        (
            f"k{tag}-{i}".encode(),
            bytes([(tag + i) % 251]) * value_size,
            None,
            ts + i * ts_step,
        )
        for i in range(count)
    ]
    raw = bytearray(
        build_batch(
            records,
            producer_id=producer_id,
            producer_epoch=epoch,
            base_sequence=seq,
            transactional=transactional,
            compression=compression,
        )
    )
    return raw, validate_batch(raw)


def make_marker(
    producer_id: int, epoch: int, commit: bool, coordinator_epoch: int = 0, ts: int = NOW
) -> tuple[bytearray, BatchHeader]:
    raw = bytearray(
        build_end_txn_marker(producer_id, epoch, commit, coordinator_epoch, timestamp_ms=ts)
    )
    return raw, validate_batch(raw)


def config(**props: object) -> LogConfig:
    return LogConfig.from_props({k.replace("_", "."): str(v) for k, v in props.items()})


# Every log open_log returned during the running test; conftest's autouse fixture
# releases them at teardown, so logs a test never closes (or "crashes" on purpose by
# dropping them) do not hold their segments' descriptors for the rest of the session.
_opened: list[UnifiedLog] = []


def open_log(path: Path, cfg: LogConfig | None = None, now: int = NOW) -> UnifiedLog:
    # Reopening a directory whose log the test dropped stands for a restart after a
    # crash: the dead process's background roll flushes stop where they are (abandon
    # cancels them and waits), instead of writing under the new instance.
    for earlier in _opened:
        if earlier.directory == path and not earlier.closed:
            earlier.abandon()
    log = UnifiedLog.open(path, cfg or LogConfig(), now_ms=now)
    _opened.append(log)
    return log


def release_opened_logs() -> None:
    """Teardown: give back the files of every log open_log returned and nobody closed.
    No flush (``abandon``), like the crash a dropped log stands for: a later instance may
    have recovered the same directory since."""
    while _opened:
        _opened.pop().abandon()


def append(log: UnifiedLog, count: int = 1, now: int = NOW, **kw: object) -> AppendResult:
    raw, header = make_batch(count, **kw)  # type: ignore[arg-type]
    return log.append(raw, header, now_ms=now)


def read_offsets(log: UnifiedLog, offset: int, max_bytes: int = 1 << 30, **kw: object) -> list[int]:
    """Offsets of every record a fetch at ``offset`` returns (whole batches)."""
    sl = log.read(offset, max_bytes, **kw)  # type: ignore[arg-type]
    if sl is None:
        return []
    data = sl.read()
    out: list[int] = []
    for header, records in iter_batches(data, allow_partial=False):
        assert records, header
        out.extend(r.offset for r in records)
    return out


def read_all(log: UnifiedLog, start: int | None = None) -> list[int]:
    """Every offset from ``start`` to the end, fetching repeatedly like a consumer."""
    offset = log.log_start_offset if start is None else start
    seen: list[int] = []
    while offset < log.log_end_offset:
        got = read_offsets(log, offset, 1 << 20)
        assert got, f"no progress at {offset}"
        seen.extend(o for o in got if o >= offset)
        offset = got[-1] + 1
    return seen


def decode_slice(data: bytes) -> list[tuple[BatchHeader, list]]:
    out = []
    pos = 0
    while pos < len(data):
        header, records = decode_batch(data, pos)
        out.append((header, records))
        pos += header.size
    return out
