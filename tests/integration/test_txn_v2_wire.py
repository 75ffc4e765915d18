"""Transaction version 2 (KIP-890 part 2) at the wire, with exact error codes and epochs.

No installed client negotiates TV2 (librdkafka 2.16 sends EndTxn v1 and Produce v10,
kafka-python 3.0.12 and aiokafka stay on TV1), so these follow Kafka's TransactionsTest by
hand: Produce v12 adds partitions implicitly, TxnOffsetCommit v5 adds the group's offsets
partition, EndTxn v5 bumps the epoch and returns it, the old epoch is fenced."""

from __future__ import annotations

import datetime
import time

from kio.schema.api_versions.v3 import request as av3
from kio.schema.api_versions.v4 import request as av4
from kio.schema.end_txn.v5 import request as et
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v5 import request as ip
from kio.schema.offset_fetch.v7 import request as of
from kio.schema.produce.v12 import request as pr
from kio.schema.txn_offset_commit.v5 import request as toc

from oncelog.client.config import ClientConfig
from oncelog.client.transactions import TxnAdmin
from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker
from oncelog.protocol.api_keys import ApiKey
from oncelog.records.builder import build_batch

from .helpers import create_topic
from .test_transactions import READ_COMMITTED, READ_UNCOMMITTED, end_offsets, read_all

T = datetime.timedelta(seconds=30)
TXN = "tv2-txn"


def produce_v12(
    c: WireClient,
    topic: str,
    partitions: tuple[int, ...],
    pid: int,
    epoch: int,
    seq: int,
    transactional_id: str = TXN,
) -> list[ErrorCode]:
    batch = lambda p: build_batch(  # noqa: E731
        [(None, b"%d-%d-%d" % (epoch, p, seq), None, int(time.time() * 1000))],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )
    resp = c.request(
        pr.ProduceRequest(
            transactional_id=transactional_id,
            acks=-1,
            timeout=T,
            topic_data=(
                pr.TopicProduceData(
                    name=topic,
                    partition_data=tuple(
                        pr.PartitionProduceData(index=p, records=batch(p)) for p in partitions
                    ),
                ),
            ),
        )
    )
    return [p.error_code for p in resp.responses[0].partition_responses]


def end_v5(
    c: WireClient, pid: int, epoch: int, commit: bool, transactional_id: str = TXN
) -> tuple[ErrorCode, int, int]:
    r = c.request(
        et.EndTxnRequest(
            transactional_id=transactional_id,
            producer_id=pid,
            producer_epoch=epoch,
            committed=commit,
        )
    )
    return r.error_code, r.producer_id, r.producer_epoch


def init(c: WireClient) -> tuple[int, int]:
    r = c.request(
        ip.InitProducerIdRequest(
            transactional_id=TXN, transaction_timeout=T, producer_id=-1, producer_epoch=-1
        )
    )
    assert r.error_code == ErrorCode.none
    return r.producer_id, r.producer_epoch


def wait_for(pred, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not pred() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pred()


def test_api_versions_advertise_transaction_version_2(broker: EmbeddedBroker) -> None:
    with WireClient(broker.bootstrap) as c:
        v4 = c.request(
            av4.ApiVersionsRequest(client_software_name="t", client_software_version="1")
        )
        v3 = c.request(
            av3.ApiVersionsRequest(client_software_name="t", client_software_version="1")
        )
    for resp in (v3, v4):
        ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert ranges[ApiKey.END_TXN] == (0, 5)
        assert ranges[ApiKey.PRODUCE] == (3, 12)
        assert ranges[ApiKey.TXN_OFFSET_COMMIT] == (0, 5)
        assert ranges[ApiKey.API_VERSIONS] == (0, 4)
        assert ranges[ApiKey.INIT_PRODUCER_ID] == (0, 6)
        assert resp.finalized_features_epoch == 0
        assert [
            (f.name, f.min_version_level, f.max_version_level) for f in resp.finalized_features
        ] == [("group.version", 1, 1), ("transaction.version", 2, 2)]
    assert [(f.name, f.min_version, f.max_version) for f in v4.supported_features] == [
        ("group.version", 0, 1),
        ("transaction.version", 0, 2),
    ]
    assert v3.supported_features == ()  # KAFKA-17011: a 0 minimum only from v4 on


def test_finalized_level_follows_the_setting(tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings = {"oncelog.feature.transaction.version": "1"}
    with EmbeddedBroker(tmp_path / "data", settings=settings) as b, WireClient(b.bootstrap) as c:
        resp = c.request(
            av4.ApiVersionsRequest(client_software_name="t", client_software_version="1")
        )
    assert [(f.name, f.max_version_level) for f in resp.finalized_features] == [
        ("group.version", 1),
        ("transaction.version", 1),
    ]


def test_commit_and_abort_with_implicit_adds_and_epoch_bumps(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, 3)
    with WireClient(broker.bootstrap) as c, TxnAdmin(ClientConfig(broker.bootstrap)) as admin:
        pid, epoch = init(c)
        # No AddPartitionsToTxn: Produce v12 puts partitions 0 and 1 into the transaction.
        assert produce_v12(c, topic_name, (0, 1), pid, epoch, 0) == [ErrorCode.none] * 2
        assert produce_v12(c, topic_name, (0,), pid, epoch, 1) == [ErrorCode.none]
        d = admin.describe_txn(TXN)
        assert d.transaction_state == "Ongoing" and d.producer_epoch == epoch
        assert sorted((t.topic, tuple(t.partitions)) for t in d.topics) == [(topic_name, (0, 1))]
        assert end_offsets(broker.bootstrap, topic_name, 3, READ_COMMITTED) == [0, 0, 0]
        # EndTxn v5 bumps the epoch and hands it back.
        assert end_v5(c, pid, epoch, commit=True) == (ErrorCode.none, pid, epoch + 1)
        wait_for(lambda: end_offsets(broker.bootstrap, topic_name, 3, READ_COMMITTED) == [3, 2, 0])
        # The markers carry the bumped epoch: the partitions' producer state shows it.
        producers = admin.describe_producers(topic_name, 0)
        assert [
            (p.producer_id, p.producer_epoch, p.current_txn_start_offset) for p in producers
        ] == [(pid, epoch + 1, -1)]
        # The retry of that EndTxn (previous epoch) succeeds without another bump.
        assert end_v5(c, pid, epoch, commit=True) == (ErrorCode.none, pid, epoch + 1)
        # The old epoch is fenced: a zombie batch of the finished transaction is refused.
        assert produce_v12(c, topic_name, (2,), pid, epoch, 2) == [ErrorCode.invalid_producer_epoch]
        # Next transaction at the new epoch (sequences restart at 0), aborted.
        assert produce_v12(c, topic_name, (1, 2), pid, epoch + 1, 0) == [ErrorCode.none] * 2
        assert end_v5(c, pid, epoch + 1, commit=False) == (ErrorCode.none, pid, epoch + 2)
        wait_for(lambda: end_offsets(broker.bootstrap, topic_name, 3, READ_COMMITTED) == [3, 4, 2])
        d = admin.describe_txn(TXN)
        assert (d.transaction_state, d.producer_id, d.producer_epoch) == (
            "CompleteAbort",
            pid,
            epoch + 2,
        )
        # An abort with nothing produced still bumps (Kafka 4.x's TV2 table).
        assert end_v5(c, pid, epoch + 2, commit=False) == (ErrorCode.none, pid, epoch + 3)
        assert end_v5(c, pid, epoch + 3, commit=True) == (ErrorCode.invalid_txn_state, -1, -1)
    assert end_offsets(broker.bootstrap, topic_name, 3, READ_UNCOMMITTED) == [3, 4, 2]
    committed = read_all(broker.bootstrap, topic_name, 3, "read_committed", idle=1.0)
    assert sorted(m.value() for m in committed) == [
        b"%d-0-0" % epoch,
        b"%d-0-1" % epoch,
        b"%d-1-0" % epoch,
    ]


def test_txn_offset_commit_v5_adds_the_offsets_partition(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    group = f"g-{topic_name}"

    def commit(pid: int, epoch: int, offset: int) -> ErrorCode:
        r = c.request(
            toc.TxnOffsetCommitRequest(
                transactional_id=TXN,
                group_id=group,
                producer_id=pid,
                producer_epoch=epoch,
                generation_id=-1,
                member_id="",
                group_instance_id=None,
                topics=(
                    toc.TxnOffsetCommitRequestTopic(
                        name=topic_name,
                        partitions=(
                            toc.TxnOffsetCommitRequestPartition(
                                partition_index=0,
                                committed_offset=offset,
                                committed_leader_epoch=-1,
                                committed_metadata=None,
                            ),
                        ),
                    ),
                ),
            )
        )
        return r.topics[0].partitions[0].error_code

    def fetched() -> int:
        r = c.request(
            of.OffsetFetchRequest(
                group_id=group,
                topics=(of.OffsetFetchRequestTopic(name=topic_name, partition_indexes=(0,)),),
                require_stable=True,
            )
        )
        return r.topics[0].partitions[0].committed_offset

    with WireClient(broker.bootstrap) as c:
        pid, epoch = init(c)
        assert produce_v12(c, topic_name, (0,), pid, epoch, 0) == [ErrorCode.none]
        # No AddOffsetsToTxn: the commit itself adds the group's offsets partition.
        assert commit(pid, epoch, 17) == ErrorCode.none
        assert end_v5(c, pid, epoch, commit=True) == (ErrorCode.none, pid, epoch + 1)
        wait_for(lambda: fetched() == 17)
        # Aborted offsets never show; the stale epoch is fenced.
        assert commit(pid, epoch, 99) == ErrorCode.producer_fenced
        assert commit(pid, epoch + 1, 23) == ErrorCode.none
        assert end_v5(c, pid, epoch + 1, commit=False) == (ErrorCode.none, pid, epoch + 2)
        time.sleep(0.3)
        assert fetched() == 17


def test_tv2_state_survives_a_restart(tmp_path, topic_name: str) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "data"
    with EmbeddedBroker(data) as b:
        create_topic(b.bootstrap, topic_name, 1)
        with WireClient(b.bootstrap) as c:
            pid, epoch = init(c)
            assert produce_v12(c, topic_name, (0,), pid, epoch, 0) == [ErrorCode.none]
            assert end_v5(c, pid, epoch, commit=True) == (ErrorCode.none, pid, epoch + 1)
            wait_for(lambda: end_offsets(b.bootstrap, topic_name, 1, READ_COMMITTED) == [2])
    with EmbeddedBroker(data) as b, WireClient(b.bootstrap) as c:
        # The retry window and the bumped epoch are both still known.
        wait_for(lambda: end_v5(c, pid, epoch, commit=True) == (ErrorCode.none, pid, epoch + 1))
        assert produce_v12(c, topic_name, (0,), pid, epoch + 1, 0) == [ErrorCode.none]
        assert end_v5(c, pid, epoch + 1, commit=True) == (ErrorCode.none, pid, epoch + 2)
        wait_for(lambda: end_offsets(b.bootstrap, topic_name, 1, READ_COMMITTED) == [4])


def test_next_transactions_first_batch_waits_for_the_previous_markers(
    tmp_path, topic_name: str
) -> None:  # type: ignore[no-untyped-def]
    """EndTxn v5 answers once PrepareCommit is durable, before the markers: the producer's
    next batch (new epoch) is added implicitly only after the COMMIT marker, so it can never
    land inside the previous transaction."""
    settings = {"oncelog.debug.marker.delay.ms": "1500"}
    with EmbeddedBroker(tmp_path / "data", settings=settings) as b, WireClient(b.bootstrap) as c:
        create_topic(b.bootstrap, topic_name, 1)
        pid, epoch = init(c)
        assert produce_v12(c, topic_name, (0,), pid, epoch, 0) == [ErrorCode.none]
        assert end_v5(c, pid, epoch, commit=True) == (ErrorCode.none, pid, epoch + 1)
        started = time.monotonic()
        assert produce_v12(c, topic_name, (0,), pid, epoch + 1, 0) == [ErrorCode.none]
        assert time.monotonic() - started > 0.5  # it waited for the markers
        # record 0, COMMIT marker 1, then the new transaction's record 2 (still open)
        assert end_offsets(b.bootstrap, topic_name, 1, READ_UNCOMMITTED) == [3]
        assert end_offsets(b.bootstrap, topic_name, 1, READ_COMMITTED) == [2]
        assert end_v5(c, pid, epoch + 1, commit=True) == (ErrorCode.none, pid, epoch + 2)
        wait_for(lambda: end_offsets(b.bootstrap, topic_name, 1, READ_COMMITTED) == [4])
