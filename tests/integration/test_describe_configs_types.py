"""DescribeConfigs v3+ reports each config's type and, when asked, its documentation,
from the settings' definitions (Kafka's ConfigHelper: LogConfig.configType,
KafkaConfig.configType, GroupConfig.configType; secrets are PASSWORD)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kio.schema.describe_configs.v4 import request as dc
from kio.schema.errors import ErrorCode

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker

from .helpers import create_topic

BOOLEAN, STRING, INT, LONG, DOUBLE, LIST, PASSWORD = 1, 2, 3, 5, 6, 7, 9


@pytest.fixture
def wire(broker: EmbeddedBroker) -> Iterator[WireClient]:
    with WireClient(broker.bootstrap) as c:
        yield c


def _describe(
    wire: WireClient, resource_type: int, name: str, keys: tuple[str, ...], docs: bool
) -> dict[str, tuple[int, str | None]]:
    resp = wire.request(
        dc.DescribeConfigsRequest(
            resources=(
                dc.DescribeConfigsResource(
                    resource_type=resource_type, resource_name=name, configuration_keys=keys
                ),
            ),
            include_synonyms=False,
            include_documentation=docs,
        )
    )
    (result,) = resp.results
    assert result.error_code == ErrorCode.none
    return {c.name: (c.config_type, c.documentation) for c in result.configs}


def test_types_and_documentation_come_from_the_definitions(
    broker: EmbeddedBroker, wire: WireClient, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name)
    topic_keys = ("segment.bytes", "retention.ms", "cleanup.policy", "preallocate")
    assert _describe(wire, 2, topic_name, topic_keys, docs=False) == {
        "segment.bytes": (INT, None),
        "retention.ms": (LONG, None),
        "cleanup.policy": (LIST, None),
        "preallocate": (BOOLEAN, None),
    }
    described = _describe(wire, 2, topic_name, ("retention.ms",), docs=True)
    assert described == {
        "retention.ms": (
            LONG,
            "How long records are kept before their segment is deleted (-1: forever).",
        )
    }
    broker_keys = (
        "num.partitions",
        "log.cleaner.min.cleanable.ratio",
        "listeners",
        "ssl.keystore.password",
        "transaction.max.timeout.ms",
    )
    types = {k: t for k, (t, _) in _describe(wire, 4, "0", broker_keys, docs=True).items()}
    assert types == {
        "num.partitions": INT,
        "log.cleaner.min.cleanable.ratio": DOUBLE,
        "listeners": STRING,
        "ssl.keystore.password": PASSWORD,
        "transaction.max.timeout.ms": INT,
    }
    group = _describe(wire, 32, "g", ("consumer.session.timeout.ms",), docs=True)
    assert group["consumer.session.timeout.ms"][0] == INT
    assert "consumer-protocol" in (group["consumer.session.timeout.ms"][1] or "")
