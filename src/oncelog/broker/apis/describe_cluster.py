"""DescribeCluster (API 60, KIP-700): this one broker as the whole cluster."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from oncelog.broker.apis.acl_checks import CLUSTER_NAME, Res, authorized_operations
from oncelog.broker.apis.spec import ApiSpec
from oncelog.broker.apis.wire_values import OPS_UNKNOWN
from oncelog.broker.request import RequestContext
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.messages import make


def describe_cluster(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    r = ctx.response
    host, port = ctx.advertised_address
    if getattr(req, "endpoint_type", 1) not in (1,):
        return make(
            r.DescribeClusterResponse,
            error_code=ErrorCode.unsupported_endpoint_type,
            error_message="only broker endpoints are served",
            cluster_id=broker.cluster_id,
            controller_id=-1,
            brokers=(),
            cluster_authorized_operations=OPS_UNKNOWN,
        )
    return make(
        r.DescribeClusterResponse,
        error_code=ErrorCode.none,
        endpoint_type=1,
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        brokers=(
            make(
                r.DescribeClusterBroker,
                broker_id=broker.node_id,
                host=host,
                port=port,
                rack=None,
            ),
        ),
        cluster_authorized_operations=(
            authorized_operations(ctx, Res.CLUSTER, CLUSTER_NAME)
            if req.include_cluster_authorized_operations
            else OPS_UNKNOWN
        ),
    )


API = ApiSpec(ApiKey.DESCRIBE_CLUSTER, 0, 1, describe_cluster)
