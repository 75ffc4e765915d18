"""The broker's Prometheus metrics, built at scrape time.

A scrape has two halves. ``BrokerCollector.snapshot()`` runs on the broker's event loop and
only copies state: the hot-path counters (``RequestStats``) and, through
``BrokerStateView``, the partitions, the transaction and group coordinators' state and
the log cleaner's totals (about 20 ms for 2,000 partitions). Turning that snapshot into
metric families and text (``families``, ``encode_text``) is the expensive half; the HTTP
listener runs it in a worker thread, so a scrape never stalls request handling for long.
Names follow Prometheus conventions (base units, ``_total`` counters); each help text
names the Kafka metric it corresponds to. docs/metrics.md lists them all.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from oncelog.broker.loop_watchdog import LAG_BUCKETS_S, LoopFigures
from oncelog.broker.state_view import (
    BrokerStateView,
    GroupLag,
    Hanging,
    PartitionState,
    TxnView,
)
from oncelog.txn.metadata import TxnState

if TYPE_CHECKING:
    from oncelog.broker.broker import Broker

PREFIX = "oncelog_"


@dataclass(frozen=True, slots=True)
class CleanerFigures:
    passes: int
    bytes_read: int
    bytes_written: int
    records_removed: int
    last_pass_s: float
    max_pass_s: float
    uncleanable: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one scrape reports, copied on the event loop."""

    now_ms: int
    live_producer_ids: int
    partitions: list[PartitionState]
    transactions: list[TxnView]
    hanging: list[Hanging]
    groups: list[GroupLag]
    requests: dict[str, int]
    errors: dict[tuple[str, str], int]
    latency: dict[str, tuple[list[tuple[str, float]], float]]
    bytes_in: dict[str, int]
    bytes_out: dict[str, int]
    produce_waiting: int
    fetch_waiting: int
    connections_opened: int
    connections_closed: int
    cleaner: CleanerFigures
    load_s: dict[str, float]
    loop: LoopFigures
    # coordinator -> (records replayed, offsets to replay) of its load under way or last done
    load_progress: dict[str, tuple[int, int]] = field(default_factory=dict)
    loading: dict[str, bool] = field(default_factory=dict)  # coordinator -> still loading
    fetch_disk_read_bytes: int = 0  # fetched ranges found outside the page cache
    fetch_cold_plans: int = 0  # fetches planned in a page-read thread
    connections_refused: int = 0  # by max.connections / max.connections.per.ip
    connections_throttled: int = 0  # accepted late by max.connection.creation.rate
    failed_authentications: int = 0


class BrokerCollector(Collector):
    def __init__(self, broker: Broker, view: BrokerStateView) -> None:
        self._broker = broker
        self._view = view

    def snapshot(self) -> Snapshot:
        """Copy what a scrape reports. Call on the broker's event loop."""
        broker, view = self._broker, self._view
        stats = broker.stats
        parts = view.partitions(internal=True)
        txns = view.transactions()
        cleaner = broker.log_cleaner
        return Snapshot(
            now_ms=view.now_ms(),
            live_producer_ids=view.live_producer_ids(),
            partitions=parts,
            transactions=txns,
            hanging=view.hanging(parts, txns),
            groups=view.group_lag(),
            requests=dict(stats.requests),
            errors=dict(stats.errors),
            latency={api: (h.cumulative(), h.total_s) for api, h in stats.latency.items()},
            bytes_in=dict(stats.bytes_in),
            bytes_out=dict(stats.bytes_out),
            produce_waiting=stats.produce_waiting,
            fetch_waiting=stats.fetch_waiting,
            connections_opened=stats.connections_opened,
            connections_closed=stats.connections_closed,
            connections_refused=stats.connections_refused,
            connections_throttled=stats.connections_throttled,
            failed_authentications=stats.failed_authentications,
            cleaner=CleanerFigures(
                cleaner.passes,
                cleaner.bytes_read,
                cleaner.bytes_written,
                cleaner.records_removed,
                cleaner.last_pass_s,
                cleaner.max_pass_s,
                cleaner.uncleanable_count,
            ),
            load_s={"transaction": broker.txn.load_time_s, "group": broker.groups.load_time_s},
            loop=copy.deepcopy(broker.watchdog.figures),
            load_progress={"group": broker.groups.load_progress},
            loading={"transaction": not broker.txn.loaded, "group": not broker.groups.loaded},
            fetch_disk_read_bytes=broker.page_warmer.cold_bytes,
            fetch_cold_plans=stats.fetch_cold_plans,
        )

    def collect(self) -> Iterator[Metric]:
        """prometheus_client's entry point (snapshot and families in one go)."""
        yield from families(self.snapshot())


def metrics_registry(collector: BrokerCollector | Snapshot) -> CollectorRegistry:
    """A registry over the live collector, or over one snapshot (for the encoders)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector if isinstance(collector, BrokerCollector) else _Fixed(collector))
    return registry


class _Fixed(Collector):
    def __init__(self, snap: Snapshot) -> None:
        self._snap = snap

    def collect(self) -> Iterator[Metric]:
        yield from families(self._snap)


def families(snap: Snapshot) -> Iterator[Metric]:
    yield from _transactions(snap)
    yield from _requests(snap)
    yield from _log_cleaner(snap.cleaner)
    yield from _coordinators(snap)
    yield from _groups(snap)
    yield from _event_loop(snap.loop)


# -- transactions and partitions ---------------------------------------------------------


def _transactions(snap: Snapshot) -> Iterable[Metric]:
    now = snap.now_ms
    parts = snap.partitions
    txns = snap.transactions
    hanging = snap.hanging
    yield _gauge(
        "producer_ids",
        "Producer ids with state in any partition. "
        "Kafka: kafka.server:type=ReplicaManager,name=ProducerIdCount.",
        snap.live_producer_ids,
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
        "kind=orphaned, kafka-transactions.sh find-hanging's rule (open in a partition, "
        "idle for longer than transaction.max.timeout.ms, unknown to the coordinator); "
        "the rule of oncelog.hanging, which the console and find-hanging apply too.",
        labels=["kind"],
    )
    hang.add_metric(["overdue"], sum(1 for h in hanging if h.overdue))
    hang.add_metric(["orphaned"], sum(1 for h in hanging if not h.overdue))
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


def _requests(snap: Snapshot) -> Iterable[Metric]:
    requests = CounterMetricFamily(
        PREFIX + "requests",
        "Requests handled, per API. "
        "Kafka: kafka.network:type=RequestMetrics,name=RequestsPerSec,request=<api>.",
        labels=["api"],
    )
    for api, n in sorted(snap.requests.items()):
        requests.add_metric([api], n)
    yield requests
    errors = CounterMetricFamily(
        PREFIX + "request_errors",
        "Requests whose response carried an error (top-level, or a partition's for "
        "Produce and Fetch), per API and error; CLOSED/INTERNAL: the connection was "
        "closed. Kafka: kafka.network:type=RequestMetrics,name=ErrorsPerSec.",
        labels=["api", "error"],
    )
    for (api, error), n in sorted(snap.errors.items()):
        errors.add_metric([api, error], n)
    yield errors
    latency = HistogramMetricFamily(
        PREFIX + "request_duration_seconds",
        "Time from a request's decoding to its response (acks=all produce: until durable). "
        "Kafka: kafka.network:type=RequestMetrics,name=TotalTimeMs,request=<api>.",
        labels=["api"],
    )
    for api, (buckets, total_s) in sorted(snap.latency.items()):
        latency.add_metric([api], buckets, total_s)
    yield latency
    for direction, counts, kafka in (
        ("in", snap.bytes_in, "BytesInPerSec"),
        ("out", snap.bytes_out, "BytesOutPerSec"),
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
    purgatory.add_metric(["produce"], snap.produce_waiting)
    purgatory.add_metric(["fetch"], snap.fetch_waiting)
    yield purgatory
    yield _counter(
        "fetch_disk_read_bytes",
        "Bytes of fetch responses that were not in the page cache: read from disk by the "
        "broker's page-read threads before the send, off the event loop. No Kafka "
        "counterpart (Kafka's network threads read them inside sendfile, KAFKA-7504).",
        snap.fetch_disk_read_bytes,
    )
    yield _counter(
        "fetch_cold_plans",
        "Fetches whose offset index or batch headers were not in the page cache, so their "
        "byte ranges were found by a page-read thread instead of the event loop. No Kafka "
        "counterpart.",
        snap.fetch_cold_plans,
    )
    yield _gauge(
        "connections",
        "Open client connections. Kafka: kafka.server:type=socket-server-metrics,"
        "name=connection-count.",
        snap.connections_opened - snap.connections_closed,
    )
    yield _counter(
        "connections_opened",
        "Client connections accepted. Kafka: socket-server-metrics connection-creation-total.",
        snap.connections_opened,
    )
    yield _counter(
        "connections_closed",
        "Client connections closed. Kafka: socket-server-metrics connection-close-total.",
        snap.connections_closed,
    )
    yield _counter(
        "connections_refused",
        "Connections closed on accept by max.connections or max.connections.per.ip. Kafka: "
        "the connection quotas' TooManyConnectionsException.",
        snap.connections_refused,
    )
    yield _counter(
        "connections_throttled",
        "Connections accepted only after a wait for max.connection.creation.rate. Kafka: "
        "the acceptor's AcceptorBlockedPercent and connection-accept-throttle-time.",
        snap.connections_throttled,
    )
    yield _counter(
        "failed_authentication",
        "Failed SASL authentications and refused TLS handshakes. Kafka: socket-server-metrics "
        "failed-authentication-total.",
        snap.failed_authentications,
    )


# -- log cleaner, coordinators, groups ------------------------------------------------


def _log_cleaner(c: CleanerFigures) -> Iterable[Metric]:
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
    yield _counter("log_cleaner_removed_records", "Records compaction removed.", c.records_removed)
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
        c.uncleanable,
    )


def _coordinators(snap: Snapshot) -> Iterable[Metric]:
    load = GaugeMetricFamily(
        PREFIX + "coordinator_load_seconds",
        "Start-up load time of the coordinator's log. Kafka: kafka.server:type="
        "transaction-coordinator-metrics|group-coordinator-metrics,"
        "name=partition-load-time-max.",
        labels=["coordinator"],
    )
    for name, seconds in snap.load_s.items():
        load.add_metric([name], seconds)
    yield load
    loading = GaugeMetricFamily(
        PREFIX + "coordinator_loading",
        "1 while the coordinator is loading its log (its APIs answer "
        "COORDINATOR_LOAD_IN_PROGRESS), else 0. Kafka: the partition's LOADING state.",
        labels=["coordinator"],
    )
    for name, busy in snap.loading.items():
        loading.add_metric([name], 1.0 if busy else 0.0)
    yield loading
    replayed = GaugeMetricFamily(
        PREFIX + "coordinator_load_records",
        "Records replayed by the coordinator's load under way or last done (state=done), "
        "and the offsets it had to replay when it began (state=total).",
        labels=["coordinator", "state"],
    )
    for name, (done, total) in snap.load_progress.items():
        replayed.add_metric([name, "done"], done)
        replayed.add_metric([name, "total"], total)
    yield replayed


def _groups(snap: Snapshot) -> Iterable[Metric]:
    lag = GaugeMetricFamily(
        PREFIX + "consumer_group_lag_offsets",
        "High watermark minus the group's committed offset (what kafka-consumer-groups.sh "
        "--describe shows as LAG).",
        labels=["group", "topic", "partition"],
    )
    for g in snap.groups:
        lag.add_metric([g.group_id, g.topic, str(g.partition)], g.lag)
    yield lag


def _event_loop(f: LoopFigures) -> Iterable[Metric]:
    lag = HistogramMetricFamily(
        PREFIX + "event_loop_lag_seconds",
        "How late the event loop ran a timer due every 50 ms: while it is late, every "
        "client waits. No Kafka counterpart (network/request handler idle ratios come closest).",
    )
    cumulative, running = [], 0
    for bound, n in zip([*LAG_BUCKETS_S, float("inf")], f.lag_counts, strict=True):
        running += n
        cumulative.append(("+Inf" if bound == float("inf") else str(bound), running))
    lag.add_metric([], cumulative, f.lag_total_s)
    yield lag
    yield _gauge(
        "event_loop_lag_max_seconds", "The longest event-loop lag since start.", f.max_lag_s
    )
    yield _counter(
        "event_loop_stalls",
        "Times the event loop was held longer than oncelog.loop.stall.warn.ms (each is "
        "logged with the stack that held it).",
        f.stalls,
    )
    collections = CounterMetricFamily(
        PREFIX + "gc_collections", "Garbage collections, per generation.", labels=["generation"]
    )
    pauses = CounterMetricFamily(
        PREFIX + "gc_pause_seconds",
        "Time the event loop spent in garbage collections, per generation.",
        labels=["generation"],
    )
    worst = GaugeMetricFamily(
        PREFIX + "gc_pause_max_seconds",
        "The longest garbage collection since start, per generation.",
        labels=["generation"],
    )
    for gen in range(3):
        collections.add_metric([str(gen)], f.gc.collections[gen])
        pauses.add_metric([str(gen)], f.gc.pause_s[gen])
        worst.add_metric([str(gen)], f.gc.max_pause_s[gen])
    yield collections
    yield pauses
    yield worst


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(PREFIX + name, doc, value=value)


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(PREFIX + name, doc, value=value)


# -- the text format ------------------------------------------------------------------------

TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_TEXT_TYPES = {"counter": "counter", "gauge": "gauge", "histogram": "histogram"}


def encode_text(metrics: Iterable[Metric]) -> bytes:
    """Prometheus text format 0.0.4, as ``prometheus_client.generate_latest`` writes it
    but several times faster: label names are ours (valid by construction), so only label
    values and help texts are escaped, and only when they need it."""
    out: list[str] = []
    append = out.append
    for family in metrics:
        name = family.name
        if family.type == "counter":
            name += "_total"
        append(f"# HELP {name} {_escape_help(family.documentation)}\n")
        append(f"# TYPE {name} {_TEXT_TYPES.get(family.type, 'untyped')}\n")
        for sample in family.samples:
            if sample.labels:
                labels = ",".join(f'{k}="{_escape_label(v)}"' for k, v in sample.labels.items())
                append(f"{sample.name}{{{labels}}} {_number(sample.value)}\n")
            else:
                append(f"{sample.name} {_number(sample.value)}\n")
    return "".join(out).encode()


def _escape_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n") if "\\" in text or "\n" in text else text


def _escape_label(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


def _number(value: float) -> str:
    if isinstance(value, int) or value.is_integer():
        return str(int(value))
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(value)
