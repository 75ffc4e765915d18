"""Worker configuration: Kafka Connect's names and defaults, failures that name the key,
client settings with prefixes and override policies, and plugin discovery."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from oncelog.connect.api.errors import ConfigException
from oncelog.connect.runtime.client_configs import (
    connector_admin_config,
    sink_consumer_config,
    source_producer_config,
    validate_overrides,
)
from oncelog.connect.runtime.plugins import FILE_STREAM_PLUGIN, PluginRegistry, PluginType
from oncelog.connect.runtime.worker_config import WorkerConfig

BASE = {
    "group.id": "connect-cluster",
    "config.storage.topic": "connect-configs",
    "offset.storage.topic": "connect-offsets",
    "status.storage.topic": "connect-status",
    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter": "JsonConverter",
}


def test_properties_file_with_kafka_defaults(tmp_path: Path) -> None:
    path = tmp_path / "worker.properties"
    path.write_text(
        textwrap.dedent(
            """\
            # Kafka's connect-distributed.properties style
            bootstrap.servers=127.0.0.1:9092
            group.id=connect-cluster
            key.converter=org.apache.kafka.connect.json.JsonConverter
            value.converter=org.apache.kafka.connect.json.JsonConverter
            key.converter.schemas.enable=true
            value.converter.schemas.enable=false
            config.storage.topic=connect-configs
            offset.storage.topic : connect-offsets
            status.storage.topic connect-status
            config.storage.replication.factor=1
            offset.storage.replication.factor=1
            status.storage.replication.factor=-1
            listeners=http://127.0.0.1:8083
            producer.linger.ms=5
            """
        )
    )
    config = WorkerConfig.load(path, ["offset.flush.interval.ms=1000", "group.id=other"])
    assert config.group_id == "other"
    assert config.get_int("offset.flush.interval.ms") == 1000
    assert config.get_int("offset.flush.timeout.ms") == 5000
    assert config.get_int("task.shutdown.graceful.timeout.ms") == 5000
    assert config.get_int("scheduled.rebalance.max.delay.ms") == 300000
    assert config.get_str("connect.protocol") == "sessioned"
    assert config.get_str("exactly.once.source.support") == "disabled"
    assert config.internal_topics() == {
        "config": ("connect-configs", 1, 1),
        "offsets": ("connect-offsets", 25, 1),
        "status": ("connect-status", 5, -1),
    }
    assert config.listener_urls() == ["http://127.0.0.1:8083"]
    assert config.override_policy() == "All"
    assert config.originals_with_prefix("value.converter.") == {"schemas.enable": "false"}


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "offset.flush.intervl.ms=5",
            'Unknown worker configuration "offset.flush.intervl.ms" (did you mean "offset.flush.interval.ms"?)',
        ),
        (
            "offset.flush.interval.ms=soon",
            "Invalid value soon for configuration offset.flush.interval.ms: Not a number of type LONG",
        ),
        (
            "offset.storage.partitions=0",
            "Invalid value 0 for configuration offset.storage.partitions: Number of partitions must be positive, or -1 to use the broker's default",
        ),
        (
            "config.storage.replication.factor=0",
            "Invalid value 0 for configuration config.storage.replication.factor: Replication factor must be positive or -1 to use the broker's default",
        ),
        (
            "listeners=tcp://x:1",
            "Invalid value tcp://x:1 for configuration listeners: Listener tcp://x:1 must use the http or https protocol",
        ),
        (
            "connect.protocol=lazy",
            "Invalid value lazy for configuration connect.protocol: String must be one of: eager, compatible, sessioned",
        ),
        (
            "exactly.once.source.support=always",
            "Invalid value always for configuration exactly.once.source.support: String must be one of (case insensitive): disabled, preparing, enabled",
        ),
        (
            "connector.client.config.override.policy=Some",
            "Invalid value Some for configuration connector.client.config.override.policy: Must be one of None, Principal, All (or Kafka's policy class names)",
        ),
        ("group.id=", "Invalid value  for configuration group.id: String must be non-empty"),
        ("nonsense", "--set expects key=value, got 'nonsense'"),
    ],
)
def test_bad_values_fail_naming_the_key(override: str, message: str) -> None:
    props = [f"{k}={v}" for k, v in BASE.items()]
    with pytest.raises(ConfigException) as err:
        WorkerConfig.load(None, [*props, override])
    assert str(err.value) == message


def test_required_keys() -> None:
    props = dict(BASE)
    del props["status.storage.topic"]
    with pytest.raises(
        ConfigException,
        match='Missing required configuration "status.storage.topic" which has no default value.',
    ):
        WorkerConfig(props)
    with pytest.raises(ConfigException, match="does not exist"):
        WorkerConfig.load("/nonexistent/worker.properties")


def test_client_configs_precedence_and_policy() -> None:
    worker = WorkerConfig(
        {
            **BASE,
            "bootstrap.servers": "b1:9092,b2:9092",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "producer.linger.ms": "10",
            "producer.acks": "1",
            "consumer.max.poll.records": "100",
            "admin.request.timeout.ms": "1000",
            "admin.listeners": "http://127.0.0.1:9093",
        }
    )
    connector = {
        "producer.override.linger.ms": "20",
        "consumer.override.auto.offset.reset": "latest",
    }
    producer = source_producer_config(worker, "src", 2, connector)
    assert producer == {
        "bootstrap.servers": "b1:9092,b2:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "enable.idempotence": "true",
        "acks": "1",
        "max.in.flight.requests.per.connection": "5",
        "delivery.timeout.ms": "2147483647",
        "client.id": "connector-producer-src-2",
        "linger.ms": "20",
    }
    consumer = sink_consumer_config(worker, "snk", 0, connector)
    assert consumer["group.id"] == "connect-snk"
    assert consumer["enable.auto.commit"] == "false"
    assert consumer["auto.offset.reset"] == "latest"
    assert consumer["max.poll.records"] == "100"
    admin = connector_admin_config(worker, "snk", {})
    assert admin["request.timeout.ms"] == "1000" and "listeners" not in admin

    overrides = {
        "producer.override.linger.ms": "1",
        "admin.override.sasl.jaas.config": "x",
        "name": "c",
    }
    assert {k: v.errors for k, v in validate_overrides("All", overrides).items()} == {
        "producer.override.linger.ms": [],
        "admin.override.sasl.jaas.config": [],
    }
    assert {k: v.errors for k, v in validate_overrides("Principal", overrides).items()} == {
        "producer.override.linger.ms": [
            "The 'Principal' policy does not allow 'linger.ms' to be overridden in the connector configuration."
        ],
        "admin.override.sasl.jaas.config": [],
    }
    none = WorkerConfig(
        {
            **BASE,
            "connector.client.config.override.policy": "org.apache.kafka.connect.connector.policy.NoneConnectorClientConfigOverridePolicy",
        }
    )
    assert none.override_policy() == "None"
    assert validate_overrides("None", overrides)["admin.override.sasl.jaas.config"].errors == [
        "The 'None' policy does not allow 'sasl.jaas.config' to be overridden in the connector configuration."
    ]


PLUGIN_SOURCE = """
from oncelog.connect.api import SourceConnector, SourceTask
from oncelog.connect.api.config import ConfigDef


class {name}Task(SourceTask):
    def version(self): return "1"
    def start(self, config): pass
    def poll(self): return None
    def stop(self): pass


class {name}Connector(SourceConnector):
    def version(self): return "{version}"
    def config_def(self): return ConfigDef()
    def start(self, config): pass
    def task_class(self): return {name}Task
    def task_configs(self, max_tasks): return [{{}}]
    def stop(self): pass
"""


@pytest.fixture
def clean_modules() -> Iterator[None]:
    before = set(sys.modules)
    path_before = list(sys.path)
    yield
    for name in set(sys.modules) - before:
        del sys.modules[name]
    sys.path[:] = path_before


def test_plugin_path_directory_file_and_module(tmp_path: Path, clean_modules: None) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "dir_plugin_mod.py").write_text(
        PLUGIN_SOURCE.format(name="DirPlugin", version="2.0")
    )
    package = plugins / "dir_plugin_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "inner.py").write_text(PLUGIN_SOURCE.format(name="PkgPlugin", version="3.0"))
    single = tmp_path / "single_file.py"
    single.write_text(PLUGIN_SOURCE.format(name="FilePlugin", version="4.0"))

    registry = PluginRegistry.discover(
        [str(plugins), str(single), "oncelog.connect.connectors.verifiable"], entry_points=False
    )
    assert registry.connector_class("DirPlugin").__name__ == "DirPluginConnector"
    assert (
        registry.connector_class("dir_plugin_mod.DirPluginConnector").__name__
        == "DirPluginConnector"
    )
    assert registry.connector_class("PkgPluginConnector")().version() == "3.0"
    assert registry.connector_class("FilePlugin")().version() == "4.0"
    classes = {p["class"]: p for p in registry.connector_plugins()}
    assert classes["dir_plugin_mod.DirPluginConnector"] == {
        "class": "dir_plugin_mod.DirPluginConnector",
        "type": "source",
        "version": "2.0",
    }
    assert "dir_plugin_pkg.inner.PkgPluginConnector" in classes
    # Tasks are not plugins of their own.
    assert all(not d.class_name.endswith("Task") for d in registry.plugins())


def test_plugin_path_errors_name_the_key(tmp_path: Path, clean_modules: None) -> None:
    with pytest.raises(
        ConfigException,
        match="Invalid value /no/such/dir for configuration plugin.path: Not a directory",
    ):
        PluginRegistry.discover(["/no/such/dir"], entry_points=False)
    broken = tmp_path / "broken_plugin.py"
    broken.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(
        ConfigException,
        match="configuration plugin.path: Failed to load plugins: RuntimeError: boom",
    ):
        PluginRegistry.discover([str(broken)], entry_points=False)


def test_entry_points_and_ambiguous_aliases(tmp_path: Path, clean_modules: None) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "ep_plugin_a.py").write_text(PLUGIN_SOURCE.format(name="Twin", version="a"))
    (site / "ep_plugin_b.py").write_text(PLUGIN_SOURCE.format(name="Twin", version="b"))
    dist = site / "ep_plugins-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-plugins\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[oncelog.connectors]\ntwin_a = ep_plugin_a:TwinConnector\ntwin_b = ep_plugin_b\n"
    )
    sys.path.insert(0, str(site))
    registry = PluginRegistry.discover([])
    assert registry.connector_class("ep_plugin_a.TwinConnector")().version() == "a"
    assert registry.connector_class("ep_plugin_b.TwinConnector")().version() == "b"
    with pytest.raises(ConfigException) as err:
        registry.connector_class("Twin")
    assert str(err.value) == (
        "Invalid value Twin for configuration connector.class: Alias Twin is ambiguous; use one of the full class "
        "names: ep_plugin_a.TwinConnector, ep_plugin_b.TwinConnector"
    )


def test_the_file_stream_connectors_are_off_unless_plugin_path_names_them() -> None:
    """They read and write any file the worker may: Kafka keeps them off its default
    plugin path since 3.2."""
    registry = PluginRegistry.discover([], entry_points=False)
    assert not [d for d in registry.plugins() if "FileStream" in d.class_name]
    for name in ("FileStreamSink", "org.apache.kafka.connect.file.FileStreamSourceConnector"):
        with pytest.raises(
            ConfigException,
            match=f"Class {name} could not be found. The FileStream connectors are off by "
            f"default: add {FILE_STREAM_PLUGIN} to plugin.path to enable them.",
        ):
            registry.connector_class(name)


def test_builtin_aliases() -> None:
    registry = PluginRegistry.discover([FILE_STREAM_PLUGIN], entry_points=False)
    for alias in (
        "FileStreamSource",
        "FileStreamSourceConnector",
        "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "oncelog.connect.connectors.file_stream.FileStreamSourceConnector",
    ):
        assert registry.connector_class(alias).__name__ == "FileStreamSourceConnector"
    assert registry.connector_class("PostgresSink").__name__ == "PostgresSinkConnector"
    assert (
        registry.converter_class("org.apache.kafka.connect.storage.StringConverter").__name__
        == "StringConverter"
    )
    assert {d.type for d in registry.plugins()} == set(PluginType)
    with pytest.raises(
        ConfigException,
        match="Invalid value JsonConverter for configuration connector.class: Class oncelog.connect.api.converters.JsonConverter is not a connector",
    ):
        registry.connector_class("JsonConverter")
    with pytest.raises(ConfigException, match="Class com.example.Missing could not be found."):
        registry.connector_class("com.example.Missing")
