"""The ``kafkalite`` data source over SASL_SSL (SCRAM-SHA-512, a test CA) in the shared Spark
session: Spark's ``kafka.``-prefixed security options reach the driver's planner and the workers'
clients (the broker answers Metadata with its SASL_SSL addresses, so every fetch goes there too),
``commit_ranges`` commits with the same options, and a wrong password fails the read naming the
failed authentication."""
from __future__ import annotations

import uuid
from typing import Any, Iterator

import pytest

from kafkalite.cli import configs as configs_tool
from kafkalite.client import KafkaClient, TopicPartition
from kafkalite.client.security import ClientSecurity
from spark_integration import commit_ranges
from tests.spark.conftest import new_topic, produce
from tests.support.brokers import Cluster
from tests.support.security import listener_port, make_pki, secure_overrides

USER, PASSWORD = "sparkuser", "spark-secret"


@pytest.fixture(scope="module")
def secured(zookeeper: Any, tmp_path_factory: Any) -> Iterator[tuple[Cluster, str, str]]:
    """A broker with a SASL_SSL listener, the SCRAM user, and (bootstrap, CA path)."""
    base = tmp_path_factory.mktemp("spark-secure")
    pki = make_pki(base / "pki")
    cluster = Cluster(zookeeper, base / "cluster", 1, {**secure_overrides(pki), "num.partitions": "1",
                                                       "offsets.topic.num.partitions": "2"}).start()
    try:
        assert configs_tool.main(["--zookeeper", cluster.zk_connect, "--alter", "--entity-type", "users",
                                  "--entity-name", USER, "--add-config", f"SCRAM-SHA-512=[password={PASSWORD}]"]) == 0
        yield cluster, f"127.0.0.1:{listener_port(cluster.brokers[0], 'SASL_SSL')}", str(pki.ca)
    finally:
        cluster.stop()


def security_options(ca: str, password: str = PASSWORD) -> dict[str, str]:
    return {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                      f'username="{USER}" password="{password}";',
            "kafka.ssl.ca.location": ca}


def test_read_and_commit_over_sasl_ssl(spark: Any, secured: tuple[Cluster, str, str]) -> None:
    """Every record is read over SASL_SSL, the group's commit lands, a wrong password fails."""
    cluster, bootstrap, ca = secured
    topic = new_topic(cluster, 3, "sec")           # set-up over the PLAINTEXT listener
    produce(cluster, topic, ((i % 3, b"%d" % i, b"v%d" % i) for i in range(300)))
    group = f"g-{uuid.uuid4().hex[:6]}"
    options = security_options(ca)
    df = (spark.read.format("kafkalite").option("kafka.bootstrap.servers", bootstrap).options(**options)
          .option("subscribe", topic).option("groupId", group).load())
    rows = df.select("partition", "offset", "value").collect()
    assert sorted(bytes(r["value"]) for r in rows) == sorted(b"v%d" % i for i in range(300))
    assert commit_ranges(spark, df, options=options) == {(topic, p): 100 for p in range(3)}
    sec = ClientSecurity("SASL_SSL", "SCRAM-SHA-512", USER, PASSWORD, ca)
    with KafkaClient(bootstrap, security=sec) as client:
        committed = client.offset_fetch(group, [TopicPartition(topic, p) for p in range(3)])
    assert {tp.partition: o for tp, (o, _meta) in committed.items()} == {0: 100, 1: 100, 2: 100}

    with pytest.raises(Exception, match=f"authentication as {USER} to broker .* failed"):
        (spark.read.format("kafkalite").option("kafka.bootstrap.servers", bootstrap)
         .options(**security_options(ca, "wrong")).option("subscribe", topic).load().count())


def test_sink_writes_over_sasl_ssl(spark: Any, secured: tuple[Cluster, str, str]) -> None:
    """The sink with the same ``kafka.``-prefixed options: an at-least-once write and an
    exactly-once one (transactions: coordinator look-ups, EndTxn) over SASL_SSL, both read back
    there with read_committed; a wrong password fails the write naming the failed authentication."""
    cluster, bootstrap, ca = secured
    topic = new_topic(cluster, 2, "sec-sink")      # set-up over the PLAINTEXT listener
    options = security_options(ca)
    for guarantee, rows in (("at_least_once", range(0, 200)), ("exactly_once", range(200, 300))):
        df = spark.createDataFrame([(f"k{i}", f"v{i}", i % 2) for i in rows], "key string, value string, partition int")
        (df.write.format("kafkalite").mode("append").option("kafka.bootstrap.servers", bootstrap).options(**options)
         .option("topic", topic).option("deliveryGuarantee", guarantee).save())
    back = (spark.read.format("kafkalite").option("kafka.bootstrap.servers", bootstrap).options(**options)
            .option("subscribe", topic).option("kafka.isolation.level", "read_committed").load()
            .selectExpr("cast(key as string) k", "cast(value as string) v", "partition").collect())
    assert sorted((r.k, r.v, r.partition) for r in back) == sorted((f"k{i}", f"v{i}", i % 2) for i in range(300))

    bad = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(Exception, match=f"authentication as {USER} to broker .* failed"):
        (bad.write.format("kafkalite").mode("append").option("kafka.bootstrap.servers", bootstrap)
         .options(**security_options(ca, "wrong")).option("topic", topic).save())
