"""README.md's "Usage" block, docs/metrics.md's first block and docs/performance.md's bench
commands, as written: a list of
example commands rather than a script (two foreground brokers, benchmarks of minutes), so
each line is checked for what it is:

- each ``oncelog broker`` line starts a broker as written (own data directory, free ports,
  ``--listen`` added where the line has none), which prints its ready line;
- each client line runs as written against a broker (``-b`` added), in order, after the
  state it needs (an open transaction of ``my-txn-id`` on ``orders`` partition 0), and
  succeeds; the one that names a made-up producer id fails with one line, not a usage error;
- ``curl`` gets the metrics from the listener the broker line opened;
- each benchmark line's flags are parsed by the benchmark's own argument parser (the run
  itself takes minutes: not a test);
- ``make demo`` and ``make test`` (Set-up) are targets ``make -n`` knows (they run the demo
  and the whole suite themselves)."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .connect.workers import free_port

ROOT = Path(__file__).resolve().parents[2]
ARGCHECK = """
import argparse, runpy, sys
parse = argparse.ArgumentParser.parse_args
def checked(self, args=None, namespace=None):
    parse(self, args, namespace)
    raise SystemExit(0)
argparse.ArgumentParser.parse_args = checked
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def sh_block(doc: str, after: str) -> list[str]:
    """The command lines of the first ``sh`` block after ``after``: continuations joined,
    comments and blank lines dropped."""
    text = (ROOT / doc).read_text()
    block = re.search(r"```sh\n(.*?)```", text[text.index(after) :], re.S)
    assert block is not None
    joined = block.group(1).replace("\\\n", " ")
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in joined.splitlines()]
    return [re.sub(r"\s+", " ", line) for line in lines if line and not line.startswith("#")]


def as_written(line: str) -> str:
    """The line run from a scratch directory: the checkout's venv and benchmarks."""
    return line.replace(".venv/", f"{ROOT}/.venv/").replace(" bench/", f" {ROOT}/bench/")


def flags_only(line: str) -> str:
    """A benchmark line with its arguments parsed by the benchmark's parser, not run."""
    return as_written(line.replace(".venv/bin/python ", f".venv/bin/python -c '{ARGCHECK}' "))


def bash(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", line], cwd=cwd, capture_output=True, text=True, timeout=120
    )


@contextmanager
def broker_line(line: str, cwd: Path) -> Iterator[tuple[list[str], int]]:
    """Start a broker line in the foreground, as written but for free ports; yield the
    lines it printed up to its ready line, and its port."""
    port = free_port()
    if "--listen" in line:
        line = line.replace("127.0.0.1:9092", f"127.0.0.1:{port}")
    else:
        line += f" --listen 127.0.0.1:{port}"
    line = line.replace("127.0.0.1:9404", f"127.0.0.1:{free_port()}")
    proc = subprocess.Popen(
        ["bash", "-c", "exec " + as_written(line)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        printed: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (printed and "ready on" in printed[-1]):
            printed.append(proc.stdout.readline().rstrip("\n"))
            assert proc.poll() is None or printed[-1], f"the broker exited: {printed}"
        assert "ready on" in printed[-1], printed
        yield printed, port
    finally:
        proc.terminate()
        assert proc.wait(30) == 0


def open_transaction(bootstrap: str) -> Producer:
    """``orders`` (1 partition) with an open transaction of ``my-txn-id`` on partition 0."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result()
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "my-txn-id"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("orders", b"open", partition=0)
    assert producer.flush(30) == 0
    return producer


def test_readme_usage_lines_run_as_written(tmp_path: Path) -> None:
    lines = sh_block("README.md", "## Usage")
    brokers = [line for line in lines if line.startswith(".venv/bin/oncelog broker ")]
    clients = [
        line for line in lines if line.startswith(".venv/bin/oncelog ") and line not in brokers
    ]
    curls = [line for line in lines if line.startswith("curl ")]
    benches = [line for line in lines if line.startswith(".venv/bin/python bench/")]
    assert len(brokers) == 2 and len(curls) == 1 and len(benches) == 4, lines
    assert len(brokers) + len(clients) + len(curls) + len(benches) == len(lines), lines

    with broker_line(brokers[0], tmp_path) as (printed, port):
        assert printed[-1] == f"oncelog broker ready on 127.0.0.1:{port} (PLAINTEXT)"
        bootstrap = f"127.0.0.1:{port}"
        producer = None
        results = {}
        for line in clients:
            if line.startswith(".venv/bin/oncelog transactions") and producer is None:
                producer = open_transaction(bootstrap)
            results[line] = bash(as_written(line) + f" -b {bootstrap}", tmp_path)
        assert producer is not None
    made_up = ".venv/bin/oncelog transactions abort --topic orders --partition 0 --producer-id 42"
    for line, done in results.items():
        if line == made_up:
            assert done.returncode == 1 and done.stderr.startswith("error: "), done
            assert len(done.stderr.splitlines()) == 1, done.stderr
        else:
            assert done.returncode == 0, (line, done.stderr)
    out = {line.removeprefix(".venv/bin/oncelog "): done.stdout for line, done in results.items()}
    assert out["topics create orders --partitions 6 -c retention.ms=86400000"] == (
        "created topic orders (6 partitions)\n"
    )
    assert "orders" in out["topics list"].split()
    for describe in ("topics describe orders", "topics describe --topic orders"):
        assert "PartitionCount: 6" in out[describe] and "retention.ms=86400000" in out[describe]
    assert out["topics delete orders"] == "deleted topic orders\n"
    assert "my-txn-id" in out["transactions list --state Ongoing"]
    assert "Ongoing" in out["transactions describe my-txn-id"]
    producers = out["transactions describe-producers orders 0"]
    assert len([row for row in producers.splitlines() if row.startswith("│")]) == 1, producers
    assert out["transactions find-hanging"] == "no hanging transactions\n"
    assert '"live_producer_ids"' in out["transactions metrics"]

    with broker_line(brokers[1], tmp_path) as (printed, port):
        url = re.search(r"http://127\.0\.0\.1:\d+", printed[0])
        assert printed[0].startswith("oncelog metrics and console on ") and url, printed
        assert printed[-1] == f"oncelog broker ready on 127.0.0.1:{port} (PLAINTEXT)"
        (curl,) = curls
        scraped = bash(curl.replace("http://127.0.0.1:9404", url.group(0)), tmp_path)
        assert scraped.returncode == 0 and scraped.stdout.startswith("# HELP oncelog_"), scraped

    for line in benches:
        parsed = bash(flags_only(line), tmp_path)
        assert parsed.returncode == 0, (line, parsed.stderr)


def test_metrics_doc_first_block_runs_as_written(tmp_path: Path) -> None:
    """docs/metrics.md's opening session: the broker line prints the two lines shown, and
    the curl line gets the metrics."""
    text = (ROOT / "docs" / "metrics.md").read_text()
    block = re.search(r"```sh\n(.*?)```", text, re.S)
    assert block is not None
    broker, shown_url, shown_ready, curl = block.group(1).splitlines()
    with broker_line(".venv/bin/" + broker, tmp_path) as (printed, port):
        url = re.search(r"http://127\.0\.0\.1:\d+", printed[0])
        assert url is not None
        assert printed == [
            shown_url.removeprefix("# ").replace("http://127.0.0.1:9404", url.group(0)),
            shown_ready.removeprefix("# ").replace("127.0.0.1:9092", f"127.0.0.1:{port}"),
        ]
        scraped = bash(curl.replace("http://127.0.0.1:9404", url.group(0)), tmp_path)
        assert scraped.returncode == 0 and scraped.stdout.startswith("# HELP oncelog_"), scraped
    (bench,) = sh_block("docs/metrics.md", "## Cost of a scrape")
    parsed = bash(flags_only(bench), tmp_path)
    assert parsed.returncode == 0, parsed.stderr


def test_performance_doc_bench_commands_parse(tmp_path: Path) -> None:
    """Every "typical command" of docs/performance.md's bench table names a bench script
    that exists and flags its own parser accepts (the runs take minutes: not a test)."""
    text = (ROOT / "docs" / "performance.md").read_text()
    table = text[text.index("### The bench scripts") : text.index("### Against another broker")]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    commands = [
        command
        for row in rows
        for command in re.findall(r"`((?:PYTHONPATH=src )?\.venv/bin/python bench/[^`]+)`", row)
    ]
    assert len(rows) >= 20 and len(commands) >= len(rows), (rows, commands)
    for command in commands:
        script = re.search(r"bench/(\S+\.py)", command)
        assert script is not None and (ROOT / "bench" / script.group(1)).is_file(), command
        parsed = bash(
            flags_only(command.replace("PYTHONPATH=src ", f"PYTHONPATH={ROOT}/src ")), tmp_path
        )
        assert parsed.returncode == 0, (command, parsed.stderr)


def test_readme_setup_targets_exist() -> None:
    (make_demo, make_test) = sh_block("README.md", "## Set-up on a fresh machine")
    assert (make_demo, make_test) == ("make demo", "make test")
    done = subprocess.run(
        ["make", "-n", "demo", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert ".venv/bin/oncelog demo" in done.stdout and "pytest" in done.stdout
