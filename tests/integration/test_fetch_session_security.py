"""Fetch sessions (KIP-227) cannot be used across principals: a session belongs to the
principal and listener that created it, its id is random, and every session partition
is authorized on every fetch (Kafka's ``FetchSessionCache`` and
``IncrementalFetchContext``). Each attack below read another client's records before."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fe

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker
from tests.integration.security import PLAIN_USERS, confluent_sasl, plain_jaas, plain_login

SECRET = "secret"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    settings = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "false",
    }
    b = EmbeddedBroker(tmp_path / "data", settings=settings).start()
    try:
        yield b
    finally:
        b.stop()


def _admin(b: EmbeddedBroker) -> AdminClient:
    return AdminClient(
        {
            "bootstrap.servers": b.bootstrap_for("SASL_PLAINTEXT"),
            **confluent_sasl("SASL_PLAINTEXT", "PLAIN", "admin", PLAIN_USERS["admin"]),
        }
    )


def _read_acl(user: str) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC, SECRET, ResourcePatternType.LITERAL, f"User:{user}", "*",
        AclOperation.READ, AclPermissionType.ALLOW,
    )  # fmt: skip


def _produce(b: EmbeddedBroker, n: int, start: int = 0) -> None:
    producer = Producer(
        {
            "bootstrap.servers": b.bootstrap_for("SASL_PLAINTEXT"),
            **confluent_sasl("SASL_PLAINTEXT", "PLAIN", "admin", PLAIN_USERS["admin"]),
        }
    )
    for i in range(start, start + n):
        producer.produce(SECRET, value=f"secret-{i}".encode())
    assert producer.flush(15) == 0


def _fetch(c: WireClient, session_id: int, epoch: int, offset: int | None) -> Any:
    """A Fetch of ``secret``-0 from ``offset`` (None: nothing named, as an incremental
    fetch with no changes sends)."""
    topics = ()
    if offset is not None:
        partition = fe.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=offset,
            log_start_offset=-1, partition_max_bytes=100_000,
        )  # fmt: skip
        topics = (fe.FetchTopic(topic=SECRET, partitions=(partition,)),)
    return c.request(
        fe.FetchRequest(
            replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=100_000,
            isolation_level=0, session_id=session_id, session_epoch=epoch, topics=topics,
            forgotten_topics_data=(), rack_id="",
        )
    )  # fmt: skip


def _records(response: Any) -> list[tuple[int, int]]:
    """(error code, bytes of records) per partition in the response."""
    return [
        (int(p.error_code), len(p.records or b"")) for t in response.responses for p in t.partitions
    ]


def test_a_fetch_session_serves_only_its_creator(broker: EmbeddedBroker) -> None:
    admin = _admin(broker)
    admin.create_topics([NewTopic(SECRET, 1, 1)])[SECRET].result(15)
    for future in admin.create_acls([_read_acl("bob")]).values():
        future.result(15)
    _produce(broker, 3)
    sasl = broker.bootstrap_for("SASL_PLAINTEXT")
    with (
        WireClient(sasl) as bob,
        WireClient(sasl) as alice,
        WireClient(broker.bootstrap_for("PLAINTEXT")) as anonymous,
    ):
        plain_login(bob, "bob", PLAIN_USERS["bob"])
        plain_login(alice, "alice", PLAIN_USERS["alice"])
        full = _fetch(bob, 0, 0, 0)
        assert full.error_code == ErrorCode.none and full.session_id > 0
        assert _records(full)[0][0] == 0 and _records(full)[0][1] > 0
        session = full.session_id
        _produce(broker, 2, start=3)
        # alice (no READ on secret) and an unauthenticated client name bob's session.
        for thief in (alice, anonymous):
            stolen = _fetch(thief, session, 1, None)
            assert stolen.error_code == ErrorCode.fetch_session_id_not_found, _records(stolen)
            assert _records(stolen) == []
            # Nor can they close it (a final epoch) or restart it (epoch 0 with its id).
            _fetch(thief, session, -1, None)
        # bob's session is intact: his next incremental fetch gets the new records.
        mine = _fetch(bob, session, 1, None)
        assert mine.error_code == ErrorCode.none and mine.session_id == session
        assert [code for code, _ in _records(mine)] == [0]
        assert _records(mine)[0][1] > 0


def test_an_incremental_fetch_after_the_read_acl_is_revoked(broker: EmbeddedBroker) -> None:
    admin = _admin(broker)
    admin.create_topics([NewTopic(SECRET, 1, 1)])[SECRET].result(15)
    for future in admin.create_acls([_read_acl("alice")]).values():
        future.result(15)
    _produce(broker, 3)
    with WireClient(broker.bootstrap_for("SASL_PLAINTEXT")) as alice:
        plain_login(alice, "alice", PLAIN_USERS["alice"])
        full = _fetch(alice, 0, 0, 0)
        assert _records(full)[0][0] == 0
        session = full.session_id
        revoked = admin.delete_acls(
            [
                AclBindingFilter(
                    ResourceType.TOPIC,
                    SECRET,
                    ResourcePatternType.LITERAL,
                    "User:alice",
                    "*",
                    AclOperation.ANY,
                    AclPermissionType.ANY,
                )  # fmt: skip
            ]
        )
        for future in revoked.values():
            future.result(15)
        _produce(broker, 2, start=3)
        after = _fetch(alice, session, 1, None)
        assert after.error_code == ErrorCode.none
        assert _records(after) == [(int(ErrorCode.topic_authorization_failed), 0)]


def test_session_ids_are_random(broker: EmbeddedBroker) -> None:
    admin = _admin(broker)
    admin.create_topics([NewTopic(SECRET, 1, 1)])[SECRET].result(15)
    with WireClient(broker.bootstrap_for("SASL_PLAINTEXT")) as admin_wire:
        plain_login(admin_wire, "admin", PLAIN_USERS["admin"])
        ids = [_fetch(admin_wire, 0, 0, 0).session_id for _ in range(5)]
    assert len(set(ids)) == 5
    # Not a count: consecutive sessions are not consecutive numbers.
    assert sorted(ids) != list(range(min(ids), min(ids) + 5))
