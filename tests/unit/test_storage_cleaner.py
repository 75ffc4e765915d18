"""The log cleaner on pure storage: compaction rules, transactions, swap recovery."""

from __future__ import annotations

import dataclasses
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oncelog.records.batch import DELETE_HORIZON_MASK, BatchHeader, validate_batch
from oncelog.records.builder import build_batch, decode_batch
from oncelog.records.control import build_end_txn_marker
from oncelog.storage import segment_swap
from oncelog.storage.checkpoint import list_snapshots
from oncelog.storage.cleaner import CleanerStats, clean
from oncelog.storage.cleaner_process import CleanerProcess
from oncelog.storage.compaction import compact_log
from oncelog.storage.unified_log import UnifiedLog

from .test_storage_support import NOW, config, open_log

RETENTION = 1_000
CFG = config(
    segment_bytes=600,
    segment_ms=1_000,
    index_interval_bytes=100,
    cleanup_policy="compact",
    delete_retention_ms=RETENTION,
)
DEDUPE = 1 << 20


@dataclass
class Writer:
    """Appends to one log and remembers what every offset held."""

    log: UnifiedLog
    now: int = NOW
    written: dict[int, tuple[bytes | None, bytes | None]] = field(default_factory=dict)
    seqs: dict[int, int] = field(default_factory=dict)
    aborted: set[int] = field(default_factory=set)  # offsets of aborted records
    open_txn: dict[int, list[int]] = field(default_factory=dict)  # pid -> offsets

    def put(
        self,
        records: list[tuple[bytes | None, bytes | None]],
        *,
        pid: int = -1,
        transactional: bool = False,
        compression: int = 0,
    ) -> int:
        seq = -1
        if pid >= 0:
            seq = self.seqs.get(pid, 0)
            self.seqs[pid] = seq + len(records)
        raw = bytearray(
            build_batch(
                [(k, v, None, self.now) for k, v in records],
                producer_id=pid,
                producer_epoch=0 if pid >= 0 else -1,
                base_sequence=seq,
                transactional=transactional,
                compression=compression,
            )
        )
        result = self.log.append(raw, validate_batch(raw), now_ms=self.now)
        for i, rec in enumerate(records):
            self.written[result.base_offset + i] = rec
            if transactional:
                self.open_txn.setdefault(pid, []).append(result.base_offset + i)
        return result.base_offset

    def end(self, pid: int, commit: bool) -> int:
        raw = bytearray(build_end_txn_marker(pid, 0, commit, 0, timestamp_ms=self.now))
        offset = self.log.append_control(raw, validate_batch(raw), now_ms=self.now).base_offset
        offsets = self.open_txn.pop(pid, [])
        if not commit:
            self.aborted.update(offsets)
        return offset

    def roll(self) -> int:
        """Close the segment: a sentinel record in a fresh segment (segment.ms passed)."""
        self.now += 2_000
        end = self.put([(b"sentinel", b"s")])
        self.log.wait_for_roll_flush()  # the closed segment is cleanable once flushed
        return end


def read_batches(log: UnifiedLog) -> list[tuple[BatchHeader, list]]:
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        sl = log.read(offset, 1 << 20)
        if sl is None:
            break
        data = sl.read()
        pos = 0
        while pos < len(data):
            header, records = decode_batch(data, pos)
            out.append((header, records))
            pos += header.size
        offset = out[-1][0].last_offset + 1
    return out


def data_records(log: UnifiedLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [
        (r.offset, r.key, r.value)
        for header, records in read_batches(log)
        if not header.is_control
        for r in records
    ]


def expected_after_cleaning(w: Writer, end: int) -> list[tuple[int, bytes | None, bytes | None]]:
    """The model: below ``end`` only each key's latest non-aborted value, no tombstones;
    at and after ``end`` everything not aborted... kept as written."""
    latest: dict[bytes | None, int] = {}
    for offset in sorted(w.written):
        if offset < end and offset not in w.aborted:
            latest[w.written[offset][0]] = offset
    out = []
    for offset in sorted(w.written):
        key, value = w.written[offset]
        if offset >= end:
            out.append((offset, key, value))
        elif latest.get(key) == offset and value is not None:
            out.append((offset, key, value))
    return out


def full_compaction(log: UnifiedLog, now: int, dedupe: int = DEDUPE) -> int:
    """Passes until the whole log was mapped, then enough for tombstones and markers
    (a stamped horizon needs one more pass, a marker one after its data went)."""
    passes = extra = 0
    end = log.segments[-1].base_offset
    while extra < 4:
        stats = compact_log(log, now_ms=now, dedupe_buffer_bytes=dedupe)
        if stats is None:  # nothing (left) below the active segment
            assert sum(seg.size for seg in log.segments[:-1]) == 0
            break
        passes += 1
        if stats.map_end_offset >= end:
            extra += 1
        now += RETENTION + 1
        assert passes < 200
    return passes


def test_latest_value_per_key_survives_with_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", CFG)
    w = Writer(log)
    for version in range(30):
        for key in range(5):
            w.put([(f"k{key}".encode(), f"v{key}-{version}".encode())])
    w.put([(b"k1", None), (b"k3", None)])  # tombstones
    end = w.roll()
    before = log.size_bytes()
    stats = compact_log(log, now_ms=w.now, dedupe_buffer_bytes=DEDUPE)
    assert stats is not None and stats.map_end_offset == end
    # First pass keeps the tombstones (their horizon starts now), removes the rest.
    got = data_records(log)
    assert [(o, k, v) for o, k, v in got if v is None] == [(150, b"k1", None), (151, b"k3", None)]
    assert log.size_bytes() < before // 5
    compact_log(log, now_ms=w.now + RETENTION, dedupe_buffer_bytes=DEDUPE)
    got = data_records(log)
    assert got == [
        (145, b"k0", b"v0-29"),
        (147, b"k2", b"v2-29"),
        (149, b"k4", b"v4-29"),
        (end, b"sentinel", b"s"),
    ]
    assert got == expected_after_cleaning(w, end)
    # A consumer from the start: offsets strictly increase, gaps allowed.
    assert [o for o, _, _ in got] == sorted({o for o, _, _ in got})
    log.close()
    reopened = open_log(tmp_path / "t-0", CFG)
    assert data_records(reopened) == got
    assert reopened.first_dirty_offset == end


def test_tombstone_horizon_is_stamped_in_the_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", CFG)
    w = Writer(log)
    w.put([(b"a", b"1")])
    w.put([(b"a", None)])
    w.roll()
    compact_log(log, now_ms=w.now, dedupe_buffer_bytes=DEDUPE)
    (tomb,) = [(h, r) for h, r in read_batches(log) if r and r[0].value is None]
    header, records = tomb
    assert header.attributes & DELETE_HORIZON_MASK
    assert header.base_timestamp == w.now + RETENTION
    assert records[0].timestamp == NOW  # absolute timestamps survive the re-encoding
    assert log.pending_delete_horizon == w.now + RETENTION
    compact_log(log, now_ms=w.now + RETENTION - 1, dedupe_buffer_bytes=DEDUPE)
    assert [r.value for _, rs in read_batches(log) for r in rs][:1] == [None]
    compact_log(log, now_ms=w.now + RETENTION, dedupe_buffer_bytes=DEDUPE)
    assert data_records(log) == [(2, b"sentinel", b"s")]
    assert log.pending_delete_horizon is None


def test_aborted_data_removed_markers_go_after_their_data(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", CFG)
    w = Writer(log)
    w.put([(b"a", b"committed")], pid=7, transactional=True)
    commit_at = w.end(7, commit=True)
    w.put([(b"a", b"aborted"), (b"b", b"aborted")], pid=7, transactional=True)
    abort_at = w.end(7, commit=False)
    w.put([(b"a", b"plain")], pid=9)  # pid 9's last batch; pid 7's last batch is the aborted one
    end = w.roll()
    assert log.aborted_transactions(0, end) == [(7, 2)]
    compact_log(log, now_ms=w.now, dedupe_buffer_bytes=DEDUPE)
    # Aborted records gone; pid 7's last batch stays as an empty header.
    batches = read_batches(log)
    assert [(h.base_offset, h.last_offset, h.records_count) for h, _ in batches] == [
        (commit_at, commit_at, 1),  # its txn's batch was seen this pass: kept
        (2, 3, 0),  # the aborted batch, emptied: pid 7's sequence state
        (abort_at, abort_at, 1),
        (5, 5, 1),
        (end, end, 1),
    ]
    assert data_records(log) == [(5, b"a", b"plain"), (end, b"sentinel", b"s")]
    # The aborted index entry is kept while the (empty) batch of its txn remains.
    assert log.aborted_transactions(0, end) == [(7, 2)]
    now = w.now
    for _ in range(3):
        now += RETENTION + 1
        compact_log(log, now_ms=now, dedupe_buffer_bytes=DEDUPE)
    # Commit marker at 1: no data of its txn left -> stamped, then removed.
    offsets = [h.base_offset for h, _ in read_batches(log)]
    assert commit_at not in offsets
    assert offsets == [2, abort_at, 5, end]


def test_producer_sequence_state_survives_replay(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", CFG)
    w = Writer(log)
    for i in range(20):
        w.put([(b"k", str(i).encode())], pid=3)
        w.put([(b"k", str(i).encode())], pid=4, compression=1)
    w.roll()
    compact_log(log, now_ms=w.now, dedupe_buffer_bytes=DEDUPE)
    before = {
        p.producer_id: (p.last_sequence, p.last_data_offset) for p in log.producer_state.producers()
    }
    assert before[3][0] == 19 and before[4][0] == 19
    log.close()
    for offset in list_snapshots(tmp_path / "t-0"):
        os.unlink(tmp_path / "t-0" / f"{offset:020d}.snapshot")
    reopened = open_log(tmp_path / "t-0", CFG)
    after = {
        p.producer_id: (p.last_sequence, p.last_data_offset)
        for p in reopened.producer_state.producers()
    }
    assert after == before
    assert data_records(reopened)[0] == (39, b"k", b"19")


def test_never_cleans_at_or_after_the_lso(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", CFG)
    w = Writer(log)
    for i in range(20):
        w.put([(b"a", str(i).encode())])
    open_at = w.put([(b"a", b"txn")], pid=5, transactional=True)
    for i in range(20, 40):
        w.put([(b"a", str(i).encode())])
    w.roll()
    assert log.last_stable_offset == open_at
    before = data_records(log)
    stats = compact_log(log, now_ms=w.now, dedupe_buffer_bytes=DEDUPE)
    assert stats is not None
    cleaned_end = stats.map_end_offset
    assert 0 < cleaned_end <= open_at
    got = data_records(log)
    assert got == [(cleaned_end - 1, b"a", str(cleaned_end - 1).encode())] + [
        r for r in before if r[0] >= cleaned_end
    ]


def test_crash_before_commit_point_keeps_old_log(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", CFG)
    w = Writer(log)
    for i in range(40):
        w.put([(f"k{i % 3}".encode(), str(i).encode())])
    w.roll()
    before = data_records(log)
    plan = log.plan_cleaning(w.now, dedupe_buffer_bytes=DEDUPE)
    assert plan is not None
    cleaned = next(clean(plan, CleanerStats()))
    # "Crash": leave the .cleaned files and half of the .swap renames.
    d = tmp_path / "t-0"
    base = cleaned.base_offset
    os.rename(d / f"{base:020d}.index.cleaned", d / f"{base:020d}.index.swap")
    copy = tmp_path / "copy"
    shutil.copytree(d, copy)
    reopened = open_log(copy, CFG)
    assert data_records(reopened) == before
    assert not [n for n in os.listdir(copy) if n.endswith((".cleaned", ".swap"))]
    for seg in plan.segments:
        os.close(seg.fd)


@pytest.mark.parametrize("finished_indexes", [False, True])
def test_crash_after_commit_point_completes_the_swap(
    tmp_path: Path, finished_indexes: bool
) -> None:
    log = open_log(tmp_path / "t-0", CFG)
    w = Writer(log)
    for i in range(60):
        w.put([(f"k{i % 3}".encode(), str(i).encode())])
    end = w.roll()
    plan = log.plan_cleaning(w.now, dedupe_buffer_bytes=DEDUPE)
    assert plan is not None and len(plan.segments) > 3
    # One group over every segment (each source segment is nearly full otherwise).
    plan = dataclasses.replace(plan, max_segment_bytes=1 << 20)
    cleaned = next(clean(plan, CleanerStats()))
    assert len(cleaned.source_bases) > 1
    d = tmp_path / "t-0"
    segment_swap.stage(d, cleaned.base_offset)
    copy = tmp_path / "copy"
    shutil.copytree(d, copy)
    if finished_indexes:  # crash inside finish(): old files gone, indexes renamed
        base = cleaned.base_offset
        for b in cleaned.source_bases:
            for suffix in (".log", ".index", ".timeindex", ".txnindex"):
                os.rename(copy / f"{b:020d}{suffix}", copy / f"{b:020d}{suffix}.deleted")
        for suffix in (".index", ".timeindex", ".txnindex"):
            os.rename(copy / f"{base:020d}{suffix}.swap", copy / f"{base:020d}{suffix}")
    reopened = open_log(copy, CFG)
    got = data_records(reopened)
    assert got == [
        (57, b"k0", b"57"),
        (58, b"k1", b"58"),
        (59, b"k2", b"59"),
        (end, b"sentinel", b"s"),
    ]
    bases = [s.base_offset for s in reopened.segments]
    assert bases[0] == cleaned.base_offset and not set(cleaned.source_bases[1:]) & set(bases)
    for seg in plan.segments:
        os.close(seg.fd)


def test_fetch_slice_stays_valid_across_a_swap(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", CFG)
    w = Writer(log)
    for i in range(40):
        w.put([(f"k{i % 2}".encode(), str(i).encode())])
    w.roll()
    sl = log.read(0, 1 << 20)
    assert sl is not None
    raw_before = sl.read()
    compact_log(log, now_ms=w.now, dedupe_buffer_bytes=DEDUPE)
    assert sl.read() == raw_before  # the replaced segment's descriptor is still open
    assert data_records(log)[:2] == [(38, b"k0", b"38"), (39, b"k1", b"39")]


def test_a_segment_cleaned_twice_within_the_delete_delay_keeps_both_pending_sets(
    tmp_path: Path,
) -> None:
    """Two swaps of base offset 0 before file.delete.delay.ms: the second ``*.deleted``
    set must not overwrite the first, or the first's delayed unlink removes the second."""
    log = open_log(tmp_path / "t-0", CFG)
    w = Writer(log)
    for i in range(40):
        w.put([(f"k{i % 2}".encode(), str(i).encode())])
    w.roll()
    compact_log(log, now_ms=w.now, dedupe_buffer_bytes=DEDUPE)
    first = log.read(0, 1 << 20)
    assert first is not None and log.segments[0].base_offset == 0
    first_bytes = first.read()
    for i in range(40, 80):
        w.put([(f"k{i % 2}".encode(), str(i).encode())])
    w.roll()
    compact_log(log, now_ms=w.now, dedupe_buffer_bytes=DEDUPE)
    assert log.segments[0].base_offset == 0
    d = tmp_path / "t-0"
    pending = sorted(p.name for p in d.glob("00000000000000000000.log*.deleted"))
    assert pending == ["00000000000000000000.log.1.deleted", "00000000000000000000.log.deleted"]
    assert first.read() == first_bytes
    expected = expected_after_cleaning(w, log.segments[-1].base_offset)
    log.maybe_flush(w.now)  # the cleaner's sets get their due time now
    log.maybe_flush(w.now + 10 * 60_000)  # past file.delete.delay.ms: both sets go
    assert not list(d.glob("*.deleted"))
    assert (d / "00000000000000000000.log").exists()
    assert data_records(log) == expected


# -- the model test ---------------------------------------------------------------------

KEYS = [f"key-{i}".encode() for i in range(6)]
_op = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(KEYS), st.booleans(), st.sampled_from([-1, 20])),
    st.tuples(st.just("txn"), st.sampled_from([1, 2, 3]), st.sampled_from(KEYS), st.booleans()),
    st.tuples(st.just("end"), st.sampled_from([1, 2, 3]), st.booleans(), st.just(0)),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ops=st.lists(_op, min_size=1, max_size=80),
    compression=st.sampled_from([0, 1, 3]),
    # Tiny buffers map a few keys per pass: the map-full path, many passes.
    dedupe=st.sampled_from([DEDUPE, 24 * 3, 24 * 8]),
)
def test_model_latest_committed_value_per_key(
    tmp_path_factory: pytest.TempPathFactory, ops: list, compression: int, dedupe: int
) -> None:
    path = tmp_path_factory.mktemp("model") / "t-0"
    log = open_log(path, CFG)
    w = Writer(log)
    counter = 0
    for op in ops:
        counter += 1
        value = f"v{counter}".encode()
        if op[0] == "put":
            _, key, tombstone, pid = op
            w.put([(key, None if tombstone else value)], pid=pid, compression=compression)
        elif op[0] == "txn":
            _, pid, key, tombstone = op
            w.put(
                [(key, None if tombstone else value), (key, value + b"b")],
                pid=pid,
                transactional=True,
                compression=compression,
            )
        elif op[1] in w.open_txn:
            w.end(op[1], commit=op[2])
    for pid in sorted(w.open_txn):
        w.end(pid, commit=pid % 2 == 0)
    end = w.roll()
    full_compaction(log, w.now, dedupe)
    got = data_records(log)
    assert got == expected_after_cleaning(w, end)
    for offset, key, value in got:
        assert w.written[offset] == (key, value)
    # Not one aborted record is left: read_uncommitted equals read_committed.
    assert not {o for o, _, _ in got} & w.aborted
    # Every live producer's last data batch is still there (sequence state).
    batches = read_batches(log)
    kept_last = {(h.producer_id, h.last_offset) for h, _ in batches}
    for p in log.producer_state.producers():
        if p.last_data_offset >= 0:
            assert (p.producer_id, p.last_data_offset) in kept_last
    # A marker stays only while a batch of its transaction does (removed after the horizon).
    seen_data: dict[int, bool] = {}
    for h, _ in batches:
        if h.is_control:
            assert seen_data.pop(h.producer_id, False), (
                f"marker at {h.base_offset} outlived its data"
            )
        elif h.is_transactional:
            seen_data[h.producer_id] = True
    log.close()
    reopened = open_log(path, CFG)
    assert data_records(reopened) == got
    assert reopened.last_stable_offset == reopened.log_end_offset
    reopened.close()


def test_child_process_pass_equals_in_thread_pass(tmp_path: Path) -> None:
    logs = []
    for name in ("thread", "process"):
        log = open_log(tmp_path / name / "t-0", CFG)
        w = Writer(log)
        for i in range(200):
            w.put([(f"k{i % 7}".encode(), str(i).encode())], pid=11)
            if i % 50 == 0:
                w.put([(b"t", b"aborted")], pid=12, transactional=True)
                w.end(12, commit=False)
        w.roll()
        logs.append(log)
    worker = CleanerProcess()
    try:
        a = compact_log(logs[0], now_ms=NOW + 5_000, dedupe_buffer_bytes=DEDUPE)
        b = compact_log(logs[1], now_ms=NOW + 5_000, dedupe_buffer_bytes=DEDUPE, run=worker.run)
        assert a is not None and b is not None
        assert (b.records_kept, b.records_removed, b.map_end_offset) == (
            a.records_kept,
            a.records_removed,
            a.map_end_offset,
        )
        assert read_batches(logs[1]) == read_batches(logs[0])
        # The worker is reused, and a pass stopped mid-swap leaves no files behind.
        w = Writer(logs[1], now=NOW + 10_000)
        for i in range(200):
            w.put([(f"k{i % 7}".encode(), str(i).encode())])
        w.roll()

        def stop(stage: str) -> None:
            if stage == "swap":
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            compact_log(
                logs[1], now_ms=w.now, dedupe_buffer_bytes=DEDUPE, run=worker.run, on_stage=stop
            )
        d = tmp_path / "process" / "t-0"
        assert not [n for n in os.listdir(d) if n.endswith((".cleaned", ".swap"))]
        assert compact_log(logs[1], now_ms=w.now, dedupe_buffer_bytes=DEDUPE, run=worker.run)
    finally:
        worker.close()


def test_cleaned_segments_have_consistent_indexes(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", CFG)
    w = Writer(log)
    for i in range(300):
        w.now = NOW + i  # distinct timestamps, so the time index has work to do
        w.put([(f"k{i % 40}".encode(), str(i).encode())])
        if i % 60 == 0:
            w.put([(b"x", b"aborted")], pid=8, transactional=True)
            w.end(8, commit=False)
    w.roll()
    # The first pass keeps the abort markers (and entries) of the data it removes.
    full_compaction(log, w.now)
    log.close()
    reopened = open_log(tmp_path / "t-0", CFG)
    for seg in reopened.segments[:-1]:
        seg.ensure_indexes()
        index_entries = list(
            zip(seg.offset_index._offsets, seg.offset_index._positions, strict=True)
        )
        rebuilt = {pos: h for pos, h in seg.scan(0)}
        for rel, pos in index_entries:  # each entry: a batch start and that batch's last offset
            assert rebuilt[pos].last_offset == seg.base_offset + rel
        if not rebuilt:
            assert len(seg.time_index) == 0  # an emptied segment: nothing indexed
            continue
        ts, off = seg.time_index.last_entry()
        assert ts == max(h.max_timestamp for h in rebuilt.values())
        assert (
            off
            == max(rebuilt.values(), key=lambda h: (h.max_timestamp, -h.base_offset)).last_offset
        )
    batches = [h for seg in reopened.segments for _, h in seg.scan(0)]
    entries = [t for seg in reopened.segments for t in seg.txn_index.entries]
    # Only pid 8's last (aborted) batch is left, as its tail: kept empty, with its entry.
    assert [(t.producer_id, t.first_offset) for t in entries] == [(8, 249)]
    for txn in entries:  # only aborted txns that still have a batch
        assert any(
            h.producer_id == txn.producer_id and txn.first_offset <= h.base_offset < txn.last_offset
            for h in batches
            if not h.is_control
        )
    assert data_records(reopened) == expected_after_cleaning(w, max(w.written))
    kept = [r for h, rs in read_batches(reopened) if not h.is_control for r in rs]
    for r in kept:  # every kept record is found by offset and by timestamp
        sl = reopened.read(r.offset, 1)
        assert sl is not None and r.offset in [x.offset for x in decode_batch(sl.read())[1]]
        assert reopened.offset_for_timestamp(r.timestamp) == (r.offset, r.timestamp)


def test_appends_reads_and_retention_race_the_cleaner_thread(tmp_path: Path) -> None:
    """The cleaner's plan and swap under the log lock against appends, fetches and
    retention on another thread: every fetch is consistent, nothing kept is lost."""
    import threading

    cfg = config(
        segment_bytes=600,
        segment_ms=1_000,
        index_interval_bytes=100,
        cleanup_policy="compact,delete",
        retention_bytes=20_000,
        file_delete_delay_ms=0,
    )
    log = open_log(tmp_path / "t-0", cfg)
    w = Writer(log)
    done = threading.Event()
    errors: list[BaseException] = []

    passes = [0]

    def cleaner() -> None:
        try:
            now = NOW
            while not done.is_set():
                if compact_log(log, now_ms=now, dedupe_buffer_bytes=DEDUPE) is not None:
                    passes[0] += 1
                now += 10
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t = threading.Thread(target=cleaner)
    t.start()
    try:
        for i in range(3000):
            w.now = NOW + i * 5  # rolls by segment.ms too
            w.put([(f"k{i % 25}".encode(), str(i).encode())])
            if i % 100 == 0:
                got = data_records(log)
                offsets = [o for o, _, _ in got]
                assert offsets == sorted(set(offsets))
                assert all(w.written[o] == (k, v) for o, k, v in got)
                log.maybe_flush(w.now)
            if i % 700 == 0:  # retention now and then: some swaps lose the race
                log.apply_retention(w.now)
    finally:
        done.set()
        t.join()
    assert not errors
    assert passes[0] >= 2  # passes really ran alongside (typically 5-10)
    end = w.roll()
    full_compaction(log, w.now + 1)
    got = data_records(log)
    # Retention may have removed a prefix; above the log start, the model holds.
    expected = [r for r in expected_after_cleaning(w, end) if r[0] >= log.log_start_offset]
    assert got == expected
    assert {k for _, k, _ in got} >= {f"k{i}".encode() for i in range(25)}
