"""The broker's Prometheus metrics, built at scrape time.

``BrokerCollector`` is a custom ``prometheus_client`` collector: it reads the hot-path
counters (``RequestStats``) and, through ``BrokerStateView``, the partitions, the
transaction coordinator, the group coordinator and the log cleaner, only when scraped.
Names follow Prometheus conventions (base units, ``_total`` counters); each help text
names the Kafka metric it corresponds to. docs/metrics.md lists them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from oncelog.broker.state_view import BrokerStateView
from oncelog.txn.metadata import TxnState

if TYPE_CHECKING:
    from oncelog.broker.broker import Broker

PREFIX = "oncelog_"


def metrics_registry(broker: Broker, view: BrokerStateView) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker, view))
    return registry


class BrokerCollector(Collector):
    def __init__(self, broker: Broker, view: BrokerStateView) -> None:
        self._broker = broker
        self._view = view

    def collect(self) -> Iterator[Metric]:
        yield from self._transactions()
        yield from self._requests()
        yield from self._log_cleaner()
        yield from self._coordinators()
        yield from self._groups()

    # -- transactions and partitions ---------------------------------------------------------

    def _transactions(self) -> Iterable[Metric]:
        view = self._view
        now = view.now_ms()
        parts = view.partitions(internal=True)
        txns = view.transactions()
        hanging = view.hanging(parts, txns)
        yield _gauge(
            "producer_ids",
            "Producer ids with state in any partition. "
            "Kafka: kafka.server:type=ReplicaManager,name=ProducerIdCount.",
            view.live_producer_ids(),
        )
        yield _gauge(
            "transactional_ids",
            "Transactional ids the transaction coordinator holds (KIP-98 active transactional "
            "ids). Kafka: kafka.server:type=transaction-coordinator-metrics (transactional ids).",
            len(txns),
        )
        by_state = GaugeMetricFamily(
            PREFIX + "transactions",
            "Transactional ids by coordinator state (Ongoing, PrepareCommit, CompleteCommit, "
            "...). Kafka: kafka-transactions.sh list; KIP-664 ListTransactions.",
            labels=["state"],
        )
        counts = {s.kafka_name: 0 for s in TxnState}
        for t in txns:
            counts[t.state] = counts.get(t.state, 0) + 1
        for state, n in counts.items():
            by_state.add_metric([state], n)
        yield by_state
        hang = GaugeMetricFamily(
            PREFIX + "hanging_transactions",
            "Open transactions that hold the LSO back longer than they may: kind=overdue, "
            "tracked by the coordinator and open longer than their transaction.timeout.ms; "
            "kind=untracked, kafka-transactions.sh find-hanging's rule (open in a partition "
            "for longer than transaction.max.timeout.ms, unknown to the coordinator).",
            labels=["kind"],
        )
        hang.add_metric(["overdue"], sum(1 for h in hanging if h.overdue))
        hang.add_metric(["untracked"], sum(1 for h in hanging if not h.overdue))
        yield hang

        labels = ["topic", "partition"]
        families = {
            "hw": GaugeMetricFamily(
                PREFIX + "partition_high_watermark",
                "High watermark (= log end offset on one node). "
                "Kafka: kafka.log:type=Log,name=LogEndOffset.",
                labels=labels,
            ),
            "lso": GaugeMetricFamily(
                PREFIX + "partition_last_stable_offset",
                "Last stable offset: read_committed consumers read up to here (KIP-98).",
                labels=labels,
            ),
            "start": GaugeMetricFamily(
                PREFIX + "partition_log_start_offset",
                "Log start offset. Kafka: kafka.log:type=Log,name=LogStartOffset.",
                labels=labels,
            ),
            "lag": GaugeMetricFamily(
                PREFIX + "partition_lso_lag_offsets",
                "High watermark minus LSO. "
                "Kafka: kafka.cluster:type=Partition,name=LastStableOffsetLag.",
                labels=labels,
            ),
            "lag_s": GaugeMetricFamily(
                PREFIX + "partition_lso_lag_seconds",
                "How long the LSO has been held back: age of the first batch of the oldest "
                "open transaction (KIP-98 LSO lag in ms, here in seconds).",
                labels=labels,
            ),
            "age": GaugeMetricFamily(
                PREFIX + "partition_oldest_open_transaction_age_seconds",
                "Age of the oldest transaction open in the partition, from the coordinator's "
                "transaction start when it tracks the producer.",
                labels=labels,
            ),
            "open": GaugeMetricFamily(
                PREFIX + "partition_open_transactions",
                "Transactions open in the partition (producers with a current txn start "
                "offset; Kafka: kafka-transactions.sh describe-producers).",
                labels=labels,
            ),
        }
        start_by_pid = {t.producer_id: t.start_ms for t in txns if t.is_open and t.start_ms >= 0}
        for p in parts:
            key = [p.topic, str(p.partition)]
            families["hw"].add_metric(key, p.high_watermark)
            families["lso"].add_metric(key, p.last_stable_offset)
            families["start"].add_metric(key, p.log_start_offset)
            families["lag"].add_metric(key, p.lso_lag)
            families["lag_s"].add_metric(key, p.lso_lag_ms(now) / 1000)
            oldest = 0
            for o in p.open_txns:
                began = min(start_by_pid.get(o.producer_id, o.first_timestamp), o.first_timestamp)
                oldest = max(oldest, now - began)
            families["age"].add_metric(key, oldest / 1000)
            families["open"].add_metric(key, len(p.open_txns))
        yield from families.values()

    # -- requests, bytes, purgatories, connections -------------------------------------------

    def _requests(self) -> Iterable[Metric]:
        stats = self._broker.stats
        requests = CounterMetricFamily(
            PREFIX + "requests",
            "Requests handled, per API. "
            "Kafka: kafka.network:type=RequestMetrics,name=RequestsPerSec,request=<api>.",
            labels=["api"],
        )
        for api, n in sorted(stats.requests.items()):
            requests.add_metric([api], n)
        yield requests
        errors = CounterMetricFamily(
            PREFIX + "request_errors",
            "Requests whose response carried an error (top-level, or a partition's for "
            "Produce and Fetch), per API and error; CLOSED/INTERNAL: the connection was "
            "closed. Kafka: kafka.network:type=RequestMetrics,name=ErrorsPerSec.",
            labels=["api", "error"],
        )
        for (api, error), n in sorted(stats.errors.items()):
            errors.add_metric([api, error], n)
        yield errors
        latency = HistogramMetricFamily(
            PREFIX + "request_duration_seconds",
            "Time from a request's decoding to its response (acks=all produce: until durable). "
            "Kafka: kafka.network:type=RequestMetrics,name=TotalTimeMs,request=<api>.",
            labels=["api"],
        )
        for api, hist in sorted(stats.latency.items()):
            latency.add_metric([api], hist.cumulative(), hist.total_s)
        yield latency
        for direction, counts, kafka in (
            ("in", stats.bytes_in, "BytesInPerSec"),
            ("out", stats.bytes_out, "BytesOutPerSec"),
        ):
            family = CounterMetricFamily(
                PREFIX + f"topic_bytes_{direction}",
                f"Record bytes {'produced to' if direction == 'in' else 'fetched from'} the "
                f"topic. Kafka: kafka.server:type=BrokerTopicMetrics,name={kafka},topic=<t>.",
                labels=["topic"],
            )
            for topic, n in sorted(counts.items()):
                family.add_metric([topic], n)
            yield family
        purgatory = GaugeMetricFamily(
            PREFIX + "purgatory_size",
            "Requests waiting: produce = acks=all produces awaiting their fdatasync, fetch = "
            "fetches parked until min.bytes or max.wait.ms. Kafka: kafka.server:type="
            "DelayedOperationPurgatory,name=PurgatorySize,delayedOperation=Produce|Fetch.",
            labels=["operation"],
        )
        purgatory.add_metric(["produce"], stats.produce_waiting)
        purgatory.add_metric(["fetch"], stats.fetch_waiting)
        yield purgatory
        yield _gauge(
            "connections",
            "Open client connections. Kafka: kafka.server:type=socket-server-metrics,"
            "name=connection-count.",
            stats.connections,
        )
        yield _counter(
            "connections_opened",
            "Client connections accepted. Kafka: socket-server-metrics connection-creation-total.",
            stats.connections_opened,
        )
        yield _counter(
            "connections_closed",
            "Client connections closed. Kafka: socket-server-metrics connection-close-total.",
            stats.connections_closed,
        )

    # -- log cleaner, coordinators, groups ------------------------------------------------

    def _log_cleaner(self) -> Iterable[Metric]:
        c = self._broker.log_cleaner
        yield _counter("log_cleaner_passes", "Completed compaction passes (log cleaner).", c.passes)
        yield _counter(
            "log_cleaner_read_bytes",
            "Bytes the cleaner read. Kafka: kafka.log:type=LogCleaner (cleaner-io read).",
            c.bytes_read,
        )
        yield _counter(
            "log_cleaner_written_bytes",
            "Bytes the cleaner wrote. Kafka: kafka.log:type=LogCleaner (cleaner-io written).",
            c.bytes_written,
        )
        yield _counter(
            "log_cleaner_removed_records", "Records compaction removed.", c.records_removed
        )
        yield _gauge(
            "log_cleaner_last_pass_seconds",
            "Duration of the latest pass. Kafka: kafka.log:type=LogCleaner,name=clean-time-secs.",
            c.last_pass_s,
        )
        yield _gauge(
            "log_cleaner_max_pass_seconds",
            "Longest pass since start. Kafka: kafka.log:type=LogCleaner,name=max-clean-time-secs.",
            c.max_pass_s,
        )
        yield _gauge(
            "log_cleaner_uncleanable_partitions",
            "Partitions left uncleaned after a failed pass. "
            "Kafka: kafka.log:type=LogCleanerManager,name=uncleanable-partitions-count.",
            c.uncleanable_count,
        )

    def _coordinators(self) -> Iterable[Metric]:
        load = GaugeMetricFamily(
            PREFIX + "coordinator_load_seconds",
            "Start-up load time of the coordinator's log. Kafka: kafka.server:type="
            "transaction-coordinator-metrics|group-coordinator-metrics,"
            "name=partition-load-time-max.",
            labels=["coordinator"],
        )
        load.add_metric(["transaction"], self._broker.txn.load_time_s)
        load.add_metric(["group"], self._broker.groups.load_time_s)
        yield load

    def _groups(self) -> Iterable[Metric]:
        lag = GaugeMetricFamily(
            PREFIX + "consumer_group_lag_offsets",
            "High watermark minus the group's committed offset (what kafka-consumer-groups.sh "
            "--describe shows as LAG).",
            labels=["group", "topic", "partition"],
        )
        for g in self._view.group_lag():
            lag.add_metric([g.group_id, g.topic, str(g.partition)], g.lag)
        yield lag


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(PREFIX + name, doc, value=value)


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(PREFIX + name, doc, value=value)
