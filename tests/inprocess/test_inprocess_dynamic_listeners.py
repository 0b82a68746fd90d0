"""Dynamic listener configs on in-process brokers (Kafka's DynamicListenerConfig, per broker):
IncrementalAlterConfigs of ``listeners`` / ``listener.security.protocol.map`` binds a new listener
that serves requests and closes a removed one with its connections; ``advertised.listeners``
re-writes ``/brokers/ids/<id>`` so the other brokers' Metadata names the new endpoint; the
validation refuses what Kafka refuses (at the cluster default, without the inter-broker listener,
a listener without a security protocol, advertised names that are no listener, a protocol change of
an existing listener); ``sasl.enabled.mechanisms`` applies to the next SASL handshake; Kerberos keys
are stored and described as dynamic broker configs."""
from __future__ import annotations

import json
from typing import Any

from kafkalite.errors import ErrorCode
from kafkalite.net import client as net_client
from tests.support.inprocess import InProcessClient, InProcessCluster

METADATA, SASL_HANDSHAKE, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 3, 17, 32, 44
BROKER, SET, DELETE = 4, 0, 1
PROTOCOLS = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"


def alter(cluster: InProcessCluster, via: int, name: str, ops: list[tuple[str, int, str | None]],
          validate_only: bool = False) -> dict[str, Any]:
    body = {"resources": [{"resource_type": BROKER, "resource_name": name,
                           "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops]}],
            "validate_only": validate_only}
    return cluster.client(via).request(INCREMENTAL_ALTER_CONFIGS, 0, body)["responses"][0]


def connect(cluster: InProcessCluster, port: int) -> InProcessClient:
    reactor: Any = cluster.reactor
    proto = cluster.wait(net_client.connect(reactor, "127.0.0.1", port, "dyn-listeners", 5.0),
                         what=f"a connection to port {port}")
    client = InProcessClient(cluster, proto)
    cluster.clients.append(client)
    return client


def brokers_in_metadata(client: InProcessClient) -> dict[int, tuple[str, int]]:
    resp = client.request(METADATA, 8, {"topics": [], "allow_auto_topic_creation": False,
                                        "include_cluster_authorized_operations": False,
                                        "include_topic_authorized_operations": False})
    return {b["node_id"]: (b["host"], b["port"]) for b in resp["brokers"]}


def registration(cluster: InProcessCluster, broker_id: int) -> dict[str, Any]:
    path = f"{cluster.chroot}/brokers/ids/{broker_id}"
    return dict(json.loads(cluster.zk_server.dump(path)[path]))


def bound_port(cluster: InProcessCluster, broker_id: int, listener: str) -> int:
    return int(cluster.brokers[broker_id].bound[listener][1].getHost().port)


def test_listeners_are_added_advertised_and_removed_live(inprocess_cluster_factory: Any) -> None:
    cluster = inprocess_cluster_factory(2)
    epoch = cluster.brokers[1].broker_epoch
    listeners = "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0"
    entry = alter(cluster, 1, "1", [("listeners", SET, listeners),
                                    ("listener.security.protocol.map", SET, PROTOCOLS + ",EXTRA:PLAINTEXT")])
    assert entry["error_code"] == 0, entry
    cluster.pump_until(lambda: "EXTRA" in registration(cluster, 1)["listener_security_protocol_map"],
                       what="broker 1 to bind EXTRA and re-register")
    extra_port = bound_port(cluster, 1, "EXTRA")
    assert f"EXTRA://127.0.0.1:{extra_port}" in registration(cluster, 1)["endpoints"]
    assert cluster.brokers[1].broker_epoch == epoch              # updated in place, not re-registered
    # the new listener serves: Metadata over EXTRA names broker 1 by its EXTRA endpoint (broker 0 has none)
    extra = connect(cluster, extra_port)
    assert brokers_in_metadata(extra) == {1: ("127.0.0.1", extra_port)}
    cluster.pump_until(lambda: "EXTRA" in cluster.brokers[0].metadata.brokers[1].endpoints,
                       what="broker 0 to see broker 1's new listener")

    # advertised.listeners: broker 0's Metadata (over PLAINTEXT) gives broker 1's new address
    plain_port = bound_port(cluster, 1, "PLAINTEXT")
    entry = alter(cluster, 1, "1", [("advertised.listeners", SET,
                                     f"PLAINTEXT://broker1.example:{plain_port},EXTRA://127.0.0.1:{extra_port}")])
    assert entry["error_code"] == 0, entry
    cluster.pump_until(lambda: brokers_in_metadata(cluster.client(0)).get(1) == ("broker1.example", plain_port),
                       what="broker 0's Metadata to give broker 1's advertised host")
    assert brokers_in_metadata(extra)[1] == ("127.0.0.1", extra_port)

    # removing EXTRA closes it and its connections; the registration loses it
    entry = alter(cluster, 1, "1", [("listeners", SET, "PLAINTEXT://127.0.0.1:0"),
                                    ("advertised.listeners", DELETE, None)])
    assert entry["error_code"] == 0, entry
    cluster.pump_until(lambda: extra.closed, what="the EXTRA connection to be closed")
    assert "EXTRA" not in cluster.brokers[1].bound
    cluster.pump_until(lambda: registration(cluster, 1)["endpoints"] == [f"PLAINTEXT://127.0.0.1:{plain_port}"],
                       what="broker 1 to re-register without EXTRA")
    cluster.pump_until(lambda: brokers_in_metadata(cluster.client(0)).get(1) == ("127.0.0.1", plain_port),
                       what="broker 0 to see broker 1's original endpoint again")
    refused = cluster.wait(net_client.connect(cluster.reactor, "127.0.0.1", extra_port, "late", 5.0)
                           .addCallbacks(lambda p: p, lambda f: f.value), what="a connection attempt to EXTRA")
    assert isinstance(refused, Exception)


def test_listener_changes_kafka_refuses(inprocess_cluster_factory: Any) -> None:
    cluster = inprocess_cluster_factory(1)
    ok_map = PROTOCOLS + ",EXTRA:PLAINTEXT"

    def refused(name: str, ops: list[tuple[str, int, str | None]]) -> str:
        entry = alter(cluster, 0, name, ops)
        assert entry["error_code"] == ErrorCode.INVALID_REQUEST, entry
        return str(entry["error_message"])

    assert "at default cluster level, broker id must be specified: advertised.listeners" in \
        refused("", [("advertised.listeners", SET, "PLAINTEXT://h:1")])
    assert "broker id must be specified: sasl.kerberos.min.time.before.relogin" in \
        refused("", [("sasl.kerberos.min.time.before.relogin", SET, "58000")])
    assert "inter-broker listener PLAINTEXT must stay a listener" in \
        refused("0", [("listeners", SET, "EXTRA://127.0.0.1:0"), ("listener.security.protocol.map", SET, ok_map)])
    assert "inter.broker.listener.name must be a listener name defined in advertised.listeners" in \
        refused("0", [("listeners", SET, "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0"),
                      ("listener.security.protocol.map", SET, ok_map), ("advertised.listeners", SET, "EXTRA://h:1")])
    assert "Listener EXTRA is not in listener.security.protocol.map" in \
        refused("0", [("listeners", SET, "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0")])
    assert "must be equal to or a subset of the ones defined in listeners" in \
        refused("0", [("advertised.listeners", SET, "PLAINTEXT://h:1,OTHER://h:2")])
    assert "Security protocol cannot be updated for existing listener PLAINTEXT" in \
        refused("0", [("listener.security.protocol.map", SET, "PLAINTEXT:SSL")])
    assert "nonroutable meta-address 0.0.0.0" in refused("0", [("advertised.listeners", SET, "PLAINTEXT://0.0.0.0:1")])
    # validate_only checks without applying
    assert alter(cluster, 0, "0", [("listeners", SET, "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0"),
                                   ("listener.security.protocol.map", SET, ok_map)], validate_only=True)["error_code"] == 0
    cluster.advance(1.0)
    assert set(cluster.brokers[0].bound) == {"PLAINTEXT"}
    assert cluster.zk_server.stat(f"{cluster.chroot}/config/brokers/0") is None


def test_kerberos_keys_are_stored_and_described_as_dynamic(inprocess_cluster_factory: Any) -> None:
    cluster = inprocess_cluster_factory(1)
    assert alter(cluster, 0, "0", [("sasl.kerberos.min.time.before.relogin", SET, "58000")])["error_code"] == 0
    cluster.pump_until(lambda: cluster.brokers[0].config["sasl.kerberos.min.time.before.relogin"] == 58000,
                       what="the dynamic config to be applied")
    resp = cluster.client(0).request(DESCRIBE_CONFIGS, 3, {
        "resources": [{"resource_type": BROKER, "resource_name": "0",
                       "configuration_keys": ["sasl.kerberos.min.time.before.relogin", "listeners",
                                              "sasl.enabled.mechanisms", "sasl.jaas.config"]}],
        "include_synonyms": True, "include_documentation": True})
    rows = {c["name"]: c for c in resp["results"][0]["configs"]}
    kerberos = rows["sasl.kerberos.min.time.before.relogin"]
    assert (kerberos["value"], kerberos["config_source"], kerberos["read_only"]) == ("58000", 2, False)
    assert [(s["value"], s["source"]) for s in kerberos["synonyms"]] == [("58000", 2), ("60000", 5)]
    assert "no effect" in kerberos["documentation"]
    assert rows["listeners"]["read_only"] is False and rows["sasl.enabled.mechanisms"]["read_only"] is False
    assert rows["sasl.jaas.config"]["is_sensitive"] is True and rows["sasl.jaas.config"]["value"] is None


def test_sasl_enabled_mechanisms_apply_to_new_connections(inprocess_cluster_factory: Any) -> None:
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret";')
    cluster = inprocess_cluster_factory(1, overrides={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256", "sasl.jaas.config": jaas})

    def offered() -> list[str]:
        client = connect(cluster, bound_port(cluster, 0, "SASL_PLAINTEXT"))
        mechanisms = list(client.request(SASL_HANDSHAKE, 1, {"mechanism": "NONE"})["mechanisms"])
        client.close()
        return mechanisms

    assert offered() == ["PLAIN", "SCRAM-SHA-256"]
    assert alter(cluster, 0, "0", [("sasl.enabled.mechanisms", SET, "SCRAM-SHA-512")])["error_code"] == 0
    cluster.pump_until(lambda: cluster.brokers[0].config["sasl.enabled.mechanisms"] == ["SCRAM-SHA-512"],
                       what="the dynamic config to be applied")
    assert offered() == ["SCRAM-SHA-512"]
    # a mechanism kafkalite does not serve is refused, as at start-up
    entry = alter(cluster, 0, "0", [("sasl.enabled.mechanisms", SET, "GSSAPI")])
    assert entry["error_code"] == ErrorCode.INVALID_REQUEST and "GSSAPI is not supported" in entry["error_message"]


def test_sasl_jaas_config_is_stored_encrypted_and_its_plain_users_apply(inprocess_cluster_factory: Any) -> None:
    """sasl.jaas.config is a per-broker dynamic password: refused without password.encoder.secret
    (as Kafka), stored encrypted, described as sensitive, and its PLAIN users authenticate the next
    connections."""
    def entry(users: str) -> str:
        return ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
                f'password="admin-secret" user_admin="admin-secret" {users};')
    overrides = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                 "sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": entry('user_alice="alice-secret"')}
    plain_only = inprocess_cluster_factory(1, overrides=overrides)
    refused = alter(plain_only, 0, "0", [("sasl.jaas.config", SET, entry('user_bob="bob-secret"'))])
    assert refused["error_code"] == ErrorCode.INVALID_REQUEST
    assert "Password encoder secret not configured" in refused["error_message"]
    plain_only.shutdown()

    cluster = inprocess_cluster_factory(1, overrides={**overrides, "password.encoder.secret": "enc-secret"})

    def authenticates(user: str, password: str) -> bool:
        client = connect(cluster, bound_port(cluster, 0, "SASL_PLAINTEXT"))
        assert client.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        resp = client.request(36, 1, {"auth_bytes": f"\0{user}\0{password}".encode()})
        client.close()
        return resp["error_code"] == 0

    assert authenticates("alice", "alice-secret") and not authenticates("bob", "bob-secret")
    assert alter(cluster, 0, "0", [("sasl.jaas.config", SET, entry('user_bob="bob-secret"'))])["error_code"] == 0
    cluster.pump_until(lambda: authenticates("bob", "bob-secret"), what="bob's PLAIN login to be accepted")
    assert not authenticates("alice", "alice-secret")
    stored = json.loads(cluster.zk_server.dump(f"{cluster.chroot}/config/brokers/0")[
        f"{cluster.chroot}/config/brokers/0"])["config"]["sasl.jaas.config"]
    # the plain text is gone ("bob" alone can occur in the base64 ciphertext: 1 run in ~900)
    assert "user_bob" not in stored and "bob-secret" not in stored
    assert stored.startswith("keyFactoryAlgorithm:PBKDF2WithHmacSHA512,")
    resp = cluster.client(0).request(DESCRIBE_CONFIGS, 3, {
        "resources": [{"resource_type": BROKER, "resource_name": "0", "configuration_keys": ["sasl.jaas.config"]}],
        "include_synonyms": True, "include_documentation": False})
    row = resp["results"][0]["configs"][0]
    assert (row["value"], row["config_source"], row["read_only"], row["is_sensitive"]) == (None, 2, False, True)
    assert [(s["value"], s["source"]) for s in row["synonyms"]] == [(None, 2), (None, 4)]
    # at the cluster default it is refused (per broker only)
    refused = alter(cluster, 0, "", [("sasl.jaas.config", SET, entry(""))])
    assert refused["error_code"] == ErrorCode.INVALID_REQUEST and "broker id must be specified" in refused["error_message"]


def test_a_restarted_broker_listens_as_its_dynamic_config_says(inprocess_cluster_factory: Any) -> None:
    """The dynamic listener config in /config/brokers/<id> is read before the broker binds: after a
    restart it listens on the dynamically added listener and registers it."""
    cluster = inprocess_cluster_factory(2)
    assert alter(cluster, 1, "1", [("listeners", SET, "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0"),
                                   ("listener.security.protocol.map", SET, PROTOCOLS + ",EXTRA:PLAINTEXT")]
                 )["error_code"] == 0
    cluster.pump_until(lambda: "EXTRA" in cluster.brokers[1].bound, what="broker 1 to bind EXTRA")
    cluster.stop_broker(1)
    cluster.start_broker(1)
    assert set(cluster.brokers[1].bound) == {"PLAINTEXT", "EXTRA"}
    extra_port = bound_port(cluster, 1, "EXTRA")
    cluster.pump_until(lambda: f"EXTRA://127.0.0.1:{extra_port}" in registration(cluster, 1)["endpoints"],
                       what="broker 1 to register EXTRA")
    assert brokers_in_metadata(connect(cluster, extra_port)) == {1: ("127.0.0.1", extra_port)}
