"""The HTTP listener's authentication and ACL filtering: /metrics and the console show a
caller only the topics, transactional ids and groups it may describe; basic
authentication takes the broker's own PLAIN and SCRAM users; the console's abort needs
what ``oncelog transactions abort`` needs on the Kafka port. Brokers with SASL_PLAINTEXT,
the StandardAuthorizer and User:admin as super user, set up through the Kafka port."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from email.message import Message
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from oncelog.cli.main import app
from oncelog.embedded import EmbeddedBroker

from .security import PLAIN_USERS, confluent_sasl, plain_jaas

ROOT = Path(__file__).resolve().parents[2]
SHOWN, SECRET = "shown-topic", "secret-topic"
CHALLENGE = 'Basic realm="oncelog"'


def conf(user: str) -> dict[str, object]:
    return confluent_sasl("SASL_PLAINTEXT", "PLAIN", user, PLAIN_USERS[user])


def settings(**extra: str) -> dict[str, str]:
    return {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "false",
        "transaction.state.log.num.partitions": "2",
        "offsets.topic.num.partitions": "2",
        "metrics.listener": "http://127.0.0.1:0",
        **extra,
    }


def start(data: Path, **extra: str) -> EmbeddedBroker:
    return EmbeddedBroker(data, settings=settings(**extra)).start()


def admin_of(b: EmbeddedBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap, **conf("admin")})


def allow(principal: str, rtype: ResourceType, name: str, op: AclOperation) -> AclBinding:
    return AclBinding(
        rtype, name, ResourcePatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW
    )


def grant(b: EmbeddedBroker, *acls: AclBinding) -> None:
    admin = admin_of(b)  # kept alive until the futures are done
    for f in admin.create_acls(list(acls)).values():
        f.result(15)


def create_topics(b: EmbeddedBroker, *names: str) -> None:
    admin = admin_of(b)
    for f in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        f.result(15)


def http(
    url: str,
    method: str = "GET",
    data: dict[str, str] | None = None,
    auth: tuple[str, str] | None = None,
    **headers: str,
) -> tuple[int, Message, str]:
    """(status, headers, body) without raising on 4xx."""
    if auth is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(":".join(auth).encode()).decode()
    body = None if data is None else urllib.parse.urlencode(data).encode()
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.headers, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read().decode()


def samples(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def label_values(text: str, label: str) -> set[str]:
    return {
        dict(labels)[label]
        for series in samples(text).values()
        for labels in series
        if label in dict(labels)
    }


def console_text(url: str, auth: tuple[str, str] | None = None) -> str:
    """The page and every panel, as one caller sees them."""
    parts = []
    for path in ("/", "/console/partitions", "/console/transactions", "/console/groups"):
        status, _, body = http(url + path, auth=auth)
        assert status == 200, (path, status, body)
        parts.append(body)
    return "\n".join(parts)


@pytest.fixture
def populated(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    """Two topics, two open transactions (shown-txn writes to both topics), two groups
    with committed offsets (shown-group on both topics); every name has a secret twin."""
    b = start(tmp_path / "data", **{"console.allow.abort": "true"})
    producers: list[Producer] = []
    try:
        create_topics(b, SHOWN, SECRET)
        plain = Producer({"bootstrap.servers": b.bootstrap, **conf("admin")})
        for topic in (SHOWN, SECRET):
            plain.produce(topic, b"plain", partition=0)
        assert plain.flush(15) == 0
        for txn_id, topics in (("shown-txn", (SHOWN, SECRET)), ("secret-txn", (SECRET,))):
            p = Producer(
                {"bootstrap.servers": b.bootstrap, "transactional.id": txn_id, **conf("admin")}
            )
            p.init_transactions(15)
            p.begin_transaction()
            for topic in topics:
                p.produce(topic, b"open", partition=0)
            assert p.flush(15) == 0
            producers.append(p)  # left open: Ongoing, with its partitions
        for group, topics in (("shown-group", (SHOWN, SECRET)), ("secret-group", (SHOWN,))):
            c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, **conf("admin")})
            c.commit(offsets=[TopicPartition(t, 0, 1) for t in topics], asynchronous=False)
            c.close()
        yield b
    finally:
        b.stop()
        producers.clear()


def test_unauthenticated_callers_see_only_what_anonymous_may_describe(
    populated: EmbeddedBroker,
) -> None:
    b = populated
    url = b.http_url
    assert url is not None
    anonymous = "User:ANONYMOUS"
    grant(
        b,
        allow(anonymous, ResourceType.TOPIC, SHOWN, AclOperation.DESCRIBE),
        allow(anonymous, ResourceType.TRANSACTIONAL_ID, "shown-txn", AclOperation.DESCRIBE),
        allow(anonymous, ResourceType.GROUP, "shown-group", AclOperation.DESCRIBE),
    )

    status, _, text = http(f"{url}/metrics")
    assert status == 200
    assert label_values(text, "topic") == {SHOWN}  # not secret-topic, nor internal topics
    assert label_values(text, "group") == {"shown-group"}
    s = samples(text)
    lag = (("group", "shown-group"), ("partition", "0"), ("topic", SHOWN))
    assert s["oncelog_consumer_group_lag_offsets"] == {lag: 1}
    assert s["oncelog_partition_open_transactions"] == {(("partition", "0"), ("topic", SHOWN)): 1}
    # Counts derived from the transactional ids count only the describable one.
    assert s["oncelog_transactional_ids"] == {(): 1}
    assert s["oncelog_transactions"][(("state", "Ongoing"),)] == 1
    assert SECRET not in text and "secret-group" not in text

    page = console_text(url)
    for hidden in (SECRET, "secret-txn", "secret-group", "__consumer_offsets"):
        assert hidden not in page, hidden
    assert f'data-topic="{SHOWN}"' in page
    # shown-txn is listed, with only the partitions of topics the caller may describe.
    row = page.split('data-transactional-id="shown-txn"')[1].split("</tr>")[0]
    assert f"{SHOWN}-0" in row and "Ongoing" in row
    assert '<td class="id">shown-group</td>' in page

    # The LSO-lag chart draws only describable topics (it samples every topic).
    time.sleep(2.5)
    status, _, chart = http(f"{url}/console/chart")
    assert status == 200 and f'data-topic="{SHOWN}"' in chart
    assert SECRET not in chart


def test_anonymous_without_acls_sees_no_resource(populated: EmbeddedBroker) -> None:
    url = populated.http_url
    assert url is not None
    status, _, text = http(f"{url}/metrics")
    assert status == 200
    assert label_values(text, "topic") == set()
    assert label_values(text, "group") == set()
    assert samples(text)["oncelog_transactional_ids"] == {(): 0}
    # Broker-wide series without a resource name stay.
    assert samples(text)["oncelog_producer_ids"][()] >= 2
    page = console_text(url)
    for hidden in (SHOWN, SECRET, "shown-txn", "secret-txn", "shown-group", "secret-group"):
        assert hidden not in page, hidden


def test_basic_authentication_with_plain_and_scram_users(tmp_path: Path) -> None:
    data = tmp_path / "data"
    added = CliRunner().invoke(
        app, ["users", "add", "carol", "--password", "carol-pw", "--data-dir", str(data)]
    )
    assert added.exit_code == 0, added.output
    b = start(data, **{"metrics.listener.authentication": "basic"})
    try:
        url = b.http_url
        assert url is not None
        create_topics(b, SHOWN, SECRET)
        grant(b, allow("User:alice", ResourceType.TOPIC, SHOWN, AclOperation.DESCRIBE))

        for path in ("/metrics", "/", "/console/partitions"):
            status, headers, body = http(url + path)
            assert (status, headers["WWW-Authenticate"]) == (401, CHALLENGE), path
        status, headers, body = http(f"{url}/metrics", auth=("alice", "wrong"))
        assert (status, headers["WWW-Authenticate"], body) == (
            401,
            CHALLENGE,
            "invalid user name or password",
        )
        status, _, _ = http(f"{url}/metrics", auth=("carol", "alice-secret"))
        assert status == 401
        status, _, _ = http(f"{url}/metrics", auth=("nobody", "x"))
        assert status == 401

        # PLAIN user alice: authenticated, and filtered by her ACLs.
        status, _, text = http(f"{url}/metrics", auth=("alice", PLAIN_USERS["alice"]))
        assert status == 200
        assert label_values(text, "topic") == {SHOWN}
        # SCRAM user carol (credential store): authenticated, no ACLs, no topics.
        status, _, text = http(f"{url}/metrics", auth=("carol", "carol-pw"))
        assert status == 200
        assert SHOWN not in text and SECRET not in text
        # The super user sees everything, internal topics included.
        status, _, text = http(f"{url}/metrics", auth=("admin", PLAIN_USERS["admin"]))
        assert status == 200
        assert {SHOWN, SECRET, "__consumer_offsets"} <= label_values(text, "topic")
        # The three wrong passwords went through the Kafka port's counter (the missing
        # credentials of the first requests are a challenge, not a failure).
        assert samples(text)["oncelog_failed_authentication_total"] == {(): 3}
        assert SECRET in console_text(url, ("admin", PLAIN_USERS["admin"]))
        assert SECRET not in console_text(url, ("alice", PLAIN_USERS["alice"]))
    finally:
        b.stop()


def test_console_abort_needs_what_the_abort_tool_needs(tmp_path: Path) -> None:
    """An orphaned hanging transaction (the coordinator lost it) is aborted with an ABORT
    marker: Topic READ (DescribeProducers) and Cluster CLUSTER_ACTION (WriteTxnMarkers)."""
    data = tmp_path / "data"
    extra = {
        "metrics.listener.authentication": "basic",
        "console.allow.abort": "true",
        "transaction.max.timeout.ms": "1000",
    }
    b = start(data, **extra)
    try:
        create_topics(b, "stuck")
        grant(b, allow("User:bob", ResourceType.TOPIC, "stuck", AclOperation.READ))
        p = Producer(
            {
                "bootstrap.servers": b.bootstrap,
                "transactional.id": "lost",
                "transaction.timeout.ms": 1000,
                "log_level": 0,
                **conf("admin"),
            }
        )
        p.init_transactions(15)
        p.begin_transaction()
        p.produce("stuck", b"hanging", partition=0)
        assert p.flush(15) == 0
        b.kill()
        for d in data.glob("__transaction_state-*"):
            shutil.rmtree(d)
        b.start()
        url = b.http_url
        assert url is not None
        admin = ("admin", PLAIN_USERS["admin"])
        bob = ("bob", PLAIN_USERS["bob"])
        alice = ("alice", PLAIN_USERS["alice"])

        def hanging() -> float:
            s = samples(http(f"{url}/metrics", auth=admin)[2])
            return s["oncelog_hanging_transactions"][(("kind", "orphaned"),)]

        deadline = time.monotonic() + 15
        while hanging() != 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert hanging() == 1
        status, _, panel = http(f"{url}/console/hanging", auth=bob)
        assert status == 200 and "data-producer-id" in panel
        pid = panel.split('data-producer-id="')[1].split('"')[0]
        # alice may not read the topic: the row (a producer's state) is not hers to see.
        assert "data-producer-id" not in http(f"{url}/console/hanging", auth=alice)[2]
        token = http(f"{url}/", auth=bob)[2].split('"X-Oncelog-Token": "')[1].split('"')[0]
        console = {"HX-Request": "true", "X-Oncelog-Token": token}
        form = {"topic": "stuck", "partition": "0", "producer_id": pid}

        status, _, body = http(f"{url}/console/abort", "POST", form, alice, **console)
        assert (status, body) == (
            403,
            "abort refused: User:alice may not READ topic stuck (DescribeProducers)",
        )
        status, _, body = http(f"{url}/console/abort", "POST", form, bob, **console)
        assert (status, body) == (
            403,
            "abort refused: User:bob may not CLUSTER_ACTION on the cluster (WriteTxnMarkers)",
        )
        assert hanging() == 1  # still open, still holding the LSO back
        lag = samples(http(f"{url}/metrics", auth=admin)[2])["oncelog_partition_lso_lag_offsets"]
        assert lag[(("partition", "0"), ("topic", "stuck"))] == 1

        grant(
            b, allow("User:bob", ResourceType.BROKER, "kafka-cluster", AclOperation.CLUSTER_ACTION)
        )
        status, _, body = http(f"{url}/console/abort", "POST", form, bob, **console)
        assert (status, body) == (200, f"wrote ABORT marker for producer {pid} to stuck-0")
        assert hanging() == 0
        lag = samples(http(f"{url}/metrics", auth=admin)[2])["oncelog_partition_lso_lag_offsets"]
        assert lag[(("partition", "0"), ("topic", "stuck"))] == 0
    finally:
        b.stop()


def test_security_docs_http_listener_snippets_run_as_written(tmp_path: Path) -> None:
    """docs/security.md's server.properties and scrape script for the HTTP listener,
    with only the ports changed (0: free ones) and the script pointed at the bound one."""
    text = (ROOT / "docs" / "security.md").read_text()
    section = text.split("## The HTTP listener: authentication and ACLs\n")[1].split("\n## ")[0]
    (props,) = re.findall(r"```properties\n(.*?)```", section, re.S)
    (script,) = re.findall(r"```python\n(.*?)```", section, re.S)
    config = tmp_path / "server.properties"
    config.write_text(props.replace(":9092", ":0").replace(":9404", ":0"))
    with EmbeddedBroker(tmp_path / "data", config_file=config) as b:
        assert b.http_url is not None
        code = script.replace("http://127.0.0.1:9404", b.http_url)

        def run(code: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
            )

        done = run(code)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("# HELP oncelog_")
        refused = run(code.replace("operator-secret", "not-the-password"))
        assert refused.returncode == 1 and "HTTP Error 401: Unauthorized" in refused.stderr


def test_basic_authentication_needs_a_sasl_listener(tmp_path: Path) -> None:
    b = EmbeddedBroker(
        tmp_path / "data",
        settings={
            "metrics.listener": "http://127.0.0.1:0",
            "metrics.listener.authentication": "basic",
        },
    )
    with pytest.raises(RuntimeError, match="add a SASL_PLAINTEXT or SASL_SSL listener"):
        b.start()
