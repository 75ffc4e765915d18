"""InitProducerId for idempotent producers (no transactional id)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from oncelog.broker.server import RequestContext
from oncelog.protocol.api_keys import BROKER_API_VERSIONS, ApiKey
from oncelog.protocol.messages import make

if TYPE_CHECKING:
    from oncelog.broker.broker import Broker


def init_producer_id(ctx: RequestContext, req: Any) -> Any:
    r = ctx.response
    if req.transactional_id is not None:
        return make(r.InitProducerIdResponse, error_code=ErrorCode.coordinator_not_available, producer_id=-1, producer_epoch=-1)
    # Like Kafka, an idempotent producer always gets a fresh id (also on the
    # KIP-360 form that names its old id and epoch): sequences restart at 0.
    pid = ctx.broker.producer_ids.allocate()
    return make(r.InitProducerIdResponse, error_code=ErrorCode.none, producer_id=pid, producer_epoch=0)


def register(broker: Broker) -> None:
    broker.register(ApiKey.INIT_PRODUCER_ID, BROKER_API_VERSIONS[ApiKey.INIT_PRODUCER_ID], init_producer_id)
