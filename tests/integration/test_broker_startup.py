"""`oncelog broker` start-up: a stock Kafka server.properties, listeners from the file,
--listen overriding them, and start-up errors reported in one line by their real cause."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from oncelog.embedded import EmbeddedBroker

STOCK = Path(__file__).resolve().parents[1] / "data" / "kafka-kraft-server.properties"
BROKER = [sys.executable, "-m", "oncelog.cli.main", "broker"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stock_file(tmp_path: Path, port: int) -> Path:
    path = tmp_path / "server.properties"
    text = (
        STOCK.read_text()
        .replace(":9092", f":{port}")
        .replace("/tmp/kraft-combined-logs", str(tmp_path / "data"))
    )
    path.write_text(text)
    return path


def fail(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BROKER, *args], capture_output=True, text=True, timeout=60)


def test_stock_server_properties_starts_with_one_warning_on_its_listener(tmp_path: Path) -> None:
    port = free_port()
    b = EmbeddedBroker(tmp_path / "data", config_file=stock_file(tmp_path, port))
    with b:
        assert b.ports == {"PLAINTEXT": port}
        log = b.log_path.read_text()
    warnings = [line for line in log.splitlines() if " WARNING " in line]
    assert len(warnings) == 1
    assert warnings[0].endswith(
        "ignoring 7 settings of a multi-node Kafka cluster (oncelog is a single node): "
        "process.roles, node.id, controller.quorum.voters, inter.broker.listener.name, "
        "controller.listener.names, share.coordinator.state.topic.replication.factor, "
        "share.coordinator.state.topic.min.isr"
    )
    assert "Traceback" not in log
    [effective] = [line for line in log.splitlines() if "effective config (non-default): " in line]
    assert "log.retention.hours=168, log.segment.bytes=1073741824" in effective
    assert "process.roles" not in effective


def test_listen_overrides_the_files_listeners_only_when_given(tmp_path: Path) -> None:
    port, other = free_port(), free_port()
    cfg = stock_file(tmp_path, port)
    b = EmbeddedBroker(tmp_path / "data", config_file=cfg)
    b.start()
    b.stop()
    assert b.ports == {"PLAINTEXT": port}
    proc = subprocess.Popen(
        [*BROKER, "--config", str(cfg), "--listen", f"127.0.0.1:{other}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == f"oncelog broker ready on 127.0.0.1:{other} (PLAINTEXT)\n"
    finally:
        proc.terminate()
        proc.wait(20)
        proc.stdout.close()  # type: ignore[union-attr]


def test_data_dir_that_is_a_file_is_reported_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    r = fail("--data-dir", str(tmp_path / "f"), "--listen", "127.0.0.1:0")
    assert (r.returncode, r.stderr) == (
        1,
        f"error: data directory {tmp_path / 'f'} is a file, not a directory\n",
    )
    r = fail("--data-dir", str(tmp_path / "f" / "data"), "--listen", "127.0.0.1:0")
    assert (r.returncode, r.stderr) == (
        1,
        f"error: cannot create data directory {tmp_path / 'f' / 'data'}: not a directory\n",
    )


def test_port_in_use_is_reported_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = fail("--data-dir", str(tmp_path / "d"), "--listen", f"127.0.0.1:{port}")
    err = [line for line in r.stderr.splitlines() if not line[:4].isdigit()]  # not log lines
    assert (r.returncode, err) == (
        1,
        [f"error: cannot listen on 127.0.0.1:{port} (PLAINTEXT): address already in use"],
    )
    assert "Traceback" not in r.stderr


def test_bad_config_and_log_level_are_one_line_usage_errors(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.properties"
    cfg.write_text("num.partitions=-5\nno.such.key=1\n")
    r = fail("--config", str(cfg), "--data-dir", str(tmp_path / "d"))
    assert (r.returncode, r.stderr) == (
        2,
        "error: unknown broker configs: no.such.key; "
        "Invalid value -5 for configuration num.partitions: Value must be at least 1\n",
    )
    r = fail("--log-level", "LOUD")
    assert (r.returncode, r.stderr) == (
        2,
        "error: --log-level LOUD: expected one of DEBUG, INFO, WARNING, ERROR, CRITICAL\n",
    )
    r = fail("--log-format", "xml")
    assert (r.returncode, r.stderr) == (2, "error: --log-format xml: expected one of text, json\n")


def test_json_log_format_writes_one_object_a_line(tmp_path: Path) -> None:
    proc_args = ["--log-format", "json"]
    # EmbeddedBroker has no log-format knob: run the CLI directly.
    proc = subprocess.Popen(
        [
            *BROKER,
            "--data-dir",
            str(tmp_path / "data"),
            "--listen",
            "127.0.0.1:0",
            *proc_args,
            "--set",
            "process.roles=broker",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith("oncelog broker ready on 127.0.0.1:")
    proc.terminate()
    proc.wait(20)
    lines = proc.stderr.read().splitlines()
    proc.stdout.close()
    proc.stderr.close()
    records = [json.loads(line) for line in lines]
    assert {"ts", "level", "logger", "message"} <= set(records[0])
    assert records[0]["level"] == "WARNING"
    assert records[0]["logger"] == "oncelog.broker"
    assert records[0]["message"].startswith("ignoring 1 settings of a multi-node Kafka cluster")
    assert any(r["message"] == "shutting down" for r in records)


def test_sigusr1_switches_per_request_logging_at_run_time(tmp_path: Path) -> None:
    import os
    import signal
    import time

    from oncelog.client.admin import Admin
    from oncelog.client.config import ClientConfig

    err_path = tmp_path / "err.log"
    with open(err_path, "w") as err:
        proc = subprocess.Popen(
            [
                *BROKER,
                "--data-dir",
                str(tmp_path / "data"),
                "--listen",
                "127.0.0.1:0",
                "--log-format",
                "json",
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline()
        bootstrap = line.split(" on ")[1].split(" ")[0]

        def metadata_calls() -> None:
            with Admin(ClientConfig(bootstrap)) as admin:
                admin.topics()

        def requests_logged() -> list[dict[str, object]]:
            records = [json.loads(x) for x in err_path.read_text().splitlines()]
            return [r for r in records if r["logger"] == "oncelog.broker.requests"]

        def wait_for_line(message: str) -> None:
            deadline = time.monotonic() + 10
            while not any(
                json.loads(x)["message"] == message for x in err_path.read_text().splitlines()
            ):
                assert time.monotonic() < deadline, message
                time.sleep(0.05)

        metadata_calls()
        assert requests_logged() == []
        os.kill(proc.pid, signal.SIGUSR1)
        wait_for_line("per-request logging on")
        metadata_calls()
        on = requests_logged()
        assert {r["api"] for r in on} >= {"API_VERSIONS", "METADATA"}
        assert all(r["level"] == "DEBUG" and r["client_id"] for r in on)
        os.kill(proc.pid, signal.SIGUSR1)
        wait_for_line("per-request logging off")
        metadata_calls()
        assert len(requests_logged()) == len(on)
    finally:
        proc.terminate()
        proc.wait(20)
        proc.stdout.close()


def test_unwritable_data_dirs_are_reported_with_their_cause() -> None:
    # sysfs refuses new files and directories, even to root.
    assert (fail("--data-dir", "/sys", "--listen", "127.0.0.1:0").stderr) == (
        "error: data directory /sys is not writable: permission denied\n"
    )
    r = fail("--data-dir", "/sys/oncelog-data", "--listen", "127.0.0.1:0")
    assert (r.returncode, r.stderr) == (
        1,
        "error: cannot create data directory /sys/oncelog-data: operation not permitted\n",
    )


def test_embedded_broker_takes_string_paths(tmp_path: Path) -> None:
    """A new user passes a str, as for open(): the data dir and log path become Paths."""
    b = EmbeddedBroker(str(tmp_path / "data")).start()
    try:
        assert b.data_dir == tmp_path / "data"
        assert b.log_path == tmp_path / "data-broker.log" and b.log_path.exists()
    finally:
        assert b.stop() == 0


def _other_local_addresses() -> list[str]:
    """This machine's non-loopback addresses (the source address of a route; nothing is
    sent)."""
    found = []
    for family, target in ((socket.AF_INET, "192.0.2.1"), (socket.AF_INET6, "2001:db8::1")):
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            try:
                s.connect((target, 9))
            except OSError:
                continue
            address = s.getsockname()[0]
            if not address.startswith(("127.", "::1")):
                found.append(address)
    return found


def _kafka_round_trip(bootstrap: str, topic: str) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap)
    producer.send(topic, b"hello").get(timeout=20)
    producer.close()
    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=5000
    )
    values = [r.value for r in consumer]
    consumer.close()
    return values


def test_an_empty_listener_host_binds_every_interface(tmp_path: Path) -> None:
    """``PLAINTEXT://:PORT`` binds every interface, IPv4 and IPv6, and advertises the
    canonical host name (Kafka's SocketServer and its default advertised listener);
    ``127.0.0.1`` binds loopback only."""
    from oncelog.broker.listeners import canonical_host_name

    port = free_port()
    with EmbeddedBroker(tmp_path / "data", settings={"listeners": f"PLAINTEXT://:{port}"}) as b:
        assert b.ports == {"PLAINTEXT": port}
        addresses = ["127.0.0.1", "::1", *_other_local_addresses()]
        for address in addresses:
            with socket.create_connection((address, port), timeout=5):
                pass
        host = f"[{addresses[-1]}]" if ":" in addresses[-1] else addresses[-1]
        assert _kafka_round_trip(f"{host}:{port}", "everywhere") == [b"hello"]
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
        try:
            brokers = admin.describe_cluster()["brokers"]
        finally:
            admin.close()
        assert [(x["host"], x["port"]) for x in brokers] == [(canonical_host_name(), port)]
    loopback = free_port()
    with EmbeddedBroker(tmp_path / "data2", port=loopback):
        for address in ["::1", *_other_local_addresses()]:
            try:
                socket.create_connection((address, loopback), timeout=2).close()
            except OSError:
                continue
            raise AssertionError(f"a 127.0.0.1 listener accepted a connection on {address}")
