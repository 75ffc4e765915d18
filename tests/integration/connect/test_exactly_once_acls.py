"""An exactly-once source connector on a broker with an authorizer: the worker
principal (alice) and the connector principal (bob, through ``producer.override.*``,
``consumer.override.*`` and ``admin.override.*``) hold exactly the ACLs docs/connect.md
lists, and records arrive; without bob's TransactionalId grant the task fails.

Zombie fencing runs with the connector's admin principal (carol in the second test):
without her TransactionalId grants a new task generation fails with a message that
says what to grant; with them it runs."""

from __future__ import annotations

import json
from pathlib import Path

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

from oncelog.embedded import EmbeddedBroker
from tests.integration.security import PLAIN_USERS, confluent_sasl, plain_jaas

from .kafka_adapters import read_to_end
from .workers import WorkerProcess, wait_for, worker_settings

GROUP = "acl"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


USERS = {**PLAIN_USERS, "carol": "carol-secret"}
BROKER_SETTINGS = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(USERS),
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
    "transaction.state.log.num.partitions": "4",
    "offsets.topic.num.partitions": "4",
}
SECURITY = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}


def _jaas(user: str) -> str:
    return f'{PLAIN} required username="{user}" password="{USERS[user]}";'


def _allow(
    principal: str, rtype: ResourceType, name: str, op: AclOperation, prefixed: bool = False
) -> AclBinding:
    pattern = ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL
    return AclBinding(rtype, name, pattern, principal, "*", op, AclPermissionType.ALLOW)


def _worker_acls() -> list[AclBinding]:
    alice = "User:alice"
    T, G, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
    out = [
        # What any worker needs: its internal topics and its group.
        *(
            _allow(alice, T, f"{GROUP}-", op, prefixed=True)
            for op in (
                AclOperation.CREATE,
                AclOperation.READ,
                AclOperation.WRITE,
                AclOperation.DESCRIBE,
                AclOperation.DESCRIBE_CONFIGS,
            )
        ),
        _allow(alice, G, GROUP, AclOperation.READ),
        _allow(alice, G, "connect-log-", AclOperation.READ, prefixed=True),
        # KIP-618: the leader's config-topic producer.
        _allow(alice, X, f"connect-cluster-{GROUP}", AclOperation.WRITE),
        _allow(alice, X, f"connect-cluster-{GROUP}", AclOperation.DESCRIBE),
    ]
    return out


def _connector_acls(with_transactional_id: bool) -> list[AclBinding]:
    bob = "User:bob"
    T, X = ResourceType.TOPIC, ResourceType.TRANSACTIONAL_ID
    out = [
        _allow(bob, T, "acl-out", AclOperation.WRITE),  # its data topic
        _allow(bob, T, f"{GROUP}-offsets", AclOperation.WRITE),  # offsets in its transactions
        _allow(bob, T, f"{GROUP}-offsets", AclOperation.READ),
    ]
    if with_transactional_id:
        for op in (AclOperation.WRITE, AclOperation.DESCRIBE):
            out.append(_allow(bob, X, f"{GROUP}-v", op, prefixed=True))
    return out


def _documented_setup(bootstrap: str) -> AdminClient:
    """The connector's output topic and the documented grants, set up as admin."""
    admin = AdminClient(
        {
            "bootstrap.servers": bootstrap,
            **confluent_sasl("SASL_PLAINTEXT", "PLAIN", "admin", PLAIN_USERS["admin"]),
        }
    )
    admin.create_topics([NewTopic("acl-out", 1, 1)])["acl-out"].result(15)
    for future in admin.create_acls([*_worker_acls(), *_connector_acls(True)]).values():
        future.result(15)
    return admin


def test_exactly_once_connector_with_the_documented_acls(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "data", settings=BROKER_SETTINGS) as broker:
        bootstrap = broker.bootstrap_for("SASL_PLAINTEXT")
        admin = _documented_setup(bootstrap)
        security = {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": _jaas("alice"),
        }
        worker = WorkerProcess(
            worker_settings(
                bootstrap, GROUP, **security, **{"exactly.once.source.support": "enabled"}
            ),
            tmp_path / "worker.log",
        ).start()
        try:
            connector = {
                "connector.class": "VerifiableSource",
                "topic": "acl-out",
                "throughput": "100",
                "tasks.max": "1",
                "exactly.once.support": "required",
                **{
                    f"{client}.override.sasl.jaas.config": _jaas("bob")
                    for client in ("producer", "consumer", "admin")
                },
            }
            status, body = worker.call("POST", "/connectors", {"name": "v", "config": connector})
            assert status == 201, body

            def committed() -> list[int]:
                records = read_to_end(
                    bootstrap,
                    "acl-out",
                    extra=confluent_sasl("SASL_PLAINTEXT", "PLAIN", "admin", PLAIN_USERS["admin"]),
                )
                return [json.loads(m.value())["seqno"] for m in records]

            wait_for(lambda: len(committed()) >= 100, 60, "records from the connector")
            seqnos = committed()
            assert seqnos == list(range(len(seqnos)))
            assert worker.get("/connectors/v/status")["tasks"][0]["state"] == "RUNNING"

            # Without the TransactionalId grant the restarted task cannot start.
            deleted = admin.delete_acls(
                [
                    AclBindingFilter(
                        ResourceType.TRANSACTIONAL_ID,
                        f"{GROUP}-v",
                        ResourcePatternType.PREFIXED,
                        "User:bob",
                        "*",
                        AclOperation.ANY,
                        AclPermissionType.ANY,
                    )
                ]
            )
            for future in deleted.values():
                future.result(15)
            assert worker.call("POST", "/connectors/v/tasks/0/restart")[0] == 204
            trace = wait_for(
                lambda: (
                    (t := worker.get("/connectors/v/status")["tasks"][0])["state"] == "FAILED"
                    and t["trace"]
                ),
                60,
                "task failed",
            )
            assert (
                "Transactional Id authorization failed" in trace
                or "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in trace
            ), trace
        finally:
            worker.kill()


def _states(worker: WorkerProcess) -> list[tuple[str, str]]:
    return [(t["state"], t.get("trace", "")) for t in worker.get("/connectors/v/status")["tasks"]]


def test_zombie_fencing_needs_the_connector_admin_principals_grant(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "data", settings=BROKER_SETTINGS) as broker:
        bootstrap = broker.bootstrap_for("SASL_PLAINTEXT")
        admin = _documented_setup(bootstrap)
        worker = WorkerProcess(
            worker_settings(
                bootstrap,
                GROUP,
                **SECURITY,
                **{"sasl.jaas.config": _jaas("alice"), "exactly.once.source.support": "enabled"},
            ),
            tmp_path / "worker.log",
        ).start()
        try:
            connector = {
                "connector.class": "VerifiableSource",
                "topic": "acl-out",
                "throughput": "100",
                "tasks.max": "2",
                "exactly.once.support": "required",
                "producer.override.sasl.jaas.config": _jaas("bob"),
                "consumer.override.sasl.jaas.config": _jaas("bob"),
                "admin.override.sasl.jaas.config": _jaas("carol"),
            }
            status, body = worker.call("POST", "/connectors", {"name": "v", "config": connector})
            assert status == 201, body
            # The first generation fences nothing (no task-count record yet): it runs.
            wait_for(lambda: [s for s, _ in _states(worker)] == ["RUNNING"] * 2, 60, "running")

            # A new generation: the leader fences v-0 and v-1 first, with carol.
            connector["tasks.max"] = "3"
            assert worker.call("PUT", "/connectors/v/config", connector)[0] == 200
            states = wait_for(
                lambda: (
                    (s := _states(worker))
                    and len(s) == 3
                    and all(x == "FAILED" for x, _ in s)
                    and s
                ),
                90,
                "the new generation failed",
            )
            for _, trace in states:
                assert "Failed to fence out producers ['acl-v-0', 'acl-v-1']" in trace, trace
                assert (
                    "grant it Write and Describe on the TransactionalId resources "
                    "['acl-v-0', 'acl-v-1']" in trace
                ), trace

            # With the documented grant, the same generation starts.
            grants = [
                _allow("User:carol", ResourceType.TRANSACTIONAL_ID, f"{GROUP}-v", op, True)
                for op in (AclOperation.WRITE, AclOperation.DESCRIBE)
            ]
            for future in admin.create_acls(grants).values():
                future.result(15)
            status, _ = worker.call(
                "POST", "/connectors/v/restart?includeTasks=true&onlyFailed=true"
            )
            assert status in (202, 204), status
            wait_for(lambda: [s for s, _ in _states(worker)] == ["RUNNING"] * 3, 90, "running")
        finally:
            worker.kill()
