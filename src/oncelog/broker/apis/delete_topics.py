"""DeleteTopics (API 20): delete non-internal topics when delete.topic.enable."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import Op, Res
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.request import RequestContext
from oncelog.broker.topics import TopicError, drop_partitions
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make

log = logging.getLogger(__name__)


async def delete_topics(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    r = ctx.response
    names = getattr(req, "topic_names", None)
    if names is None:  # v6 uses DeleteTopicState entries
        names = tuple(t.name for t in req.topics)
    results = []
    for name in names:
        code, message = ErrorCode.none, None
        try:
            if not ctx.authorized(Op.DELETE, Res.TOPIC, name):
                raise TopicError(ErrorCode.topic_authorization_failed, "Topic DELETE denied")
            if not broker.config.get_bool("delete.topic.enable"):
                raise TopicError(ErrorCode.topic_deletion_disabled, "Topic deletion is disabled.")
            # gone from the registry at once; its files are removed off the event loop
            await asyncio.to_thread(drop_partitions, broker.topics.detach(name))
            log.info("deleted topic %s", name)
        except TopicError as exc:
            code, message = exc.code, exc.message
        results.append(
            make(r.DeletableTopicResult, name=name, error_code=code, error_message=message)
        )
    return make(r.DeleteTopicsResponse, responses=tuple(results))


API = ApiSpec(ApiKey.DELETE_TOPICS, 1, 5, delete_topics)
