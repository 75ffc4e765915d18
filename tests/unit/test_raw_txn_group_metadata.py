"""librdkafka's serialised consumer group metadata, as confluent-kafka 2.16 hands it out
(blobs taken from real consumers of a classic and a KIP-848 group)."""

from __future__ import annotations

import pytest

from oncelog.testing.raw_txn import GroupMetadata


def test_classic_member() -> None:
    blob = b"CGMDv2:\x01\x00\x00\x00grp-classic\x00rdkafka-90b0a59d-cb91\x00\x01"
    assert GroupMetadata.from_librdkafka(blob) == GroupMetadata(
        "grp-classic", 1, "rdkafka-90b0a59d-cb91", None
    )


def test_consumer_protocol_member_epoch() -> None:
    blob = b"CGMDv2:\x07\x00\x00\x00grp-consumer\x00UkyGBDr1TfaZEklaNK51Fw\x00\x01"
    assert GroupMetadata.from_librdkafka(blob) == GroupMetadata(
        "grp-consumer", 7, "UkyGBDr1TfaZEklaNK51Fw", None
    )


def test_unassigned_consumer_and_static_member() -> None:
    assert GroupMetadata.from_librdkafka(b"CGMDv2:\xff\xff\xff\xffg\x00\x00\x01") == (
        GroupMetadata("g", -1, "", None)
    )
    # a static member (group.instance.id): flag 0, then the id
    blob = b"CGMDv2:\x02\x00\x00\x00g\x00m\x00\x00inst-1\x00"
    assert GroupMetadata.from_librdkafka(blob) == GroupMetadata("g", 2, "m", "inst-1")


def test_rejects_other_bytes() -> None:
    with pytest.raises(ValueError):
        GroupMetadata.from_librdkafka(b"CGMDv1:\x00")
