"""A member joining between the leader's JoinGroup and its SyncGroup makes the real broker
answer the leader's SyncGroup with REBALANCE_IN_PROGRESS. The herder must join again at once,
as Kafka's coordinator does. Before the fix it treated that answer as a failed tick and slept
for ``worker.unsync.backoff.ms`` (5 minutes by default), so REST requests that need the leader
timed out (a 500 on PUT /connectors/v/stop in the chaos test)."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from oncelog.connect.distributed.connect_protocol import (
    ConnectProtocolVersion,
    WorkerState,
    join_protocols,
)
from oncelog.connect.distributed.membership import ConnectGroupMember
from oncelog.connect.kafka_io.internal_topics import InternalTopicAdmin
from oncelog.connect.runtime.plugins import PluginRegistry
from oncelog.connect.runtime.worker_config import WorkerConfig
from oncelog.connect.worker_process import build_herder
from oncelog.embedded import EmbeddedBroker

from .workers import worker_settings

GROUP = "sync-race"


def test_a_sync_refused_by_a_new_join_is_followed_by_an_immediate_rejoin(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="oncelog.connect.distributed")
    with EmbeddedBroker(tmp_path / "data") as broker:
        config = WorkerConfig(worker_settings(broker.bootstrap, GROUP))
        InternalTopicAdmin(config.shared_client_config()).ensure(config.internal_topics())
        herder = build_herder(config, PluginRegistry.discover(config.plugin_path()), "http://h:1/")
        intruder = ConnectGroupMember(broker.bootstrap, GROUP, session_timeout_ms=6_000)
        real_sync = herder.member.sync
        intruded = threading.Event()
        intruder_done = threading.Event()

        def intrude() -> None:
            # Join (held until the herder rejoins), take an assignment, then leave.
            state = WorkerState("http://intruder:1/", -1)
            intruder.join(join_protocols(state, ConnectProtocolVersion.SESSIONED))
            intruder.sync(None)
            intruder.leave()
            intruder_done.set()

        def sync_after_a_new_join(assignments: dict[str, bytes] | None = None) -> Any:
            if not intruded.is_set():
                intruded.set()
                threading.Thread(target=intrude, daemon=True).start()
                # the intruder's JoinGroup puts the group back into PreparingRebalance
                time.sleep(1.0)
            return real_sync(assignments)

        herder.member.sync = sync_after_a_new_join  # type: ignore[method-assign]
        herder.start()
        try:
            started = time.monotonic()
            assert intruder_done.wait(60), "the intruder never got through a rebalance"
            assert herder.joined.wait(60)
            joined_after = time.monotonic() - started
            assert "SyncGroup: rebalance_in_progress; joining again" in caplog.text
            assert "herder tick failed" not in caplog.text
            # well under worker.unsync.backoff.ms (300 s): the herder joined again at once
            assert joined_after < 60
        finally:
            herder.stop(30)
            intruder.close()
