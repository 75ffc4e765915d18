"""Query-level housekeeping of the exactly-once sink, on the driver: what must happen when a
query starts and when a batch is aborted without the tasks' commit messages.

* **Before a micro-batch's tasks run** (and so when a query starts). Check once that the broker accepts ``transactionTimeoutMs``
  (``transaction.max.timeout.ms``, read with DescribeConfigs), so a bad setting fails the
  query at once with a message naming both settings instead of failing every task with a
  librdkafka error. Then abort every transaction a previous run of this query left open
  (a SIGKILLed driver, a stopped query), except those of the last decided batch, which the
  replay rolls forward. Nothing of an earlier run pins the output's LSO once the query runs.
* **The query id on the driver.** Commit messages carry the query id, but a batch whose
  tasks all failed or were cancelled has none. The driver then reads the id from the
  checkpoint (``<checkpointLocation>/metadata``, written by Spark before the sink exists);
  every transactional id of the query is ``{prefix}-{queryId}-{partition}-{attempt}``.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

from oncelog.client.admin import Admin
from oncelog.client.errors import ClientError
from oncelog.client.transactions import TxnAdmin
from oncelog.spark.decisions import DecisionStore
from oncelog.spark.hooks import trace
from oncelog.spark.options import OncelogOptionError, WriteOptions
from oncelog.spark.pool import pooled_decisions, pooled_txn_admin

log = logging.getLogger("oncelog.spark")

BROKER_TIMEOUT_SETTING = "transaction.max.timeout.ms"
# The PySpark worker module that builds a sink's writer when a query (re)starts planning
# writes; the commit worker (python_streaming_sink_runner) builds it too, for every commit.
_PLANNING_WORKER = "write_into_data_source.py"


def in_write_planning() -> bool:
    """True when called (indirectly) from PySpark's write-planning worker, i.e. while Spark
    sets up a write, before any task of it runs; False in the commit worker and elsewhere."""
    frame: Any = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith(_PLANNING_WORKER):
            return True
        frame = frame.f_back
    return False


def checkpoint_query_id(checkpoint: str | None) -> str | None:
    """The persistent query id Spark stored in ``<checkpoint>/metadata`` (local paths and
    ``file:`` URIs only; None when unknown)."""
    if not checkpoint:
        return None
    path = checkpoint.removeprefix("file://").removeprefix("file:")
    try:
        first = (Path(path) / "metadata").read_text().splitlines()[0]
        value = json.loads(first).get("id")
    except (OSError, IndexError, ValueError, AttributeError):
        return None
    return str(value) if value else None


def broker_max_timeout_ms(admin: Admin) -> int | None:
    """``transaction.max.timeout.ms`` of one broker (DescribeConfigs); None when the broker
    does not say (not authorized, not reported)."""
    try:
        node = admin.broker_ids()[0]
        configs = {c.name: c for c in admin.describe_configs("broker", str(node))}
    except (ClientError, IndexError) as exc:
        log.info(
            "DescribeConfigs of the broker failed (%s): not checking %s",
            exc,
            BROKER_TIMEOUT_SETTING,
        )
        return None
    entry = configs.get(BROKER_TIMEOUT_SETTING)
    if entry is None or entry.value is None:
        return None
    try:
        return int(entry.value)
    except ValueError:
        return None


def check_transaction_timeout(opts: WriteOptions) -> None:
    """Fail early when the broker would refuse the task transactions' timeout."""
    with Admin(opts.client_config) as admin:
        limit = broker_max_timeout_ms(admin)
    if limit is not None and opts.transaction_timeout_ms > limit:
        raise OncelogOptionError(
            f"option 'transactionTimeoutMs' ({opts.transaction_timeout_ms} ms) exceeds the broker's "
            f"{BROKER_TIMEOUT_SETTING} ({limit} ms): set transactionTimeoutMs <= {limit} or raise "
            f"{BROKER_TIMEOUT_SETTING} on the brokers"
        )


def query_prefix(opts: WriteOptions, query_id: str) -> str:
    return f"{opts.transactional_id_prefix}-{query_id}-"


def abort_open_transactions(
    opts: WriteOptions, query_id: str, txns: TxnAdmin, keep: set[str]
) -> list[str]:
    """Abort (fence) every Ongoing transaction of the query whose id is not in keep."""
    from oncelog.spark.commit import cleanup_leftovers

    return cleanup_leftovers(txns, query_prefix(opts, query_id), keep)


def decided_ids(
    opts: WriteOptions, query_id: str, store: DecisionStore, txns: TxnAdmin
) -> set[str]:
    """Transactional ids whose open transaction is the last decided batch's own (same
    producer id and epoch): it may still await the roll-forward. Ids are reused by every
    batch, so an open transaction of a later, undecided batch under the same id is not kept."""
    from oncelog.spark.commit import is_open, transactional_id

    last = store.decided_through()
    decision = store.read(last) if last >= 0 else None
    if decision is None or not decision.entries:
        return set()
    ids = {
        transactional_id(opts.transactional_id_prefix, query_id, e[0], e[1]): e
        for e in decision.entries
    }
    states = txns.describe_many(ids)
    return {tid for tid, e in ids.items() if is_open(states.get(tid), e[2], e[3])}


# (bootstrap, transactionTimeoutMs) already checked against the broker by this process.
_checked: set[tuple[str, int]] = set()


def before_write(opts: WriteOptions, checkpoint: str | None) -> None:
    """Before the tasks of a micro-batch run (Spark plans its write; the previous batch is
    committed): check the broker's timeout limit (once per process), then abort what an
    earlier run of this query left open, except the last decided batch's own transactions.
    In steady state the previous commit left nothing open, so this costs one
    ListTransactions; a restarted query (a SIGKILLed driver, a stopped or failed run)
    cleans up here before it writes."""
    trace("before write")
    checked = (opts.bootstrap, opts.transaction_timeout_ms)
    if checked not in _checked:
        check_transaction_timeout(opts)
        _checked.add(checked)
    query_id = checkpoint_query_id(checkpoint)
    if query_id is None:
        return
    prefix = query_prefix(opts, query_id)
    with pooled_txn_admin(opts.client_config) as txns:
        if not any(
            t.transactional_id.startswith(prefix) for t in txns.list_transactions(("Ongoing",))
        ):
            trace("before write: nothing left open")
            return
        with pooled_decisions(opts.client_config, opts.transactional_id_prefix, query_id) as store:
            keep = decided_ids(opts, query_id, store, txns)
        aborted = abort_open_transactions(opts, query_id, txns, keep)
    trace(f"before write: aborted {len(aborted)} leftover transaction(s) {sorted(aborted)}")
    if aborted:
        log.warning(
            "query %s: aborted %d transaction(s) left open by an earlier run before writing",
            query_id,
            len(aborted),
        )


__all__ = [
    "BROKER_TIMEOUT_SETTING",
    "abort_open_transactions",
    "broker_max_timeout_ms",
    "check_transaction_timeout",
    "checkpoint_query_id",
    "decided_ids",
    "in_write_planning",
    "before_write",
]
