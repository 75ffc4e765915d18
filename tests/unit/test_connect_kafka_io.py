"""The worker's client configurations go through the client layer."""

from __future__ import annotations

import logging

import pytest

from oncelog.connect.api.errors import ConnectException
from oncelog.connect.kafka_io.settings import client_config


def test_client_config_keeps_connection_settings_and_checks_security() -> None:
    config = client_config(
        {
            "bootstrap.servers": "a:9092,b:9092",
            "security.protocol": "PLAINTEXT",
            "acks": "all",
            "client.id": "x",
        }
    )
    assert config.servers() == ["a:9092", "b:9092"]
    assert config.librdkafka(acks="all") == {
        "security.protocol": "PLAINTEXT",
        "client.id": "x",
        "acks": "all",
        "bootstrap.servers": "a:9092,b:9092",
        "logger": logging.getLogger("oncelog.connect.clients"),  # the admin's lines too
    }


def test_an_unknown_security_protocol_fails_with_a_connect_error() -> None:
    with pytest.raises(ConnectException, match="Invalid client settings"):
        client_config({"bootstrap.servers": "a:9092", "security.protocol": "CARRIER_PIGEON"})


def test_client_log_lines_go_through_the_workers_logging(caplog: pytest.LogCaptureFixture) -> None:
    """librdkafka's lines reach the worker's log as records of ``oncelog.connect.clients``,
    not as raw ``%3|...`` lines on stderr."""
    import socket
    import time

    from confluent_kafka import Producer

    from oncelog.connect.kafka_io.settings import librdkafka

    with socket.socket() as s:  # a port nobody listens on: the connection is refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    caplog.set_level(logging.DEBUG, logger="oncelog.connect.clients")
    producer = Producer(librdkafka({"bootstrap.servers": f"127.0.0.1:{port}"}))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not caplog.records:
        producer.poll(0.1)
    records = [r for r in caplog.records if r.name == "oncelog.connect.clients"]
    assert records, "no librdkafka line reached the logger"
    assert any("Connect to" in r.getMessage() and str(port) in r.getMessage() for r in records)
    assert {r.levelno for r in records} <= {logging.ERROR, logging.WARNING, logging.INFO}


def test_a_write_nobody_acknowledges_in_time_is_retriable_for_the_herder() -> None:
    """A config write while the broker restarts times out: the herder retries it after
    retry.backoff.ms rather than sleeping worker.unsync.backoff.ms (5 minutes)."""
    import socket

    from oncelog.connect.api.errors import RetriableException
    from oncelog.connect.distributed.herder import _transient
    from oncelog.connect.kafka_io.internal_topics import TopicWriter

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    writer = TopicWriter({"bootstrap.servers": f"127.0.0.1:{port}"}, "configs")
    with pytest.raises(RetriableException, match="1 outstanding") as failed:
        writer.write([(b"k", b"v")], 0.5)
    assert _transient(failed.value)
    assert not _transient(ConnectException("Invalid client settings: x"))
