"""Jepsen-style history check (oncelog.testing.history) against the broker: transactional
writers commit and abort at random and are replaced mid-transaction (the new instance fences
the old one), while read_committed consumers of one subscribed group come and go
(rebalances); then one complete read_committed read. No anomaly may show.

Run with transaction version 1 (librdkafka's producer) and 2 (the raw TV2 producer) on the
default broker (which finalizes TV2: a TV1 client keeps working there), each with the classic
and the KIP-848 consumer group protocol (librdkafka group.protocol).
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer

from oncelog.client.admin import LATEST, Admin
from oncelog.client.config import ClientConfig
from oncelog.embedded import EmbeddedBroker
from oncelog.testing.history import Outcome, Poll, Txn, check
from oncelog.testing.raw_txn import RawTransactionalProducer
from oncelog.testing.verify import read_topic

from .helpers import create_topic

pytestmark = pytest.mark.xdist_group("timing")

TOPIC = "history"
PARTS = 3
WRITERS = 2
WRITE_S = 10.0  # how long the writers run
REPLACE_EVERY = 12  # a writer abandons every 12th transaction open and is replaced


class Writer(threading.Thread):
    """Transactions of 1-4 unique values to random partitions; a third aborted. Every
    REPLACE_EVERY-th one is left open and a new instance of the producer (same
    transactional id) takes over: its InitProducerId aborts the transaction."""

    def __init__(self, bootstrap: str, name: str, tv: int, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.name, self.tv, self.stop = bootstrap, name, tv, stop
        self.txns: list[Txn] = []
        self.epoch_runs: list[list[tuple[int, int]]] = []  # TV2: each instance's history
        self.error: BaseException | None = None
        self.rng = random.Random(name)

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.instance()
            if self.txns and self.txns[-1].number % REPLACE_EVERY == REPLACE_EVERY - 1:
                # The last instance left its transaction open: a last one aborts it (else it
                # would pin the LSO until it times out, hiding what others committed after).
                self.instance_that_only_inits()
        except BaseException as exc:  # reported by the test
            self.error = exc

    def instance_that_only_inits(self) -> None:
        _, _, close = self.tv2_client() if self.tv == 2 else self.tv1_client()
        close()

    def instance(self) -> None:
        send, end, close = self.tv2_client() if self.tv == 2 else self.tv1_client()
        try:
            while not self.stop.is_set():
                t = Txn(self.name, len(self.txns))
                self.txns.append(t)
                for i in range(self.rng.randint(1, 4)):
                    partition = self.rng.randrange(PARTS)
                    value = b"%s-%d-%d" % (self.name.encode(), t.number, i)
                    t.sends.append((partition, value, None))
                send(t)
                if t.number % REPLACE_EVERY == REPLACE_EVERY - 1:
                    t.outcome = Outcome.ABORTED  # the next instance's InitProducerId aborts it
                    return
                if self.rng.random() < 1 / 3:
                    end(False)
                    t.outcome = Outcome.ABORTED
                else:
                    t.commit_asked_at = time.monotonic()
                    end(True)
                    t.outcome = Outcome.COMMITTED
        finally:
            close()

    def tv1_client(
        self,
    ) -> tuple[Callable[[Txn], None], Callable[[bool], None], Callable[[], None]]:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": self.name,
                "linger.ms": 2,
                "transaction.timeout.ms": 30000,
            }
        )
        producer.init_transactions(30)

        def send(t: Txn) -> None:
            producer.begin_transaction()
            for i, (partition, value, _) in enumerate(t.sends):

                def acked(err, msg, i=i):  # type: ignore[no-untyped-def]
                    if err is None:
                        t.sends[i] = (msg.partition(), msg.value(), msg.offset())

                producer.produce(TOPIC, value=value, partition=partition, on_delivery=acked)
            # abort_transaction() purges what is unsent: flush, so aborted records reach
            # the broker and the check has something to catch.
            assert producer.flush(30) == 0

        def end(commit: bool) -> None:
            (producer.commit_transaction if commit else producer.abort_transaction)(30)

        return send, end, lambda: None  # librdkafka's handle goes with the object

    def tv2_client(
        self,
    ) -> tuple[Callable[[Txn], None], Callable[[bool], None], Callable[[], None]]:
        producer = RawTransactionalProducer(self.bootstrap, self.name)
        producer.init_transactions()
        self.epoch_runs.append(producer.history)

        def send(t: Txn) -> None:
            producer.begin_transaction()
            for i, (partition, value, _) in enumerate(t.sends):
                t.sends[i] = (partition, value, producer.send(TOPIC, partition, [(None, value)]))

        def end(commit: bool) -> None:
            (producer.commit_transaction if commit else producer.abort_transaction)()

        return send, end, producer.close


def wait_for_markers(
    bootstrap: str, timeout: float = 60.0, *, topic: str = TOPIC, parts: int = PARTS
) -> None:
    tps = [(topic, p) for p in range(parts)]
    deadline = time.monotonic() + timeout
    with Admin(ClientConfig(bootstrap)) as admin:
        while True:
            hw = admin.list_offsets(tps, LATEST)
            lso = admin.list_offsets(tps, LATEST, read_committed=True)
            if lso == hw:
                return
            assert time.monotonic() < deadline, f"LSO {lso} never reached HW {hw}"
            time.sleep(0.1)


class Reader(threading.Thread):
    """A read_committed member of the group, committing what it polled; each partition
    assigned to it starts a new session."""

    sessions = itertools.count(1)

    def __init__(self, bootstrap: str, name: str, protocol: str, polls: list[Poll]) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.name, self.protocol, self.polls = bootstrap, name, protocol, polls
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        classic = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "history-readers",
                "group.protocol": self.protocol,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                **(classic if self.protocol == "classic" else {}),
            }
        )
        session: dict[int, int] = {}

        def on_assign(consumer, partitions):  # type: ignore[no-untyped-def]
            for tp in partitions:
                session[tp.partition] = next(Reader.sessions)

        try:
            c.subscribe([TOPIC], on_assign=on_assign)
            while not self.stop.is_set():
                msgs = [m for m in c.consume(200, 0.2) if not m.error()]
                now = time.monotonic()
                for m in msgs:
                    p = m.partition()
                    self.polls.append(Poll(self.name, session[p], p, m.offset(), m.value(), now))
                if msgs:
                    try:
                        c.commit(asynchronous=False)
                    except KafkaException:
                        pass  # a rebalance under way: the next owner re-reads (new session)
        except BaseException as exc:
            self.error = exc
        finally:
            c.close()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
@pytest.mark.parametrize("tv", [1, 2], ids=["tv1", "tv2"])
def test_no_anomaly_in_the_history(tmp_path: Path, tv: int, protocol: str) -> None:
    settings = {
        "group.initial.rebalance.delay.ms": "0",
        "group.consumer.heartbeat.interval.ms": "300",
    }
    polls: list[Poll] = []
    with EmbeddedBroker(tmp_path / "data", settings=settings) as broker:
        create_topic(broker.bootstrap, TOPIC, PARTS)
        stop = threading.Event()
        writers = [Writer(broker.bootstrap, f"w{i}", tv, stop) for i in range(WRITERS)]
        readers = [Reader(broker.bootstrap, "r0", protocol, polls)]
        for t in (*writers, *readers):
            t.start()
        # Members join and leave while the writers run: rebalances.
        time.sleep(WRITE_S * 0.3)
        readers.append(Reader(broker.bootstrap, "r1", protocol, polls))
        readers[-1].start()
        time.sleep(WRITE_S * 0.3)
        readers.append(Reader(broker.bootstrap, "r2", protocol, polls))
        readers[-1].start()
        readers[1].stop.set()
        time.sleep(WRITE_S * 0.4)
        stop.set()
        for w in writers:
            w.join(60)
            assert w.error is None and not w.is_alive(), w.error
        # A commit is acknowledged once decided; its markers follow. Read once every
        # partition's LSO has reached its high watermark, or the read (which stops at the
        # LSO) would miss the end of a committed transaction whose markers are on the way.
        wait_for_markers(broker.bootstrap)
        final = {p: [] for p in range(PARTS)}  # type: dict[int, list[tuple[int, bytes]]]
        for r in read_topic(broker.bootstrap, TOPIC):
            assert r.value is not None
            final[r.partition].append((r.offset, r.value))
        dirty: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTS)}
        for r in read_topic(broker.bootstrap, TOPIC, isolation="read_uncommitted"):
            assert r.value is not None
            dirty[r.partition].append((r.offset, r.value))
        visible = {v for records in final.values() for _, v in records}
        deadline = time.monotonic() + 60
        while not visible <= {x.value for x in polls} and time.monotonic() < deadline:
            time.sleep(0.2)
        for r in readers:
            r.stop.set()
            r.join(30)
            assert r.error is None, r.error
    txns = [t for w in writers for t in w.txns]
    found = check(txns, polls, final)
    assert found == {}, {kind: items[:5] for kind, items in found.items()}
    # The group consumed everything committed (at least once, across the rebalances).
    assert visible == {x.value for x in polls}
    committed = [t for t in txns if t.outcome is Outcome.COMMITTED]
    aborted = [t for t in txns if t.outcome is Outcome.ABORTED]
    assert visible == {v for t in committed for _, v, _ in t.sends}
    assert len(committed) >= 20 and len(aborted) >= 10, (len(committed), len(aborted))
    assert all(t.outcome is not Outcome.UNKNOWN for t in txns)
    # The check has teeth on this history: the aborted records are in the log, and taking
    # the read_uncommitted read for the final one shows them as aborted reads.
    assert len(check(txns, polls, dirty)["aborted-read"]) >= len(aborted)
    assert len({x.session for x in polls}) > PARTS  # partitions did move between members
    if tv == 2:
        # TV2 really ran: each instance's epoch went up by one per ended transaction.
        for w in writers:
            assert len(w.epoch_runs) >= 2  # replaced at least once
            for run in w.epoch_runs:
                epochs = [e for _, e in run]
                assert epochs == list(range(epochs[0], epochs[0] + len(epochs))), epochs
