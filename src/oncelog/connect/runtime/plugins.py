"""Plugin discovery and name resolution.

Plugins are Python classes: connectors, converters, transformations and predicates.
They come from the built-ins, from ``plugin.path`` entries (a directory of modules or
packages, a ``.py`` file, or a dotted module name) and from the entry-point group
``oncelog.connectors`` (an entry may name a class or a module to scan).

A class can be named by its full Python path, by its simple name, by its simple
name without the ``Connector`` suffix (``FileStreamSource``), or, for the built-ins,
by Kafka's Java class name, so existing connector configs keep working. An alias
shared by two different classes is ambiguous and is refused with both names.

Only registered classes resolve. A name taken from a REST request or a config record
is looked up, never imported: importing runs module code, and the REST API would
otherwise run any module an HTTP client names (Kafka too loads only the classes its
plugin scan found). A task class is resolved among the task classes of the registered
connectors.

Unlike Kafka's per-plugin class loaders, all plugins share one interpreter: two
plugins cannot bring conflicting versions of the same dependency.
"""

from __future__ import annotations

import enum
import importlib
import importlib.metadata
import importlib.util
import inspect
import pkgutil
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from oncelog.connect.api.connector import (
    Connector,
    SinkConnector,
    SinkTask,
    SourceConnector,
    SourceTask,
)
from oncelog.connect.api.converters import (
    ByteArrayConverter,
    Converter,
    JsonConverter,
    StringConverter,
)
from oncelog.connect.api.errors import ConfigException
from oncelog.connect.connectors import BUILTIN_CONNECTORS
from oncelog.connect.transforms import (
    ExtractFieldKey,
    ExtractFieldValue,
    Filter,
    HasHeaderKey,
    InsertFieldKey,
    InsertFieldValue,
    Predicate,
    RecordIsTombstone,
    RegexRouter,
    ReplaceFieldKey,
    ReplaceFieldValue,
    TimestampRouter,
    TopicNameMatches,
    Transformation,
    ValueToKey,
)

ENTRY_POINT_GROUP = "oncelog.connectors"
PLUGIN_PATH_CONFIG = "plugin.path"
# The FileStream connectors' module: off unless plugin.path names it (Kafka keeps
# connect-file off its default plugin path since 3.2).
FILE_STREAM_PLUGIN = "oncelog.connect.connectors.file_stream"


class PluginType(enum.Enum):
    SOURCE = "source"
    SINK = "sink"
    CONVERTER = "converter"
    TRANSFORMATION = "transformation"
    PREDICATE = "predicate"


_BASES: list[tuple[type, PluginType]] = [
    (SourceConnector, PluginType.SOURCE),
    (SinkConnector, PluginType.SINK),
    (Converter, PluginType.CONVERTER),
    (Transformation, PluginType.TRANSFORMATION),
    (Predicate, PluginType.PREDICATE),
]


def plugin_type(cls: type) -> PluginType | None:
    if not inspect.isclass(cls) or inspect.isabstract(cls):
        return None
    for base, kind in _BASES:
        if issubclass(cls, base) and cls is not base:
            return kind
    return None


def full_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


@dataclass
class PluginDesc:
    cls: type
    type: PluginType
    aliases: list[str] = field(default_factory=list)

    @property
    def class_name(self) -> str:
        return full_name(self.cls)

    def version(self) -> str:
        if issubclass(self.cls, Connector):
            try:
                return self.cls().version()
            except Exception:  # a plugin whose constructor fails still gets listed
                return "undefined"
        return "undefined"


# Kafka's class names for the built-ins (and ``Outer$Inner`` short names).
_KAFKA_NAMES: dict[str, list[str]] = {
    "JsonConverter": ["org.apache.kafka.connect.json.JsonConverter"],
    "StringConverter": ["org.apache.kafka.connect.storage.StringConverter"],
    "ByteArrayConverter": ["org.apache.kafka.connect.converters.ByteArrayConverter"],
    "Filter": ["org.apache.kafka.connect.transforms.Filter"],
    "RegexRouter": ["org.apache.kafka.connect.transforms.RegexRouter"],
    "TimestampRouter": ["org.apache.kafka.connect.transforms.TimestampRouter"],
    "ValueToKey": ["org.apache.kafka.connect.transforms.ValueToKey"],
    "TopicNameMatches": ["org.apache.kafka.connect.transforms.predicates.TopicNameMatches"],
    "HasHeaderKey": ["org.apache.kafka.connect.transforms.predicates.HasHeaderKey"],
    "RecordIsTombstone": ["org.apache.kafka.connect.transforms.predicates.RecordIsTombstone"],
    "FileStreamSourceConnector": ["org.apache.kafka.connect.file.FileStreamSourceConnector"],
    "FileStreamSinkConnector": ["org.apache.kafka.connect.file.FileStreamSinkConnector"],
    "VerifiableSourceConnector": ["org.apache.kafka.connect.tools.VerifiableSourceConnector"],
    "VerifiableSinkConnector": ["org.apache.kafka.connect.tools.VerifiableSinkConnector"],
}
for _outer in ("InsertField", "ReplaceField", "ExtractField"):
    for _side in ("Key", "Value"):
        _KAFKA_NAMES[_outer + _side] = [
            f"{_outer}${_side}",
            f"org.apache.kafka.connect.transforms.{_outer}${_side}",
        ]


def builtin_plugins() -> list[type]:
    return [
        JsonConverter,
        StringConverter,
        ByteArrayConverter,
        InsertFieldKey,
        InsertFieldValue,
        ReplaceFieldKey,
        ReplaceFieldValue,
        ExtractFieldKey,
        ExtractFieldValue,
        ValueToKey,
        RegexRouter,
        TimestampRouter,
        Filter,
        TopicNameMatches,
        HasHeaderKey,
        RecordIsTombstone,
        *BUILTIN_CONNECTORS,
    ]


class PluginRegistry:
    """Known plugins and the names they answer to."""

    def __init__(self) -> None:
        self._plugins: dict[type, PluginDesc] = {}
        self._names: dict[str, set[type]] = {}
        self._tasks: dict[str, type] | None = None  # full name -> task class, built lazily

    @classmethod
    def with_builtins(cls) -> PluginRegistry:
        registry = cls()
        for plugin in builtin_plugins():
            registry.register(plugin)
        return registry

    @classmethod
    def discover(
        cls, plugin_path: Iterable[str] = (), *, entry_points: bool = True
    ) -> PluginRegistry:
        """Built-ins, then ``plugin.path`` entries, then the ``oncelog.connectors`` entry points."""
        registry = cls.with_builtins()
        for entry in plugin_path:
            for module in _load_path_entry(entry):
                registry.register_module(module)
        if entry_points:
            for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
                loaded = ep.load()
                if isinstance(loaded, ModuleType):
                    registry.register_module(loaded)
                else:
                    registry.register(loaded)
        return registry

    def register(self, cls: type) -> PluginDesc:
        kind = plugin_type(cls)
        if kind is None:
            raise ConfigException(
                f"{full_name(cls)} is not a connector, converter, transformation or predicate"
            )
        if cls in self._plugins:
            return self._plugins[cls]
        simple = cls.__name__
        aliases = (
            [simple, *_KAFKA_NAMES.get(simple, [])]
            if cls.__module__.startswith("oncelog.connect.")
            else [simple]
        )
        if simple.endswith("Connector") and len(simple) > len("Connector"):
            aliases.append(simple[: -len("Connector")])
        desc = PluginDesc(cls, kind, aliases)
        self._plugins[cls] = desc
        self._tasks = None
        for name in [desc.class_name, *aliases]:
            self._names.setdefault(name, set()).add(cls)
        return desc

    def register_module(self, module: ModuleType) -> list[PluginDesc]:
        found = []
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if obj.__module__ == module.__name__ and plugin_type(obj) is not None:
                found.append(self.register(obj))
        return found

    def plugins(self, *kinds: PluginType) -> list[PluginDesc]:
        return sorted(
            (d for d in self._plugins.values() if not kinds or d.type in kinds),
            key=lambda d: d.class_name,
        )

    def resolve(self, name: str, config_key: str | None = None) -> type:
        """The registered class called ``name``."""
        classes = self._names.get(name)
        if not classes:
            hint = (
                f" The FileStream connectors are off by default: add {FILE_STREAM_PLUGIN} "
                f"to {PLUGIN_PATH_CONFIG} to enable them."
                if "FileStream" in name
                else ""
            )
            raise ConfigException(
                config_key or "class", name, f"Class {name} could not be found.{hint}"
            )
        if len(classes) > 1:
            candidates = ", ".join(sorted(full_name(c) for c in classes))
            raise ConfigException(
                config_key or "class",
                name,
                f"Alias {name} is ambiguous; use one of the full class names: {candidates}",
            )
        return next(iter(classes))

    def _resolve_as(self, name: str, base: type, what: str, config_key: str) -> Any:
        cls = self.resolve(name, config_key)
        if not issubclass(cls, base):
            raise ConfigException(config_key, name, f"Class {full_name(cls)} is not a {what}")
        return cls

    def connector_class(self, name: str) -> type[Connector]:
        return cast(
            "type[Connector]", self._resolve_as(name, Connector, "connector", "connector.class")
        )

    def connector_type(self, connector_config: Mapping[str, str]) -> str | None:
        """``source``, ``sink`` or None (no such plugin), as the REST API reports it."""
        try:
            cls = self.connector_class(connector_config.get("connector.class", ""))
        except ConfigException:
            return None
        if issubclass(cls, SinkConnector):
            return "sink"
        return "source" if issubclass(cls, SourceConnector) else None

    def converter_class(self, name: str, config_key: str = "value.converter") -> type[Converter]:
        return cast("type[Converter]", self._resolve_as(name, Converter, "converter", config_key))

    def transformation_class(
        self, name: str, config_key: str = "transforms.type"
    ) -> type[Transformation]:
        return cast(
            "type[Transformation]",
            self._resolve_as(name, Transformation, "Transformation", config_key),
        )

    def predicate_class(self, name: str, config_key: str = "predicates.type") -> type[Predicate]:
        return cast("type[Predicate]", self._resolve_as(name, Predicate, "Predicate", config_key))

    def task_class(self, name: str, config_key: str = "task.class") -> type:
        """A task class by full Python path (the ``task.class`` of stored task configs),
        among the task classes of the registered connectors."""
        cls = self._task_classes().get(name)
        if cls is None:
            raise ConfigException(
                config_key, name, f"Class {name} could not be found as a SourceTask or SinkTask."
            )
        return cls

    def _task_classes(self) -> dict[str, type]:
        if self._tasks is None:
            tasks: dict[str, type] = {}
            for desc in self.plugins(PluginType.SOURCE, PluginType.SINK):
                try:
                    task = desc.cls().task_class()
                except Exception:  # a connector that cannot say has no runnable tasks
                    continue
                if inspect.isclass(task) and issubclass(task, SourceTask | SinkTask):
                    tasks[full_name(task)] = task
            self._tasks = tasks
        return self._tasks

    def connector_plugins(self) -> list[dict[str, Any]]:
        """``GET /connector-plugins`` entries: class, type and version."""
        return [
            {"class": d.class_name, "type": d.type.value, "version": d.version()}
            for d in self.plugins(PluginType.SOURCE, PluginType.SINK)
        ]


def _load_path_entry(entry: str) -> list[ModuleType]:
    entry = entry.strip()
    path = Path(entry)
    try:
        if path.is_dir():
            # A directory of plugin modules and packages, importable from its parent.
            if str(path.resolve()) not in sys.path:
                sys.path.insert(0, str(path.resolve()))
            modules = []
            for child in sorted(path.iterdir()):
                if child.suffix == ".py" and child.stem != "__init__":
                    modules.append(importlib.import_module(child.stem))
                elif child.is_dir() and (child / "__init__.py").exists():
                    modules.extend(_import_package(child.name))
            return modules
        if path.suffix == ".py" and path.is_file():
            return [_import_file(path)]
        if entry and all(part.isidentifier() for part in entry.split(".")):
            return _import_package(entry)
    except Exception as exc:
        raise ConfigException(
            PLUGIN_PATH_CONFIG, entry, f"Failed to load plugins: {type(exc).__name__}: {exc}"
        ) from exc
    raise ConfigException(
        PLUGIN_PATH_CONFIG, entry, "Not a directory, a .py file or an importable module name"
    )


def _import_package(name: str) -> list[ModuleType]:
    module = importlib.import_module(name)
    modules = [module]
    if hasattr(module, "__path__"):
        for info in pkgutil.walk_packages(module.__path__, prefix=name + "."):
            modules.append(importlib.import_module(info.name))
    return modules


def _import_file(path: Path) -> ModuleType:
    name = f"oncelog_plugin_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
