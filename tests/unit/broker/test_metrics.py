"""The broker's /metrics and /health: names as the JMX exporter renders Kafka's, values from the
services at scrape time, and the hot-path counters moved by real requests.

A real :class:`KafkaBroker` (the test kit's ``unstarted_broker``: storage in a temp dir, an
in-memory ZooKeeper, a ``task.Clock``) is built but not started: its replica manager, controller, group coordinator and log manager are the
real ones, driven directly, and every scrape is parsed back with prometheus_client's own parser.
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from twisted.web.test.requesthelper import DummyRequest

from kafkalite.broker.dispatcher import Dispatcher
from kafkalite.broker.metrics import LATENCY_BUCKETS_MS, LatencyHistogram, render
from kafkalite.broker.server import KafkaBroker
from kafkalite.broker.status_http import Health, site
from kafkalite.metadata import LeaderAndIsr
from kafkalite.metadata.cache import TopicInfo
from kafkalite.protocol import codec
from kafkalite.records.builder import build_batch
from tests.support.inprocess import unstarted_broker

pytestmark = pytest.mark.unit

TOPIC = "events"


@pytest.fixture
def broker(tmp_path: Path) -> Any:
    b = unstarted_broker(tmp_path / "data")
    b.metadata.topics[TOPIC] = TopicInfo(TOPIC, {0: [1, 2], 1: [2, 1]})
    yield b
    b.log_manager.close()


def scrape(b: KafkaBroker) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the exposition, parsed back: (name, sorted labels) -> value."""
    text = render(b.metrics_registry).decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def lead(b: KafkaBroker, partition: int, isr: tuple[int, ...], epoch: int) -> None:
    b.replica_manager.apply_state(TOPIC, partition, [1, 2], LeaderAndIsr(1, epoch, isr, 1, epoch))


def test_replica_gauges_follow_the_partition_state(broker: KafkaBroker) -> None:
    """Under-replicated, partition and leader counts are computed from the replica manager at
    scrape time: they move when the ISR and the leadership move, with nothing else updating them."""
    before = scrape(broker)
    assert value(before, "kafka_server_replicamanager_partitioncount") == 0
    lead(broker, 0, (1, 2), 0)
    s = scrape(broker)
    assert value(s, "kafka_server_replicamanager_partitioncount") == 1
    assert value(s, "kafka_server_replicamanager_leadercount") == 1
    assert value(s, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    lead(broker, 0, (1,), 1)                           # the follower fell out of the ISR
    s = scrape(broker)
    assert value(s, "kafka_server_replicamanager_underreplicatedpartitions") == 1
    broker.replica_manager.apply_state(TOPIC, 1, [2, 1], LeaderAndIsr(2, 0, (2,), 1, 0))   # we follow p1
    s = scrape(broker)
    assert value(s, "kafka_server_replicamanager_partitioncount") == 2
    assert value(s, "kafka_server_replicamanager_leadercount") == 1
    # a follower's under-replication is its leader's to report
    assert value(s, "kafka_server_replicamanager_underreplicatedpartitions") == 1
    assert value(s, "kafka_log_log_size", topic=TOPIC, partition="0") == 0
    assert value(s, "kafka_log_log_logendoffset", topic=TOPIC, partition="1") == 0


def test_controller_gauges_only_on_the_active_controller(broker: KafkaBroker) -> None:
    """ActiveControllerCount is 1 only while this broker is the controller; OfflinePartitionsCount
    counts partitions whose leader is not a live broker (Kafka reports it on the controller)."""
    broker.metadata.states[(TOPIC, 0)] = LeaderAndIsr(1, 0, (1, 2), 1, 0)
    broker.metadata.states[(TOPIC, 1)] = LeaderAndIsr(-1, 3, (2,), 1, 3)
    s = scrape(broker)
    assert value(s, "kafka_controller_kafkacontroller_activecontrollercount") == 0
    assert value(s, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    broker.controller.active = True
    s = scrape(broker)
    assert value(s, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(s, "kafka_controller_kafkacontroller_offlinepartitionscount") == 1
    assert value(s, "kafka_controller_kafkacontroller_globalpartitioncount") == 2


def test_produce_and_fetch_requests_move_the_meters(broker: KafkaBroker) -> None:
    """A Produce through the dispatcher adds its bytes and its record count (from the offsets,
    no record decoded) to the topic's meters, counts one request with its version and one latency
    observation; a consumer Fetch adds the bytes it returned to BytesOut."""
    lead(broker, 0, (1,), 0)
    batch = bytes(build_batch([(1000, b"k", b"v%d" % i, ()) for i in range(5)]))
    dispatcher = Dispatcher(broker.services(), "PLAINTEXT")
    produce = {"transactional_id": None, "acks": 1, "timeout_ms": 1000,
               "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]}
    frame = bytearray(b"".join(bytes(p) for p in codec.encode_request(0, 8, 7, "t", produce))[4:])
    dispatcher.dispatch(frame, conn=type("Conn", (), {"client_id": None})())
    fetch = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
             "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
             "topics": [{"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                         "fetch_offset": 0, "log_start_offset": -1,
                                                         "partition_max_bytes": 1 << 20}]}]}
    frame = bytearray(b"".join(bytes(p) for p in codec.encode_request(1, 11, 8, "t", fetch))[4:])
    dispatcher.dispatch(frame, conn=type("Conn", (), {"client_id": None})())
    s = scrape(broker)
    assert value(s, "kafka_server_brokertopicmetrics_bytesinpersec_total", topic=TOPIC) == len(batch)
    assert value(s, "kafka_server_brokertopicmetrics_messagesinpersec_total", topic=TOPIC) == 5
    assert value(s, "kafka_server_brokertopicmetrics_bytesoutpersec_total", topic=TOPIC) == len(batch)
    assert value(s, "kafka_network_requestmetrics_requests_total", request="Produce", version="8") == 1
    assert value(s, "kafka_network_requestmetrics_requests_total", request="Fetch", version="11") == 1
    assert value(s, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == 1
    assert value(s, "kafka_network_requestmetrics_totaltimems_bucket", request="Produce", le="+Inf") == 1
    assert value(s, "kafka_log_log_size", topic=TOPIC, partition="0") == len(batch)
    assert value(s, "kafka_log_log_logendoffset", topic=TOPIC, partition="0") == 5


def test_isr_meters_count_successful_isr_writes(broker: KafkaBroker) -> None:
    """IsrShrinks/IsrExpands count the leader's own ISR writes once ZooKeeper has them."""
    broker.metrics.isr_changed((1, 2, 3), (1, 2))
    broker.metrics.isr_changed((1, 2), (1, 2, 3))
    broker.metrics.isr_changed((1, 2), (1,))
    s = scrape(broker)
    assert value(s, "kafka_server_replicamanager_isrshrinkspersec_total") == 2
    assert value(s, "kafka_server_replicamanager_isrexpandspersec_total") == 1


def test_group_counts_come_from_the_coordinator(broker: KafkaBroker) -> None:
    """NumGroups and the per-state counts are the coordinator's groups at scrape time."""
    coordinator = broker.groups.coordinator
    assert value(scrape(broker), "kafka_coordinator_group_groupmetadatamanager_numgroups") == 0
    coordinator._add_group("g1")
    coordinator._add_group("g2")
    s = scrape(broker)
    assert value(s, "kafka_coordinator_group_groupmetadatamanager_numgroups") == 2
    assert value(s, "kafka_coordinator_group_groupmetadatamanager_numgroupsempty") == 2


def test_latency_buckets_are_cumulative() -> None:
    """The histogram's buckets are cumulative with +Inf equal to the count, as Prometheus requires."""
    h = LatencyHistogram()
    for ms in (0.1, 3, 3, 700, 99999):
        h.observe(ms)
    buckets = dict(h.buckets())
    assert buckets["0.5"] == 1 and buckets["5.0"] == 3 and buckets["1000.0"] == 4 and buckets["+Inf"] == 5
    assert len(buckets) == len(LATENCY_BUCKETS_MS) + 1


def _get(resource_site: Any, path: bytes) -> tuple[int, bytes]:
    request = DummyRequest([path])
    request.path = b"/" + path
    body = resource_site.resource.render(request)
    return request.responseCode or 200, body


def test_health_is_503_until_registered_and_lists_offline_dirs(broker: KafkaBroker) -> None:
    """/health: 503 with the reasons while not registered or a log dir is offline, 200 when
    registered on a connected session with every dir online."""
    http = site(broker.metrics_registry, broker.status.health)
    code, body = _get(http, b"health")
    doc = json.loads(body)
    assert code == 503 and doc["registered"] is False and doc["status"] == "unhealthy"
    healthy = Health(1, True, "connected", [])
    http = site(broker.metrics_registry, lambda: healthy)
    code, body = _get(http, b"health")
    assert code == 200 and json.loads(body)["status"] == "ok"
    http = site(broker.metrics_registry, lambda: Health(1, True, "connected", ["/data/a"]))
    code, body = _get(http, b"health")
    assert code == 503 and json.loads(body)["offline_log_dirs"] == ["/data/a"]
    code, body = _get(http, b"metrics")
    assert code == 200 and b"kafka_server_replicamanager_underreplicatedpartitions" in body
    assert _get(http, b"elsewhere")[0] == 404


def test_connections_are_counted_per_listener_and_client_software(broker: KafkaBroker) -> None:
    """KIP-511: the socket-server connections gauge groups open connections by listener and the
    software their ApiVersions v3 named ("unknown" for a client that did not say)."""
    conns = [SimpleNamespace(client_software=("librdkafka", "2.16.0")),
             SimpleNamespace(client_software=("librdkafka", "2.16.0")), SimpleNamespace(client_software=None)]
    broker.factories.append(SimpleNamespace(listener="PLAINTEXT", connections=conns))
    s = scrape(broker)
    name = "kafka_server_socket_server_metrics_connections"
    assert value(s, name, listener="PLAINTEXT", client_software_name="librdkafka", client_software_version="2.16.0") == 2
    assert value(s, name, listener="PLAINTEXT", client_software_name="unknown", client_software_version="unknown") == 1


def test_the_request_log_has_one_line_per_completed_request(broker: KafkaBroker,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """``kafka.request.logger`` at DEBUG writes Kafka's "Completed request" line with the header
    and the times (total = local + remote); at its default level it writes nothing."""
    lead(broker, 0, (1,), 0)
    dispatcher = Dispatcher(broker.services(), "PLAINTEXT")
    produce = {"transactional_id": None, "acks": 1, "timeout_ms": 1000,
               "topic_data": [{"name": TOPIC, "partition_data": [
                   {"index": 0, "records": bytes(build_batch([(1000, b"k", b"v", ())]))}]}]}
    frame = bytes(b"".join(bytes(p) for p in codec.encode_request(0, 8, 41, "probe", produce))[4:])
    conn = type("Conn", (), {"client_id": None, "peer": "127.0.0.1:5555"})()
    dispatcher.dispatch(bytearray(frame), conn=conn)
    assert not [r for r in caplog.records if r.name == "kafka.request.logger"]
    with caplog.at_level("DEBUG", logger="kafka.request.logger"):
        dispatcher.dispatch(bytearray(frame), conn=conn)
    [line] = [r.getMessage() for r in caplog.records if r.name == "kafka.request.logger"]
    assert line.startswith("Completed request:RequestHeader(apiKey=Produce, apiVersion=8, clientId=probe, "
                           "correlationId=41) from connection 127.0.0.1:5555;totalTime:")
    times = dict(item.split(":") for item in line.split(";")[1].split(","))
    assert float(times["totalTime"]) >= float(times["localTime"]) >= 0
    assert abs(float(times["totalTime"]) - float(times["localTime"]) - float(times["remoteTime"])) < 0.002
    assert times["requestSize"] == str(len(frame)) and times["listener"] == "PLAINTEXT"
