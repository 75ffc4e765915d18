"""`oncelog users` (offline bootstrap and online) and `oncelog acls` with --command-config."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from oncelog.cli.main import app
from oncelog.client.java_config import librdkafka_settings
from oncelog.embedded import EmbeddedBroker

runner = CliRunner()


def cli(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_users_and_acls_commands(tmp_path: Path) -> None:
    data = tmp_path / "data"
    # bootstrap the first super user before the broker exists
    assert "stored SCRAM-SHA-512 credential for admin" in cli(
        "users", "add", "admin", "--password", "admin-pw", "--data-dir", str(data)
    )
    settings = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    }
    props = tmp_path / "admin.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="admin" password="admin-pw";\n'
    )
    with EmbeddedBroker(data, settings=settings) as b:
        common = ["-b", b.bootstrap, "--command-config", str(props)]
        assert "added SCRAM-SHA-512 credential for alice" in cli(
            "users", "add", "alice", "--password", "alice-pw", *common
        )
        listed = cli("users", "list", *common)
        assert "admin" in listed and "alice" in listed and "8192" in listed
        # like kafka-acls.sh, an operation the resource does not have is refused up front
        refused = runner.invoke(
            app,
            [
                "acls",
                "add",
                "--allow-principal",
                "User:alice",
                "--operation",
                "Read",
                "--transactional-id",
                "app-",
                *common,
            ],
        )
        assert (
            refused.exit_code == 1
            and "READ is not a valid operation on TRANSACTIONAL_ID" in refused.output
        )
        assert "added 2 ACL(s)" in cli(
            "acls",
            "add",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Read",
            "--operation",
            "Describe",
            "--topic",
            "orders",
            "--resource-pattern-type",
            "prefixed",
            *common,
        )
        assert "added 1 ACL(s)" in cli(
            "acls",
            "add",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Write",
            "--transactional-id",
            "app-",
            *common,
        )
        listed = cli(
            "acls", "list", "--topic", "orders-2024", "--resource-pattern-type", "match", *common
        )
        assert listed.count("User:alice") == 2 and "READ" in listed and "PREFIXED" in listed
        assert "removed 2 ACL(s)" in cli(
            "acls", "remove", "--topic", "orders", "--resource-pattern-type", "prefixed", *common
        )
        remaining = cli("acls", "list", "--principal", "User:alice", *common)
        assert remaining.count("User:alice") == 1 and "TRANSACTIONAL_ID:app-" in remaining
        # the Cluster resource by Kafka's name (confluent-kafka calls it BROKER); JSON in full
        assert "added 1 ACL(s)" in cli(
            "acls", "add", "--allow-principal", "User:operator", "--operation", "ClusterAction",
            "--cluster", *common,
        )  # fmt: skip
        assert json.loads(cli("acls", "list", "--cluster", "-o", "json", *common)) == [
            {
                "resource_type": "CLUSTER",
                "resource_name": "kafka-cluster",
                "pattern_type": "LITERAL",
                "principal": "User:operator",
                "host": "*",
                "operation": "CLUSTER_ACTION",
                "permission": "ALLOW",
            }
        ]
        # a table cell too long for its column wraps instead of being cut with "…"
        table = cli("acls", "list", "--cluster", *common)
        assert "…" not in table and "CLUSTER_ACTIO" in table and "kafka" in table
        assert json.loads(cli("users", "list", "-o", "json", *common)) == [
            {"user": "admin", "mechanism": "SCRAM-SHA-512", "iterations": 8192},
            {"user": "alice", "mechanism": "SCRAM-SHA-512", "iterations": 8192},
        ]
        assert "created topic orders-1" in cli("topics", "create", "orders-1", "-p", "2", *common)
        assert "orders-1" in cli("topics", "list", *common).split()
        assert "high watermark" in cli("topics", "describe", "orders-1", *common)
        # without credentials the same command fails instead of falling back
        bad = runner.invoke(app, ["users", "list", "-b", b.bootstrap])
        assert bad.exit_code != 0
        assert "deleted SCRAM-SHA-512 credential of alice" in cli(
            "users", "delete", "alice", *common
        )
    assert "alice" not in cli("users", "list", "--data-dir", str(data))


def test_command_config_translates_java_client_settings() -> None:
    assert librdkafka_settings(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p\\"q";',
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/ca.pem",
        }
    ) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "u",
        "sasl.password": 'p"q',
        "ssl.ca.location": "/ca.pem",
    }


def scram_properties(path: Path, user: str, password: str, mechanism: str, ca: Path) -> Path:
    """A --command-config file with Kafka's (Java client) names for SASL_SSL + SCRAM."""
    path.write_text(
        "security.protocol=SASL_SSL\n"
        f"sasl.mechanism={mechanism}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={ca}\n"
    )
    return path


def test_transactions_commands_over_sasl_ssl_with_command_config(tmp_path: Path) -> None:
    from confluent_kafka import Producer

    from .helpers import create_topic
    from .security import make_tls, secured_settings

    tls = make_tls(tmp_path / "tls")
    data = tmp_path / "data"
    cli("users", "add", "ops", "--password", "ops-pw", "--data-dir", str(data))
    props = scram_properties(tmp_path / "ops.properties", "ops", "ops-pw", "SCRAM-SHA-512", tls.ca)
    with EmbeddedBroker(data, settings=secured_settings(tls)) as b:
        create_topic(b.bootstrap, "orders", 2)
        producer = Producer(
            {"bootstrap.servers": b.bootstrap, "transactional.id": "app-1", "linger.ms": 0}
        )
        producer.init_transactions(15)
        producer.begin_transaction()
        producer.produce("orders", value=b"v", partition=1)
        assert producer.flush(15) == 0
        secured = ["-b", b.bootstrap_for("SASL_SSL"), "--command-config", str(props)]

        listed = cli("transactions", "list", *secured)
        row = next(line for line in listed.splitlines() if "app-1" in line)
        assert "Ongoing" in row
        # the open transaction is the coordinator's, so not hanging
        assert "no hanging transactions" in cli(
            "transactions", "find-hanging", "--topic", "orders", *secured
        )
        described = cli("transactions", "describe", "app-1", *secured)
        assert "Ongoing" in described and "orders: 1" in described

        # a wrong password fails the command; nothing falls back to PLAINTEXT
        wrong = tmp_path / "wrong.properties"
        wrong.write_text(props.read_text().replace('password="ops-pw"', 'password="nope"'))
        bad = runner.invoke(
            app,
            [
                "transactions",
                "list",
                "-b",
                b.bootstrap_for("SASL_SSL"),
                "--command-config",
                str(wrong),
            ],
        )
        assert bad.exit_code == 1 and "app-1" not in bad.output
        # an unsupported Java setting is refused before connecting, naming the key
        jks = tmp_path / "jks.properties"
        jks.write_text(
            props.read_text().replace("ssl.truststore.type=PEM", "ssl.truststore.type=JKS")
        )
        refused = runner.invoke(
            app, ["transactions", "list", *secured[:2], "--command-config", str(jks)]
        )
        assert (
            refused.exit_code == 2 and "ssl.truststore.type=JKS is not supported" in refused.output
        )
        producer.abort_transaction(15)
        del producer  # before the broker stops


def test_demo_round_trip_over_sasl_ssl_with_command_config(tmp_path: Path) -> None:
    from .security import make_tls, secured_settings

    tls = make_tls(tmp_path / "tls")
    data = tmp_path / "data"
    cli("users", "add", "demo", "--password", "demo-pw", "--data-dir", str(data))
    props = scram_properties(
        tmp_path / "demo.properties", "demo", "demo-pw", "SCRAM-SHA-256", tls.ca
    )
    # --mechanism defaults to SCRAM-SHA-512 above; give the user a SCRAM-SHA-256 one too
    cli(
        "users",
        "add",
        "demo",
        "--password",
        "demo-pw",
        "--mechanism",
        "SCRAM-SHA-256",
        "--data-dir",
        str(data),
    )
    with EmbeddedBroker(data, settings=secured_settings(tls)) as b:
        args = ["demo", "--broker-only", "-n", "500", "-p", "2"]
        secured = ["-b", b.bootstrap_for("SASL_SSL"), "--command-config", str(props)]
        out = cli(*args, *secured)
        assert "(SASL_SSL)" in out and "created topic demo" in out
        assert "exactly-once verified: 500 in, 500 out, 0 duplicates, 0 missing" in out
        # a second run on the existing topic reads only its own records
        out = cli(*args, *secured)
        assert "topic demo exists" in out and "500 in, 500 out" in out
    # security settings without a cluster to apply them to are refused, not ignored
    refused = runner.invoke(app, [*args, "--command-config", str(props)])
    assert refused.exit_code == 2 and "--command-config needs --bootstrap-server" in refused.output
    refused = runner.invoke(app, ["demo", *secured])
    assert refused.exit_code == 2 and "apply to --broker-only" in refused.output
