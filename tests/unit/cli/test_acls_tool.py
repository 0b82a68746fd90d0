"""kafkalite-acls' option logic (the bindings --add asks for, Kafka's conveniences and refusals)
and the client's security properties from a --command-config file, without a broker."""
from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.cli import acls as tool
from kafkalite.cli.common import ToolError, read_properties
from kafkalite.client import ClientError
from kafkalite.client.security import ClientSecurity
from kafkalite.security.acl import Operation as Op, PatternType as PT, Permission as Perm, ResourceType as RT


def bindings(*argv: str) -> set[tuple[RT, str, PT, str, str, Op, Perm]]:
    args = tool.build_parser().parse_args(["--bootstrap-server", "h:1", "--add", *argv])
    return {(b.pattern.resource_type, b.pattern.name, b.pattern.pattern_type, b.entry.principal, b.entry.host,
             b.entry.operation, b.entry.permission) for b in tool.bindings_to_add(args)}


def test_add_builds_kafkas_bindings() -> None:
    """Principals x hosts x operations x resources; hosts default to *, operations to All."""
    assert bindings("--allow-principal", "User:a", "--allow-host", "10.0.0.1", "--operation", "Read",
                    "--operation", "describe", "--topic", "t", "--group", "g") == {
        (RT.TOPIC, "t", PT.LITERAL, "User:a", "10.0.0.1", Op.READ, Perm.ALLOW),
        (RT.TOPIC, "t", PT.LITERAL, "User:a", "10.0.0.1", Op.DESCRIBE, Perm.ALLOW),
        (RT.GROUP, "g", PT.LITERAL, "User:a", "10.0.0.1", Op.READ, Perm.ALLOW),
        (RT.GROUP, "g", PT.LITERAL, "User:a", "10.0.0.1", Op.DESCRIBE, Perm.ALLOW)}
    assert bindings("--deny-principal", "User:*", "--cluster") == {
        (RT.CLUSTER, "kafka-cluster", PT.LITERAL, "User:*", "*", Op.ALL, Perm.DENY)}


def test_producer_and_consumer_conveniences() -> None:
    """--producer: Write, Describe, Create on the topics (+ IdempotentWrite with --idempotent,
    + Write/Describe on --transactional-id); --consumer: Read, Describe on topics, Read on groups."""
    got = bindings("--allow-principal", "User:p", "--producer", "--topic", "t", "--transactional-id", "tx",
                   "--idempotent", "--resource-pattern-type", "prefixed")
    assert {(r, n, pt, o) for r, n, pt, _p, _h, o, _x in got} == {
        (RT.TOPIC, "t", PT.PREFIXED, Op.WRITE), (RT.TOPIC, "t", PT.PREFIXED, Op.DESCRIBE),
        (RT.TOPIC, "t", PT.PREFIXED, Op.CREATE), (RT.TRANSACTIONAL_ID, "tx", PT.PREFIXED, Op.WRITE),
        (RT.TRANSACTIONAL_ID, "tx", PT.PREFIXED, Op.DESCRIBE),
        (RT.CLUSTER, "kafka-cluster", PT.LITERAL, Op.IDEMPOTENT_WRITE)}
    got = bindings("--allow-principal", "User:c", "--consumer", "--topic", "t", "--group", "g")
    assert {(r, o) for r, _n, _pt, _p, _h, o, _x in got} == {(RT.TOPIC, Op.READ), (RT.TOPIC, Op.DESCRIBE),
                                                             (RT.GROUP, Op.READ)}


@pytest.mark.parametrize("argv,message", [
    (["--topic", "t"], "--allow-principal or --deny-principal"),
    (["--allow-principal", "alice", "--topic", "t"], "invalid principal"),
    (["--allow-principal", "User:a"], "at least one resource"),
    (["--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"], "unknown --operation"),
    (["--allow-principal", "User:a", "--operation", "IdempotentWrite", "--topic", "t"], "only supports operations"),
    (["--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"], "cannot be used with --add"),
    (["--allow-principal", "User:a", "--consumer", "--topic", "t"], "--consumer needs --group"),
])
def test_add_refusals(argv: list[str], message: str) -> None:
    """Bad combinations are one-line ToolErrors, before any connection."""
    args = tool.build_parser().parse_args(["--bootstrap-server", "h:1", "--add", *argv])
    with pytest.raises(ToolError, match=message):
        tool.bindings_to_add(args)


def test_command_config_properties(tmp_path: Path) -> None:
    """A Java properties file (comments, continuations, ':' separators) gives the client's
    security: JAAS or librdkafka user names, PEM trust, host name checking; bad values refused."""
    f = tmp_path / "client.properties"
    f.write_text("# admin\nsecurity.protocol = SASL_SSL\nsasl.mechanism: SCRAM-SHA-256\n"
                 "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
                 '   username="admin" password="s3cr=t";\nssl.truststore.location=/ca.pem\n'
                 "ssl.endpoint.identification.algorithm=\n")
    sec = ClientSecurity.from_properties(read_properties(str(f)))
    assert (sec.protocol, sec.mechanism, sec.username, sec.password, sec.ca_location, sec.check_hostname) == \
        ("SASL_SSL", "SCRAM-SHA-256", "admin", "s3cr=t", "/ca.pem", False)
    assert sec.tls and sec.sasl
    sec = ClientSecurity.from_properties({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                                          "sasl.username": "u", "sasl.password": "p"})
    assert (sec.mechanism, sec.username, sec.tls) == ("PLAIN", "u", False)
    assert not ClientSecurity.from_properties({}).sasl
    for bad in ({"security.protocol": "KERBEROS"}, {"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"},
                {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"},
                {"security.protocol": "SSL", "ssl.truststore.type": "JKS"}):
        with pytest.raises(ClientError):
            ClientSecurity.from_properties(bad)
    with pytest.raises(ToolError, match="cannot read"):
        read_properties(str(tmp_path / "missing"))
