"""kafkalite-acls: add, remove and list ACLs over the wire, like kafka-acls.sh --bootstrap-server.

``--add`` / ``--remove`` / ``--list`` with ``--allow-principal``/``--deny-principal`` (and their
hosts, ``*`` by default), ``--operation`` (default All), resources ``--topic``, ``--group``,
``--cluster``, ``--transactional-id`` (each may repeat) and ``--resource-pattern-type``
(literal by default; prefixed; for --list and --remove also any and match). ``--producer``
(Write, Describe, Create on the topics; with ``--idempotent`` IdempotentWrite on the cluster;
with ``--transactional-id`` Write and Describe on it) and ``--consumer`` (Read and Describe on the
topics, Read on the groups) are Kafka's conveniences. ``--command-config`` holds the client's
security properties (``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``,
``ssl.truststore.location``...). Sent as CreateAcls/DeleteAcls/DescribeAcls; the output is
Kafka's (``Current ACLs for resource `ResourcePattern(...)`:``). ``--remove`` asks for
confirmation unless ``--force``.
"""
from __future__ import annotations

import sys
from typing import Any, Iterable

from kafkalite.client.admin import Admin
from kafkalite.client.core import KafkaClient
from kafkalite.security.acl import (CLUSTER_NAME, SUPPORTED_OPERATIONS, AccessControlEntry, AclBinding,
                                    AclBindingFilter, Operation, PatternType, Permission, ResourcePattern,
                                    ResourceType, group_by_pattern)

from .common import ToolError, bootstrap_arg, command_config, parser, run

OPERATIONS = {op.pascal.lower(): op for op in Operation if op not in (Operation.UNKNOWN, Operation.ANY)}


def build_parser() -> Any:
    p = parser("kafkalite-acls", "Add, remove and list ACLs (Kafka's AclAuthorizer) through a broker.")
    bootstrap_arg(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs")
    p.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST", help="default: * when a principal is given")
    p.add_argument("--deny-host", action="append", default=[], metavar="HOST", help="default: * when a principal is given")
    p.add_argument("--principal", action="append", default=[], metavar="TYPE:NAME", help="--list: only this principal's ACLs")
    p.add_argument("--operation", action="append", default=[], metavar="OP",
                   help=f"one of {', '.join(o.pascal for o in OPERATIONS.values())} (default All)")
    p.add_argument("--topic", action="append", default=[])
    p.add_argument("--group", action="append", default=[])
    p.add_argument("--transactional-id", action="append", default=[])
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--resource-pattern-type", default="literal", metavar="TYPE",
                   help="literal (default), prefixed; --list/--remove also: any, match")
    p.add_argument("--producer", action="store_true", help="the ACLs a producer needs")
    p.add_argument("--consumer", action="store_true", help="the ACLs a consumer needs (with --group)")
    p.add_argument("--idempotent", action="store_true", help="with --producer: IdempotentWrite on the cluster")
    p.add_argument("--force", action="store_true", help="--remove without asking")
    return p


def pattern_type(text: str, for_add: bool) -> PatternType:
    try:
        pt = PatternType(PatternType.parse(text))
    except ValueError:
        raise ToolError(f"unknown --resource-pattern-type {text!r} (literal, prefixed, any, match)") from None
    if pt == PatternType.UNKNOWN or (for_add and pt not in (PatternType.LITERAL, PatternType.PREFIXED)):
        raise ToolError(f"--resource-pattern-type {text} cannot be used with --add (literal or prefixed)")
    return pt


def operations(names: list[str]) -> list[Operation]:
    out = []
    for name in names or ["All"]:
        op = OPERATIONS.get(name.replace("_", "").replace("-", "").lower())
        if op is None:
            raise ToolError(f"unknown --operation {name!r} (one of {', '.join(o.pascal for o in OPERATIONS.values())})")
        out.append(op)
    return list(dict.fromkeys(out))


def principal(text: str) -> str:
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise ToolError(f"invalid principal {text!r} (expected principalType:name, e.g. User:alice)")
    return text


def resources(args: Any, pt: PatternType) -> list[ResourcePattern]:
    out = [ResourcePattern(ResourceType.TOPIC, t, pt) for t in args.topic]
    out += [ResourcePattern(ResourceType.GROUP, g, pt) for g in args.group]
    out += [ResourcePattern(ResourceType.TRANSACTIONAL_ID, t, pt) for t in args.transactional_id]
    if args.cluster:
        out.append(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    return out


def entries(args: Any, ops: Iterable[Operation]) -> list[AccessControlEntry]:
    out = []
    for permission, principals, hosts in ((Permission.ALLOW, args.allow_principal, args.allow_host),
                                          (Permission.DENY, args.deny_principal, args.deny_host)):
        for p in principals:
            for h in hosts or ["*"]:
                out += [AccessControlEntry(principal(p), h, op, permission) for op in ops]
    return out


def bindings_to_add(args: Any) -> list[AclBinding]:
    """The bindings --add asks for (Kafka's AclCommand, conveniences included)."""
    pt = pattern_type(args.resource_pattern_type, for_add=True)
    if not (args.allow_principal or args.deny_principal):
        raise ToolError("--add needs --allow-principal or --deny-principal")
    out: list[AclBinding] = []
    if args.producer or args.consumer:
        if args.operation:
            raise ToolError("--operation cannot be combined with --producer or --consumer")
        if not args.topic:
            raise ToolError("--producer and --consumer need --topic")
        if args.consumer and not args.group:
            raise ToolError("--consumer needs --group")
        topic_ops: list[Operation] = []
        if args.producer:
            topic_ops += [Operation.WRITE, Operation.DESCRIBE, Operation.CREATE]
            for t in args.transactional_id:
                out += [AclBinding(ResourcePattern(ResourceType.TRANSACTIONAL_ID, t, pt), e)
                        for e in entries(args, [Operation.WRITE, Operation.DESCRIBE])]
            if args.idempotent:
                out += [AclBinding(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL), e)
                        for e in entries(args, [Operation.IDEMPOTENT_WRITE])]
        if args.consumer:
            topic_ops += [Operation.READ, Operation.DESCRIBE]
            for g in args.group:
                out += [AclBinding(ResourcePattern(ResourceType.GROUP, g, pt), e) for e in entries(args, [Operation.READ])]
        for t in args.topic:
            out += [AclBinding(ResourcePattern(ResourceType.TOPIC, t, pt), e) for e in entries(args, dict.fromkeys(topic_ops))]
        return out
    patterns = resources(args, pt)
    if not patterns:
        raise ToolError("give at least one resource: --topic, --group, --cluster or --transactional-id")
    ops = operations(args.operation)
    for pattern in patterns:
        allowed = SUPPORTED_OPERATIONS[pattern.resource_type]
        bad = [op for op in ops if op != Operation.ALL and op not in allowed]
        if bad:
            raise ToolError(f"ResourceType {pattern.resource_type.pascal} only supports operations "
                            f"{', '.join(o.pascal for o in (Operation.ALL, *allowed))}")
        out += [AclBinding(pattern, e) for e in entries(args, ops)]
    return out


def pattern_filters(args: Any) -> list[tuple[ResourceType, str | None, PatternType]]:
    pt = pattern_type(args.resource_pattern_type, for_add=False)
    named: list[tuple[ResourceType, str | None, PatternType]] = [
        (p.resource_type, p.name, p.pattern_type if p.resource_type != ResourceType.CLUSTER else pt)
        for p in resources(args, pt)]
    return named or [(ResourceType.ANY, None, PatternType.ANY if args.resource_pattern_type == "literal" else pt)]


def describe(client: KafkaClient, flt: AclBindingFilter) -> list[AclBinding]:
    return Admin(client=client).describe_acls(flt)


def show(title: str, pattern: ResourcePattern, acl_entries: Iterable[AccessControlEntry]) -> None:
    print(f"{title} `{pattern}`: ")
    for e in acl_entries:
        print(f" \t{e} ")
    print()


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    settings = command_config(args, "kafkalite-acls")
    if args.add:
        wanted = bindings_to_add(args)
    with KafkaClient(args.bootstrap_server, **settings) as client:
        if args.add:
            for pattern, acl_entries in group_by_pattern(wanted).items():
                show("Adding ACLs for resource", pattern, acl_entries)
            Admin(client=client).create_acls(wanted)
            for pattern in group_by_pattern(wanted):
                current = describe(client, AclBindingFilter(pattern.resource_type, pattern.name, pattern.pattern_type,
                                                            None, None, Operation.ANY, Permission.ANY))
                show("Current ACLs for resource", pattern, [b.entry for b in current])
            return 0
        filters = [(rt, name, pt) for rt, name, pt in pattern_filters(args)]
        if args.remove:
            ops = operations(args.operation) if args.operation else [Operation.ANY]
            spec = [(p, h, Permission.ALLOW) for p in args.allow_principal for h in (args.allow_host or [None])]
            spec += [(p, h, Permission.DENY) for p in args.deny_principal for h in (args.deny_host or [None])]
            acl_filters = [AclBindingFilter(rt, name, pt, principal(p), h, op, perm)
                           for rt, name, pt in filters for p, h, perm in spec for op in ops]
            if not spec:      # no principal: every ACL of the resources
                if not any(name is not None for _, name, _ in filters):
                    raise ToolError("--remove needs a resource (--topic, --group, --cluster, --transactional-id)")
                acl_filters = [AclBindingFilter(rt, name, pt, None, None, Operation.ANY, Permission.ANY)
                               for rt, name, pt in filters]
            if not args.force:
                sys.stdout.write("Are you sure you want to remove ACLs: \n" + "\n".join(
                    f" \t{f.principal or 'any principal'} {f.operation.pascal} on {f.resource_type.pascal}:{f.name}"
                    for f in acl_filters) + " \n (y/n)\n")
                sys.stdout.flush()
                if not sys.stdin.readline().strip().lower().startswith("y"):
                    return 0
            Admin(client=client).delete_acls(acl_filters)
            for rt, name, pt in filters:
                current = describe(client, AclBindingFilter(rt, name, pt, None, None, Operation.ANY, Permission.ANY))
                for pattern, acl_entries in group_by_pattern(current).items():
                    show("Current ACLs for resource", pattern, acl_entries)
            return 0
        wanted_principals: list[str | None] = [principal(p) for p in args.principal] or [None]
        for rt, name, pt in filters:
            for who in wanted_principals:
                current = describe(client, AclBindingFilter(rt, name, pt, who, None, Operation.ANY, Permission.ANY))
                for pattern, acl_entries in group_by_pattern(current).items():
                    show(f"Current ACLs for resource" if who is None else f"ACLs for principal `{who}`", pattern, acl_entries)
    return 0


def console() -> None:
    run(main)


if __name__ == "__main__":
    console()
