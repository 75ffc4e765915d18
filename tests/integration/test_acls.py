"""ACL authorization: the principal with exactly the ACLs an application needs
succeeds, and the same principal lacking each ACL in turn gets Kafka's error code.
SASL_PLAINTEXT/PLAIN identifies the principals; User:admin is a super user."""

from __future__ import annotations

import contextlib
import datetime
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.add_offsets_to_txn.v3 import request as ao
from kio.schema.add_partitions_to_txn.v3 import request as ap
from kio.schema.create_acls.v3 import request as ca
from kio.schema.create_topics.v7 import request as ct
from kio.schema.delete_topics.v5 import request as dt
from kio.schema.delete_topics.v6 import request as dt6
from kio.schema.describe_cluster.v1 import request as dc
from kio.schema.describe_groups.v5 import request as dg
from kio.schema.describe_producers.v0 import request as dp
from kio.schema.describe_topic_partitions.v0 import request as dtp
from kio.schema.describe_transactions.v0 import request as dtx
from kio.schema.end_txn.v3 import request as et
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fe
from kio.schema.fetch.v17 import request as fe17
from kio.schema.find_coordinator.v3 import request as fc
from kio.schema.init_producer_id.v4 import request as ip
from kio.schema.join_group.v7 import request as jg
from kio.schema.list_offsets.v7 import request as lo
from kio.schema.list_transactions.v0 import request as lt
from kio.schema.metadata.v10 import request as md10
from kio.schema.metadata.v12 import request as md
from kio.schema.offset_fetch.v7 import request as of
from kio.schema.txn_offset_commit.v3 import request as tc
from kio.schema.write_txn_markers.v1 import request as wm

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker
from tests.integration.security import PLAIN_USERS, confluent_sasl, plain_jaas, plain_login

T = datetime.timedelta(seconds=10)
TOPIC, OUT, GROUP, TXN = "in", "out", "app-group", "app-txn"


def conf(user: str) -> dict[str, object]:
    return confluent_sasl("SASL_PLAINTEXT", "PLAIN", user, PLAIN_USERS[user])


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    settings = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "transaction.state.log.num.partitions": "4",
        "offsets.topic.num.partitions": "4",
    }
    b = EmbeddedBroker(tmp_path / "data", settings=settings).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap, **conf("admin")})
        for f in admin.create_topics([NewTopic(TOPIC, 1, 1), NewTopic(OUT, 1, 1)]).values():
            f.result(15)
        yield b
    finally:
        b.stop()


def admin_of(b: EmbeddedBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap, **conf("admin")})


def allow(
    rtype: ResourceType, name: str, op: AclOperation, principal: str = "User:alice"
) -> AclBinding:
    return AclBinding(
        rtype, name, ResourcePatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW
    )


def set_acls(b: EmbeddedBroker, acls: list[AclBinding]) -> None:
    """Replace every ACL with ``acls`` through the Admin API."""
    admin = admin_of(b)
    everything = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    for f in admin.delete_acls([everything]).values():
        f.result(15)
    if acls:
        for f in admin.create_acls(acls).values():
            f.result(15)


def without_each(needed: dict[str, AclBinding]) -> list[tuple[str, list[AclBinding]]]:
    return [(missing, [a for k, a in needed.items() if k != missing]) for missing in needed]


def produce_input(b: EmbeddedBroker, n: int) -> None:
    p = Producer({"bootstrap.servers": b.bootstrap, **conf("admin")})
    for i in range(n):
        p.produce(TOPIC, b"in-%d" % i, partition=0)
    assert p.flush(15) == 0


def kafka_code(exc: BaseException) -> int:
    assert isinstance(exc, KafkaException), exc
    return exc.args[0].code()


# -- a transactional producer --------------------------------------------------------
PRODUCER_NEEDS = {
    "TransactionalId WRITE": allow(ResourceType.TRANSACTIONAL_ID, TXN, AclOperation.WRITE),
    "Topic WRITE": allow(ResourceType.TOPIC, OUT, AclOperation.WRITE),
}


def run_transactional_producer(b: EmbeddedBroker) -> int | None:
    """The error code the application sees, None when it commits."""
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": TXN, **conf("alice")})
    errors: list[int] = []
    try:
        p.init_transactions(15)
        p.begin_transaction()
        p.produce(OUT, b"x", partition=0, on_delivery=lambda e, m: e and errors.append(e.code()))
        p.commit_transaction(15)
    except KafkaException as exc:
        with contextlib.suppress(KafkaException):
            p.flush(1)
        return errors[0] if errors else kafka_code(exc)
    return None


def test_transactional_producer_matrix(secured: EmbeddedBroker) -> None:
    set_acls(secured, list(PRODUCER_NEEDS.values()))
    assert run_transactional_producer(secured) is None
    expected = {
        "TransactionalId WRITE": KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "Topic WRITE": KafkaError.TOPIC_AUTHORIZATION_FAILED,
    }
    for missing, acls in without_each(PRODUCER_NEEDS):
        set_acls(secured, acls)
        assert run_transactional_producer(secured) == expected[missing], missing
    log = secured.log_path.read_text()
    # librdkafka stops at FindCoordinator (DESCRIBE, implied by WRITE) and at AddPartitionsToTxn
    assert (
        "Principal = User:alice is Denied operation = DESCRIBE from host = 127.0.0.1 "
        f"on resource = TRANSACTIONAL_ID:{TXN}" in log
    )
    assert (
        "Principal = User:alice is Denied operation = DESCRIBE from host = 127.0.0.1 "
        f"on resource = TOPIC:{OUT}" in log
    )


# -- a consumer in a group -------------------------------------------------------------
CONSUMER_NEEDS = {
    "Topic READ": allow(ResourceType.TOPIC, TOPIC, AclOperation.READ),
    "Group READ": allow(ResourceType.GROUP, GROUP, AclOperation.READ),
}


def run_consumer(b: EmbeddedBroker, expected: int, **extra: object) -> int | list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **conf("alice"),
            **extra,
        }
    )
    c.subscribe([TOPIC])
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 20
        while len(got) < expected and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                return msg.error().code()
            got.append(msg.value())
        c.commit(asynchronous=False)
    except KafkaException as exc:
        return kafka_code(exc)
    finally:
        c.close()
    return got


def test_consumer_matrix(secured: EmbeddedBroker) -> None:
    produce_input(secured, 5)
    set_acls(secured, list(CONSUMER_NEEDS.values()))
    assert run_consumer(secured, 5) == [b"in-%d" % i for i in range(5)]
    expected = {
        "Topic READ": KafkaError.TOPIC_AUTHORIZATION_FAILED,
        "Group READ": KafkaError.GROUP_AUTHORIZATION_FAILED,
    }
    for missing, acls in without_each(CONSUMER_NEEDS):
        set_acls(secured, acls)
        assert run_consumer(secured, 5) == expected[missing], missing


def test_consumer_protocol_matrix(secured: EmbeddedBroker) -> None:
    """KIP-848: ConsumerGroupHeartbeat needs Group READ and DESCRIBE on the subscribed
    topics (implied by READ)."""
    produce_input(secured, 5)
    set_acls(secured, list(CONSUMER_NEEDS.values()))
    kip848 = {"group.protocol": "consumer"}
    assert run_consumer(secured, 5, **kip848) == [b"in-%d" % i for i in range(5)]
    expected = {
        "Topic READ": KafkaError.TOPIC_AUTHORIZATION_FAILED,
        "Group READ": KafkaError.GROUP_AUTHORIZATION_FAILED,
    }
    for missing, acls in without_each(CONSUMER_NEEDS):
        set_acls(secured, acls)
        assert run_consumer(secured, 5, **kip848) == expected[missing], missing


# -- a KIP-447 consume-transform-produce application -------------------------------
APP_NEEDS = {**PRODUCER_NEEDS, **CONSUMER_NEEDS}


def run_kip447_app(b: EmbeddedBroker) -> int | None:
    consumer_errors: list[int] = []
    consumer = Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": GROUP,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "error_cb": lambda e: consumer_errors.append(e.code()),
            **conf("alice"),
        }
    )
    consumer.subscribe([TOPIC])
    producer = Producer(
        {"bootstrap.servers": b.bootstrap, "transactional.id": TXN, **conf("alice")}
    )
    errors: list[int] = []
    try:
        msg = None
        deadline = time.monotonic() + 20
        while msg is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
        if msg is None:
            return consumer_errors[0] if consumer_errors else None
        if msg.error() is not None:
            return msg.error().code()
        producer.init_transactions(15)
        producer.begin_transaction()
        producer.produce(
            OUT, msg.value(), partition=0, on_delivery=lambda e, m: e and errors.append(e.code())
        )
        producer.send_offsets_to_transaction(
            [TopicPartition(TOPIC, 0, msg.offset() + 1)], consumer.consumer_group_metadata(), 15
        )
        producer.commit_transaction(15)
    except KafkaException as exc:
        with contextlib.suppress(KafkaException):
            producer.flush(1)
        return errors[0] if errors else kafka_code(exc)
    finally:
        consumer.close()
    return None


def test_kip447_application_matrix(secured: EmbeddedBroker) -> None:
    produce_input(secured, 3)
    set_acls(secured, list(APP_NEEDS.values()))
    assert run_kip447_app(secured) is None
    admin = admin_of(secured)
    committed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)])[
        GROUP
    ].result(15)
    assert [(tp.topic, tp.offset) for tp in committed.topic_partitions] == [(TOPIC, 1)]
    expected = {
        "TransactionalId WRITE": KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "Topic WRITE": KafkaError.TOPIC_AUTHORIZATION_FAILED,
        "Topic READ": KafkaError.TOPIC_AUTHORIZATION_FAILED,
        "Group READ": KafkaError.GROUP_AUTHORIZATION_FAILED,
    }
    for missing, acls in without_each(APP_NEEDS):
        set_acls(secured, acls)
        assert run_kip447_app(secured) == expected[missing], missing


# -- the KIP-664 tools ---------------------------------------------------------------
def test_kip664_abort_tool_needs_cluster_action(secured: EmbeddedBroker) -> None:
    marker = wm.WriteTxnMarkersRequest(
        markers=(
            wm.WritableTxnMarker(
                producer_id=12345,
                producer_epoch=0,
                transaction_result=False,
                topics=(wm.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=(0,)),),
                coordinator_epoch=0,
            ),
        )
    )
    needs = {
        "Cluster CLUSTER_ACTION": allow(
            ResourceType.BROKER, "kafka-cluster", AclOperation.CLUSTER_ACTION
        ),
        "Topic READ": allow(ResourceType.TOPIC, TOPIC, AclOperation.READ),
        "TransactionalId DESCRIBE": allow(
            ResourceType.TRANSACTIONAL_ID, TXN, AclOperation.DESCRIBE
        ),
    }

    def run() -> dict[str, int]:
        with WireClient(secured.bootstrap) as c:
            plain_login(c, "alice", PLAIN_USERS["alice"])
            marks = c.request(marker).markers[0].topics[0].partitions[0].error_code
            producers = (
                c.request(
                    dp.DescribeProducersRequest(
                        topics=(dp.TopicRequest(name=TOPIC, partition_indexes=(0,)),)
                    )
                )
                .topics[0]
                .partitions[0]
                .error_code
            )
            txn = (
                c.request(dtx.DescribeTransactionsRequest(transactional_ids=(TXN,)))
                .transaction_states[0]
                .error_code
            )
        return {
            "Cluster CLUSTER_ACTION": marks,
            "Topic READ": producers,
            "TransactionalId DESCRIBE": txn,
        }

    set_acls(secured, list(needs.values()))
    assert run() == {
        "Cluster CLUSTER_ACTION": ErrorCode.none,
        "Topic READ": ErrorCode.none,
        "TransactionalId DESCRIBE": ErrorCode.transactional_id_not_found,
    }
    denied = {
        "Cluster CLUSTER_ACTION": ErrorCode.cluster_authorization_failed,
        "Topic READ": ErrorCode.topic_authorization_failed,
        "TransactionalId DESCRIBE": ErrorCode.transactional_id_authorization_failed,
    }
    for missing, acls in without_each(needs):
        set_acls(secured, acls)
        assert run()[missing] == denied[missing], missing


# -- every other family, at the wire, for a principal with no ACLs ------------------
def test_wire_error_codes_without_acls(secured: EmbeddedBroker) -> None:
    set_acls(secured, [allow(ResourceType.TOPIC, OUT, AclOperation.DESCRIBE)])
    with WireClient(secured.bootstrap) as c:
        plain_login(c, "alice", PLAIN_USERS["alice"])
        meta = c.request(
            md.MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        assert [t.name for t in meta.topics] == [OUT]  # unauthorized topics are filtered out
        meta = c.request(
            md.MetadataRequest(
                topics=(
                    md.MetadataRequestTopic(topic_id=None, name=TOPIC),
                    md.MetadataRequestTopic(topic_id=None, name="new-topic"),
                ),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            )
        )
        assert [(t.name, t.error_code) for t in meta.topics] == [
            (TOPIC, ErrorCode.topic_authorization_failed),
            ("new-topic", ErrorCode.topic_authorization_failed),
        ]
        fetch = c.request(
            fe.FetchRequest(
                replica_id=-1,
                max_wait=datetime.timedelta(0),
                min_bytes=1,
                max_bytes=1000,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=(
                    fe.FetchTopic(
                        topic=TOPIC,
                        partitions=(
                            fe.FetchPartition(
                                partition=0,
                                current_leader_epoch=-1,
                                fetch_offset=0,
                                log_start_offset=-1,
                                partition_max_bytes=1000,
                            ),
                        ),
                    ),
                ),
                forgotten_topics_data=(),
                rack_id="",
            )
        )
        assert fetch.responses[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
        created = c.request(
            ct.CreateTopicsRequest(
                topics=(
                    ct.CreatableTopic(
                        name="x", num_partitions=1, replication_factor=1, assignments=(), configs=()
                    ),
                ),
                timeout=T,
                validate_only=False,
            )
        )
        assert created.topics[0].error_code == ErrorCode.topic_authorization_failed
        deleted = c.request(dt.DeleteTopicsRequest(topic_names=(OUT,), timeout=T))
        assert deleted.responses[0].error_code == ErrorCode.topic_authorization_failed
        assert (
            c.request(
                ip.InitProducerIdRequest(
                    transactional_id=TXN, transaction_timeout=T, producer_id=-1, producer_epoch=-1
                )
            ).error_code
            == ErrorCode.transactional_id_authorization_failed
        )
        assert (
            c.request(
                ip.InitProducerIdRequest(
                    transactional_id=None, transaction_timeout=T, producer_id=-1, producer_epoch=-1
                )
            ).error_code
            == ErrorCode.cluster_authorization_failed
        )
        assert (
            c.request(
                et.EndTxnRequest(
                    transactional_id=TXN, producer_id=1, producer_epoch=0, committed=True
                )
            ).error_code
            == ErrorCode.transactional_id_authorization_failed
        )
        assert (
            c.request(fc.FindCoordinatorRequest(key=GROUP, key_type=0)).error_code
            == ErrorCode.group_authorization_failed
        )
        assert (
            c.request(fc.FindCoordinatorRequest(key=TXN, key_type=1)).error_code
            == ErrorCode.transactional_id_authorization_failed
        )
        joined = c.request(
            jg.JoinGroupRequest(
                group_id=GROUP,
                session_timeout=T,
                rebalance_timeout=T,
                member_id="",
                group_instance_id=None,
                protocol_type="consumer",
                protocols=(jg.JoinGroupRequestProtocol(name="range", metadata=b""),),
            )
        )
        assert joined.error_code == ErrorCode.group_authorization_failed
        fetched = c.request(
            of.OffsetFetchRequest(group_id=GROUP, topics=None, require_stable=False)
        )
        assert fetched.error_code == ErrorCode.group_authorization_failed
        assert (
            c.request(
                lt.ListTransactionsRequest(state_filters=(), producer_id_filters=())
            ).transaction_states
            == ()
        )
        acl = ca.AclCreation(
            resource_type=2,
            resource_name="t",
            resource_pattern_type=3,
            principal="User:alice",
            host="*",
            operation=2,
            permission_type=3,
        )
        assert (
            c.request(ca.CreateAclsRequest(creations=(acl,))).results[0].error_code
            == ErrorCode.cluster_authorization_failed
        )
    # a transactional id without the group and topic: AddOffsetsToTxn, TxnOffsetCommit, AddPartitionsToTxn
    set_acls(secured, [allow(ResourceType.TRANSACTIONAL_ID, TXN, AclOperation.WRITE)])
    with WireClient(secured.bootstrap) as c:
        plain_login(c, "alice", PLAIN_USERS["alice"])
        init = c.request(
            ip.InitProducerIdRequest(
                transactional_id=TXN, transaction_timeout=T, producer_id=-1, producer_epoch=-1
            )
        )
        assert init.error_code == ErrorCode.none
        pid, epoch = init.producer_id, init.producer_epoch
        added = c.request(
            ao.AddOffsetsToTxnRequest(
                transactional_id=TXN, producer_id=pid, producer_epoch=epoch, group_id=GROUP
            )
        )
        assert added.error_code == ErrorCode.group_authorization_failed
        commit = c.request(
            tc.TxnOffsetCommitRequest(
                transactional_id=TXN,
                group_id=GROUP,
                producer_id=pid,
                producer_epoch=epoch,
                generation_id=-1,
                member_id="",
                group_instance_id=None,
                topics=(
                    tc.TxnOffsetCommitRequestTopic(
                        name=TOPIC,
                        partitions=(
                            tc.TxnOffsetCommitRequestPartition(
                                partition_index=0,
                                committed_offset=1,
                                committed_leader_epoch=-1,
                                committed_metadata="",
                            ),
                        ),
                    ),
                ),
            )
        )
        assert commit.topics[0].partitions[0].error_code == ErrorCode.group_authorization_failed
        parts = c.request(
            ap.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=TXN,
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=(ap.AddPartitionsToTxnTopic(name=OUT, partitions=(0,)),),
            )
        )
        assert (
            parts.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
            == ErrorCode.topic_authorization_failed
        )
    # an idempotent producer needs only WRITE on some topic (Kafka >= 2.8)
    set_acls(secured, [allow(ResourceType.TOPIC, OUT, AclOperation.WRITE)])
    with WireClient(secured.bootstrap) as c:
        plain_login(c, "alice", PLAIN_USERS["alice"])
        assert (
            c.request(
                ip.InitProducerIdRequest(
                    transactional_id=None, transaction_timeout=T, producer_id=-1, producer_epoch=-1
                )
            ).error_code
            == ErrorCode.none
        )


def test_deny_beats_allow_and_acls_survive_a_restart(secured: EmbeddedBroker) -> None:
    prefixed_all = AclBinding(
        ResourceType.TOPIC,
        "o",
        ResourcePatternType.PREFIXED,
        "User:alice",
        "*",
        AclOperation.ALL,
        AclPermissionType.ALLOW,
    )
    deny_write = AclBinding(
        ResourceType.TOPIC,
        OUT,
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.WRITE,
        AclPermissionType.DENY,
    )
    set_acls(
        secured,
        [
            prefixed_all,
            deny_write,
            allow(ResourceType.BROKER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE),
        ],
    )

    def produce_code() -> int | None:
        p = Producer(
            {
                "bootstrap.servers": secured.bootstrap,
                "enable.idempotence": True,
                "message.timeout.ms": 8000,
                **conf("alice"),
            }
        )
        errors: list[int] = []
        p.produce(OUT, b"x", partition=0, on_delivery=lambda e, m: e and errors.append(e.code()))
        p.flush(15)
        return errors[0] if errors else None

    assert produce_code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    secured.restart()
    assert produce_code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    admin = admin_of(secured)
    listed = admin.describe_acls(
        AclBindingFilter(
            ResourceType.TOPIC,
            None,
            ResourcePatternType.ANY,
            "User:alice",
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
    ).result(15)
    assert sorted(
        (a.name, a.resource_pattern_type, a.operation, a.permission_type) for a in listed
    ) == sorted(
        [
            ("o", ResourcePatternType.PREFIXED, AclOperation.ALL, AclPermissionType.ALLOW),
            (OUT, ResourcePatternType.LITERAL, AclOperation.WRITE, AclPermissionType.DENY),
        ]
    )
    deleted: Any = admin.delete_acls(
        [
            AclBindingFilter(
                ResourceType.TOPIC,
                OUT,
                ResourcePatternType.LITERAL,
                None,
                None,
                AclOperation.ANY,
                AclPermissionType.DENY,
            )
        ]
    )
    assert [len(f.result(15)) for f in deleted.values()] == [1]
    assert produce_code() is None


def test_admin_api_error_codes_and_sensitive_configs(secured: EmbeddedBroker) -> None:
    produce_input(secured, 2)
    owner = Consumer({"bootstrap.servers": secured.bootstrap, "group.id": GROUP, **conf("admin")})
    owner.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
    owner.close()
    set_acls(secured, [allow(ResourceType.TOPIC, OUT, AclOperation.DESCRIBE)])
    alice = AdminClient({"bootstrap.servers": secured.bootstrap, **conf("alice")})

    def code(future: Any) -> int:
        with pytest.raises(KafkaException) as info:
            future.result(15)
        return kafka_code(info.value)

    # librdkafka resolves the leader from Metadata first; the broker's own answer, at the wire:
    with WireClient(secured.bootstrap) as c:
        plain_login(c, "alice", PLAIN_USERS["alice"])
        listed = c.request(
            lo.ListOffsetsRequest(
                replica_id=-1,
                isolation_level=0,
                topics=(
                    lo.ListOffsetsTopic(
                        name=TOPIC,
                        partitions=(
                            lo.ListOffsetsPartition(
                                partition_index=0, current_leader_epoch=-1, timestamp=-1
                            ),
                        ),
                    ),
                ),
            )
        )
        assert listed.topics[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
    # DESCRIBE on the topic (so librdkafka finds its leader), nothing more
    set_acls(secured, [allow(ResourceType.TOPIC, TOPIC, AclOperation.DESCRIBE)])
    assert (
        code(alice.describe_consumer_groups([GROUP])[GROUP])
        == KafkaError.GROUP_AUTHORIZATION_FAILED
    )
    assert (
        code(alice.delete_consumer_groups([GROUP])[GROUP]) == KafkaError.GROUP_AUTHORIZATION_FAILED
    )
    assert (
        code(next(iter(alice.delete_records([TopicPartition(TOPIC, 0, 1)]).values())))
        == KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    assert (
        code(alice.create_partitions([NewPartitions(TOPIC, 2)])[TOPIC])
        == KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    topic_res = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    broker_res = ConfigResource(ConfigResource.Type.BROKER, "0")
    assert (
        code(alice.describe_configs([topic_res])[topic_res])
        == KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    assert (
        code(alice.describe_configs([broker_res])[broker_res])
        == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    )
    alter = ConfigResource(
        ConfigResource.Type.TOPIC,
        TOPIC,
        incremental_configs=[
            ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    assert (
        code(alice.incremental_alter_configs([alter])[alter])
        == KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    assert alice.list_consumer_groups().result(15).valid == []  # filtered: no Group DESCRIBE
    admin = admin_of(secured)
    assert [g.group_id for g in admin.list_consumer_groups().result(15).valid] == [GROUP]
    # the JAAS text (it holds passwords) is never sent, even to a super user
    configs = admin.describe_configs([broker_res])[broker_res].result(15)
    jaas = configs["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    assert jaas.is_sensitive and jaas.value is None
    assert configs["super.users"].value == "User:admin"


def test_topic_id_apis_check_topic_acls(secured: EmbeddedBroker) -> None:
    """Fetch v13+ and DeleteTopics v6 resolve the id, then check the topic's ACL; an id
    of a topic the caller may not describe never reveals its name. DescribeTopicPartitions
    needs Topic DESCRIBE per topic and reports the allowed operations."""
    set_acls(
        secured,
        [
            allow(ResourceType.TOPIC, OUT, AclOperation.DESCRIBE),
            allow(ResourceType.TOPIC, TOPIC, AclOperation.READ),
        ],
    )
    with WireClient(secured.bootstrap) as admin_conn:
        plain_login(admin_conn, "admin", PLAIN_USERS["admin"])
        ids = {
            t.name: t.topic_id
            for t in admin_conn.request(
                md.MetadataRequest(
                    topics=None,
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )
            ).topics
        }
    with WireClient(secured.bootstrap) as c:
        plain_login(c, "alice", PLAIN_USERS["alice"])
        fetch = c.request(
            fe17.FetchRequest(
                max_wait=datetime.timedelta(milliseconds=10),
                min_bytes=1,
                topics=tuple(
                    fe17.FetchTopic(
                        topic_id=ids[name],
                        partitions=(
                            fe17.FetchPartition(
                                partition=0, fetch_offset=0, partition_max_bytes=1000
                            ),
                        ),
                    )
                    for name in (TOPIC, OUT)
                ),
                forgotten_topics_data=(),
            )
        )
        assert {t.topic_id: t.partitions[0].error_code for t in fetch.responses} == {
            ids[TOPIC]: ErrorCode.none,
            ids[OUT]: ErrorCode.topic_authorization_failed,
        }
        deleted = c.request(
            dt6.DeleteTopicsRequest(
                topics=(
                    dt6.DeleteTopicState(name=None, topic_id=ids[TOPIC]),
                    dt6.DeleteTopicState(name=None, topic_id=ids[OUT]),
                ),
                timeout=T,
            )
        )
        # READ implies DESCRIBE on TOPIC, so its name is shown; OUT is only describable.
        assert sorted((r.name, r.error_code) for r in deleted.responses) == [
            (TOPIC, ErrorCode.topic_authorization_failed),
            (OUT, ErrorCode.topic_authorization_failed),
        ]
        set_acls(secured, [allow(ResourceType.TOPIC, OUT, AclOperation.DESCRIBE)])
        hidden = c.request(
            dt6.DeleteTopicsRequest(
                topics=(dt6.DeleteTopicState(name=None, topic_id=ids[TOPIC]),), timeout=T
            )
        )
        assert [(r.name, r.topic_id, r.error_code) for r in hidden.responses] == [
            (None, ids[TOPIC], ErrorCode.topic_authorization_failed)
        ]
        described = c.request(
            dtp.DescribeTopicPartitionsRequest(
                topics=(dtp.TopicRequest(name=TOPIC), dtp.TopicRequest(name=OUT))
            )
        )
        assert [
            (t.name, t.error_code, t.topic_id is None, len(t.partitions)) for t in described.topics
        ] == [
            (OUT, ErrorCode.none, False, 1),
            (TOPIC, ErrorCode.topic_authorization_failed, True, 0),
        ]
        assert described.topics[0].topic_authorized_operations == 1 << AclOperation.DESCRIBE.value
        listed = c.request(dtp.DescribeTopicPartitionsRequest(topics=()))
        assert [t.name for t in listed.topics] == [OUT]


def bits(*ops: AclOperation) -> int:
    return sum(1 << op.value for op in ops)


def test_authorized_operations_when_asked(secured: EmbeddedBroker) -> None:
    """KIP-430: Metadata v8-10, DescribeCluster and DescribeGroups v3+ report the caller's
    allowed operations as a bit field when asked (implied DESCRIBE included), and
    Integer.MIN_VALUE when not."""
    set_acls(
        secured,
        [
            allow(ResourceType.TOPIC, OUT, AclOperation.DESCRIBE),
            allow(ResourceType.TOPIC, TOPIC, AclOperation.READ),
            allow(ResourceType.TOPIC, TOPIC, AclOperation.WRITE),
            allow(ResourceType.GROUP, GROUP, AclOperation.READ),
            allow(ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE),
        ],
    )
    unknown = -(2**31)
    with WireClient(secured.bootstrap) as c:
        plain_login(c, "alice", PLAIN_USERS["alice"])

        def metadata(asked: bool) -> Any:
            return c.request(
                md10.MetadataRequest(
                    topics=None,
                    allow_auto_topic_creation=False,
                    include_cluster_authorized_operations=asked,
                    include_topic_authorized_operations=asked,
                )
            )

        asked = metadata(True)
        assert sorted((t.name, t.topic_authorized_operations) for t in asked.topics) == [
            (TOPIC, bits(AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE)),
            (OUT, bits(AclOperation.DESCRIBE)),
        ]
        assert asked.cluster_authorized_operations == bits(AclOperation.DESCRIBE)
        not_asked = metadata(False)
        assert {t.topic_authorized_operations for t in not_asked.topics} == {unknown}
        assert not_asked.cluster_authorized_operations == unknown
        cluster = c.request(
            dc.DescribeClusterRequest(include_cluster_authorized_operations=True, endpoint_type=1)
        )
        assert cluster.cluster_authorized_operations == bits(AclOperation.DESCRIBE)
        groups = c.request(
            dg.DescribeGroupsRequest(groups=(GROUP,), include_authorized_operations=True)
        )
        assert [(g.group_id, g.error_code, g.authorized_operations) for g in groups.groups] == [
            (GROUP, ErrorCode.none, bits(AclOperation.READ, AclOperation.DESCRIBE))
        ]


def test_create_topics_returns_configs_only_to_who_may_describe_them(
    secured: EmbeddedBroker,
) -> None:
    """Kafka's KafkaApis: without DESCRIBE_CONFIGS on the topic, CreateTopics answers
    TOPIC_AUTHORIZATION_FAILED in topic_config_error_code and no configs."""
    set_acls(
        secured,
        [
            allow(ResourceType.TOPIC, "c1", AclOperation.CREATE),
            allow(ResourceType.TOPIC, "c2", AclOperation.CREATE),
            allow(ResourceType.TOPIC, "c2", AclOperation.DESCRIBE_CONFIGS),
        ],
    )
    with WireClient(secured.bootstrap) as c:
        plain_login(c, "alice", PLAIN_USERS["alice"])
        resp = c.request(
            ct.CreateTopicsRequest(
                topics=tuple(
                    ct.CreatableTopic(
                        name=name,
                        num_partitions=1,
                        replication_factor=1,
                        assignments=(),
                        configs=(),
                    )  # fmt: skip
                    for name in ("c1", "c2")
                ),
                timeout=T,
                validate_only=False,
            )
        )
    hidden, shown = resp.topics
    assert (hidden.name, hidden.error_code, hidden.topic_config_error_code) == (
        "c1",
        ErrorCode.none,
        ErrorCode.topic_authorization_failed,
    )
    assert hidden.configs == ()
    assert (shown.name, shown.error_code, shown.topic_config_error_code) == (
        "c2",
        ErrorCode.none,
        ErrorCode.none,
    )
    assert "cleanup.policy" in {entry.name for entry in shown.configs}


def test_consumer_group_describe_hides_groups_holding_undescribable_topics(
    secured: EmbeddedBroker,
) -> None:
    """KAFKA-18813: a KIP-848 member subscribed by regex is assigned every matching
    topic; a client that may describe the group but not one of those topics gets
    TOPIC_AUTHORIZATION_FAILED for the group, without its members."""
    from confluent_kafka import Consumer
    from kio.schema.consumer_group_describe.v0 import request as cgd

    admin = admin_of(secured)
    admin.create_topics([NewTopic("pub-a", 1, 1), NewTopic("pub-secret", 1, 1)])
    time.sleep(1)
    set_acls(
        secured,
        [
            allow(ResourceType.GROUP, "regex-group", AclOperation.DESCRIBE),
            allow(ResourceType.TOPIC, "pub-a", AclOperation.DESCRIBE),
        ],
    )
    consumer = Consumer(
        {
            "bootstrap.servers": secured.bootstrap,
            **conf("admin"),
            "group.id": "regex-group",
            "group.protocol": "consumer",
        }
    )
    consumer.subscribe(["^pub-.*"])
    request = cgd.ConsumerGroupDescribeRequest(
        group_ids=("regex-group",), include_authorized_operations=False
    )
    try:
        deadline = time.monotonic() + 30
        with WireClient(secured.bootstrap) as c:
            plain_login(c, "alice", PLAIN_USERS["alice"])
            while time.monotonic() < deadline:
                consumer.poll(0.2)
                group = c.request(request).groups[0]
                # Not joined yet (GROUP_ID_NOT_FOUND) or not yet assigned pub-secret
                # (NONE): wait; a loaded machine can be slow to join.
                if group.error_code not in (ErrorCode.none, ErrorCode.group_id_not_found):
                    break
            assert group.error_code == ErrorCode.topic_authorization_failed, group
            assert group.members == ()
            assert "not authorized to describe" in (group.error_message or "")
            # Allowed to describe both topics: the group and its member are shown.
            set_acls(
                secured,
                [
                    allow(ResourceType.GROUP, "regex-group", AclOperation.DESCRIBE),
                    allow(ResourceType.TOPIC, "pub-a", AclOperation.DESCRIBE),
                    allow(ResourceType.TOPIC, "pub-secret", AclOperation.DESCRIBE),
                ],
            )
            group = c.request(request).groups[0]
            assert group.error_code == ErrorCode.none
            assert len(group.members) == 1
    finally:
        consumer.close()


def test_a_regex_subscription_matches_only_topics_the_member_may_describe(
    secured: EmbeddedBroker,
) -> None:
    """KAFKA-18813: a KIP-848 member's regex is resolved with its principal's view; alice
    may describe rx-a but not rx-secret, so `^rx-.*` assigns her rx-a's partitions only,
    and the topic she may not see is never named to her."""
    from confluent_kafka import Consumer, Producer

    admin = admin_of(secured)
    for f in admin.create_topics([NewTopic("rx-a", 2, 1), NewTopic("rx-secret", 2, 1)]).values():
        f.result(15)
    producer = Producer({"bootstrap.servers": secured.bootstrap, **conf("admin")})
    for topic in ("rx-a", "rx-secret"):
        for partition in (0, 1):
            producer.produce(topic, value=topic.encode(), partition=partition)
    assert producer.flush(15) == 0
    set_acls(
        secured,
        [
            allow(ResourceType.GROUP, "rx-group", AclOperation.READ),
            allow(ResourceType.TOPIC, "rx-a", AclOperation.READ),  # READ implies DESCRIBE
        ],
    )
    consumer = Consumer(
        {
            "bootstrap.servers": secured.bootstrap,
            **conf("alice"),
            "group.id": "rx-group",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["^rx-.*"])
    try:
        seen: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(seen) < 2 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                seen.append(msg.value())
        assert seen == [b"rx-a", b"rx-a"]
        # A later heartbeat assigns nothing more: still only rx-a's two partitions.
        end = time.monotonic() + 2
        while time.monotonic() < end:
            assert consumer.poll(0.2) is None
        assert sorted((tp.topic, tp.partition) for tp in consumer.assignment()) == [
            ("rx-a", 0),
            ("rx-a", 1),
        ]
        # librdkafka drops topic ids it cannot name, so ask the broker what it assigned.
        described = admin.describe_consumer_groups(["rx-group"])["rx-group"].result(15)
        (member,) = described.members
        assert sorted((tp.topic, tp.partition) for tp in member.assignment.topic_partitions) == [
            ("rx-a", 0),
            ("rx-a", 1),
        ]
    finally:
        consumer.close()
