"""Listener parsing, per-listener settings, principal mapping rules, ready line."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oncelog.broker.config import BrokerConfig, BrokerConfigError
from oncelog.broker.listeners import SecurityProtocol, canonical_host_name, parse_listeners
from oncelog.broker.tls import openssl_cipher_name
from oncelog.embedded import parse_ready_line
from oncelog.security.principal import (
    MappingRuleError,
    parse_mapping_rules,
    principal_from_dn,
)


def test_listeners_map_names_to_protocols_and_advertise_per_listener() -> None:
    cfg = BrokerConfig.build(
        overrides={
            "listeners": "PLAINTEXT://0.0.0.0:9092,CLIENT://127.0.0.1:9093,SASL_SSL://:9094",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
            "advertised.listeners": "CLIENT://kafka.example:19093",
        }
    )
    ls = parse_listeners(cfg)
    assert [(x.name, x.host, x.port, x.protocol) for x in ls] == [
        ("PLAINTEXT", "0.0.0.0", 9092, SecurityProtocol.PLAINTEXT),
        ("CLIENT", "127.0.0.1", 9093, SecurityProtocol.SASL_PLAINTEXT),
        # An empty host binds every interface (Kafka's SocketServer).
        ("SASL_SSL", "", 9094, SecurityProtocol.SASL_SSL),
    ]
    assert [(x.advertised_host, x.advertised_port) for x in ls] == [
        ("127.0.0.1", None),
        ("kafka.example", 19093),
        # ... and is advertised as the canonical host name, as Kafka does
        (canonical_host_name(), None),
    ]
    assert ls[1].describe(9093) == "127.0.0.1:9093 (CLIENT/SASL_PLAINTEXT)"
    assert ls[2].describe(9094) == "*:9094 (SASL_SSL)"


def test_a_bare_advertised_address_belongs_to_the_first_listener() -> None:
    cfg = BrokerConfig.build(
        overrides={
            "listeners": "SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
            "advertised.listeners": "proxy.example:9999",
        }
    )
    assert [(x.advertised_host, x.advertised_port) for x in parse_listeners(cfg)] == [
        ("proxy.example", 9999),
        ("127.0.0.1", None),
    ]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"listeners": "CLIENT://127.0.0.1:1"}, "not in listener.security.protocol.map"),
        ({"listeners": "PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2"}, "declared twice"),
        ({"listeners": "127.0.0.1:1"}, "NAME://HOST:PORT"),
        ({"advertised.listeners": "SSL://h:1"}, "unknown listeners"),
        ({"listener.security.protocol.map": "X:TLS"}, "names no security protocol"),
    ],
)
def test_bad_listener_settings_are_refused(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(BrokerConfigError, match=message):
        parse_listeners(BrokerConfig.build(overrides=overrides))


def test_listener_prefixed_settings_win_over_broker_wide_ones() -> None:
    cfg = BrokerConfig.build(
        overrides={
            "ssl.client.auth": "requested",
            "listener.name.internal.ssl.client.auth": "required",
            "sasl.jaas.config": "wide",
            "listener.name.client.plain.sasl.jaas.config": "client-plain",
        }
    )
    assert cfg.for_listener("INTERNAL", "ssl.client.auth") == "required"
    assert cfg.for_listener("OTHER", "ssl.client.auth") == "requested"
    assert cfg.jaas_config("CLIENT", "PLAIN") == "client-plain"
    assert cfg.jaas_config("CLIENT", "SCRAM-SHA-512") == "wide"
    with pytest.raises(BrokerConfigError, match="unknown broker config"):
        BrokerConfig.build(overrides={"ssl.clientauth": "x"})


def test_principal_mapping_rules_as_kip_371() -> None:
    rules = parse_mapping_rules(
        r"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$2/L, DEFAULT"
    )
    assert principal_from_dn("CN=svc,OU=ServiceUsers,O=Org", rules) == "User:svc"
    assert principal_from_dn("CN=Alice,OU=ENG,O=oncelog", rules) == "User:alice@eng"
    assert principal_from_dn("CN=x", rules) == "User:CN=x"
    assert principal_from_dn("CN=x,O=y", parse_mapping_rules("DEFAULT")) == "User:CN=x,O=y"
    with pytest.raises(MappingRuleError, match="no ssl.principal.mapping.rules"):
        principal_from_dn("CN=x", parse_mapping_rules("RULE:^O=(.*)$/$1/U"))
    with pytest.raises(MappingRuleError, match="invalid"):
        parse_mapping_rules("RULE:broken")


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1))
def test_default_rule_keeps_any_dn(dn: str) -> None:
    assert principal_from_dn(dn, parse_mapping_rules("DEFAULT")) == f"User:{dn}"


def test_kafka_cipher_suite_names_become_openssl_names() -> None:
    assert (
        openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256")
        == "ECDHE-RSA-AES128-GCM-SHA256"
    )
    assert (
        openssl_cipher_name("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384")
        == "ECDHE-ECDSA-AES256-GCM-SHA384"
    )
    assert (
        openssl_cipher_name("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256")
        == "ECDHE-RSA-CHACHA20-POLY1305"
    )
    assert openssl_cipher_name("TLS_AES_128_GCM_SHA256") is None  # TLS 1.3: not settable in ssl
    assert openssl_cipher_name("ECDHE-RSA-AES128-SHA") == "ECDHE-RSA-AES128-SHA"


def test_ready_line_parsing() -> None:
    line = "oncelog broker ready on 127.0.0.1:9092 (PLAINTEXT), 127.0.0.1:9093 (CLIENT/SASL_SSL)\n"
    assert parse_ready_line(line) == {"PLAINTEXT": 9092, "CLIENT": 9093}
