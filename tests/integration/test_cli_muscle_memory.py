"""What a Kafka operator's hands type: tables piped through grep keep one row per line with
every cell whole; kafka-*.sh's flag spellings give the same output as oncelog's; `users add`
reads a password from stdin and never falls into getpass without a terminal; ACL commands
on a broker without an authorizer say so in one line; Kafka's extra flags (--if-exists,
--if-not-exists, --producer/--consumer/--idempotent, abort --start-offset, ...)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from typer.testing import CliRunner

from oncelog.cli.main import app
from oncelog.client.admin import Admin
from oncelog.client.config import ClientConfig
from oncelog.embedded import EmbeddedBroker

pytestmark = pytest.mark.xdist_group("test_cli_muscle_memory")

runner = CliRunner()
FAST = {
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
}
AUTHORIZED = {
    **FAST,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}
NO_AUTHORIZER = (
    "error: the broker has no authorizer, so it keeps no ACLs: set "
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer "
    "to use them\n"
)


@pytest.fixture(scope="module")
def b(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    broker = EmbeddedBroker(tmp_path_factory.mktemp("mm") / "data", settings=FAST).start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def ab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """A broker with an authorizer; PLAINTEXT clients (ANONYMOUS) are super users."""
    broker = EmbeddedBroker(tmp_path_factory.mktemp("mm-acl") / "data", settings=AUTHORIZED)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def run(*args: str, input: str | None = None) -> tuple[int, str, str]:
    # COLUMNS=80: the width rich would take for a pipe; it must not matter
    r = runner.invoke(app, list(args), input=input, env={"COLUMNS": "80"})
    return r.exit_code, r.stdout, r.stderr


def ok(*args: str, input: str | None = None) -> str:
    code, out, err = run(*args, input=input)
    assert code == 0, err
    return out


def piped(*args: str, input: str | None = None) -> str:
    """The command's stdout through a real pipe (no terminal), as `... | cat` sees it."""
    done = subprocess.run(
        [sys.executable, "-m", "oncelog.cli.main", *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def cells_of(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("│").split("│")]


def row_with(out: str, *cells: object) -> str:
    """The one table row holding every cell whole: no cell wrapped onto another line or cut."""
    want = [str(c) for c in cells]
    rows = [line for line in out.splitlines() if "│" in line]
    found = [row for row in rows if all(w in cells_of(row) for w in want)]
    assert len(found) == 1, f"no single row with {cells} in:\n{out}"
    return found[0]


def line_with(out: str, text: str) -> str:
    found = [line for line in out.splitlines() if text in line]
    assert len(found) == 1, f"no single line with {text!r} in:\n{out}"
    return found[0]


def long_name(prefix: str) -> str:
    return f"{prefix}-{'a-very-long-name-' * 6}{uuid.uuid4().hex[:8]}"


def new_topic(broker: EmbeddedBroker, name: str | None = None, partitions: int = 1) -> str:
    name = name or f"mm-{uuid.uuid4().hex[:8]}"
    with Admin(ClientConfig(broker.bootstrap)) as admin:
        admin.create_topics([name], partitions)
    return name


def produce(broker: EmbeddedBroker, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
    p.flush()


def open_txn(broker: EmbeddedBroker, topic: str, tid: str) -> Producer:
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid})
    p.init_transactions()
    p.begin_transaction()
    p.produce(topic, value=b"v", partition=0)
    p.flush()
    return p


# -- 1. tables through a pipe ---------------------------------------------------------------
def test_grep_finds_the_whole_config_line(b: EmbeddedBroker) -> None:
    done = subprocess.run(
        f"{sys.executable} -m oncelog.cli.main configs describe --broker 0 --all"
        f" -b {b.bootstrap} | grep transaction.max.timeout.ms",
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert done.returncode == 0, done.stderr
    assert cells_of(done.stdout) == ["transaction.max.timeout.ms", "900000", "DEFAULT_CONFIG"]


def test_every_table_command_keeps_one_row_per_line(b: EmbeddedBroker) -> None:
    bs = ("-b", b.bootstrap)
    topic = new_topic(b, long_name("topic"))
    produce(b, topic, 3)
    ok("configs", "alter", "--topic", topic, "--add-config", "retention.ms=86400000", *bs)

    out = piped("topics", "describe", topic, *bs)
    assert out.splitlines()[0].startswith(f"Topic: {topic}\tTopicId: ")
    assert out.splitlines()[0].endswith("\tConfigs: retention.ms=86400000")
    assert cells_of(row_with(out, "3")) == ["0", "0", "0", "3", "3"]
    row_with(piped("configs", "describe", "--topic", topic, *bs), "retention.ms", "86400000")
    line_with(piped("get-offsets", "-t", topic, *bs), f"{topic}:0:3")

    tid = long_name("txn")
    p = open_txn(b, topic, tid)
    try:
        row_with(piped("transactions", "list", *bs), tid, "Ongoing")
        producers = piped("transactions", "describe-producers", topic, "0", *bs)
        (state,) = json.loads(
            ok("transactions", "describe-producers", topic, "0", "-o", "json", *bs)
        )
        row_with(producers, state["producer_id"], state["last_timestamp"])
        line_with(piped("transactions", "describe", tid, *bs), f"transactional id  {tid}")
        row_with(piped("transactions", "metrics", "-o", "table", *bs), f"{topic}-0", "3", "1")
    finally:
        p.abort_transaction()

    group = long_name("group")
    c = Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": group,
            "client.id": long_name("client"),
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    deadline = time.monotonic() + 20
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.2)
    try:
        row_with(piped("groups", "list", *bs), group)
        described = json.loads(ok("groups", "describe", "-g", group, "-o", "json", *bs))
        member = described["partitions"][0]["consumer_id"]
        assert member and len(member) > 100
        row_with(piped("groups", "describe", "-g", group, *bs), topic, member)
    finally:
        c.close()
    reset = piped("groups", "reset-offsets", "-g", group, "-t", topic, "--to-earliest", *bs)
    row_with(reset, topic, "0")


def test_acl_and_user_tables_keep_one_row_per_line(ab: EmbeddedBroker) -> None:
    bs = ("-b", ab.bootstrap)
    topic, principal = long_name("acl-topic"), long_name("User:someone")
    ok(
        "acls",
        "add",
        "--allow-principal",
        principal,
        "--operation",
        "IdempotentWrite",
        "--cluster",
        *bs,
    )
    ok(
        "acls",
        "add",
        "--allow-principal",
        principal,
        "--operation",
        "DescribeConfigs",
        "--topic",
        topic,
        *bs,
    )
    out = piped("acls", "list", *bs)
    row_with(out, f"TOPIC:{topic}", principal, "DESCRIBE_CONFIGS", "ALLOW")
    row_with(out, "CLUSTER:kafka-cluster", principal, "IDEMPOTENT_WRITE")
    user = long_name("user")
    ok("users", "add", user, "--password-stdin", *bs, input="pw-1\n")
    row_with(piped("users", "list", *bs), user, "SCRAM-SHA-512", "8192")


# -- 2. Kafka's spellings -------------------------------------------------------------------
def test_topics_take_kafka_topic_flag(b: EmbeddedBroker) -> None:
    bs = ("-b", b.bootstrap)
    t1, t2 = f"mm-{uuid.uuid4().hex[:8]}", f"mm-{uuid.uuid4().hex[:8]}"
    created = [
        ok("topics", "create", t1, "-p", "2", *bs),
        ok("topics", "create", "--topic", t2, "-p", "2", *bs),
    ]
    assert [o.replace(t2, t1) for o in created] == [f"created topic {t1} (2 partitions)\n"] * 2
    for fmt in ("json", "table"):
        assert ok("topics", "describe", t1, "-o", fmt, *bs) == ok(
            "topics", "describe", "--topic", t1, "-o", fmt, *bs
        )
    altered = [
        ok("topics", "alter", t1, "--partitions", "3", *bs),
        ok("topics", "alter", "--topic", t2, "--partitions", "3", *bs),
    ]
    assert [o.replace(t2, t1) for o in altered] == [f"topic {t1}: 2 -> 3 partitions\n"] * 2
    deleted = [ok("topics", "delete", t1, *bs), ok("topics", "delete", "--topic", t2, *bs)]
    assert [o.replace(t2, t1) for o in deleted] == [f"deleted topic {t1}\n"] * 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("topics", "create", "a", "--topic", "b"), "NAME 'a' and --topic 'b' disagree: give one"),
        (("topics", "create"), "missing NAME (or --topic NAME)"),
        (("topics", "delete"), "missing NAME (or --topic NAME)"),
        (
            ("transactions", "describe", "x", "--transactional-id", "y"),
            "TRANSACTIONAL_ID 'x' and --transactional-id 'y' disagree: give one",
        ),
        (
            ("transactions", "describe"),
            "missing TRANSACTIONAL_ID (or --transactional-id TRANSACTIONAL_ID)",
        ),
        (
            ("transactions", "describe-producers", "t", "0", "--partition", "1"),
            "PARTITION 0 and --partition 1 disagree: give one",
        ),
        (
            ("transactions", "describe-producers", "t"),
            "missing PARTITION (or --partition PARTITION)",
        ),
        (
            (
                "configs",
                "describe",
                "--topic",
                "a",
                "--entity-type",
                "topics",
                "--entity-name",
                "b",
            ),
            "--topic 'a' and --entity-name 'b' disagree: give one",
        ),
        (
            ("configs", "describe", "--entity-type", "users", "--entity-name", "u"),
            "--entity-type users: expected topics, brokers or groups",
        ),
        (
            ("configs", "describe", "--entity-type", "topics"),
            "--entity-type goes with one of --entity-name or --entity-default",
        ),
    ],
)
def test_both_spellings_disagreeing_or_neither_is_one_usage_line(
    args: tuple[str, ...], message: str
) -> None:
    assert run(*args, "-b", "127.0.0.1:1") == (2, "", f"error: {message}\n")


def test_transactions_take_kafka_flags(b: EmbeddedBroker) -> None:
    bs = ("-b", b.bootstrap)
    topic = new_topic(b)
    tid = f"mm-empty-{uuid.uuid4().hex[:8]}"
    Producer({"bootstrap.servers": b.bootstrap, "transactional.id": tid}).init_transactions()
    for fmt in ("json", "table"):
        assert ok("transactions", "describe", tid, "-o", fmt, *bs) == ok(
            "transactions", "describe", "--transactional-id", tid, "-o", fmt, *bs
        )
    described = json.loads(ok("transactions", "describe", tid, "-o", "json", *bs))
    assert described == {
        "transactional_id": tid,
        "producer_id": described["producer_id"],
        "producer_epoch": 0,
        "state": "Empty",
        "transaction_timeout_ms": 60000,
        "transaction_start_time_ms": None,
        "transaction_duration_ms": None,
        "topic_partitions": [],
    }
    open_id = f"mm-open-{uuid.uuid4().hex[:8]}"
    p = open_txn(b, topic, open_id)
    try:
        for fmt in ("json", "table"):
            assert ok("transactions", "describe-producers", topic, "0", "-o", fmt, *bs) == ok(
                "transactions",
                "describe-producers",
                "--topic",
                topic,
                "--partition",
                "0",
                "-o",
                fmt,
                *bs,
            )
        time.sleep(0.3)
        for filt in ("0", "600000"):
            assert ok("transactions", "list", "--min-duration-ms", filt, "-o", "json", *bs) == ok(
                "transactions", "list", "--duration-filter", filt, "-o", "json", *bs
            )
        listed = json.loads(
            ok("transactions", "list", "--duration-filter", "100", "-o", "json", *bs)
        )
        assert [t["state"] for t in listed if t["transactional_id"] == open_id] == ["Ongoing"]
        assert (
            json.loads(ok("transactions", "list", "--duration-filter", "600000", "-o", "json", *bs))
            == []
        )
    finally:
        p.abort_transaction()


def test_configs_take_entity_type_and_name(b: EmbeddedBroker) -> None:
    bs = ("-b", b.bootstrap)
    topic = new_topic(b)
    assert ok(
        "configs",
        "alter",
        "--entity-type",
        "topics",
        "--entity-name",
        topic,
        "--add-config",
        "retention.ms=1000",
        *bs,
    ) == (f"altered configs of topic {topic}\n")
    for fmt in ("json", "table"):
        assert ok("configs", "describe", "--topic", topic, "-o", fmt, *bs) == ok(
            "configs", "describe", "--entity-type", "topics", "--entity-name", topic, "-o", fmt, *bs
        )
    assert ok("configs", "describe", "--broker", "0", "--all", "-o", "json", *bs) == ok(
        "configs",
        "describe",
        "--entity-type",
        "brokers",
        "--entity-name",
        "0",
        "--all",
        "-o",
        "json",
        *bs,
    )


def test_acls_remove_takes_allow_and_deny_principal(ab: EmbeddedBroker) -> None:
    bs = ("-b", ab.bootstrap)
    topic = f"mm-{uuid.uuid4().hex[:8]}"

    def grant() -> None:
        for flag in ("--allow-principal", "--deny-principal"):
            ok("acls", "add", flag, "User:bob", "--operation", "Read", "--topic", topic, *bs)

    def remaining() -> list[str]:
        return [
            a["permission"]
            for a in json.loads(ok("acls", "list", "--topic", topic, "-o", "json", *bs))
        ]

    grant()
    assert (
        ok("acls", "remove", "--topic", topic, "--allow-principal", "User:bob", *bs)
        == "removed 1 ACL(s)\n"
    )
    assert remaining() == ["DENY"]
    assert (
        ok("acls", "remove", "--topic", topic, "--deny-principal", "User:bob", *bs)
        == "removed 1 ACL(s)\n"
    )
    grant()
    # oncelog's --principal: either permission
    assert (
        ok("acls", "remove", "--topic", topic, "--principal", "User:bob", *bs)
        == "removed 2 ACL(s)\n"
    )
    assert remaining() == []


# -- 3. users add's password ----------------------------------------------------------------
def test_users_add_password_stdin_and_no_terminal(b: EmbeddedBroker) -> None:
    bs = ("-b", b.bootstrap)
    assert ok("users", "add", "carol", "--password-stdin", *bs, input="s3cret\nignored\n") == (
        "added SCRAM-SHA-512 credential for carol\n"
    )
    assert run("users", "add", "carol", "--password-stdin", *bs, input="\n") == (
        2,
        "",
        "error: --password-stdin: the first line of standard input is empty\n",
    )
    assert run(
        "users", "add", "carol", "--password", "x", "--password-stdin", *bs, input="y\n"
    ) == (
        2,
        "",
        "error: --password and --password-stdin exclude each other\n",
    )
    # a real process with no terminal on stdin: one line, no GetPassWarning
    done = subprocess.run(
        [sys.executable, "-m", "oncelog.cli.main", "users", "add", "dave", *bs],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        "",
        "error: no password: give --password or --password-stdin (prompting needs a terminal)\n",
    )
    help_text = ok("users", "add", "--help")
    assert "--password-stdin" in help_text and "prompts" in help_text


# -- 4. ACLs without an authorizer ----------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ("acls", "list"),
        ("acls", "add", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t"),
        ("acls", "remove", "--topic", "t"),
    ],
)
def test_acl_commands_without_an_authorizer_say_so(
    b: EmbeddedBroker, args: tuple[str, ...]
) -> None:
    assert run(*args, "-b", b.bootstrap) == (1, "", NO_AUTHORIZER)


# -- 5. Kafka's extra flags -----------------------------------------------------------------
def test_topics_if_exists_if_not_exists_and_describe_all(b: EmbeddedBroker) -> None:
    bs = ("-b", b.bootstrap)
    topic = new_topic(b)
    assert (
        ok("topics", "create", topic, "--if-not-exists", *bs) == f"topic {topic} already exists\n"
    )
    code, _, err = run("topics", "create", topic, *bs)
    assert code == 1 and "TOPIC_ALREADY_EXISTS" in err
    missing = f"mm-missing-{uuid.uuid4().hex[:8]}"
    assert ok("topics", "delete", "--topic", missing, "--if-exists", *bs) == (
        f"no topic {missing}: nothing to delete\n"
    )
    assert ok("topics", "alter", missing, "--partitions", "2", "--if-exists", *bs) == (
        f"no topic {missing}: nothing to alter\n"
    )
    assert ok("topics", "describe", missing, "--if-exists", *bs) == ""
    everything = json.loads(ok("topics", "describe", "-o", "json", *bs))
    names = [d["topic"] for d in everything]
    assert topic in names and names == sorted(names)
    assert not any(n.startswith("__") for n in names)
    one = json.loads(ok("topics", "describe", topic, "-o", "json", *bs))
    assert one in everything
    with_internal = json.loads(ok("topics", "describe", "--internal", "-o", "json", *bs))
    assert "__consumer_offsets" in [d["topic"] for d in with_internal]
    text = ok("topics", "describe", *bs)
    summaries = [line for line in text.splitlines() if line.startswith("Topic: ")]
    assert len(summaries) == len(names)
    assert (
        f"Topic: {topic}\tTopicId: {one['topic_id']}\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: \n"
        in text
    )


def acl_set(ab: EmbeddedBroker, *filters: str) -> set[tuple[str, str, str]]:
    rows = json.loads(ok("acls", "list", *filters, "-o", "json", "-b", ab.bootstrap))
    return {
        (f"{r['resource_type']}:{r['resource_name']}", r["operation"], r["permission"])
        for r in rows
    }


def test_acls_producer_consumer_idempotent(ab: EmbeddedBroker) -> None:
    bs = ("-b", ab.bootstrap)
    topic, txn, group = (f"mm-{what}-{uuid.uuid4().hex[:8]}" for what in ("t", "x", "g"))
    principal = f"User:p-{uuid.uuid4().hex[:8]}"
    assert (
        ok(
            "acls",
            "add",
            "--allow-principal",
            principal,
            "--producer",
            "--topic",
            topic,
            "--transactional-id",
            txn,
            "--idempotent",
            *bs,
        )
        == "added 6 ACL(s)\n"
    )
    got = {a for a in acl_set(ab, "--principal", principal)}
    assert got == {
        (f"TOPIC:{topic}", "WRITE", "ALLOW"),
        (f"TOPIC:{topic}", "DESCRIBE", "ALLOW"),
        (f"TOPIC:{topic}", "CREATE", "ALLOW"),
        (f"TRANSACTIONAL_ID:{txn}", "WRITE", "ALLOW"),
        (f"TRANSACTIONAL_ID:{txn}", "DESCRIBE", "ALLOW"),
        ("CLUSTER:kafka-cluster", "IDEMPOTENT_WRITE", "ALLOW"),
    }
    consumer = f"User:c-{uuid.uuid4().hex[:8]}"
    assert (
        ok(
            "acls",
            "add",
            "--allow-principal",
            consumer,
            "--consumer",
            "--topic",
            topic,
            "--group",
            group,
            *bs,
        )
        == "added 3 ACL(s)\n"
    )
    assert acl_set(ab, "--principal", consumer) == {
        (f"TOPIC:{topic}", "READ", "ALLOW"),
        (f"TOPIC:{topic}", "DESCRIBE", "ALLOW"),
        (f"GROUP:{group}", "READ", "ALLOW"),
    }
    for args, message in (
        (("--consumer", "--topic", topic), "--consumer needs a --group"),
        (("--producer",), "--producer and --consumer need a --topic"),
        (
            ("--idempotent", "--topic", topic, "--operation", "Write"),
            "--idempotent goes with --producer",
        ),
        (
            ("--producer", "--topic", topic, "--operation", "Write"),
            "--operation does not go with --producer/--consumer",
        ),
    ):
        assert run("acls", "add", "--allow-principal", principal, *args, *bs) == (
            2,
            "",
            f"error: {message}\n",
        )


def test_abort_by_start_offset(b: EmbeddedBroker) -> None:
    bs = ("-b", b.bootstrap)
    topic = new_topic(b)
    produce(b, topic, 2)
    p = open_txn(b, topic, f"mm-abort-{uuid.uuid4().hex[:8]}")
    (state,) = json.loads(ok("transactions", "describe-producers", topic, "0", "-o", "json", *bs))
    assert state["txn_start_offset"] == 2
    assert run(
        "transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset", "1", *bs
    ) == (
        1,
        "",
        f"error: could not find any open transaction starting at offset 1 on partition {topic}-0\n",
    )
    assert ok(
        "transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset", "2", *bs
    ) == (f"wrote ABORT marker for producer {state['producer_id']} to {topic}-0\n")
    (after,) = json.loads(ok("transactions", "describe-producers", topic, "0", "-o", "json", *bs))
    assert after["txn_start_offset"] == -1
    del p  # its transaction is over: it was aborted under it


def test_metrics_table_and_json_agree(b: EmbeddedBroker) -> None:
    bs = ("-b", b.bootstrap)
    topic = new_topic(b)
    produce(b, topic, 4)
    data = json.loads(ok("transactions", "metrics", *bs))
    assert json.loads(ok("transactions", "metrics", "-o", "json", *bs))["partitions"][
        f"{topic}-0"
    ] == {
        "high_watermark": 4,
        "last_stable_offset": 4,
        "lso_lag": 0,
    }
    table = ok("transactions", "metrics", "-o", "table", *bs)
    assert f"live producer ids         {data['live_producer_ids']}\n" in table
    row_with(table, f"{topic}-0", "4", "0")


# -- docs -----------------------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[2]


def test_the_kafka_spellings_snippet_of_docs_cli_runs_as_written(ab: EmbeddedBroker) -> None:
    text = (ROOT / "docs" / "cli.md").read_text()
    (block,) = re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M)
    script = "set -euo pipefail\n" + block.replace("127.0.0.1:9092", ab.bootstrap)
    done = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    out = done.stdout
    assert "created topic orders (3 partitions)\n" in out
    assert out.count("Topic: orders\tTopicId: ") == 1
    assert cells_of(line_with(out, "transaction.max.timeout.ms")) == [
        "transaction.max.timeout.ms",
        "900000",
        "DEFAULT_CONFIG",
    ]
    assert cells_of(line_with(out, "log.retention.ms")) == [
        "log.retention.ms",
        "86400000",
        "DYNAMIC_DEFAULT_BROKER_CONFIG",
    ]
    assert out.count("altered configs of the cluster-wide broker defaults\n") == 2
    assert "added 6 ACL(s)\nremoved 3 ACL(s)\n" in out
    assert out.endswith("added SCRAM-SHA-512 credential for app\ndeleted topic orders\n")


# -- console tools --------------------------------------------------------------------------
def test_console_consumer_partition_offset_headers_and_include(b: EmbeddedBroker) -> None:
    bs = ("-b", b.bootstrap)
    prefix = f"mm-inc-{uuid.uuid4().hex[:6]}"
    topic = new_topic(b, f"{prefix}-a", partitions=2)
    other = new_topic(b, f"{prefix}-b")
    new_topic(b, f"x{prefix}-c")  # matches the pattern only partly: not read
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(4):
        headers = [("h1", b"a"), ("h2", None)] if i == 3 else None
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0, headers=headers)
    p.produce(topic, value=b"elsewhere", partition=1)
    p.produce(other, value=b"other", partition=0)
    p.flush()
    code, out, err = run(
        "console-consumer", "-t", topic, "--partition", "0", "--offset", "2",
        "--max-messages", "2", "--property", "print.key=true", "--property", "print.offset=true",
        "--property", "print.partition=true", "--property", "print.headers=true",
        "--property", "key.separator=|", *bs,
    )  # fmt: skip
    assert (code, out, err) == (
        0,
        "Partition:0|Offset:2|NO_HEADERS|k2|v2\nPartition:0|Offset:3|h1:a,h2:null|k3|v3\n",
        "Processed a total of 2 messages\n",
    )
    timestamped = ok(
        "console-consumer", "-t", topic, "--partition", "0", "--offset", "earliest",
        "--max-messages", "1", "--property", "print.timestamp=true", *bs,
    )  # fmt: skip
    assert timestamped.startswith("CreateTime:") and timestamped.endswith("\tv0\n")
    code, out, _ = run(
        "console-consumer", "--include", f"{prefix}-.*", "--from-beginning",
        "--max-messages", "6", "--timeout-ms", "15000", *bs,
    )  # fmt: skip
    assert code == 0 and sorted(out.split()) == ["elsewhere", "other", "v0", "v1", "v2", "v3"]
    for args, message in (
        ((), "exactly one of --topic or --include is required"),
        (("-t", topic, "--include", "x"), "exactly one of --topic or --include is required"),
        (("-t", topic, "--offset", "1"), "--offset needs --partition"),
        (("--include", "x", "--partition", "0"), "--partition needs --topic"),
        (("-t", topic, "--partition", "0", "--group", "g"), "--group and --partition exclude each other"),
        (("-t", topic, "--partition", "0", "--offset", "-3"), "--offset -3: expected earliest, latest or a non-negative number"),
        (("-t", topic, "--partition", "0", "--offset", "1", "--from-beginning"), "--from-beginning and --offset exclude each other"),
    ):  # fmt: skip
        assert run("console-consumer", *args, *bs) == (2, "", f"error: {message}\n")


def test_console_consumer_properties_and_config_file(b: EmbeddedBroker, tmp_path: Path) -> None:
    bs = ("-b", b.bootstrap)
    topic = new_topic(b)
    produce(b, topic, 2)
    p = open_txn(b, topic, f"mm-cc-{uuid.uuid4().hex[:8]}")
    try:
        base = ("console-consumer", "-t", topic, "--from-beginning", "--timeout-ms", "3000", *bs)
        assert ok(*base) == "v0\nv1\nv\n"
        assert ok(*base, "--consumer-property", "isolation.level=read_committed") == "v0\nv1\n"
    finally:
        p.abort_transaction()
    group = f"mm-cfg-{uuid.uuid4().hex[:8]}"
    config = tmp_path / "consumer.properties"
    config.write_text(f"group.id={group}\nauto.offset.reset=earliest\nenable.auto.commit=true\n")
    assert ok(
        "console-consumer",
        "-t",
        topic,
        "--consumer.config",
        str(config),
        "--max-messages",
        "2",
        *bs,
    ) == ("v0\nv1\n")
    described = json.loads(ok("groups", "describe", "-g", group, "-o", "json", *bs))
    # the file's group.id: the consumer committed as that group
    (committed,) = [r["current_offset"] for r in described["partitions"]]
    assert committed >= 2


def codecs(b: EmbeddedBroker, topic: str) -> list[str]:
    out = ok("dump-log", str(b.data_dir / f"{topic}-0"), "-o", "json")
    return [batch["compression"] for d in json.loads(out) for batch in d["batches"]]


def test_console_producer_flags(b: EmbeddedBroker, tmp_path: Path) -> None:
    bs = ("-b", b.bootstrap)
    topic = new_topic(b)
    big = "x" * 2000 + "\n"  # librdkafka sends small batches uncompressed
    config = tmp_path / "producer.properties"
    config.write_text("compression.type=gzip\nlinger.ms=0\n")
    ok("console-producer", "-t", topic, "--compression-codec", "zstd", *bs, input=big)
    ok("console-producer", "-t", topic, "--producer.config", str(config), *bs, input=big)
    ok(
        "console-producer", "-t", topic, "--producer.config", str(config),
        "--producer-property", "compression.type=lz4", *bs, input=big,
    )  # fmt: skip
    ok(
        "console-producer", "-t", topic, "--producer.config", str(config),
        "--compression-codec", "snappy", "--producer-property", "compression.type=lz4", *bs, input=big,
    )  # fmt: skip
    ok(
        "console-producer",
        "-t",
        topic,
        "--sync",
        "--request-required-acks",
        "0",
        *bs,
        input="a\nb\n",
    )
    assert codecs(b, topic)[:4] == ["zstd", "gzip", "lz4", "snappy"]
    consumed = ok("console-consumer", "-t", topic, "--from-beginning", "--max-messages", "6", *bs)
    assert consumed.splitlines()[4:] == ["a", "b"]
    assert run(
        "console-producer", "-t", topic, "--compression-codec", "brotli", *bs, input="a\n"
    ) == (
        2,
        "",
        "error: --compression-codec brotli: expected one of none, gzip, snappy, lz4, zstd\n",
    )
    assert run(
        "console-producer", "-t", topic, "--request-required-acks", "2", *bs, input="a\n"
    ) == (
        2,
        "",
        "error: --request-required-acks 2: expected -1, all, 0 or 1\n",
    )


# -- consumer groups ------------------------------------------------------------------------
def test_groups_all_groups_members_state_and_resets(b: EmbeddedBroker) -> None:
    bs = ("-b", b.bootstrap)
    topic = new_topic(b, partitions=2)
    produce(b, topic, 5)
    group = f"mm-g-{uuid.uuid4().hex[:8]}"
    c = Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": group,
            "client.id": "mm-client",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 20
    while got < 5 and time.monotonic() < deadline:
        got += sum(1 for m in c.consume(5, 0.5) if m.error() is None)
    c.commit(asynchronous=False)
    try:
        members = json.loads(ok("groups", "describe", "-g", group, "--members", "-o", "json", *bs))
        (member,) = members["members"]
        assert members["state"] == "Stable"
        assert (member["client_id"], member["partitions"], member["assignment"]) == (
            "mm-client",
            2,
            [f"{topic}-0", f"{topic}-1"],
        )
        state = json.loads(ok("groups", "describe", "-g", group, "--state", "-o", "json", *bs))
        assert state == {
            "group": group,
            "coordinator": 0,
            "assignment_strategy": state["assignment_strategy"],
            "state": "Stable",
            "members": 1,
        }
        assert state["assignment_strategy"] in (
            "range",
            "roundrobin",
            "cooperative-sticky",
            "uniform",
        )
        stable = json.loads(ok("groups", "list", "--state", "stable", "-o", "json", *bs))
        assert group in [g["group"] for g in stable]
        empty = json.loads(ok("groups", "list", "--state", "Empty", "-o", "json", *bs))
        assert group not in [g["group"] for g in empty]
    finally:
        c.close()
    everything = json.loads(ok("groups", "describe", "--all-groups", "-o", "json", *bs))
    mine = [g for g in everything if g["group"] == group]
    assert mine == [json.loads(ok("groups", "describe", "-g", group, "-o", "json", *bs))]
    assert [r["current_offset"] for r in mine[0]["partitions"]] == [5]  # partition 1: none

    def plan(*how: str) -> list[int]:
        rows = json.loads(
            ok("groups", "reset-offsets", "-g", group, "-t", topic, *how, "-o", "json", *bs)
        )
        return [r["new_offset"] for r in rows]

    assert plan("--to-current") == [5, 0]  # partition 1 has no commit: its log end
    assert plan("--by-duration", "PT1H") == [0, 0]  # every record is younger than an hour
    time.sleep(0.05)
    assert plan("--by-duration", "P0DT0H0M0.001S") == [5, 0]  # none this young: the log end
    for args, message in (
        (("-g", group, "--all-groups"), "give --group or --all-groups"),
        ((), "give --group or --all-groups"),
        (("-g", group, "--members", "--state"), "--members and --state exclude each other"),
    ):
        assert run("groups", "describe", *args, *bs) == (2, "", f"error: {message}\n")
    assert run(
        "groups", "reset-offsets", "-g", group, "-t", topic, "--by-duration", "10m", *bs
    ) == (
        2,
        "",
        "error: --by-duration 10m: expected PnDTnHnMnS, e.g. PT10M or P1DT12H\n",
    )


def test_dump_log_deep_iteration_prints_records_without_data(b: EmbeddedBroker) -> None:
    topic = new_topic(b)
    produce(b, topic, 2)
    segment = str(b.data_dir / f"{topic}-0" / "00000000000000000000.log")
    shallow = ok("dump-log", segment).splitlines()
    deep = ok("dump-log", segment, "--deep-iteration").splitlines()
    assert [line for line in deep if not line.startswith("| ")] == shallow
    records = [line for line in deep if line.startswith("| ")]
    assert [r.split(" CreateTime: ")[0] for r in records] == ["| offset: 0", "| offset: 1"]
    assert all(r.endswith("keySize: 2 valueSize: 2 sequence: -1 headerKeys: []") for r in records)
    assert "payload" not in "".join(deep)


def test_groups_reset_offsets_export_and_from_file(b: EmbeddedBroker, tmp_path: Path) -> None:
    """kafka-consumer-groups.sh's --export writes a reset plan as CSV, --from-file applies
    one (ConsumerGroupCommand.exportOffsetsToCsv / parseResetPlan)."""
    bs = ("-b", b.bootstrap)
    topic = new_topic(b, partitions=2)
    produce(b, topic, 5)
    group = f"mm-plan-{uuid.uuid4().hex[:8]}"
    exported = ok(
        "groups", "reset-offsets", "-g", group, "-t", topic, "--to-latest", "--export", *bs
    )
    assert exported == f"{topic},0,5\n{topic},1,0\n"

    def committed() -> list[int | None]:
        described = json.loads(ok("groups", "describe", "-g", group, "-o", "json", *bs))
        return [r["current_offset"] for r in described["partitions"]]

    plan = tmp_path / "plan.csv"
    plan.write_text(exported.replace(f"{topic},0,5", f"{topic},0,2"))

    def from_plan(*extra: str) -> str:
        return ok("groups", "reset-offsets", "-g", group, "--from-file", str(plan), *extra, *bs)

    rows = json.loads(from_plan("--execute", "-o", "json"))
    assert [(r["partition"], r["new_offset"]) for r in rows] == [(0, 2), (1, 0)]
    assert committed() == [2, 0]
    # The group column: only this group's lines count; offsets are clamped into the log.
    plan.write_text(f"other,{topic},0,4\n{group},{topic},0,99\n")
    assert from_plan("--execute", "--export") == f"{topic},0,5\n"
    assert committed() == [5, 0]
    # A dry run from a file commits nothing.
    plan.write_text(f"{topic},1,0\n{topic},0,1\n")
    from_plan()
    assert committed() == [5, 0]

    def refused(text: str, *extra: str) -> tuple[int, str, str]:
        plan.write_text(text)
        return run("groups", "reset-offsets", "-g", group, "--from-file", str(plan), *extra, *bs)

    assert refused(f"{topic},0\n") == (
        2,
        "",
        f"error: {plan}:1: expected topic,partition,offset or group,topic,partition,offset, got '{topic},0'\n",
    )
    assert refused(f"{topic},0,1\n{topic},x,1\n") == (
        2,
        "",
        f"error: {plan}:2: expected a topic, a partition and an offset, got '{topic},x,1'\n",
    )
    assert refused(f"other,{topic},0,1\n") == (
        2,
        "",
        f"error: reset plan {plan} has no offsets for group '{group}'\n",
    )
    assert refused(f"{topic},0,1\n", "-t", topic) == (
        2,
        "",
        "error: --from-file takes its partitions from the file: drop --topic/--all-topics\n",
    )
    assert refused(f"{topic},0,1\n", "--to-earliest")[0] == 2
    assert refused(f"{topic},7,1\n")[2] == f"error: topic '{topic}' has no partition 7\n"
    assert refused("no-such-topic,0,1\n")[2] == "error: unknown topic 'no-such-topic'\n"
    assert committed() == [5, 0]


def test_dump_log_index_files_and_verify_index_only(tmp_path: Path) -> None:
    """kafka-dump-log.sh on .index, .timeindex and .txnindex files (DumpLogSegments):
    every entry, checked against the segment; --verify-index-only prints only problems."""
    import struct

    from confluent_kafka import Producer as KafkaProducer

    broker = EmbeddedBroker(tmp_path / "data", settings={"log.segment.bytes": "60000"}).start()
    try:
        p = KafkaProducer({"bootstrap.servers": broker.bootstrap, "batch.num.messages": 5})
        for i in range(60):
            p.produce("ix", value=b"x" * 500, partition=0)
            if i % 5 == 4:
                p.flush()
        t = KafkaProducer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ix-t"})
        t.init_transactions()
        t.begin_transaction()
        t.produce("ix", value=b"a", partition=0)
        t.flush()
        t.abort_transaction()
        del p, t  # closed before the broker stops: no reconnect noise
    finally:
        broker.stop()
    seg = tmp_path / "data" / "ix-0" / f"{0:020d}"
    log = ok("dump-log", f"{seg}.log", "-o", "json")
    batches = json.loads(log)[0]["batches"]
    # Every 4096 bytes or so a batch is indexed: its last offset and its position.
    out = ok("dump-log", f"{seg}.index").splitlines()
    assert out[0] == f"Dumping {seg}.index"
    entries = [line.split() for line in out[1:]]
    assert entries and all(e[0] == "offset:" and e[2] == "position:" for e in entries)
    by_position = {b["position"]: b["last_offset"] for b in batches}
    assert all(by_position[int(e[3])] == int(e[1]) for e in entries)
    # The time index: growing max timestamps, each the max of the batch it names.
    times = [line.split() for line in ok("dump-log", f"{seg}.timeindex").splitlines()[1:]]
    by_last = {b["last_offset"]: b["max_timestamp"] for b in batches}
    assert times and all(by_last[int(t[3])] == int(t[1]) for t in times)
    # The aborted transaction, in the transaction index.
    assert ok("dump-log", f"{seg}.txnindex").splitlines()[1] == (
        "version: 0 producerId: 0 firstOffset: 60 lastOffset: 61 lastStableOffset: 62"
    )
    # Healthy files verify to nothing; a corrupted entry is reported on stderr, exit 0.
    assert run("dump-log", f"{seg}.index", f"{seg}.timeindex", "--verify-index-only") == (
        0,
        f"Dumping {seg}.index\nDumping {seg}.timeindex\n",
        "",
    )
    index = Path(f"{seg}.index")
    data = bytearray(index.read_bytes())
    first_offset, first_position = struct.unpack_from(">ii", data, 0)
    struct.pack_into(">ii", data, 0, first_offset + 1, first_position)
    index.write_bytes(bytes(data))
    code, stdout, stderr = run("dump-log", f"{seg}.index", "--verify-index-only")
    assert (code, stdout) == (0, f"Dumping {seg}.index\n")
    assert stderr == (
        f"Mismatches in :{index.resolve()}\n"
        f"  Index offset: {first_offset + 1}, log offset: {first_offset}\n"
    )
    timeindex = Path(f"{seg}.timeindex")
    data = bytearray(timeindex.read_bytes())
    stamp, relative = struct.unpack_from(">qi", data, 0)
    struct.pack_into(">qi", data, 0, stamp - 7, relative)
    timeindex.write_bytes(bytes(data) + b"\x00")  # and a torn entry at the end
    assert run("dump-log", f"{seg}.timeindex", "--verify-index-only")[2] == (
        f"{seg.name}.timeindex has a partial entry: the broker rebuilds this index from the "
        "log at start\n"
    )
    timeindex.write_bytes(bytes(data))
    assert run("dump-log", f"{seg}.timeindex", "--verify-index-only")[2] == (
        f"Found timestamp mismatch in :{timeindex.resolve()}\n"
        f"  Index timestamp: {stamp - 7}, log timestamp: {stamp}\n"
    )


def test_topics_topic_flag_is_a_regex_as_in_kafka_topics(b: EmbeddedBroker) -> None:
    """kafka-topics.sh's --topic of describe/alter/delete is a regular expression (Kafka's
    IncludeList: ',' means or, whole names); the positional NAME stays one exact name."""
    bs = ("-b", b.bootstrap)
    stem = f"rx{uuid.uuid4().hex[:6]}"
    a, b_, dotted, other = f"{stem}-a", f"{stem}-b", f"{stem}.c", f"{stem}Xc"
    for t in (a, b_, dotted, other):
        ok("topics", "create", t, *bs)
    described = json.loads(ok("topics", "describe", "--topic", f"{stem}-.*", "-o", "json", *bs))
    assert [d["topic"] for d in described] == [a, b_]
    listed = json.loads(ok("topics", "describe", "--topic", f"{a},{dotted}", "-o", "json", *bs))
    assert [d["topic"] for d in listed] == [a, dotted, other]  # '.' matches X too, as in Kafka
    # The positional name is exact: the dotted name reaches its own topic only.
    assert json.loads(ok("topics", "describe", dotted, "-o", "json", *bs))["topic"] == dotted
    assert ok("topics", "alter", "--topic", f"{stem}-.*", "--partitions", "2", *bs) == (
        f"topic {a}: 1 -> 2 partitions\ntopic {b_}: 1 -> 2 partitions\n"
    )
    # One match that cannot grow refuses the whole alter: nothing changes.
    assert run("topics", "alter", "--topic", f"{stem}.*", "--partitions", "2", *bs) == (
        1,
        "",
        f"error: cannot alter topic {a!r}: it has 2 partitions; --partitions must be more "
        "than that\n",
    )
    unchanged = json.loads(ok("topics", "describe", "--topic", f"{stem}.c", "-o", "json", *bs))
    assert [len(d["partitions"]) for d in unchanged] == [1, 1]
    assert run("topics", "describe", "--topic", f"{stem}(", *bs)[0] == 2
    assert run("topics", "describe", "--topic", f"{stem}-z.*", *bs) == (
        1,
        "",
        f"error: unknown topic '{stem}-z.*'\n",
    )
    assert run("topics", "delete", "--topic", f"{stem}-z.*", "--if-exists", *bs) == (
        0,
        f"no topic {stem}-z.*: nothing to delete\n",
        "",
    )
    # A pattern never deletes an internal topic.
    assert run("topics", "delete", "--topic", "__consumer_offsets|__transaction_state", *bs)[0] == 1
    assert ok("topics", "delete", "--topic", f"{stem}-.*", *bs) == (
        f"deleted topic {a}\ndeleted topic {b_}\n"
    )
    remaining = json.loads(ok("topics", "describe", "--topic", f"{stem}.*", "-o", "json", *bs))
    assert [d["topic"] for d in remaining] == [dotted, other]
