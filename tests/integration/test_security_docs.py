"""The Admin API snippets of docs/security.md (a SCRAM credential, the pipeline's ACLs),
executed as written against a SASL_SSL broker with SCRAM-SHA-512 and ACLs set up as the
worked example's (the admin's password, the CA in ``ca.pem`` of the working directory);
only the port (9093) is replaced."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from typer.testing import CliRunner

from oncelog.cli.main import app
from oncelog.embedded import EmbeddedBroker

from .security import make_tls, tls_listener_settings

ROOT = Path(__file__).resolve().parents[2]


def python_blocks(path: Path) -> list[str]:
    return [
        textwrap.dedent(block)
        for block in re.findall(r"^ *```python\n(.*?)^ *```", path.read_text(), re.S | re.M)
    ]


def test_security_docs_admin_snippets_run_as_written(tmp_path: Path) -> None:
    blocks = python_blocks(ROOT / "docs" / "security.md")
    scram, acls = (b for b in blocks if "AdminClient(" in b)
    tls = make_tls(tmp_path / "tls")
    data = tmp_path / "data"
    added = CliRunner().invoke(
        app, ["users", "add", "admin", "--password", "admin-secret", "--data-dir", str(data)]
    )
    assert added.exit_code == 0, added.output
    settings = {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        **tls_listener_settings(tls, "SASL_SSL"),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    }
    with EmbeddedBroker(data, settings=settings) as broker:
        address = broker.bootstrap_for("SASL_SSL")

        def run(code: str) -> None:
            assert '"ssl.ca.location": "ca.pem"' in code
            assert "127.0.0.1:9093" in code
            code = code.replace("127.0.0.1:9093", address)
            done = subprocess.run(
                [sys.executable, "-c", code],
                cwd=tls.ca.parent,  # where ca.pem is, as in the worked example
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr

        run(scram)
        run(acls)
        props = tmp_path / "admin.properties"
        props.write_text(
            f"security.protocol=SASL_SSL\nssl.truststore.type=PEM\n"
            f"ssl.truststore.location={tls.ca}\nsasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
            'required username="admin" password="admin-secret";\n'
        )
        common = ["-b", address, "--command-config", str(props), "-o", "json"]
        users = CliRunner().invoke(app, ["users", "list", *common])
        assert users.exit_code == 0, users.output
        assert json.loads(users.output) == [
            {"user": "admin", "mechanism": "SCRAM-SHA-512", "iterations": 8192},
            {"user": "copier", "mechanism": "SCRAM-SHA-512", "iterations": 8192},
        ]
        listed = CliRunner().invoke(app, ["acls", "list", *common])
        assert listed.exit_code == 0, listed.output
        got = sorted(
            (a["resource_type"], a["resource_name"], a["pattern_type"], a["principal"],
             a["operation"])
            for a in json.loads(listed.output)
        )  # fmt: skip
        assert all(
            a["host"] == "*" and a["permission"] == "ALLOW" for a in json.loads(listed.output)
        )
        assert got == [
            ("CLUSTER", "kafka-cluster", "LITERAL", "User:operator", "CLUSTER_ACTION"),
            ("GROUP", "copier", "LITERAL", "User:copier", "READ"),
            ("GROUP", "reader", "LITERAL", "User:reader", "READ"),
            ("TOPIC", "orders", "LITERAL", "User:copier", "READ"),
            ("TOPIC", "orders-enriched", "LITERAL", "User:copier", "WRITE"),
            ("TOPIC", "orders-enriched", "LITERAL", "User:operator", "READ"),
            ("TOPIC", "orders-enriched", "LITERAL", "User:reader", "READ"),
            ("TRANSACTIONAL_ID", "*", "LITERAL", "User:operator", "DESCRIBE"),
            ("TRANSACTIONAL_ID", "copier-", "PREFIXED", "User:copier", "WRITE"),
        ]
