"""Every metric docs/grafana-dashboard.json queries has samples in a real scrape of a broker
with traffic (produce, a transaction, a read_committed consumer group, an error), and every
metric family the broker exports is listed in docs/metrics.md."""

from __future__ import annotations

import re
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from oncelog.client.config import ClientConfig
from oncelog.client.transactions import TxnAdmin
from oncelog.embedded import EmbeddedBroker

from ..unit.test_grafana_dashboard import DOCS, METRIC, queried_metrics
from .helpers import create_topic, produce
from .metrics_scrape import scrape
from .test_transactions import txn_producer


def test_dashboard_queries_exist_in_a_real_scrape(tmp_path: Path, topic_name: str) -> None:
    b = EmbeddedBroker(
        tmp_path / "data", settings={"metrics.listener": "http://127.0.0.1:0"}
    ).start()
    try:
        assert b.http_url is not None
        create_topic(b.bootstrap, topic_name, 1)
        produce(b.bootstrap, topic_name, [(None, b"v", 0)] * 5)
        p = txn_producer(b.bootstrap, "dash-txn")
        p.begin_transaction()
        p.produce(topic_name, value=b"t", partition=0)
        p.flush()
        with TxnAdmin(ClientConfig(b.bootstrap)) as admin:
            admin.end_txn("never-seen", 1, 0, True)  # an error to count
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "dash-group"})
        c.assign([TopicPartition(topic_name, 0, 0)])
        got = 0
        while got < 5:
            got += len(c.consume(10, 1.0))
        c.commit(offsets=[TopicPartition(topic_name, 0, 2)], asynchronous=False)
        c.close()
        samples = scrape(b.http_url)
        missing = {m for m in queried_metrics() if not samples.get(m)}
        assert missing == set()

        documented = set(METRIC.findall((DOCS / "metrics.md").read_text()))
        exported = {re.sub(r"_(bucket|sum|count)$", "", name) for name in samples}
        assert exported - documented == set()
        assert len(exported) == 42  # with the connection refusal, throttle and failed-auth counters
        p.abort_transaction(15)
    finally:
        b.stop()
