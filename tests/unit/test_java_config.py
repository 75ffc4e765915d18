"""Kafka's (Java client) security settings translated for librdkafka and the client layer:
the one function (oncelog.client.java_config) that --command-config, the Connect worker
and the Spark data source share."""

from __future__ import annotations

import pytest

from oncelog.client.java_config import librdkafka_settings
from oncelog.client.security import ClientConfigError
from oncelog.connect.api.errors import ConnectException
from oncelog.connect.kafka_io.settings import (
    check_worker_client_settings,
    client_config,
    librdkafka,
)
from oncelog.connect.runtime.client_configs import sink_consumer_config, source_producer_config
from oncelog.connect.runtime.worker_config import WorkerConfig
from oncelog.spark.options import OncelogOptionError, parse_read_options, parse_write_options

from .test_connect_worker_config import BASE

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def error(values: dict[str, str]) -> str:
    with pytest.raises(ClientConfigError) as info:
        librdkafka_settings(values)
    return str(info.value)


def test_scram_jaas_and_pem_stores() -> None:
    assert librdkafka_settings(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": f'{SCRAM} required username="alice" password="s3 cr;et";',
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/ca.pem",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": "/client.pem",
            "ssl.key.password": "kp",
            "ssl.endpoint.identification.algorithm": "",
            "linger.ms": "5",
        }
    ) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "s3 cr;et",
        "ssl.ca.location": "/ca.pem",
        "ssl.certificate.location": "/client.pem",
        "ssl.key.location": "/client.pem",
        "ssl.key.password": "kp",
        "ssl.endpoint.identification.algorithm": "none",
        "linger.ms": "5",
    }


def test_plain_jaas_implies_plain_and_unescapes() -> None:
    assert librdkafka_settings(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.jaas.config": f'{PLAIN}  required\n  username="bob"\n  password="a\\"b";',
        }
    ) == {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "bob",
        "sasl.password": 'a"b',
    }


def test_librdkafka_names_pass_through() -> None:
    conf = {
        "security.protocol": "SSL",
        "ssl.ca.location": "/ca.pem",
        "sasl.username": "u",
        "ssl.endpoint.identification.algorithm": "https",
    }
    assert librdkafka_settings(conf) == conf


@pytest.mark.parametrize(
    ("values", "needle"),
    [
        ({"ssl.truststore.type": "JKS"}, "ssl.truststore.type=JKS is not supported"),
        ({"ssl.keystore.type": "PKCS12"}, "ssl.keystore.type=PKCS12 is not supported"),
        ({"ssl.truststore.password": "x"}, "ssl.truststore.password is a Java-client setting"),
        ({"ssl.keystore.password": "x"}, "ssl.keystore.password is a Java-client setting"),
        ({"ssl.enabled.protocols": "TLSv1.3"}, "ssl.enabled.protocols is a Java-client"),
        ({"sasl.login.callback.handler.class": "x"}, "sasl.login.callback.handler.class"),
        ({"ssl.truststore.certificates": "-----BEGIN"}, "ssl.truststore.certificates (inline"),
        (
            {"sasl.jaas.config": f'{SCRAM} required username="a" password="b";'},
            "set sasl.mechanism to SCRAM-SHA-256 or SCRAM-SHA-512 (got None)",
        ),
        (
            {
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.jaas.config": f'{PLAIN} required username="a" password="b";',
            },
            "PlainLoginModule but sasl.mechanism is SCRAM-SHA-256",
        ),
        (
            {
                "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;"
            },
            "login module com.sun.security.auth.module.Krb5LoginModule is not supported",
        ),
        (
            {"sasl.jaas.config": f'{PLAIN} required username="a";'},
            'needs username="…" and password',
        ),
        ({"sasl.jaas.config": 'username="a" password="b"'}, "sasl.jaas.config must read"),
    ],
)
def test_unsupported_settings_name_the_key(values: dict[str, str], needle: str) -> None:
    assert needle in error(values)


# -- Connect worker -------------------------------------------------------------------------

WORKER = {
    **BASE,
    "bootstrap.servers": "b1:9093",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.jaas.config": f'{SCRAM} required username="connect" password="pw";',
    "ssl.truststore.type": "PEM",
    "ssl.truststore.location": "/ca.pem",
}


def test_worker_security_reaches_the_client_layer_andlibrdkafka() -> None:
    worker = WorkerConfig(
        {
            **WORKER,
            "producer.sasl.jaas.config": f'{SCRAM} required username="producer" password="p2";',
        }
    )
    check_worker_client_settings(worker)
    shared = client_config(worker.shared_client_config())
    assert shared.bootstrap == "b1:9093"
    sec = shared.security
    assert (sec.protocol, sec.sasl_mechanism, sec.sasl_username, sec.sasl_password) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        "connect",
        "pw",
    )
    assert sec.ca_location == "/ca.pem" and sec.tls
    producer = librdkafka(source_producer_config(worker, "src", 0, {}))
    assert producer["sasl.username"] == "producer" and producer["sasl.password"] == "p2"
    assert producer["ssl.ca.location"] == "/ca.pem" and producer["security.protocol"] == "SASL_SSL"
    assert not any(k.startswith(("ssl.truststore", "sasl.jaas")) for k in producer)
    # a connector's override (Principal policy) wins over the worker's identity
    consumer = librdkafka(
        sink_consumer_config(
            worker,
            "snk",
            0,
            {
                "consumer.override.sasl.jaas.config": f'{SCRAM} required username="snk" password="p3";'
            },
        )
    )
    assert (consumer["sasl.username"], consumer["sasl.password"]) == ("snk", "p3")


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"ssl.truststore.type": "JKS"}, "Invalid worker client settings: ssl.truststore.type=JKS"),
        (
            {"consumer.ssl.keystore.type": "PKCS12"},
            "Invalid worker client settings (with the worker's consumer.* settings): ssl.keystore.type=PKCS12",
        ),
        (
            {"admin.ssl.truststore.password": "x"},
            "(with the worker's admin.* settings): ssl.truststore.password",
        ),
        ({"security.protocol": "SASL_SSLX"}, "security.protocol must be one of"),
        ({"sasl.mechanism": "GSSAPI"}, "sasl.jaas.config uses ScramLoginModule"),
    ],
)
def test_worker_start_refuses_unsupported_security(extra: dict[str, str], needle: str) -> None:
    worker = WorkerConfig({**WORKER, **extra})
    with pytest.raises(ConnectException) as info:
        check_worker_client_settings(worker)
    assert needle in str(info.value)


def test_worker_without_security_stays_plaintext() -> None:
    plain = {k: v for k, v in WORKER.items() if not k.startswith(("sasl.", "ssl.", "security."))}
    worker = WorkerConfig(plain)
    check_worker_client_settings(worker)
    assert client_config(worker.shared_client_config()).security.protocol == "PLAINTEXT"


# -- Spark data source ----------------------------------------------------------------------

SPARK_SECURITY = {
    "kafka.bootstrap.servers": "b1:9093",
    "kafka.security.protocol": "SASL_SSL",
    "kafka.sasl.mechanism": "SCRAM-SHA-256",
    "kafka.sasl.jaas.config": f'{SCRAM} required username="spark" password="Pw";',
    "kafka.ssl.truststore.type": "PEM",
    "kafka.ssl.truststore.location": "/ca.pem",
}


def test_spark_options_translate_kafka_security() -> None:
    w = parse_write_options({**SPARK_SECURITY, "topic": "out"})
    assert w.producer_conf == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "spark",
        "sasl.password": "Pw",
        "ssl.ca.location": "/ca.pem",
    }
    sec = w.client_config.security
    assert (sec.protocol, sec.sasl_username, sec.ca_location) == ("SASL_SSL", "spark", "/ca.pem")
    r = parse_read_options({**SPARK_SECURITY, "subscribe": "in"}, streaming=True)
    sec = r.client_config.security
    assert (sec.protocol, sec.sasl_mechanism, sec.sasl_password) == (
        "SASL_SSL",
        "SCRAM-SHA-256",
        "Pw",
    )


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"kafka.ssl.truststore.type": "JKS"}, "kafka.ssl.truststore.type=JKS is not supported"),
        ({"kafka.sasl.mechanism": "GSSAPI"}, "kafka.sasl.jaas.config uses ScramLoginModule"),
        ({"kafka.security.protocol": "SSL_SASL"}, "security.protocol must be one of"),
    ],
)
def test_spark_security_errors_name_the_option(extra: dict[str, str], needle: str) -> None:
    with pytest.raises(OncelogOptionError) as info:
        parse_write_options({**SPARK_SECURITY, **extra, "topic": "out"})
    assert needle in str(info.value)
