"""WriteTxnMarkers (key 27, v0-1 as Kafka 2.8, v1 flexible): a transaction coordinator asks this leader to end a transaction.

Each marker is appended as a control batch to each named partition this broker leads
(``broker/txn_markers.write_markers_as_leader``: acks=all, ``request.timeout.ms``), with Kafka's
codes per partition: NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION where it does not lead,
INVALID_PRODUCER_EPOCH for an older producer epoch, TRANSACTION_COORDINATOR_FENCED for an older
coordinator epoch than the partition has seen. Only brokers send it.
"""
from __future__ import annotations

from collections.abc import Generator
from typing import Any

from twisted.internet import defer

from kafkalite.broker.registry import api
from kafkalite.broker.services import RequestContext
from kafkalite.broker.txn_markers import write_markers_as_leader
from kafkalite.errors import ErrorCode
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import (WriteTxnMarkersRequest, WriteTxnMarkersResponse,
                                               WriteTxnMarkersResponseWritableTxnMarkerPartitionResult,
                                               WriteTxnMarkersResponseWritableTxnMarkerResult)


@api(ApiKey.WRITE_TXN_MARKERS, 0, 1)
@defer.inlineCallbacks
def handle_write_txn_markers(ctx: RequestContext, req: WriteTxnMarkersRequest) -> Generator[Any, Any, WriteTxnMarkersResponse]:
    results: list[WriteTxnMarkersResponseWritableTxnMarkerResult] = []
    if not ctx.authorize(Operation.CLUSTER_ACTION, ResourceType.CLUSTER):    # only brokers send markers
        return {"markers": [{"producer_id": m["producer_id"], "topics": [
            {"name": t["name"], "partitions": [{"partition_index": p, "error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)}
                                               for p in t["partition_indexes"]]} for t in m["topics"]]}
            for m in req["markers"]]}
    for marker in req["markers"]:
        tps = [(t["name"], p) for t in marker["topics"] for p in t["partition_indexes"]]
        codes = yield write_markers_as_leader(ctx.replicas, marker["producer_id"], marker["producer_epoch"],
                                              bool(marker["transaction_result"]), marker["coordinator_epoch"], tps,
                                              ctx.config["request.timeout.ms"], ctx.groups.coordinator)
        by_topic: dict[str, list[WriteTxnMarkersResponseWritableTxnMarkerPartitionResult]] = {}
        for (topic, p), code in codes.items():
            by_topic.setdefault(topic, []).append({"partition_index": p, "error_code": int(code)})
        results.append({"producer_id": marker["producer_id"],
                        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
    return {"markers": results}
