"""ApiVersions coverage: what the broker advertises is exactly the table below, and
every claimed range lies inside Kafka 4.x's. Changing a module's ``API`` range without
updating this table (and saying what the new versions implement) fails here.

Kafka's ranges are the ``validVersions`` of Kafka 4.x's
``clients/src/main/resources/common/message/*Request.json`` (the 4.x schemas bundled with
kafka-python 3.0.12, checked against apache/kafka); 4.0 removed the versions below each
minimum (KIP-896): WriteTxnMarkers v0 is among them, v1 is its baseline.
"""

from __future__ import annotations

from oncelog.broker.apis.registry import build_registry
from oncelog.protocol.api_keys import ApiKey

# api: (our min, our max, Kafka 4.x min, Kafka 4.x max, why we stop below Kafka's max)
CLAIMS: dict[ApiKey, tuple[int, int, int, int, str]] = {
    ApiKey.PRODUCE: (3, 12, 3, 13, "v13: topic ids instead of names (KIP-516)"),
    ApiKey.FETCH: (4, 17, 4, 18, "v18: a follower's high watermark (KIP-1166)"),
    ApiKey.LIST_OFFSETS: (
        1,
        7,
        1,
        11,
        "v8+: tiered-storage offset specs (KIP-405, -1005, -1075, -1023)",
    ),
    ApiKey.METADATA: (0, 12, 0, 13, "v13: top-level error code (KIP-1102)"),
    ApiKey.OFFSET_COMMIT: (2, 9, 2, 10, "v10: topic ids instead of names (KIP-848)"),
    ApiKey.OFFSET_FETCH: (1, 9, 1, 10, "v10: topic ids"),
    ApiKey.FIND_COORDINATOR: (0, 4, 0, 6, "v5 TRANSACTION_ABORTABLE, v6 share groups"),
    ApiKey.JOIN_GROUP: (0, 9, 0, 9, ""),
    ApiKey.HEARTBEAT: (0, 4, 0, 4, ""),
    ApiKey.LEAVE_GROUP: (0, 5, 0, 5, ""),
    ApiKey.SYNC_GROUP: (0, 5, 0, 5, ""),
    ApiKey.DESCRIBE_GROUPS: (0, 5, 0, 6, "v6: GROUP_ID_NOT_FOUND (KIP-1043)"),
    ApiKey.LIST_GROUPS: (0, 5, 0, 5, ""),
    ApiKey.SASL_HANDSHAKE: (1, 1, 0, 1, ""),
    ApiKey.API_VERSIONS: (0, 4, 0, 4, ""),
    ApiKey.CREATE_TOPICS: (2, 7, 2, 7, ""),
    ApiKey.DELETE_TOPICS: (1, 6, 1, 6, ""),
    ApiKey.DELETE_RECORDS: (0, 2, 0, 2, ""),
    ApiKey.INIT_PRODUCER_ID: (0, 6, 0, 6, ""),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 4, 0, 5, "v5: TRANSACTION_ABORTABLE (TV2 work)"),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3, 0, 4, "v4: TRANSACTION_ABORTABLE (TV2 work)"),
    ApiKey.END_TXN: (0, 5, 0, 5, ""),
    ApiKey.WRITE_TXN_MARKERS: (1, 1, 1, 2, "v2: marker transaction version (KIP-1228)"),
    ApiKey.TXN_OFFSET_COMMIT: (0, 5, 0, 5, ""),
    ApiKey.DESCRIBE_ACLS: (1, 3, 1, 3, ""),
    ApiKey.CREATE_ACLS: (1, 3, 1, 3, ""),
    ApiKey.DELETE_ACLS: (1, 3, 1, 3, ""),
    ApiKey.DESCRIBE_CONFIGS: (1, 4, 1, 4, ""),
    ApiKey.ALTER_CONFIGS: (0, 2, 0, 2, ""),
    ApiKey.SASL_AUTHENTICATE: (0, 2, 0, 2, ""),
    ApiKey.CREATE_PARTITIONS: (0, 3, 0, 3, ""),
    ApiKey.DELETE_GROUPS: (0, 2, 0, 2, ""),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1, 0, 1, ""),
    ApiKey.OFFSET_DELETE: (0, 0, 0, 0, ""),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0, 0, 0, ""),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0, 0, 0, ""),
    ApiKey.DESCRIBE_CLUSTER: (0, 1, 0, 2, "v2: IncludeFencedBrokers (KIP-1073)"),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0, 0, 0, ""),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0, 0, 0, ""),
    ApiKey.LIST_TRANSACTIONS: (0, 1, 0, 2, "v2: transactional id pattern (KIP-1152)"),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0, 0, 0, ""),
    # KIP-848: v0 the coordinator may make member ids, v1 the client must (and regexes).
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1, 0, 1, ""),
    # v1 adds member_type.
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1, 0, 1, ""),
}


def test_advertised_ranges_are_exactly_the_claimed_ones() -> None:
    advertised = {ApiKey(k): (s.min_version, s.max_version) for k, s in build_registry().items()}
    assert advertised == {api: (lo, hi) for api, (lo, hi, *_) in CLAIMS.items()}


def test_every_claim_lies_within_kafka_4x_and_says_why_it_stops_short() -> None:
    for api, (lo, hi, kafka_lo, kafka_hi, why) in CLAIMS.items():
        assert kafka_lo <= lo <= hi <= kafka_hi, api.name
        assert (hi < kafka_hi) == bool(why), api.name


def test_write_txn_markers_v0_is_not_a_kafka_4x_version() -> None:
    """No WriteTxnMarkers v0: Kafka 4.0 removed it (v1 is the baseline),
    and kio, generated from Kafka 4.x schemas, has only v1 and v2."""
    import importlib.util

    assert importlib.util.find_spec("kio.schema.write_txn_markers.v0") is None
    assert importlib.util.find_spec("kio.schema.write_txn_markers.v1") is not None
    assert CLAIMS[ApiKey.WRITE_TXN_MARKERS][2] == 1
