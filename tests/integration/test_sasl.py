"""SASL (PLAIN, SCRAM-SHA-256/512) on SASL_PLAINTEXT and SASL_SSL listeners,
with confluent-kafka, kafka-python and aiokafka; SCRAM credentials over the Admin API."""

from __future__ import annotations

import asyncio
import ssl
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from aiokafka.errors import KafkaError as AIOKafkaError
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.errors import KafkaError as KafkaPythonError
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import request as md

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker
from tests.integration.helpers import create_topic
from tests.integration.security import (
    PLAIN_USERS,
    TlsFiles,
    confluent_sasl,
    make_tls,
    plain_login,
    secured_settings,
)

# xdist (make test): one worker runs this module, so its module-scoped fixture starts once.
pytestmark = pytest.mark.xdist_group("test_sasl")

SCRAM_USER, SCRAM_PASSWORD = "carol", "carol-scram-secret"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls(tmp_path_factory.mktemp("tls"))


def add_scram_user(bootstrap: str, user: str, password: str, mechanism: ScramMechanism) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(mechanism, 4096), password.encode()
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(15)


@pytest.fixture
def secured(tmp_path: Path, tls: TlsFiles) -> Iterator[EmbeddedBroker]:
    b = EmbeddedBroker(tmp_path / "data", settings=secured_settings(tls)).start()
    try:
        add_scram_user(
            b.bootstrap_for("PLAINTEXT"), SCRAM_USER, SCRAM_PASSWORD, ScramMechanism.SCRAM_SHA_512
        )
        yield b
    finally:
        b.stop()


# (listener, mechanism, user, password): the two secured paths every client must take
PATHS = [
    pytest.param(
        "SASL_SSL", "SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD, id="SASL_SSL-SCRAM-SHA-512"
    ),
    pytest.param(
        "SASL_PLAINTEXT", "PLAIN", "alice", PLAIN_USERS["alice"], id="SASL_PLAINTEXT-PLAIN"
    ),
]


def _records(n: int) -> list[bytes]:
    return [b"r%03d" % i for i in range(n)]


@pytest.mark.parametrize(("listener", "mechanism", "user", "password"), PATHS)
def test_confluent_transactional_round_trip(
    secured: EmbeddedBroker, tls: TlsFiles, listener: str, mechanism: str, user: str, password: str
) -> None:
    topic = f"sasl-{uuid.uuid4().hex[:8]}"
    create_topic(secured.bootstrap_for("PLAINTEXT"), topic)
    conf = confluent_sasl(
        listener, mechanism, user, password, tls if listener == "SASL_SSL" else None
    )
    boot = secured.bootstrap_for(listener)
    producer = Producer({"bootstrap.servers": boot, "transactional.id": f"tx-{topic}", **conf})
    producer.init_transactions(20)
    for committed in (True, False, True):
        producer.begin_transaction()
        for value in _records(10):
            producer.produce(topic, value=value + (b"c" if committed else b"a"), partition=0)
        if committed:
            producer.commit_transaction(20)
        else:
            producer.abort_transaction(20)
    consumer = Consumer(
        {
            "bootstrap.servers": boot,
            "group.id": f"g-{topic}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            **conf,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 20 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert got == [v + b"c" for v in _records(10)] * 2


@pytest.mark.parametrize(("listener", "mechanism", "user", "password"), PATHS)
def test_kafka_python_transactional_round_trip(
    secured: EmbeddedBroker, tls: TlsFiles, listener: str, mechanism: str, user: str, password: str
) -> None:
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    create_topic(secured.bootstrap_for("PLAINTEXT"), topic)
    conf: dict[str, Any] = {
        "bootstrap_servers": secured.bootstrap_for(listener),
        "security_protocol": listener,
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }
    if listener == "SASL_SSL":
        conf["ssl_cafile"] = str(tls.ca)
    producer = KafkaProducer(transactional_id=f"kp-{topic}", **conf)
    producer.init_transactions()
    producer.begin_transaction()
    for value in _records(10):
        producer.send(topic, value, partition=0)
    producer.abort_transaction()
    producer.begin_transaction()
    for value in _records(10):
        producer.send(topic, value + b"!", partition=0)
    producer.commit_transaction()
    producer.close()
    consumer = KafkaConsumer(isolation_level="read_committed", consumer_timeout_ms=8000, **conf)
    consumer.assign([KTopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got = [r.value for r in consumer]
    consumer.close()
    assert got == [v + b"!" for v in _records(10)]


@pytest.mark.parametrize(("listener", "mechanism", "user", "password"), PATHS)
def test_aiokafka_transactional_round_trip(
    secured: EmbeddedBroker, tls: TlsFiles, listener: str, mechanism: str, user: str, password: str
) -> None:
    topic = f"aio-{uuid.uuid4().hex[:8]}"
    create_topic(secured.bootstrap_for("PLAINTEXT"), topic)

    async def run() -> list[bytes]:
        conf: dict[str, Any] = {
            "bootstrap_servers": secured.bootstrap_for(listener),
            "security_protocol": listener,
            "sasl_mechanism": mechanism,
            "sasl_plain_username": user,
            "sasl_plain_password": password,
        }
        if listener == "SASL_SSL":
            conf["ssl_context"] = ssl.create_default_context(cafile=str(tls.ca))
        producer = AIOKafkaProducer(transactional_id=f"aio-{topic}", **conf)
        await producer.start()
        try:
            async with producer.transaction():
                for value in _records(10):
                    await producer.send(topic, value, partition=0)
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"aborted", partition=0)
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send(topic, b"last", partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            isolation_level="read_committed", auto_offset_reset="earliest", **conf
        )
        await consumer.start()
        try:
            tp = AioTopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got: list[bytes] = []
            deadline = time.monotonic() + 20
            while len(got) < 11 and time.monotonic() < deadline:
                batch = await consumer.getmany(tp, timeout_ms=500)
                got += [r.value for r in batch.get(tp, [])]
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [*_records(10), b"last"]


def _error_codes(conf: dict[str, object], boot: str) -> list[int]:
    errors: list[KafkaError] = []
    p = Producer({"bootstrap.servers": boot, "error_cb": errors.append, **conf})
    with pytest.raises(KafkaException):
        p.list_topics(timeout=1)
    # The error callback fires within milliseconds; poll for it instead of a fixed wait.
    deadline = time.monotonic() + 8
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        if time.monotonic() > deadline:
            break
        p.poll(0.1)
    return [e.code() for e in errors]


@pytest.mark.parametrize(("listener", "mechanism", "user", "password"), PATHS)
def test_a_wrong_password_is_an_authentication_error_not_a_timeout(
    secured: EmbeddedBroker,
    tls: TlsFiles,
    listener: str,
    mechanism: str,
    user: str,
    password: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    boot = secured.bootstrap_for(listener)
    conf = confluent_sasl(
        listener, mechanism, user, password + "x", tls if listener == "SASL_SSL" else None
    )
    started = time.monotonic()
    assert KafkaError._AUTHENTICATION in _error_codes(conf, boot)
    assert time.monotonic() - started < 10
    # kafka-python and aiokafka surface it as an authentication failure too
    kconf: dict[str, Any] = {
        "bootstrap_servers": boot,
        "security_protocol": listener,
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password + "x",
    }
    if listener == "SASL_SSL":
        kconf["ssl_cafile"] = str(tls.ca)
    # kafka-python (3.x) retries bootstrap in __init__ until bootstrap_timeout_ms (default
    # 30 s; max_block_ms does not bound it), each attempt failing with error 58
    with pytest.raises(KafkaPythonError):
        KafkaProducer(**kconf, max_block_ms=3000, bootstrap_timeout_ms=3000)
    failures = [
        r.getMessage() for r in caplog.records if "SaslAuthenticationFailedError" in r.getMessage()
    ]
    assert failures and "socket disconnected" not in failures[0], [
        r.getMessage() for r in caplog.records
    ][-15:]
    log = secured.tail_log(200)
    failed = [
        line
        for line in log.splitlines()
        if "127.0.0.1:" in line and "INFO" in line and "effective config" not in line
    ]
    assert failed and all(f"mechanism {mechanism}, listener {listener}" in line for line in failed)

    async def aio() -> None:
        aconf = {k: v for k, v in kconf.items() if k != "ssl_cafile"}
        if listener == "SASL_SSL":
            aconf["ssl_context"] = ssl.create_default_context(cafile=str(tls.ca))
        producer = AIOKafkaProducer(**aconf)
        try:
            await producer.start()
        finally:
            await producer.stop()

    caplog.clear()
    with pytest.raises(AIOKafkaError):
        asyncio.run(aio())
    aio_failures = [r.getMessage() for r in caplog.records if r.name.startswith("aiokafka")]
    assert any("SaslAuthenticationFailed" in m or "Error 58" in m for m in aio_failures), (
        aio_failures
    )


def test_unknown_user_and_disabled_mechanism_fail_fast(
    secured: EmbeddedBroker, tls: TlsFiles
) -> None:
    # PLAIN is not enabled on SASL_SSL, SCRAM-SHA-256 has no credential for carol
    for mechanism, user in (
        ("PLAIN", "alice"),
        ("SCRAM-SHA-256", SCRAM_USER),
        ("SCRAM-SHA-512", "nobody"),
    ):
        conf = confluent_sasl("SASL_SSL", mechanism, user, "pw", tls)
        assert KafkaError._AUTHENTICATION in _error_codes(conf, secured.bootstrap_for("SASL_SSL"))


def assert_metadata_closes(c: WireClient) -> None:
    """A Metadata request is answered by closing the connection."""
    request = md.MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    c.send_raw(c.encode(request, 7))
    c.sock.settimeout(5)
    assert c.sock.recv(1) == b""


def test_unauthenticated_requests_are_refused_and_others_unaffected(
    secured: EmbeddedBroker,
) -> None:
    port = secured.ports["SASL_PLAINTEXT"]
    with WireClient(f"127.0.0.1:{port}") as c:
        # ApiVersions is served before authentication ...
        resp = c.request(
            ApiVersionsRequest(client_software_name="probe", client_software_version="1")
        )
        assert resp.error_code == ErrorCode.none
        # ... Metadata is not: the connection is closed.
        assert_metadata_closes(c)
    # an oversized frame before authentication (sasl.server.max.receive.size) is refused unread
    with WireClient(f"127.0.0.1:{port}") as c:
        c.send_raw(struct.pack(">i", 524289) + b"\0" * 64)
        c.sock.settimeout(5)
        assert c.sock.recv(1) == b""
    conf = confluent_sasl("SASL_PLAINTEXT", "PLAIN", "bob", PLAIN_USERS["bob"])
    admin = AdminClient({"bootstrap.servers": secured.bootstrap_for("SASL_PLAINTEXT"), **conf})
    assert admin.list_topics(timeout=10).brokers
    assert "METADATA request before SASL authentication" in secured.tail_log(100)


def test_scram_credentials_are_managed_by_the_admin_api_and_survive_a_restart(
    secured: EmbeddedBroker, tls: TlsFiles
) -> None:
    admin = AdminClient({"bootstrap.servers": secured.bootstrap_for("PLAINTEXT")})
    add_scram_user(
        secured.bootstrap_for("PLAINTEXT"), "dave", "dave-pw", ScramMechanism.SCRAM_SHA_256
    )
    described = admin.describe_user_scram_credentials().result(15)
    assert {
        u: sorted((i.mechanism.value, i.iterations) for i in d.scram_credential_infos)
        for u, d in described.items()
    } == {
        SCRAM_USER: [(ScramMechanism.SCRAM_SHA_512.value, 4096)],
        "dave": [(ScramMechanism.SCRAM_SHA_256.value, 4096)],
    }
    stored = (secured.data_dir / "meta" / "scram_credentials.json").read_text()
    assert "dave-pw" not in stored and SCRAM_PASSWORD not in stored
    # bad requests get Kafka's per-user errors
    futures = admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                "erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw"
            ),
            UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_512),
        ]
    )
    with pytest.raises(KafkaException) as too_few:
        futures["erin"].result(15)
    assert too_few.value.args[0].code() == KafkaError.UNACCEPTABLE_CREDENTIAL
    with pytest.raises(KafkaException) as missing:
        futures["nobody"].result(15)
    assert missing.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND

    secured.restart()
    conf = confluent_sasl("SASL_SSL", "SCRAM-SHA-256", "dave", "dave-pw", tls)
    assert (
        AdminClient({"bootstrap.servers": secured.bootstrap_for("SASL_SSL"), **conf})
        .list_topics(timeout=10)
        .brokers
    )
    admin = admin_after(secured)
    deletion = [UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_256)]
    for future in admin.alter_user_scram_credentials(deletion).values():
        future.result(15)
    assert KafkaError._AUTHENTICATION in _error_codes(conf, secured.bootstrap_for("SASL_SSL"))


def admin_after(broker: EmbeddedBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_for("PLAINTEXT")})


def test_reauthentication_kip_368(tmp_path: Path, tls: TlsFiles) -> None:
    settings = secured_settings(
        tls, **{"listener.name.sasl_plaintext.connections.max.reauth.ms": "1500"}
    )
    with EmbeddedBroker(tmp_path / "data", settings=settings) as b:
        topic = f"reauth-{uuid.uuid4().hex[:8]}"
        create_topic(b.bootstrap_for("PLAINTEXT"), topic)
        conf = confluent_sasl("SASL_PLAINTEXT", "PLAIN", "alice", PLAIN_USERS["alice"])
        producer = Producer({"bootstrap.servers": b.bootstrap_for("SASL_PLAINTEXT"), **conf})
        delivered: list[int] = []
        for _ in range(4):
            producer.produce(
                topic, b"x", partition=0, on_delivery=lambda e, m: delivered.append(m.offset())
            )
            assert producer.flush(10) == 0
            time.sleep(1.0)
        assert delivered == [0, 1, 2, 3]
        # librdkafka re-authenticated before expiry: the broker never closed its connection for it
        assert "SASL session expired" not in b.tail_log(300)
        # a client that does not re-authenticate is cut off once its session expires
        with WireClient(f"127.0.0.1:{b.ports['SASL_PLAINTEXT']}") as c:
            resp = plain_login(c, "alice", PLAIN_USERS["alice"])
            assert resp.session_lifetime.total_seconds() == 1.5
            time.sleep(1.7)
            assert_metadata_closes(c)
        assert "SASL session expired" in b.tail_log(50)
