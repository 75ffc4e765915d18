"""Malformed and invalid requests get Kafka's answer, and other clients keep working."""

from __future__ import annotations

import datetime
import socket
import struct
import time

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.create_topics.v7 import request as ct
from kio.schema.describe_configs.v4 import request as dc
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import request as md
from kio.schema.produce.v9 import request as pr
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker
from oncelog.records.builder import build_batch

from .helpers import create_topic

TIMEOUT = datetime.timedelta(seconds=5)


def assert_other_client_works(broker: EmbeddedBroker) -> None:
    with WireClient(broker.bootstrap) as c:
        resp = c.request(
            ApiVersionsRequest(client_software_name="probe", client_software_version="1")
        )
        assert resp.error_code == ErrorCode.none


def assert_closed(c: WireClient) -> None:
    c.sock.settimeout(5)
    try:
        data = c.sock.recv(1)
    except ConnectionResetError:
        data = b""
    assert data == b""


def produce_raw(c: WireClient, topic: str, partition: int, records: bytes | None, acks: int = -1):  # type: ignore[no-untyped-def]
    req = pr.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=TIMEOUT,
        topic_data=(
            pr.TopicProduceData(
                name=topic,
                partition_data=(pr.PartitionProduceData(index=partition, records=records),),
            ),
        ),
    )
    resp = c.request(req)
    return resp.responses[0].partition_responses[0]


def batch() -> bytearray:
    return bytearray(build_batch([(b"k", b"v", None, int(time.time() * 1000))]))


@pytest.fixture
def wire(broker: EmbeddedBroker):  # type: ignore[no-untyped-def]
    with WireClient(broker.bootstrap) as c:
        yield c


def test_bad_crc_is_corrupt_message(
    broker: EmbeddedBroker, wire: WireClient, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name)
    data = batch()
    data[-1] ^= 0xFF
    assert produce_raw(wire, topic_name, 0, bytes(data)).error_code == ErrorCode.corrupt_message
    good = produce_raw(wire, topic_name, 0, bytes(batch()))
    assert good.error_code == ErrorCode.none and good.base_offset == 0  # nothing was appended
    assert_other_client_works(broker)


def test_bad_magic_is_invalid_record(
    broker: EmbeddedBroker, wire: WireClient, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name)
    data = batch()
    data[16] = 1
    assert produce_raw(wire, topic_name, 0, bytes(data)).error_code == ErrorCode.invalid_record
    assert_other_client_works(broker)


@pytest.mark.parametrize("delta", [+10, -5])
def test_bad_batch_length_is_corrupt_message(
    broker: EmbeddedBroker, wire: WireClient, topic_name: str, delta: int
) -> None:
    create_topic(broker.bootstrap, topic_name)
    data = batch()
    (length,) = struct.unpack_from(">i", data, 8)
    struct.pack_into(">i", data, 8, length + delta)
    code = produce_raw(wire, topic_name, 0, bytes(data)).error_code
    # Longer than the data: CORRUPT_MESSAGE. Shorter: the CRC no longer matches.
    assert code == ErrorCode.corrupt_message
    assert_other_client_works(broker)


def test_two_batches_or_none_is_invalid_record(
    broker: EmbeddedBroker, wire: WireClient, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name)
    assert (
        produce_raw(wire, topic_name, 0, bytes(batch() + batch())).error_code
        == ErrorCode.invalid_record
    )
    assert produce_raw(wire, topic_name, 0, b"").error_code == ErrorCode.invalid_record


def test_oversized_batch_is_message_too_large(
    broker: EmbeddedBroker, wire: WireClient, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, config={"max.message.bytes": "1000"})
    big = build_batch([(None, b"x" * 5000, None, int(time.time() * 1000))])
    assert produce_raw(wire, topic_name, 0, big).error_code == ErrorCode.message_too_large


def test_unknown_partition_and_topic(
    broker: EmbeddedBroker, wire: WireClient, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, 2)
    assert (
        produce_raw(wire, topic_name, 2, bytes(batch())).error_code
        == ErrorCode.unknown_topic_or_partition
    )
    assert (
        produce_raw(wire, "no-such-topic", 0, bytes(batch())).error_code
        == ErrorCode.unknown_topic_or_partition
    )
    assert_other_client_works(broker)


def test_invalid_required_acks(broker: EmbeddedBroker, wire: WireClient, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    assert (
        produce_raw(wire, topic_name, 0, bytes(batch()), acks=2).error_code
        == ErrorCode.invalid_required_acks
    )


@pytest.mark.parametrize(
    "name", ["bad/name", "a" * 250, "..", "spaces are bad", "", "ends-in-newline\n"]
)
def test_invalid_topic_name(broker: EmbeddedBroker, wire: WireClient, name: str) -> None:
    resp = wire.request(
        ct.CreateTopicsRequest(
            topics=(
                ct.CreatableTopic(
                    name=name, num_partitions=1, replication_factor=1, assignments=(), configs=()
                ),
            ),
            timeout=TIMEOUT,
            validate_only=False,
        )
    )
    assert resp.topics[0].error_code == ErrorCode.invalid_topic_exception
    meta = wire.request(
        md.MetadataRequest(
            topics=(md.MetadataRequestTopic(topic_id=None, name=name),),
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        )
    )
    assert meta.topics[0].error_code == ErrorCode.invalid_topic_exception
    assert_other_client_works(broker)


def test_replication_factor_above_one(broker: EmbeddedBroker, wire: WireClient) -> None:
    resp = wire.request(
        ct.CreateTopicsRequest(
            topics=(
                ct.CreatableTopic(
                    name="rf3", num_partitions=1, replication_factor=3, assignments=(), configs=()
                ),
            ),
            timeout=TIMEOUT,
            validate_only=False,
        )
    )
    assert resp.topics[0].error_code == ErrorCode.invalid_replication_factor


def test_unknown_api_key_closes_connection(broker: EmbeddedBroker, wire: WireClient) -> None:
    wire.send_raw(struct.pack(">ihhih", 10, 999, 0, 1, -1))
    assert_closed(wire)
    assert_other_client_works(broker)


def test_unsupported_version_closes_connection(broker: EmbeddedBroker, wire: WireClient) -> None:
    wire.send_raw(struct.pack(">ihhih", 10, 3, 99, 1, -1))  # Metadata v99
    assert_closed(wire)
    assert_other_client_works(broker)


def test_api_versions_unsupported_version_falls_back_to_v0(
    broker: EmbeddedBroker, wire: WireClient
) -> None:
    wire.send_raw(struct.pack(">ihhih", 10, 18, 99, 42, -1))
    frame = wire.recv_frame()
    resp = WireClient.decode_response(18, 0, frame, 42)
    assert resp.error_code == ErrorCode.unsupported_version
    keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert keys[18] == (0, 4)
    assert keys[0][0] == 3


def test_malformed_body_closes_connection(broker: EmbeddedBroker, wire: WireClient) -> None:
    body = struct.pack(">hhih", 3, 12, 7, -1) + b"\x00\xff\xff\xff\xff\x13garbage"
    wire.send_raw(struct.pack(">i", len(body)) + body)
    assert_closed(wire)
    assert_other_client_works(broker)


def test_truncated_frame_and_negative_size(broker: EmbeddedBroker) -> None:
    with socket.create_connection(("127.0.0.1", broker.port)) as s:
        s.sendall(struct.pack(">i", 100) + b"\x00\x03\x00")
        s.shutdown(socket.SHUT_WR)
        s.settimeout(5)
        assert s.recv(1) == b""
    with socket.create_connection(("127.0.0.1", broker.port)) as s:
        s.sendall(struct.pack(">i", -7))
        s.settimeout(5)
        assert s.recv(1) == b""
    assert_other_client_works(broker)


def test_frame_above_socket_request_max_bytes(broker: EmbeddedBroker, wire: WireClient) -> None:
    wire.send_raw(struct.pack(">i", 104857600 + 1))
    assert_closed(wire)
    assert_other_client_works(broker)


def test_request_shorter_than_header(broker: EmbeddedBroker, wire: WireClient) -> None:
    wire.send_raw(struct.pack(">i", 3) + b"\x00\x03\x00")
    assert_closed(wire)
    assert_other_client_works(broker)


def test_a_topic_asked_for_many_times_is_answered_once(
    broker: EmbeddedBroker, wire: WireClient, topic_name: str
) -> None:
    """Kafka answers Metadata for the set of topics named: a request naming one topic
    thousands of times (as the fuzzer sends) costs one entry, not thousands."""
    create_topic(broker.bootstrap, topic_name, partitions=2)
    missing = f"{topic_name}-missing"
    names = [topic_name, missing] * 2000
    meta = wire.request(
        md.MetadataRequest(
            topics=tuple(md.MetadataRequestTopic(topic_id=None, name=n) for n in names),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    )
    assert [(t.name, t.error_code, len(t.partitions)) for t in meta.topics] == [
        (topic_name, ErrorCode.none, 2),
        (missing, ErrorCode.unknown_topic_or_partition, 0),
    ]


def test_a_config_resource_asked_for_many_times_is_answered_each_time(
    broker: EmbeddedBroker, wire: WireClient, topic_name: str
) -> None:
    """DescribeConfigs answers every resource in the request, repeats included (built
    once: the same answer)."""
    create_topic(broker.bootstrap, topic_name)
    topic, broker_res = (
        dc.DescribeConfigsResource(resource_type=2, resource_name=topic_name,
                                   configuration_keys=("cleanup.policy",)),
        dc.DescribeConfigsResource(resource_type=4, resource_name="0",
                                   configuration_keys=("num.partitions",)),
    )  # fmt: skip
    resp = wire.request(
        dc.DescribeConfigsRequest(
            resources=(topic, broker_res) * 500, include_synonyms=False, include_documentation=False
        )
    )
    got = [
        (r.resource_name, r.error_code, [(c.name, c.value) for c in r.configs])
        for r in resp.results
    ]
    assert (
        got
        == [
            (topic_name, ErrorCode.none, [("cleanup.policy", "delete")]),
            ("0", ErrorCode.none, [("num.partitions", "1")]),
        ]
        * 500
    )


def test_sasl_requests_on_a_plaintext_listener_keep_the_connection(wire: WireClient) -> None:
    """Kafka answers SaslHandshake and SaslAuthenticate on a listener without SASL with
    ILLEGAL_SASL_STATE and keeps the connection, with what is pipelined behind them."""
    handshake = SaslHandshakeRequest(mechanism="PLAIN")
    authenticate = SaslAuthenticateRequest(auth_bytes=b"\x00u\x00p")
    versions = ApiVersionsRequest(client_software_name="probe", client_software_version="1")
    sent = [(r, wire.send(r)) for r in (handshake, versions, authenticate, versions)]
    answers = [wire.receive(r, cid) for r, cid in sent]
    assert [a.error_code for a in answers] == [
        ErrorCode.illegal_sasl_state, ErrorCode.none, ErrorCode.illegal_sasl_state, ErrorCode.none,
    ]  # fmt: skip
    assert wire.request(versions).error_code == ErrorCode.none  # still open
