from __future__ import annotations

from typing import Any

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from oncelog.records.batch import CONTROL_MASK, TRANSACTIONAL_MASK, BatchHeader
from oncelog.storage.producer_state import (
    SEQ_MOD,
    BatchMetadata,
    CompletedTxn,
    OutOfOrderSequence,
    ProducerStateError,
    ProducerStateManager,
)

E = ErrorCode
DAY = 86_400_000


def hdr(
    pid: int = 1,
    epoch: int = 0,
    seq: int = 0,
    count: int = 1,
    *,
    txn: bool = False,
    control: bool = False,
    ts: int = 1_000,
    base_offset: int = 0,
) -> BatchHeader:
    attrs = (TRANSACTIONAL_MASK if txn else 0) | (CONTROL_MASK if control else 0)
    return BatchHeader(
        base_offset=base_offset,
        batch_length=49 + 10 * count,
        partition_leader_epoch=0,
        magic=2,
        crc=0,
        attributes=attrs,
        last_offset_delta=count - 1,
        base_timestamp=ts,
        max_timestamp=ts,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        records_count=count,
    )


def produce(m: ProducerStateManager, h: BatchHeader, now: int = 0) -> int | BatchMetadata:
    """Broker path: validate, then append at the log end. Returns base offset or the duplicate."""
    dup = m.check_append(h)
    if dup is not None:
        return dup
    base = m.last_offset + 1
    m.on_append(h, base_offset=base, now_ms=now)
    return base


def code_of(m: ProducerStateManager, h: BatchHeader) -> ErrorCode:
    with pytest.raises(ProducerStateError) as info:
        m.check_append(h)
    return info.value.error_code


def marker(
    m: ProducerStateManager, pid: int, epoch: int, commit: bool, coord: int = 0, now: int = 0
) -> CompletedTxn | None:
    m.check_marker(pid, epoch, coord)
    return m.on_marker(pid, epoch, commit, coord, offset=m.last_offset + 1, now_ms=now)


# -- idempotent sequence rules --------------------------------------------------------------


def test_new_producer_and_in_sequence_appends():
    m = ProducerStateManager()
    assert produce(m, hdr(seq=0, count=3, ts=5), now=10) == 0
    assert produce(m, hdr(seq=3, count=2, ts=6), now=11) == 3
    p = m.producer(1)
    assert p is not None
    assert (p.producer_epoch, p.last_sequence, p.last_timestamp) == (0, 4, 11)
    assert p.current_txn_first_offset is None and p.coordinator_epoch == -1
    assert p.batches == (BatchMetadata(0, 2, 0, 2, 5), BatchMetadata(3, 4, 3, 4, 6))
    assert m.last_offset == 4 and m.producer(2) is None


def test_unknown_producer_continues_at_any_sequence():
    """KIP-360: no state for a producer means any sequence is accepted (Kafka >= 2.5)."""
    m = ProducerStateManager()
    assert m.check_append(hdr(seq=7)) is None
    assert m.check_append(hdr(seq=7, txn=True)) is None
    assert m.check_append(hdr(seq=7, epoch=3)) is None
    assert produce(m, hdr(seq=7, count=2)) == 0
    # From then on the ordinary rules hold for that epoch.
    assert code_of(m, hdr(seq=10)) == E.out_of_order_sequence_number
    assert produce(m, hdr(seq=9)) == 2


def test_invalid_batches_and_non_idempotent():
    m = ProducerStateManager()
    assert code_of(m, hdr(seq=-1)) == E.invalid_record
    assert code_of(m, hdr(seq=0, control=True)) == E.invalid_record
    assert m.check_append(hdr(pid=-1, epoch=-1, seq=-1)) is None
    m.on_append(hdr(pid=-1, epoch=-1, seq=-1, count=4), base_offset=0, now_ms=0)
    assert m.producers() == [] and m.last_offset == 3
    with pytest.raises(ValueError):
        m.on_append(hdr(control=True), base_offset=4, now_ms=0)


def test_lower_epoch_is_fenced():
    m = ProducerStateManager()
    produce(m, hdr(epoch=2))
    assert code_of(m, hdr(epoch=1, seq=1)) == E.invalid_producer_epoch
    assert code_of(m, hdr(epoch=1, seq=0)) == E.invalid_producer_epoch


def test_duplicates_of_last_five_return_original_offsets():
    m = ProducerStateManager()
    offsets = [0, 2, 4, 6, 8, 10, 12]
    assert [produce(m, hdr(seq=2 * i, count=2)) for i in range(7)] == offsets
    for i in range(2, 7):  # the last five are cached
        dup = m.check_append(hdr(seq=2 * i, count=2))
        assert dup == BatchMetadata(2 * i, 2 * i + 1, offsets[i], offsets[i] + 1, 1_000)
    # Older batches no longer cached are out of order, as in current Kafka
    # (ProducerAppendInfo.checkSequence): no broker answers DUPLICATE_SEQUENCE_NUMBER.
    assert code_of(m, hdr(seq=2, count=2)) == E.out_of_order_sequence_number
    assert code_of(m, hdr(seq=0, count=1)) == E.out_of_order_sequence_number
    # A differently split range wholly in the past is not a duplicate either.
    assert code_of(m, hdr(seq=9, count=3)) == E.out_of_order_sequence_number
    # Only an exact (first, last) match is a cached duplicate: a different batch reusing
    # a cached batch's first sequence (a client that reuses sequences after an abort)
    # must fail, or the client counts it delivered while no log holds it.
    assert code_of(m, hdr(seq=12, count=1)) == E.out_of_order_sequence_number
    assert code_of(m, hdr(seq=12, count=3)) == E.out_of_order_sequence_number
    assert m.last_offset == 13  # nothing was appended by the retries


def test_sequence_reused_after_abort_is_out_of_order_not_duplicate():
    """A lost Produce response, an abort, then a *different* batch reusing the sequence:
    Kafka answers OUT_OF_ORDER_SEQUENCE_NUMBER, so the client fails the transaction. A
    DUPLICATE_SEQUENCE_NUMBER would make the client count the batch delivered (lost data)."""
    m = ProducerStateManager()
    for seq in range(0, 22, 2):
        produce(m, hdr(pid=5, seq=seq, count=2, txn=True))
    assert produce(m, hdr(pid=5, seq=22, count=2, txn=True)) == 22  # answer lost on the wire
    marker(m, 5, 0, commit=False)
    with pytest.raises(OutOfOrderSequence) as info:
        m.check_append(hdr(pid=5, seq=22, count=1, txn=True))
    exc = info.value
    assert exc.error_code == E.out_of_order_sequence_number
    assert (exc.producer_id, exc.producer_epoch, exc.first_seq, exc.last_seq) == (5, 0, 22, 22)
    assert exc.expected_seq == 24
    assert "producer 5 epoch 0 sent sequences 22..22" in str(exc)
    # The exact aborted batch again is out of order too: its transaction has ended.
    assert code_of(m, hdr(pid=5, seq=22, count=2, txn=True)) == E.out_of_order_sequence_number


def test_same_sized_batch_reusing_an_aborted_batchs_sequences_is_out_of_order():
    """TV1 keeps the epoch across an abort: a new batch of the same size with an aborted
    batch's sequences must not be answered as that batch's duplicate (its records would be
    counted delivered and never committed). A retry inside the open transaction still is."""
    m = ProducerStateManager()
    assert produce(m, hdr(pid=5, seq=0, count=2, txn=True)) == 0
    retry = m.check_append(hdr(pid=5, seq=0, count=2, txn=True))
    assert isinstance(retry, BatchMetadata) and retry.first_offset == 0  # open txn: duplicate
    marker(m, 5, 0, commit=False)
    with pytest.raises(OutOfOrderSequence) as info:
        m.check_append(hdr(pid=5, seq=0, count=2, txn=True))
    assert "ended transaction" in str(info.value)
    # Idempotent (non-transactional) producers keep Kafka's rule.
    assert produce(m, hdr(pid=6, seq=0, count=2)) == 3
    assert isinstance(m.check_append(hdr(pid=6, seq=0, count=2)), BatchMetadata)


def test_gaps_and_overlaps_are_out_of_order():
    m = ProducerStateManager()
    produce(m, hdr(seq=0, count=5))
    assert code_of(m, hdr(seq=6)) == E.out_of_order_sequence_number
    assert code_of(m, hdr(seq=3, count=4)) == E.out_of_order_sequence_number  # straddles 4
    assert code_of(m, hdr(seq=SEQ_MOD - 1)) == E.out_of_order_sequence_number  # "behind" 0..4
    assert produce(m, hdr(seq=5)) == 5


def test_sequence_wraps_around():
    m = ProducerStateManager()
    m.on_append(hdr(seq=SEQ_MOD - 3, count=2), base_offset=0, now_ms=0)  # replayed state
    assert produce(m, hdr(seq=SEQ_MOD - 1)) == 2
    assert produce(m, hdr(seq=0, count=3)) == 3
    assert m.check_append(hdr(seq=SEQ_MOD - 1)) == BatchMetadata(
        SEQ_MOD - 1, SEQ_MOD - 1, 2, 2, 1_000
    )
    assert produce(m, hdr(seq=3)) == 6
    # A batch spanning the wrap point.
    m2 = ProducerStateManager()
    m2.on_append(hdr(seq=SEQ_MOD - 5, count=3), base_offset=0, now_ms=0)
    assert produce(m2, hdr(seq=SEQ_MOD - 2, count=4)) == 3
    assert m2.producer(1).last_sequence == 1  # type: ignore[union-attr]
    assert code_of(m2, hdr(seq=3)) == E.out_of_order_sequence_number
    assert produce(m2, hdr(seq=2)) == 7
    for i in range(4):
        produce(m2, hdr(seq=3 + i))
    assert code_of(m2, hdr(seq=SEQ_MOD - 2, count=4)) == E.out_of_order_sequence_number


def test_epoch_bump_requires_sequence_zero_and_resets_cache():
    m = ProducerStateManager()
    produce(m, hdr(epoch=0, seq=0, count=3))
    assert code_of(m, hdr(epoch=1, seq=3)) == E.out_of_order_sequence_number
    assert produce(m, hdr(epoch=1, seq=0)) == 3
    p = m.producer(1)
    assert p is not None and p.producer_epoch == 1 and len(p.batches) == 1
    assert code_of(m, hdr(epoch=0, seq=0, count=3)) == E.invalid_producer_epoch
    assert produce(m, hdr(epoch=1, seq=1)) == 4


def test_non_transactional_batch_during_transaction():
    m = ProducerStateManager()
    produce(m, hdr(seq=0, txn=True))
    assert code_of(m, hdr(seq=1)) == E.invalid_txn_state
    assert produce(m, hdr(seq=1, txn=True)) == 1
    assert m.ongoing_transactions() == [(1, 0, 0)]  # the txn keeps its first offset


# -- transactions and markers ---------------------------------------------------------------


def test_commit_and_abort_markers_complete_transactions():
    m = ProducerStateManager()
    produce(m, hdr(pid=1, seq=0, count=2, txn=True))
    produce(m, hdr(pid=2, seq=0, txn=True))
    produce(m, hdr(pid=1, seq=2, txn=True))
    assert m.producer(1).current_txn_first_offset == 0  # type: ignore[union-attr]
    assert marker(m, 1, 0, commit=True, coord=3) == CompletedTxn(1, 0, 4, False)
    assert marker(m, 2, 0, commit=False, coord=3) == CompletedTxn(2, 2, 5, True)
    assert m.first_unstable_offset() is None and m.ongoing_transactions() == []
    p = m.producer(1)
    assert p is not None and p.coordinator_epoch == 3 and p.current_txn_first_offset is None
    assert p.last_sequence == 2  # same epoch: the cache survives, sequences continue
    assert produce(m, hdr(pid=1, seq=3)) == 6  # no txn open, plain idempotent write is fine
    assert marker(m, 1, 0, commit=True, coord=3) is None  # empty txn on this partition
    assert m.last_offset == 7


def test_marker_with_bumped_epoch_resets_sequences():
    m = ProducerStateManager()
    produce(m, hdr(seq=0, count=3, txn=True))
    assert marker(m, 1, 1, commit=False) == CompletedTxn(1, 0, 3, True)
    p = m.producer(1)
    assert p is not None and p.producer_epoch == 1 and p.batches == () and p.last_sequence == -1
    assert code_of(m, hdr(epoch=0, seq=3, txn=True)) == E.invalid_producer_epoch
    assert code_of(m, hdr(epoch=1, seq=3, txn=True)) == E.out_of_order_sequence_number
    assert produce(m, hdr(epoch=1, seq=0, txn=True)) == 4


def test_marker_for_unknown_producer_creates_state():
    m = ProducerStateManager()
    assert marker(m, 9, 4, commit=True, coord=2, now=50) is None
    p = m.producer(9)
    assert p is not None and (p.producer_epoch, p.coordinator_epoch, p.last_timestamp) == (4, 2, 50)


def test_check_marker_fencing():
    m = ProducerStateManager()
    m.check_marker(5, 0, 0)  # unknown producer: nothing to check
    produce(m, hdr(pid=5, epoch=3, txn=True))
    m.on_marker(5, 3, True, 7, offset=1, now_ms=0)
    with pytest.raises(ProducerStateError) as info:
        m.check_marker(5, 2, 7)
    assert info.value.error_code == E.invalid_producer_epoch
    with pytest.raises(ProducerStateError) as info:
        m.check_marker(5, 3, 6)
    assert info.value.error_code == E.transaction_coordinator_fenced
    m.check_marker(5, 3, 7)
    m.check_marker(5, 4, 8)


def test_first_unstable_offset_with_overlapping_transactions():
    m = ProducerStateManager()
    assert m.first_unstable_offset() is None
    produce(m, hdr(pid=1, txn=True))  # 0
    produce(m, hdr(pid=2, txn=True))  # 1
    produce(m, hdr(pid=3, epoch=2, txn=True))  # 2
    produce(m, hdr(pid=4))  # 3, idempotent only
    assert m.first_unstable_offset() == 0
    assert m.ongoing_transactions() == [(1, 0, 0), (2, 0, 1), (3, 2, 2)]
    marker(m, 2, 0, commit=True)  # 4
    assert m.first_unstable_offset() == 0
    marker(m, 1, 0, commit=False)  # 5
    assert m.first_unstable_offset() == 2
    produce(m, hdr(pid=1, seq=1, txn=True))  # 6
    assert m.first_unstable_offset() == 2
    marker(m, 3, 2, commit=True)  # 7
    assert m.first_unstable_offset() == 6
    assert m.ongoing_transactions() == [(1, 0, 6)]


def test_finished_transactions_do_not_pile_up_under_a_long_one():
    m = ProducerStateManager()
    produce(m, hdr(pid=0, txn=True))
    for i in range(1000):
        produce(m, hdr(pid=1, seq=i, txn=True))
        marker(m, 1, 0, commit=True)
    assert m.first_unstable_offset() == 0
    assert len(m._txn_heap) <= 40


# -- expiration and truncation --------------------------------------------------------------


def test_expire_idle_producers_with_injected_clock():
    m = ProducerStateManager(producer_id_expiration_ms=1_000)
    produce(m, hdr(pid=1), now=0)
    produce(m, hdr(pid=2, txn=True), now=0)
    produce(m, hdr(pid=3), now=500)
    assert m.expire(999) == []
    assert m.expire(1_000) == [1]  # pid 2 is idle too but has an open transaction
    assert m.expire(1_499) == []
    assert m.expire(10_000) == [3]
    assert [p.producer_id for p in m.producers()] == [2]
    # Expired state: the producer continues at its next sequence (KIP-360).
    assert m.check_append(hdr(pid=1, seq=1)) is None
    assert produce(m, hdr(pid=1, seq=0), now=10_000) == 3
    marker(m, 2, 0, commit=True, now=10_000)
    assert m.expire(10_999) == [] and m.expire(11_000) == [1, 2]


def test_truncate_head_evicts_producers_whose_data_is_gone():
    m = ProducerStateManager()
    produce(m, hdr(pid=1, count=3))  # 0..2
    produce(m, hdr(pid=2, txn=True))  # 3
    produce(m, hdr(pid=3))  # 4
    produce(m, hdr(pid=4))  # 5
    marker(m, 5, 0, commit=True)  # 6: marker-only producer, no data
    m.truncate_head(5)
    assert [p.producer_id for p in m.producers()] == [2, 4]
    assert m.check_append(hdr(pid=3, seq=1)) is None  # its state went with its data
    assert m.first_unstable_offset() == 3  # the open txn survives; callers clamp the LSO
    m.truncate_head(100)
    assert m.last_offset == 99 and [p.producer_id for p in m.producers()] == [2]


# -- snapshots ------------------------------------------------------------------------------


def busy_manager() -> ProducerStateManager:
    m = ProducerStateManager(producer_id_expiration_ms=5_000)
    for i in range(7):
        produce(m, hdr(pid=1, seq=i * 2, count=2, ts=100 + i), now=i)
    produce(m, hdr(pid=2, epoch=3, txn=True), now=7)
    produce(m, hdr(pid=3, txn=True), now=8)
    marker(m, 3, 1, commit=False, coord=4, now=9)
    produce(m, hdr(pid=4, epoch=1, txn=True), now=10)
    return m


def state(m: ProducerStateManager) -> tuple[Any, ...]:
    return (m.producers(), m.ongoing_transactions(), m.first_unstable_offset(), m.last_offset)


def test_snapshot_round_trip():
    m = busy_manager()
    data = m.snapshot()
    r = ProducerStateManager.from_snapshot(data, producer_id_expiration_ms=5_000)
    assert state(r) == state(m) and r.snapshot() == data
    assert r.producer_id_expiration_ms == 5_000
    assert r.check_append(hdr(pid=1, seq=12, count=2)) == BatchMetadata(12, 13, 12, 13, 106)
    assert code_of(r, hdr(pid=1, seq=2, count=2)) == E.out_of_order_sequence_number
    assert code_of(r, hdr(pid=2, epoch=3, seq=1)) == E.invalid_txn_state
    assert marker(r, 2, 3, commit=True) == CompletedTxn(2, 14, 18, False)
    assert r.first_unstable_offset() == 17
    empty = ProducerStateManager().snapshot()
    assert state(ProducerStateManager.from_snapshot(empty, producer_id_expiration_ms=1)) == (
        [],
        [],
        None,
        -1,
    )


def test_snapshot_corruption_is_detected():
    data = busy_manager().snapshot()
    for i in range(len(data)):
        bad = bytearray(data)
        bad[i] ^= 0x5A
        with pytest.raises(ValueError):
            ProducerStateManager.from_snapshot(bytes(bad), producer_id_expiration_ms=1)
    for n in (0, 1, 4, 5, len(data) - 1):
        with pytest.raises(ValueError):
            ProducerStateManager.from_snapshot(data[:n], producer_id_expiration_ms=1)
    body = data[5:] + b"\x00"  # well-formed CRC but trailing junk
    junk = data[:1] + crc32c.crc32c(body).to_bytes(4, "big") + body
    with pytest.raises(ValueError, match="trailing"):
        ProducerStateManager.from_snapshot(junk, producer_id_expiration_ms=1)


# -- property tests -------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_simulated_idempotent_producer(data: st.DataObject) -> None:
    """Retries, duplicates, reordering and zombie sessions: each range lands once, in order."""
    sizes = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=25), label="sizes")
    start = data.draw(st.sampled_from([0, 0, SEQ_MOD - 6]), label="start")
    m = ProducerStateManager()
    known: int | None = None  # the epoch the broker should know; None = no state yet
    if start:  # continue a producer whose state came from the log, to cross the wrap
        m.on_append(hdr(seq=start - 1), base_offset=0, now_ms=0)
        known = 0
    firsts: list[list[int]] = []  # per epoch (session): first sequence of each batch
    nxt: list[int] = []  # per epoch: index of the next batch the broker must accept
    accepted: dict[tuple[int, int], BatchMetadata] = {}
    lowest: dict[int, int] = {}  # per epoch: the first batch accepted (KIP-360: any, without state)
    log: list[tuple[int, int, int]] = []  # (epoch, batch index, base offset) in log order
    for _ in range(data.draw(st.integers(1, 80), label="steps")):
        if not firsts or (len(firsts) < 4 and data.draw(st.integers(0, 9)) == 0):
            seq = start if not firsts else 0  # a new session restarts sequences
            firsts.append([])
            nxt.append(0)
            for s in sizes:
                firsts[-1].append(seq)
                seq = (seq + s) % SEQ_MOD
        # Mostly the live session; sometimes an in-flight retry from an older one.
        ep = data.draw(st.sampled_from([len(firsts) - 1] * 4 + list(range(len(firsts)))))
        i = data.draw(st.integers(0, min(nxt[ep] + 2, len(sizes) - 1)))
        h = hdr(epoch=ep, seq=firsts[ep][i], count=sizes[i])
        n = nxt[ep]
        if known is None:
            want: Any = None  # KIP-360: a producer without state starts anywhere
        elif ep < known:
            want = E.invalid_producer_epoch
        elif ep > known or i >= n:
            want = None if i == n else E.out_of_order_sequence_number
        elif i >= max(lowest[ep], n - ProducerStateManager.MAX_CACHED_BATCHES):
            want = accepted[(ep, i)]
        else:
            want = E.out_of_order_sequence_number
        try:
            got: Any = m.check_append(h)
        except ProducerStateError as exc:
            got = exc.error_code
        assert got == want
        if got is None:
            base = m.last_offset + 1
            m.on_append(h, base_offset=base, now_ms=0)
            accepted[(ep, i)] = BatchMetadata(
                h.base_sequence, h.last_sequence, base, base + sizes[i] - 1, 1_000
            )
            log.append((ep, i, base))
            lowest.setdefault(ep, i)
            nxt[ep], known = i + 1, ep
    # Per epoch the log holds batches 0..n-1 exactly once, in order, at contiguous offsets.
    for e in range(len(firsts)):
        assert [i for ep, i, _ in log if ep == e] == list(range(lowest.get(e, 0), nxt[e]))
    expected = 1 if start else 0
    for _, i, base in log:
        assert base == expected
        expected += sizes[i]


PIDS = st.integers(0, 3)
OPS = st.one_of(
    st.tuples(
        st.just("append"),
        PIDS,
        st.integers(0, 2),
        st.integers(0, 12),
        st.integers(1, 3),
        st.booleans(),
    ),
    st.tuples(st.just("marker"), PIDS, st.integers(0, 2), st.booleans(), st.integers(0, 3)),
    st.tuples(st.just("expire"), st.integers(0, 3_000)),
    st.tuples(st.just("truncate"), st.integers(0, 40)),
)


def apply(m: ProducerStateManager, op: tuple[Any, ...], now: int, validate: bool) -> Any:
    kind = op[0]
    try:
        if kind == "append":
            _, pid, epoch, seq, count, txn = op
            h = hdr(pid=pid, epoch=epoch, seq=seq, count=count, txn=txn, ts=now)
            if validate and (dup := m.check_append(h)) is not None:
                return dup
            m.on_append(h, base_offset=m.last_offset + 1, now_ms=now)
            return None
        if kind == "marker":
            _, pid, epoch, commit, coord = op
            if validate:
                m.check_marker(pid, epoch, coord)
            return m.on_marker(pid, epoch, commit, coord, offset=m.last_offset + 1, now_ms=now)
        if kind == "expire":
            return m.expire(now + op[1])
        m.truncate_head(op[1])
        return None
    except ProducerStateError as exc:
        return exc.error_code


@settings(max_examples=200, deadline=None)
@given(st.lists(OPS, max_size=30), st.lists(OPS, max_size=30), st.booleans())
def test_snapshot_preserves_behaviour(setup: list[Any], probe: list[Any], validate: bool) -> None:
    m = ProducerStateManager(producer_id_expiration_ms=1_000)
    for t, op in enumerate(setup):
        apply(m, op, t * 100, validate)
    data = m.snapshot()
    r = ProducerStateManager.from_snapshot(data, producer_id_expiration_ms=1_000)
    assert r.snapshot() == data and state(r) == state(m)
    for t, op in enumerate(probe, start=len(setup)):
        assert apply(m, op, t * 100, True) == apply(r, op, t * 100, True)
        assert state(r) == state(m)
    assert r.snapshot() == m.snapshot()


def test_loading_keeps_producers_with_no_data_cached():
    """``keep_dataless`` (log loading): a marker-only producer stays, one whose data is gone
    does not."""
    m = ProducerStateManager()
    produce(m, hdr(pid=1, count=3))  # 0..2
    marker(m, 5, 0, commit=True)  # 3: marker-only producer, no data
    m.truncate_head(3, keep_dataless=True)
    assert [p.producer_id for p in m.producers()] == [5]
