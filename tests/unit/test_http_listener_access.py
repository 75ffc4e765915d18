"""The HTTP listener's access rules without a broker: the basic-auth header, password logins
through the SASL authenticators, the per-principal filters and the abort rule."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from oncelog.broker.authentication import Authentication
from oncelog.broker.authorizer import Authorizer
from oncelog.broker.config import BrokerConfig, BrokerConfigError
from oncelog.broker.http.access import (
    HIDDEN_ID,
    Scope,
    abort_refusal,
    scoped_groups,
    scoped_hanging,
    scoped_snapshot,
    scoped_transactions,
)
from oncelog.broker.loop_watchdog import LoopFigures
from oncelog.broker.metrics import CleanerFigures, Snapshot
from oncelog.broker.state_view import GroupLag, Hanging, PartitionState, TxnView
from oncelog.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from oncelog.security.acl_store import AclStore
from oncelog.security.credential_store import ScramCredentialStore
from oncelog.security.http_basic import basic_credentials
from oncelog.security.sasl import (
    PlainAuthenticator,
    SaslAuthenticationError,
    ScramAuthenticator,
    login_with_password,
)
from oncelog.security.scram import ScramMechanism, credential_from_password

Op, Res = AclOperation, ResourceType
BOB = "User:bob"


def _basic(raw: bytes) -> str:
    return "Basic " + base64.b64encode(raw).decode()


def test_basic_credentials() -> None:
    assert basic_credentials(_basic(b"alice:s3cr:et")) == ("alice", "s3cr:et")
    assert basic_credentials("basic  " + base64.b64encode(b"a:").decode()) == ("a", "")
    assert basic_credentials(_basic("zoë:pässword".encode())) == ("zoë", "pässword")
    for bad in (None, "", "Bearer abc", "Basic", "Basic !!!", _basic(b"no-colon")):
        assert basic_credentials(bad) is None, bad
    assert basic_credentials(_basic(b"\xff:x")) is None  # not UTF-8


def test_login_with_password_runs_the_sasl_exchanges() -> None:
    plain = {"alice": "alice-pw"}
    assert login_with_password(PlainAuthenticator(plain), "alice", "alice-pw") == "User:alice"
    for user, password in (("alice", "wrong"), ("nobody", "alice-pw"), ("al\0ice", "x")):
        with pytest.raises(SaslAuthenticationError):
            login_with_password(PlainAuthenticator(plain), user, password)
    mech = ScramMechanism.SCRAM_SHA_512
    stored = {("carol", mech): credential_from_password(mech, "carol-pw", 4096)}

    def scram() -> ScramAuthenticator:
        return ScramAuthenticator("SCRAM-SHA-512", lambda u, m: stored.get((u, m)))

    assert login_with_password(scram(), "carol", "carol-pw") == "User:carol"
    for user, password in (("carol", "wrong"), ("dave", "carol-pw")):
        with pytest.raises(SaslAuthenticationError):
            login_with_password(scram(), user, password)


def test_check_password_tries_the_sasl_listeners_users(tmp_path: Path) -> None:
    config = BrokerConfig.build(
        overrides={
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,"
            "SASL_SSL://127.0.0.1:0",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                'user_alice="alice-pw";'
            ),
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        }
    )
    store = ScramCredentialStore(tmp_path / "scram.json")
    mech = ScramMechanism.SCRAM_SHA_256
    store.apply([("carol", mech, credential_from_password(mech, "carol-pw", 4096))], [])
    auth = Authentication(config, store)
    mechanisms = auth.password_mechanisms(["SASL_PLAINTEXT", "SASL_SSL"])
    assert mechanisms == [
        ("SASL_PLAINTEXT", "PLAIN"),
        ("SASL_SSL", "SCRAM-SHA-256"),
        ("SASL_SSL", "SCRAM-SHA-512"),
    ]
    assert auth.check_password(mechanisms, "alice", "alice-pw") == "User:alice"
    assert auth.check_password(mechanisms, "carol", "carol-pw") == "User:carol"
    for user, password in (("alice", "carol-pw"), ("carol", "alice-pw"), ("eve", "")):
        with pytest.raises(SaslAuthenticationError):
            auth.check_password(mechanisms, user, password)


def test_authentication_setting_is_none_or_basic() -> None:
    assert BrokerConfig.build().settings.metrics_listener_authentication == "none"
    built = BrokerConfig.build(overrides={"metrics.listener.authentication": "basic"})
    assert built.settings.metrics_listener_authentication == "basic"
    with pytest.raises(BrokerConfigError, match="metrics.listener.authentication"):
        BrokerConfig.build(overrides={"metrics.listener.authentication": "digest"})


# -- filters --------------------------------------------------------------------------


def _authorizer(tmp_path: Path, *grants: tuple[AclOperation, ResourceType, str]) -> Authorizer:
    config = BrokerConfig.build(
        overrides={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
        }
    )
    store = AclStore(tmp_path / "acls.json")
    store.add(
        [
            AclBinding(res, name, PatternType.LITERAL, BOB, "*", op, PermissionType.ALLOW)
            for op, res, name in grants
        ]
    )
    return Authorizer(config, store)


def _snapshot() -> Snapshot:
    return Snapshot(
        now_ms=0,
        live_producer_ids=4,
        partitions=[PartitionState(t, 0, 0, 5, 3, ()) for t in ("shown", "secret")],
        transactions=[
            TxnView("shown-txn", 7, 0, "Ongoing", 60_000, 0, (("shown", 0), ("secret", 0))),
            TxnView("secret-txn", 8, 0, "Ongoing", 60_000, 0, (("shown", 0),)),
        ],
        hanging=[
            Hanging("shown", 0, 8, 0, 0, 3, 90_000, "secret-txn", "overdue"),
            Hanging("secret", 0, 9, 0, 0, 3, 90_000, None, "orphaned"),
        ],
        groups=[
            GroupLag("shown-group", "Empty", "shown", 0, 1, 5),
            GroupLag("shown-group", "Empty", "secret", 0, 1, 5),
            GroupLag("secret-group", "Empty", "shown", 0, 1, 5),
        ],
        requests={"PRODUCE": 2},
        errors={},
        latency={},
        bytes_in={"shown": 10, "secret": 20},
        bytes_out={"secret": 5},
        produce_waiting=0,
        fetch_waiting=0,
        connections_opened=1,
        connections_closed=0,
        cleaner=CleanerFigures(0, 0, 0, 0, 0.0, 0.0, 0),
        load_s={},
        loop=LoopFigures(),
    )


def test_scoped_snapshot_keeps_only_what_the_principal_may_describe(tmp_path: Path) -> None:
    authorizer = _authorizer(
        tmp_path,
        (Op.READ, Res.TOPIC, "shown"),  # READ implies DESCRIBE
        (Op.DESCRIBE, Res.TRANSACTIONAL_ID, "shown-txn"),
        (Op.DESCRIBE, Res.GROUP, "shown-group"),
    )
    scope = Scope(authorizer, BOB, "127.0.0.1")
    assert not scope.everything
    snap = scoped_snapshot(_snapshot(), scope)
    assert [p.topic for p in snap.partitions] == ["shown"]
    assert [(t.transactional_id, t.partitions) for t in snap.transactions] == [
        ("shown-txn", (("shown", 0),))
    ]
    # The hanging producer on "shown" stays (Topic READ), its id masked, still overdue.
    assert [(h.topic, h.transactional_id, h.overdue) for h in snap.hanging] == [
        ("shown", HIDDEN_ID, True)
    ]
    assert [(g.group_id, g.topic) for g in snap.groups] == [("shown-group", "shown")]
    assert (snap.bytes_in, snap.bytes_out) == ({"shown": 10}, {})
    assert snap.live_producer_ids == 4 and snap.requests == {"PRODUCE": 2}


def test_describe_alone_does_not_show_producers(tmp_path: Path) -> None:
    """DescribeProducers needs Topic READ, so a hanging producer needs it too."""
    scope = Scope(_authorizer(tmp_path, (Op.DESCRIBE, Res.TOPIC, "shown")), BOB, "127.0.0.1")
    assert scoped_hanging(_snapshot().hanging, scope) == []
    assert scoped_groups(_snapshot().groups, scope) == []  # no Group DESCRIBE
    assert scoped_transactions(_snapshot().transactions, scope) == []


def test_super_users_and_no_authorizer_see_everything(tmp_path: Path) -> None:
    assert Scope(_authorizer(tmp_path), "User:admin", "127.0.0.1").everything
    off = Authorizer(BrokerConfig.build(), AclStore(tmp_path / "none.json"))
    assert Scope(off, "User:ANONYMOUS", "127.0.0.1").everything


def test_abort_rule() -> None:
    untracked = Hanging("t", 0, 9, 0, 0, 3, 90_000, None, "orphaned")
    overdue = Hanging("t", 0, 8, 0, 0, 3, 90_000, "app-txn", "overdue")

    def may(*grants: tuple[AclOperation, ResourceType, str]):  # type: ignore[no-untyped-def]
        return lambda op, res, name: (op, res, name) in grants

    read = (Op.READ, Res.TOPIC, "t")
    cluster = (Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME)
    write = (Op.WRITE, Res.TRANSACTIONAL_ID, "app-txn")
    assert abort_refusal(may(cluster, write), BOB, "t", untracked) == (
        "abort refused: User:bob may not READ topic t (DescribeProducers)"
    )
    assert abort_refusal(may(read, write), BOB, "t", untracked) == (
        "abort refused: User:bob may not CLUSTER_ACTION on the cluster (WriteTxnMarkers)"
    )
    assert abort_refusal(may(read, cluster), BOB, "t", untracked) is None
    assert abort_refusal(may(read, cluster), BOB, "t", overdue) == (
        "abort refused: User:bob may not WRITE the transactional id of producer 8 (InitProducerId)"
    )
    assert abort_refusal(may(read, write), BOB, "t", overdue) is None
    assert abort_refusal(may(read), BOB, "t", None) is None  # the abort answers 409
