"""Building a task's loop (Kafka's ``Worker.buildWorkerTask``): its converters (the
connector's if it names them, else the worker's), transformation chain, error policy,
clients and offsets, for a sink, an at-least-once source or an exactly-once source
(KIP-618: with its transactional producer, its offsets read once its predecessors are
fenced, the transaction boundary); and KIP-558 topic tracking."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from oncelog.connect.api.connector import Config, SinkTask, SourceTask
from oncelog.connect.api.converters import Converter, configure_converter
from oncelog.connect.api.errors import ConnectException
from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.runtime.abstract_source_task import AbstractWorkerSourceTask
from oncelog.connect.runtime.connector_config import (
    TRANSACTION_BOUNDARY,
    TRANSACTION_BOUNDARY_INTERVAL_MS,
)
from oncelog.connect.runtime.error_handling import ErrorPolicy
from oncelog.connect.runtime.exactly_once_source_task import (
    ExactlyOnceWorkerSourceTask,
)
from oncelog.connect.runtime.offsets_topics import offsets_topic
from oncelog.connect.runtime.plugins import PluginRegistry
from oncelog.connect.runtime.transformation_chain import TransformationChain, build_chain
from oncelog.connect.runtime.worker_config import (
    WorkerConfig,
)
from oncelog.connect.runtime.worker_connector import TASK_CLASS_CONFIG
from oncelog.connect.runtime.worker_services import ClientFactory, StatusSink
from oncelog.connect.runtime.worker_sink_task import (
    WorkerSinkTask,
)
from oncelog.connect.runtime.worker_source_task import (
    CopyingOffsetWriter,
    OffsetWriter,
    WorkerSourceTask,
)
from oncelog.connect.storage.offsets import (
    LayeredOffsetStore,
    MemoryOffsetStore,
    OffsetsView,
    offsets_of,
)

DLQ_TOPIC = "errors.deadletterqueue.topic.name"
READ_TIMEOUT_S = 30.0


class TaskLoops:
    def __init__(
        self,
        config: WorkerConfig,
        plugins: PluginRegistry,
        clients: ClientFactory,
        offsets: OffsetsView,
        statuses: StatusSink,
        clock: Callable[[], float] = time.time,
        topic_tracking: bool = True,
    ) -> None:
        self.config = config
        self.plugins = plugins
        self.clients = clients
        self.offsets = offsets
        self.statuses = statuses
        self.clock = clock
        self.topic_tracking = topic_tracking

    def converters(self, connector_config: Mapping[str, str]) -> tuple[Converter, Converter]:
        """Key and value converters: the connector's if it names them, else the worker's."""
        out = []
        for is_key, key in ((True, "key.converter"), (False, "value.converter")):
            source: Mapping[str, Any] = (
                connector_config if connector_config.get(key) else self.config.originals
            )
            converter = self.plugins.converter_class(str(source[key]), key)()
            out.append(configure_converter(converter, source, is_key))
        return out[0], out[1]

    def build(
        self,
        task_id: ConnectorTaskId,
        connector_config: Mapping[str, str],
        task_config: Config,
        before_first_poll: Callable[[ConnectorTaskId], None] | None = None,
    ) -> AbstractWorkerSourceTask | WorkerSinkTask:
        """The loop of one task: source (exactly-once or at-least-once) or sink."""
        task_cls = self.plugins.task_class(task_config[TASK_CLASS_CONFIG])
        key_converter, value_converter = self.converters(connector_config)
        chain = build_chain(connector_config, self.plugins)
        errors = ErrorPolicy.from_config(connector_config)
        if issubclass(task_cls, SourceTask):
            return self._source_loop(
                task_id, task_cls(), connector_config, task_config,
                key_converter, value_converter, chain, errors, before_first_poll,
            )  # fmt: skip
        if issubclass(task_cls, SinkTask):
            dlq = connector_config.get(DLQ_TOPIC, "").strip()
            return WorkerSinkTask(
                task_id,
                task_cls(),
                task_config,
                key_converter=key_converter,
                value_converter=value_converter,
                chain=chain,
                source=self.clients.sink_source(task_id.connector, task_id.task, connector_config),
                errors=errors,
                dead_letters=self.clients.dead_letter_sender(task_id.connector, dlq)
                if dlq
                else None,
                offset_flush_interval_ms=self.config.settings.offset_flush_interval_ms,
                active_topics=self._topic_tracker(task_id),
            )
        raise ConnectException(
            f"{task_config[TASK_CLASS_CONFIG]} is neither a SourceTask nor a SinkTask"
        )

    def _source_loop(
        self,
        task_id: ConnectorTaskId,
        task: SourceTask,
        connector_config: Mapping[str, str],
        task_config: Config,
        key_converter: Converter,
        value_converter: Converter,
        chain: TransformationChain,
        errors: ErrorPolicy,
        before_first_poll: Callable[[ConnectorTaskId], None] | None,
    ) -> AbstractWorkerSourceTask:
        """The exactly-once loop when the worker's support is ``enabled``, else the
        at-least-once one; either reads and writes the connector's offsets topic."""
        connector = task_id.connector
        topic = offsets_topic(self.config, connector_config)
        flush_interval = self.config.settings.offset_flush_interval_ms
        if self.config.exactly_once_source_enabled():
            interval = connector_config.get(TRANSACTION_BOUNDARY_INTERVAL_MS) or flush_interval
            hook = before_first_poll
            return ExactlyOnceWorkerSourceTask(
                task_id,
                task,
                task_config,
                key_converter=key_converter,
                value_converter=value_converter,
                chain=chain,
                sender=self.clients.transactional_sender(connector, task_id.task, connector_config),
                offsets=MemoryOffsetStore(),
                load_offsets=lambda: self._exactly_once_offsets(
                    connector, topic.topic, topic.separate, connector_config
                ),
                offsets_topic=topic.topic,
                boundary=connector_config.get(TRANSACTION_BOUNDARY, "poll").lower(),
                boundary_interval_ms=int(interval),
                global_copier=self.clients.global_offset_copier() if topic.separate else None,
                before_first_poll=None if hook is None else (lambda: hook(task_id)),
                errors=errors,
                active_topics=self._topic_tracker(task_id),
            )
        offsets = self._source_offsets(connector, topic.topic, topic.separate, connector_config)
        writer: OffsetWriter = self.clients.offset_writer(connector)
        if topic.separate:
            writer = CopyingOffsetWriter(
                self.clients.separate_offset_writer(connector, topic.topic, connector_config),
                self.clients.global_offset_copier(),
            )
        return WorkerSourceTask(
            task_id,
            task,
            task_config,
            key_converter=key_converter,
            value_converter=value_converter,
            chain=chain,
            sender=self.clients.record_sender(connector, task_id.task, connector_config),
            offset_writer=writer,
            offsets=offsets,
            errors=errors,
            offset_flush_interval_ms=flush_interval,
            offset_flush_timeout_ms=self.config.settings.offset_flush_timeout_ms,
            active_topics=self._topic_tracker(task_id),
        )

    def _topic_tracker(self, task_id: ConnectorTaskId) -> Callable[[str], None]:
        """KIP-558: what a task calls with each topic it writes or reads (nothing when
        ``topic.tracking.enable=false``)."""
        if not self.topic_tracking:
            return lambda topic: None
        statuses, clock = self.statuses, self.clock
        return lambda topic: statuses.record_active_topic(
            task_id.connector, task_id.task, topic, int(clock() * 1000)
        )

    def _source_offsets(
        self, connector: str, topic: str, separate: bool, connector_config: Mapping[str, str]
    ) -> MemoryOffsetStore:
        """What the task reads: the global view, or its separate topic (created on
        demand, read to its end now) layered over the global view."""
        if not separate:
            return self.offsets.reader(connector)
        store = LayeredOffsetStore(self.offsets.reader(connector))
        own = self.clients.separate_offsets(connector, topic, connector_config)
        own.ensure()
        own.read(offsets_of(connector, store), READ_TIMEOUT_S)
        return store

    def _exactly_once_offsets(
        self, connector: str, topic: str, separate: bool, connector_config: Mapping[str, str]
    ) -> MemoryOffsetStore:
        """An exactly-once task's offsets, read once its producer has fenced its
        predecessors: its own copy of the topic read to the end (high watermarks
        consumed read_committed), so a transaction its predecessor committed is seen
        even when the markers were still being written."""
        if separate:
            return self._source_offsets(connector, topic, separate, connector_config)
        store = MemoryOffsetStore()
        self.clients.read_global_offsets(
            connector, connector_config, offsets_of(connector, store), READ_TIMEOUT_S
        )
        return store
