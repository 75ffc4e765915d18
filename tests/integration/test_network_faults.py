"""Network faults between real clients and the broker, through oncelog.testing.fault_proxy.

The broker advertises the proxy, so every client connection goes through it. The proxy
drops responses after their requests reached the broker (the request took effect, the
client never learns it), sometimes resetting the connection too, holds requests past the
client's timeout and delivers them late, and adds latency. Nothing committed may be lost,
nothing duplicated, nothing aborted read, each producer's order kept, and no transaction
may linger (LSO == high watermark at the end): the rules of the Jepsen-style checker
(oncelog.testing.history).

A lost Produce response followed by an abort is the case that lost committed data while
the broker answered DUPLICATE_SEQUENCE_NUMBER to a different batch reusing a sequence:
Kafka answers OUT_OF_ORDER_SEQUENCE_NUMBER (ProducerAppendInfo.checkSequence).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from oncelog.protocol.api_keys import ApiKey
from oncelog.testing.history import Outcome, Poll, Txn, check
from oncelog.testing.pytest_plugin import FAST_START, BrokerBehindProxy, broker_behind_proxy
from oncelog.testing.raw_txn import RawTransactionalProducer
from oncelog.testing.verify import read_topic

from .helpers import create_topic, produce
from .test_history_check import wait_for_markers

SLOW = bool(os.environ.get("ONCELOG_SLOW"))
PARTS = 3
# librdkafka gives up on a request after this long and retries it (on a new connection):
# short, so a dropped response costs the test seconds, not the default 30-60.
FAST_TIMEOUTS = {"socket.timeout.ms": 1500, "request.timeout.ms": 1500}
TXN_APIS = (
    ApiKey.PRODUCE,
    ApiKey.ADD_PARTITIONS_TO_TXN,
    ApiKey.ADD_OFFSETS_TO_TXN,
    ApiKey.TXN_OFFSET_COMMIT,
    ApiKey.END_TXN,
)


@pytest.fixture
def behind_proxy(tmp_path: Path) -> Iterator[BrokerBehindProxy]:
    settings = {
        **FAST_START,
        "group.initial.rebalance.delay.ms": "0",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    }
    pair = broker_behind_proxy(tmp_path / "broker", settings, seed=7)
    try:
        yield pair
    finally:
        pair.proxy.close()
        pair.broker.stop()


def final_read(bootstrap: str, topic: str) -> dict[int, list[tuple[int, bytes]]]:
    final: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTS)}
    for r in read_topic(bootstrap, topic):
        assert r.value is not None
        final[r.partition].append((r.offset, r.value))
    return final


# -- idempotent producers --------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_idempotent_producers_keep_every_acknowledged_value(
    behind_proxy: BrokerBehindProxy,
) -> None:
    proxy, direct = behind_proxy.proxy, behind_proxy.broker.bootstrap
    create_topic(direct, "idem", PARTS)
    per_producer = 6000 if SLOW else 1500
    proxy.latency(2, 2, for_s=120)
    proxy.drop_responses(0.15, for_s=120)
    acked: dict[str, list[tuple[int, int, bytes]]] = defaultdict(list)
    errors: list[str] = []

    def run(name: str) -> None:
        p = Producer(
            {
                "bootstrap.servers": behind_proxy.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "batch.num.messages": 50,
                **FAST_TIMEOUTS,
            }
        )

        def cb(err, msg):  # type: ignore[no-untyped-def]
            if err is not None:
                errors.append(f"{name}: {err}")
            else:
                acked[name].append((msg.partition(), msg.offset(), msg.value()))

        for i in range(per_producer):
            p.produce("idem", value=b"%s-%d" % (name.encode(), i), partition=i % PARTS,
                      on_delivery=cb)  # fmt: skip
            if i % 50 == 49:
                p.poll(0.01)
                if i % 500 == 499:  # a drop now and then also cuts the connection
                    proxy.drop_responses(0.15, for_s=120, then_reset=(i // 500) % 2 == 1)
        assert p.flush(120) == 0

    threads = [threading.Thread(target=run, args=(f"p{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(240)
    proxy.clear()
    assert not errors, errors[:5]
    assert proxy.counts["dropped"] >= 3, dict(proxy.counts)
    final = final_read(direct, "idem")
    where = {v: (p, o) for p, records in final.items() for o, v in records}
    values = [v for records in final.values() for _, v in records]
    assert len(values) == len(set(values)) == 2 * per_producer, "lost or duplicated values"
    for name, items in acked.items():
        assert len(items) == per_producer
        for partition, offset, value in items:
            assert where[value] == (partition, offset), f"{value!r} acknowledged elsewhere"
        for partition in range(PARTS):
            # Per-producer order: sent in i order, so offsets rise with i.
            sent = sorted((int(v.split(b"-")[1]), where[v][1])
                          for p, _, v in items if p == partition)  # fmt: skip
            offsets = [o for _, o in sent]
            assert offsets == sorted(offsets), f"{name} out of order on {partition}"


# -- transactional producers (Jepsen-style history) ------------------------------------------


class TxnWriter(threading.Thread):
    """Transactions of 1-4 unique values to random partitions, a third aborted, through
    the proxy. A fatal error leaves the transaction's outcome unknown and a new instance
    (same transactional id) takes over; an abortable one aborts it."""

    def __init__(self, bootstrap: str, name: str, tv: int, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.name, self.tv, self.stop = bootstrap, name, tv, stop
        self.txns: list[Txn] = []
        self.errors: list[str] = []  # client errors met (expected under faults)
        self.error: BaseException | None = None
        self.rng = random.Random(name)

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                if self.tv == 1:
                    self.tv1_instance()
                else:
                    self.tv2_instance()
        except BaseException as exc:  # reported by the test
            self.error = exc

    def new_txn(self) -> Txn:
        t = Txn(self.name, len(self.txns))
        self.txns.append(t)
        for i in range(self.rng.randint(1, 4)):
            value = b"%s-%d-%d" % (self.name.encode(), t.number, i)
            t.sends.append((self.rng.randrange(PARTS), value, None))
        return t

    def tv1_instance(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": self.name,
                "linger.ms": 2,
                "transaction.timeout.ms": 20000,
                "message.timeout.ms": 20000,
                **FAST_TIMEOUTS,
            }
        )
        producer.init_transactions(60)
        while not self.stop.is_set():
            t = self.new_txn()
            try:
                producer.begin_transaction()
                for i, (partition, value, _) in enumerate(t.sends):

                    def acked(err, msg, i=i, t=t):  # type: ignore[no-untyped-def]
                        if err is None:
                            t.sends[i] = (msg.partition(), msg.value(), msg.offset())

                    producer.produce("txn", value=value, partition=partition, on_delivery=acked)
                if self.rng.random() < 1 / 3:
                    # Abort with the batches sent but maybe unanswered (an answer the proxy
                    # dropped): the next transaction is where librdkafka reuses their
                    # sequences. Or after a flush, so aborted records reach the broker.
                    if self.rng.random() < 0.5:
                        producer.poll(0.05)
                    else:
                        producer.flush(30)
                    producer.abort_transaction(60)
                    t.outcome = Outcome.ABORTED
                    continue
                producer.flush(30)
                t.commit_asked_at = time.monotonic()
                self.commit(producer)
                t.outcome = Outcome.COMMITTED
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                self.errors.append(str(err))
                if err.fatal() or not err.txn_requires_abort():
                    return  # outcome unknown; the next instance's InitProducerId fences us
                try:
                    producer.abort_transaction(60)
                    t.outcome = Outcome.ABORTED
                except KafkaException as again:
                    self.errors.append(f"abort: {again.args[0]}")
                    return

    def commit(self, producer: Producer) -> None:
        for _ in range(30):
            try:
                producer.commit_transaction(60)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable():
                    raise
                self.errors.append(str(exc.args[0]))
                time.sleep(0.1)
        raise AssertionError("commit_transaction kept failing")

    def tv2_instance(self) -> None:
        producer = RawTransactionalProducer(self.bootstrap, self.name, request_timeout=1.5)
        try:
            producer.init_transactions()
            while not self.stop.is_set():
                t = self.new_txn()
                producer.begin_transaction()
                for i, (partition, value, _) in enumerate(t.sends):
                    t.sends[i] = (
                        partition,
                        value,
                        producer.send("txn", partition, [(None, value)]),
                    )
                if self.rng.random() < 1 / 3:
                    producer.abort_transaction()
                    t.outcome = Outcome.ABORTED
                else:
                    t.commit_asked_at = time.monotonic()
                    producer.commit_transaction()
                    t.outcome = Outcome.COMMITTED
        except Exception as exc:  # outcome unknown; a new instance fences this one
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            producer.close()


class Poller(threading.Thread):
    """A read_committed consumer of every partition, through the proxy."""

    def __init__(self, bootstrap: str, polls: list[Poll]) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.polls = bootstrap, polls
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "fault-poller",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "socket.timeout.ms": FAST_TIMEOUTS["socket.timeout.ms"],
            }
        )
        try:
            c.assign([TopicPartition("txn", p, 0) for p in range(PARTS)])
            while not self.stop.is_set():
                msgs = [m for m in c.consume(200, 0.2) if not m.error()]
                now = time.monotonic()
                for m in msgs:
                    self.polls.append(Poll("poller", 1, m.partition(), m.offset(), m.value(), now))
        except BaseException as exc:
            self.error = exc
        finally:
            c.close()


def run_history(behind_proxy: BrokerBehindProxy, tv: int, write_s: float) -> None:
    proxy, direct = behind_proxy.proxy, behind_proxy.broker.bootstrap
    create_topic(direct, "txn", PARTS)
    polls: list[Poll] = []
    stop = threading.Event()
    writers = [TxnWriter(behind_proxy.bootstrap, f"w{i}", tv, stop) for i in range(2)]
    poller = Poller(behind_proxy.bootstrap, polls)
    proxy.latency(1, 1, for_s=write_s)
    proxy.drop_responses(0.08, for_s=write_s, api_keys=TXN_APIS)
    for t in (*writers, poller):
        t.start()
    half = write_s / 2
    time.sleep(half)
    # Second half: dropped answers also cut the connection; TV2 also sees late requests
    # (KIP-890 fences them; under TV1 a late EndTxn can commit the next transaction,
    # KAFKA-17754, so TV1 gets no held EndTxn).
    proxy.drop_responses(0.08, for_s=half, api_keys=TXN_APIS, then_reset=True)
    if tv == 2:
        proxy.hold_requests(0.02, hold_s=2.5, for_s=half,
                            api_keys=(ApiKey.PRODUCE, ApiKey.END_TXN))  # fmt: skip
    time.sleep(half)

    def outcomes(kind: Outcome) -> int:
        return sum(1 for w in writers for t in list(w.txns) if t.outcome is kind)

    # A loaded machine (the whole suite in parallel) may not get through enough
    # transactions in write_s: keep the second half's faults on, up to twice as long again,
    # until the history is long enough to mean something.
    extended = 0.0
    while (outcomes(Outcome.COMMITTED) < 8 or outcomes(Outcome.ABORTED) < 3) and (
        extended < 2 * write_s
    ):
        proxy.latency(1, 1, for_s=half)
        proxy.drop_responses(0.08, for_s=half, api_keys=TXN_APIS, then_reset=True)
        if tv == 2:
            proxy.hold_requests(0.02, hold_s=2.5, for_s=half,
                                api_keys=(ApiKey.PRODUCE, ApiKey.END_TXN))  # fmt: skip
        time.sleep(half)
        extended += half
    stop.set()
    proxy.clear()
    for w in writers:
        w.join(120)
        assert w.error is None and not w.is_alive(), w.error
    # No transaction lingers: a commit is acknowledged once decided and its markers follow;
    # an abandoned one is aborted by the next instance (or at its timeout).
    wait_for_markers(direct, topic="txn", parts=PARTS, timeout=60)
    final = final_read(direct, "txn")
    visible = {v for records in final.values() for _, v in records}
    deadline = time.monotonic() + 30
    while not visible <= {x.value for x in polls} and time.monotonic() < deadline:
        time.sleep(0.2)
    poller.stop.set()
    poller.join(30)
    assert poller.error is None, poller.error
    txns = [t for w in writers for t in w.txns]
    found = check(txns, polls, final)
    detail = f"proxy {dict(proxy.counts)}; client errors {[w.errors[:5] for w in writers]}"
    assert found == {}, f"{ {kind: items[:5] for kind, items in found.items()} }; {detail}"
    committed = [t for t in txns if t.outcome is Outcome.COMMITTED]
    aborted = [t for t in txns if t.outcome is Outcome.ABORTED]
    assert len(committed) >= 8 and len(aborted) >= 3, (len(committed), len(aborted), detail)
    assert proxy.counts["dropped"] >= 3, detail


@pytest.mark.timeout(300)
@pytest.mark.parametrize("tv", [1, 2], ids=["tv1", "tv2"])
def test_transactional_history_through_lost_responses(
    behind_proxy: BrokerBehindProxy, tv: int
) -> None:
    run_history(behind_proxy, tv, write_s=12.0)


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("tv", [1, 2], ids=["tv1", "tv2"])
def test_transactional_history_through_lost_responses_long(
    behind_proxy: BrokerBehindProxy, tv: int
) -> None:
    run_history(behind_proxy, tv, write_s=120.0)


# -- a transactional copier ------------------------------------------------------------------

COPIER = str(Path(__file__).parent / "apps" / "copier.py")


@pytest.mark.timeout(400)
def test_transactional_copier_through_lost_responses(
    behind_proxy: BrokerBehindProxy, tmp_path: Path
) -> None:
    proxy, direct = behind_proxy.proxy, behind_proxy.broker.bootstrap
    n = 30_000 if SLOW else 3000
    create_topic(direct, "input", PARTS)
    create_topic(direct, "output", PARTS)
    produce(direct, "input", [(None, b"%d" % i, i % PARTS) for i in range(n)])
    proxy.drop_responses(0.1, for_s=240, api_keys=TXN_APIS)
    config = [f"--client-config={k}={v}" for k, v in FAST_TIMEOUTS.items()]
    copiers: dict[int, subprocess.Popen[bytes]] = {}

    def start(p: int) -> subprocess.Popen[bytes]:
        log = open(tmp_path / f"copier-{p}.log", "ab")  # noqa: SIM115 - owned by the child
        return subprocess.Popen(
            [sys.executable, COPIER, "--bootstrap", behind_proxy.bootstrap, "--input", "input",
             "--output", "output", "--partition", str(p), "--group", "copiers",
             "--batch", "100", "--seed", str(p + 1), *config],
            stdout=log, stderr=log,
        )  # fmt: skip

    try:
        copiers = {p: start(p) for p in range(PARTS)}
        restarts = []
        deadline = time.monotonic() + (600 if SLOW else 240)
        while time.monotonic() < deadline:
            for p, proc in list(copiers.items()):
                code = proc.poll()
                if code not in (None, 0):
                    restarts.append((p, code))  # a fatal client error: start it again
                    copiers[p] = start(p)
            if all(proc.poll() == 0 for proc in copiers.values()):
                break
            time.sleep(0.2)
        logs = "\n".join((tmp_path / f"copier-{p}.log").read_text()[-2000:] for p in range(PARTS))
        assert all(proc.poll() == 0 for proc in copiers.values()), logs
    finally:
        for proc in copiers.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    proxy.clear()
    assert proxy.counts["dropped"] >= 3, dict(proxy.counts)
    wait_for_markers(direct, topic="output", parts=PARTS, timeout=60)
    final = final_read(direct, "output")
    for p in range(PARTS):
        got = [v for _, v in final[p]]
        assert got == [b"%d" % i for i in range(p, n, PARTS)], (
            f"output partition {p}: {len(got)} records, {len(set(got))} distinct "
            f"(restarts {restarts}, proxy {dict(proxy.counts)})"
        )
