"""An SDK connector written in its own module, found through ``plugin.path`` and run
by the worker by its short alias: records reach the topic and offsets are stored."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.connect.api.target_state import TargetState
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.runtime.plugins import PluginRegistry
from oncelog.connect.runtime.worker import Worker
from oncelog.connect.runtime.worker_config import WorkerConfig
from oncelog.connect.storage.offsets import OffsetsView
from oncelog.connect.storage.status_records import State, TaskStatus
from oncelog.embedded import EmbeddedBroker

from .kafka_adapters import ConfluentClients, StatusList, consume_all

PLUGIN = '''
"""A counter source written against the SDK only."""
from oncelog.connect.api import SourceConnector, SourceRecord, SourceTask
from oncelog.connect.api.config import ConfigDef, ConfigType, Importance


class CounterTask(SourceTask):
    def version(self):
        return "1.0"

    def start(self, config):
        self.topic = config["topic"]
        self.limit = int(config["limit"])
        last = self.context.offset_storage_reader().offset({"counter": "main"})
        self.next = last["n"] + 1 if last else 0

    def poll(self):
        if self.next >= self.limit:
            return None
        batch = [SourceRecord.create({"counter": "main"}, {"n": n}, self.topic, {"n": n}) for n in range(self.next, self.limit)]
        self.next = self.limit
        return batch

    def stop(self):
        pass


class CounterConnector(SourceConnector):
    def version(self):
        return "1.0"

    def config_def(self):
        return (ConfigDef()
                .define("topic", ConfigType.STRING, importance=Importance.HIGH, documentation="Target topic.")
                .define("limit", ConfigType.INT, 100, None, Importance.LOW, "How many numbers."))

    def start(self, config):
        self.config = config

    def task_class(self):
        return CounterTask

    def task_configs(self, max_tasks):
        return [dict(self.config)]

    def stop(self):
        pass
'''


def test_plugin_from_plugin_path_runs_on_the_worker(broker: EmbeddedBroker, tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "counter_plugin.py").write_text(textwrap.dedent(PLUGIN))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics(
        [
            NewTopic("numbers", 1, 1),
            NewTopic("connect-offsets", 1, 1, config={"cleanup.policy": "compact"}),
        ]
    ).values():
        future.result(15)
    config = WorkerConfig.load(
        None,
        [f"bootstrap.servers={broker.bootstrap}", "group.id=g", "config.storage.topic=c", "offset.storage.topic=connect-offsets",
         "status.storage.topic=s", "key.converter=StringConverter", "value.converter=JsonConverter",
         "value.converter.schemas.enable=false", f"plugin.path={plugins}", "offset.flush.interval.ms=100"],
    )  # fmt: skip
    try:
        registry = PluginRegistry.discover(config.plugin_path(), entry_points=False)
        assert "counter_plugin.CounterConnector" in [
            p["class"] for p in registry.connector_plugins()
        ]
        statuses = StatusList()
        worker = Worker(
            "w",
            config,
            registry,
            ConfluentClients(broker.bootstrap, "connect-offsets"),
            OffsetsView(),
            statuses,
        )
        connector_config = {
            "name": "counter",
            "connector.class": "Counter",
            "topic": "numbers",
            "limit": "25",
        }
        assert worker.start_connector("counter", connector_config, TargetState.STARTED)
        [task_config] = worker.connector_task_configs("counter", 1)
        assert task_config["task.class"] == "counter_plugin.CounterTask"
        assert worker.start_task(
            ConnectorTaskId("counter", 0), connector_config, task_config, TargetState.STARTED
        )
        deadline = time.monotonic() + 20
        while (
            worker.offsets.reader("counter").offset({"counter": "main"}) != {"n": 24}
            and time.monotonic() < deadline
        ):
            time.sleep(0.1)
        assert worker.offsets.reader("counter").offset({"counter": "main"}) == {"n": 24}
        worker.stop_task(ConnectorTaskId("counter", 0))
        worker.stop_connector("counter")
        assert [json.loads(m.value()) for m in consume_all(broker.bootstrap, "numbers", 25)] == [
            {"n": n} for n in range(25)
        ]
        assert [s.state for s in statuses if isinstance(s, TaskStatus)] == [
            State.RUNNING,
            State.UNASSIGNED,
        ]
    finally:
        sys.modules.pop("counter_plugin", None)
        if str(plugins.resolve()) in sys.path:
            sys.path.remove(str(plugins.resolve()))
