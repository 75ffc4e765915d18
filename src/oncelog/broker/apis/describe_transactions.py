"""DescribeTransactions (API 65, KIP-664): the coordinator's view of transactional ids."""

from __future__ import annotations

import datetime
from typing import Any

from kio._kio_native import tz_aware_from_i64
from kio.schema.errors import ErrorCode
from kio.static.primitive import i64

from oncelog.broker.apis.acl_checks import Op, Res
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


def _ms(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)


def _ts(ms: int) -> Any:
    # -1 for a transaction that has not started, as Kafka sends it. kio's decoder
    # refuses negative timestamps; our client decodes this response with
    # oncelog.client.describe_transactions_schema instead.
    return tz_aware_from_i64(i64(ms))


def describe_transactions(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    states = []
    for txn_id, meta in ctx.broker.txn.describe_transactions(req.transactional_ids):
        authorized = ctx.authorized(Op.DESCRIBE, Res.TRANSACTIONAL_ID, txn_id)
        if meta is None or not authorized:
            states.append(
                make(
                    r.TransactionState,
                    error_code=ErrorCode.transactional_id_authorization_failed
                    if not authorized
                    else ErrorCode.transactional_id_not_found,
                    transactional_id=txn_id,
                    transaction_state="",
                    transaction_timeout=_ms(0),
                    transaction_start_time=_ts(0),  # as Kafka: error entries keep defaults
                    producer_id=-1,
                    producer_epoch=-1,
                    topics=(),
                )
            )
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(meta.partitions):
            if not ctx.authorized(Op.DESCRIBE, Res.TOPIC, topic, log_denied=False):
                continue  # Kafka leaves out partitions of topics the caller cannot describe
            by_topic.setdefault(topic, []).append(p)
        states.append(
            make(
                r.TransactionState,
                error_code=ErrorCode.none,
                transactional_id=txn_id,
                transaction_state=meta.state.kafka_name,
                transaction_timeout=_ms(meta.txn_timeout_ms),
                transaction_start_time=_ts(meta.txn_start_ms),
                producer_id=meta.producer_id,
                producer_epoch=meta.producer_epoch,
                topics=tuple(
                    make(r.TopicData, topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
                ),
            )
        )
    return make(r.DescribeTransactionsResponse, transaction_states=tuple(states))


API = ApiSpec(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0, describe_transactions)
