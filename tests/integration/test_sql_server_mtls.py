"""``kafkalite-sql-server`` on an SSL-only path to the broker whose listener requires client
certificates (mutual TLS), with its key store and ``ssl.endpoint.identification.algorithm`` at the
top level of ``ksql-server.properties`` as ksqlDB takes them: it replays its command topic (so it
gets healthy), creates a stream's topic and writes INSERT VALUES over that listener. (No persistent
query, so no Spark: the queries' side of the same properties is
tests/unit/sql/test_sql_client_security.py.)"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from kafkalite.client import TopicPartition
from kafkalite.client.consumer import Consumer
from kafkalite.client.security import ClientSecurity
from tests.support.security import Pki, listener_port, make_pki, secure_overrides
from tests.support.sql_rest import ksql_call
from tests.support.sql_server import SqlServerFactory
from tests.support.waiting import wait_for


@pytest.fixture
def mtls(zookeeper: Any, tmp_path: Path) -> Iterator[tuple[Any, Pki]]:
    from tests.support.brokers import Cluster

    pki = make_pki(tmp_path / "pki")
    cluster = Cluster(zookeeper, tmp_path / "cluster", 1, secure_overrides(pki)).start()
    try:
        yield cluster.brokers[0], pki
    finally:
        cluster.stop()


def test_sql_server_over_mutual_tls(mtls: tuple[Any, Pki], sql_server_factory: SqlServerFactory) -> None:
    broker, pki = mtls
    bootstrap = f"127.0.0.1:{listener_port(broker, 'SSL')}"
    security = {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca),
                "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.client_keystore),
                "ssl.endpoint.identification.algorithm": ""}
    server = sql_server_factory(bootstrap, security, timeout=90)       # healthy: command topic replayed
    code, body = ksql_call(server.url + "/ksql", {
        "ksql": "CREATE STREAM readings (id VARCHAR KEY, v INT) WITH (KAFKA_TOPIC='mtls-readings', "
                "VALUE_FORMAT='JSON', PARTITIONS=1); INSERT INTO readings (id, v) VALUES ('r1', 7);"}, timeout=60)
    assert code == 200, body
    assert body[0]["commandStatus"]["status"] == "SUCCESS"
    consumer = Consumer(bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                        security=ClientSecurity.from_properties(security))
    try:
        consumer.assign([TopicPartition("mtls-readings", 0)])
        records = wait_for(lambda: consumer.poll(1000), timeout=60, what="the inserted record over mutual TLS")
    finally:
        consumer.close(autocommit=False)
    assert [(r.key, json.loads(r.value)) for r in records] == [(b"r1", {"V": 7})]
