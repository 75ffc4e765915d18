"""The Connect worker's Prometheus metrics, served at ``GET /metrics`` on its REST listener.

Built at scrape time from what the runtime already counts (each task loop's
``SourceTaskMetrics`` / ``SinkTaskMetrics``, plain ints) and from the status the worker
reads from its status topic; nothing is added to the task loops. Help texts name Kafka
Connect's MBean attributes. docs/metrics.md lists them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Protocol

from aiohttp import web
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector, CollectorRegistry

from oncelog.connect.api.task_id import ConnectorTaskId
from oncelog.connect.runtime.abstract_source_task import SourceTaskMetrics
from oncelog.connect.runtime.worker import Worker
from oncelog.connect.storage.status_state import StatusState

PREFIX = "oncelog_connect_"

# Task loop counter -> (metric name, Kafka Connect attribute it corresponds to).
SOURCE_COUNTERS = {
    "polled": ("source_records_polled", "source-task-metrics source-record-poll-total"),
    "sent": ("source_records_written", "source-task-metrics source-record-write-total"),
    "acked": ("source_records_acked", "acknowledged by the broker (no Kafka counterpart)"),
    "filtered": ("records_filtered", "dropped by a transform or predicate"),
    "skipped_errors": ("records_skipped", "task-error-metrics total-records-skipped"),
    "offset_commits": ("offset_commits", "connector-task-metrics offset-commit-completion-total"),
    "offset_commit_failures": (
        "offset_commit_failures",
        "connector-task-metrics offset-commit-skip-total / failure",
    ),
}
SINK_COUNTERS = {
    "consumed": ("sink_records_read", "sink-task-metrics sink-record-read-total"),
    "put": ("sink_records_sent", "sink-task-metrics sink-record-send-total"),
    "filtered": ("records_filtered", "dropped by a transform or predicate"),
    "skipped_errors": ("records_skipped", "task-error-metrics total-records-skipped"),
    "dead_lettered": (
        "deadletterqueue_records",
        "task-error-metrics deadletterqueue-produce-requests",
    ),
    "retries": ("retries", "task-error-metrics total-retries"),
    "commits": ("offset_commits", "connector-task-metrics offset-commit-completion-total"),
}

# Exactly-once source tasks (KIP-618): Worker.task_metrics key -> (metric, Kafka attribute).
TRANSACTION_GAUGES = {
    "transaction-size-min": ("source_transaction_size_min", "transaction-size-min"),
    "transaction-size-max": ("source_transaction_size_max", "transaction-size-max"),
    "transaction-size-avg": ("source_transaction_size_avg", "transaction-size-avg"),
}
TRANSACTION_COUNTERS = {
    "transactions-committed": ("source_transactions_committed", "committed transactions"),
    "transactions-aborted": ("source_transactions_aborted", "aborted transactions"),
}


class StatusSource(Protocol):
    def statuses(self) -> StatusState: ...


class ConnectCollector(Collector):
    def __init__(self, worker: Worker, cluster: StatusSource) -> None:
        self._worker = worker
        self._cluster = cluster

    def collect(self) -> Iterator[Metric]:
        worker = self._worker
        tasks = list(worker.tasks.items())
        yield GaugeMetricFamily(
            PREFIX + "worker_connectors",
            "Connectors this worker runs. Kafka: connect-worker-metrics connector-count.",
            value=len(worker.connectors),
        )
        yield GaugeMetricFamily(
            PREFIX + "worker_tasks",
            "Tasks this worker runs. Kafka: connect-worker-metrics task-count.",
            value=len(tasks),
        )
        families: dict[str, CounterMetricFamily] = {}
        for task_id, runner in tasks:
            counters = getattr(runner.loop, "metrics", None)
            if counters is None:
                continue
            kind = "source" if isinstance(counters, SourceTaskMetrics) else "sink"
            table = SOURCE_COUNTERS if kind == "source" else SINK_COUNTERS
            labels = [task_id.connector, str(task_id.task), kind]
            for field in dataclasses.fields(counters):
                name, kafka = table.get(field.name, (field.name, ""))
                family = families.get(name)
                if family is None:
                    family = families[name] = CounterMetricFamily(
                        PREFIX + name,
                        f"Per task, since the task started on this worker. Kafka Connect: {kafka}.",
                        labels=["connector", "task", "type"],
                    )
                family.add_metric(labels, getattr(counters, field.name))
        yield from families.values()
        yield from self._transactions([task_id for task_id, _ in tasks])
        status = self._cluster.statuses()
        connectors = GaugeMetricFamily(
            PREFIX + "connector_status",
            "1 for each connector's current state, cluster-wide, from the status topic. "
            "Kafka: connector-metrics status.",
            labels=["connector", "state"],
        )
        for name, c in sorted(status.connectors.items()):
            connectors.add_metric([name, c.state.value], 1)
        yield connectors
        task_status = GaugeMetricFamily(
            PREFIX + "task_status",
            "1 for each task's current state, cluster-wide, from the status topic. "
            "Kafka: connector-task-metrics status.",
            labels=["connector", "task", "state"],
        )
        for (name, index), t in sorted(status.tasks.items()):
            task_status.add_metric([name, str(index), t.state.value], 1)
        yield task_status

    def _transactions(self, tasks: list[ConnectorTaskId]) -> Iterator[Metric]:
        """Per exactly-once source task, its transaction sizes (records per committed
        transaction, an abort counting as 0: Kafka's ``source-task-metrics``) and its
        committed and aborted transactions; sizes are absent before the first commit."""
        labels = ["connector", "task"]
        gauges = {
            key: GaugeMetricFamily(
                PREFIX + name, f"Records per transaction. Kafka: source-task-metrics {kafka}.",
                labels=labels,
            )
            for key, (name, kafka) in TRANSACTION_GAUGES.items()
        }  # fmt: skip
        counters = {
            key: CounterMetricFamily(
                PREFIX + name, f"Exactly-once source task: {kafka} since it started here.",
                labels=labels,
            )
            for key, (name, kafka) in TRANSACTION_COUNTERS.items()
        }  # fmt: skip
        for task_id in tasks:
            metrics = self._worker.task_metrics(task_id)
            if not metrics or "transactions-committed" not in metrics:
                continue  # not an exactly-once source task
            values = [task_id.connector, str(task_id.task)]
            for key, family in gauges.items():
                if metrics.get(key) is not None:
                    family.add_metric(values, metrics[key])
            for key, counter in counters.items():
                counter.add_metric(values, metrics.get(key) or 0)
        yield from gauges.values()
        yield from counters.values()


def add_metrics_route(app: web.Application, worker: Worker, cluster: StatusSource) -> None:
    """``GET /metrics`` on the worker's REST listener (Prometheus text or OpenMetrics)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ConnectCollector(worker, cluster))

    async def metrics(request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        return web.Response(body=encoder(registry), headers={"Content-Type": content_type})

    app.router.add_get("/metrics", metrics)
