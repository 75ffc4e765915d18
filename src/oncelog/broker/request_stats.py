"""Hot-path counters the metrics endpoint reads at scrape time.

Plain ints and lists, no locks and no Prometheus objects: one request, one produced or
fetched partition costs a few dict increments. Everything runs on the broker's event loop,
so nothing here needs to be thread-safe. The Prometheus families are built from these
values only when someone scrapes (``oncelog.broker.metrics``).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict

# Request latency buckets, seconds (Kafka's TotalTimeMs spans sub-millisecond to seconds).
LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)


class LatencyHistogram:
    __slots__ = ("counts", "total_s")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS_S) + 1)  # the last one is +Inf
        self.total_s = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(LATENCY_BUCKETS_S, seconds)] += 1
        self.total_s += seconds

    def cumulative(self) -> list[tuple[str, float]]:
        """Prometheus buckets: (upper bound, observations at or below it)."""
        out: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip((*LATENCY_BUCKETS_S, float("inf")), self.counts, strict=True):
            running += count
            out.append(("+Inf" if bound == float("inf") else repr(bound), float(running)))
        return out


class RequestStats:
    def __init__(self) -> None:
        self.requests: defaultdict[str, int] = defaultdict(int)  # API name -> requests
        self.errors: defaultdict[tuple[str, str], int] = defaultdict(int)  # (API, error) -> n
        self.latency: defaultdict[str, LatencyHistogram] = defaultdict(LatencyHistogram)
        self.bytes_in: defaultdict[str, int] = defaultdict(int)  # topic -> produced bytes
        self.bytes_out: defaultdict[str, int] = defaultdict(int)  # topic -> fetched bytes
        self.connections_opened = 0
        self.connections_refused = 0  # by a connection limit (connection_quotas)
        self.connections_throttled = 0  # accepted late by max.connection.creation.rate
        self.failed_authentications = 0  # SASL, and TLS handshakes refused
        self.connections_closed = 0
        self.produce_waiting = 0  # acks=all produces waiting for their fdatasync
        self.fetch_waiting = 0  # fetches parked until data arrives or max.wait.ms passes
        self.fetch_cold_plans = 0  # fetches whose ranges were found off the loop (cold)

    def request_done(self, api: str, seconds: float, errors: set[str] | None = None) -> None:
        self.requests[api] += 1
        self.latency[api].observe(seconds)
        if errors:
            for name in errors:
                self.errors[(api, name)] += 1

    @property
    def connections(self) -> int:
        return self.connections_opened - self.connections_closed


def response_errors(response: object) -> set[str] | None:
    """Error names a response carries: its top-level code and, for Produce and Fetch, each
    partition's (a walk over partitions, never records). Other APIs' per-item codes are
    not counted."""
    found: set[str] | None = None
    code = getattr(response, "error_code", None)
    if code is not None and code != 0:
        found = {_error_name(code)}
    for topic in getattr(response, "responses", ()):
        parts = getattr(topic, "partition_responses", None) or getattr(topic, "partitions", ())
        for part in parts or ():
            code = getattr(part, "error_code", 0)
            if code != 0:
                if found is None:
                    found = set()
                found.add(_error_name(code))
    return found


def _error_name(code: object) -> str:
    name = getattr(code, "name", None)
    return str(name).upper() if name is not None else str(code)
