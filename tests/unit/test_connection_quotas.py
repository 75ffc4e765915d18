"""Connection limits' bookkeeping and their settings' parsing (Kafka's ConnectionQuotas),
and the connection-creation-rate sensors with an injected clock."""

from __future__ import annotations

import pytest

from oncelog.broker.config import BrokerConfig, BrokerConfigError
from oncelog.broker.connection_quotas import (
    UNLIMITED,
    ConnectionQuotas,
    CreationRate,
    CreationRates,
    idle,
    parse_overrides,
)


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


# -- max.connection.creation.rate (Kafka's ConnectionQuotas sensors) --------------------


def _accept_all(rate: CreationRate, n: int, start_ms: int = 0) -> tuple[int, list[int]]:
    """An acceptor taking ``n`` connections that are all waiting: each is recorded at the
    acceptor's clock, which then waits the throttle. The clock at the end, and the waits."""
    now, waits = start_ms, []
    for _ in range(n):
        wait = rate.record(now)
        waits.append(wait)
        now += wait
    return now, waits


def test_a_fresh_sensor_admits_samples_minus_one_windows_of_burst() -> None:
    # Rate.windowSize counts at least samples - 1 whole windows: 10 s with Kafka's
    # defaults, so 10 x 5 connections pass at once and the 51st waits 1/5 s.
    rate = CreationRate(5)
    assert [rate.record(0) for _ in range(50)] == [0] * 50
    assert rate.record(0) == 200  # (51/10 - 5) / 5 * 10,000 ms
    assert rate.record(0) == 400


def test_past_the_burst_connections_are_accepted_at_the_rate() -> None:
    # One 1 s window of burst (quota.window.num=2), then 10 a second: 60 connections
    # take (60 - 10) / 10 = 5 s of acceptor time.
    end, waits = _accept_all(CreationRate(10, samples=2, window_ms=1000), 60)
    assert waits[:10] == [0] * 10
    assert 4800 <= end <= 5200
    # Kafka's defaults: 10 s of burst, then the rate (rounding at window edges lets a
    # few more through than a token bucket would).
    end, _ = _accept_all(CreationRate(5), 100)
    assert 9500 <= end <= 12500


def test_the_wait_is_capped_at_one_window_and_a_zero_rate_waits_it_every_time() -> None:
    rate = CreationRate(1, samples=2, window_ms=1000)
    waits = [rate.record(0) for _ in range(10)]
    assert waits[0] == 0 and max(waits) == 1000  # ConnectionQuotas.maxThrottleTimeMs
    assert [CreationRate(0).record(t) for t in (0, 5000)] == [1000, 1000]


def test_an_idle_sensor_forgets_its_samples() -> None:
    rate = CreationRate(5, samples=2, window_ms=1000)
    _accept_all(rate, 30)
    assert rate.record(60_000) == 0  # purgeObsoleteSamples: a fresh burst is allowed
    assert rate.rate(60_000) == 1.0


def test_broker_wide_and_listener_limits() -> None:
    # Both sensors count every connection; the longer wait applies.
    rates = CreationRates(UNLIMITED, {"INTERNAL": 2, "EXTERNAL": UNLIMITED}, samples=2)
    assert [rates.record("INTERNAL", 0) for _ in range(3)] == [0, 0, 500]
    assert rates.record("EXTERNAL", 0) == 0
    rates = CreationRates(2, {"INTERNAL": UNLIMITED, "EXTERNAL": UNLIMITED}, samples=2)
    assert [rates.record(n, 0) for n in ("INTERNAL", "EXTERNAL", "INTERNAL")] == [0, 0, 500]
    assert rates.limits("INTERNAL")
    only_a = CreationRates(UNLIMITED, {"A": 5, "B": UNLIMITED})
    assert only_a.limits("A") and not only_a.limits("B")


def test_creation_rate_settings() -> None:
    config = BrokerConfig.build(
        overrides={
            "listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
            "max.connection.creation.rate": "50",
            "listener.name.external.max.connection.creation.rate": "5",
            "quota.window.num": "2",
        }
    )
    rates = CreationRates.from_config(config, ["INTERNAL", "EXTERNAL"])
    # The listener without its own value takes the broker-wide one, as Kafka's
    # ListenerConnectionQuota is configured from the prefixed settings over the others.
    assert [rates.record("EXTERNAL", 0) for _ in range(6)][-1] == 200
    assert rates.record("INTERNAL", 0) == 0
    with pytest.raises(BrokerConfigError, match="must be at least 0"):
        BrokerConfig.build(overrides={"max.connection.creation.rate": "-1"})
    bad = BrokerConfig.build(
        overrides={"listener.name.plaintext.max.connection.creation.rate": "fast"}
    )
    with pytest.raises(
        BrokerConfigError,
        match="fast for configuration listener.name.plaintext.max.connection.creation.rate",
    ):
        CreationRates.from_config(bad, ["PLAINTEXT"])
    assert BrokerConfig.build().settings.max_connection_creation_rate == 2**31 - 1


def test_the_security_docs_rate_example_is_a_valid_config() -> None:
    import re
    from pathlib import Path

    from oncelog.broker.config import parse_properties

    docs = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    (block,) = [
        b
        for b in re.findall(r"```properties\n(.*?)```", docs, re.S)
        if "max.connection.creation.rate" in b
    ]
    config = BrokerConfig.build(
        overrides={"listeners": "SASL_SSL://127.0.0.1:0", **parse_properties(block)}
    )
    rates = CreationRates.from_config(config, ["SASL_SSL"])
    assert config.settings.max_connection_creation_rate == 200
    assert [rates.record("SASL_SSL", 0) for _ in range(501)][-1] == 20  # 50/s past 10 s of burst
