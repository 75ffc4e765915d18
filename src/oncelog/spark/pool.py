"""Clients reused across micro-batches within one Python worker.

Spark reuses its Python workers (``spark.python.worker.reuse``, on by default), so a
worker runs task after task of a query. Creating a librdkafka client costs a connection, an
ApiVersions exchange and a Metadata round trip per broker; per range and per task per
micro-batch that is most of a small batch's cost. The pool keeps idle clients keyed by
their full configuration:

* only clients that are safe to share between tasks: assigned consumers (unassigned before
  they go back), the protocol client for transaction calls, the decision store's consumer,
  idempotent (at-least-once) producers. The driver's commit worker, which Spark keeps for
  the whole query, reuses its transaction client and decision store the same way. Transactional producers are never pooled: the
  driver completes their transactions, after which a producer instance is stale;
* bounded (:data:`MAX_IDLE` idle clients, or ``ONCELOG_SPARK_POOL_MAX_IDLE``; the least
  recently used is closed first; 0 disables reuse);
* a client whose use raised is closed, never returned;
* everything idle is closed when the worker exits (``atexit``).
"""

from __future__ import annotations

import atexit
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from oncelog.client.config import ClientConfig

# TxnAdmin and DecisionStore (the protocol client's message schemas, ~60 ms to import) are
# imported by the functions that pool them: a streaming query's source process reads
# through this pool and never needs either.

T = TypeVar("T")

MAX_IDLE = 8
POOL_ENV = "ONCELOG_SPARK_POOL_MAX_IDLE"  # 0 disables reuse (benchmarks: before/after)


class ClientPool:
    def __init__(self, max_idle: int = MAX_IDLE) -> None:
        self.max_idle = max_idle
        self._idle: OrderedDict[int, tuple[Hashable, Any, Callable[[], None]]] = OrderedDict()
        self._lock = threading.Lock()
        self._next = 0
        self.created = 0  # for tests and benchmarks
        self.reused = 0

    def take(self, key: Hashable, create: Callable[[], T]) -> T:
        with self._lock:
            for slot, (k, client, _) in reversed(self._idle.items()):
                if k == key:
                    del self._idle[slot]
                    self.reused += 1
                    return client  # type: ignore[no-any-return]
            self.created += 1
        return create()

    def give(self, key: Hashable, client: Any, close: Callable[[], None]) -> None:
        evicted: list[Callable[[], None]] = []
        with self._lock:
            self._next += 1
            self._idle[self._next] = (key, client, close)
            while len(self._idle) > self.max_idle:
                evicted.append(self._idle.popitem(last=False)[1][2])
        for fn in evicted:
            _quietly(fn)

    def close_all(self) -> None:
        with self._lock:
            closers = [c for _, _, c in self._idle.values()]
            self._idle.clear()
        for fn in closers:
            _quietly(fn)

    def __len__(self) -> int:
        return len(self._idle)


def _quietly(fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001, S110 - closing an idle client at eviction or exit
        pass


POOL = ClientPool(int(os.environ.get(POOL_ENV, MAX_IDLE)))
atexit.register(POOL.close_all)


@contextmanager
def pooled(
    key: Hashable,
    create: Callable[[], T],
    close: Callable[[T], None],
    reset: Callable[[T], None] | None = None,
) -> Iterator[T]:
    """A client from the pool (or a new one); back to the pool after a clean use (after
    ``reset``), closed after an exception (including GeneratorExit of an abandoned read)."""
    client = POOL.take(key, create)
    try:
        yield client
    except BaseException:
        _quietly(lambda: close(client))
        raise
    try:
        if reset is not None:
            reset(client)
    except Exception:  # noqa: BLE001 - a client that cannot be reset is not reused
        _quietly(lambda: close(client))
        return
    POOL.give(key, client, lambda: close(client))


def config_key(kind: str, conf: dict[str, Any]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """A hashable key of a client configuration (callables by identity of their names)."""
    return kind, tuple(sorted((str(k), repr(v)) for k, v in conf.items()))


def pooled_txn_admin(config: ClientConfig, factory: Callable[..., Any] | None = None) -> Any:
    """A pooled protocol client for transaction calls (DescribeTransactions, ...), a
    TxnAdmin unless ``factory`` says otherwise. The key names the factory too, so clients of
    another kind never stand in for it."""
    if factory is None:
        from oncelog.client.transactions import TxnAdmin

        factory = TxnAdmin
    return pooled(("txn-admin", repr(config), factory), lambda: factory(config), _close)


def pooled_decisions(
    config: ClientConfig,
    prefix: str,
    query_id: str,
    factory: Callable[..., Any] | None = None,
) -> Any:
    """A pooled decision store of one query: executors read it before each task, and the
    driver's commit worker (one process per query, kept between micro-batches) writes it."""
    if factory is None:
        from oncelog.spark.decisions import DecisionStore

        factory = DecisionStore
    return pooled(
        ("decisions", repr(config), prefix, query_id, factory),
        lambda: factory(config, prefix, query_id),
        _close,
    )


def _close(client: Any) -> None:
    client.close()
