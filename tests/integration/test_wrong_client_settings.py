"""A careless user's client settings against a secured broker: a wrong SASL password, a wrong
mechanism, an untrusted CA, a security.protocol that does not match the listener. Every CLI
command and the Connect worker fail at once with one line naming Kafka's error code or the
TLS failure (before: librdkafka's "Broker transport failure" after 15 s, an empty
``cannot list ACLs:`` line, a TimeoutError traceback from ``groups list``, and a worker that
logged ~1500 librdkafka lines before a traceback), and nothing is written."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.embedded import EmbeddedBroker

from .connect.workers import WorkerProcess, free_port, wait_for, worker_settings
from .security import TlsFiles, make_tls, secured_settings

# The durations asserted (a fast failure, a 30 s retry) want a worker of their own.
pytestmark = pytest.mark.xdist_group("timing")

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


@dataclass(frozen=True)
class Secured:
    broker: EmbeddedBroker
    tls: TlsFiles
    other_ca: Path  # a CA that did not sign the broker's certificate


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    base = tmp_path_factory.mktemp("wrong-settings")
    tls = make_tls(base / "tls")
    data = base / "data"
    added = cli("users", "add", "admin", "--password", "admin-pw", "--data-dir", str(data))
    assert added.returncode == 0, added.stderr
    with EmbeddedBroker(data, settings=secured_settings(tls)) as broker:
        yield Secured(broker, tls, make_tls(base / "other").ca)


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oncelog.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        input=stdin,
    )


def _scram(password: str, mechanism: str = "SCRAM-SHA-512") -> str:
    return (
        f"sasl.mechanism={mechanism}\n"
        f'sasl.jaas.config={SCRAM} required username="admin" password="{password}";\n'
    )


# (listener, client settings with {ca} for the CA file, the one error line)
CASES = {
    "wrong SCRAM password": (
        "SASL_SSL",
        "security.protocol=SASL_SSL\nssl.truststore.type=PEM\nssl.truststore.location={ca}\n"
        + _scram("wrong"),
        "SASL SCRAM-SHA-512 authentication failed: SASL_AUTHENTICATION_FAILED "
        "(Authentication failed: The client keys don't match.: invalid-proof)",
    ),
    "wrong PLAIN password": (
        "SASL_PLAINTEXT",
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        f'sasl.jaas.config={PLAIN} required username="alice" password="nope";\n',
        "SASL PLAIN authentication failed: SASL_AUTHENTICATION_FAILED "
        "(Authentication failed: Invalid username or password)",
    ),
    "mechanism the listener does not offer": (
        "SASL_PLAINTEXT",
        "security.protocol=SASL_PLAINTEXT\n" + _scram("x", "SCRAM-SHA-256"),
        "SASL mechanism SCRAM-SHA-256 refused (UNSUPPORTED_SASL_MECHANISM); "
        "the broker offers PLAIN",
    ),
    "CA that did not sign the broker's certificate": (
        "SASL_SSL",
        "security.protocol=SASL_SSL\nssl.truststore.type=PEM\n"
        "ssl.truststore.location={other_ca}\n" + _scram("admin-pw"),
        "TLS handshake with {address} failed: self-signed certificate in certificate chain",
    ),
    "SASL_PLAINTEXT against a SASL_SSL listener": (
        "SASL_SSL",
        "security.protocol=SASL_PLAINTEXT\n" + _scram("admin-pw"),
        "{address} closed the connection; "
        "is it a Kafka listener, and does security.protocol=SASL_PLAINTEXT match it?",
    ),
    "SSL against a PLAINTEXT listener": (
        "PLAINTEXT",
        "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={ca}\n",
        "TLS handshake with {address} failed: the broker closed the connection; "
        "is it a Kafka listener, and does security.protocol=SSL match it?",
    ),
    "PLAINTEXT against a SASL_PLAINTEXT listener": (
        "SASL_PLAINTEXT",
        "security.protocol=PLAINTEXT\n",
        "{address} closed the connection; "
        "is it a Kafka listener, and does security.protocol=PLAINTEXT match it?",
    ),
}

COMMANDS = {
    "topics list": ("topics", "list"),
    "groups list": ("groups", "list"),
    "acls list": ("acls", "list"),
    "users list": ("users", "list"),
    "transactions list": ("transactions", "list"),
    "get-offsets": ("get-offsets", "-t", "orders"),
    "console-consumer": ("console-consumer", "-t", "orders", "--timeout-ms", "1000"),
}


def _settings(secured: Secured, case: str, tmp_path: Path) -> tuple[str, Path, str]:
    listener, text, error = CASES[case]
    address = secured.broker.bootstrap_for(listener)
    props = tmp_path / "client.properties"
    props.write_text(text.format(ca=secured.tls.ca, other_ca=secured.other_ca))
    return address, props, error.format(address=address)


@pytest.mark.parametrize("case", list(CASES))
def test_cli_commands_name_the_cause_at_once(secured: Secured, case: str, tmp_path: Path) -> None:
    address, props, error = _settings(secured, case, tmp_path)
    for name, args in COMMANDS.items():
        started = time.monotonic()
        done = cli(*args, "-b", address, "--command-config", str(props))
        took = time.monotonic() - started
        assert (done.returncode, done.stdout, done.stderr) == (1, "", f"error: {error}\n"), name
        assert took < 14, (name, took)  # librdkafka's request timeout was 15 s


def test_console_producer_with_a_wrong_password_writes_nothing(
    secured: Secured, tmp_path: Path
) -> None:
    address, props, error = _settings(secured, "wrong SCRAM password", tmp_path)
    admin = AdminClient({"bootstrap.servers": secured.broker.bootstrap})
    admin.create_topics([NewTopic("careless", 1)])["careless"].result(10)
    done = cli(
        "console-producer",
        "-t",
        "careless",
        "-b",
        address,
        "--command-config",
        str(props),
        stdin="a\nb\n",
    )
    assert (done.returncode, done.stdout, done.stderr) == (1, "", f"error: {error}\n")
    offsets = cli("get-offsets", "-t", "careless", "-b", secured.broker.bootstrap)
    assert (offsets.returncode, offsets.stdout.split()) == (0, ["careless:0:0"])


def _worker(settings: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    args = [sys.executable, "-m", "oncelog.cli.main", "connect", "worker"]
    for key, value in settings.items():
        args += ["--set", f"{key}={value}"]
    started = time.monotonic()
    done = subprocess.run(args, capture_output=True, text=True, timeout=90)
    return done, time.monotonic() - started


@pytest.mark.parametrize(
    ("case", "prefix"),
    [
        ("wrong SCRAM password", ""),
        ("CA that did not sign the broker's certificate", ""),
        ("SASL_PLAINTEXT against a SASL_SSL listener", ""),
        ("wrong SCRAM password", "producer."),
    ],
)
def test_connect_worker_names_the_cause_and_exits(
    secured: Secured, case: str, prefix: str, tmp_path: Path
) -> None:
    """The worker checks each distinct client setting (shared, producer.*, consumer.*,
    admin.*) before it creates its internal topics: no topic is created."""
    address, props, error = _settings(secured, case, tmp_path)
    wrong = dict(line.split("=", 1) for line in props.read_text().splitlines() if line.strip())
    right = {
        "security.protocol": "SASL_SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(secured.tls.ca),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": f'{SCRAM} required username="admin" password="admin-pw";',
    }
    group = f"careless-{prefix or 'shared'}"
    settings = worker_settings(address, group, listeners=f"http://127.0.0.1:{free_port()}")
    if prefix:
        settings |= right | {prefix + k: v for k, v in wrong.items()}
    else:
        settings |= wrong
    done, took = _worker(settings)
    where = f" (with the worker's {prefix}* settings)" if prefix else ""
    assert (done.returncode, done.stdout, done.stderr) == (
        1,
        "",
        f"error: Cannot connect to the Kafka cluster{where}: {error}\n",
    )
    assert took < 25, took  # before: 30 s
    topics = AdminClient({"bootstrap.servers": secured.broker.bootstrap}).list_topics(timeout=10)
    assert not [t for t in topics.topics if t.startswith(group)]


def test_connect_worker_with_an_unreachable_broker_is_one_line() -> None:
    """Retried for 30 s (a worker often starts with its cluster), then one line; before, a
    KafkaException traceback ("Broker transport failure") from listing the topics."""
    settings = worker_settings(
        "127.0.0.1:1", "unreachable", listeners=f"http://127.0.0.1:{free_port()}"
    )
    done, took = _worker(settings)
    assert (done.returncode, done.stdout, done.stderr) == (
        1,
        "",
        "error: Cannot connect to the Kafka cluster: cannot reach 127.0.0.1:1 "
        "(connection refused) after 30 s\n",
    )
    assert 30 <= took < 60, took


def test_connector_override_with_a_wrong_password_fails_its_task(
    secured: Secured, tmp_path: Path
) -> None:
    """A connector's ``producer.override.`` / ``consumer.override.`` credentials are wrong:
    its task is FAILED with SASL_AUTHENTICATION_FAILED (Kafka fails the task on its client's
    SaslAuthenticationException); before, the task showed RUNNING while librdkafka retried
    the handshake forever."""
    address = secured.broker.bootstrap_for("SASL_SSL")
    right = {
        "security.protocol": "SASL_SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(secured.tls.ca),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": f'{SCRAM} required username="admin" password="admin-pw";',
    }
    settings = worker_settings(
        address, "overrides", **right, **{"connector.client.config.override.policy": "All"}
    )
    wrong = f'{SCRAM} required username="admin" password="wrong";'
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        source = {
            "connector.class": "VerifiableSource",
            "topic": "verified",
            "throughput": "10",
            "producer.override.sasl.jaas.config": wrong,
        }
        sink = {
            "connector.class": "FileStreamSink",
            "topics": "verified",
            "file": str(tmp_path / "out.txt"),
            "consumer.override.sasl.jaas.config": wrong,
        }
        for name, config in (("src", source), ("sink", sink)):
            assert worker.call("PUT", f"/connectors/{name}/config", config)[0] == 201
        for name in ("src", "sink"):
            wait_for(
                lambda name=name: (
                    [t["state"] for t in worker.get(f"/connectors/{name}/status")["tasks"]]
                    == ["FAILED"]
                ),
                30,
                f"{name} task failed",
            )
            trace = worker.get(f"/connectors/{name}/tasks/0/status")["trace"]
            assert trace.splitlines()[-1] == (
                "oncelog.connect.api.errors.ConnectException: Cannot connect to the Kafka cluster: "
                "SASL SCRAM-SHA-512 authentication failed: SASL_AUTHENTICATION_FAILED "
                "(Authentication failed: The client keys don't match.: invalid-proof)"
            )
        assert worker.terminate() == 0
    finally:
        worker.kill()
    assert not (tmp_path / "out.txt").exists() or (tmp_path / "out.txt").read_text() == ""


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("sasl.mechansim=PLAIN", 'No such configuration property: "sasl.mechansim"'),
        ("socket.timeout.ms=soon", 'Invalid value for configuration property "socket.timeout.ms"'),
    ],
)
def test_a_misspelt_command_config_key_is_a_usage_error(
    secured: Secured, tmp_path: Path, line: str, error: str
) -> None:
    """Every command, not only those librdkafka serves: ``transactions list`` (the protocol
    client) used to ignore the key and run without it."""
    props = tmp_path / "client.properties"
    props.write_text(f"security.protocol=PLAINTEXT\n{line}\n")
    for args in (("transactions", "list"), ("topics", "list")):
        done = cli(*args, "-b", secured.broker.bootstrap, "--command-config", str(props))
        assert (done.returncode, done.stdout, done.stderr) == (
            2,
            "",
            f"error: --command-config {props}: {error}\n",
        ), args
