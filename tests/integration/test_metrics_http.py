"""Metrics and health over HTTP on real broker processes (``metrics.port``).

Three brokers, an RF=3 topic: every broker's /metrics parses as Prometheus text and /health says
200; exactly one broker reports itself the active controller; kill -9 one broker and the
survivors' scrapes show under-replicated partitions (the leaders shrink their ISRs and the
controller takes the dead broker out) while its /health no longer answers; start it again and
the scrapes come back to 0 under-replicated partitions.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from tests.support.waiting import wait_for

TOPIC = "scraped"
PARTITIONS = 6


def scrape(url: str) -> dict[str, float]:
    """Sum of each sample name's values (over labels) in one scrape of ``url``."""
    with urllib.request.urlopen(url, timeout=5) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = resp.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def health(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def under_replicated(brokers) -> float:
    return sum(scrape(b.metrics_url)["kafka_server_replicamanager_underreplicatedpartitions"] for b in brokers)


def test_under_replicated_partitions_while_a_broker_is_down(cluster_factory) -> None:
    """URP is 0 on a healthy cluster, > 0 on the survivors while a broker is down, 0 after it is
    back; the produce meters count what was produced; /health is 200 with registration and a
    connected ZooKeeper session."""
    cluster = cluster_factory(3, {"replica.lag.time.max.ms": "2000"}, metrics=True)
    for b in cluster.brokers:
        wait_for(lambda b=b: health(b.health_url)[0] == 200, 30, f"broker {b.broker_id} healthy")
        code, doc = health(b.health_url)
        assert doc["registered"] is True and doc["zookeeper_session"] == "connected"
        assert doc["offline_log_dirs"] == []
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(600):
        producer.produce(TOPIC, value=b"x" * 100, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    del producer, admin                 # librdkafka clients: gone before the kill below
    wait_for(lambda: under_replicated(cluster.brokers) == 0, 30, "full ISRs")
    scrapes = [scrape(b.metrics_url) for b in cluster.brokers]
    assert sum(s["kafka_controller_kafkacontroller_activecontrollercount"] for s in scrapes) == 1
    assert sum(s["kafka_server_replicamanager_leadercount"] for s in scrapes) >= PARTITIONS
    assert sum(s["kafka_server_brokertopicmetrics_messagesinpersec_total"] for s in scrapes) == 600
    assert sum(s["kafka_server_brokertopicmetrics_bytesinpersec_total"] for s in scrapes) > 600 * 100
    assert all(s["kafka_network_requestmetrics_requests_total"] > 0 for s in scrapes)

    victim = cluster.brokers[-1]
    survivors = cluster.brokers[:-1]
    cluster.kill_broker(victim.broker_id)
    wait_for(lambda: under_replicated(survivors) > 0, 40, "under-replicated partitions on the survivors")
    try:
        urllib.request.urlopen(victim.health_url, timeout=2)
        raise AssertionError("a killed broker's health endpoint answered")
    except (urllib.error.URLError, ConnectionError):
        pass
    cluster.start_broker(victim.broker_id)
    wait_for(lambda: under_replicated(cluster.brokers) == 0, 60, "URP back to 0 after the broker returned")
    assert health(victim.health_url)[0] == 200
    assert sum(scrape(b.metrics_url)["kafka_server_replicamanager_isrexpandspersec_total"]
               for b in survivors) > 0
