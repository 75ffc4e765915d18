"""docs/security.md's worked example, executed as written: the ``sh`` block after the
``<!-- worked example: executed as written -->`` marker, in one bash session started at
the repository root (as a user who ran ``make install``). Only the port (9093) and the
scratch directory are replaced, so the test runs beside others.

It checks what the guide promises: a SASL_SSL broker with SCRAM and ACLs, bootstrapped
without a prompt, its users and exactly the ACLs the block adds, and a clean stop."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

from .connect.workers import free_port

ROOT = Path(__file__).parents[2]
MARKER = "<!-- worked example: executed as written -->"


def test_security_worked_example_runs_as_written(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "security.md").read_text()
    [block] = re.findall(re.escape(MARKER) + r"\n```sh\n(.*?)\n```", text, flags=re.S)
    port = free_port()
    script = block.replace("127.0.0.1:9093", f"127.0.0.1:{port}").replace(
        "/tmp/oncelog-secure", str(tmp_path)
    )
    proc = subprocess.Popen(
        ["bash", "-e", "-c", script],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        log = (
            (tmp_path / "broker.log").read_text()[-3000:]
            if (tmp_path / "broker.log").exists()
            else ""
        )
        raise AssertionError(f"the worked example hung:\n{out}\n{log}") from None
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert proc.returncode == 0, out
    for user in ("admin", "copier", "reader", "operator"):
        assert re.search(rf"\b{user}\b.*SCRAM-SHA-512", out), out
    acls = json.loads((tmp_path / "acls.json").read_text())
    got = sorted(
        (a["principal"], a["operation"], a["resource_type"], a["resource_name"], a["pattern_type"])
        for a in acls
    )
    assert got == sorted(
        [
            ("User:copier", "READ", "TOPIC", "orders", "LITERAL"),
            ("User:copier", "WRITE", "TOPIC", "orders-enriched", "LITERAL"),
            ("User:copier", "READ", "GROUP", "copier", "LITERAL"),
            ("User:copier", "WRITE", "TRANSACTIONAL_ID", "copier-", "PREFIXED"),
            ("User:reader", "READ", "TOPIC", "orders-enriched", "LITERAL"),
            ("User:reader", "READ", "GROUP", "reader", "LITERAL"),
        ]
    ), acls
    log = (tmp_path / "broker.log").read_text()
    assert "Traceback" not in log, log[-3000:]
