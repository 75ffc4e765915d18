"""Checking a pipeline's output with an independent read_committed consumer."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from oncelog.client.admin import LATEST, Admin
from oncelog.client.config import ClientConfig
from oncelog.client.transactions import OPEN_STATES, TxnAdmin


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def read_topic(
    bootstrap: str, topic: str, *, isolation: str = "read_committed", timeout: float = 120.0
) -> list[Record]:
    """Every record of the topic visible under ``isolation``, up to the current end offsets
    (LSO for read_committed), in partition/offset order."""
    from oncelog.client.consumer import KafkaConsumer

    with Admin(ClientConfig(bootstrap)) as admin:
        n = admin.topics().get(topic, 0)
        tps = [(topic, p) for p in range(n)]
        ends = admin.list_offsets(tps, LATEST, read_committed=isolation == "read_committed")
    pending = {p for (_, p), end in ends.items() if end > 0}
    out: list[Record] = []
    if not pending:
        return out
    c = KafkaConsumer.of(
        ClientConfig(bootstrap),
        **{
            "group.id": "oncelog-verify",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "enable.sparse.connections": False,
        },
    )
    try:
        c.assign([(topic, p, 0) for p in sorted(pending)])
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"reading {topic}: partitions {sorted(pending)} did not reach their end offsets"
                )
            polled = c.consume(10_000, 0.1)
            if polled.errors:
                raise RuntimeError(f"reading {topic}: {polled.errors[0]}")
            for m in polled.records:
                p, offset = m.partition, m.offset
                if offset >= ends[(topic, p)]:
                    pending.discard(p)
                    continue
                if p in pending:
                    out.append(Record(p, offset, m.key, m.value))
            # After the records: a partition's end comes after the records before it.
            for end in polled.ends:
                if end.offset >= ends[(topic, end.partition)]:
                    pending.discard(end.partition)
    finally:
        c.close()
    return sorted(out, key=lambda r: (r.partition, r.offset))


@dataclass
class Verdict:
    records_in: int
    records_out: int
    duplicates: int
    missing: int
    unexpected: int
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.records_in == self.records_out and not (
            self.duplicates or self.missing or self.unexpected
        )

    def line(self) -> str:
        word = "exactly-once verified" if self.ok else "exactly-once VIOLATED"
        text = f"{word}: {self.records_in} in, {self.records_out} out, {self.duplicates} duplicates, {self.missing} missing"
        if self.unexpected:
            text += f", {self.unexpected} unexpected"
        return text


def compare(expected: list[Any], actual: list[Any]) -> Verdict:
    """Multiset comparison: every expected item exactly once, nothing else."""
    want, got = Counter(expected), Counter(actual)
    dups = sum(max(0, got[item] - n) for item, n in want.items())
    missing = sum(max(0, n - got[item]) for item, n in want.items())
    unexpected = sum(n for item, n in got.items() if item not in want)
    examples = [f"duplicate {item!r} x{got[item]}" for item, n in want.items() if got[item] > n][:3]
    examples += [f"missing {item!r}" for item, n in want.items() if got[item] < n][:3]
    examples += [f"unexpected {item!r}" for item in got if item not in want][:3]
    return Verdict(len(expected), len(actual), dups, missing, unexpected, examples)


def order_ids(records: list[Record]) -> list[str]:
    return [json.loads(r.value or b"{}").get("order_id") for r in records]


def window_start(ts_ms: int, window_ms: int) -> int:
    return ts_ms - ts_ms % window_ms


def window_key(customer: str, start_ms: int) -> str:
    """The totals query's key: customer|window start (UTC, second precision)."""
    return f"{customer}|{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(start_ms // 1000))}"


@dataclass
class TotalsVerdict:
    emitted: int
    expected_closed: int
    duplicates: int
    wrong: int
    missing: int
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.duplicates or self.wrong or self.missing)


def check_window_totals(
    orders: list[Record], totals: list[Record], window_ms: int, delay_ms: int
) -> TotalsVerdict:
    """Append-mode window totals: each emitted (customer, window) exactly once and equal to
    the committed input; every window that closed long enough ago emitted."""
    want: dict[str, list[int]] = {}
    ends: dict[str, int] = {}
    max_ts = 0
    for r in orders:
        o = json.loads(r.value or b"{}")
        start = window_start(int(o["ts"]), window_ms)
        key = window_key(o["customer"], start)
        t = want.setdefault(key, [0, 0])
        t[0] += 1
        t[1] += round(o["amount"] * 100)
        ends[key] = start + window_ms
        max_ts = max(max_ts, int(o["ts"]))
    got = Counter((r.key or b"").decode() for r in totals)
    values = {(r.key or b"").decode(): json.loads(r.value or b"{}") for r in totals}
    examples: list[str] = []
    duplicates = sum(n - 1 for n in got.values() if n > 1)
    wrong = 0
    for key, v in values.items():
        exp = want.get(key)
        if exp is None or (int(v["orders"]), int(v["amount_cents"])) != (exp[0], exp[1]):
            wrong += 1
            if len(examples) < 3:
                examples.append(
                    f"total {key}: got {v.get('orders')}/{v.get('amount_cents')}, expected {exp}"
                )
    # A window is final once the watermark (max event time - delay) passes its end; allow
    # one window of slack for the last watermark update.
    closed = {k for k, end in ends.items() if end + window_ms <= max_ts - delay_ms}
    missing = len(closed - set(values))
    examples += [f"missing total {k}" for k in sorted(closed - set(values))[:3]]
    return TotalsVerdict(len(totals), len(closed), duplicates, wrong, missing, examples)


def open_transactions(bootstrap: str, id_prefix: str) -> list[str]:
    with TxnAdmin(ClientConfig(bootstrap)) as txns:
        return [
            t.transactional_id
            for t in txns.list_transactions(OPEN_STATES)
            if t.transactional_id.startswith(id_prefix)
        ]


def stable(bootstrap: str, topic: str) -> bool:
    """LSO == high watermark on every partition: no open transaction pins the topic."""
    with Admin(ClientConfig(bootstrap)) as admin:
        tps = [(topic, p) for p in range(admin.topics().get(topic, 0))]
        return admin.list_offsets(tps, LATEST, read_committed=True) == admin.list_offsets(
            tps, LATEST, read_committed=False
        )
