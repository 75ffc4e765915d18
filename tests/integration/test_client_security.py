"""The client layer over TLS and SASL against the real broker, through a TLS/SASL-terminating
proxy (tests/integration/secure_proxy.py) that the broker advertises as its address, so
every connection a client opens (bootstrap, coordinator, leaders) goes through it."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode

from oncelog.client.admin import LATEST, Admin
from oncelog.client.config import ClientConfig
from oncelog.client.errors import AuthenticationError
from oncelog.client.retry import RetryPolicy
from oncelog.client.security import ClientConfigError
from oncelog.client.transactions import TxnAdmin
from oncelog.embedded import EmbeddedBroker

from .secure_proxy import SecureProxy

# xdist (make test): one worker runs this module, so its module-scoped fixture starts once.
pytestmark = pytest.mark.xdist_group("test_client_security")

USERS = {"alice": "s3cret"}


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def ca_file(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("tls") / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


def proxied_broker(tmp: Path, proxy: SecureProxy) -> EmbeddedBroker:
    b = EmbeddedBroker(tmp / "data", settings={"advertised.listeners": proxy.address}).start()
    proxy.upstream = b.bootstrap
    return b


@pytest.fixture
def tls_proxy(ca: trustme.CA) -> Iterator[SecureProxy]:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(ctx)
    with SecureProxy(tls=ctx) as proxy:
        yield proxy


def open_transaction(conf: dict[str, Any], topic: str, tid: str) -> Producer:
    p = Producer({**conf, "transactional.id": tid, "enable.sparse.connections": False})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"x", partition=0)
    assert p.flush(30) == 0
    return p


def test_tls_end_to_end(tmp_path: Path, tls_proxy: SecureProxy, ca_file: str) -> None:
    """One ClientConfig serves librdkafka (AdminClient, producer) and the protocol client."""
    b = proxied_broker(tmp_path, tls_proxy)
    try:
        cfg = ClientConfig.of(
            tls_proxy.address, {"security.protocol": "SSL", "ssl.ca.location": ca_file}
        )
        with Admin(cfg) as admin, TxnAdmin(cfg) as txns:
            admin.create_topics(["secure"], 2)
            assert admin.topics()["secure"] == 2
            producer = open_transaction(cfg.librdkafka(), "secure", "tls-txn")
            state = txns.describe_txn("tls-txn")
            assert state.transaction_state == "Ongoing"
            assert admin.list_offsets([("secure", 0)], LATEST, read_committed=True) == {
                ("secure", 0): 0
            }
            assert (
                txns.end_txn("tls-txn", state.producer_id, state.producer_epoch, commit=True)
                == ErrorCode.none
            )
            assert txns.describe_txn("tls-txn").transaction_state in (
                "PrepareCommit",
                "CompleteCommit",
            )
            assert [t.transactional_id for t in txns.list_transactions(("Ongoing",))] == []
            del producer
        assert tls_proxy.accepted >= 2  # librdkafka and the protocol client both came through TLS
    finally:
        b.stop()


def test_tls_with_an_untrusted_certificate_fails_at_once(
    tmp_path: Path, tls_proxy: SecureProxy
) -> None:
    other = trustme.CA()
    bad_ca = tmp_path / "other-ca.pem"
    other.cert_pem.write_to_path(str(bad_ca))
    tls_proxy.upstream = "127.0.0.1:1"  # never reached
    cfg = ClientConfig.of(
        tls_proxy.address, {"security.protocol": "SSL", "ssl.ca.location": str(bad_ca)}
    )
    with (
        TxnAdmin(cfg, policy=RetryPolicy(deadline_s=30)) as txns,
        pytest.raises(AuthenticationError, match="TLS handshake .* failed") as info,
    ):
        txns.list_transactions()
    assert not info.value.retriable
    assert tls_proxy.accepted == 1  # not retried, and no fallback to PLAINTEXT


@pytest.mark.parametrize(
    ("protocol", "mechanism"),
    [("SASL_SSL", "SCRAM-SHA-256"), ("SASL_SSL", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "PLAIN")],
)
def test_sasl_through_the_proxy(
    tmp_path: Path, ca: trustme.CA, ca_file: str, protocol: str, mechanism: str
) -> None:
    ctx = None
    if protocol == "SASL_SSL":
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1").configure_cert(ctx)
    with SecureProxy(tls=ctx, users=USERS) as proxy:
        b = proxied_broker(tmp_path, proxy)
        try:
            # librdkafka would be sent here too (the broker advertises the proxy) but speaks
            # ApiVersions before SASL, which this proxy does not relay: protocol client only.
            sec = {
                "security.protocol": protocol,
                "ssl.ca.location": ca_file,
                "sasl.mechanism": mechanism,
                "sasl.username": "alice",
                "sasl.password": "s3cret",
            }
            with TxnAdmin(ClientConfig.of(proxy.address, sec)) as txns:
                assert txns.topics() == {
                    "__consumer_offsets": 50,
                    "__transaction_state": 50,
                }  # Metadata
                assert txns.describe_txn("nobody") is None  # FindCoordinator, DescribeTransactions
                assert txns.list_transactions() == []  # ListTransactions on every node
            assert proxy.authenticated and set(proxy.authenticated) == {"alice"}
            wrong = {**sec, "sasl.password": "nope"}
            before = proxy.accepted
            with (
                TxnAdmin(
                    ClientConfig.of(proxy.address, wrong), policy=RetryPolicy(deadline_s=30)
                ) as txns,
                pytest.raises(AuthenticationError) as info,
            ):
                txns.topics()
            assert info.value.error_code == ErrorCode.sasl_authentication_failed
            assert proxy.accepted == before + 1  # refused once, not retried
        finally:
            b.stop()


def test_unknown_security_protocol_is_refused_before_connecting(tls_proxy: SecureProxy) -> None:
    with pytest.raises(ClientConfigError, match="security.protocol must be one of"):
        ClientConfig.of(tls_proxy.address, {"security.protocol": "SSL_SASL"})
    assert tls_proxy.accepted == 0
