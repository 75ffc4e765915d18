"""The settings blocks of docs/security.md, as written, build the configs they configure:
each broker ``properties`` block is a valid BrokerConfig (with the values it shows, not a
comment glued to one), the Connect worker's is a valid WorkerConfig whose every client can
be built, and the Spark snippet's options are valid read options. The blocks that run on a
broker are executed elsewhere: the worked example (tests/integration/
test_security_worked_example.py), the Admin API snippets (test_security_docs.py), the
HTTP listener's (test_http_listener_security.py) and the rate limits (test_connection_quotas.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import javaproperties

from oncelog.broker.authentication import Authentication
from oncelog.broker.config import BrokerConfig, parse_properties
from oncelog.broker.listeners import parse_listeners
from oncelog.client.java_config import librdkafka_settings
from oncelog.connect.kafka_io.settings import check_worker_client_settings
from oncelog.connect.runtime.worker_config import WorkerConfig
from oncelog.security.credential_store import ScramCredentialStore
from oncelog.spark.options import parse_read_options

DOC = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
WORKER = {
    "group.id": "g",
    "config.storage.topic": "c",
    "offset.storage.topic": "o",
    "status.storage.topic": "s",
    "key.converter": "JsonConverter",
    "value.converter": "JsonConverter",
}


def properties_blocks() -> list[str]:
    return re.findall(r"^```properties\n(.*?)^```", DOC, re.S | re.M)


def block_with(key: str) -> dict[str, str]:
    (block,) = [b for b in properties_blocks() if re.search(rf"^{re.escape(key)}\s*=", b, re.M)]
    return parse_properties(block)


def test_every_broker_properties_block_is_a_valid_broker_config() -> None:
    blocks = [b for b in properties_blocks() if "bootstrap.servers" not in b]
    assert len(blocks) == 6, blocks
    for block in blocks:
        BrokerConfig.build(overrides=parse_properties(block))


def test_the_listeners_block_names_its_listeners_and_advertised_address() -> None:
    config = BrokerConfig.build(overrides=block_with("advertised.listeners"))
    listeners = {
        (x.name, x.host, x.port, x.protocol, x.advertised_host, x.advertised_port)
        for x in parse_listeners(config)
    }
    assert listeners == {
        ("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT", "127.0.0.1", None),
        ("SASL_SSL", "0.0.0.0", 9093, "SASL_SSL", "broker.example.com", 9093),
    }


def test_the_tls_block_values_are_the_values_shown() -> None:
    config = BrokerConfig.build(overrides=block_with("ssl.client.auth"))
    assert config.settings.ssl_keystore_location == "/etc/oncelog/broker.pem"
    assert config.settings.ssl_truststore_location == "/etc/oncelog/ca.pem"
    assert config.settings.ssl_client_auth == "none"


def test_the_sasl_block_enables_its_mechanisms_and_plain_users(tmp_path: Path) -> None:
    config = BrokerConfig.build(
        overrides={
            "listeners": "SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            **block_with("connections.max.reauth.ms"),
        }
    )
    auth = Authentication(config, ScramCredentialStore(tmp_path / "scram_credentials.json"))
    assert auth.enabled_mechanisms("SASL_SSL") == ["SCRAM-SHA-512"]
    assert auth.enabled_mechanisms("SASL_PLAINTEXT") == ["PLAIN"]
    assert auth.plain_users("SASL_PLAINTEXT") == {"admin": "admin-secret", "alice": "alice-secret"}
    assert auth.reauth_ms("SASL_SSL") == 3600000


def test_the_connect_worker_block_is_a_valid_worker_config() -> None:
    (block,) = [b for b in properties_blocks() if "bootstrap.servers" in b]
    props = dict(javaproperties.loads(block))
    check_worker_client_settings(WorkerConfig({**WORKER, **props}))
    conf = librdkafka_settings(props)
    assert (conf["sasl.username"], conf["ssl.ca.location"]) == ("connect", "/etc/oncelog/ca.pem")


class _Stream:
    """A stand-in for ``spark.readStream``: collects the options, and checks them at
    ``load()`` as the data source does."""

    def __init__(self) -> None:
        self.opts: dict[str, str] = {}
        self.loaded: Any = None

    def format(self, name: str) -> _Stream:
        assert name == "oncelog"
        return self

    def options(self, **opts: str) -> _Stream:
        self.opts.update(opts)
        return self

    def option(self, key: str, value: str) -> _Stream:
        self.opts[key] = value
        return self

    def load(self) -> None:
        self.loaded = parse_read_options(self.opts, streaming=True)


def test_the_spark_snippet_options_are_valid_read_options() -> None:
    (code,) = [b for b in re.findall(r"^```python\n(.*?)^```", DOC, re.S | re.M) if '"kafka.' in b]
    stream = _Stream()
    spark = type("Spark", (), {"readStream": stream})()
    exec(code, {"spark": spark})
    read = stream.loaded
    assert read.bootstrap == "broker.example.com:9093"
    assert read.subscription.topics == ("orders",)
    assert read.consumer_conf["sasl.username"] == "copier"
    assert read.consumer_conf["ssl.ca.location"] == "/etc/oncelog/ca.pem"
