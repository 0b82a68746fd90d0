"""ACLs end to end: two brokers with Kafka's AclAuthorizer, brokers talking SASL_SSL as the super
user ``admin``, clients on confluent-kafka (librdkafka) over SASL_SSL with SCRAM-SHA-512.

Shows: ACLs made with librdkafka's CreateAcls apply on both brokers; a principal with Read on
topic A and group G reads A in that group but cannot read B (TOPIC_AUTHORIZATION_FAILED), cannot
create topics and does not see B in its metadata; a prefixed Write ACL lets it produce to matching
topics until a Deny on one of them wins; the super user passes everything; and a PLAINTEXT client
(User:ANONYMOUS) sending ControlledShutdown or a follower Fetch is refused while leaders and ISRs
stay as they were."""
from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)

from kafkalite.cli import configs as configs_tool
from kafkalite.errors import ErrorCode
from kafkalite.protocol.api_keys import ApiKey
from tests.fault.cluster_support import controller_id, full_isr, zk_states
from tests.support import wire
from tests.support.security import ADMIN_PASSWORD, ADMIN_USER, listener_port, make_pki, secure_overrides
from tests.support.waiting import wait_for

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "super.users": f"User:{ADMIN_USER}", "auto.create.topics.enable": "true",
              "offsets.topic.replication.factor": "2"}
ALICE, ALICE_PASSWORD = "alice", "alice-secret"


def add_user(cluster: Any, user: str, password: str) -> None:
    assert configs_tool.main(["--zookeeper", cluster.zk_connect, "--alter", "--entity-type", "users",
                              "--entity-name", user, "--add-config", f"SCRAM-SHA-512=[password={password}]"]) == 0


def conf(cluster: Any, pki: Any, user: str, password: str) -> dict[str, Any]:
    servers = ",".join(f"127.0.0.1:{listener_port(b, 'SASL_SSL')}" for b in cluster.brokers if b.alive)
    return {"bootstrap.servers": servers, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": password, "ssl.ca.location": str(pki.ca)}


def acl(name: str, op: int, pattern: int = ResourcePatternType.LITERAL, kind: int = ResourceType.TOPIC,
        permission: int = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(kind, name, pattern, f"User:{ALICE}", "*", op, permission)


def create_acls(admin: AdminClient, bindings: list[AclBinding]) -> None:
    for f in admin.create_acls(bindings, request_timeout=30).values():
        f.result(30)


def produce(c: dict[str, Any], topic: str, values: list[bytes]) -> list[Any]:
    """Produce and flush; the delivery errors (None for a delivered record)."""
    errors: list[Any] = []
    p = Producer({**c, "acks": "all", "message.timeout.ms": 15000, "enable.idempotence": False})
    for v in values:
        p.produce(topic, value=v, on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    return errors


def acls_of(cluster: Any, pki: Any, broker: Any) -> set[tuple[Any, ...]]:
    """Every ACL one broker's cache holds (DescribeAcls v2 to that broker, as the super user)."""
    from kafkalite.client.connection import BrokerConnection
    from kafkalite.client.security import ClientSecurity

    security = ClientSecurity("SASL_SSL", "SCRAM-SHA-512", ADMIN_USER, ADMIN_PASSWORD, str(pki.ca))
    conn = BrokerConnection("127.0.0.1", listener_port(broker, "SASL_SSL"), node_id=broker.broker_id,
                            client_id="acl-test", connect_timeout=10, request_timeout=10, security=security)
    try:
        r = conn.request(ApiKey.DESCRIBE_ACLS, {"resource_type_filter": 1, "resource_name_filter": None,
                                                "pattern_type_filter": 1, "principal_filter": None,
                                                "host_filter": None, "operation": 1, "permission_type": 1}, version=2)
    finally:
        conn.close()
    assert r["error_code"] == 0
    return {(x["resource_type"], x["resource_name"], x["pattern_type"], a["principal"], a["host"], a["operation"],
             a["permission_type"]) for x in r["resources"] for a in x["acls"]}


def propagated(cluster: Any, pki: Any) -> None:
    """Wait until every broker holds the same ACLs: the broker that made a change holds it at
    once, the others once its change notification reached them (Kafka's ACLs are eventually
    consistent across brokers the same way)."""
    wait_for(lambda: len({frozenset(acls_of(cluster, pki, b)) for b in cluster.brokers if b.alive}) == 1, 30,
             "every broker applying the ACL change notifications")


@pytest.fixture
def secured(cluster_factory: Any, tmp_path: Path) -> tuple[Any, Any, AdminClient]:
    pki = make_pki(tmp_path / "pki")
    cluster = cluster_factory(2, {**secure_overrides(pki, inter_broker="SASL_SSL"), **AUTHORIZER})
    add_user(cluster, ADMIN_USER, ADMIN_PASSWORD)
    add_user(cluster, ALICE, ALICE_PASSWORD)
    admin = AdminClient(conf(cluster, pki, ADMIN_USER, ADMIN_PASSWORD))
    return cluster, pki, admin


def test_read_only_principal_prefixes_deny_and_super_user(secured: tuple[Any, Any, AdminClient]) -> None:
    """Read on A and G only: reads A in G, B refused and hidden, no topic creation; prefixed
    Write works until a Deny; the super user passes; ACL APIs are refused to alice."""
    cluster, pki, admin = secured
    tag = uuid.uuid4().hex[:6]
    a, b, etl = f"A-{tag}", f"B-{tag}", f"etl-{tag}"
    group = f"G-{tag}"
    for f in admin.create_topics([NewTopic(t, 1, 2) for t in (a, b, etl)], operation_timeout=30).values():
        f.result(30)
    wait_for(lambda: all(full_isr(cluster, t, 2) for t in (a, b, etl)), 60, "topics replicated (brokers as admin)")
    admin_conf = conf(cluster, pki, ADMIN_USER, ADMIN_PASSWORD)
    assert produce(admin_conf, a, [b"a1", b"a2", b"a3"]) == [None] * 3        # the super user passes
    assert produce(admin_conf, b, [b"b1"]) == [None]
    create_acls(admin, [acl(a, AclOperation.READ), acl(group, AclOperation.READ, kind=ResourceType.GROUP)])
    propagated(cluster, pki)
    described = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, f"User:{ALICE}",
                                                     None, AclOperation.ANY, AclPermissionType.ANY),
                                    request_timeout=30).result(30)
    assert {(x.name, x.operation) for x in described} == {(a, AclOperation.READ), (group, AclOperation.READ)}

    alice = conf(cluster, pki, ALICE, ALICE_PASSWORD)
    # Metadata: A visible, B hidden
    alice_admin = AdminClient(alice)          # kept: a dropped AdminClient fails its futures with _DESTROY
    topics = alice_admin.list_topics(timeout=30).topics
    assert a in topics and b not in topics and etl not in topics
    # reads A with group G
    consumer = Consumer({**alice, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([a])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < 3 and time.monotonic() < deadline:
        m = consumer.poll(1.0)
        if m is not None and m.error() is None:
            got.append(m.value())
    assert got == [b"a1", b"a2", b"a3"]
    committed = consumer.commit(asynchronous=False)
    assert committed is not None and committed[0].error is None and committed[0].offset == 3
    consumer.close()
    # cannot read B: librdkafka reports the topic's authorization error to the subscriber
    reader = Consumer({**alice, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    reader.subscribe([b])
    errors: list[int] = []
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        m = reader.poll(1.0)
        if m is not None and m.error() is not None:
            errors.append(m.error().code())
    reader.close()
    assert errors and errors[0] == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # cannot create topics (CreateTopics, or auto-creation through Metadata)
    with pytest.raises(KafkaException) as refused:
        alice_admin.create_topics([NewTopic(f"new-{tag}", 1, 1)], operation_timeout=30)[f"new-{tag}"].result(30)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    r = wire.request(f"127.0.0.1:{listener_port(cluster.brokers[0], 'PLAINTEXT')}", ApiKey.METADATA, 8,
                     wire.metadata_body([f"auto-{tag}"], allow_auto_topic_creation=True))
    assert r["topics"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED      # ANONYMOUS: no Create
    assert cluster.zk.exists(f"{cluster.chroot}/brokers/topics/new-{tag}") is None
    assert cluster.zk.exists(f"{cluster.chroot}/brokers/topics/auto-{tag}") is None

    # prefixed Write: alice produces to etl-*, not to A; a Deny on the topic then wins
    create_acls(admin, [acl("etl-", AclOperation.WRITE, ResourcePatternType.PREFIXED)])
    propagated(cluster, pki)
    assert produce(alice, etl, [b"e1"]) == [None]
    denied = produce(alice, a, [b"nope"])
    assert denied and denied[0] is not None and denied[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    create_acls(admin, [acl(etl, AclOperation.WRITE, permission=AclPermissionType.DENY)])
    propagated(cluster, pki)
    denied = produce(alice, etl, [b"e2"])
    assert denied and denied[0] is not None and denied[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce(admin_conf, etl, [b"e3"]) == [None]          # the super user still passes
    # alice may not manage ACLs
    with pytest.raises(KafkaException) as refused:
        create_acls(alice_admin, [acl(b, AclOperation.READ)])
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_a_client_cannot_send_inter_broker_requests(secured: tuple[Any, Any, AdminClient]) -> None:
    """ControlledShutdown and a follower Fetch from a PLAINTEXT client are refused and change
    nothing; the brokers, authenticated as the super user, replicate and fail over (kill -9)."""
    cluster, pki, admin = secured
    topic = f"t-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 2, 2)], operation_timeout=30)[topic].result(30)
    wait_for(lambda: full_isr(cluster, topic, 2), 60, "both partitions replicated")
    before = {p: (s["leader"], s["leader_epoch"], sorted(s["isr"])) for p, s in zk_states(cluster, topic).items()}
    leader = cluster.broker(before[0][0])
    plaintext = f"127.0.0.1:{listener_port(leader, 'PLAINTEXT')}"
    epoch = cluster.zk.get(f"{cluster.chroot}/brokers/ids/{leader.broker_id}")[1].czxid
    # sent to the controller, which would grant it to the broker itself
    at_controller = f"127.0.0.1:{listener_port(cluster.broker(controller_id(cluster)), 'PLAINTEXT')}"
    r = wire.request(at_controller, ApiKey.CONTROLLED_SHUTDOWN, 3, {"broker_id": leader.broker_id, "broker_epoch": epoch})
    assert r["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    follower = next(x.broker_id for x in cluster.brokers if x.broker_id != leader.broker_id)
    fetch = {"replica_id": follower, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
             "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                 {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                  "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""}
    r = wire.request(plaintext, ApiKey.FETCH, 11, fetch)
    assert r["responses"][0]["partitions"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    # the controller has acted since (a topic created after the refused requests is replicated),
    # so a granted controlled shutdown would have moved the leaders by now
    probe = f"probe-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(probe, 1, 2)], operation_timeout=30)[probe].result(30)
    wait_for(lambda: full_isr(cluster, probe, 2), 60, "a later topic replicated")
    after = {p: (s["leader"], s["leader_epoch"], sorted(s["isr"])) for p, s in zk_states(cluster, topic).items()}
    assert after == before
    assert all(b.alive for b in cluster.brokers)
    # the brokers themselves (User:admin, a super user, on the SASL_SSL inter-broker listener)
    # still replicate and fail over: kill -9 the leader, then bring it back into every ISR
    leader.kill()
    wait_for(lambda: all(s["leader"] == follower for s in zk_states(cluster, topic).values()), 30,
             "leaders moved to the surviving broker")
    admin_conf = conf(cluster, pki, ADMIN_USER, ADMIN_PASSWORD)
    assert produce(admin_conf, topic, [b"after-failover"]) == [None]
    leader.start()
    wait_for(lambda: full_isr(cluster, topic, 2), 60, "the restarted broker back in every ISR (ClusterAction as admin)")


def test_kafkalite_acls_tool_over_sasl_ssl(secured: tuple[Any, Any, AdminClient], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """kafkalite-acls --bootstrap-server with a --command-config of SASL_SSL + SCRAM properties adds
    (with --producer, --consumer and a prefixed pattern), lists and removes ACLs, as kafka-acls.sh
    prints them; what it added is what librdkafka's DescribeAcls sees; a wrong password or a
    non-admin user ends with one line and exit code 1."""
    from kafkalite.cli import acls as tool
    from kafkalite.cli.common import run

    cluster, pki, admin = secured
    server = f"127.0.0.1:{listener_port(cluster.brokers[0], 'SASL_SSL')}"
    props = tmp_path / "admin.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
                     f'    username="{ADMIN_USER}" password="{ADMIN_PASSWORD}";\n'
                     f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca}\n")
    base = ["--bootstrap-server", server, "--command-config", str(props)]
    assert tool.main([*base, "--add", "--allow-principal", "User:alice", "--producer", "--consumer",
                      "--topic", "orders", "--group", "billing", "--idempotent"]) == 0
    assert tool.main([*base, "--add", "--deny-principal", "User:mallory", "--deny-host", "10.9.9.9",
                      "--operation", "Read", "--operation", "Describe", "--topic", "etl-",
                      "--resource-pattern-type", "prefixed"]) == 0
    out = capsys.readouterr().out
    propagated(cluster, pki)
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`: " in out
    assert " \t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW) " in out
    seen = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                                AclOperation.ANY, AclPermissionType.ANY), request_timeout=30).result(30)
    assert {(x.restype, x.name, x.resource_pattern_type, x.principal, x.host, x.operation, x.permission_type)
            for x in seen} == {
        *((ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*", op, AclPermissionType.ALLOW)
          for op in (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE, AclOperation.READ)),
        (ResourceType.GROUP, "billing", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ,
         AclPermissionType.ALLOW),
        (ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:alice", "*",
         AclOperation.IDEMPOTENT_WRITE, AclPermissionType.ALLOW),
        *((ResourceType.TOPIC, "etl-", ResourcePatternType.PREFIXED, "User:mallory", "10.9.9.9", op,
           AclPermissionType.DENY) for op in (AclOperation.READ, AclOperation.DESCRIBE)),
    }
    assert tool.main([*base, "--list", "--topic", "etl-", "--resource-pattern-type", "prefixed"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=etl-, patternType=PREFIXED)`: ")
    assert out.count("permissionType=DENY") == 2 and "orders" not in out
    assert tool.main([*base, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Write",
                      "--topic", "orders"]) == 0
    assert tool.main([*base, "--list", "--topic", "orders"]) == 0
    out = capsys.readouterr().out
    assert "operation=WRITE" not in out and "operation=READ" in out
    assert tool.main([*base, "--remove", "--force", "--topic", "orders"]) == 0      # every ACL of the topic
    assert tool.main([*base, "--list", "--topic", "orders"]) == 0
    assert "orders" not in capsys.readouterr().out.split("Current ACLs", 1)[-1]
    # refusals: one line, exit code 1
    bad = tmp_path / "bad.properties"
    bad.write_text(props.read_text().replace(ADMIN_PASSWORD, "wrong"))
    for argv in (["--bootstrap-server", server, "--command-config", str(bad), "--list"],
                 [*base, "--add", "--topic", "x"],
                 [*base, "--add", "--allow-principal", "alice", "--topic", "x"],
                 [*base, "--add", "--allow-principal", "User:a", "--operation", "ClusterAction", "--topic", "x"]):
        with pytest.raises(SystemExit) as exited:
            run(tool.main, argv)
        assert exited.value.code == 1
        err = capsys.readouterr().err.strip()
        assert err.startswith("Error: ") and "\n" not in err, err


def readme_acl_blocks() -> tuple[str, list[list[str]], list[str], list[str]]:
    """The ACL walk-through of docs/security.md: the admin.properties text, each kafkalite-acls
    command (argv, continuation lines joined) and the --list output it shows."""
    import re
    import shlex

    text = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    section = text.split("\n## ACLs\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.S)
    props = next(body for kind, body in blocks if kind == "properties" and "security.protocol" in body)
    script = next(body for kind, body in blocks if kind == "bash").replace("\\\n", " ")
    commands = [shlex.split(line)[1:] for line in script.splitlines() if line.startswith("kafkalite-acls ")]
    shown = [line[len("#   "):] for line in script.splitlines() if line.startswith("#   ")]
    kcat = next(shlex.split(line) for line in script.splitlines() if line.startswith("kcat "))
    return props, commands, shown, kcat


def test_the_documented_acl_walkthrough_works(secured: tuple[Any, Any, AdminClient], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The documentation's ACL commands, run as written (only the address and the CA path changed),
    give alice what they say: she consumes orders in group billing (the page's kcat line), produces
    to etl-*, not to etl-audit, and no longer to etl-* after the --remove; --list prints what the
    page shows."""
    from kafkalite.cli import acls as tool

    cluster, pki, admin = secured
    props, commands, shown, kcat = readme_acl_blocks()
    assert len(commands) == 5 and shown
    server = f"127.0.0.1:{listener_port(cluster.brokers[0], 'SASL_SSL')}"
    path = tmp_path / "admin.properties"
    path.write_text(props.replace("/etc/kafkalite/ca.pem", str(pki.ca)))
    for f in admin.create_topics([NewTopic(t, 1, 2) for t in ("orders", "etl-1", "etl-audit")],
                                 operation_timeout=30).values():
        f.result(30)
    assert produce(conf(cluster, pki, ADMIN_USER, ADMIN_PASSWORD), "orders", [b"o1"]) == [None]
    alice = conf(cluster, pki, ALICE, ALICE_PASSWORD)
    for argv in commands[:-1]:
        capsys.readouterr()
        argv = [server if a == "127.0.0.1:9093" else str(path) if a == "admin.properties" else a for a in argv]
        assert tool.main(argv) == 0, argv
    listed = [line.strip() for line in capsys.readouterr().out.splitlines() if line.strip()]
    propagated(cluster, pki)
    assert listed == [line.strip() for line in shown]
    # the page's kcat line as alice, told to stop after the one record (-c 1 -e)
    argv = [server if a == "127.0.0.1:9093" else a.replace("/etc/kafkalite/ca.pem", str(pki.ca)) for a in kcat]
    out = subprocess.run([*argv, "-o", "beginning", "-c", "1", "-e"], capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-2000:]
    assert out.stdout.decode().split() == ["o1"]
    assert produce(alice, "etl-1", [b"e"]) == [None]
    denied = produce(alice, "etl-audit", [b"e"])
    assert denied[0] is not None and denied[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    last = [server if a == "127.0.0.1:9093" else str(path) if a == "admin.properties" else a for a in commands[-1]]
    assert tool.main(last) == 0
    propagated(cluster, pki)
    denied = produce(alice, "etl-1", [b"e"])
    assert denied[0] is not None and denied[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
