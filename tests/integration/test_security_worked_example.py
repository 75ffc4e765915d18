"""docs/security.md's worked example, executed as written: every ``sh`` block after a
``<!-- worked example: executed as written -->`` marker, in order, in one bash session
started at the repository root (as a user who ran ``make install``). Only the port (9093)
and the scratch directory are replaced, so the test runs beside others.

It checks what the guide promises, block by block: a SASL_SSL broker with SCRAM and ACLs,
bootstrapped without a prompt; the users and exactly the ACLs the guide adds; the three
orders copied in a transaction and read back ``read_committed``; each refusal as the one
line the guide quotes, and logged by the authorizer; the operator's tools; a clean stop."""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
from pathlib import Path

from .connect.workers import free_port

ROOT = Path(__file__).parents[2]
MARKER = "<!-- worked example: executed as written -->"
DONE = "@@block-done"


def worked_example() -> tuple[str, list[str]]:
    text = (ROOT / "docs" / "security.md").read_text()
    section = text.split("## Worked example: an exactly-once pipeline over SASL_SSL\n")[1]
    section = section.split("\n## ")[0]
    blocks = re.findall(re.escape(MARKER) + r"\n```sh\n(.*?)\n```", section, flags=re.S)
    assert len(blocks) == 8, "the worked example has eight executed blocks"
    return section, blocks


def table_rows(out: str) -> list[list[str]]:
    """The body rows of the tables in ``out`` (stdout is a pipe: one line a row)."""
    return [
        [cell.strip() for cell in line.strip("│").split("│")]
        for line in out.splitlines()
        if line.startswith("│")
    ]


def test_security_worked_example_runs_as_written(tmp_path: Path) -> None:
    section, blocks = worked_example()
    port = free_port()
    script = ""
    for block in blocks:
        block = block.replace("127.0.0.1:9093", f"127.0.0.1:{port}")
        block = block.replace("/tmp/oncelog-secure", str(tmp_path))
        script += block + f"\necho {DONE}\n"
    proc = subprocess.Popen(
        ["bash", "-e", "-c", script],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=420)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        log_file = tmp_path / "broker.log"
        tail = log_file.read_text()[-3000:] if log_file.exists() else ""
        raise AssertionError(f"the worked example hung:\n{out}\n{tail}") from None
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert proc.returncode == 0, out
    parts = out.split(f"{DONE}\n")
    assert len(parts) == 9 and parts[-1] == "", out
    certs, broker, clients, admin, pipeline, refusals, operator, stop = parts[:8]
    log = (tmp_path / "broker.log").read_text()

    # Certificates: nothing printed; the keystore (key + chain) readable only by its owner.
    assert certs == "", certs
    keystore = (tmp_path / "broker.pem").read_text()
    assert "PRIVATE KEY-----" in keystore and "BEGIN CERTIFICATE-----" in keystore
    assert stat.S_IMODE((tmp_path / "broker.pem").stat().st_mode) == 0o600

    # The broker: admin bootstrapped offline, then the ready line the comment shows.
    assert broker.splitlines() == [
        "stored SCRAM-SHA-512 credential for admin in data",
        f"oncelog broker ready on 127.0.0.1:{port} (SASL_SSL)",
    ], broker
    assert "# oncelog broker ready on 127.0.0.1:9093 (SASL_SSL)" in blocks[1]

    # Client settings: one private file per user.
    assert clients == "", clients
    for user in ("admin", "copier", "reader", "operator"):
        props = tmp_path / f"{user}.properties"
        assert f'username="{user}" password="{user}-secret";' in props.read_text()
        assert stat.S_IMODE(props.stat().st_mode) == 0o600

    # Users, topics and exactly the ACLs the block adds.
    lines = admin.splitlines()
    assert lines[:5] == [
        "added SCRAM-SHA-512 credential for copier",
        "added SCRAM-SHA-512 credential for reader",
        "added SCRAM-SHA-512 credential for operator",
        "created topic orders (3 partitions)",
        "created topic orders-enriched (3 partitions)",
    ], admin
    assert lines[5:13] == ["added 1 ACL(s)"] * 4 + ["added 2 ACL(s)"] + ["added 1 ACL(s)"] * 3
    rows = table_rows(admin)
    users = [r for r in rows if len(r) == 3]
    acls = [r for r in rows if len(r) == 6]
    assert len(users) + len(acls) == len(rows), rows
    assert users == [
        [user, "SCRAM-SHA-512", "8192"] for user in ("admin", "copier", "operator", "reader")
    ]
    assert sorted(acls) == sorted(
        [
            ["TOPIC:orders", "LITERAL", "User:copier", "*", "READ", "ALLOW"],
            ["TOPIC:orders-enriched", "LITERAL", "User:copier", "*", "WRITE", "ALLOW"],
            ["GROUP:copier", "LITERAL", "User:copier", "*", "READ", "ALLOW"],
            ["TRANSACTIONAL_ID:copier-", "PREFIXED", "User:copier", "*", "WRITE", "ALLOW"],
            ["TOPIC:orders-enriched", "LITERAL", "User:reader", "*", "READ", "ALLOW"],
            ["GROUP:reader", "LITERAL", "User:reader", "*", "READ", "ALLOW"],
            ["CLUSTER:kafka-cluster", "LITERAL", "User:operator", "*", "CLUSTER_ACTION", "ALLOW"],
            ["TOPIC:orders-enriched", "LITERAL", "User:operator", "*", "READ", "ALLOW"],
            ["TRANSACTIONAL_ID:*", "LITERAL", "User:operator", "*", "DESCRIBE", "ALLOW"],
        ]
    ), admin

    # The pipeline: the three orders, copied once, committed, read back by the reader.
    lines = pipeline.splitlines()
    assert lines.count("Processed a total of 3 messages") == 2, pipeline
    assert [line for line in lines if not line.startswith("Processed")] == [
        "order-1",
        "order-2",
        "order-3",
    ], pipeline

    # Refusals: the one-line errors the guide quotes, each followed by the echo.
    quoted = re.findall(r"^  `(error: .*)`", section, flags=re.M)
    assert len(quoted) == 3, quoted
    expected = [q.replace("127.0.0.1:9093", f"127.0.0.1:{port}") for q in quoted]
    lines = refusals.splitlines()
    denied = [line for line in lines if "is Denied operation" in line]
    assert [line for line in lines if line not in denied] == [
        expected[0],
        "refused (exit code 1)",
        expected[1],
        "refused (exit code 1)",
        expected[2],
        "refused (exit code 1)",
    ], refusals
    assert {line.split("kafka.authorizer.logger: ")[1] for line in denied} == {
        "Principal = User:reader is Denied operation = DESCRIBE from host = 127.0.0.1 "
        "on resource = TOPIC:orders (no matching ALLOW ACL)",
        "Principal = User:copier is Denied operation = DESCRIBE from host = 127.0.0.1 "
        "on resource = TRANSACTIONAL_ID:other-1 (no matching ALLOW ACL)",
        "Principal = User:copier is Denied operation = WRITE from host = 127.0.0.1 "
        "on resource = TOPIC:orders (no matching ALLOW ACL)",
    }, refusals

    # The operator: copier-1 committed, nothing hanging.
    assert table_rows(operator) == [["copier-1", "0", "CompleteCommit"]], operator
    assert operator.splitlines()[-1] == "no hanging transactions", operator

    # A clean stop.
    assert stop == "", stop
    assert "shutting down" in log and "Traceback" not in log, log[-3000:]
