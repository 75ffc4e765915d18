"""The worker's client configurations go through the client layer."""

from __future__ import annotations

import pytest

from oncelog.connect.errors import ConnectException
from oncelog.connect.kafka_io.settings import client_config


def test_client_config_keeps_connection_settings_and_checks_security() -> None:
    config = client_config(
        {
            "bootstrap.servers": "a:9092,b:9092",
            "security.protocol": "PLAINTEXT",
            "acks": "all",
            "client.id": "x",
        }
    )
    assert config.servers() == ["a:9092", "b:9092"]
    assert config.librdkafka(acks="all") == {
        "security.protocol": "PLAINTEXT",
        "client.id": "x",
        "acks": "all",
        "bootstrap.servers": "a:9092,b:9092",
    }


def test_an_unknown_security_protocol_fails_with_a_connect_error() -> None:
    with pytest.raises(ConnectException, match="Invalid client settings"):
        client_config({"bootstrap.servers": "a:9092", "security.protocol": "CARRIER_PIGEON"})
