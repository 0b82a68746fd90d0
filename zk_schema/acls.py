"""ACL znodes as Kafka's AclAuthorizer stores them (``ZkData.scala``: ZkAclStore, ResourceZNode,
the two change stores).

- literal patterns: ``/kafka-acl/<ResourceType>/<name>`` (``/kafka-acl/Topic/orders``,
  ``/kafka-acl/Cluster/kafka-cluster``); other pattern types under
  ``/kafka-acl-extended/<patterntype lower case>/<ResourceType>/<name>``
  (``/kafka-acl-extended/prefixed/Group/etl-``). Payload:
  ``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}``;
  the znode's version is the conditional write's fence.
- change notifications (sequential): ``/kafka-acl-changes/acl_changes_<seq>`` holding
  ``TOPIC:orders`` (the Java enum name, a colon, the name) for literal patterns, and
  ``/kafka-acl-extended-changes/acl_changes_<seq>`` holding
  ``{"version":1,"resourceType":"TOPIC","name":"etl-","patternType":"PREFIXED"}`` for the others.
"""
from __future__ import annotations

from typing import Any

from zk_schema._json import dumps, loads_object, req_str, req_version
from zk_schema.acl_types import (AccessControlEntry, Operation, PatternType, Permission, ResourcePattern,
                                 ResourceType)
from zk_schema.errors import ZkDataError

LITERAL_ROOT = "/kafka-acl"
EXTENDED_ROOT = "/kafka-acl-extended"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
#: the stored pattern types and the root of each
STORE_ROOTS: dict[PatternType, str] = {
    PatternType.LITERAL: LITERAL_ROOT,
    PatternType.PREFIXED: f"{EXTENDED_ROOT}/prefixed",
}
STORED_RESOURCE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                         ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN)


def resource_path(pattern: ResourcePattern) -> str:
    return f"{STORE_ROOTS[pattern.pattern_type]}/{pattern.resource_type.pascal}/{pattern.name}"


def type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    return f"{STORE_ROOTS[pattern_type]}/{resource_type.pascal}"


def change_root(pattern_type: PatternType) -> str:
    return LITERAL_CHANGES if pattern_type == PatternType.LITERAL else EXTENDED_CHANGES


def change_prefix(pattern_type: PatternType) -> str:
    """The sequential-create path of a change notification for that pattern type."""
    return f"{change_root(pattern_type)}/{CHANGE_PREFIX}"


def encode_acls(entries: frozenset[AccessControlEntry] | set[AccessControlEntry]) -> bytes:
    return dumps({"version": 1, "acls": [
        {"principal": e.principal, "permissionType": e.permission.pascal, "operation": e.operation.pascal,
         "host": e.host} for e in sorted(entries)]})


def decode_acls(znode: str, data: bytes | None) -> frozenset[AccessControlEntry]:
    """The entries of a resource znode; an empty znode (as a crash between create and set
    could leave) holds none."""
    if not data:
        return frozenset()
    obj = loads_object(znode, data)
    req_version(znode, obj, (1,))
    acls = obj.get("acls")
    if not isinstance(acls, list):
        raise ZkDataError(znode, "field 'acls' must be a list")
    out = set()
    for item in acls:
        if not isinstance(item, dict):
            raise ZkDataError(znode, f"ACL entry must be an object, got {item!r}")
        try:
            out.add(AccessControlEntry(req_str(znode, item, "principal"), req_str(znode, item, "host"),
                                       Operation(Operation.parse(req_str(znode, item, "operation"))),
                                       Permission(Permission.parse(req_str(znode, item, "permissionType")))))
        except ValueError as exc:
            raise ZkDataError(znode, str(exc)) from None
    return frozenset(out)


def encode_change(pattern: ResourcePattern) -> bytes:
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode("utf-8")
    return dumps({"version": 1, "resourceType": pattern.resource_type.name, "name": pattern.name,
                  "patternType": pattern.pattern_type.name})


def decode_change(pattern_type: PatternType, data: bytes | None) -> ResourcePattern:
    """The resource a change notification names (literal: ``TYPE:name``; extended: JSON)."""
    znode = change_root(pattern_type)
    if not data:
        raise ZkDataError(znode, "empty change notification")
    try:
        if pattern_type == PatternType.LITERAL:
            text = data.decode("utf-8")
            if ":" not in text:
                raise ZkDataError(znode, f"expected ResourceType:ResourceName, got {text!r}")
            rtype, name = text.split(":", 1)
            return ResourcePattern(ResourceType(ResourceType.parse(rtype)), name, PatternType.LITERAL)
        obj: dict[str, Any] = loads_object(znode, data)
        req_version(znode, obj, (1,))
        return ResourcePattern(ResourceType(ResourceType.parse(req_str(znode, obj, "resourceType"))),
                               req_str(znode, obj, "name"),
                               PatternType(PatternType.parse(req_str(znode, obj, "patternType"))))
    except (UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, ZkDataError):
            raise
        raise ZkDataError(znode, str(exc)) from None
