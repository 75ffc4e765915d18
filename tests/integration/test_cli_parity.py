"""The Kafka-tool commands of `oncelog` against a real broker: exact JSON output or exact
effect (offsets reset, records deleted), and one error line per failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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

# xdist (make test): one worker runs this module, so its module-scoped fixture starts once.
pytestmark = pytest.mark.xdist_group("test_cli_parity")

runner = CliRunner()
FAST = {
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture(scope="module")
def b(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    broker = EmbeddedBroker(tmp_path_factory.mktemp("cli") / "data", settings=FAST).start()
    try:
        yield broker
    finally:
        broker.stop()


def run(*args: str, input: str | None = None) -> tuple[int, str, str]:
    r = runner.invoke(app, list(args), input=input)
    return r.exit_code, r.stdout, r.stderr


def ok_json(*args: str) -> object:
    code, out, err = run(*args, "-o", "json")
    assert code == 0, err
    return json.loads(out)


def new_topic(b: EmbeddedBroker, partitions: int = 1) -> str:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    with Admin(ClientConfig(b.bootstrap)) as admin:
        admin.create_topics([name], partitions)
    return name


def produce(b: EmbeddedBroker, topic: str, n: int, partition: int = 0, prefix: str = "v") -> None:
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=f"{prefix}{i}".encode(), partition=partition)
    p.flush()


def consume_and_commit(b: EmbeddedBroker, topic: str, group: str, n: int) -> None:
    c = Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    got = 0
    while got < n:
        got += sum(1 for m in c.consume(n, 1.0) if m.error() is None)
    c.commit(asynchronous=False)
    c.close()


# -- errors and flags -----------------------------------------------------------------------
def test_unreachable_cluster_is_one_line_without_librdkafka_noise() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "oncelog.cli.main", "topics", "list", "-b", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        1,
        "",
        "error: cannot reach 127.0.0.1:1 (connection refused) after 5 s\n",
    )


@pytest.mark.parametrize(
    "args",
    [
        ("topics", "list"),
        ("groups", "list"),
        ("transactions", "list"),
        ("get-offsets", "-t", "x"),
        ("acls", "list"),
    ],
)
def test_a_bad_bootstrap_port_is_a_usage_error(args: tuple[str, ...]) -> None:
    assert run(*args, "-b", "localhost:abc") == (
        2,
        "",
        "error: --bootstrap-server localhost:abc: expected HOST:PORT with a port from 1 to"
        " 65535, got 'localhost:abc'\n",
    )


def test_version_and_bad_output_flag() -> None:
    code, out, _ = run("--version")
    assert (code, out) == (0, "oncelog 0.1.0\n")
    assert run("topics", "list", "-o", "yaml") == (
        2,
        "",
        "error: --output yaml: expected table or json\n",
    )


def test_describe_of_an_unknown_topic_is_one_line(b: EmbeddedBroker) -> None:
    assert run("topics", "describe", "no-such-topic", "-b", b.bootstrap) == (
        1,
        "",
        "error: unknown topic 'no-such-topic'\n",
    )


# -- topics, configs ------------------------------------------------------------------------
def test_topics_alter_partitions_and_describe_json(b: EmbeddedBroker) -> None:
    topic = new_topic(b)
    produce(b, topic, 3)
    assert run("topics", "alter", topic, "--partitions", "3", "-b", b.bootstrap) == (
        0,
        f"topic {topic}: 1 -> 3 partitions\n",
        "",
    )
    assert run("topics", "alter", topic, "--partitions", "2", "-b", b.bootstrap) == (
        1,
        "",
        f"error: cannot alter topic '{topic}': it has 3 partitions; "
        "--partitions must be more than that\n",
    )
    described = ok_json("topics", "describe", topic, "-b", b.bootstrap)
    assert isinstance(described, dict) and len(described["topic_id"]) == 22  # base64, as Kafka
    assert described == {
        "topic": topic,
        "topic_id": described["topic_id"],
        "partitions": [
            {
                "partition": p,
                "leader": 0,
                "log_start_offset": 0,
                "last_stable_offset": 3 if p == 0 else 0,
                "high_watermark": 3 if p == 0 else 0,
            }
            for p in range(3)
        ],
        "configs": {},
    }


def test_configs_alter_and_describe(b: EmbeddedBroker) -> None:
    topic = new_topic(b)
    assert run(
        "configs",
        "alter",
        "--topic",
        topic,
        "--add-config",
        "retention.ms=60000,max.message.bytes=2048",
        "-b",
        b.bootstrap,
    ) == (0, f"altered configs of topic {topic}\n", "")
    assert ok_json("configs", "describe", "--topic", topic, "-b", b.bootstrap) == [
        {
            "name": "max.message.bytes",
            "value": "2048",
            "source": "DYNAMIC_TOPIC_CONFIG",
            "sensitive": False,
        },
        {
            "name": "retention.ms",
            "value": "60000",
            "source": "DYNAMIC_TOPIC_CONFIG",
            "sensitive": False,
        },
    ]
    code, _, err = run(
        "configs", "alter", "--topic", topic, "--delete-config", "retention.ms", "-b", b.bootstrap
    )
    assert code == 0, err
    assert [
        c["name"] for c in ok_json("configs", "describe", "--topic", topic, "-b", b.bootstrap)
    ] == [  # type: ignore[union-attr]
        "max.message.bytes"
    ]
    everything = ok_json("configs", "describe", "--broker", "0", "--all", "-b", b.bootstrap)
    assert {
        "name": "num.partitions",
        "value": "1",
        "source": "DEFAULT_CONFIG",
        "sensitive": False,
    } in everything  # type: ignore[operator]


# -- offsets, records -----------------------------------------------------------------------
def test_get_offsets_shows_the_lso_under_read_committed(b: EmbeddedBroker) -> None:
    topic = new_topic(b)
    produce(b, topic, 2)
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": f"open-{topic}"})
    p.init_transactions()
    p.begin_transaction()
    p.produce(topic, value=b"pending", partition=0)
    p.flush()
    try:
        assert run("get-offsets", "-t", topic, "-b", b.bootstrap) == (0, f"{topic}:0:3\n", "")
        assert run(
            "get-offsets",
            "-t",
            f"{topic}:0",
            "--isolation-level",
            "read_committed",
            "-b",
            b.bootstrap,
        ) == (0, f"{topic}:0:2\n", "")
        assert ok_json("get-offsets", "-t", topic, "--time", "earliest", "-b", b.bootstrap) == [
            {"topic": topic, "partition": 0, "offset": 0}
        ]
    finally:
        p.abort_transaction()


def test_delete_records_moves_the_log_start(b: EmbeddedBroker) -> None:
    topic = new_topic(b, 2)
    produce(b, topic, 5, partition=0)
    produce(b, topic, 4, partition=1)
    assert ok_json("delete-records", "-t", topic, "--before", "3", "-b", b.bootstrap) == [
        {"topic": topic, "partition": 0, "low_watermark": 3},
        {"topic": topic, "partition": 1, "low_watermark": 3},
    ]
    plan = Path(os.environ.get("TMPDIR", "/tmp")) / f"{topic}.json"
    plan.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 1, "offset": -1}]}))
    try:
        assert ok_json("delete-records", "--offset-json-file", str(plan), "-b", b.bootstrap) == [
            {"topic": topic, "partition": 1, "low_watermark": 4}
        ]
    finally:
        plan.unlink()
    assert run("get-offsets", "-t", topic, "--time", "earliest", "-b", b.bootstrap) == (
        0,
        f"{topic}:0:3\n{topic}:1:4\n",
        "",
    )


# -- consumer groups ------------------------------------------------------------------------
def committed(b: EmbeddedBroker, group: str) -> dict[int, int | None]:
    data = ok_json("groups", "describe", "-g", group, "-b", b.bootstrap)
    return {r["partition"]: r["current_offset"] for r in data["partitions"]}  # type: ignore[index]


def test_groups_list_describe_reset_delete(b: EmbeddedBroker) -> None:
    topic = new_topic(b, 2)
    group = f"g-{topic}"
    produce(b, topic, 6, partition=0)
    produce(b, topic, 4, partition=1)
    consume_and_commit(b, topic, group, 10)
    produce(b, topic, 2, partition=0)  # lag 2 on partition 0

    listed = ok_json("groups", "list", "-b", b.bootstrap)
    assert {"group": group, "state": "Empty", "type": "classic"} in listed  # type: ignore[operator]
    data = ok_json("groups", "describe", "-g", group, "-b", b.bootstrap)
    assert data == {
        "group": group,
        "state": "Empty",
        "partitions": [
            {
                "group": group,
                "topic": topic,
                "partition": p,
                "current_offset": cur,
                "log_end_offset": end,
                "last_stable_offset": end,
                "lag": end - cur,
                "consumer_id": None,
                "host": None,
                "client_id": None,
            }
            for p, cur, end in ((0, 6, 8), (1, 4, 4))
        ],
    }

    # dry run (the default): a plan, nothing committed
    plan = ok_json(
        "groups", "reset-offsets", "-g", group, "-t", topic, "--to-earliest", "-b", b.bootstrap
    )
    assert plan == [
        {"group": group, "topic": topic, "partition": 0, "previous_offset": 6, "new_offset": 0},
        {"group": group, "topic": topic, "partition": 1, "previous_offset": 4, "new_offset": 0},
    ]
    assert committed(b, group) == {0: 6, 1: 4}

    def reset(*how: str) -> None:
        code, _, err = run(
            "groups", "reset-offsets", "-g", group, *how, "--execute", "-b", b.bootstrap
        )
        assert code == 0, err

    reset("-t", topic, "--to-earliest")
    assert committed(b, group) == {0: 0, 1: 0}
    reset("-t", f"{topic}:0", "--shift-by", "5")
    assert committed(b, group) == {0: 5, 1: 0}
    reset("-t", f"{topic}:0", "--shift-by", "100")  # clamped to the end
    assert committed(b, group) == {0: 8, 1: 0}
    reset("--all-topics", "--to-datetime", "2000-01-01T00:00:00")
    assert committed(b, group) == {0: 0, 1: 0}
    reset("--all-topics", "--to-datetime", "2999-01-01T00:00:00")  # after every record: the end
    assert committed(b, group) == {0: 8, 1: 4}
    reset("-t", topic, "--to-offset", "1")
    assert committed(b, group) == {0: 1, 1: 1}
    reset("-t", topic, "--to-latest")
    assert committed(b, group) == {0: 8, 1: 4}

    assert run("groups", "delete-offsets", "-g", group, "-t", f"{topic}:1", "-b", b.bootstrap) == (
        0,
        f"deleted offset of {group} for {topic}-1\n",
        "",
    )
    assert committed(b, group) == {0: 8}
    assert run("groups", "delete", "-g", group, "-b", b.bootstrap) == (
        0,
        f"deleted group {group}\n",
        "",
    )
    assert group not in [g["group"] for g in ok_json("groups", "list", "-b", b.bootstrap)]  # type: ignore[union-attr]


def test_reset_offsets_refuses_an_active_group(b: EmbeddedBroker) -> None:
    topic = new_topic(b)
    group = f"g-{topic}"
    produce(b, topic, 1)
    c = Consumer(
        {"bootstrap.servers": b.bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    )
    c.subscribe([topic])
    try:
        while not c.assignment():
            c.poll(0.2)
        assert run(
            "groups",
            "reset-offsets",
            "-g",
            group,
            "-t",
            topic,
            "--to-earliest",
            "--execute",
            "-b",
            b.bootstrap,
        ) == (
            1,
            "",
            f"error: assignments can only be reset if group '{group}' is inactive, "
            "but its state is Stable\n",
        )
    finally:
        c.close()


# -- console tools --------------------------------------------------------------------------
def test_console_producer_and_consumer(b: EmbeddedBroker) -> None:
    topic = new_topic(b)
    assert run(
        "console-producer",
        "-t",
        topic,
        "--property",
        "parse.key=true",
        "-b",
        b.bootstrap,
        input="k1\tone\nk2\ttwo\nk3\tthree\n",
    ) == (0, "", "")
    assert run(
        "console-consumer",
        "-t",
        topic,
        "--from-beginning",
        "--property",
        "print.key=true",
        "--max-messages",
        "2",
        "-b",
        b.bootstrap,
    ) == (0, "k1\tone\nk2\ttwo\n", "Processed a total of 2 messages\n")
    code, out, err = run(
        "console-consumer",
        "-t",
        topic,
        "--from-beginning",
        "--timeout-ms",
        "2000",
        "-o",
        "json",
        "-b",
        b.bootstrap,
    )
    assert (code, err) == (0, "Processed a total of 3 messages\n")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["partition"], r["offset"], r["key"], r["value"]) for r in rows] == [
        (0, 0, "k1", "one"),
        (0, 1, "k2", "two"),
        (0, 2, "k3", "three"),
    ]


def test_console_consumer_read_committed_skips_aborted_and_open_transactions(
    b: EmbeddedBroker,
) -> None:
    topic = new_topic(b)
    assert run(
        "console-producer",
        "-t",
        topic,
        "--transactional-id",
        f"tx-{topic}",
        "-b",
        b.bootstrap,
        input="c1\nc2\n",
    ) == (0, "", "")
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": f"tx2-{topic}"})
    p.init_transactions()
    p.begin_transaction()
    p.produce(topic, value=b"aborted")
    p.flush()
    p.abort_transaction()
    p.begin_transaction()
    p.produce(topic, value=b"open")
    p.flush()
    try:
        args = ("console-consumer", "-t", topic, "--from-beginning", "--timeout-ms", "2000")
        assert run(*args, "--isolation-level", "read_committed", "-b", b.bootstrap) == (
            0,
            "c1\nc2\n",
            "Processed a total of 2 messages\n",
        )
        assert run(*args, "-b", b.bootstrap) == (
            0,
            "c1\nc2\naborted\nopen\n",
            "Processed a total of 4 messages\n",
        )
    finally:
        p.abort_transaction()


# -- dump-log, tables -----------------------------------------------------------------------
def test_dump_log_shows_producers_and_control_markers(b: EmbeddedBroker) -> None:
    topic = new_topic(b)
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": f"dump-{topic}"})
    p.init_transactions()
    p.begin_transaction()
    p.produce(topic, value=b"kept", partition=0)
    p.commit_transaction()
    p.begin_transaction()
    p.produce(topic, value=b"dropped", partition=0)
    p.flush()
    p.abort_transaction()
    [dump] = ok_json("dump-log", str(b.data_dir / f"{topic}-0"), "--print-data-log")  # type: ignore[misc]
    batches = dump["batches"]
    pid = batches[0]["producer_id"]
    assert [
        (
            x["base_offset"],
            x["producer_id"],
            x["producer_epoch"],
            x["base_sequence"],
            x["is_transactional"],
            x["is_control"],
            x["is_valid"],
            [r.get("control_type") or r.get("payload") for r in x["records"]],
        )
        for x in batches
    ] == [
        (0, pid, 0, 0, True, False, True, ["kept"]),
        (1, pid, 0, -1, True, True, True, ["COMMIT"]),
        (2, pid, 0, 1, True, False, True, ["dropped"]),
        (3, pid, 0, -1, True, True, True, ["ABORT"]),
    ]
    assert dump["stopped"] is None
    code, out, _ = run("dump-log", str(b.data_dir / f"{topic}-0" / "00000000000000000000.log"))
    assert code == 0
    assert out.splitlines()[3].endswith("endTxnMarker: COMMIT coordinatorEpoch: 0")


def test_tables_wrap_long_transactional_ids_instead_of_cutting_them(b: EmbeddedBroker) -> None:
    topic = new_topic(b)
    tid = f"a-very-long-transactional-id-{'x' * 60}-{topic}"
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": tid})
    p.init_transactions()
    p.begin_transaction()
    p.produce(topic, value=b"v")
    p.flush()
    try:
        code, out, _ = run("transactions", "list", "-b", b.bootstrap)
        assert code == 0
        first_cells = [
            line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│")
        ]
        assert tid in "".join(first_cells)
        assert "…" not in out
    finally:
        p.abort_transaction()


def test_new_commands_take_command_config_on_a_sasl_listener(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert run("users", "add", "admin", "--password", "pw", "--data-dir", str(data))[0] == 0
    props = tmp_path / "admin.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="admin" password="pw";\n'
    )
    settings = {
        **FAST,
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }
    with EmbeddedBroker(data, settings=settings) as sb:
        common = ("-b", sb.bootstrap, "--command-config", str(props))
        assert run("topics", "create", "sec", *common)[0] == 0
        assert run("console-producer", "-t", "sec", *common, input="a\nb\n") == (0, "", "")
        assert run(
            "console-consumer",
            "-t",
            "sec",
            "--from-beginning",
            "--max-messages",
            "2",
            "--group",
            "sec-g",
            *common,
        ) == (0, "a\nb\n", "Processed a total of 2 messages\n")
        assert run("get-offsets", "-t", "sec", *common) == (0, "sec:0:2\n", "")
        assert ok_json("groups", "list", *common) == [
            {"group": "sec-g", "state": "Empty", "type": "classic"}
        ]
        code, _, err = run(
            "groups",
            "reset-offsets",
            "-g",
            "sec-g",
            "-t",
            "sec",
            "--to-earliest",
            "--execute",
            *common,
        )
        assert code == 0, err
        assert ok_json("delete-records", "-t", "sec", "--before", "1", *common) == [
            {"topic": "sec", "partition": 0, "low_watermark": 1}
        ]
        assert ok_json("configs", "describe", "--topic", "sec", *common) == []


def test_a_server_that_hangs_up_is_one_line() -> None:
    import socket
    import threading

    # A TCP server that hangs up at once: reachable, but no Kafka broker.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    stop = threading.Event()

    def hang_up() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                server.accept()[0].close()
            except OSError:
                pass

    t = threading.Thread(target=hang_up, daemon=True)
    t.start()
    try:
        quiet = subprocess.run(
            [sys.executable, "-m", "oncelog.cli.main", "topics", "list", "-b", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        stop.set()
        t.join()
        server.close()
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (
        1,
        "",
        f"error: 127.0.0.1:{port} closed the connection; is it a Kafka listener, and does "
        "security.protocol=PLAINTEXT match it?\n",
    )


def test_librdkafka_logs_go_through_python_logging_only_with_verbose(tmp_path: Path) -> None:
    # A broker advertising an address nobody listens on: the command's check and the
    # bootstrap connection succeed, then librdkafka logs its failed connections.
    broker = EmbeddedBroker(
        tmp_path / "data", settings={"advertised.listeners": "PLAINTEXT://127.0.0.1:1"}
    ).start()
    cmd = [sys.executable, "-m", "oncelog.cli.main"]
    args = ["topics", "list", "-b", broker.bootstrap]
    louds: list[subprocess.CompletedProcess[str]] = []
    try:
        quiet = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=120)
        # The command may finish through the bootstrap connection before librdkafka tries
        # the advertised address (and logs its failure): a busy machine got no line at all
        # once. Up to 5 runs, until one has librdkafka lines to route.
        for _ in range(5):
            loud = subprocess.run(
                [*cmd, "--verbose", *args], capture_output=True, text=True, timeout=120
            )
            louds.append(loud)
            if " oncelog.cli.librdkafka: " in loud.stderr:
                break
    finally:
        broker.stop()
    # Whether librdkafka's Metadata still succeeds through the bootstrap connection depends
    # on timing; either way its own lines never reach stderr without --verbose.
    assert quiet.stderr == "" if quiet.returncode == 0 else len(quiet.stderr.splitlines()) == 1
    assert "librdkafka" not in quiet.stderr and "rdkafka#" not in quiet.stderr
    routed = [x for x in louds[-1].stderr.splitlines() if " oncelog.cli.librdkafka: " in x]
    assert routed, [r.stderr for r in louds]
    for loud in louds:  # no raw librdkafka lines in any run
        assert not any(x.startswith("%") for x in loud.stderr.splitlines()), loud.stderr


def test_unknown_groups_are_one_line_errors(b: EmbeddedBroker) -> None:
    assert run("groups", "describe", "-g", "no-such-group", "-b", b.bootstrap) == (
        1,
        "",
        "error: consumer group 'no-such-group' does not exist\n",
    )
    code, out, err = run("groups", "delete", "-g", "no-such-group", "-b", b.bootstrap)
    assert (code, out, len(err.splitlines())) == (1, "", 1)
    assert err.startswith(
        "error: cannot delete group: DeleteGroups 'no-such-group': GROUP_ID_NOT_FOUND"
    )
