"""Listeners and TLS: several listeners, per-listener Metadata, PEM keystores, mTLS."""

from __future__ import annotations

import socket
import ssl
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from oncelog.embedded import EmbeddedBroker
from tests.integration.helpers import consume, create_topic, produce
from tests.integration.security import TlsFiles, confluent_ssl, make_tls, tls_listener_settings

# xdist (make test): one worker runs this module, so its module-scoped fixture starts once.
pytestmark = pytest.mark.xdist_group("test_listeners_tls")


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls(tmp_path_factory.mktemp("tls"))


def _start(tmp_path: Path, settings: dict[str, str]) -> EmbeddedBroker:
    return EmbeddedBroker(tmp_path / "data", settings=settings).start()


@pytest.fixture
def two_listeners(tmp_path: Path, tls: TlsFiles) -> Iterator[EmbeddedBroker]:
    b = _start(
        tmp_path,
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            **tls_listener_settings(tls, "SSL", client_auth="requested"),
        },
    )
    try:
        yield b
    finally:
        b.stop()


def test_ready_line_names_every_listener_and_metadata_advertises_the_callers(
    two_listeners: EmbeddedBroker, tls: TlsFiles
) -> None:
    b = two_listeners
    assert set(b.ports) == {"PLAINTEXT", "SSL"} and b.ports["PLAINTEXT"] != b.ports["SSL"]
    plain = AdminClient({"bootstrap.servers": b.bootstrap_for("PLAINTEXT")})
    secure = AdminClient({"bootstrap.servers": b.bootstrap_for("SSL"), **confluent_ssl(tls)})
    assert [(x.host, x.port) for x in plain.list_topics(timeout=10).brokers.values()] == [
        ("127.0.0.1", b.ports["PLAINTEXT"])
    ]
    assert [(x.host, x.port) for x in secure.list_topics(timeout=10).brokers.values()] == [
        ("127.0.0.1", b.ports["SSL"])
    ]


def test_confluent_and_kafka_python_round_trip_over_tls(
    two_listeners: EmbeddedBroker, tls: TlsFiles
) -> None:
    b = two_listeners
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    ssl_boot = b.bootstrap_for("SSL")
    create_topic(b.bootstrap_for("PLAINTEXT"), topic)
    # no client certificate (requested: optional) and with one
    acked = produce(
        ssl_boot, topic, [(None, b"v%d" % i, 0) for i in range(50)], **confluent_ssl(tls)
    )
    acked += produce(
        ssl_boot,
        topic,
        [(None, b"w%d" % i, 0) for i in range(50)],
        **confluent_ssl(tls, client_cert=True),
    )
    assert [a.offset for a in acked] == list(range(100))
    got = consume(ssl_boot, topic, 1, 100, **confluent_ssl(tls))
    assert [m.value() for m in got] == [b"v%d" % i for i in range(50)] + [
        b"w%d" % i for i in range(50)
    ]

    kp = KafkaProducer(bootstrap_servers=ssl_boot, security_protocol="SSL", ssl_cafile=str(tls.ca))
    kp.send(topic, b"from-kafka-python", partition=0).get(timeout=20)
    kp.close()
    kc = KafkaConsumer(
        bootstrap_servers=ssl_boot,
        security_protocol="SSL",
        ssl_cafile=str(tls.ca),
        ssl_certfile=str(tls.client_cert),
        ssl_keyfile=str(tls.client_key),
        consumer_timeout_ms=10000,
    )
    tp = TopicPartition(topic, 0)
    kc.assign([tp])
    kc.seek(tp, 100)
    assert [r.value for r in kc][:1] == [b"from-kafka-python"]
    kc.close()


def test_mtls_required_rejects_a_client_without_a_certificate(
    tmp_path: Path, tls: TlsFiles
) -> None:
    b = _start(
        tmp_path,
        {
            "listeners": "SSL://127.0.0.1:0",
            **tls_listener_settings(tls, "SSL", client_auth="required"),
        },
    )
    try:
        topic = f"mtls-{uuid.uuid4().hex[:8]}"
        with_cert = confluent_ssl(tls, client_cert=True)
        create_topic_conf = AdminClient({"bootstrap.servers": b.bootstrap, **with_cert})
        assert topic not in create_topic_conf.list_topics(timeout=10).topics
        acked = produce(b.bootstrap, topic, [(None, b"x", 0)], **with_cert)
        assert [a.offset for a in acked] == [0]

        errors: list[str] = []
        p = Producer(
            {
                "bootstrap.servers": b.bootstrap,
                **confluent_ssl(tls),
                "error_cb": lambda e: errors.append(str(e)),
            }
        )
        with pytest.raises(KafkaException):
            p.list_topics(timeout=5)
        p.poll(1)
        assert errors and all("brokers are down" in e or "SSL" in e for e in errors), errors
    finally:
        b.stop()


def test_a_listeners_line_in_the_config_file_is_honoured(tmp_path: Path, tls: TlsFiles) -> None:
    props = tmp_path / "server.properties"
    lines = [
        "listeners=CLIENT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map=CLIENT:SSL,PLAINTEXT:PLAINTEXT",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={tls.server}",
        "ssl.enabled.protocols=TLSv1.3",
    ]
    props.write_text("\n".join(lines) + "\n")
    b = EmbeddedBroker(tmp_path / "data", config_file=props).start()
    try:
        assert list(b.ports) == ["CLIENT", "PLAINTEXT"]
        acked = produce(b.bootstrap_for("CLIENT"), "cfg", [(None, b"x", 0)], **confluent_ssl(tls))
        assert [a.offset for a in acked] == [0]
        # Only TLS 1.3 is enabled: a client capped at 1.2 fails the handshake.
        ctx = ssl.create_default_context(cafile=str(tls.ca))
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        with socket.create_connection(("127.0.0.1", b.ports["CLIENT"]), timeout=5) as raw:
            with pytest.raises(ssl.SSLError):
                ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        ctx.maximum_version = ssl.TLSVersion.TLSv1_3
        with socket.create_connection(("127.0.0.1", b.ports["CLIENT"]), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls_sock:
                assert tls_sock.version() == "TLSv1.3"
    finally:
        b.stop()


def test_mtls_principal_comes_from_the_certificate_dn(tmp_path: Path, tls: TlsFiles) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        **tls_listener_settings(tls, "SSL", client_auth="required"),
        "listener.name.ssl.ssl.principal.mapping.rules": r"RULE:^CN=(.*?),OU=eng,.*$/$1@eng/,DEFAULT",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",  # the PLAINTEXT listener sets things up
    }
    b = _start(tmp_path, settings)
    try:
        setup = b.bootstrap_for("PLAINTEXT")
        create_topic(setup, "granted")
        create_topic(setup, "other")
        admin = AdminClient({"bootstrap.servers": setup})
        grant = AclBinding(
            ResourceType.TOPIC,
            "granted",
            ResourcePatternType.LITERAL,
            "User:alice@eng",
            "*",
            AclOperation.WRITE,
            AclPermissionType.ALLOW,
        )
        for f in admin.create_acls([grant]).values():
            f.result(15)
        with_cert = confluent_ssl(tls, client_cert=True)
        assert [
            a.offset
            for a in produce(b.bootstrap_for("SSL"), "granted", [(None, b"x", 0)], **with_cert)
        ] == [0]
        p = Producer(
            {"bootstrap.servers": b.bootstrap_for("SSL"), "message.timeout.ms": 5000, **with_cert}
        )
        errors: list[int] = []
        p.produce(
            "other", b"x", partition=0, on_delivery=lambda e, m: e and errors.append(e.code())
        )
        p.flush(10)
        assert errors == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
        assert "Principal = User:alice@eng is Denied operation = DESCRIBE" in b.log_path.read_text()
    finally:
        b.stop()


def test_a_certificate_no_mapping_rule_matches_is_refused_in_one_log_line(
    tmp_path: Path, tls: TlsFiles
) -> None:
    """No rule (and no DEFAULT) maps the client's DN: the connection is closed and the
    broker logs one line, not a transport-callback traceback per connection."""
    settings = {
        "listeners": "SSL://127.0.0.1:0",
        **tls_listener_settings(tls, "SSL", client_auth="required"),
        "listener.name.ssl.ssl.principal.mapping.rules": r"RULE:^CN=(.*?),OU=nowhere,.*$/$1/",
    }
    b = _start(tmp_path, settings)
    try:
        ctx = ssl.create_default_context(cafile=str(tls.ca))
        ctx.load_cert_chain(str(tls.client_cert), str(tls.client_key))
        for _ in range(5):
            with socket.create_connection(("127.0.0.1", b.ports["SSL"]), timeout=5) as raw:
                with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls_sock:
                    tls_sock.settimeout(5)
                    try:
                        assert tls_sock.recv(1) == b""  # closed by the broker
                    except (ConnectionResetError, ssl.SSLError):
                        pass
        time.sleep(0.5)
        log = b.log_path.read_text()
        assert log.count("no ssl.principal.mapping.rules rule matches") == 1, log[-3000:]
        assert "Traceback" not in log
    finally:
        b.stop()


def test_a_certificate_from_an_untrusted_ca_is_refused_counted_and_logged_once(
    tmp_path: Path, tls: TlsFiles
) -> None:
    """A client certificate another CA issued fails the handshake (ssl.client.auth=required):
    one log line naming the peer and OpenSSL's reason, counted as a failed authentication
    as Kafka's Selector counts an SslAuthenticationException; five more attempts are only
    counted. A trusted certificate still gets in."""
    from tests.integration.metrics_scrape import scrape, value, wait_for

    stranger = make_tls(tmp_path / "other-ca", client_cn="mallory")
    settings = {
        "listeners": "SSL://127.0.0.1:0",
        **tls_listener_settings(tls, "SSL", client_auth="required"),
        "metrics.listener": "http://127.0.0.1:0",
    }
    b = _start(tmp_path, settings)
    try:
        assert b.http_url is not None
        ctx = ssl.create_default_context(cafile=str(tls.ca))  # trusts the broker
        ctx.load_cert_chain(str(stranger.client_cert), str(stranger.client_key))
        peers = []
        for _ in range(6):
            with socket.create_connection(("127.0.0.1", b.ports["SSL"]), timeout=5) as raw:
                peers.append(f"127.0.0.1:{raw.getsockname()[1]}")
                try:
                    # TLS 1.3: the client's side may finish before the broker has checked
                    # its certificate; the refusal then arrives as an alert or a close.
                    with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls_sock:
                        tls_sock.settimeout(5)
                        assert tls_sock.recv(1) == b""
                except (ssl.SSLError, ConnectionResetError):
                    pass
        samples = wait_for(
            b.http_url, lambda s: value(s, "oncelog_failed_authentication_total") >= 6
        )
        assert value(samples, "oncelog_failed_authentication_total") == 6
        trusted = AdminClient(
            {"bootstrap.servers": b.bootstrap, **confluent_ssl(tls, client_cert=True)}
        )
        assert trusted.list_topics(timeout=10).brokers
        assert value(scrape(b.http_url), "oncelog_failed_authentication_total") == 6
    finally:
        b.stop()
    lines = [line for line in b.log_path.read_text().splitlines() if "SSL handshake failed" in line]
    assert len(lines) == 1, lines
    assert (
        f"Failed authentication with {peers[0]} (SSL handshake failed on listener SSL: "
        in (lines[0])
    )
    assert "CERTIFICATE_VERIFY_FAILED: unable to get local issuer certificate" in lines[0]
    assert "5 more failed SSL handshakes" in b.log_path.read_text()
