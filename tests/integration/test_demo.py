"""`oncelog demo --broker-only` stays working (make demo runs the Spark variant)."""

from __future__ import annotations

import re
import subprocess
import sys


def test_broker_only_demo_verifies_exactly_once() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "oncelog.cli.main", "demo", "--broker-only", "-n", "5000"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "exactly-once verified: 5000 in, 5000 out, 0 duplicates, 0 missing" in out.stdout
    assert re.search(r"metrics and console on http://127\.0\.0\.1:\d+\n", out.stdout), out.stdout
    # Quiet: the clients close before the embedded broker stops, so librdkafka has no
    # refused connection to report.
    assert "Connection refused" not in out.stdout + out.stderr, out.stderr
    assert "FAIL|" not in out.stderr, out.stderr
