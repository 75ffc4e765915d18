"""docs/connect.md's quick start, executed as written: every ``sh`` block after a
``<!-- quick start: executed as written -->`` marker, in order, in one bash session
started at the repository root (as a user who ran ``make install``). Only the ports
(9092, 8083) and the scratch directory are replaced, so the test runs beside others.

Checks the answers the guide promises: the round trip seen in under 15 s with
``offset.flush.interval.ms=10000`` (standalone), pause/resume/stop/offsets/delete with
Kafka's statuses, a STOPPED connector with no tasks, KIP-558 topics, and both workers
and the broker exiting cleanly.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from .workers import free_port

ROOT = Path(__file__).parents[3]
MARKER = "<!-- quick start: executed as written -->"
TIMING = "@@block-done"


def quick_start_blocks() -> list[str]:
    text = (ROOT / "docs" / "connect.md").read_text()
    blocks = re.findall(re.escape(MARKER) + r"\n```sh\n(.*?)\n```", text, flags=re.S)
    assert len(blocks) == 3, "the quick start has three executed blocks"
    return blocks


def test_quick_start_runs_as_written(tmp_path: Path) -> None:
    broker_port, rest_port = free_port(), free_port()
    script = ""
    for block in quick_start_blocks():
        block = block.replace("127.0.0.1:9092", f"127.0.0.1:{broker_port}")
        block = block.replace("127.0.0.1:8083", f"127.0.0.1:{rest_port}")
        block = block.replace("/tmp/connect-quickstart", str(tmp_path))
        block = block.replace(
            "oncelog broker --data-dir ./data",
            f"oncelog broker --data-dir ./data --listen 127.0.0.1:{broker_port}",
        )
        script += block + f'\necho "{TIMING} $(date +%s.%N)"\n'
    started = time.time()
    proc = subprocess.Popen(
        ["bash", "-e", "-c", script],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        logs = {p.name: p.read_text()[-3000:] for p in tmp_path.glob("*.log")}
        raise AssertionError(f"the quick start hung:\n{out}\n{logs}") from None
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert proc.returncode == 0, out
    done = [float(line.split()[1]) for line in out.splitlines() if line.startswith(TIMING)]
    assert len(done) == 3, out
    # The standalone round trip (broker and worker start included) within 15 s.
    print(f"standalone quick start: round trip seen {done[0] - started:.1f} s after the start")
    assert done[0] - started < 15, f"round trip took {done[0] - started:.1f} s"

    standalone, rest, distributed = re.split(rf"{TIMING} .*\n", out)[:3]
    assert standalone.splitlines()[-2:] == ["foo", "bar"], standalone
    lines = rest.splitlines()
    assert '"state": "RUNNING"' in lines[0] and '"type": "source"' in lines[0], lines[0]
    assert '"state": "STOPPED"' in lines[1] and '"tasks": []' in lines[1], lines[1]
    assert lines[2] == (
        '{"offsets": [{"partition": {"filename": "test.txt"}, "offset": {"position": 12}}]}'
    ), lines[2]
    assert lines[3] == (
        '{"message": "The offsets for this connector have been reset successfully"}'
    ), lines[3]
    assert lines[4] == '["local-file-sink"]', lines
    assert (tmp_path / "test.sink.txt").read_text() == "foo\nbar\nbaz\n"
    assert '"name": "dist-source"' in distributed and '"dist-sink"' in distributed
    assert '"state": "RUNNING"' in distributed
