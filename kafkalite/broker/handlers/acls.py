"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31), v0-2 (v2 flexible), as Kafka 2.8.

Describe needs Describe on the cluster, Create and Delete need Alter on it
(CLUSTER_AUTHORIZATION_FAILED otherwise); without an authorizer all three answer
SECURITY_DISABLED. v0 knows only literal patterns: a v0 CreateAcls of another pattern type is
refused (UNSUPPORTED_VERSION, as Kafka's request validation), and a v0 filter is literal (the
descriptor's default). Unknown elements in a creation or filter get INVALID_REQUEST.
"""
from __future__ import annotations

from collections.abc import Generator
from typing import Any

from twisted.internet import defer

from kafkalite.broker.registry import api
from kafkalite.broker.services import RequestContext
from kafkalite.errors import ErrorCode
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import (CreateAclsRequest, CreateAclsResponse, CreateAclsResponseAclCreationResult,
                                               DeleteAclsRequest, DeleteAclsRequestDeleteAclsFilter, DeleteAclsResponse,
                                               DeleteAclsResponseDeleteAclsFilterResult, DescribeAclsRequest,
                                               DescribeAclsResponse, DescribeAclsResponseDescribeAclsResource)
from kafkalite.security.acl import (AccessControlEntry, AclBinding, AclBindingFilter, Operation, PatternType,
                                    Permission, ResourcePattern, ResourceType, binding_error, group_by_pattern)

NO_AUTHORIZER = "No Authorizer is configured on the broker"


def _enum(cls: Any, code: int) -> Any:
    try:
        return cls(code)
    except ValueError:
        return cls.UNKNOWN


def filter_of(f: DescribeAclsRequest | DeleteAclsRequestDeleteAclsFilter) -> AclBindingFilter:
    return AclBindingFilter(_enum(ResourceType, f["resource_type_filter"]), f["resource_name_filter"],
                            _enum(PatternType, f["pattern_type_filter"]), f["principal_filter"],
                            f["host_filter"], _enum(Operation, f["operation"]), _enum(Permission, f["permission_type"]))


@api(ApiKey.DESCRIBE_ACLS, 0, 2)
def handle_describe_acls(ctx: RequestContext, req: DescribeAclsRequest) -> DescribeAclsResponse:
    def answer(code: ErrorCode, message: str | None,
               resources: list[DescribeAclsResponseDescribeAclsResource]) -> DescribeAclsResponse:
        return {"throttle_time_ms": 0, "error_code": int(code), "error_message": message, "resources": resources}
    if not ctx.authorize(Operation.DESCRIBE, ResourceType.CLUSTER):
        return answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None, [])
    if ctx.authorizer is None:
        return answer(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER, [])
    flt = filter_of(req)
    reason = flt.invalid_reason()
    if reason is not None:
        return answer(ErrorCode.INVALID_REQUEST, reason, [])
    resources: list[DescribeAclsResponseDescribeAclsResource] = [{"resource_type": int(p.resource_type), "resource_name": p.name, "pattern_type": int(p.pattern_type),
                  "acls": [{"principal": e.principal, "host": e.host, "operation": int(e.operation),
                            "permission_type": int(e.permission)} for e in entries]}
                 for p, entries in group_by_pattern(ctx.authorizer.acls(flt)).items()]
    return answer(ErrorCode.NONE, None, resources)


@api(ApiKey.CREATE_ACLS, 0, 2)
@defer.inlineCallbacks
def handle_create_acls(ctx: RequestContext, req: CreateAclsRequest) -> Generator[Any, Any, CreateAclsResponse]:
    creations = req["creations"]

    def all_failed(code: ErrorCode, message: str | None) -> CreateAclsResponse:
        return {"throttle_time_ms": 0,
                "results": [{"error_code": int(code), "error_message": message} for _ in creations]}
    if not ctx.authorize(Operation.ALTER, ResourceType.CLUSTER):
        return all_failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    if ctx.authorizer is None:
        return all_failed(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER + ".")
    if ctx.api_version == 0 and any(c["resource_pattern_type"] != PatternType.LITERAL for c in creations):
        return all_failed(ErrorCode.UNSUPPORTED_VERSION, "Version 0 only supports literal resource pattern types")
    bindings = [AclBinding(ResourcePattern(_enum(ResourceType, c["resource_type"]), c["resource_name"],
                                           _enum(PatternType, c["resource_pattern_type"])),
                           AccessControlEntry(c["principal"], c["host"], _enum(Operation, c["operation"]),
                                              _enum(Permission, c["permission_type"])))
                for c in creations]
    errors: list[str | None] = [binding_error(b) for b in bindings]
    valid = [i for i, e in enumerate(errors) if e is None]
    written = yield ctx.authorizer.create_acls([bindings[i] for i in valid])
    results: list[CreateAclsResponseAclCreationResult] = [
        {"error_code": int(ErrorCode.INVALID_REQUEST), "error_message": e} for e in errors]
    for i, failure in zip(valid, written):
        results[i] = ({"error_code": 0, "error_message": None} if failure is None
                      else {"error_code": int(ErrorCode.UNKNOWN_SERVER_ERROR), "error_message": failure})
    return {"throttle_time_ms": 0, "results": results}


@api(ApiKey.DELETE_ACLS, 0, 2)
@defer.inlineCallbacks
def handle_delete_acls(ctx: RequestContext, req: DeleteAclsRequest) -> Generator[Any, Any, DeleteAclsResponse]:
    raw = req["filters"]

    def all_failed(code: ErrorCode, message: str | None) -> DeleteAclsResponse:
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": int(code), "error_message": message, "matching_acls": []} for _ in raw]}
    if not ctx.authorize(Operation.ALTER, ResourceType.CLUSTER):
        return all_failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    if ctx.authorizer is None:
        return all_failed(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER + ".")
    filters = [filter_of(f) for f in raw]
    invalid = [f.invalid_reason() for f in filters]
    usable = [i for i, r in enumerate(invalid) if r is None]
    deleted = yield ctx.authorizer.delete_acls([filters[i] for i in usable])
    results: list[DeleteAclsResponseDeleteAclsFilterResult] = [
        {"error_code": int(ErrorCode.INVALID_REQUEST), "error_message": r, "matching_acls": []} for r in invalid]
    for i, matched in zip(usable, deleted):
        results[i] = {"error_code": 0, "error_message": None, "matching_acls": [
            {"error_code": 0 if err is None else int(ErrorCode.UNKNOWN_SERVER_ERROR), "error_message": err,
             "resource_type": int(b.pattern.resource_type), "resource_name": b.pattern.name,
             "pattern_type": int(b.pattern.pattern_type), "principal": b.entry.principal, "host": b.entry.host,
             "operation": int(b.entry.operation), "permission_type": int(b.entry.permission)}
            for b, err in matched]}
    return {"throttle_time_ms": 0, "filter_results": results}
