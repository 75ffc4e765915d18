"""One connection serves its requests one at a time and answers them in order."""

from __future__ import annotations

import datetime
import time

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fe
from kio.schema.metadata.v12 import request as md
from kio.schema.produce.v9 import request as pr

from oncelog.client.wire import WireClient
from oncelog.embedded import EmbeddedBroker
from oncelog.protocol.messages import make
from oncelog.records.builder import build_batch

from .helpers import create_topic

WAIT_MS = 400


def test_pipelined_requests_are_answered_in_order(broker: EmbeddedBroker, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    fetch = make(
        fe.FetchRequest,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=WAIT_MS),
        min_bytes=1,
        max_bytes=1 << 20,
        session_epoch=-1,
        topics=(
            make(
                fe.FetchTopic,
                topic=topic_name,
                partitions=(
                    make(
                        fe.FetchPartition,
                        partition=0,
                        fetch_offset=0,
                        partition_max_bytes=1 << 20,
                        current_leader_epoch=-1,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                    ),
                ),
            ),
        ),
        rack_id="",
    )
    produce = pr.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(
            pr.TopicProduceData(
                name=topic_name,
                partition_data=(
                    pr.PartitionProduceData(
                        index=0, records=build_batch([(b"k", b"v", None, int(time.time() * 1000))])
                    ),
                ),
            ),
        ),
    )
    versions = ApiVersionsRequest(client_software_name="order", client_software_version="1")
    metadata = md.MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    requests = [fetch, produce, versions, metadata, versions]
    with WireClient(broker.bootstrap) as c:
        start = time.monotonic()
        c.send_raw(b"".join(c.encode(req, cid) for cid, req in enumerate(requests, 1)))
        # decode_response checks each frame's correlation id against the expected one
        responses = [
            c.decode_response(req.__api_key__, req.__version__, c.recv_frame(), cid)
            for cid, req in enumerate(requests, 1)
        ]
        elapsed = time.monotonic() - start
    fetched, produced, *_ = responses
    # The fetch long-polled to its max wait before the produce behind it ran: no record yet.
    assert fetched.responses[0].partitions[0].records == b""
    assert fetched.responses[0].partitions[0].high_watermark == 0
    assert elapsed >= WAIT_MS / 1000 * 0.9
    part = produced.responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset) == (ErrorCode.none, 0)
    assert responses[2].error_code == ErrorCode.none and responses[4].error_code == ErrorCode.none
    assert topic_name in {t.name for t in responses[3].topics}
