"""The ACL decision (Kafka's AclAuthorizer rules), the filters of DescribeAcls/DeleteAcls and the
ZooKeeper formats of ACLs and change notifications, on plain values."""
from __future__ import annotations

import json

import pytest

from kafkalite.security.acl import (AccessControlEntry as Ace, AclBinding, AclBindingFilter, AclMatcher, Operation as Op,
                                    PatternType as PT, Permission as Perm, ResourcePattern as RP, ResourceType as RT,
                                    binding_error, parse_super_users)
from zk_schema import acls as zacl
from zk_schema.errors import ZkDataError

ALICE, BOB = "User:alice", "User:bob"


def matcher(acls: dict[RP, set[Ace]], **kw: object) -> AclMatcher:
    return AclMatcher({p: frozenset(e) for p, e in acls.items()}, **kw)  # type: ignore[arg-type]


def allow(principal: str, op: Op, host: str = "*") -> Ace:
    return Ace(principal, host, op, Perm.ALLOW)


def deny(principal: str, op: Op, host: str = "*") -> Ace:
    return Ace(principal, host, op, Perm.DENY)


def test_literal_allow_is_per_principal_operation_and_resource() -> None:
    """Read on topic A for alice lets alice read A, not write A, not read B; bob gets nothing."""
    m = matcher({RP(RT.TOPIC, "A", PT.LITERAL): {allow(ALICE, Op.READ)}})
    assert m.authorize(ALICE, "10.0.0.1", Op.READ, RT.TOPIC, "A")
    assert not m.authorize(ALICE, "10.0.0.1", Op.WRITE, RT.TOPIC, "A")
    assert not m.authorize(ALICE, "10.0.0.1", Op.READ, RT.TOPIC, "B")
    assert not m.authorize(BOB, "10.0.0.1", Op.READ, RT.TOPIC, "A")
    assert not m.authorize(ALICE, "10.0.0.1", Op.READ, RT.GROUP, "A")


def test_implied_operations() -> None:
    """Read/Write/Delete/Alter imply Describe; AlterConfigs implies DescribeConfigs; All grants
    everything; nothing else is implied (Describe does not give Read)."""
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        m = matcher({RP(RT.TOPIC, "t", PT.LITERAL): {allow(ALICE, op)}})
        assert m.authorize(ALICE, "h", Op.DESCRIBE, RT.TOPIC, "t"), op
    m = matcher({RP(RT.TOPIC, "t", PT.LITERAL): {allow(ALICE, Op.ALTER_CONFIGS)}})
    assert m.authorize(ALICE, "h", Op.DESCRIBE_CONFIGS, RT.TOPIC, "t")
    assert not m.authorize(ALICE, "h", Op.DESCRIBE, RT.TOPIC, "t")
    m = matcher({RP(RT.TOPIC, "t", PT.LITERAL): {allow(ALICE, Op.DESCRIBE)}})
    assert not m.authorize(ALICE, "h", Op.READ, RT.TOPIC, "t")
    m = matcher({RP(RT.TOPIC, "t", PT.LITERAL): {allow(ALICE, Op.ALL)}})
    assert all(m.authorize(ALICE, "h", op, RT.TOPIC, "t") for op in (Op.READ, Op.WRITE, Op.CREATE, Op.ALTER_CONFIGS))


def test_deny_beats_allow_also_through_all_and_wildcards() -> None:
    """A matching Deny wins over any Allow, whether it names the operation or All, the principal
    or User:*, the host or *; a Deny of Read does not take away Write, nor an implied Describe."""
    t = RP(RT.TOPIC, "t", PT.LITERAL)
    assert not matcher({t: {allow(ALICE, Op.READ), deny(ALICE, Op.READ)}}).authorize(ALICE, "h", Op.READ, RT.TOPIC, "t")
    assert not matcher({t: {allow(ALICE, Op.READ), deny("User:*", Op.ALL)}}).authorize(ALICE, "h", Op.READ, RT.TOPIC, "t")
    assert not matcher({t: {allow(ALICE, Op.READ), deny(ALICE, Op.READ, "10.0.0.9")}}).authorize(
        ALICE, "10.0.0.9", Op.READ, RT.TOPIC, "t")
    assert matcher({t: {allow(ALICE, Op.READ), deny(ALICE, Op.READ, "10.0.0.9")}}).authorize(
        ALICE, "10.0.0.1", Op.READ, RT.TOPIC, "t")
    m = matcher({t: {allow(ALICE, Op.ALL), deny(ALICE, Op.READ)}})
    assert m.authorize(ALICE, "h", Op.WRITE, RT.TOPIC, "t") and m.authorize(ALICE, "h", Op.DESCRIBE, RT.TOPIC, "t")
    # a deny on a prefix or on the wildcard resource applies too
    m = matcher({t: {allow(ALICE, Op.READ)}, RP(RT.TOPIC, "*", PT.LITERAL): {deny(ALICE, Op.READ)}})
    assert not m.authorize(ALICE, "h", Op.READ, RT.TOPIC, "t")
    m = matcher({t: {allow(ALICE, Op.READ)}, RP(RT.TOPIC, "", PT.PREFIXED): set(),
                 RP(RT.TOPIC, "t", PT.PREFIXED): {deny(ALICE, Op.READ)}})
    assert not m.authorize(ALICE, "h", Op.READ, RT.TOPIC, "t")


def test_prefixed_and_wildcard_patterns() -> None:
    """A prefixed pattern covers names starting with it (not shorter ones); the literal `*`
    covers every name of its type; a host-specific ACL covers only that host."""
    m = matcher({RP(RT.TOPIC, "etl-", PT.PREFIXED): {allow(ALICE, Op.WRITE)},
                 RP(RT.GROUP, "*", PT.LITERAL): {allow(ALICE, Op.READ, "10.1.1.1")}})
    assert m.authorize(ALICE, "h", Op.WRITE, RT.TOPIC, "etl-orders")
    assert m.authorize(ALICE, "h", Op.WRITE, RT.TOPIC, "etl-")
    assert not m.authorize(ALICE, "h", Op.WRITE, RT.TOPIC, "etl")
    assert not m.authorize(ALICE, "h", Op.WRITE, RT.TOPIC, "xetl-orders")
    assert m.authorize(ALICE, "10.1.1.1", Op.READ, RT.GROUP, "any-group")
    assert not m.authorize(ALICE, "10.1.1.2", Op.READ, RT.GROUP, "any-group")


def test_super_users_and_no_acl_default() -> None:
    """Super users pass everything, Deny included; a resource no ACL applies to is refused unless
    allow.everyone.if.no.acl.found, which does not open a resource that has ACLs."""
    t = RP(RT.TOPIC, "t", PT.LITERAL)
    supers = parse_super_users("User:admin; User:broker;")
    assert supers == {"User:admin", "User:broker"}
    m = matcher({t: {deny("User:*", Op.ALL)}}, super_users=supers)
    assert m.authorize("User:broker", "h", Op.READ, RT.TOPIC, "t")
    assert m.authorize("User:admin", "h", Op.CLUSTER_ACTION, RT.CLUSTER, "kafka-cluster")
    assert not matcher({}).authorize(ALICE, "h", Op.READ, RT.TOPIC, "free")
    m = matcher({t: {allow(BOB, Op.READ)}}, allow_if_no_acl=True)
    assert m.authorize(ALICE, "h", Op.READ, RT.TOPIC, "free")
    assert not m.authorize(ALICE, "h", Op.READ, RT.TOPIC, "t")


def test_authorized_operations_bit_field() -> None:
    """KIP-430: bit op.code for every supported operation allowed (Read on a topic: Read and
    Describe = bits 3 and 8; a group: only its own three operations count)."""
    m = matcher({RP(RT.TOPIC, "t", PT.LITERAL): {allow(ALICE, Op.READ)},
                 RP(RT.GROUP, "g", PT.LITERAL): {allow(ALICE, Op.ALL)}})
    assert m.authorized_operations(ALICE, "h", RT.TOPIC, "t") == (1 << 3) | (1 << 8)
    assert m.authorized_operations(ALICE, "h", RT.GROUP, "g") == (1 << 3) | (1 << 8) | (1 << 6)
    assert m.authorized_operations(BOB, "h", RT.TOPIC, "t") == 0


def test_authorize_by_resource_type() -> None:
    """Kafka 2.8's authorizeByResourceType (InitProducerId of an idempotent producer): Write on any
    topic not shadowed by a Deny; a Deny on `*` refuses everything."""
    w = allow(ALICE, Op.WRITE)
    assert matcher({RP(RT.TOPIC, "a", PT.LITERAL): {w}}).authorize_by_resource_type(ALICE, "h", Op.WRITE, RT.TOPIC)
    assert not matcher({RP(RT.TOPIC, "a", PT.LITERAL): {allow(ALICE, Op.READ)}}).authorize_by_resource_type(
        ALICE, "h", Op.WRITE, RT.TOPIC)
    assert not matcher({RP(RT.TOPIC, "a", PT.LITERAL): {w, deny(ALICE, Op.WRITE)}}).authorize_by_resource_type(
        ALICE, "h", Op.WRITE, RT.TOPIC)
    assert not matcher({RP(RT.TOPIC, "ab", PT.PREFIXED): {w}, RP(RT.TOPIC, "a", PT.PREFIXED): {deny(ALICE, Op.WRITE)}}
                       ).authorize_by_resource_type(ALICE, "h", Op.WRITE, RT.TOPIC)
    assert not matcher({RP(RT.TOPIC, "a", PT.LITERAL): {w}, RP(RT.TOPIC, "*", PT.LITERAL): {deny(ALICE, Op.WRITE)}}
                       ).authorize_by_resource_type(ALICE, "h", Op.WRITE, RT.TOPIC)


def test_filters_match_as_kafka() -> None:
    """ANY matches every pattern type by exact name; MATCH also finds the wildcard and prefixes
    that apply to the name; a null field matches everything."""
    lit, star, pre = RP(RT.TOPIC, "orders", PT.LITERAL), RP(RT.TOPIC, "*", PT.LITERAL), RP(RT.TOPIC, "ord", PT.PREFIXED)
    m = matcher({lit: {allow(ALICE, Op.READ)}, star: {allow(BOB, Op.WRITE)}, pre: {deny(ALICE, Op.WRITE)}})

    def names(rt: RT, name: str | None, pt: PT, principal: str | None = None, op: Op = Op.ANY) -> set[tuple[str, PT]]:
        return {(b.pattern.name, b.pattern.pattern_type)
                for b in m.bindings(AclBindingFilter(rt, name, pt, principal, None, op, Perm.ANY))}
    assert names(RT.ANY, None, PT.ANY) == {("orders", PT.LITERAL), ("*", PT.LITERAL), ("ord", PT.PREFIXED)}
    assert names(RT.TOPIC, "orders", PT.ANY) == {("orders", PT.LITERAL)}
    assert names(RT.TOPIC, "orders", PT.MATCH) == {("orders", PT.LITERAL), ("*", PT.LITERAL), ("ord", PT.PREFIXED)}
    assert names(RT.TOPIC, "ord", PT.PREFIXED) == {("ord", PT.PREFIXED)}
    assert names(RT.GROUP, None, PT.ANY) == set()
    assert names(RT.ANY, None, PT.ANY, principal=BOB) == {("*", PT.LITERAL)}
    assert names(RT.ANY, None, PT.ANY, op=Op.WRITE) == {("*", PT.LITERAL), ("ord", PT.PREFIXED)}


@pytest.mark.parametrize("pattern,entry,reason", [
    (RP(RT.CLUSTER, "other", PT.LITERAL), allow(ALICE, Op.ALTER), "only valid name"),
    (RP(RT.TOPIC, "", PT.LITERAL), allow(ALICE, Op.READ), "empty resource name"),
    (RP(RT.TOPIC, "a/b", PT.LITERAL), allow(ALICE, Op.READ), "invalid resource name"),
    (RP(RT.TOPIC, "t", PT.MATCH), allow(ALICE, Op.READ), "pattern type"),
    (RP(RT.ANY, "t", PT.LITERAL), allow(ALICE, Op.READ), "resource type"),
    (RP(RT.TOPIC, "t", PT.LITERAL), allow(ALICE, Op.ANY), "operation"),
    (RP(RT.TOPIC, "t", PT.LITERAL), Ace(ALICE, "*", Op.READ, Perm.ANY), "permission"),
    (RP(RT.TOPIC, "t", PT.LITERAL), allow("alice", Op.READ), "principal"),
])
def test_invalid_bindings(pattern: RP, entry: Ace, reason: str) -> None:
    """CreateAcls refuses what Kafka refuses, with a reason."""
    error = binding_error(AclBinding(pattern, entry))
    assert error is not None and reason in error
    assert binding_error(AclBinding(RP(RT.CLUSTER, "kafka-cluster", PT.LITERAL), allow(ALICE, Op.ALTER))) is None


def test_zookeeper_formats() -> None:
    """Paths, ACL JSON and both change-notification formats are Kafka's, and round-trip."""
    lit = RP(RT.TRANSACTIONAL_ID, "tx-1", PT.LITERAL)
    pre = RP(RT.GROUP, "etl-", PT.PREFIXED)
    assert zacl.resource_path(lit) == "/kafka-acl/TransactionalId/tx-1"
    assert zacl.resource_path(pre) == "/kafka-acl-extended/prefixed/Group/etl-"
    assert zacl.change_prefix(PT.LITERAL) == "/kafka-acl-changes/acl_changes_"
    assert zacl.change_prefix(PT.PREFIXED) == "/kafka-acl-extended-changes/acl_changes_"
    entries = frozenset({allow(ALICE, Op.DESCRIBE_CONFIGS), deny(BOB, Op.IDEMPOTENT_WRITE, "10.0.0.1")})
    data = zacl.encode_acls(entries)
    obj = json.loads(data)
    assert obj["version"] == 1
    assert {"principal": "User:alice", "permissionType": "Allow", "operation": "DescribeConfigs", "host": "*"} in obj["acls"]
    assert {"principal": "User:bob", "permissionType": "Deny", "operation": "IdempotentWrite",
            "host": "10.0.0.1"} in obj["acls"]
    assert zacl.decode_acls("/x", data) == entries
    # Kafka's own writing, spaces and all
    kafka = b'{"version": 1, "acls": [ { "host":"*", "permissionType": "Allow","operation": "ClusterAction","principal": "User:b"}]}'
    assert zacl.decode_acls("/x", kafka) == {Ace("User:b", "*", Op.CLUSTER_ACTION, Perm.ALLOW)}
    assert zacl.encode_change(lit) == b"TRANSACTIONAL_ID:tx-1"
    assert json.loads(zacl.encode_change(pre)) == {"version": 1, "resourceType": "GROUP", "name": "etl-",
                                                   "patternType": "PREFIXED"}
    assert zacl.decode_change(PT.LITERAL, b"TOPIC:a:b") == RP(RT.TOPIC, "a:b", PT.LITERAL)
    assert zacl.decode_change(PT.LITERAL, b"Topic:x") == RP(RT.TOPIC, "x", PT.LITERAL)
    assert zacl.decode_change(PT.PREFIXED, zacl.encode_change(pre)) == pre
    for bad in (b"", b"nocolon", b"NOPE:x"):
        with pytest.raises(ZkDataError):
            zacl.decode_change(PT.LITERAL, bad)
    with pytest.raises(ZkDataError):
        zacl.decode_acls("/x", b'{"version":1,"acls":[{"principal":"User:a","host":"*","operation":"Fly",'
                               b'"permissionType":"Allow"}]}')
