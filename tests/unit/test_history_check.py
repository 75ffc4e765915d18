"""oncelog.testing.history: a valid history passes, and each anomaly is found, alone."""

from __future__ import annotations

import copy

from oncelog.testing.history import Outcome, Poll, Txn, check


def history() -> tuple[list[Txn], list[Poll], dict[int, list[tuple[int, bytes]]]]:
    """Writer a: txn 0 committed (a0 -> p0@0, a1 -> p1@0), txn 1 aborted (a2 -> p0@2);
    writer b: txn 0 committed (b0 -> p0@4). Markers at p0@1, p0@3, p0@5 and p1@1.
    Consumer c polls everything committed after the commits were asked for."""
    txns = [
        Txn("a", 0, [(0, b"a0", 0), (1, b"a1", 0)], 1.0, Outcome.COMMITTED),
        Txn("a", 1, [(0, b"a2", 2)], None, Outcome.ABORTED),
        Txn("b", 0, [(0, b"b0", 4)], 3.0, Outcome.COMMITTED),
    ]
    polls = [
        Poll("c", 1, 0, 0, b"a0", 2.0),
        Poll("c", 1, 1, 0, b"a1", 2.0),
        Poll("c", 1, 0, 4, b"b0", 4.0),
    ]
    final = {0: [(0, b"a0"), (4, b"b0")], 1: [(0, b"a1")]}
    return txns, polls, final


def test_a_valid_history_has_no_anomaly() -> None:
    assert check(*history()) == {}


def test_aborted_read() -> None:
    txns, polls, final = history()
    polls.append(Poll("c", 1, 0, 2, b"a2", 5.0))  # after b0@4: also nonmonotonic
    found = check(txns, polls, final)
    assert sorted(found) == ["aborted-read", "nonmonotonic-poll", "precommitted-read"]
    assert found["aborted-read"] == ["c polled b'a2' (a#1)"]


def test_aborted_value_in_the_final_read() -> None:
    txns, polls, final = history()
    final[0].insert(1, (2, b"a2"))
    found = check(txns, polls, final)
    assert sorted(found) == ["aborted-read", "poll-skip"]  # c's polls 0, 4 skip it
    assert found["aborted-read"] == ["a#1 in the final read: [b'a2']"]


def test_lost_write() -> None:
    txns, polls, final = history()
    final[1] = []
    assert check(txns, [p for p in polls if p.partition == 0], final) == {
        "lost-write": ["a#0: [b'a1']"]
    }


def test_torn_transaction_of_unknown_outcome() -> None:
    txns, polls, final = history()
    txns.append(Txn("d", 0, [(1, b"d0", None), (1, b"d1", None)], 5.0, Outcome.UNKNOWN))
    assert check(txns, polls, final) == {}  # wholly invisible: fine
    final[1].append((2, b"d0"))
    assert check(txns, polls, final) == {"torn-transaction": ["d#0: only [b'd0']"]}
    final[1].append((3, b"d1"))
    assert check(txns, polls, final) == {}  # wholly visible: fine


def test_duplicate() -> None:
    txns, polls, final = history()
    final[1].append((2, b"a1"))
    found = check(txns, polls, final)
    assert found["duplicate"] == ["b'a1' at [(1, 0), (1, 2)]"]
    assert sorted(found) == ["duplicate", "inconsistent-offset"]  # acked at 1@0 only


def test_inconsistent_offset() -> None:
    txns, polls, final = history()
    polls.append(Poll("e", 1, 0, 0, b"b0", 6.0))
    found = check(txns, polls, final)
    assert found["inconsistent-offset"][0] == "0@0: b'a0' and b'b0'"
    assert sorted(found) == ["duplicate", "inconsistent-offset"]


def test_nonmonotonic_poll_and_poll_skip_within_a_session() -> None:
    txns, polls, final = history()
    p0 = [p for p in polls if p.partition == 0]
    # A new session may start anywhere: re-reading after a rebalance is no anomaly.
    again = polls + [Poll("c", 2, 0, 0, b"a0", 5.0)]
    assert check(txns, again, final) == {}
    backwards = polls + [Poll("c", 1, 0, 0, b"a0", 5.0)]
    assert check(txns, backwards, final) == {"nonmonotonic-poll": ["c session 1 on 0: 4 then 0"]}
    skipping = [p0[1], Poll("c", 1, 1, 0, b"a1", 2.0)]  # b0 only on partition 0
    assert check(txns, skipping, final) == {}
    final[0].insert(1, (2, b"x"))
    txns.append(Txn("x", 0, [(0, b"x", 2)], 0.5, Outcome.COMMITTED))
    assert check(txns, polls, final) == {
        "poll-skip": ["c session 1 on 0: 0 then 4, skipping 1 record(s)"]
    }


def test_precommitted_read() -> None:
    txns, polls, final = history()
    polls[2] = Poll("c", 1, 0, 4, b"b0", 2.5)  # b asked to commit at 3.0
    assert check(txns, polls, final) == {
        "precommitted-read": ["c polled b'b0' before b#0 asked to commit"]
    }


def test_write_order_and_unknown_values() -> None:
    txns, polls, final = history()
    txns = copy.deepcopy(txns)
    txns[0].sends.append((0, b"a3", None))  # sent after a0, but lands before it
    final[0].insert(0, (-1, b"a3"))
    found = check(txns, polls, final)
    assert found == {"write-order": ["a on 0: offsets [0, -1]"]}
    final[0].append((9, b"zz"))
    assert check(txns, polls, final)["unknown-value"] == ["b'zz' was never written"]
