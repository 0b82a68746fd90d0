"""Security: the cluster's ACLs (list, create, delete) and client quotas.

ACLs exist only when the brokers run an authorizer: without one DescribeAcls answers
SECURITY_DISABLED, and the page says so instead of showing an empty list.
"""
from __future__ import annotations

from dataclasses import dataclass

from kafkalite.client.admin import MATCH_ANY
from kafkalite.client.errors import ClientError
from kafkalite.errors import ErrorCode
from kafkalite.security.acl import (SUPPORTED_OPERATIONS, AccessControlEntry, AclBinding, AclBindingFilter, Operation,
                                    PatternType, Permission, ResourcePattern, ResourceType, binding_error)

from ..context import ConsoleContext

RESOURCE_TYPES = {t.pascal: t for t in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                                        ResourceType.TRANSACTIONAL_ID)}
OPERATIONS = {op.pascal: op for op in Operation if op not in (Operation.UNKNOWN, Operation.ANY)}
PATTERN_TYPES = {p.pascal: p for p in (PatternType.LITERAL, PatternType.PREFIXED)}
PERMISSIONS = {p.pascal: p for p in (Permission.ALLOW, Permission.DENY)}


class AclFormError(ValueError):
    pass


@dataclass(frozen=True)
class SecurityView:
    authorizer: bool
    acls: list[AclBinding]
    quotas: list[tuple[dict[str, str | None], dict[str, float]]]
    quota_error: str = ""


def binding_from_form(resource_type: str, name: str, pattern_type: str, principal: str, host: str, operation: str,
                      permission: str) -> AclBinding:
    """One binding from the form's names (Kafka's PascalCase), checked as the broker would."""
    try:
        rt, pt = RESOURCE_TYPES[resource_type], PATTERN_TYPES[pattern_type]
        op, perm = OPERATIONS[operation], PERMISSIONS[permission]
    except KeyError as exc:
        raise AclFormError(f"unknown choice {exc.args[0]!r}") from None
    kind, sep, who = principal.partition(":")
    if not sep or not kind or not who:
        raise AclFormError(f"invalid principal {principal!r} (expected principalType:name, e.g. User:alice)")
    if rt == ResourceType.CLUSTER:
        name, pt = "kafka-cluster", PatternType.LITERAL
    if not name:
        raise AclFormError("give the resource's name")
    if op != Operation.ALL and op not in SUPPORTED_OPERATIONS[rt]:
        raise AclFormError(f"ResourceType {rt.pascal} does not support operation {op.pascal}")
    binding = AclBinding(ResourcePattern(rt, name, pt), AccessControlEntry(principal, host or "*", op, perm))
    problem = binding_error(binding)
    if problem:
        raise AclFormError(problem)
    return binding


class SecurityService:
    def __init__(self, context: ConsoleContext) -> None:
        self.context = context

    def view(self) -> SecurityView:
        def work(admin: object) -> SecurityView:
            try:
                acls = sorted(self.context.admin.describe_acls(AclBindingFilter(
                    ResourceType.ANY, None, PatternType.ANY, None, None, Operation.ANY, Permission.ANY)))
                authorizer = True
            except ClientError as exc:
                if exc.code != ErrorCode.SECURITY_DISABLED:
                    raise
                acls, authorizer = [], False
            try:
                quotas = self.context.admin.describe_client_quotas([("user", MATCH_ANY, None)]) + \
                    self.context.admin.describe_client_quotas([("client-id", MATCH_ANY, None)])
                quota_error = ""
            except ClientError as exc:
                quotas, quota_error = [], str(exc)
            return SecurityView(authorizer, acls, quotas, quota_error)
        return self.context.call(work)

    def create(self, binding: AclBinding) -> None:
        self.context.call(lambda admin: admin.create_acls([binding]))

    def delete(self, binding: AclBinding) -> int:
        """Delete exactly this binding (a filter naming every field matches at most it)."""
        p, e = binding.pattern, binding.entry
        flt = AclBindingFilter(p.resource_type, p.name, p.pattern_type, e.principal, e.host, e.operation, e.permission)
        return self.context.call(lambda admin: admin.delete_acls([flt]))
