"""The exactly-once Spark pipeline (oncelog source → oncelog sink) against a SASL_SSL
listener with a SCRAM user, configured with Kafka's names (``kafka.security.protocol``,
``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config``, ``kafka.ssl.truststore.location``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from oncelog.cli.main import app
from oncelog.embedded import EmbeddedBroker
from oncelog.testing.verify import open_transactions, stable

from .apps.spark_common import create_topic, spark, unique
from .security import make_tls, secured_settings
from .test_spark_sink import PREFIX, assert_exactly_once, transactional_input

# xdist (make test): the Spark tests share one worker, so one local Spark JVM (the session
# fixture) serves them all and no two Spark jobs compete for the 2 cores.
pytestmark = pytest.mark.xdist_group("spark")

__all__ = ["spark"]  # fixture

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.fixture
def secured_broker(tmp_path: Path) -> Iterator[tuple[EmbeddedBroker, dict[str, str]]]:
    tls = make_tls(tmp_path / "tls")
    data = tmp_path / "data"
    added = CliRunner().invoke(
        app, ["users", "add", "spark", "--password", "spark-pw", "--data-dir", str(data)]
    )
    assert added.exit_code == 0, added.output
    with EmbeddedBroker(data, settings=secured_settings(tls)) as broker:
        yield (
            broker,
            {
                "kafka.bootstrap.servers": broker.bootstrap_for("SASL_SSL"),
                "kafka.security.protocol": "SASL_SSL",
                "kafka.sasl.mechanism": "SCRAM-SHA-512",
                "kafka.sasl.jaas.config": f'{SCRAM} required username="spark" password="spark-pw";',
                "kafka.ssl.truststore.type": "PEM",
                "kafka.ssl.truststore.location": str(tls.ca),
            },
        )


def test_streaming_copy_over_sasl_ssl_is_exactly_once(
    spark: Any, secured_broker: tuple[EmbeddedBroker, dict[str, str]], tmp_path: Path
) -> None:
    broker, secured = secured_broker
    plain, src, dst = broker.bootstrap, unique("src"), unique("dst")
    create_topic(plain, src, 2)
    create_topic(plain, dst, 2)
    expected = transactional_input(plain, src, 2, txns=8, per_txn=50)
    df = (
        spark.readStream.format("oncelog")
        .options(**secured)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "value")
    )
    q = (
        df.writeStream.format("oncelog")
        .options(**secured)
        .option("topic", dst)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(180), "query did not finish"
    assert q.exception() is None, q.exception()
    assert_exactly_once(plain, dst, expected)
    assert open_transactions(plain, f"{PREFIX}-{q.id}-") == []
    assert stable(plain, dst)


@pytest.mark.slow  # over a minute of waiting: make test-slow runs it
def test_wrong_password_fails_instead_of_falling_back(
    spark: Any, secured_broker: tuple[EmbeddedBroker, dict[str, str]]
) -> None:
    broker, secured = secured_broker
    topic = unique("t")
    create_topic(broker.bootstrap, topic, 1)
    wrong = {
        **secured,
        "kafka.sasl.jaas.config": f'{SCRAM} required username="spark" password="x";',
    }
    # librdkafka's admin client reports the failed SCRAM login as _TRANSPORT (it drops
    # the connection) once the client layer's retry deadline passes: an error, no data
    with pytest.raises(Exception, match="Metadata: _(TRANSPORT|AUTHENTICATION)"):
        spark.read.format("oncelog").options(**wrong).option("subscribe", topic).load().collect()
