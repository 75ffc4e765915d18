"""Connection limits' bookkeeping and their setting's parsing (Kafka's ConnectionQuotas)."""

from __future__ import annotations

import pytest

from oncelog.broker.config import BrokerConfigError
from oncelog.broker.connection_quotas import ConnectionQuotas, idle, parse_overrides


def test_per_ip_and_total_limits() -> None:
    quotas = ConnectionQuotas(max_connections=3, per_ip=2, overrides={"10.0.0.9": 0})
    assert quotas.admit("a") is None and quotas.admit("a") is None
    assert quotas.admit("a") == "max.connections.per.ip (2) reached for a"
    assert quotas.admit("10.0.0.9") == "max.connections.per.ip (0) reached for 10.0.0.9"
    assert quotas.admit("b") is None
    assert quotas.admit("c") == "max.connections (3) reached"
    quotas.release("a")
    assert quotas.admit("c") is None


def test_overrides_parse_or_name_the_bad_entry() -> None:
    assert parse_overrides("h1:5, 10.0.0.1:0,") == {"h1": 5, "10.0.0.1": 0}
    with pytest.raises(BrokerConfigError, match="entry 'oops': expected host:count"):
        parse_overrides("h1:5,oops")


def test_idle_connections() -> None:
    assert idle({1: 0.0, 2: 9.0}, now=10.0, idle_s=5.0) == [1]
