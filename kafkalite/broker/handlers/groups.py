"""The classic group protocol: JoinGroup (11), SyncGroup (14), Heartbeat (12), LeaveGroup (13),
DescribeGroups (15), ListGroups (16), DeleteGroups (42), at Kafka 2.8's versions.

Version notes: JoinGroup v6, SyncGroup v4, Heartbeat v4, LeaveGroup v4, DescribeGroups v5,
ListGroups v3 and DeleteGroups v2 are the flexible ones (KIP-482: nothing new but tagged
fields); JoinGroup v7 answers ``protocol_type``; SyncGroup v5 sends ``protocol_type``/``name``,
checked against the group's (INCONSISTENT_GROUP_PROTOCOL); ListGroups v4 filters by state.

Each handler translates wire fields to the coordinator (``kafkalite.group.coordinator``) and its
answer back; JoinGroup and SyncGroup return Deferreds that fire when the rebalance gets there
(the connection serves nothing else meanwhile, as Kafka mutes it).
"""
from __future__ import annotations

from typing import Any

from twisted.internet import defer

from kafkalite.broker.services import RequestContext
from kafkalite.broker.registry import api
from kafkalite.errors import ErrorCode
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.security.acl import AUTHORIZED_OPERATIONS_OMITTED, Operation, ResourceType
from kafkalite.protocol.messages_typed import (DeleteGroupsRequest, DeleteGroupsResponse,
                                               DeleteGroupsResponseDeletableGroupResult, DescribeGroupsRequest,
                                               DescribeGroupsResponse, DescribeGroupsResponseDescribedGroup,
                                               HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
                                               LeaveGroupRequest, LeaveGroupResponse, LeaveGroupResponseMemberResponse,
                                               ListGroupsRequest, ListGroupsResponse, SyncGroupRequest,
                                               SyncGroupResponse)


def _coordinator(ctx: RequestContext) -> Any:
    return ctx.groups.coordinator


def _may_read(ctx: RequestContext, group_id: str) -> bool:
    """Kafka: a member's requests (join, sync, heartbeat, leave) need Read on the group."""
    return ctx.authorize(Operation.READ, ResourceType.GROUP, group_id)


def _client_host(ctx: RequestContext) -> str:
    host = ctx.conn.peer.rpartition(":")[0] or "?"
    return "/" + host                 # Kafka's InetAddress.toString form


@api(ApiKey.JOIN_GROUP, 0, 7)
def handle_join_group(ctx: RequestContext, req: JoinGroupRequest,
                      ) -> JoinGroupResponse | defer.Deferred[JoinGroupResponse]:
    v = ctx.api_version
    if not _may_read(ctx, req["group_id"]):
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED), "generation_id": -1,
                "protocol_type": None, "protocol_name": "", "leader": "", "member_id": "", "members": []}
    session = req["session_timeout_ms"]
    rebalance = req["rebalance_timeout_ms"] if v >= 1 else session
    d = _coordinator(ctx).join_group(
        req["group_id"], req["member_id"], req["group_instance_id"] if v >= 5 else None, v >= 4,
        ctx.client_id or "", _client_host(ctx), rebalance, session, req["protocol_type"],
        [(p["name"], p["metadata"]) for p in req["protocols"]])

    def response(r: dict[str, Any]) -> JoinGroupResponse:
        return {"throttle_time_ms": 0, "error_code": r["error_code"], "generation_id": r["generation_id"],
                "protocol_type": r["protocol_type"], "protocol_name": r["protocol_name"] or "",
                "leader": r["leader"], "member_id": r["member_id"], "members": r["members"]}
    return d.addCallback(response)


@api(ApiKey.SYNC_GROUP, 0, 5)
def handle_sync_group(ctx: RequestContext, req: SyncGroupRequest,
                      ) -> SyncGroupResponse | defer.Deferred[SyncGroupResponse]:
    v = ctx.api_version
    if not _may_read(ctx, req["group_id"]):
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED), "assignment": b"",
                "protocol_type": None, "protocol_name": None}
    assignments = {a["member_id"]: bytes(a["assignment"]) for a in req["assignments"]}
    d = _coordinator(ctx).sync_group(req["group_id"], req["generation_id"], req["member_id"],
                                     req["group_instance_id"] if v >= 3 else None, assignments,
                                     req["protocol_type"] if v >= 5 else None,
                                     req["protocol_name"] if v >= 5 else None)

    def response(r: tuple[int, bytes, str | None, str | None]) -> SyncGroupResponse:
        return {"throttle_time_ms": 0, "error_code": r[0], "assignment": r[1], "protocol_type": r[2],
                "protocol_name": r[3]}
    return d.addCallback(response)


@api(ApiKey.HEARTBEAT, 0, 4)
def handle_heartbeat(ctx: RequestContext, req: HeartbeatRequest) -> HeartbeatResponse:
    if not _may_read(ctx, req["group_id"]):
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED)}
    error = _coordinator(ctx).heartbeat(req["group_id"], req["member_id"],
                                        req["group_instance_id"] if ctx.api_version >= 3 else None,
                                        req["generation_id"])
    return {"throttle_time_ms": 0, "error_code": int(error)}


@api(ApiKey.LEAVE_GROUP, 0, 4)
def handle_leave_group(ctx: RequestContext, req: LeaveGroupRequest) -> LeaveGroupResponse:
    if not _may_read(ctx, req["group_id"]):
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED), "members": []}
    if ctx.api_version >= 3:
        leaving = [(m["member_id"], m["group_instance_id"]) for m in req["members"]]
    else:
        leaving = [(req["member_id"], None)]
    error, results = _coordinator(ctx).leave_group(req["group_id"], leaving)
    if ctx.api_version < 3:        # one member: its error is the answer's
        if not error and results:
            error = results[0]
        return {"throttle_time_ms": 0, "error_code": int(error), "members": []}
    members: list[LeaveGroupResponseMemberResponse] = [{"member_id": m, "group_instance_id": i, "error_code": int(e)} for (m, i), e in zip(leaving, results)]
    return {"throttle_time_ms": 0, "error_code": int(error), "members": members if not error else []}


@api(ApiKey.DESCRIBE_GROUPS, 0, 5)
def handle_describe_groups(ctx: RequestContext, req: DescribeGroupsRequest) -> DescribeGroupsResponse:
    coordinator = _coordinator(ctx)
    want_ops = ctx.api_version >= 3 and req["include_authorized_operations"]
    groups: list[DescribeGroupsResponseDescribedGroup] = []
    for g in req["groups"]:
        if not ctx.authorize(Operation.DESCRIBE, ResourceType.GROUP, g):
            groups.append({"error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED), "group_id": g, "group_state": "",
                           "protocol_type": "", "protocol_data": "", "members": [],
                           "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})
            continue
        described = coordinator.describe_group(g)
        if want_ops and not described["error_code"]:
            described["authorized_operations"] = ctx.authorized_operations(ResourceType.GROUP, g)
        groups.append(described)
    return {"throttle_time_ms": 0, "groups": groups}


@api(ApiKey.LIST_GROUPS, 0, 4)
def handle_list_groups(ctx: RequestContext, req: ListGroupsRequest) -> ListGroupsResponse:
    """v4 (KIP-518): ``states_filter`` keeps the groups in one of the named states (Kafka's
    names, case as Kafka writes them; empty = all) and every entry carries its state."""
    states = set(req["states_filter"]) if ctx.api_version >= 4 else set()
    error, groups = _coordinator(ctx).list_groups(states or None)
    if not ctx.authorize(Operation.DESCRIBE, ResourceType.CLUSTER):     # else only groups it may describe
        groups = [g for g in groups if ctx.authorize(Operation.DESCRIBE, ResourceType.GROUP, g.group_id)]
    return {"throttle_time_ms": 0, "error_code": int(error),
            "groups": [{"group_id": g.group_id, "protocol_type": g.protocol_type or "", "group_state": g.state.value,
                        "group_type": "classic"} for g in groups]}


@api(ApiKey.DELETE_GROUPS, 0, 2)
def handle_delete_groups(ctx: RequestContext, req: DeleteGroupsRequest,
                         ) -> DeleteGroupsResponse | defer.Deferred[DeleteGroupsResponse]:
    names = list(req["groups_names"])
    denied = [g for g in names if not ctx.authorize(Operation.DELETE, ResourceType.GROUP, g)]
    allowed = [g for g in names if g not in denied]

    def response(results: dict[str, Any]) -> DeleteGroupsResponse:
        answered: list[DeleteGroupsResponseDeletableGroupResult] = [
            {"group_id": g, "error_code": int(e)} for g, e in results.items()]
        answered += [{"group_id": g, "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED)} for g in denied]
        return {"throttle_time_ms": 0, "results": answered}
    if not allowed:
        return response({})
    return _coordinator(ctx).delete_groups(allowed).addCallback(response)
