from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from oncelog.broker.fetch_sessions import FetchSessionCache, FetchSessionError

A, B, C = ("t", 0), ("t", 1), ("u", 0)


def test_full_fetch_creates_session_and_incremental_updates_it() -> None:
    cache = FetchSessionCache(10)
    session, parts = cache.resolve(0, 0, [(A, 5, 100), (B, 7, 100)], [])
    assert session is not None and session.epoch == 1 and parts == [(A, 5, 100), (B, 7, 100)]
    # incremental: only A moved; C added; B forgotten
    session2, parts2 = cache.resolve(session.id, 1, [(A, 9, 100), (C, 0, 50)], [B])
    assert session2 is session and session.epoch == 2
    assert sorted(parts2) == [(A, 9, 100), (C, 0, 50)]


def test_unknown_session_and_wrong_epoch() -> None:
    cache = FetchSessionCache(10)
    with pytest.raises(FetchSessionError) as e:
        cache.resolve(42, 3, [], [])
    assert e.value.code == ErrorCode.fetch_session_id_not_found
    session, _ = cache.resolve(0, 0, [(A, 0, 1)], [])
    assert session is not None
    with pytest.raises(FetchSessionError) as e:
        cache.resolve(session.id, 5, [], [])
    assert e.value.code == ErrorCode.invalid_fetch_session_epoch


def test_sessionless_and_final_epoch_and_declined() -> None:
    cache = FetchSessionCache(10)
    assert cache.resolve(0, -1, [(A, 0, 1)], []) == (None, [(A, 0, 1)])
    session, _ = cache.resolve(0, 0, [(A, 0, 1)], [])
    assert session is not None
    cache.resolve(session.id, -1, [(A, 0, 1)], [])  # close it
    assert session.id not in cache.sessions
    declined = FetchSessionCache(0)
    assert declined.resolve(0, 0, [(A, 0, 1)], [])[0] is None


def test_lru_eviction_and_changed_filter() -> None:
    cache = FetchSessionCache(2)
    s1, _ = cache.resolve(0, 0, [(A, 0, 1)], [])
    s2, _ = cache.resolve(0, 0, [(A, 0, 1)], [])
    s3, _ = cache.resolve(0, 0, [(A, 0, 1)], [])
    assert s1 is not None and s2 is not None and s3 is not None
    assert s1.id not in cache.sessions and {s2.id, s3.id} == set(cache.sessions)
    assert s3.changed(A, 10, 10, 0, False, 0) is True  # first response carries it
    assert s3.changed(A, 10, 10, 0, False, 0) is False  # nothing new: left out
    assert s3.changed(A, 11, 10, 0, False, 0) is True  # high watermark moved
    assert s3.changed(A, 11, 10, 0, True, 0) is True  # data


def test_a_session_keeps_its_topic_naming_across_versions() -> None:
    """Kafka's FetchManager: a session begun with topic ids (Fetch v13+) continued by
    name, or the reverse, is FETCH_SESSION_TOPIC_ID_ERROR; the epoch is checked first."""
    topic_id = uuid.uuid4()
    cache = FetchSessionCache(10)
    by_id, parts = cache.resolve(0, 0, [((topic_id, 0), 3, 10)], [], uses_topic_ids=True)
    assert by_id is not None and by_id.uses_topic_ids and parts == [((topic_id, 0), 3, 10)]
    with pytest.raises(FetchSessionError) as e:
        cache.resolve(by_id.id, 1, [], [])
    assert e.value.code == ErrorCode.fetch_session_topic_id_error
    with pytest.raises(FetchSessionError) as e:
        cache.resolve(by_id.id, 2, [], [], uses_topic_ids=True)
    assert e.value.code == ErrorCode.invalid_fetch_session_epoch
    _, parts = cache.resolve(by_id.id, 1, [], [], uses_topic_ids=True)
    assert parts == [((topic_id, 0), 3, 10)]
    by_name, _ = cache.resolve(0, 0, [(A, 0, 1)], [])
    assert by_name is not None
    with pytest.raises(FetchSessionError) as e:
        cache.resolve(by_name.id, 1, [], [], uses_topic_ids=True)
    assert e.value.code == ErrorCode.fetch_session_topic_id_error


def test_a_session_belongs_to_its_principal_and_listener() -> None:
    cache = FetchSessionCache(10)
    bob = ("User:bob", "SASL_PLAINTEXT")
    session, _ = cache.resolve(0, 0, [(A, 0, 1)], [], owner=bob)
    assert session is not None and 0 < session.id < 2**31
    for thief in (("User:alice", "SASL_PLAINTEXT"), ("User:ANONYMOUS", "PLAINTEXT")):
        with pytest.raises(FetchSessionError) as info:
            cache.resolve(session.id, 1, [], [], owner=thief)
        assert info.value.code == ErrorCode.fetch_session_id_not_found
        cache.resolve(session.id, -1, [], [], owner=thief)  # a close: ignored
        cache.resolve(session.id, 0, [(B, 0, 1)], [], owner=thief)  # replaces nothing
    same, parts = cache.resolve(session.id, 1, [], [], owner=bob)
    assert same is session and parts == [(A, 0, 1)]
