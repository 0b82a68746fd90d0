"""DescribeCluster (key 60, KIP-700): the cluster id, the controller and the live brokers, what
Metadata answers about the cluster without any topic. Admin clients of Kafka 2.8+ ask it for
``describeCluster``; broker addresses are those of the listener the request arrived on, as in
Metadata. Authorized operations (KIP-430) are computed only when asked, as in Metadata: a
principal without Describe on the cluster gets 0."""
from __future__ import annotations

from kafkalite.broker.registry import api
from kafkalite.broker.services import RequestContext
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import (DescribeClusterRequest, DescribeClusterResponse,
                                               DescribeClusterResponseDescribeClusterBroker)
from kafkalite.security.acl import Operation, ResourceType

NOT_PROVIDED = -2147483648


@api(ApiKey.DESCRIBE_CLUSTER, 0, 0)
def handle_describe_cluster(ctx: RequestContext, req: DescribeClusterRequest) -> DescribeClusterResponse:
    cache = ctx.metadata
    brokers: list[DescribeClusterResponseDescribeClusterBroker] = []
    for b in sorted(cache.brokers.values(), key=lambda b: b.broker_id):
        ep = b.endpoint(ctx.listener)
        if ep is not None:
            brokers.append({"broker_id": b.broker_id, "host": ep[0], "port": ep[1], "rack": b.rack})
    cluster_ops = NOT_PROVIDED
    if req["include_cluster_authorized_operations"]:
        cluster_ops = (ctx.authorized_operations(ResourceType.CLUSTER)
                       if ctx.authorize(Operation.DESCRIBE, ResourceType.CLUSTER) else 0)
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "cluster_id": cache.cluster_id or "",
            "controller_id": cache.controller_id, "brokers": brokers,
            "cluster_authorized_operations": cluster_ops}
