"""Two-phase commit (KIP-939) at the wire, with exact error codes and epochs.

No installed client speaks InitProducerId v6 (Kafka's Java client has it on trunk only), so
these send it by hand: ``enable2Pc`` opens a transaction that never times out,
``keepPreparedTxn`` lets a restarted producer pick up its prepared transaction (the answer
names the kept identity and the one the transaction was written under) and end it with its
own EndTxn, and ``transaction.two.phase.commit.enable`` and the TWO_PHASE_COMMIT ACL guard
it all."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AclOperation, ResourceType
from kio.schema.create_acls.v3 import request as ca
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v6 import request as ip6

from oncelog.client.config import ClientConfig
from oncelog.client.transactions import TxnAdmin
from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker
from oncelog.security.acl import AclOperation as Op
from tests.integration.security import PLAIN_USERS, plain_login

from .helpers import create_topic
from .security import plain_jaas
from .test_acls import allow, set_acls
from .test_transactions import READ_COMMITTED, READ_UNCOMMITTED, end_offsets, read_all
from .test_txn_v2_wire import end_v5, produce_v12, wait_for

TXN = "tpc-txn"
TWO_PC = {
    "transaction.two.phase.commit.enable": "true",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100",
}
NO_TIMEOUT = 2_147_483_647  # Integer.MAX_VALUE: how Kafka marks a 2PC transaction


def init_v6(
    c: WireClient,
    *,
    enable_2pc: bool = True,
    keep: bool = False,
    timeout_ms: int = 1_000,
    txn: str = TXN,
) -> tuple[ErrorCode, int, int, int, int]:
    r = c.request(
        ip6.InitProducerIdRequest(
            transactional_id=txn,
            transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
            producer_id=-1,
            producer_epoch=-1,
            enable2_pc=enable_2pc,
            keep_prepared_txn=keep,
        )
    )
    return (
        r.error_code,
        r.producer_id,
        r.producer_epoch,
        r.ongoing_txn_producer_id,
        r.ongoing_txn_producer_epoch,
    )


def describe(bootstrap: str, txn: str = TXN) -> tuple[str, int, int, int]:
    with TxnAdmin(ClientConfig(bootstrap)) as admin:
        d = admin.describe_txn(txn)
    timeout_ms = int(d.transaction_timeout.total_seconds() * 1000)
    return d.transaction_state, d.producer_id, d.producer_epoch, timeout_ms


@pytest.fixture
def tpc_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    b = EmbeddedBroker(tmp_path / "data", settings=TWO_PC).start()
    try:
        yield b
    finally:
        b.stop()


def prepare(b: EmbeddedBroker, topic: str) -> tuple[int, int]:
    """A 2PC producer writes two records to partitions 0 and 1, then "crashes"."""
    create_topic(b.bootstrap, topic, 2)
    with WireClient(b.bootstrap) as c:
        code, pid, epoch, opid, oepoch = init_v6(c)
        assert (code, epoch, opid, oepoch) == (ErrorCode.none, 0, -1, -1)
        assert produce_v12(c, topic, (0, 1), pid, epoch, 0, TXN) == [ErrorCode.none] * 2
    return pid, epoch


def test_two_phase_commit_is_off_by_default(broker: EmbeddedBroker) -> None:
    with WireClient(broker.bootstrap) as c:
        assert init_v6(c) == (ErrorCode.transactional_id_authorization_failed, -1, -1, -1, -1)
        assert init_v6(c, keep=True) == (
            ErrorCode.transactional_id_authorization_failed,
            -1,
            -1,
            -1,
            -1,
        )
        assert init_v6(c, enable_2pc=False, keep=True) == (
            ErrorCode.invalid_request,
            -1,
            -1,
            -1,
            -1,
        )
        # v6 without 2PC is an ordinary InitProducerId.
        code, pid, epoch, opid, oepoch = init_v6(c, enable_2pc=False)
        assert (code, epoch, opid, oepoch) == (ErrorCode.none, 0, -1, -1)
        assert pid >= 0


def test_a_2pc_transaction_outlives_its_timeout(
    tpc_broker: EmbeddedBroker, topic_name: str
) -> None:
    pid, epoch = prepare(tpc_broker, topic_name)
    with WireClient(tpc_broker.bootstrap) as c:
        # A transaction without 2PC, with the same 1 s timeout, as the control.
        code, ppid, pepoch, _, _ = init_v6(c, enable_2pc=False, txn="plain")
        assert code == ErrorCode.none
        assert produce_v12(c, topic_name, (0,), ppid, pepoch, 0, "plain") == [ErrorCode.none]
    wait_for(lambda: describe(tpc_broker.bootstrap, "plain")[0] == "CompleteAbort", 10.0)
    time.sleep(1.0)  # well past the 2PC transaction's requested timeout too
    assert describe(tpc_broker.bootstrap) == ("Ongoing", pid, epoch, NO_TIMEOUT)
    assert end_offsets(tpc_broker.bootstrap, topic_name, 2, READ_COMMITTED) == [0, 0]


def test_keep_prepared_then_commit(tpc_broker: EmbeddedBroker, topic_name: str) -> None:
    pid, epoch = prepare(tpc_broker, topic_name)
    with WireClient(tpc_broker.bootstrap) as c:
        # The restarted producer keeps the transaction: its own identity is one epoch on.
        assert init_v6(c, keep=True) == (ErrorCode.none, pid, epoch + 1, pid, epoch)
        assert describe(tpc_broker.bootstrap) == ("Ongoing", pid, epoch, NO_TIMEOUT)
        # The crashed producer's epoch is fenced; the kept one cannot write more.
        assert end_v5(c, pid, epoch, True, TXN) == (ErrorCode.producer_fenced, -1, -1)
        # A zombie write of the crashed producer is refused (Produce maps PRODUCER_FENCED).
        assert produce_v12(c, topic_name, (0,), pid, epoch, 1, TXN) == [
            ErrorCode.invalid_producer_epoch
        ]
        assert produce_v12(c, topic_name, (0,), pid, epoch + 1, 0, TXN) == [
            ErrorCode.invalid_txn_state
        ]
        assert end_offsets(tpc_broker.bootstrap, topic_name, 2, READ_COMMITTED) == [0, 0]
        assert end_v5(c, pid, epoch + 1, True, TXN) == (ErrorCode.none, pid, epoch + 2)
    wait_for(lambda: describe(tpc_broker.bootstrap)[0] == "CompleteCommit")
    assert end_offsets(tpc_broker.bootstrap, topic_name, 2, READ_COMMITTED) == [2, 2]
    values = sorted(
        m.value() for m in read_all(tpc_broker.bootstrap, topic_name, 2, "read_committed")
    )
    assert values == [b"0-0-0", b"0-1-0"]


def test_keep_prepared_then_abort(tpc_broker: EmbeddedBroker, topic_name: str) -> None:
    pid, epoch = prepare(tpc_broker, topic_name)
    with WireClient(tpc_broker.bootstrap) as c:
        assert init_v6(c, keep=True) == (ErrorCode.none, pid, epoch + 1, pid, epoch)
        assert init_v6(c, keep=True) == (ErrorCode.none, pid, epoch + 2, pid, epoch)
        assert end_v5(c, pid, epoch + 1, False, TXN) == (ErrorCode.producer_fenced, -1, -1)
        assert end_v5(c, pid, epoch + 2, False, TXN) == (ErrorCode.none, pid, epoch + 3)
    wait_for(lambda: describe(tpc_broker.bootstrap)[0] == "CompleteAbort")
    assert end_offsets(tpc_broker.bootstrap, topic_name, 2, READ_COMMITTED) == [2, 2]
    assert end_offsets(tpc_broker.bootstrap, topic_name, 2, READ_UNCOMMITTED) == [2, 2]
    assert read_all(tpc_broker.bootstrap, topic_name, 2, "read_committed") == []


def test_a_prepared_2pc_transaction_survives_a_broker_restart(
    tmp_path: Path, topic_name: str
) -> None:
    data = tmp_path / "data"
    with EmbeddedBroker(data, settings=TWO_PC) as b:
        pid, epoch = prepare(b, topic_name)
        with WireClient(b.bootstrap) as c:
            assert init_v6(c, keep=True) == (ErrorCode.none, pid, epoch + 1, pid, epoch)
    with EmbeddedBroker(data, settings=TWO_PC) as b:
        wait_for(lambda: describe(b.bootstrap) == ("Ongoing", pid, epoch, NO_TIMEOUT), 10.0)
        time.sleep(1.5)  # the transaction was opened with a 1 s timeout; it is not aborted
        assert describe(b.bootstrap) == ("Ongoing", pid, epoch, NO_TIMEOUT)
        with WireClient(b.bootstrap) as c:
            # The kept identity survived too: the next keep is one epoch further.
            assert init_v6(c, keep=True) == (ErrorCode.none, pid, epoch + 2, pid, epoch)
            assert end_v5(c, pid, epoch + 2, True, TXN) == (ErrorCode.none, pid, epoch + 3)
        wait_for(lambda: end_offsets(b.bootstrap, topic_name, 2, READ_COMMITTED) == [2, 2])
        assert len(read_all(b.bootstrap, topic_name, 2, "read_committed")) == 2


@pytest.fixture
def secured_2pc(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    settings = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        **TWO_PC,
    }
    b = EmbeddedBroker(tmp_path / "data", settings=settings).start()
    try:
        yield b
    finally:
        b.stop()


def grant_two_phase_commit(b: EmbeddedBroker) -> None:
    """TransactionalId TWO_PHASE_COMMIT for alice, by a raw CreateAcls: no client library
    knows operation 15 yet."""
    with WireClient(b.bootstrap) as c:
        plain_login(c, "admin", PLAIN_USERS["admin"])
        grant = ca.AclCreation(
            resource_type=ResourceType.TRANSACTIONAL_ID.value,
            resource_name=TXN,
            resource_pattern_type=3,  # LITERAL
            principal="User:alice",
            host="*",
            operation=Op.TWO_PHASE_COMMIT.value,
            permission_type=3,  # ALLOW
        )
        result = c.request(ca.CreateAclsRequest(creations=(grant,))).results[0]
        assert result.error_code == ErrorCode.none


def test_enable_2pc_needs_the_two_phase_commit_acl(secured_2pc: EmbeddedBroker) -> None:
    denied = (ErrorCode.transactional_id_authorization_failed, -1, -1, -1, -1)
    set_acls(secured_2pc, [allow(ResourceType.TRANSACTIONAL_ID, TXN, AclOperation.WRITE)])
    with WireClient(secured_2pc.bootstrap) as c:
        plain_login(c, "alice", PLAIN_USERS["alice"])
        # WRITE alone: 2PC is denied (and so is keepPreparedTxn), a plain init works.
        assert init_v6(c) == denied
        assert init_v6(c, keep=True) == denied
        code, _, epoch, _, _ = init_v6(c, enable_2pc=False)
        assert (code, epoch) == (ErrorCode.none, 0)
        grant_two_phase_commit(secured_2pc)
        code, _, epoch, opid, oepoch = init_v6(c)
        assert (code, epoch, opid, oepoch) == (ErrorCode.none, 1, -1, -1)
        # TWO_PHASE_COMMIT without WRITE is not enough either.
        set_acls(secured_2pc, [])
        grant_two_phase_commit(secured_2pc)
        assert init_v6(c) == denied
