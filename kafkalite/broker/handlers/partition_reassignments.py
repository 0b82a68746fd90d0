"""AlterPartitionReassignments (key 45) and ListPartitionReassignments (key 46), v0 as in Kafka 2.8.

Both are served by the controller only (the admin client sends them to the controller and
follows NOT_CONTROLLER, a top-level error as Kafka's). Alter starts (``Replicas`` a list) or
cancels (``Replicas`` null) each partition's reassignment through ``Controller.reassign``: the
answer comes once the topic znode holding RS/adding/removing is written, as Kafka's controller
answers once its ZooKeeper write is done; the move itself goes on (KIP-455). Per partition:
UNKNOWN_TOPIC_OR_PARTITION, NO_REASSIGNMENT_IN_PROGRESS (cancel with nothing to cancel) or
INVALID_REPLICA_ASSIGNMENT (empty, duplicates, brokers not alive). List answers the
reassignments in progress from the controller's view of the topic znodes (null Topics: all).
"""
from __future__ import annotations

from twisted.internet import defer

from kafkalite.broker.registry import api
from kafkalite.broker.services import RequestContext
from kafkalite.errors import ErrorCode
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import (
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
    AlterPartitionReassignmentsResponseReassignablePartitionResponse, ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse, ListPartitionReassignmentsResponseOngoingPartitionReassignment)


#: The top-level refusals of both APIs: (error code, message).
NOT_CONTROLLER = (ErrorCode.NOT_CONTROLLER, "This is not the correct controller for this cluster.")
CLUSTER_DENIED = (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")


def _alter_refused(refusal: tuple[ErrorCode, str]) -> AlterPartitionReassignmentsResponse:
    return {"throttle_time_ms": 0, "error_code": int(refusal[0]), "error_message": refusal[1], "responses": []}


def _list_refused(refusal: tuple[ErrorCode, str]) -> ListPartitionReassignmentsResponse:
    return {"throttle_time_ms": 0, "error_code": int(refusal[0]), "error_message": refusal[1], "topics": []}


@api(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 0)
def handle_alter_partition_reassignments(
        ctx: RequestContext, req: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse | defer.Deferred[AlterPartitionReassignmentsResponse]:
    if not ctx.authorize(Operation.ALTER, ResourceType.CLUSTER):
        return _alter_refused(CLUSTER_DENIED)
    controller = ctx.controller
    if not controller.active:
        return _alter_refused(NOT_CONTROLLER)
    targets: dict[tuple[str, int], tuple[int, ...] | None] = {}
    order: list[tuple[str, int]] = []
    for topic in req["topics"]:
        for part in topic["partitions"]:
            key = (topic["name"], part["partition_index"])
            replicas = part["replicas"]
            targets[key] = None if replicas is None else tuple(replicas)
            order.append(key)

    def answer(results: dict[tuple[str, int], tuple[ErrorCode, str | None]]) -> AlterPartitionReassignmentsResponse:
        if results and all(code == ErrorCode.NOT_CONTROLLER for code, _ in results.values()):
            return _alter_refused(NOT_CONTROLLER)
        by_topic: dict[str, list[AlterPartitionReassignmentsResponseReassignablePartitionResponse]] = {}
        for key in dict.fromkeys(order):
            code, message = results.get(key, (ErrorCode.UNKNOWN_SERVER_ERROR, "no answer"))
            by_topic.setdefault(key[0], []).append({"partition_index": key[1], "error_code": int(code),
                                                    "error_message": message})
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                "responses": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}

    if not targets:
        return answer({})
    d: defer.Deferred = controller.reassign(targets)
    return d.addCallback(answer)


@api(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0)
def handle_list_partition_reassignments(ctx: RequestContext, req: ListPartitionReassignmentsRequest,
                                        ) -> ListPartitionReassignmentsResponse:
    if not ctx.authorize(Operation.DESCRIBE, ResourceType.CLUSTER):
        return _list_refused(CLUSTER_DENIED)
    controller = ctx.controller
    if not controller.active:
        return _list_refused(NOT_CONTROLLER)
    ongoing = controller.ongoing_reassignments()
    asked = req["topics"]
    if asked is not None:
        wanted = {(t["name"], p) for t in asked for p in t["partition_indexes"]}
        ongoing = {k: v for k, v in ongoing.items() if k in wanted}
    by_topic: dict[str, list[ListPartitionReassignmentsResponseOngoingPartitionReassignment]] = {}
    for (topic, p), entry in sorted(ongoing.items()):
        by_topic.setdefault(topic, []).append({"partition_index": p, "replicas": list(entry.replicas),
                                               "adding_replicas": list(entry.adding),
                                               "removing_replicas": list(entry.removing)})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
