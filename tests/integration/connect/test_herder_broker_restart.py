"""A rebalance that starts while the broker is down: the herder joins as soon as the
broker is back, as Kafka's worker coordinator does (retrying after retry.backoff.ms,
growing to retry.backoff.max.ms). Before the fix a JoinGroup that could not reach the
coordinator failed the tick, and the herder slept ``worker.unsync.backoff.ms`` (5 minutes
by default) before trying again: a worker caught in a rebalance by a broker restart
stayed out of its group, and leader-only REST calls failed, for 5 minutes."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from oncelog.connect.distributed.herder import Herder
from oncelog.connect.kafka_io.internal_topics import InternalTopicAdmin
from oncelog.connect.runtime.plugins import PluginRegistry
from oncelog.connect.runtime.worker_config import WorkerConfig
from oncelog.connect.worker_process import build_herder
from oncelog.embedded import EmbeddedBroker

from .workers import worker_settings

GROUP = "restart-rejoin"


def _joins(caplog: pytest.LogCaptureFixture) -> int:
    return sum(1 for r in caplog.records if r.getMessage().startswith("joined generation"))


@pytest.mark.parametrize("connection", ["kept", "dropped"])
def test_the_herder_rejoins_promptly_after_a_broker_restart(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    connection: str,
) -> None:
    """``dropped``: the join starts with FindCoordinator, which the stopped broker refuses
    (it once failed the tick for worker.unsync.backoff.ms); ``kept``: the join is refused on
    the coordinator's old connection."""
    caplog.set_level(logging.INFO, logger="oncelog.connect.distributed")
    caplog.set_level(logging.INFO, logger="oncelog.connect.clients")
    broker = EmbeddedBroker(tmp_path / "data").start(timeout=60)
    herder: Herder | None = None
    try:
        config = WorkerConfig(worker_settings(broker.bootstrap, GROUP))
        assert config.get_int("worker.unsync.backoff.ms") == 300_000  # Kafka's default
        InternalTopicAdmin(config.shared_client_config()).ensure(config.internal_topics())
        herder = build_herder(config, PluginRegistry.discover(config.plugin_path()), "http://h:1/")
        herder.start()
        assert herder.joined.wait(60)
        first = _joins(caplog)
        assert first >= 1
        broker.stop()
        # A rebalance starts just as the broker goes (a heartbeat answered
        # REBALANCE_IN_PROGRESS, a connector changed): the herder joins a broker that is gone.
        if connection == "dropped":
            with herder.member._lock:
                herder.member._drop_connection()
        herder.group.need_rejoin = True
        time.sleep(4)
        # The herder has tried to join the stopped broker (and failed) before it returns.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(
            "joining again in" in r.getMessage() or "herder tick failed" in r.getMessage()
            for r in caplog.records
        ):
            time.sleep(0.1)
        broker.start(timeout=60)
        restarted = time.monotonic()
        deadline = restarted + 60
        while _joins(caplog) == first and time.monotonic() < deadline:
            time.sleep(0.2)
        rejoined_after = time.monotonic() - restarted
        assert _joins(caplog) > first, "the herder did not join again within 60 s"
        assert rejoined_after < 30, rejoined_after
        assert "herder tick failed" not in caplog.text  # no traceback for a restart
        # The clients' "connection refused" lines came through the worker's logging ...
        refused = [
            r
            for r in caplog.records
            if r.name == "oncelog.connect.clients" and "Connection refused" in r.getMessage()
        ]
        assert refused, "no client log line while the broker was down"
        # ... and none raw on stderr ("%3|1795496097.473|FAIL|rdkafka#producer-1| ...").
        # (Only lines about this broker: a client another test left behind may print too.)
        port = broker.bootstrap.rsplit(":", 1)[1]
        raw = [
            line
            for line in capfd.readouterr().err.splitlines()
            if line.startswith("%") and f":{port}/" in line
        ]
        assert raw == [], raw[:3]
    finally:
        if herder is not None:
            herder.stop(30)
        broker.stop()
