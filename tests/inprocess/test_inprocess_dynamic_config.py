"""Dynamic broker configs on in-process brokers, end to end over the wire: IncrementalAlterConfigs
for a BROKER resource changes live behaviour on the brokers it names, without a restart —
``message.max.bytes`` at the cluster default (a produce above it is refused on every broker),
``log.cleaner.threads`` for one broker (its cleaner loops are restarted with the new count; a step
its cleaner refuses is not written), and the
replication throttle rates (the brokers' quota bounds)."""
from __future__ import annotations

from typing import Any

from kafkalite.errors import ErrorCode
from tests.support.inprocess import InProcessCluster, produce_body, records

TOPIC = "dyn"
BROKER, SET, DELETE = 4, 0, 1


def alter(cluster: InProcessCluster, via: int, name: str, ops: list[tuple[str, int, str | None]]) -> dict[str, Any]:
    body = {"resources": [{"resource_type": BROKER, "resource_name": name,
                           "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops]}],
            "validate_only": False}
    return cluster.client(via).request(44, 0, body)["responses"][0]


def produce(cluster: InProcessCluster, size: int) -> int:
    leader = cluster.leader_of(TOPIC, 0)
    resp = cluster.client(leader).request(0, 8, produce_body(TOPIC, {0: records([b"x" * size])}, 1))
    return resp["responses"][0]["partition_responses"][0]["error_code"]


def test_broker_configs_apply_live(inprocess_cluster_factory: Any) -> None:
    cluster = inprocess_cluster_factory(3, overrides={"log.cleaner.enable": "true"})
    cluster.create_topic(TOPIC, assignment={0: [0, 1, 2]})
    assert produce(cluster, 20_000) == 0

    assert alter(cluster, 1, "", [("message.max.bytes", SET, "10000")])["error_code"] == 0
    cluster.pump_until(lambda: all(b.config["message.max.bytes"] == 10000 for b in cluster.brokers.values()),
                       what="every broker to apply the default")
    assert produce(cluster, 20_000) == ErrorCode.MESSAGE_TOO_LARGE
    assert produce(cluster, 1_000) == 0

    b2 = cluster.brokers[2]
    assert len(b2.cleaner_loops) == 1
    assert alter(cluster, 2, "2", [("log.cleaner.threads", SET, "2"),
                                   ("leader.replication.throttled.rate", SET, "1000")])["error_code"] == 0
    cluster.pump_until(lambda: len(b2.cleaner_loops) == 2, what="broker 2's cleaner threads to be restarted")
    # Kafka's LogCleaner.validateReconfiguration: at most double per change, refused before the write
    assert alter(cluster, 2, "2", [("log.cleaner.threads", SET, "5")])["error_code"] == ErrorCode.INVALID_REQUEST
    assert b2.config["log.cleaner.threads"] == 2
    assert b2.quotas.replication.leader.bound == 1000
    assert len(cluster.brokers[1].cleaner_loops) == 1                 # the per-broker config is broker 2's only
    assert cluster.brokers[1].quotas.replication.leader.bound == 2**63 - 1

    refused = alter(cluster, 0, "2", [("log.cleaner.threads", SET, "2")])    # sent to the wrong broker
    assert refused["error_code"] == ErrorCode.INVALID_REQUEST
    assert alter(cluster, 1, "", [("message.max.bytes", DELETE, None)])["error_code"] == 0
    cluster.pump_until(lambda: all(b.config["message.max.bytes"] == 1048588 for b in cluster.brokers.values()),
                       what="the default removed everywhere")
    assert produce(cluster, 20_000) == 0
